// Admission tokens over HTTP: verification (signature, expiry, then revocation).
#include <boost/json.hpp>

#include "server/families.h"
#include "server/json_body.h"

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
    o["session"] = claims->session;
    o["exp"] = claims->exp;
  }
  return o;
}
}  // namespace

void RegisterTokenRoutes(Router& router, Services& s) {
  router.Add(http::verb::post, "/v1/tokens/verify", [&s](const Request& req, Respond respond) {
    auto body = ParseObject(req.body, false);
    if (!body.ok()) return respond(ErrorReply(body));
    auto token = ReadString(*body, "token");
    if (!token.ok()) return respond(ErrorReply(token));
    if (!*token) return respond(ErrorReply(OpStatus::kInvalidArgument, "'token' is required"));

    core::TokenCheck check = s.signer.Verify(**token, s.clock.NowMs());
    if (check.problem == core::TokenProblem::kMalformed ||
        check.problem == core::TokenProblem::kBadSignature) {
      return respond(JsonReply(Invalid(core::ToString(check.problem), nullptr)));
    }
    if (check.problem == core::TokenProblem::kExpired) {
      return respond(JsonReply(Invalid("expired", &check.claims)));
    }
    core::TokenClaims claims = check.claims;
    s.backend.IsRevoked(claims.room, claims.session, claims.admission,
                        [claims, respond = std::move(respond)](OpResult<bool> revoked) {
                          if (!revoked.ok()) {
                            if (revoked.status() == OpStatus::kUnknownRoom) {
                              return respond(JsonReply(Invalid("unknown_room", &claims)));
                            }
                            return respond(ErrorReply(revoked));
                          }
                          if (*revoked) return respond(JsonReply(Invalid("revoked", &claims)));
                          respond(JsonReply(json::object{{"valid", true},
                                                         {"room", claims.room},
                                                         {"session", claims.session},
                                                         {"exp", claims.exp}}));
                        });
  });
}

}  // namespace anteroom::server
