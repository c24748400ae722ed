#include "core/token.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/pem.h>

#include <boost/json.hpp>

#include <array>
#include <cstring>
#include <stdexcept>

#include "common/base64url.h"

namespace anteroom::core {

namespace json = boost::json;

namespace {

constexpr size_t kMaxTokenBytes = 8192;
constexpr size_t kEs256Half = 32;  // P-256: r and s are 32 bytes each in a JOSE signature

std::string Sha256(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL: SHA-256 failed");
  }
  return std::string(reinterpret_cast<const char*>(md.data()), len);
}

// RFC 7638: the SHA-256 of the required members in lexicographic order, no whitespace.
std::string Thumbprint(const std::string& required_members_json) {
  return Base64UrlEncode(Sha256(required_members_json));
}

std::string BnBytes(const BIGNUM* bn, size_t width) {
  std::string out(width, '\0');
  if (bn == nullptr || BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()),
                                    static_cast<int>(width)) != static_cast<int>(width)) {
    return {};
  }
  return out;
}

struct MdCtx {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~MdCtx() { EVP_MD_CTX_free(ctx); }
};

// DER ECDSA-Sig-Value -> JOSE r||s.
std::string DerToRaw(const unsigned char* der, size_t len) {
  const unsigned char* p = der;
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(len));
  if (sig == nullptr) return {};
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig, &r, &s);
  std::string out = BnBytes(r, kEs256Half);
  std::string s_bytes = BnBytes(s, kEs256Half);
  ECDSA_SIG_free(sig);
  if (out.empty() || s_bytes.empty()) return {};
  return out + s_bytes;
}

// JOSE r||s -> DER (empty when the length is not exactly 64).
std::string RawToDer(std::string_view raw) {
  if (raw.size() != 2 * kEs256Half) return {};
  const auto* bytes = reinterpret_cast<const unsigned char*>(raw.data());
  BIGNUM* r = BN_bin2bn(bytes, kEs256Half, nullptr);
  BIGNUM* s = BN_bin2bn(bytes + kEs256Half, kEs256Half, nullptr);
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (r == nullptr || s == nullptr || sig == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return {};
  }
  unsigned char* der = nullptr;
  int len = i2d_ECDSA_SIG(sig, &der);
  ECDSA_SIG_free(sig);
  if (len <= 0) return {};
  std::string out(reinterpret_cast<const char*>(der), static_cast<size_t>(len));
  OPENSSL_free(der);
  return out;
}

}  // namespace

const char* ToString(TokenAlg alg) {
  switch (alg) {
    case TokenAlg::kHS256:
      return "HS256";
    case TokenAlg::kEdDSA:
      return "EdDSA";
    case TokenAlg::kES256:
      return "ES256";
  }
  return "HS256";
}

std::optional<TokenAlg> ParseTokenAlg(std::string_view name) {
  if (name == "HS256") return TokenAlg::kHS256;
  if (name == "EdDSA") return TokenAlg::kEdDSA;
  if (name == "ES256") return TokenAlg::kES256;
  return std::nullopt;
}

const char* ToString(TokenProblem problem) {
  switch (problem) {
    case TokenProblem::kNone:
      return "ok";
    case TokenProblem::kMalformed:
      return "malformed";
    case TokenProblem::kBadSignature:
      return "bad_signature";
    case TokenProblem::kExpired:
      return "expired";
  }
  return "malformed";
}

// ---- keys ---------------------------------------------------------------------------------

TokenKey::~TokenKey() { EVP_PKEY_free(pkey_); }

std::shared_ptr<const TokenKey> TokenKey::Secret(std::string_view secret) {
  std::shared_ptr<TokenKey> key(new TokenKey());
  key->alg_ = TokenAlg::kHS256;
  key->hmac_ = std::make_unique<Hmac>(secret);
  key->can_sign_ = true;
  key->kid_ = Thumbprint(json::serialize(json::object{
      {"k", Base64UrlEncode(secret)},
      {"kty", "oct"},
  }));
  return key;
}

