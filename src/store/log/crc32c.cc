#include "store/log/crc32c.h"

#include <boost/crc.hpp>

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace anteroom::store::log {

namespace {

uint32_t Portable(std::string_view data, uint32_t crc) {
  boost::crc_optimal<32, 0x1EDC6F41, 0, 0, true, true> c(~crc);
  c.process_bytes(data.data(), data.size());
  return ~c.checksum() ^ 0;  // crc_optimal with init ~crc and no final xor: undo to chain
}

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

uint32_t Crc32c(std::string_view data, uint32_t crc) {
#if defined(__x86_64__)
  if (HasSse42()) return Hardware(data, crc);
#endif
  return Portable(data, crc);
}

}  // namespace anteroom::store::log
