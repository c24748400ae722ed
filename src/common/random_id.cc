#include "common/random_id.h"

#include <openssl/rand.h>

#include <array>
#include <stdexcept>

#include "common/base64url.h"

namespace anteroom {

std::string RandomBytes(size_t bytes) {
  std::string out(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(bytes)) != 1) {
    throw std::runtime_error("RAND_bytes failed");
  }
  return out;
}

std::string NewRandomId() {
  std::array<unsigned char, 16> raw{};
  // RAND_bytes only fails if the OS entropy source is gone; fall through with what we have
  // would be unsafe, so abort loudly instead.
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) std::abort();
  return Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(raw.data()), raw.size()));
}

uint64_t NewIncarnation() {
  std::array<unsigned char, 8> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) std::abort();
  uint64_t v = 0;
  for (unsigned char b : raw) v = (v << 8) | b;
  v &= (uint64_t{1} << 53) - 1;
  return v == 0 ? 1 : v;
}

}  // namespace anteroom
