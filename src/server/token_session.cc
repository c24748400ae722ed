#include "server/token_session.h"

#include "common/wire_errors.h"

namespace anteroom::server {

std::optional<core::TokenClaims> ClaimsOfRoom(const core::TokenSigner& signer,
                                              std::string_view token, std::string_view room,
                                              int64_t now_ms) {
  core::TokenCheck check = signer.Verify(token, now_ms);
  const bool readable =
      check.problem == core::TokenProblem::kNone || check.problem == core::TokenProblem::kExpired;
  if (!readable || check.claims.room != room) return std::nullopt;
  return check.claims;
}

void SessionOfToken(Services& s, const std::string& room, std::string_view token,
                    std::function<void(OpResult<std::optional<std::string>>)> done) {
  std::optional<core::TokenClaims> claims = ClaimsOfRoom(s.signer, token, room, s.clock.NowMs());
  if (!claims) return done({OpStatus::kInvalidArgument, std::string(wire::kTokenNotOfRoom)});
  s.backend.AdmissionHolder(room, claims->incarnation, claims->admission, std::move(done));
}

}  // namespace anteroom::server
