#pragma once
// Admission tokens: JWTs (RFC 7519) the protected app verifies offline, signed through OpenSSL 3
// EVP (docs/design.md says why no JWT library): HS256 with a shared secret (EVP_MAC), or EdDSA
// (Ed25519) / ES256 (P-256, JOSE raw r||s signatures) with a private key whose public half is
// published as a JWK Set (GET /.well-known/jwks.json).
//
// Header: {"alg","typ":"JWT","kid"}. Claims: room, inc (the room's incarnation: a re-created
// room has another, so no token outlives its room), adm (the admission number, so revoking one
// admission does not revoke a later one), sub (an opaque per-admission value: never the
// session id), iat, exp (NumericDate seconds).
//
// Verification is strict: exactly three parts of unpadded base64url in canonical form, a
// header `alg` equal to the algorithm of the key its `kid` names (no `none`, no algorithm
// confusion between a secret and a public key), `typ` absent or "JWT", no `crit`, the
// signature over the header and claims exactly as sent.

#include <openssl/evp.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/op_status.h"
#include "core/hmac.h"

namespace anteroom::core {

enum class TokenAlg { kHS256, kEdDSA, kES256 };
const char* ToString(TokenAlg alg);                            // the JOSE name
std::optional<TokenAlg> ParseTokenAlg(std::string_view name);  // "HS256", "EdDSA", "ES256"

// One signing or verification key. Immutable and thread-safe after construction.
class TokenKey {
 public:
  // HS256 over `secret`; kid: the RFC 7638 thumbprint of its "oct" JWK.
  static std::shared_ptr<const TokenKey> Secret(std::string_view secret);
  // A new random private key (EdDSA or ES256; nullptr for HS256).
  static std::shared_ptr<const TokenKey> Generate(TokenAlg alg);
  // A PEM private key (PKCS#8 or traditional), or a public key (SubjectPublicKeyInfo: it then
  // only verifies). Ed25519 and P-256 keys only. kid: the RFC 7638 JWK thumbprint.
  static OpResult<std::shared_ptr<const TokenKey>> FromPem(std::string_view pem);

  ~TokenKey();
  TokenKey(const TokenKey&) = delete;
  TokenKey& operator=(const TokenKey&) = delete;

  TokenAlg alg() const { return alg_; }
  const std::string& kid() const { return kid_; }
  bool can_sign() const { return can_sign_; }
  // The private key as PKCS#8 PEM (asymmetric keys that can sign; empty otherwise).
  std::string PrivatePem() const;
  // The public JWK (kty, crv, x[, y], kid, alg, use); an HS256 key has none (empty object).
  std::string PublicJwk() const;

  // The JOSE signature of `input` (empty on an OpenSSL failure).
  std::string Sign(std::string_view input) const;
  bool Verify(std::string_view input, std::string_view signature) const;

 private:
  TokenKey() = default;
  bool Init(EVP_PKEY* pkey, bool can_sign);  // takes pkey

  TokenAlg alg_ = TokenAlg::kHS256;
  std::string kid_;
  bool can_sign_ = false;
  std::unique_ptr<Hmac> hmac_;  // HS256
  EVP_PKEY* pkey_ = nullptr;    // EdDSA, ES256
  std::string jwk_;             // the public JWK's members in RFC 7638 order, kid-less
};

struct TokenClaims {
  std::string room;
  std::string subject;  // sub: opaque
  uint64_t incarnation = 0;
  uint64_t admission = 0;
  int64_t iat = 0;  // seconds since the epoch
  int64_t exp = 0;
};

// Why a token does not verify (the `reason` of /v1/tokens/verify).
enum class TokenProblem { kNone, kMalformed, kBadSignature, kExpired };
const char* ToString(TokenProblem problem);

struct TokenCheck {
  TokenProblem problem = TokenProblem::kNone;
  TokenClaims claims;  // filled when the signature is good (also for expired tokens)
};

// The largest incarnation and admission numbers a token carries: JSON numbers every verifier
// (JavaScript's, Lua's) reads exactly.
constexpr uint64_t kMaxTokenNumber = (uint64_t{1} << 53) - 1;

class TokenSigner {
 public:
  // `keys[0]` signs (it must be able to); every key verifies the tokens that name its kid.
  // `subject_secret` keys the opaque `sub`.
  TokenSigner(std::vector<std::shared_ptr<const TokenKey>> keys, std::string_view subject_secret,
              int64_t ttl_ms);
  // HS256 with one secret, which also keys `sub` (tests, tools).
  TokenSigner(std::string_view secret, int64_t ttl_ms);
  TokenSigner(const TokenSigner&) = delete;
  TokenSigner& operator=(const TokenSigner&) = delete;

  int64_t ttl_ms() const { return ttl_ms_; }
  const TokenKey& signing_key() const { return *keys_.front(); }
  std::string Mint(std::string_view room, uint64_t incarnation, uint64_t admission,
                   int64_t now_ms) const;
  TokenCheck Verify(std::string_view token, int64_t now_ms) const;
  // The opaque `sub` of an admission: base64url of 16 bytes of HMAC-SHA256.
  std::string Subject(std::string_view room, uint64_t incarnation, uint64_t admission) const;
  // {"keys":[...]}: the public keys (none for HS256 secrets, which are never published).
  std::string Jwks() const;

 private:
  std::vector<std::shared_ptr<const TokenKey>> keys_;
  Hmac subject_mac_;
  int64_t ttl_ms_;
};

}  // namespace anteroom::core
