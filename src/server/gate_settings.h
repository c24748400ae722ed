#pragma once
// A room's gate settings (docs/gate.md): how the forward-auth gate in front of a site treats
// the room. Set with the room (PUT /v1/rooms/{room} {"gate": {...}}), kept by the backends as
// one opaque JSON text (core::RoomConfig::gate), read back here:
//
//   "gate": {
//     "cookie": "anteroom_shop",            the cookie that carries the admission (default:
//                                            anteroom_{room}); [A-Za-z0-9_-], 1-64
//     "cookie_domain": "shop.example",      Domain= of the cookie (default: none, host-only)
//     "hosts": ["shop.example"],            hosts `return` may name besides target_url's
//     "bypass": {
//       "paths": ["/static/", "*.css"],     globs on the path (fnmatch, '*' crosses '/'); one
//                                            that ends in '/' is a prefix
//       "headers": {"User-Agent": "*Googlebot*"}   a header whose value matches the glob
//                                            (case-insensitive)
//     }
//   }
//
// Requests that match a bypass rule pass the gate without a slot. Every list is bounded, so a
// room's rules cost a bounded time per gated request.

#include <boost/json/value.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/op_status.h"

namespace anteroom::server {

inline constexpr size_t kMaxGatePaths = 64;
inline constexpr size_t kMaxGateHeaders = 16;
inline constexpr size_t kMaxGateHosts = 32;
inline constexpr size_t kMaxGatePatternBytes = 256;

struct GateSettings {
  std::string cookie;         // empty: anteroom_{room}
  std::string cookie_domain;  // empty: host-only
  std::vector<std::string> hosts;
  std::vector<std::string> bypass_paths;
  std::vector<std::pair<std::string, std::string>> bypass_headers;  // name (lowercase), glob

  // The cookie's name for `room`.
  std::string CookieName(std::string_view room) const;
  // Whether a request for `path` (no query) passes without a slot by a path rule.
  bool BypassesPath(std::string_view path) const;
  // Whether a header `name: value` of the request passes it by a header rule.
  bool BypassesHeader(std::string_view name, std::string_view value) const;
  bool HasHeaderRules() const { return !bypass_headers.empty(); }
};

// The settings as PUT sends them: the canonical text to store (members in a fixed order), or
// invalid_argument naming what is wrong.
OpResult<std::string> CanonicalGateText(const boost::json::value& gate);
// The stored text read back; nullptr for text that does not read (never stored by this code).
std::shared_ptr<const GateSettings> ParseGateText(std::string_view text);
// The stored text as a JSON value for answers (null when it does not read).
boost::json::value GateJson(std::string_view text);

}  // namespace anteroom::server
