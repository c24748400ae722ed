// Admission tokens (JWT: HS256, EdDSA, ES256), the classic attacks on verifiers, and the
// base64url coding under them.

#include "core/token.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/pem.h>

#include <boost/json.hpp>

#include <cstdint>
#include <ostream>
#include <random>
#include <string>

#include "common/base64url.h"

namespace anteroom::core {

// Readable failure messages.
void PrintTo(TokenProblem problem, std::ostream* os) { *os << ToString(problem); }

namespace {

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int64_t kTtlMs = 600'000;
constexpr uint64_t kInc = 4242;

struct Parts {
  std::string header, payload, signature;
};

Parts Split(const std::string& token) {
  size_t d1 = token.find('.');
  size_t d2 = token.find('.', d1 + 1);
  return {token.substr(0, d1), token.substr(d1 + 1, d2 - d1 - 1), token.substr(d2 + 1)};
}

std::string Join(const Parts& p) { return p.header + "." + p.payload + "." + p.signature; }

boost::json::object DecodeJson(const std::string& part) {
  auto bytes = Base64UrlDecode(part);
  EXPECT_TRUE(bytes.has_value());
  return boost::json::parse(bytes.value_or("{}")).as_object();
}

TEST(TokenTest, MintThenVerifyGivesClaimsBack) {
  TokenSigner signer("a shared secret", kTtlMs);
  std::string token = signer.Mint("shop", kInc, 42, kNow + 123);
  TokenCheck check = signer.Verify(token, kNow + 1'000);
  EXPECT_EQ(check.problem, TokenProblem::kNone);
  EXPECT_EQ(check.claims.room, "shop");
  EXPECT_EQ(check.claims.subject, signer.Subject("shop", kInc, 42));
  EXPECT_EQ(check.claims.incarnation, kInc);
  EXPECT_EQ(check.claims.iat, kNow / 1000);
  EXPECT_EQ(check.claims.exp, (kNow + 123 + kTtlMs) / 1000);
  EXPECT_EQ(check.claims.admission, 42u);
}

TEST(TokenTest, IsAStandardHs256Jwt) {
  TokenSigner signer("s", kTtlMs);
  Parts p = Split(signer.Mint("r", kInc, 7, kNow));
  boost::json::object header = DecodeJson(p.header);
  EXPECT_EQ(header.at("alg").as_string(), "HS256");
  EXPECT_EQ(header.at("typ").as_string(), "JWT");
  boost::json::object claims = DecodeJson(p.payload);
  EXPECT_EQ(claims.at("room").as_string(), "r");
  EXPECT_EQ(claims.at("sub").as_string(), signer.Subject("r", kInc, 7));
  EXPECT_EQ(claims.at("inc").to_number<int64_t>(), static_cast<int64_t>(kInc));
  EXPECT_EQ(header.at("kid").as_string(), signer.signing_key().kid());
  EXPECT_EQ(claims.at("iat").to_number<int64_t>(), kNow / 1000);
  EXPECT_EQ(claims.at("exp").to_number<int64_t>(), (kNow + kTtlMs) / 1000);
  EXPECT_EQ(claims.at("adm").to_number<int64_t>(), 7);
  // HMAC-SHA256: 32 bytes, 43 base64url characters without padding.
  EXPECT_EQ(p.signature.size(), 43u);
  EXPECT_EQ(p.signature.find_first_of("+/="), std::string::npos);
}

TEST(TokenTest, TamperedPayloadIsABadSignature) {
  TokenSigner signer("secret", kTtlMs);
  Parts p = Split(signer.Mint("r", kInc, 1, kNow));
  boost::json::object claims = DecodeJson(p.payload);
  claims["sub"] = "mallory";
  p.payload = Base64UrlEncode(boost::json::serialize(claims));
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kBadSignature);
  claims["sub"] = "alice";
  claims["exp"] = kNow / 1000 + 1'000'000;  // a longer life
  p.payload = Base64UrlEncode(boost::json::serialize(claims));
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kBadSignature);
}

TEST(TokenTest, TamperedSignatureIsABadSignature) {
  TokenSigner signer("secret", kTtlMs);
  Parts p = Split(signer.Mint("r", kInc, 1, kNow));
  // The first character carries 6 full bits: changing it keeps the text decodable.
  p.signature[0] = p.signature[0] == 'A' ? 'B' : 'A';
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kBadSignature);
  // A truncated signature (still valid base64url) does not verify either.
  Parts q = Split(signer.Mint("r", kInc, 1, kNow));
  q.signature.resize(40);
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kBadSignature);
  // Nor does an empty one.
  q.signature.clear();
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kBadSignature);
}

