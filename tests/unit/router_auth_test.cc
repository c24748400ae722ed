// The admin key on the router: Bearer or HTTP Basic (any user, the key as password), the 401
// answer and its challenge, auth off without a key; and the latency series of each route.
#include <openssl/evp.h>

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "http/router.h"

namespace anteroom::http {
namespace {

constexpr char kKey[] = "s3cret:key+/=";  // a colon and base64's own characters in a password

std::string Base64(std::string_view text) {
  std::string out(4 * ((text.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Basic(std::string_view user_and_password) {
  return "Basic " + Base64(user_and_password);
}

TEST(AdminKeyTest, BearerWithTheKeyPasses) {
  EXPECT_TRUE(HasAdminKey(std::string("Bearer ") + kKey, kKey));
  EXPECT_TRUE(HasAdminKey(std::string("bearer ") + kKey, kKey)) << "schemes are case-insensitive";
  EXPECT_FALSE(HasAdminKey("Bearer wrong", kKey));
  EXPECT_FALSE(HasAdminKey(std::string("Bearer ") + kKey + "x", kKey));
  EXPECT_FALSE(HasAdminKey(std::string("Bearer  ") + kKey, kKey));
  EXPECT_FALSE(HasAdminKey("Bearer ", kKey));
  EXPECT_FALSE(HasAdminKey("Bearer", kKey));
  EXPECT_FALSE(HasAdminKey(kKey, kKey));
  EXPECT_FALSE(HasAdminKey("", kKey));
}

TEST(AdminKeyTest, BasicWithAnyUserAndTheKeyAsPasswordPasses) {
  EXPECT_TRUE(HasAdminKey(Basic(std::string("admin:") + kKey), kKey));
  EXPECT_TRUE(HasAdminKey(Basic(std::string(":") + kKey), kKey)) << "an empty user name";
  EXPECT_TRUE(HasAdminKey(Basic(std::string("prometheus:") + kKey), kKey));
  EXPECT_TRUE(HasAdminKey("BASIC " + Base64(std::string("u:") + kKey), kKey));
  // Every padding length decodes right: keys of 1, 2 and 3 bytes past a multiple of 3.
  for (std::string key : {"k", "ke", "key", "key1", "key12", "key123"}) {
    for (std::string user : {"", "a", "ab"}) {
      std::string header = Basic(user + ":" + key);
      EXPECT_TRUE(HasAdminKey(header, key)) << header;
      EXPECT_FALSE(HasAdminKey(header, key + "x")) << header;
      EXPECT_FALSE(HasAdminKey(header, "x" + key.substr(1))) << header;
    }
  }
}

TEST(AdminKeyTest, WrongOrMalformedBasicIsRefused) {
  EXPECT_FALSE(HasAdminKey(Basic("admin:wrong"), kKey));
  EXPECT_FALSE(HasAdminKey(Basic("nocolon"), "nocolon")) << "no colon: not user:password";
  EXPECT_FALSE(HasAdminKey(Basic(std::string(kKey) + ":admin"), kKey)) << "the key as the user";
  EXPECT_FALSE(HasAdminKey(std::string("Basic ") + kKey, kKey)) << "not base64";
  EXPECT_FALSE(HasAdminKey("Basic ", kKey));
  EXPECT_FALSE(HasAdminKey("Basic", kKey));
  std::string good = Base64(std::string("u:") + kKey);
  EXPECT_FALSE(HasAdminKey("Basic  " + good, kKey));
  EXPECT_FALSE(HasAdminKey("Basic " + good + " ", kKey));
  EXPECT_FALSE(HasAdminKey("Basic " + good.substr(0, good.size() - 1), kKey)) << "cut short";
  EXPECT_FALSE(HasAdminKey("Basic " + good + "=", kKey));
  EXPECT_FALSE(HasAdminKey("Basic " + good + "====", kKey));
  EXPECT_FALSE(HasAdminKey("Basic ====", kKey));
  EXPECT_FALSE(HasAdminKey("Basic dTp=a2V5", kKey)) << "padding in the middle";
  EXPECT_FALSE(HasAdminKey("Basic dTprZXk-", kKey)) << "base64url is not base64";
  EXPECT_FALSE(HasAdminKey("Digest " + good, kKey));
}

TEST(AdminKeyTest, NoKeyMeansAuthOff) {
  EXPECT_TRUE(HasAdminKey("", ""));
  EXPECT_TRUE(HasAdminKey("Bearer anything", ""));
  EXPECT_TRUE(HasAdminKey("Basic !!!", ""));
}

// Dispatches one request and answers what the router responded (synchronously here).
Response Call(const Router& router, http::verb method, std::string target,
              std::string authorization = {}) {
  Request request;
  request.method = method;
  request.target = std::move(target);
  request.authorization = std::move(authorization);
  std::optional<Response> answer;
  router.Dispatch(request, [&](Response r) { answer = std::move(r); });
  EXPECT_TRUE(answer.has_value());
  return answer.value_or(Response{});
}

std::optional<std::string> Header(const Response& r, std::string_view name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::unique_ptr<Router> MakeRouter(std::string key) {
  auto router = std::make_unique<Router>(std::move(key));
  Handler ok = [](const Request&, Respond respond) { respond(Response{}); };
  router->Add(http::verb::get, "/admin", ok, RouteOptions{.scope = Scope::kAdmin});
  router->Add(http::verb::get, "/open", ok);
  return router;
}

TEST(RouterAuthTest, AdminRoutesAnswer401WithABasicChallenge) {
  auto owner = MakeRouter(kKey);
  const Router& router = *owner;
  for (const std::string& auth :
       {std::string(), std::string("Bearer nope"), Basic("u:nope"), std::string("Basic %%%%")}) {
    Response r = Call(router, http::verb::get, "/admin", auth);
    EXPECT_EQ(r.status, 401u) << auth;
    EXPECT_EQ(Header(r, "WWW-Authenticate"), R"(Basic realm="anteroom", charset="UTF-8")");
    EXPECT_NE(r.body.find("unauthorized"), std::string::npos) << r.body;
  }
  EXPECT_EQ(Call(router, http::verb::get, "/admin", std::string("Bearer ") + kKey).status, 200u);
  EXPECT_EQ(Call(router, http::verb::get, "/admin", Basic(std::string("x:") + kKey)).status, 200u);
  EXPECT_EQ(Call(router, http::verb::get, "/open").status, 200u);
}

TEST(RouterAuthTest, WithoutAKeyAdminRoutesAreOpen) {
  auto owner = MakeRouter("");
  const Router& router = *owner;
  EXPECT_EQ(Call(router, http::verb::get, "/admin").status, 200u);
  EXPECT_EQ(Call(router, http::verb::get, "/admin", "Basic garbage").status, 200u);
}

TEST(RouterMetricsTest, EachAnswerIsCountedUnderItsRouteOrUnmatched) {
  auto owner = MakeRouter(kKey);
  const Router& router = *owner;
  Call(router, http::verb::get, "/open");
  Call(router, http::verb::get, "/open");
  Call(router, http::verb::get, "/admin");  // 401: still the route's
  Call(router, http::verb::get, "/nowhere");
  Call(router, http::verb::post, "/open");  // 405
  Call(router, http::verb::propfind, "/x");
  const HttpMetrics& m = router.http_metrics();
  auto count = [&](std::string_view method, std::string_view route) -> uint64_t {
    for (HttpMetrics::SeriesId id = 0; id < m.size(); ++id) {
      if (m.method(id) == method && m.route(id) == route) return m.Read(id).count;
    }
    ADD_FAILURE() << "no series " << method << " " << route;
    return 0;
  };
  EXPECT_EQ(count("GET", "/open"), 2u);
  EXPECT_EQ(count("GET", "/admin"), 1u);
  EXPECT_EQ(count("GET", "unmatched"), 1u);
  EXPECT_EQ(count("POST", "unmatched"), 1u);
  EXPECT_EQ(count("other", "unmatched"), 1u);
  EXPECT_EQ(count("PUT", "unmatched"), 0u);
}

}  // namespace
}  // namespace anteroom::http
