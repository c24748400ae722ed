#pragma once
// What a handler answers, and the one place that turns an OpStatus into a JSON error body.

#include <boost/json/value.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/op_status.h"

namespace anteroom::http {

class LiveStream;

struct Response {
  unsigned status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  // close the connection after this response
  // Set by stream routes: instead of this response, the connection becomes a live stream (a
  // WebSocket when the request asked for the upgrade, else Server-Sent Events), handed over on
  // its own thread once everything answered before it was written.
  std::function<void(std::shared_ptr<LiveStream>)> stream;
};

// A handler answers exactly once, now or later, from any thread.
using Respond = std::function<void(Response)>;

Response JsonReply(const boost::json::value& body, unsigned status = 200);
// {"error": {"code", "message"}} with the status ToWire() gives.
Response ErrorReply(OpStatus status, std::string_view message);

// Adds Retry-After (whole seconds, rounded up) when the result says when to retry.
template <typename T>
Response ErrorReply(const OpResult<T>& result) {
  Response r = ErrorReply(result.status(), result.message());
  if (int64_t ms = result.retry_after_ms(); ms > 0) {
    r.headers.emplace_back("Retry-After", std::to_string((ms + 999) / 1000));
  }
  return r;
}

}  // namespace anteroom::http
