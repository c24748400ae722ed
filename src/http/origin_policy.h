#pragma once
// Which web origins may call anteroom from a browser (CORS), and which may change state (CSRF).
// The router asks it for every request that carries an `Origin` header (docs/security.md,
// "Browsers: CORS and CSRF"):
//
//  - same origin (the Origin's host and port are the request's Host, or the X-Forwarded-Host a
//    trusted proxy passed on): always allowed;
//  - another origin: allowed on the public room routes (Cors::kCorsPublic) when it is listed
//    with `--cors-origin` ("*" lists every origin) or is the origin of a room's `target_url`
//    (the site the room protects, whose pages run anteroom.js); never on the other routes;
//  - not allowed: a request that changes state (any method but GET/HEAD, a WebSocket, a live
//    stream) is refused with 403; a plain GET is answered without CORS headers, so the page
//    cannot read it.
// Requests without Origin (curl, servers, workers) are not browsers' and pass.
//
// Thread-safe: read by every I/O thread; the room origins are replaced as rooms change.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "http/client_address.h"

namespace anteroom::http {

// "scheme://host[:port]" in the form browsers send in `Origin` (RFC 6454): lowercase, the
// default port left out. nullopt for anything else ("null", a path, user info, not http(s)).
std::optional<std::string> NormalizeOrigin(std::string_view text);
// The origin of an absolute http(s) URL (a room's target_url); nullopt for a relative one.
std::optional<std::string> OriginOfUrl(std::string_view url);

struct OriginPolicyOptions {
  std::vector<std::string> cors_origins;  // `--cors-origin`: origins, or "*"
  TrustedProxies trusted_proxies;         // whose X-Forwarded-Host is believed
};

class OriginPolicy {
 public:
  OriginPolicy() = default;
  // Throws std::invalid_argument (a start-up failure) for a --cors-origin that is not an origin.
  explicit OriginPolicy(OriginPolicyOptions options);

  // Replaces the `--cors-origin` list (SIGHUP); throws std::invalid_argument, changing nothing,
  // for one that is not an origin. Any thread.
  void SetCorsOrigins(const std::vector<std::string>& cors_origins);

  // Whether `origin` (as sent) is the request's own origin.
  bool SameOrigin(std::string_view origin, std::string_view host, std::string_view forwarded_host,
                  const boost::asio::ip::address& peer) const;
  // Whether pages of `origin` (as sent) may call the public room routes.
  bool AllowsCrossOrigin(std::string_view origin) const;

  // A room's target origin, or its absence (deleted, relative target_url), on this process's
  // writes; the periodic list (SetRooms) catches up with other processes'.
  void NoteRoom(const std::string& room, std::optional<std::string> target_origin);
  // Every room's target origin, from a full list of rooms.
  void SetRooms(std::map<std::string, std::string> target_origins);

 private:
  // `--cors-origin`, parsed.
  struct Listed {
    bool any = false;  // "*"
    std::vector<std::string> origins;
  };
  static Listed ParseListed(const std::vector<std::string>& cors_origins);

  TrustedProxies trusted_;
  mutable std::mutex mu_;
  Listed listed_;                                    // guarded by mu_
  std::map<std::string, std::string> room_origins_;  // guarded by mu_: room -> origin
  std::multiset<std::string> origins_;               // guarded by mu_: the values above
};

}  // namespace anteroom::http
