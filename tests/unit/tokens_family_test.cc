// The token family's handler in process: a token from a check-in verifies; malformed, forged
// and revoked ones do not, nor do the classic JWT tricks (at verify and at the gate).
#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/base64url.h"
#include "common/wire_errors.h"
#include "core/token.h"
#include "family_world.h"

namespace anteroom::server {
namespace {

using http::verb;
using testing::ErrorMessage;
using testing::FamilyWorld;
using testing::Json;

std::string Verify(std::string_view token) {
  return R"({"token": ")" + std::string(token) + R"("})";
}

// The gate's decision for a page load of room `room`'s site, with `cookie` (over http, from an
// untrusted peer: the cookie is anteroom_ROOM).
Request GateAsk(const std::string& room, const std::string& cookie) {
  Request r;
  r.method = verb::get;
  r.target = "/v1/gate/" + room;
  r.host = "127.0.0.1:8080";
  r.peer = boost::asio::ip::make_address("192.0.2.9");
  r.fields.set("X-Forwarded-Host", "shop.example");
  r.fields.set("X-Forwarded-Uri", "/");
  r.fields.set("Accept", "text/html");
  r.fields.set("Sec-Fetch-Mode", "navigate");
  r.fields.set("Cookie", "anteroom_" + room + "=" + cookie);
  return r;
}

TEST(TokensFamilyTest, ATokenOfAnAdmissionVerifiesUntilRevoked) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1})").status, 200u);
  Response in = w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "alice-Qm9vYmFyYmF6cXV4"})");
  std::string token(Json(in).at("token").as_string());
  Response ok = w.Call(verb::post, "/v1/tokens/verify", Verify(token));
  ASSERT_EQ(ok.status, 200u) << ok.body;
  EXPECT_TRUE(Json(ok).at("valid").as_bool()) << ok.body;
  EXPECT_EQ(Json(ok).at("room").as_string(), "r");

  ASSERT_EQ(w.Call(verb::post, "/v1/rooms/r/leave",
                   R"({"session": "alice-Qm9vYmFyYmF6cXV4", "final": true})")
                .status,
            200u);
  Response revoked = w.Call(verb::post, "/v1/tokens/verify", Verify(token));
  EXPECT_FALSE(Json(revoked).at("valid").as_bool());
  EXPECT_EQ(Json(revoked).at("reason").as_string(), "revoked");
}

TEST(TokensFamilyTest, MalformedAndForgedTokensAreInvalid) {
  FamilyWorld w;
  Response garbage = w.Call(verb::post, "/v1/tokens/verify", Verify("not.a.token"));
  ASSERT_EQ(garbage.status, 200u);
  EXPECT_FALSE(Json(garbage).at("valid").as_bool());
  EXPECT_TRUE(Json(garbage).at("room").is_null());

  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1})").status, 200u);
  std::string token(
      Json(w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "a-SGVsbG9Xb3JsZEhlbGxvVw"})"))
          .at("token")
          .as_string());
  token.back() = token.back() == 'A' ? 'B' : 'A';  // another signature
  Response forged = w.Call(verb::post, "/v1/tokens/verify", Verify(token));
  EXPECT_FALSE(Json(forged).at("valid").as_bool()) << forged.body;
}