bool TokenKey::Init(EVP_PKEY* pkey, bool can_sign) {
  pkey_ = pkey;
  can_sign_ = can_sign;
  if (EVP_PKEY_is_a(pkey, "ED25519")) {
    alg_ = TokenAlg::kEdDSA;
    std::array<unsigned char, 64> raw{};
    size_t len = raw.size();
    if (EVP_PKEY_get_raw_public_key(pkey, raw.data(), &len) != 1 || len != 32) return false;
    json::object jwk{
        {"crv", "Ed25519"},
        {"kty", "OKP"},
        {"x", Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(raw.data()), len))}};
    jwk_ = json::serialize(jwk);
  } else if (EVP_PKEY_is_a(pkey, "EC")) {
    alg_ = TokenAlg::kES256;
    std::array<char, 64> group{};
    size_t group_len = 0;
    if (EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group.data(), group.size(),
                                       &group_len) != 1 ||
        (std::string_view(group.data(), group_len) != "prime256v1" &&
         std::string_view(group.data(), group_len) != "P-256")) {
      return false;
    }
    BIGNUM* x = nullptr;
    BIGNUM* y = nullptr;
    bool ok = EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_X, &x) == 1 &&
              EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_EC_PUB_Y, &y) == 1;
    std::string xb = ok ? BnBytes(x, kEs256Half) : "";
    std::string yb = ok ? BnBytes(y, kEs256Half) : "";
    BN_free(x);
    BN_free(y);
    if (xb.empty() || yb.empty()) return false;
    json::object jwk{
        {"crv", "P-256"}, {"kty", "EC"}, {"x", Base64UrlEncode(xb)}, {"y", Base64UrlEncode(yb)}};
    jwk_ = json::serialize(jwk);
  } else {
    return false;
  }
  kid_ = Thumbprint(jwk_);
  return true;
}

std::shared_ptr<const TokenKey> TokenKey::Generate(TokenAlg alg) {
  EVP_PKEY* pkey = nullptr;
  if (alg == TokenAlg::kEdDSA) {
    pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  } else if (alg == TokenAlg::kES256) {
    pkey = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  } else {
    return nullptr;
  }
  if (pkey == nullptr) throw std::runtime_error("OpenSSL: cannot generate a key");
  std::shared_ptr<TokenKey> key(new TokenKey());
  if (!key->Init(pkey, true)) throw std::runtime_error("OpenSSL: generated key is unusable");
  return key;
}

OpResult<std::shared_ptr<const TokenKey>> TokenKey::FromPem(std::string_view pem) {
  auto read = [&](bool is_private) -> EVP_PKEY* {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    if (bio == nullptr) return nullptr;
    EVP_PKEY* pkey = is_private ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr)
                                : PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    return pkey;
  };
  bool is_private = true;
  EVP_PKEY* pkey = read(true);
  if (pkey == nullptr) {
    is_private = false;
    pkey = read(false);
  }
  if (pkey == nullptr) {
    return {OpStatus::kInvalidArgument, "not a PEM private or public key"};
  }
  std::shared_ptr<TokenKey> key(new TokenKey());
  if (!key->Init(pkey, is_private)) {
    return {OpStatus::kInvalidArgument, "not an Ed25519 or P-256 key"};
  }
  return std::shared_ptr<const TokenKey>(std::move(key));
}

std::string TokenKey::PrivatePem() const {
  if (pkey_ == nullptr || !can_sign_) return {};
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return {};
  std::string out;
  if (PEM_write_bio_PrivateKey(bio, pkey_, nullptr, nullptr, 0, nullptr, nullptr) == 1) {
    char* data = nullptr;
    long len = BIO_get_mem_data(bio, &data);
    if (len > 0) out.assign(data, static_cast<size_t>(len));
  }
  BIO_free(bio);
  return out;
}

