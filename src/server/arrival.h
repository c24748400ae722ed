#pragma once
// What a join brings to the room's rules (core::Arrival): the client, by the rule of
// client_address.h, and the proof of work a room with a challenge asks for (core/challenge.h),
// sent as `challenge` and `solution` in a check's body or a live channel's query.

#include <optional>
#include <string>
#include <string_view>

#include "core/room_types.h"
#include "server/families.h"

namespace anteroom::server {

struct ArrivalRead {
  core::Arrival arrival;
  // Why the proof that was sent counts for nothing ("" when none was sent, or it counts): told
  // to the client when the room then refuses the join.
  std::string proof_problem;
};

ArrivalRead ReadArrival(const Request& req, const Services& services, std::string_view room,
                        std::string_view session, const std::string* nonce,
                        const std::string* solution);

// The answer to a join the backend refused: its error (with Retry-After for per-client
// limits); for a missing or refused proof, also what to do about it.
Response JoinRefusal(const OpResult<core::SessionView>& refused, std::string_view room,
                     std::string_view session, const std::string& proof_problem);

}  // namespace anteroom::server