// The classic JWT tricks (one test each on the verifier alone in token_test.cc), through every
// route that takes an admission token from a client: verify, the gate's cookie and the gate's
// enter. Each is made from the token of an admission that is held, in a full room, so a route
// that believed it would answer valid, pass the page (200) or set the cookie.
TEST(TokensFamilyTest, JwtTricksAreRefusedByVerifyAndByTheGate) {
  FamilyWorld w;
  ASSERT_EQ(
      w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1, "target_url": "http://shop.example/"})")
          .status,
      200u);
  Response in =
      w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "a-SGVsbG9Xb3JsZEhlbGxvVw"})");
  ASSERT_EQ(in.status, 200u) << in.body;
  const std::string token(Json(in).at("token").as_string());
  const size_t dot1 = token.find('.');
  const size_t dot2 = token.rfind('.');
  const std::string header = token.substr(0, dot1);
  const std::string payload = token.substr(dot1 + 1, dot2 - dot1 - 1);
  const std::string signature = token.substr(dot2 + 1);
  const core::TokenKey& real = w.signer().signing_key();
  const std::string kid = real.kid();
  auto head = [](boost::json::object h) { return Base64UrlEncode(boost::json::serialize(h)); };
  auto signed_by = [](const core::TokenKey& key, const std::string& h, const std::string& p) {
    return h + "." + p + "." + Base64UrlEncode(key.Sign(h + "." + p));
  };
  auto claims = boost::json::parse(Base64UrlDecode(payload).value()).as_object();
  auto with_claim = [&](const char* name, boost::json::value v) {
    boost::json::object c = claims;
    c[name] = std::move(v);
    return Base64UrlEncode(boost::json::serialize(c));
  };
  auto attacker = core::TokenKey::Generate(core::TokenAlg::kEdDSA);

  // The controls: the token itself, and the same header re-serialised and signed with the
  // server's own key, are admissions (so each trick below fails for its trick alone).
  const std::string resigned =
      signed_by(real, head({{"alg", "HS256"}, {"typ", "JWT"}, {"kid", kid}}), payload);
  for (const std::string& good : {token, resigned}) {
    EXPECT_TRUE(Json(w.Call(verb::post, "/v1/tokens/verify", Verify(good))).at("valid").as_bool());
    std::optional<Response> pass = w.SendRequest(GateAsk("r", good));
    ASSERT_TRUE(pass.has_value());
    EXPECT_EQ(pass->status, 200u) << pass->body;
    EXPECT_FALSE(testing::HeaderOf(*pass, "X-Anteroom-Session").empty());
    Response enter = w.Call(verb::post, "/v1/gate/r/enter", Verify(good));
    EXPECT_EQ(enter.status, 200u) << enter.body;
    EXPECT_FALSE(testing::HeaderOf(enter, "Set-Cookie").empty());
  }

  const std::vector<std::pair<std::string, std::string>> tricks = {
      {"alg none, no signature",
       head({{"alg", "none"}, {"typ", "JWT"}, {"kid", kid}}) + "." + payload + "."},
      {"alg none, the signature kept",
       head({{"alg", "none"}, {"typ", "JWT"}, {"kid", kid}}) + "." + payload + "." + signature},
      {"alg HS256 -> EdDSA, the signature kept",
       head({{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", kid}}) + "." + payload + "." + signature},
      {"alg HS256 -> ES256, the signature kept",
       head({{"alg", "ES256"}, {"typ", "JWT"}, {"kid", kid}}) + "." + payload + "." + signature},
      {"EdDSA signed by another key, naming this kid",
       signed_by(*attacker, head({{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", kid}}), payload)},
      {"EdDSA signed by another key, naming its own kid",
       signed_by(*attacker, head({{"alg", "EdDSA"}, {"typ", "JWT"}, {"kid", attacker->kid()}}),
                 payload)},
      {"an unknown kid (signed with the real key)",
       signed_by(real, head({{"alg", "HS256"}, {"typ", "JWT"}, {"kid", "someone-else"}}), payload)},
      {"crit (signed with the real key)", signed_by(real,
                                                    head({{"alg", "HS256"},
                                                          {"typ", "JWT"},
                                                          {"kid", kid},
                                                          {"crit", boost::json::array{"exp"}},
                                                          {"exp", 1}}),
                                                    payload)},
      {"another admission in the payload",
       header + "." + with_claim("adm", claims.at("adm").to_number<int64_t>() + 1) + "." +
           signature},
      {"another room in the payload", header + "." + with_claim("room", "other") + "." + signature},
      {"a longer life in the payload",
       header + "." + with_claim("exp", claims.at("exp").to_number<int64_t>() + 86'400) + "." +
           signature},
  };
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/other", R"({"capacity": 5})").status, 200u);
  for (const auto& [trick, forged] : tricks) {
    SCOPED_TRACE(trick);
    Response verify = w.Call(verb::post, "/v1/tokens/verify", Verify(forged));
    ASSERT_EQ(verify.status, 200u) << verify.body;
    EXPECT_FALSE(Json(verify).at("valid").as_bool()) << verify.body;
    std::optional<Response> gate = w.SendRequest(GateAsk("r", forged));
    ASSERT_TRUE(gate.has_value());
    EXPECT_EQ(gate->status, 302u) << "not an admission: the page is sent to wait";
    EXPECT_TRUE(testing::HeaderOf(*gate, "X-Anteroom-Session").empty());
    Response enter = w.Call(verb::post, "/v1/gate/r/enter", Verify(forged));
    EXPECT_EQ(ErrorMessage(enter), wire::kGateNotAdmitted) << enter.body;
    EXPECT_TRUE(testing::HeaderOf(enter, "Set-Cookie").empty());
  }
}

TEST(TokensFamilyTest, TheTokenIsRequired) {
  FamilyWorld w;
  Response missing = w.Call(verb::post, "/v1/tokens/verify", "{}");
  EXPECT_EQ(missing.status, 400u);
  EXPECT_EQ(ErrorMessage(missing), wire::FieldRequired("token"));
  Response wrong = w.Call(verb::post, "/v1/tokens/verify", R"({"token": 1})");
  EXPECT_EQ(ErrorMessage(wrong), wire::NotAString("token"));
  EXPECT_EQ(w.Call(verb::post, "/v1/tokens/verify", "").status, 400u);
}

}  // namespace
}  // namespace anteroom::server
