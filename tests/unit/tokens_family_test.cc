// The token family's handler in process: a token from a check-in verifies; malformed, forged
// and revoked ones do not.
#include <gtest/gtest.h>

#include "common/wire_errors.h"
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
