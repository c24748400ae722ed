#pragma once
// HMAC-SHA256 with a fixed key (OpenSSL EVP_MAC): the admission token's opaque subject, the
// challenge's nonces, and the keys derived from the lease secret (the lease tags themselves are
// SipHash, core/lease_mac.h). Thread-safe after construction: each call works on its own copy
// of the keyed context.

#include <openssl/evp.h>

#include <string>
#include <string_view>

namespace anteroom::core {

class Hmac {
 public:
  // Throws at start-up if OpenSSL cannot set up HMAC-SHA256.
  explicit Hmac(std::string_view key);
  ~Hmac();
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;

  // The raw 32-byte MAC of `data` (empty on an OpenSSL failure, which then matches nothing).
  std::string Mac(std::string_view data) const;

 private:
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* keyed_ = nullptr;
};

}  // namespace anteroom::core
