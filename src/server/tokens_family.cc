// Admission tokens over HTTP: verification (signature, expiry, then revocation).
#include <boost/json.hpp>

#include "common/wire_errors.h"
#include "server/families.h"
#include "server/json_body.h"
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
    o["session"] = claims->session;
    o["exp"] = claims->exp;
  }
  return o;
}

// POST /v1/tokens/verify: {"token"}: signature, expiry, then revocation.
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
}

}  // namespace

void RegisterTokenRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::post, "/v1/tokens/verify", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdVerify},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
