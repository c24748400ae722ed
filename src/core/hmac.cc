#include "core/hmac.h"

#include <openssl/core_names.h>

#include <array>
#include <stdexcept>

namespace anteroom::core {

Hmac::Hmac(std::string_view key) {
  mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (mac_ == nullptr) throw std::runtime_error("OpenSSL: HMAC is not available");
  keyed_ = EVP_MAC_CTX_new(mac_);
  char digest[] = "SHA256";
  std::array<OSSL_PARAM, 2> params = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_END};
  if (keyed_ == nullptr || EVP_MAC_init(keyed_, reinterpret_cast<const unsigned char*>(key.data()),
                                        key.size(), params.data()) != 1) {
    throw std::runtime_error("OpenSSL: cannot initialise HMAC-SHA256");
  }
}

Hmac::~Hmac() {
  EVP_MAC_CTX_free(keyed_);
  EVP_MAC_free(mac_);
}

std::string Hmac::Mac(std::string_view data) const {
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  size_t len = 0;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(keyed_);
  bool ok =
      ctx != nullptr &&
      EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1 &&
      EVP_MAC_final(ctx, out.data(), &len, out.size()) == 1;
  EVP_MAC_CTX_free(ctx);
  if (!ok) return {};
  return std::string(reinterpret_cast<const char*>(out.data()), len);
}

}  // namespace anteroom::core
