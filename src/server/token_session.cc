#include "server/token_session.h"

#include "common/wire_errors.h"

namespace anteroom::server {

void SessionOfToken(Services& s, const std::string& room, std::string_view token,
                    std::function<void(OpResult<std::optional<std::string>>)> done) {
  core::TokenCheck check = s.signer.Verify(token, s.clock.NowMs());
  const bool readable =
      check.problem == core::TokenProblem::kNone || check.problem == core::TokenProblem::kExpired;
  if (!readable || check.claims.room != room) {
    return done({OpStatus::kInvalidArgument, std::string(wire::kTokenNotOfRoom)});
  }
  s.backend.AdmissionHolder(room, check.claims.incarnation, check.claims.admission,
                            std::move(done));
}

}  // namespace anteroom::server
