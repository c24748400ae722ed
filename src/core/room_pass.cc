#include "core/room_pass.h"

#include <openssl/evp.h>

namespace anteroom::core {

const char* ToString(PassKind kind) { return kind == PassKind::kFront ? "front" : "admit"; }

std::optional<PassKind> ParsePassKind(std::string_view name) {
  if (name == "admit") return PassKind::kAdmit;
  if (name == "front") return PassKind::kFront;
  return std::nullopt;
}

std::string PassDigest(std::string_view code) {
  std::string out(kPassDigestBytes, '\0');
  unsigned int n = 0;
  if (EVP_Digest(code.data(), code.size(), reinterpret_cast<unsigned char*>(out.data()), &n,
                 EVP_sha256(), nullptr) != 1 ||
      n != kPassDigestBytes) {
    return {};  // matches no stored digest
  }
  return out;
}

std::string_view PassIdOfCode(std::string_view code) {
  size_t dot = code.find('.');
  return dot == std::string_view::npos ? std::string_view() : code.substr(0, dot);
}

}  // namespace anteroom::core
