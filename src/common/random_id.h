#pragma once

#include <cstdint>
#include <string>

namespace anteroom {

// An unguessable id: 128 bits from the OS CSPRNG, base64url without padding (22 characters),
// so it passes IsValidName.
std::string NewRandomId();

// `bytes` random bytes from the OS CSPRNG. Throws at start-up use only (secret generation).
std::string RandomBytes(size_t bytes);
// A room incarnation: uniform in [1, 2^53), so JSON, JavaScript and Redis's Lua read it exactly.
uint64_t NewIncarnation();

}  // namespace anteroom
