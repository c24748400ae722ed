#pragma once
// The one naming rule for rooms, sessions (and later queues, workers, dedupe keys):
// 1-128 bytes of [A-Za-z0-9._:-].

#include <cstddef>
#include <string_view>

namespace anteroom {

inline constexpr size_t kMaxNameBytes = 128;
// A session id is its session's only credential: one a client names itself must be as hard to
// guess as the server's (128 random bits in base64url: 22 characters). Shorter ones are for
// apps that name sessions after their users, server-side, with the admin key.
inline constexpr size_t kMinClientSessionIdBytes = 22;

bool IsValidName(std::string_view name);

}  // namespace anteroom
