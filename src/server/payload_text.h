#pragma once
// The stored text of a job's payload: the JSON its client sent, numbers byte for byte.
//
// Boost.JSON 1.81 reads every number that is not a 64-bit integer as a double, so the text
// serialized back from a parsed payload can differ from what was sent:
// 100000000000000000000001 comes back as 1E23, 0.1000000000000000055511151231257827 as 1E-1,
// -0 as 0, and 1e400 (beyond every double) as Infinity, which is not JSON at all. Payloads are
// therefore stored as text:
//
//   - compact (no whitespace between tokens);
//   - strings and keys as boost::json::serialize writes them (the same characters; escapes such
//     as \u00e9 or \/ may be written differently);
//   - duplicate keys resolved as boost::json::parse resolves them everywhere else in a body: the
//     last value, in the place of the first key;
//   - every number exactly as sent;
//   - a number beyond the range of a double (1e400, -1e400) is refused, as no consumer could
//     read it.
//
// The fast path serializes the parsed payload, which is exact when it holds no double and no 0
// (which may have been sent as -0). Otherwise the payload texts of the whole body are derived
// once from its raw text by a second, event-driven pass of Boost.JSON's own parser
// (basic_parser), which gives each number's source text.

#include <boost/json/value.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/op_status.h"

namespace anteroom::server {

// Where in a body the values stored as text are: the top-level member `key`, or with `each`
// every element of its array; of that, the member `inner` ("": the value itself). Results,
// progress and the payloads of job templates are stored as text too, the same way.
struct TextPlace {
  std::string_view key;
  bool each = false;
  std::string_view inner;
};
inline constexpr TextPlace kOnePayload{.key = "payload", .each = false, .inner = ""};
inline constexpr TextPlace kJobPayloads{.key = "jobs", .each = true, .inner = "payload"};

// The payloads of one body of jobs: {"payload": ...} (one job) or {"jobs": [{"payload": ...},
// ...]} (a batch, as pushes send and fetch answers carry), or the values at another place.
// `body` must already have been parsed by boost::json::parse (with the default options) and
// must outlive this object.
class PayloadTexts {
 public:
  PayloadTexts(std::string_view body, TextPlace place) : body_(body), place_(place) {}
  PayloadTexts(std::string_view body, bool batch)
      : PayloadTexts(body, batch ? kJobPayloads : kOnePayload) {}

  // The text to store for `payload`, the parsed payload of job `index` (0 for a single job).
  // invalid_argument (wire::kPayloadNotFinite) when it holds a number beyond every double.
  OpResult<std::string> Of(const boost::json::value& payload, size_t index);

 private:
  std::string_view body_;
  TextPlace place_;
  std::optional<bool> minus_zero_;                       // whether "-0" is in the body at all
  std::optional<std::vector<std::string>> from_source_;  // derived on first need
};

// Whether `v` holds a number no double holds (1e400 parses as infinity): no consumer could read
// it back, so a payload, result or progress holding one is refused.
bool HoldsNonFinite(const boost::json::value& v);

// The payload texts of `body` derived from its source, one per job in order ("" for a job with
// no payload); nullopt when `body` is not JSON. For a single job, one text. What PayloadTexts
// uses when serializing would not be exact; exposed for tests.
std::optional<std::vector<std::string>> SourcePayloadTexts(std::string_view body, bool batch);
// The same for the values at `place` (one per element of an `each` place, else one).
std::optional<std::vector<std::string>> SourceTexts(std::string_view body, TextPlace place);

}  // namespace anteroom::server
