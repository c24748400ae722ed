#pragma once
// Passes: codes that let their holder past a room's line (staff, press, pre-registered buyers).
// A pass is minted by the backend (a random secret, shown once), and the room keeps its id and
// the SHA-256 of its code, never the code. Redeemed with a check (Arrival::pass):
//  - kAdmit: admitted at once when a slot is free (holders < capacity, whatever the queueing
//    method, pre-queue or brake), else first in line;
//  - kFront: first in line (behind those who came first with a pass).
// "First in line" is the room's front line: its members are admitted before the line, in the
// order they redeemed. A pass never lets a room exceed its capacity. Each redemption takes one
// use; a code that is wrong, used up, expired or revoked is refused and changes nothing.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace anteroom::core {

enum class PassKind : uint8_t { kAdmit, kFront };
const char* ToString(PassKind kind);
std::optional<PassKind> ParsePassKind(std::string_view name);

inline constexpr int64_t kMaxPassesPerMint = 1'000;
inline constexpr int64_t kMaxPassUses = 1'000'000;
inline constexpr size_t kMaxPassesPerRoom = 100'000;
inline constexpr size_t kPassDigestBytes = 32;  // SHA-256
inline constexpr size_t kMaxPassCodeBytes = 128;

struct RoomPass {
  std::string id;      // a name by the naming rule; the code starts with it (PassIdOfCode)
  std::string digest;  // PassDigest(code): kPassDigestBytes raw bytes
  PassKind kind = PassKind::kAdmit;
  int64_t uses = 1;  // as minted
  int64_t uses_left = 1;
  std::optional<int64_t> expires_at;  // ms since the epoch; nullopt: never
  int64_t created_at = 0;
  bool operator==(const RoomPass&) const = default;
};

// What POST /v1/rooms/{room}/passes asks for.
struct PassMint {
  PassKind kind = PassKind::kAdmit;
  int64_t uses = 1;
  std::optional<int64_t> expires_at;
  int64_t count = 1;
};

// A pass as minted: its code is shown this once and kept nowhere.
struct MintedPass {
  RoomPass pass;
  std::string code;
};

// A code is "<id>.<secret>": the id finds the pass, the digest of the whole code proves it.
std::string PassDigest(std::string_view code);
std::string_view PassIdOfCode(std::string_view code);  // empty when the code has no '.'

}  // namespace anteroom::core
