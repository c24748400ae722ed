#pragma once
// Proof-of-work puzzles for joining a room whose `challenge` setting is on (docs/api.md). No
// I/O and no state: a puzzle is a nonce the server checks by itself, so handing out puzzles
// keeps no table and any process sharing the secret verifies any other's.
//
//   nonce    = base64url(expires_ms: 8 bytes big-endian | random: 12 bytes | tag: 16 bytes)
//   tag      = HMAC-SHA256(key, "anteroom/pow/1" 0 room 0 session 0 expires_ms | random)[0, 16)
//   solution = 1-64 bytes of [A-Za-z0-9._:-] such that SHA-256(nonce || solution), the nonce
//              as its 48 ASCII characters, starts with `difficulty` zero bits.
//
// Replays: the tag binds the puzzle to one room and one session id, and a session holds at
// most one place at a time, so a solved puzzle buys at most one place: replaying it for other
// sessions fails the tag, and the session it names can only rejoin (after losing its place)
// until the puzzle expires. Checking a proof is O(1): one HMAC and one SHA-256.

#include <cstdint>
#include <string>
#include <string_view>

#include "core/hmac.h"

namespace anteroom::core {

// Leading zero bits of a digest.
int LeadingZeroBits(std::string_view digest);
// SHA-256 (OpenSSL EVP), 32 raw bytes.
std::string Sha256(std::string_view data);

class PowPuzzles {
 public:
  static constexpr int64_t kLifetimeMs = 600'000;  // time to solve it, and to rejoin with it
  static constexpr size_t kRandomBytes = 12;
  static constexpr size_t kMaxSolutionBytes = 64;

  // Throws at start-up if OpenSSL cannot set up HMAC-SHA256.
  explicit PowPuzzles(std::string_view secret);

  struct Puzzle {
    std::string nonce;
    int64_t expires_ms = 0;
  };
  // `random`: kRandomBytes fresh random bytes (an argument, so tests are repeatable).
  Puzzle Issue(std::string_view room, std::string_view session, int64_t now_ms,
               std::string_view random) const;

  enum class Problem { kNone, kMalformed, kForged, kExpired };
  struct Proof {
    Problem problem = Problem::kNone;
    int bits = 0;  // leading zero bits of SHA-256(nonce || solution); 0 unless kNone
  };
  // Whether `nonce` was issued by this secret for this room and session and is still valid,
  // and how much work `solution` shows.
  Proof Check(std::string_view room, std::string_view session, std::string_view nonce,
              std::string_view solution, int64_t now_ms) const;

 private:
  std::string Tag(std::string_view room, std::string_view session,
                  std::string_view expires_and_random) const;

  Hmac hmac_;
};

const char* ToString(PowPuzzles::Problem problem);

}  // namespace anteroom::core