std::string TokenKey::PublicJwk() const {
  if (jwk_.empty()) return {};
  json::object jwk = json::parse(jwk_).as_object();
  jwk["kid"] = kid_;
  jwk["alg"] = ToString(alg_);
  jwk["use"] = "sig";
  return json::serialize(jwk);
}

std::string TokenKey::Sign(std::string_view input) const {
  if (!can_sign_) return {};
  if (hmac_) return hmac_->Mac(input);
  MdCtx md;
  const auto* in = reinterpret_cast<const unsigned char*>(input.data());
  const EVP_MD* digest = alg_ == TokenAlg::kES256 ? EVP_sha256() : nullptr;
  size_t len = 0;
  if (md.ctx == nullptr || EVP_DigestSignInit(md.ctx, nullptr, digest, nullptr, pkey_) != 1 ||
      EVP_DigestSign(md.ctx, nullptr, &len, in, input.size()) != 1) {
    return {};
  }
  std::string sig(len, '\0');
  auto* out = reinterpret_cast<unsigned char*>(sig.data());
  if (EVP_DigestSign(md.ctx, out, &len, in, input.size()) != 1) return {};
  sig.resize(len);
  if (alg_ == TokenAlg::kES256) return DerToRaw(out, len);
  return sig;
}

bool TokenKey::Verify(std::string_view input, std::string_view signature) const {
  if (hmac_) {
    std::string expected = hmac_->Mac(input);
    return !expected.empty() && expected.size() == signature.size() &&
           CRYPTO_memcmp(expected.data(), signature.data(), expected.size()) == 0;
  }
  std::string der;
  if (alg_ == TokenAlg::kES256) {
    der = RawToDer(signature);  // exactly 64 bytes, or nothing verifies
    if (der.empty()) return false;
    signature = der;
  } else if (signature.size() != 64) {
    return false;
  }
  MdCtx md;
  const EVP_MD* digest = alg_ == TokenAlg::kES256 ? EVP_sha256() : nullptr;
  return md.ctx != nullptr && EVP_DigestVerifyInit(md.ctx, nullptr, digest, nullptr, pkey_) == 1 &&
         EVP_DigestVerify(md.ctx, reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(input.data()),
                          input.size()) == 1;
}

// ---- tokens -------------------------------------------------------------------------------

TokenSigner::TokenSigner(std::vector<std::shared_ptr<const TokenKey>> keys,
                         std::string_view subject_secret, int64_t ttl_ms)
    : keys_(std::move(keys)),
      subject_mac_(std::string("anteroom/token-sub/").append(subject_secret)),
      ttl_ms_(ttl_ms) {
  if (keys_.empty() || !keys_.front() || !keys_.front()->can_sign()) {
    throw std::runtime_error("the token signing key cannot sign");
  }
}

TokenSigner::TokenSigner(std::string_view secret, int64_t ttl_ms)
    : TokenSigner({TokenKey::Secret(secret)}, secret, ttl_ms) {}

std::string TokenSigner::Subject(std::string_view room, uint64_t incarnation,
                                 uint64_t admission) const {
  std::string input(room);
  input += '\0';
  input += std::to_string(incarnation);
  input += '/';
  input += std::to_string(admission);
  return Base64UrlEncode(subject_mac_.Mac(input).substr(0, 16));
}

std::string TokenSigner::Mint(std::string_view room, uint64_t incarnation, uint64_t admission,
                              int64_t now_ms) const {
  const TokenKey& key = *keys_.front();
  json::object header{{"alg", ToString(key.alg())}, {"typ", "JWT"}, {"kid", key.kid()}};
  json::object claims;
  claims["room"] = room;
  claims["sub"] = Subject(room, incarnation, admission);
  claims["inc"] = incarnation;
  claims["adm"] = admission;
  claims["iat"] = now_ms / 1000;
  claims["exp"] = (now_ms + ttl_ms_) / 1000;
  std::string token = Base64UrlEncode(json::serialize(header));
  token += '.';
  token += Base64UrlEncode(json::serialize(claims));
  std::string signature = Base64UrlEncode(key.Sign(token));
  token += '.';
  token += signature;
  return token;
}