TEST(TokenTest, WrongSecretIsABadSignature) {
  TokenSigner signer("secret", kTtlMs);
  TokenSigner other("secret2", kTtlMs);
  std::string token = signer.Mint("r", kInc, 1, kNow);
  EXPECT_EQ(other.Verify(token, kNow).problem, TokenProblem::kBadSignature);
  EXPECT_EQ(signer.Verify(other.Mint("r", kInc, 1, kNow), kNow).problem,
            TokenProblem::kBadSignature);
}

TEST(TokenTest, MalformedTokens) {
  TokenSigner signer("secret", kTtlMs);
  std::string good = signer.Mint("r", kInc, 1, kNow);
  Parts p = Split(good);
  for (const std::string& bad : {
           std::string(), std::string("garbage"), std::string("a.b"),
           p.header + "." + p.payload,         // two parts
           good + ".extra",                    // four parts
           p.header + ".!!!!." + p.signature,  // payload not base64url
           "*" + good,                         // header not base64url
           good + "*",                         // signature not base64url
       }) {
    EXPECT_EQ(signer.Verify(bad, kNow).problem, TokenProblem::kMalformed) << bad;
  }
}

TEST(TokenTest, WhitespaceAroundAPartIsMalformed) {
  // OpenSSL's block decoder skips leading whitespace; the token must not verify because of it.
  TokenSigner signer("secret", kTtlMs);
  Parts p = Split(signer.Mint("r", kInc, 1, kNow));
  p.signature = "    " + p.signature;
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kMalformed);
  Parts q = Split(signer.Mint("r", kInc, 1, kNow));
  q.signature = "\t\t\t\t" + q.signature;
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed);
}

TEST(TokenTest, AlgNoneIsRefused) {
  TokenSigner signer("secret", kTtlMs);
  Parts p = Split(signer.Mint("r", kInc, 1, kNow));
  p.header = Base64UrlEncode(R"({"alg":"none","typ":"JWT","kid":")" + signer.signing_key().kid() +
                             R"("})");
  p.signature.clear();
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kMalformed);
  // Another algorithm name with the right signature bytes is refused too.
  Parts q = Split(signer.Mint("r", kInc, 1, kNow));
  q.header = Base64UrlEncode(R"({"alg":"HS512","typ":"JWT","kid":")" + signer.signing_key().kid() +
                             R"("})");
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed);
}

TEST(TokenTest, ExpiresAtExp) {
  TokenSigner signer("secret", kTtlMs);
  std::string token = signer.Mint("r", kInc, 3, kNow);
  EXPECT_EQ(signer.Verify(token, kNow + kTtlMs - 1).problem, TokenProblem::kNone);
  TokenCheck expired = signer.Verify(token, kNow + kTtlMs);
  EXPECT_EQ(expired.problem, TokenProblem::kExpired);
  EXPECT_EQ(expired.claims.room, "r");  // claims are still reported
  EXPECT_EQ(expired.claims.admission, 3u);
  EXPECT_EQ(signer.Verify(token, kNow + 10 * kTtlMs).problem, TokenProblem::kExpired);
}

