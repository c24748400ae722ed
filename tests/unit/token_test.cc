// Admission tokens (JWT HS256) and the base64url coding under them.

#include "core/token.h"

#include <gtest/gtest.h>

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
  std::string token = signer.Mint("shop", "user-1", 42, kNow + 123);
  TokenCheck check = signer.Verify(token, kNow + 1'000);
  EXPECT_EQ(check.problem, TokenProblem::kNone);
  EXPECT_EQ(check.claims.room, "shop");
  EXPECT_EQ(check.claims.session, "user-1");
  EXPECT_EQ(check.claims.iat, kNow / 1000);
  EXPECT_EQ(check.claims.exp, (kNow + 123 + kTtlMs) / 1000);
  EXPECT_EQ(check.claims.admission, 42u);
}

TEST(TokenTest, IsAStandardHs256Jwt) {
  TokenSigner signer("s", kTtlMs);
  Parts p = Split(signer.Mint("r", "s1", 7, kNow));
  boost::json::object header = DecodeJson(p.header);
  EXPECT_EQ(header.at("alg").as_string(), "HS256");
  EXPECT_EQ(header.at("typ").as_string(), "JWT");
  boost::json::object claims = DecodeJson(p.payload);
  EXPECT_EQ(claims.at("room").as_string(), "r");
  EXPECT_EQ(claims.at("sub").as_string(), "s1");
  EXPECT_EQ(claims.at("iat").to_number<int64_t>(), kNow / 1000);
  EXPECT_EQ(claims.at("exp").to_number<int64_t>(), (kNow + kTtlMs) / 1000);
  EXPECT_EQ(claims.at("adm").to_number<int64_t>(), 7);
  // HMAC-SHA256: 32 bytes, 43 base64url characters without padding.
  EXPECT_EQ(p.signature.size(), 43u);
  EXPECT_EQ(p.signature.find_first_of("+/="), std::string::npos);
}

TEST(TokenTest, TamperedPayloadIsABadSignature) {
  TokenSigner signer("secret", kTtlMs);
  Parts p = Split(signer.Mint("r", "alice", 1, kNow));
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
  Parts p = Split(signer.Mint("r", "alice", 1, kNow));
  // The first character carries 6 full bits: changing it keeps the text decodable.
  p.signature[0] = p.signature[0] == 'A' ? 'B' : 'A';
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kBadSignature);
  // A truncated signature (still valid base64url) does not verify either.
  Parts q = Split(signer.Mint("r", "alice", 1, kNow));
  q.signature.resize(40);
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kBadSignature);
  // Nor does an empty one.
  q.signature.clear();
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kBadSignature);
}

TEST(TokenTest, WrongSecretIsABadSignature) {
  TokenSigner signer("secret", kTtlMs);
  TokenSigner other("secret2", kTtlMs);
  std::string token = signer.Mint("r", "alice", 1, kNow);
  EXPECT_EQ(other.Verify(token, kNow).problem, TokenProblem::kBadSignature);
  EXPECT_EQ(signer.Verify(other.Mint("r", "alice", 1, kNow), kNow).problem,
            TokenProblem::kBadSignature);
}

TEST(TokenTest, MalformedTokens) {
  TokenSigner signer("secret", kTtlMs);
  std::string good = signer.Mint("r", "alice", 1, kNow);
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
  Parts p = Split(signer.Mint("r", "alice", 1, kNow));
  p.signature = "    " + p.signature;
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kMalformed);
  Parts q = Split(signer.Mint("r", "alice", 1, kNow));
  q.signature = "\t\t\t\t" + q.signature;
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed);
}

TEST(TokenTest, AlgNoneIsRefused) {
  TokenSigner signer("secret", kTtlMs);
  Parts p = Split(signer.Mint("r", "alice", 1, kNow));
  p.header = Base64UrlEncode(R"({"alg":"none","typ":"JWT"})");
  p.signature.clear();
  EXPECT_EQ(signer.Verify(Join(p), kNow).problem, TokenProblem::kMalformed);
  // Another algorithm name with the right signature bytes is refused too.
  Parts q = Split(signer.Mint("r", "alice", 1, kNow));
  q.header = Base64UrlEncode(R"({"alg":"HS512","typ":"JWT"})");
  EXPECT_EQ(signer.Verify(Join(q), kNow).problem, TokenProblem::kMalformed);
}

TEST(TokenTest, ExpiresAtExp) {
  TokenSigner signer("secret", kTtlMs);
  std::string token = signer.Mint("r", "alice", 3, kNow);
  EXPECT_EQ(signer.Verify(token, kNow + kTtlMs - 1).problem, TokenProblem::kNone);
  TokenCheck expired = signer.Verify(token, kNow + kTtlMs);
  EXPECT_EQ(expired.problem, TokenProblem::kExpired);
  EXPECT_EQ(expired.claims.session, "alice");  // claims are still reported
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
  std::string token = signer.Mint("room", "sess", 1, now);
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
