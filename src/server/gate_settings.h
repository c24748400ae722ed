#pragma once
// A room's gate settings (docs/gate.md): how the forward-auth gate in front of a site treats
// the room. Set with the room (PUT /v1/rooms/{room} {"gate": {...}}), kept by the backends as
// one opaque JSON text (core::RoomConfig::gate), read back here:
//
//   "gate": {
//     "cookie": "anteroom_shop",            the cookie that carries the admission (default:
//                                            see CookieName); [A-Za-z0-9_-], 1-64
//     "cookie_domain": "shop.example",      Domain= of the cookie (default: none, host-only)
//     "hosts": ["shop.example"],            hosts `return` may name besides target_url's
//     "bypass": {
//       "paths": ["/static/", "*.css"],     globs on the decoded path (fnmatch, '*' crosses
//                                            '/'); one that ends in '/' is a prefix
//       "headers": {"User-Agent": "*Googlebot*",   a header whose value matches the glob
//                   "X-Partner-Token": "s3cr3t"}   (case-insensitive); a value with no glob
//                                            character is a secret: kept as its SHA-256 only
//                                            ("sha256:HEX", which PUT also takes) and compared
//                                            exactly, in constant time
//     }
//   }
//
// Requests that match a bypass rule pass the gate without a slot. A path rule applies only to
// a path already in its normal form (NormalPath): the origin behind the proxy resolves dot
// segments and percent-escapes itself, so a path the gate would read one way and the origin
// another is gated. Every list is bounded, so a room's rules cost a bounded time per gated
// request. The settings are the admin's: the public room object never shows them.

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

// The path as the origin will serve it, when `raw` (a request's path, as sent, without its
// query) is already in the one form every server reads the same way: percent-escapes decoded,
// and nothing that a server may resolve, split or cut differently (a "." or ".." segment, an
// escaped dot, slash or backslash, a backslash, '#', '?', ';' path parameters, a control byte, an
// empty segment, a malformed escape). nullopt for any other path: it is never bypassed.
std::optional<std::string> NormalPath(std::string_view raw);

struct GateSettings {
  std::string cookie;         // empty: the default name (CookieName)
  std::string cookie_domain;  // empty: host-only
  std::vector<std::string> hosts;
  std::vector<std::string> bypass_paths;
  std::vector<std::pair<std::string, std::string>> bypass_headers;  // name (lowercase), glob
  // name (lowercase), SHA-256 of the exact value (32 raw bytes)
  std::vector<std::pair<std::string, std::string>> bypass_header_digests;

  // The cookie's name for `room`: `cookie` when set; else anteroom_ and the room name encoded
  // one-to-one into cookie-name characters ('_' -> "__", '.' -> "_d", ':' -> "_c", so rooms
  // x.y, x_y and x:y never share a cookie), prefixed with __Host- over https when no
  // cookie_domain is set (a sibling subdomain cannot set or shadow such a cookie).
  std::string CookieName(std::string_view room, bool secure) const;
  // Whether a request for `raw_path` (as sent, no query) passes without a slot by a path rule.
  bool BypassesPath(std::string_view raw_path) const;
  // Whether a header `name: value` of the request passes it by a header rule.
  bool BypassesHeader(std::string_view name, std::string_view value) const;
  bool HasHeaderRules() const { return !bypass_headers.empty() || !bypass_header_digests.empty(); }
};

// The settings as PUT sends them: the canonical text to store (members in a fixed order), or
// invalid_argument naming what is wrong.
OpResult<std::string> CanonicalGateText(const boost::json::value& gate);
// The stored text read back; nullptr for text that does not read (never stored by this code).
std::shared_ptr<const GateSettings> ParseGateText(std::string_view text);
// The stored text as a JSON value for answers to the admin (null when it does not read).
boost::json::value GateJson(std::string_view text);

}  // namespace anteroom::server
