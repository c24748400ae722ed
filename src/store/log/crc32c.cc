#include "store/log/crc32c.h"

#include <boost/crc.hpp>

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace anteroom::store::log {

namespace {

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Hardware(std::string_view data, uint32_t crc) {
  uint64_t c = ~crc;
  const char* p = data.data();
  size_t n = data.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = _mm_crc32_u8(c32, static_cast<uint8_t>(*p++));
    --n;
  }
  return ~c32;
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t Crc32cPortable(std::string_view data, uint32_t crc) {
  // Started from ~crc with no final xor, then inverted: so calls chain like the hardware path.
  // Boost keeps a reflected algorithm's register unreflected: hand it the register reversed.
  uint32_t reg = ~crc, reversed = 0;
  for (int bit = 0; bit < 32; ++bit) reversed |= ((reg >> bit) & 1u) << (31 - bit);
  boost::crc_optimal<32, 0x1EDC6F41, 0, 0, true, true> c(reversed);
  c.process_bytes(data.data(), data.size());
  return ~c.checksum();
}

uint32_t Crc32c(std::string_view data, uint32_t crc) {
#if defined(__x86_64__)
  if (HasSse42()) return Hardware(data, crc);
#endif
  return Crc32cPortable(data, crc);
}

}  // namespace anteroom::store::log