TEST(TokenTest, ProblemNames) {
  EXPECT_STREQ(ToString(TokenProblem::kNone), "ok");
  EXPECT_STREQ(ToString(TokenProblem::kMalformed), "malformed");
  EXPECT_STREQ(ToString(TokenProblem::kBadSignature), "bad_signature");
  EXPECT_STREQ(ToString(TokenProblem::kExpired), "expired");
}

TEST(Base64UrlTest, Rfc4648Vectors) {
  EXPECT_EQ(Base64UrlEncode(""), "");
  EXPECT_EQ(Base64UrlEncode("f"), "Zg");
  EXPECT_EQ(Base64UrlEncode("fo"), "Zm8");
  EXPECT_EQ(Base64UrlEncode("foo"), "Zm9v");
  EXPECT_EQ(Base64UrlEncode("foob"), "Zm9vYg");
  EXPECT_EQ(Base64UrlEncode("fooba"), "Zm9vYmE");
  EXPECT_EQ(Base64UrlEncode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64UrlDecode("Zm9vYmE"), "fooba");
  EXPECT_EQ(Base64UrlDecode(""), "");
}

TEST(Base64UrlTest, UsesTheUrlAlphabet) {
  // Bytes that standard base64 writes as '+' and '/'.
  EXPECT_EQ(Base64UrlEncode(std::string("\xfb\xff\xbf", 3)), "-_-_");
  EXPECT_EQ(Base64UrlDecode("-_-_"), std::string("\xfb\xff\xbf", 3));
}

TEST(Base64UrlTest, RoundTripsEveryLengthAndByte) {
  std::mt19937 rng(99);
  for (size_t len = 0; len < 200; ++len) {
    std::string bytes(len, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    std::string text = Base64UrlEncode(bytes);
    EXPECT_EQ(text.size(), (len * 4 + 2) / 3) << len;  // no padding
    EXPECT_EQ(text.find_first_of("+/="), std::string::npos);
    auto back = Base64UrlDecode(text);
    ASSERT_TRUE(back.has_value()) << len;
    EXPECT_EQ(*back, bytes) << len;
  }
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(Base64UrlDecode(Base64UrlEncode(all)), all);
}

TEST(Base64UrlTest, RejectsWhatIsNotBase64Url) {
  EXPECT_FALSE(Base64UrlDecode("Zm9v=").has_value());  // padding
  EXPECT_FALSE(Base64UrlDecode("Zg==").has_value());
  EXPECT_FALSE(Base64UrlDecode("+/8").has_value());    // standard alphabet
  EXPECT_FALSE(Base64UrlDecode("Zm9vY").has_value());  // impossible length
  EXPECT_FALSE(Base64UrlDecode("Zm!v").has_value());   // outside the alphabet
  EXPECT_FALSE(Base64UrlDecode("Zm.v").has_value());
  // Whitespace is outside the alphabet too, wherever it is.
  EXPECT_FALSE(Base64UrlDecode("    Zm9v").has_value());
  EXPECT_FALSE(Base64UrlDecode("\tZm9v").has_value());
  EXPECT_FALSE(Base64UrlDecode("\r\nZm9v").has_value());
  EXPECT_FALSE(Base64UrlDecode("Zm9v    ").has_value());
  EXPECT_FALSE(Base64UrlDecode("Zm 9").has_value());
  EXPECT_FALSE(Base64UrlDecode(std::string("Zm\0v", 4)).has_value());
}

}  // namespace
}  // namespace anteroom::core

