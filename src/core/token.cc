#include "core/token.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>

#include <boost/json.hpp>

#include <array>
#include <stdexcept>

#include "common/base64url.h"

namespace anteroom::core {

namespace {
// base64url of {"alg":"HS256","typ":"JWT"}
constexpr std::string_view kHeader = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";
}  // namespace

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

TokenSigner::TokenSigner(std::string secret, int64_t ttl_ms) : hmac_(secret), ttl_ms_(ttl_ms) {}

std::string TokenSigner::Sign(std::string_view signing_input) const {
  return hmac_.Mac(signing_input);
}

std::string TokenSigner::Mint(std::string_view room, std::string_view session, uint64_t admission,
                              int64_t now_ms) const {
  int64_t iat = now_ms / 1000;
  boost::json::object claims;
  claims["room"] = room;
  claims["sub"] = session;
  claims["iat"] = iat;
  claims["exp"] = (now_ms + ttl_ms_) / 1000;
  claims["adm"] = admission;
  std::string token(kHeader);
  token += '.';
  token += Base64UrlEncode(boost::json::serialize(claims));
  std::string signature = Base64UrlEncode(Sign(token));
  token += '.';
  token += signature;
  return token;
}

TokenCheck TokenSigner::Verify(std::string_view token, int64_t now_ms) const {
  TokenCheck result;
  result.problem = TokenProblem::kMalformed;
  size_t dot1 = token.find('.');
  size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return result;
  }
  auto header = Base64UrlDecode(token.substr(0, dot1));
  auto payload = Base64UrlDecode(token.substr(dot1 + 1, dot2 - dot1 - 1));
  auto signature = Base64UrlDecode(token.substr(dot2 + 1));
  if (!header || !payload || !signature) return result;

  boost::system::error_code ec;
  boost::json::value h = boost::json::parse(*header, ec);
  if (ec || !h.is_object()) return result;
  const auto* alg = h.as_object().if_contains("alg");
  if (alg == nullptr || !alg->is_string() || alg->as_string() != "HS256") return result;

  std::string expected = Sign(token.substr(0, dot2));
  if (expected.empty() || expected.size() != signature->size() ||
      CRYPTO_memcmp(expected.data(), signature->data(), expected.size()) != 0) {
    result.problem = TokenProblem::kBadSignature;
    return result;
  }

  boost::json::value p = boost::json::parse(*payload, ec);
  if (ec || !p.is_object()) return result;
  const auto& o = p.as_object();
  const auto* room = o.if_contains("room");
  const auto* sub = o.if_contains("sub");
  const auto* iat = o.if_contains("iat");
  const auto* exp = o.if_contains("exp");
  const auto* adm = o.if_contains("adm");
  if (room == nullptr || !room->is_string() || sub == nullptr || !sub->is_string() ||
      iat == nullptr || !iat->is_int64() || exp == nullptr || !exp->is_int64() || adm == nullptr ||
      !(adm->is_uint64() || (adm->is_int64() && adm->as_int64() >= 0))) {
    return result;
  }
  result.claims.room = std::string(room->as_string());
  result.claims.session = std::string(sub->as_string());
  result.claims.iat = iat->as_int64();
  result.claims.exp = exp->as_int64();
  result.claims.admission =
      adm->is_uint64() ? adm->as_uint64() : static_cast<uint64_t>(adm->as_int64());
  result.problem =
      now_ms / 1000 >= result.claims.exp ? TokenProblem::kExpired : TokenProblem::kNone;
  return result;
}

}  // namespace anteroom::core
