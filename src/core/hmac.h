#pragma once
// HMAC-SHA256 with a fixed key (OpenSSL EVP_MAC), for lease tags. Thread-safe after
// construction: each call works on its own copy of the keyed context.

#include <openssl/evp.h>

#include <initializer_list>
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
  friend class HmacContext;
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* keyed_ = nullptr;
};

// The same MAC for one thread (or one lock holder) at a time: it re-keys one context instead
// of copying one per call, so a MAC costs no allocation (lease tags are made and checked for
// every job delivered and acked).
class HmacContext {
 public:
  static constexpr size_t kSize = 32;
  explicit HmacContext(const Hmac& key);
  ~HmacContext();
  HmacContext(const HmacContext&) = delete;
  HmacContext& operator=(const HmacContext&) = delete;

  // MAC of the concatenation of `parts` into `out`; false on an OpenSSL failure.
  bool Mac(std::initializer_list<std::string_view> parts, unsigned char (&out)[kSize]);

 private:
  EVP_MAC_CTX* ctx_ = nullptr;
};

}  // namespace anteroom::core