namespace anteroom::core {
namespace {

// Every character of a token matters: changing the last one of the signature (whose low bits
// carry no data in base64url) must not leave a token that still verifies.
TEST(TokenTest, ChangingTheLastSignatureCharacterInvalidates) {
  TokenSigner signer("secret", 600'000);
  const int64_t now = 1'700'000'000'000;
  std::string token = signer.Mint("room", 9, 1, now);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (char c : alphabet) {
    if (c == token.back()) continue;
    std::string changed = token;
    changed.back() = c;
    EXPECT_NE(signer.Verify(changed, now).problem, TokenProblem::kNone) << changed;
  }
}

}  // namespace
}  // namespace anteroom::core

// ---- asymmetric keys, kid, JWKS and the classic attacks ---------------------------------------

namespace anteroom::core {
namespace {

// RFC 8037 appendix A: an Ed25519 key, its thumbprint and a signature.
constexpr std::string_view kRfc8037Private =
    "-----BEGIN PRIVATE "
    "KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
    "-----END PRIVATE KEY-----\n";
constexpr std::string_view kRfc8037Public =
    "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
    "-----END PUBLIC KEY-----\n";

std::string ReSign(const TokenKey& key, const std::string& header_json,
                   const std::string& payload) {
  std::string input = Base64UrlEncode(header_json) + "." + payload;
  return input + "." + Base64UrlEncode(key.Sign(input));
}

std::string HeaderJson(std::string_view alg, std::string_view kid) {
  return boost::json::serialize(boost::json::object{{"alg", alg}, {"typ", "JWT"}, {"kid", kid}});
}

TEST(TokenKeyTest, Rfc8037ThumbprintAndSignature) {
  auto priv = TokenKey::FromPem(kRfc8037Private);
  ASSERT_TRUE(priv.ok()) << priv.message();
  EXPECT_EQ((*priv)->alg(), TokenAlg::kEdDSA);
  EXPECT_TRUE((*priv)->can_sign());
  EXPECT_EQ((*priv)->kid(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
  // Ed25519 is deterministic: the RFC's signature exactly.
  std::string input = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc";
  EXPECT_EQ(
      Base64UrlEncode((*priv)->Sign(input)),
      "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg");
  auto pub = TokenKey::FromPem(kRfc8037Public);
  ASSERT_TRUE(pub.ok()) << pub.message();
  EXPECT_FALSE((*pub)->can_sign());
  EXPECT_EQ((*pub)->kid(), (*priv)->kid());
  EXPECT_TRUE((*pub)->Verify(input, (*priv)->Sign(input)));
  boost::json::object jwk = boost::json::parse((*pub)->PublicJwk()).as_object();
  EXPECT_EQ(jwk.at("kty").as_string(), "OKP");
  EXPECT_EQ(jwk.at("crv").as_string(), "Ed25519");
  EXPECT_EQ(jwk.at("x").as_string(), "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
  EXPECT_EQ(jwk.at("alg").as_string(), "EdDSA");
}

TEST(TokenKeyTest, FromPemRefusesOtherKeys) {
  EXPECT_FALSE(TokenKey::FromPem("not a key").ok());
  EXPECT_FALSE(TokenKey::FromPem("").ok());
  // A P-384 key is not an ES256 key.
  EVP_PKEY* p384 = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-384");
  ASSERT_NE(p384, nullptr);
  BIO* bio = BIO_new(BIO_s_mem());
  ASSERT_EQ(PEM_write_bio_PrivateKey(bio, p384, nullptr, nullptr, 0, nullptr, nullptr), 1);
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(len));
  BIO_free(bio);
  EVP_PKEY_free(p384);
  EXPECT_FALSE(TokenKey::FromPem(pem).ok());
}

class AsymmetricTokenTest : public ::testing::TestWithParam<TokenAlg> {};

TEST_P(AsymmetricTokenTest, MintVerifyAndJwks) {
  auto key = TokenKey::Generate(GetParam());
  TokenSigner signer({key}, "sub secret", kTtlMs);
  std::string token = signer.Mint("shop", 77, 5, kNow);
  TokenCheck check = signer.Verify(token, kNow);
  ASSERT_EQ(check.problem, TokenProblem::kNone);
  EXPECT_EQ(check.claims.incarnation, 77u);
  EXPECT_EQ(check.claims.admission, 5u);
  Parts p = Split(token);
  boost::json::object header = DecodeJson(p.header);
  EXPECT_EQ(header.at("alg").as_string(), ToString(GetParam()));
  EXPECT_EQ(header.at("kid").as_string(), key->kid());
  // Both are 64 raw bytes (ES256: r||s as JOSE wants, not DER): 86 characters.
  EXPECT_EQ(p.signature.size(), 86u);

  boost::json::object jwks = boost::json::parse(signer.Jwks()).as_object();
  ASSERT_EQ(jwks.at("keys").as_array().size(), 1u);
  const auto& jwk = jwks.at("keys").as_array()[0].as_object();
  EXPECT_EQ(jwk.at("kid").as_string(), key->kid());
  EXPECT_EQ(jwk.at("use").as_string(), "sig");
  EXPECT_FALSE(jwk.contains("d"));  // never the private part

  // The same key read back from its PEM has the same kid and verifies.
  auto again = TokenKey::FromPem(key->PrivatePem());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->kid(), key->kid());
  TokenSigner verifier({*again}, "sub secret", kTtlMs);
  EXPECT_EQ(verifier.Verify(token, kNow).problem, TokenProblem::kNone);
}

TEST_P(AsymmetricTokenTest, ChangedHeaderOrClaimsInvalidate) {
  auto key = TokenKey::Generate(GetParam());
  TokenSigner signer({key}, "s", kTtlMs);
  Parts p = Split(signer.Mint("r", 1, 1, kNow));
  // Same members in another order: other bytes, so the signature no longer covers them.
  p.header = Base64UrlEncode(boost::json::serialize(
      boost::json::object{{"kid", key->kid()}, {"alg", ToString(GetParam())}, {"typ", "JWT"}}));
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kBadSignature);
  Parts q = Split(signer.Mint("r", 1, 1, kNow));
  boost::json::object claims = DecodeJson(q.payload);
  claims["adm"] = 2;
  q.payload = Base64UrlEncode(boost::json::serialize(claims));
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kBadSignature);
  // Flipping a bit of the signature.
  Parts r = Split(signer.Mint("r", 1, 1, kNow));
  r.signature[5] = r.signature[5] == 'A' ? 'B' : 'A';
  EXPECT_EQ(signer.Verify(Join(r), kNow).problem, TokenProblem::kBadSignature);
}

INSTANTIATE_TEST_SUITE_P(EdDSAAndES256, AsymmetricTokenTest,
                         ::testing::Values(TokenAlg::kEdDSA, TokenAlg::kES256),
                         [](const auto& info) { return std::string(ToString(info.param)); });

// HS/EdDSA and HS/ES (the "HS/RS") confusion: an attacker who knows the public key signs an
// HS256 token with its bytes as the HMAC secret, naming the public key's kid.
TEST(TokenAttackTest, HmacWithThePublicKeyIsRefused) {
  for (TokenAlg alg : {TokenAlg::kEdDSA, TokenAlg::kES256}) {
    auto key = TokenKey::Generate(alg);
    TokenSigner signer({key}, "s", kTtlMs);
    Parts p = Split(signer.Mint("r", 1, 1, kNow));
    boost::json::object jwk = boost::json::parse(key->PublicJwk()).as_object();
    std::string x = Base64UrlDecode(std::string(jwk.at("x").as_string())).value();
    for (const std::string& secret :
         {key->PublicJwk(), x, std::string(jwk.at("x").as_string()), key->PrivatePem()}) {
      auto forged_key = TokenKey::Secret(secret);
      std::string forged = ReSign(*forged_key, HeaderJson("HS256", key->kid()), p.payload);
      EXPECT_EQ(signer.Verify(forged, kNow).problem, TokenProblem::kBadSignature) << secret;
      // Naming the HMAC key's own kid does not help: that kid is unknown here.
      forged = ReSign(*forged_key, HeaderJson("HS256", forged_key->kid()), p.payload);
      EXPECT_EQ(signer.Verify(forged, kNow).problem, TokenProblem::kBadSignature) << secret;
    }
    // The other asymmetric algorithm under this key's kid is refused as well.
    Parts q = Split(signer.Mint("r", 1, 1, kNow));
    q.header = Base64UrlEncode(HeaderJson(alg == TokenAlg::kEdDSA ? "ES256" : "EdDSA", key->kid()));
    EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kBadSignature);
    // RS256 and friends are not algorithms of this verifier at all.
    q.header = Base64UrlEncode(HeaderJson("RS256", key->kid()));
    EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed);
  }
}

