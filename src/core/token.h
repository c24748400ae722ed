#pragma once
// Admission tokens: JWTs signed with HS256 that the protected app verifies offline with the
// shared secret. Claims: room, sub (the session), iat, exp (NumericDate seconds) and adm, the
// admission number, so that revoking one admission does not revoke a later one.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/op_status.h"
#include "core/hmac.h"

namespace anteroom::core {

struct TokenClaims {
  std::string room;
  std::string session;
  int64_t iat = 0;  // seconds since the epoch
  int64_t exp = 0;
  uint64_t admission = 0;
};

// Why a token does not verify (the `reason` of /v1/tokens/verify).
enum class TokenProblem { kNone, kMalformed, kBadSignature, kExpired };
const char* ToString(TokenProblem problem);

struct TokenCheck {
  TokenProblem problem = TokenProblem::kNone;
  TokenClaims claims;  // filled when the signature is good (also for expired tokens)
};

class TokenSigner {
 public:
  // Throws at start-up if OpenSSL cannot set up HMAC-SHA256.
  TokenSigner(std::string secret, int64_t ttl_ms);
  TokenSigner(const TokenSigner&) = delete;
  TokenSigner& operator=(const TokenSigner&) = delete;

  int64_t ttl_ms() const { return ttl_ms_; }
  std::string Mint(std::string_view room, std::string_view session, uint64_t admission,
                   int64_t now_ms) const;
  TokenCheck Verify(std::string_view token, int64_t now_ms) const;

 private:
  std::string Sign(std::string_view signing_input) const;

  Hmac hmac_;
  int64_t ttl_ms_;
};

}  // namespace anteroom::core
