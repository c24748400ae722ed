#include "core/lease_mac.h"

#include <openssl/core_names.h>

#include <array>
#include <stdexcept>
#include <string>

namespace anteroom::core {

LeaseMac::LeaseMac(const Hmac& root_key) {
  std::string key = root_key.Mac("anteroom/lease-tag-key/siphash-2-4");
  if (key.size() < 16) throw std::runtime_error("OpenSSL: cannot derive the lease tag key");
  mac_ = EVP_MAC_fetch(nullptr, "SIPHASH", nullptr);
  if (mac_ == nullptr) throw std::runtime_error("OpenSSL: SipHash is not available");
  ctx_ = EVP_MAC_CTX_new(mac_);
  size_t size = kSize;
  std::array<OSSL_PARAM, 2> params = {OSSL_PARAM_construct_size_t(OSSL_MAC_PARAM_SIZE, &size),
                                      OSSL_PARAM_END};
  if (ctx_ == nullptr || EVP_MAC_init(ctx_, reinterpret_cast<const unsigned char*>(key.data()), 16,
                                      params.data()) != 1) {
    throw std::runtime_error("OpenSSL: cannot initialise SipHash");
  }
}

LeaseMac::~LeaseMac() {
  EVP_MAC_CTX_free(ctx_);
  EVP_MAC_free(mac_);
}

bool LeaseMac::Tag(std::initializer_list<std::string_view> parts, unsigned char (&out)[kSize]) {
  // A null key starts again from the key already set (OpenSSL 3).
  if (EVP_MAC_init(ctx_, nullptr, 0, nullptr) != 1) return false;
  for (std::string_view part : parts) {
    if (EVP_MAC_update(ctx_, reinterpret_cast<const unsigned char*>(part.data()), part.size()) !=
        1) {
      return false;
    }
  }
  size_t len = 0;
  return EVP_MAC_final(ctx_, out, &len, kSize) == 1 && len == kSize;
}

}  // namespace anteroom::core