TEST(TokenAttackTest, AlgNoneInEveryCase) {
  auto key = TokenKey::Generate(TokenAlg::kEdDSA);
  TokenSigner signer({key}, "s", kTtlMs);
  Parts p = Split(signer.Mint("r", 1, 1, kNow));
  for (const char* none : {"none", "None", "NONE", "nOnE", ""}) {
    Parts q = p;
    q.header = Base64UrlEncode(HeaderJson(none, key->kid()));
    q.signature.clear();
    EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed) << none;
    q.signature = p.signature;  // with the original signature left in place
    EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed) << none;
  }
  Parts q = p;
  q.header = Base64UrlEncode(R"({"typ":"JWT"})");  // no alg at all
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed);
}

TEST(TokenAttackTest, OtherBase64AlphabetsAndPaddingAreRefused) {
  TokenSigner signer("secret", kTtlMs);
  // Mint until the signature holds a '-' or '_', to write it in the standard alphabet.
  for (uint64_t adm = 1; adm < 200; ++adm) {
    std::string token = signer.Mint("r", kInc, adm, kNow);
    Parts p = Split(token);
    if (p.signature.find_first_of("-_") == std::string::npos) continue;
    for (char& c : p.signature) {
      if (c == '-') c = '+';
      if (c == '_') c = '/';
    }
    EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kMalformed) << Join(p);
    break;
  }
  Parts p = Split(signer.Mint("r", kInc, 1, kNow));
  for (std::string* part : {&p.header, &p.payload, &p.signature}) {
    Parts q = p;
    std::string* same = part == &p.header    ? &q.header
                        : part == &p.payload ? &q.payload
                                             : &q.signature;
    *same += "=";
    EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed) << Join(q);
    *same += "==";
    EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed) << Join(q);
  }
}

