#include "server/arrival.h"

#include "common/wire_errors.h"

namespace anteroom::server {

ArrivalRead ReadArrival(const Request& req, const Services& services, std::string_view room,
                        std::string_view session, const std::string* nonce,
                        const std::string* solution) {
  ArrivalRead out;
  out.arrival.client =
      ClientKey(ClientAddress(req.peer, req.forwarded_for, services.trusted_proxies));
  if (nonce == nullptr && solution == nullptr) return out;
  if (nonce == nullptr || solution == nullptr) {
    out.proof_problem = wire::kProofHalf;
  } else if (services.puzzles == nullptr) {
    out.proof_problem = wire::kNoChallenges;
  } else {
    core::PowPuzzles::Proof proof =
        services.puzzles->Check(room, session, *nonce, *solution, services.clock.NowMs());
    if (proof.problem == core::PowPuzzles::Problem::kNone) {
      out.arrival.proof_bits = proof.bits;
      out.proof_problem = wire::ProofBits(proof.bits);
    } else {
      out.proof_problem = core::ToString(proof.problem);
    }
  }
  return out;
}

Response JoinRefusal(const OpResult<core::SessionView>& refused, std::string_view room,
                     std::string_view session, const std::string& proof_problem) {
  if (refused.status() != OpStatus::kChallengeRequired) return ErrorReply(refused);
  return ErrorReply(OpStatus::kChallengeRequired,
                    wire::ChallengeHowTo(refused.message(), room, session, proof_problem));
}

}  // namespace anteroom::server
