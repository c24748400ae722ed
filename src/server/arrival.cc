#include "server/arrival.h"

namespace anteroom::server {

ArrivalRead ReadArrival(const Request& req, const Services& services, std::string_view room,
                        std::string_view session, const std::string* nonce,
                        const std::string* solution) {
  ArrivalRead out;
  out.arrival.client =
      ClientKey(ClientAddress(req.peer, req.forwarded_for, services.trusted_proxies));
  if (nonce == nullptr && solution == nullptr) return out;
  if (nonce == nullptr || solution == nullptr) {
    out.proof_problem = "send both 'challenge' and 'solution'";
  } else if (services.puzzles == nullptr) {
    out.proof_problem = "this server hands out no challenges";
  } else {
    core::PowPuzzles::Proof proof =
        services.puzzles->Check(room, session, *nonce, *solution, services.clock.NowMs());
    if (proof.problem == core::PowPuzzles::Problem::kNone) {
      out.arrival.proof_bits = proof.bits;
      out.proof_problem = "the solution shows " + std::to_string(proof.bits) + " bits";
    } else {
      out.proof_problem = core::ToString(proof.problem);
    }
  }
  return out;
}

Response JoinRefusal(const OpResult<core::SessionView>& refused, std::string_view room,
                     std::string_view session, const std::string& proof_problem) {
  if (refused.status() != OpStatus::kChallengeRequired) return ErrorReply(refused);
  std::string message = refused.message() + ": GET /v1/rooms/" + std::string(room) +
                        "/challenge?session=" + std::string(session) +
                        ", find a solution, and send the nonce as 'challenge' and the solution "
                        "as 'solution' (check: body fields; /ws and /events: query parameters)";
  if (!proof_problem.empty()) message += "; the proof sent does not do: " + proof_problem;
  return ErrorReply(OpStatus::kChallengeRequired, message);
}

}  // namespace anteroom::server
