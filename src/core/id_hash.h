#pragma once
// A fast seeded hash for session ids (short byte strings). The seed is random per process so
// that clients cannot precompute colliding ids; Boost's flat tables mix the result further.

#include <cstdint>
#include <cstring>
#include <string_view>

namespace anteroom::core {

uint64_t IdHashSeed();

inline uint64_t HashId(std::string_view id) {
  static const uint64_t seed = IdHashSeed();
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = seed ^ (id.size() * kMul);
  const char* p = id.data();
  size_t n = id.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

}  // namespace anteroom::core
