#pragma once
// Tags of queue leases: SipHash-2-4 with a 128-bit output, keyed by 16 bytes derived from the
// server's lease key (HMAC-SHA256 of a fixed label). A tag is made for every delivery and
// checked for every ack, nack and extend; SipHash is a PRF designed for such short inputs and
// costs a fraction of an HMAC-SHA256, through the same OpenSSL EVP_MAC interface.
//
// Not thread-safe: one LeaseMac per queue, used under the queue's lock. It re-initialises one
// context per tag, so a tag costs no allocation.

#include <openssl/evp.h>

#include <initializer_list>
#include <string_view>

#include "core/hmac.h"

namespace anteroom::core {

class LeaseMac {
 public:
  static constexpr size_t kSize = 16;

  // Throws at start-up if OpenSSL cannot set up SipHash.
  explicit LeaseMac(const Hmac& root_key);
  ~LeaseMac();
  LeaseMac(const LeaseMac&) = delete;
  LeaseMac& operator=(const LeaseMac&) = delete;

  // The tag of the concatenation of `parts`; false on an OpenSSL failure (then nothing matches).
  bool Tag(std::initializer_list<std::string_view> parts, unsigned char (&out)[kSize]);

 private:
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* ctx_ = nullptr;
};

}  // namespace anteroom::core
