#pragma once
// The preamble every handler shares: the path parameters that are names checked against the
// naming rule, then the JSON body parsed (into an arena that starts on the stack, so small
// bodies parse without touching the heap). A handler begins with one of
//
//   if (auto bad = BadNames(req, {wire::kQueueNames})) return respond(std::move(*bad));
//
//   JsonRequest in(req, {wire::kQueueNames}, BodyRule::kRequired);
//   if (!in.ok()) return respond(in.Error());
//
// and so answers a 400 before the backend is called.

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/object.hpp>

#include <initializer_list>
#include <optional>
#include <string_view>

#include "common/op_status.h"
#include "server/http_names.h"

namespace anteroom::server {

// `what[i]` says what `req.params[i]` names ("room names", wire_errors.h); the first parameter
// that breaks the naming rule is answered as a 400, nullopt when all follow it.
std::optional<Response> BadNames(const Request& req, std::initializer_list<std::string_view> what);

// A bearer credential a GET carries (/challenge, /ws, /events): a session id or an admission
// token. Where a client may put it, first found counts:
//   1. the header `Anteroom-Session` / `Anteroom-Token`;
//   2. on a WebSocket upgrade (a browser cannot give it headers), an offered subprotocol
//      `anteroom.session.B64` / `anteroom.token.B64`, B64 the base64url of the value, beside
//      `anteroom`, the one the server answers (as Kubernetes carries bearer tokens);
//   3. the query `?session=` / `?token=`, which works but lands in proxy and CDN access logs.
// nullopt when none gives one; a 400 when a subprotocol's value is not base64url.
enum class Credential { kSession, kToken };
// The subprotocol offers of case 2, each followed by B64.
inline constexpr std::string_view kSessionSubprotocol = "anteroom.session.";
inline constexpr std::string_view kTokenSubprotocol = "anteroom.token.";
OpResult<std::optional<std::string>> CredentialOf(const Request& req, Credential which);

// The session a GET names (CredentialOf), or a new random id when it names none (`*created`
// then true). A 400 when the name breaks the naming rule, or is too short to be a client's
// (SessionIdAllowed).
OpResult<std::string> SessionFromRequest(const Request& req, bool* created = nullptr);

// Whether a request may name session `id` (valid by the naming rule): a client's must carry 128
// bits (common/names.h, kMinClientSessionIdBytes); a request with the admin key may name any.
OpResult<Done> SessionIdAllowed(const Request& req, std::string_view id);

enum class BodyRule : bool {
  kRequired,      // an empty body is not JSON
  kEmptyIsEmpty,  // an empty body reads as {}
};

// A request with a JSON object body. Not movable: the body lives in the object's arena, so
// copy out what outlives the handler's first call.
class JsonRequest {
 public:
  JsonRequest(const Request& req, std::initializer_list<std::string_view> names, BodyRule rule);
  JsonRequest(const JsonRequest&) = delete;
  JsonRequest& operator=(const JsonRequest&) = delete;

  bool ok() const { return !error_ && body_.ok(); }
  // The 400 to answer when !ok().
  Response Error() const;
  const boost::json::object& body() const { return *body_; }

 private:
  std::optional<Response> error_;
  unsigned char scratch_[4096];
  boost::json::monotonic_resource arena_;
  OpResult<boost::json::object> body_;
};

}  // namespace anteroom::server
