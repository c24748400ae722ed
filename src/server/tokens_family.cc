// Admission tokens over HTTP: verification (signature, expiry, then revocation) and the public
// keys that verify them offline (JWKS).
#include <boost/json.hpp>

#include "common/wire_errors.h"
#include "http/json_body.h"
#include "server/families.h"
#include "server/preamble.h"

namespace anteroom::server {

namespace json = boost::json;

namespace {
json::object Invalid(std::string_view reason, const core::TokenClaims* claims) {
  json::object o{{"valid", false},
                 {"reason", reason},
                 {"room", nullptr},
                 {"session", nullptr},
                 {"exp", nullptr}};
  if (claims != nullptr) {
    o["room"] = claims->room;
    o["exp"] = claims->exp;
  }
  return o;
}

// GET /.well-known/jwks.json: public and cacheable (an app refetches it on an unknown kid).
void CmdJwks(Services& s, const Request&, Respond respond) {
  Response r;
  r.body = s.signer.Jwks();
  r.content_type = "application/jwk-set+json";
  r.headers.emplace_back("Cache-Control", "public, max-age=300");
  respond(std::move(r));
}

// POST /v1/tokens/verify: {"token"}: the signature and expiry, then whether the admission is
// still held by a session of the same room incarnation (every end of an admission revokes its
// tokens). The session that holds it is named to the admin only: a session id is the
// session's credential, and tokens travel in URLs, logs and Referer headers (apps get `sub`).
void CmdVerify(Services& s, const Request& req, Respond respond) {
  JsonRequest in(req, {}, BodyRule::kRequired);
  if (!in.ok()) return respond(in.Error());
  auto token = ReadString(in.body(), "token");
  if (!token.ok()) return respond(ErrorReply(token));
  if (!*token) return respond(ErrorReply(OpStatus::kInvalidArgument, wire::FieldRequired("token")));

  core::TokenCheck check = s.signer.Verify(**token, s.clock.NowMs());
  if (check.problem == core::TokenProblem::kMalformed ||
      check.problem == core::TokenProblem::kBadSignature) {
    return respond(JsonReply(Invalid(core::ToString(check.problem), nullptr)));
  }
  if (check.problem == core::TokenProblem::kExpired) {
    return respond(JsonReply(Invalid("expired", &check.claims)));
  }
  core::TokenClaims claims = check.claims;
  s.backend.AdmissionHolder(
      claims.room, claims.incarnation, claims.admission,
      [claims, admin = req.admin,
       respond = std::move(respond)](OpResult<std::optional<std::string>> holder) {
        if (!holder.ok()) {
          if (holder.status() == OpStatus::kUnknownRoom) {
            return respond(JsonReply(Invalid("unknown_room", &claims)));
          }
          return respond(ErrorReply(holder));
        }
        if (!*holder) return respond(JsonReply(Invalid("revoked", &claims)));
        respond(JsonReply(json::object{{"valid", true},
                                       {"room", claims.room},
                                       {"session", admin ? json::value(**holder) : nullptr},
                                       {"sub", claims.subject},
                                       {"exp", claims.exp}}));
      });
}

}  // namespace

void RegisterTokenRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::post, "/v1/tokens/verify", kPublic, kDefaultBodyLimit, kCorsPublic, kPlain, CmdVerify},
      {verb::get, "/.well-known/jwks.json", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdJwks},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