TEST(TokenAttackTest, HeaderRules) {
  auto key = TokenKey::Generate(TokenAlg::kES256);
  TokenSigner signer({key}, "s", kTtlMs);
  Parts p = Split(signer.Mint("r", 1, 1, kNow));
  auto with_header = [&](const boost::json::object& h) {
    return ReSign(*key, boost::json::serialize(h), p.payload);
  };
  std::string alg = "ES256";
  // The control: re-signed with the same header members, it verifies.
  EXPECT_EQ(
      signer.Verify(with_header({{"alg", alg}, {"typ", "JWT"}, {"kid", key->kid()}}), kNow).problem,
      TokenProblem::kNone);
  EXPECT_EQ(signer.Verify(with_header({{"alg", alg}, {"kid", key->kid()}}), kNow).problem,
            TokenProblem::kNone);  // typ is optional
  // typ other than JWT, crit, no kid, a kid of no key.
  EXPECT_EQ(
      signer.Verify(with_header({{"alg", alg}, {"typ", "JWE"}, {"kid", key->kid()}}), kNow).problem,
      TokenProblem::kMalformed);
  EXPECT_EQ(signer
                .Verify(with_header({{"alg", alg},
                                     {"kid", key->kid()},
                                     {"crit", boost::json::array{"exp"}},
                                     {"exp", 1}}),
                        kNow)
                .problem,
            TokenProblem::kMalformed);
  EXPECT_EQ(signer.Verify(with_header({{"alg", alg}, {"typ", "JWT"}}), kNow).problem,
            TokenProblem::kMalformed);
  EXPECT_EQ(signer.Verify(with_header({{"alg", alg}, {"kid", "someone-else"}}), kNow).problem,
            TokenProblem::kBadSignature);
  // Exactly three parts: a JWE-shaped token of five, and one of four.
  std::string good = signer.Mint("r", 1, 1, kNow);
  EXPECT_EQ(signer.Verify(good + "..", kNow).problem, TokenProblem::kMalformed);
  EXPECT_EQ(signer.Verify(p.header + "." + p.payload + ".." + p.signature, kNow).problem,
            TokenProblem::kMalformed);
}

