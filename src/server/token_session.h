#pragma once
// The session an admission token stands for, for a client that holds the token but must not
// learn the session id: anteroom.js stay() on a protected page, handed the token by the waiting
// page (a query parameter or a cookie), keeps the admission alive with it. The session id is the
// session's whole credential (it can leave, or check in for fresh tokens, forever), and tokens
// travel in URLs, logs and Referer headers, so nothing answered to a token names the session:
// the status objects say "session": null (HideSession in session_json.h for the live channel).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/op_status.h"
#include "server/families.h"

namespace anteroom::server {

// The claims of `token` when it is an admission token of `room` whose signature verifies,
// expired or not (whether its admission is still held is the room's to say); nullopt else.
std::optional<core::TokenClaims> ClaimsOfRoom(const core::TokenSigner& signer,
                                              std::string_view token, std::string_view room,
                                              int64_t now_ms);

// The session that holds the admission of `token`, a token of `room` whose signature verifies
// (expired or not: the room, not the clock, decides, as at the gate); nullopt when nobody holds
// it any more; invalid_argument for a token that is not one of this room's.
void SessionOfToken(Services& s, const std::string& room, std::string_view token,
                    std::function<void(OpResult<std::optional<std::string>>)> done);

}  // namespace anteroom::server
