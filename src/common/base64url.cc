#include "common/base64url.h"

#include <openssl/evp.h>

namespace anteroom {

// OpenSSL does the coding; we only swap the two alphabet characters and the padding.
std::string Base64UrlEncode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+')
      c = '-';
    else if (c == '/')
      c = '_';
  }
  return out;
}

std::optional<std::string> Base64UrlDecode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;
  std::string std64(text);
  // Only the alphabet: OpenSSL's decoder would skip leading and trailing whitespace.
  for (char& c : std64) {
    if (c == '-')
      c = '+';
    else if (c == '_')
      c = '/';
    else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
      return std::nullopt;
    }
  }
  size_t pad = (4 - std64.size() % 4) % 4;
  std64.append(pad, '=');
  std::string out(std64.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(std64.data()),
                          static_cast<int>(std64.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<size_t>(n) - pad);  // EVP_DecodeBlock counts padding as zero bytes
  // Canonical form only: the unused low bits of the last character must be zero, so no two
  // texts decode to the same bytes (a changed signature character never still verifies).
  if (Base64UrlEncode(out) != text) return std::nullopt;
  return out;
}

}  // namespace anteroom