namespace {
const json::value* Member(const json::object& o, std::string_view name) {
  return o.if_contains(name);
}
std::optional<uint64_t> TokenNumber(const json::value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_int64() && v->as_int64() >= 0) return static_cast<uint64_t>(v->as_int64());
  if (v->is_uint64()) return v->as_uint64();
  return std::nullopt;
}
}  // namespace

TokenCheck TokenSigner::Verify(std::string_view token, int64_t now_ms) const {
  TokenCheck result;
  result.problem = TokenProblem::kMalformed;
  if (token.size() > kMaxTokenBytes) return result;
  // Exactly three parts (a JWE has five; an unsecured JWT ends in an empty part).
  size_t dot1 = token.find('.');
  size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return result;
  }
  // Unpadded base64url in canonical form only ('+', '/', '=' and whitespace are refused).
  auto header = Base64UrlDecode(token.substr(0, dot1));
  auto payload = Base64UrlDecode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  auto signature = Base64UrlDecode(token.substr(dot2 + 1));
  if (!header || !payload || !signature) return result;

  boost::system::error_code ec;
  json::value h = json::parse(*header, ec);
  if (ec || !h.is_object()) return result;
  const json::object& ho = h.as_object();
  const auto* alg = Member(ho, "alg");
  const auto* kid = Member(ho, "kid");
  const auto* typ = Member(ho, "typ");
  if (alg == nullptr || !alg->is_string() || kid == nullptr || !kid->is_string()) return result;
  if (typ != nullptr && !(typ->is_string() && typ->as_string() == "JWT")) return result;
  // Extensions this verifier does not understand must not be ignored (RFC 7515 4.1.11).
  if (Member(ho, "crit") != nullptr) return result;
  auto parsed_alg = ParseTokenAlg(alg->as_string());  // "none" and every other name: refused
  if (!parsed_alg) return result;

  const TokenKey* key = nullptr;
  for (const auto& k : keys_) {
    if (k->kid() == kid->as_string()) key = k.get();
  }
  // The algorithm is the key's, never the token's choice: an HS256 header naming a public
  // key (whose bytes an attacker knows) does not make it an HMAC secret.
  if (key == nullptr || key->alg() != *parsed_alg ||
      !key->Verify(token.substr(0, dot2), *signature)) {
    result.problem = TokenProblem::kBadSignature;
    return result;
  }

  json::value p = json::parse(*payload, ec);
  if (ec || !p.is_object()) return result;
  const auto& o = p.as_object();
  const auto* room = Member(o, "room");
  const auto* sub = Member(o, "sub");
  const auto* iat = Member(o, "iat");
  const auto* exp = Member(o, "exp");
  auto inc = TokenNumber(Member(o, "inc"));
  auto adm = TokenNumber(Member(o, "adm"));
  if (room == nullptr || !room->is_string() || sub == nullptr || !sub->is_string() ||
      iat == nullptr || !iat->is_int64() || exp == nullptr || !exp->is_int64() || !inc || !adm ||
      *inc > kMaxTokenNumber || *adm > kMaxTokenNumber) {
    return result;
  }
  result.claims.room = std::string(room->as_string());
  result.claims.subject = std::string(sub->as_string());
  result.claims.iat = iat->as_int64();
  result.claims.exp = exp->as_int64();
  result.claims.incarnation = *inc;
  result.claims.admission = *adm;
  result.problem =
      now_ms / 1000 >= result.claims.exp ? TokenProblem::kExpired : TokenProblem::kNone;
  return result;
}

std::string TokenSigner::Jwks() const {
  json::array keys;
  for (const auto& k : keys_) {
    std::string jwk = k->PublicJwk();
    if (!jwk.empty()) keys.push_back(json::parse(jwk));
  }
  return json::serialize(json::object{{"keys", std::move(keys)}});
}

}  // namespace anteroom::core