TEST(TokenAttackTest, Es256DerSignatureIsRefused) {
  auto key = TokenKey::Generate(TokenAlg::kES256);
  TokenSigner signer({key}, "s", kTtlMs);
  Parts p = Split(signer.Mint("r", 1, 1, kNow));
  std::string raw = Base64UrlDecode(p.signature).value();
  ASSERT_EQ(raw.size(), 64u);
  // The DER form of the same signature (what OpenSSL produces) is not JOSE's.
  ECDSA_SIG* sig = ECDSA_SIG_new();
  ECDSA_SIG_set0(sig, BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr),
                 BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 32, 32, nullptr));
  unsigned char* der = nullptr;
  int len = i2d_ECDSA_SIG(sig, &der);
  ASSERT_GT(len, 0);
  p.signature =
      Base64UrlEncode(std::string(reinterpret_cast<char*>(der), static_cast<size_t>(len)));
  OPENSSL_free(der);
  ECDSA_SIG_free(sig);
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kBadSignature);
}

TEST(TokenRotationTest, OldKeysVerifyUntilRemoved) {
  auto old_key = TokenKey::Generate(TokenAlg::kEdDSA);
  auto new_key = TokenKey::Generate(TokenAlg::kEdDSA);
  TokenSigner before({old_key}, "s", kTtlMs);
  std::string old_token = before.Mint("r", 1, 1, kNow);
  TokenSigner during({new_key, old_key}, "s", kTtlMs);
  EXPECT_EQ(during.Verify(old_token, kNow).problem, TokenProblem::kNone);
  std::string new_token = during.Mint("r", 1, 2, kNow);
  EXPECT_EQ(DecodeJson(Split(new_token).header).at("kid").as_string(), new_key->kid());
  EXPECT_EQ(boost::json::parse(during.Jwks()).at("keys").as_array().size(), 2u);
  TokenSigner after({new_key}, "s", kTtlMs);
  EXPECT_EQ(after.Verify(old_token, kNow).problem, TokenProblem::kBadSignature);
  EXPECT_EQ(after.Verify(new_token, kNow).problem, TokenProblem::kNone);
}

TEST(TokenRotationTest, Hs256SecretsAreNeverPublished) {
  TokenSigner signer("secret", kTtlMs);
  EXPECT_EQ(signer.Jwks(), R"({"keys":[]})");
  auto key = TokenKey::Generate(TokenAlg::kEdDSA);
  TokenSigner mixed({key, TokenKey::Secret("secret")}, "secret", kTtlMs);
  boost::json::array keys = boost::json::parse(mixed.Jwks()).at("keys").as_array();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].at("kty").as_string(), "OKP");
  // A verify-only public key cannot sign.
  auto pub = TokenKey::FromPem(kRfc8037Public);
  ASSERT_TRUE(pub.ok());
  EXPECT_THROW(TokenSigner({*pub}, "s", kTtlMs), std::runtime_error);
}

TEST(TokenSubjectTest, OpaquePerAdmissionAndIncarnation) {
  TokenSigner signer("secret", kTtlMs);
  std::string a = signer.Subject("r", 1, 1);
  EXPECT_EQ(a.size(), 22u);
  EXPECT_EQ(a, signer.Subject("r", 1, 1));
  EXPECT_NE(a, signer.Subject("r", 1, 2));
  EXPECT_NE(a, signer.Subject("r", 2, 1));
  EXPECT_NE(a, signer.Subject("s", 1, 1));
  TokenSigner other("another secret", kTtlMs);
  EXPECT_NE(a, other.Subject("r", 1, 1));
}

}  // namespace
}  // namespace anteroom::core
