// Browsers and anteroom: which origins may call the public room API (CORS),
// which requests of other origins are refused (CSRF), preflights, and bodies that are not JSON.
// The rules are in http/origin_policy.h; the router applies them from the route tables.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "family_world.h"
#include "http/origin_policy.h"

namespace anteroom::server {
namespace {

using http::NormalizeOrigin;
using http::OriginPolicyOptions;
using testing::FamilyWorld;
using testing::HeaderOf;

namespace ip = boost::asio::ip;

TEST(OriginPolicyTest, NormalizesOriginsAsBrowsersSendThem) {
  EXPECT_EQ(NormalizeOrigin("https://Shop.Example"), "https://shop.example");
  EXPECT_EQ(NormalizeOrigin("https://shop.example:443"), "https://shop.example");
  EXPECT_EQ(NormalizeOrigin("http://shop.example:80"), "http://shop.example");
  EXPECT_EQ(NormalizeOrigin("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
  EXPECT_EQ(NormalizeOrigin("http://[::1]:8080"), "http://[::1]:8080");
  EXPECT_EQ(NormalizeOrigin("HTTPS://shop.example:8443"), "https://shop.example:8443");
  // Not origins: opaque ("null"), paths, queries, user info, other schemes, junk.
  for (const char* bad :
       {"null", "", "https://shop.example/", "https://shop.example/x", "https://shop.example?q",
        "https://u:p@shop.example", "ftp://shop.example", "file:///etc/passwd", "shop.example",
        "https://", "javascript:alert(1)"}) {
    EXPECT_FALSE(NormalizeOrigin(bad).has_value()) << bad;
  }
}

TEST(OriginPolicyTest, OriginOfATargetUrl) {
  EXPECT_EQ(OriginOfUrl("https://Shop.example/sale?x=1"), "https://shop.example");
  EXPECT_EQ(OriginOfUrl("http://127.0.0.1:9000/app"), "http://127.0.0.1:9000");
  EXPECT_FALSE(OriginOfUrl("/demo").has_value()) << "a relative target is the same origin";
  EXPECT_FALSE(OriginOfUrl("mailto:x@y").has_value());
  // Not an origin a browser would send: the port runs into the host (common/uri_shape.h).
  EXPECT_FALSE(OriginOfUrl("https://shop.example:443evil.example/").has_value());
}

TEST(OriginPolicyTest, SameOriginByHostAndTrustedForwardedHost) {
  TrustedProxies proxies;
  std::string error;
  ASSERT_TRUE(proxies.Add("10.0.0.0/8", &error)) << error;
  OriginPolicy policy(OriginPolicyOptions{.cors_origins = {}, .trusted_proxies = proxies});
  ip::address client = ip::make_address("203.0.113.7");
  ip::address proxy = ip::make_address("10.1.2.3");
  EXPECT_TRUE(policy.SameOrigin("http://127.0.0.1:8080", "127.0.0.1:8080", "", client));
  EXPECT_TRUE(policy.SameOrigin("https://shop.example", "shop.example:443", "", client));
  EXPECT_TRUE(policy.SameOrigin("https://SHOP.example", "shop.example", "", client));
  EXPECT_FALSE(policy.SameOrigin("http://127.0.0.1:8081", "127.0.0.1:8080", "", client));
  EXPECT_FALSE(policy.SameOrigin("null", "127.0.0.1:8080", "", client));
  // Behind a proxy the Host is the upstream's; the proxy's X-Forwarded-Host names the site,
  // believed from a trusted proxy only.
  EXPECT_TRUE(policy.SameOrigin("https://shop.example", "127.0.0.1:8080", "shop.example", proxy));
  EXPECT_TRUE(
      policy.SameOrigin("https://shop.example", "127.0.0.1:8080", "evil, shop.example", proxy));
  EXPECT_FALSE(policy.SameOrigin("https://shop.example", "127.0.0.1:8080", "shop.example", client));
}

TEST(OriginPolicyTest, CrossOriginByListAndByRoomTargets) {
  OriginPolicy policy(
      OriginPolicyOptions{.cors_origins = {"https://app.example:8443"}, .trusted_proxies = {}});
  EXPECT_TRUE(policy.AllowsCrossOrigin("https://app.example:8443"));
  EXPECT_FALSE(policy.AllowsCrossOrigin("https://app.example"));
  EXPECT_FALSE(policy.AllowsCrossOrigin("https://shop.example"));
  policy.NoteRoom("sale", "https://shop.example");
  policy.NoteRoom("other", "https://shop.example");
  EXPECT_TRUE(policy.AllowsCrossOrigin("https://shop.example"));
  policy.NoteRoom("sale", std::nullopt);
  EXPECT_TRUE(policy.AllowsCrossOrigin("https://shop.example")) << "room 'other' still has it";
  policy.SetRooms({});
  EXPECT_FALSE(policy.AllowsCrossOrigin("https://shop.example"));
  EXPECT_FALSE(policy.AllowsCrossOrigin("null"));

  OriginPolicy any(OriginPolicyOptions{.cors_origins = {"*"}, .trusted_proxies = {}});
  EXPECT_TRUE(any.AllowsCrossOrigin("https://anything.example"));
  EXPECT_FALSE(any.AllowsCrossOrigin("null")) << "an opaque origin is never listed";
}

TEST(OriginPolicyTest, BadListedOriginsFailStartUp) {
  for (const char* bad : {"shop.example", "https://shop.example/path", "null", ""}) {
    EXPECT_THROW(OriginPolicy(OriginPolicyOptions{.cors_origins = {bad}, .trusted_proxies = {}}),
                 std::invalid_argument)
        << bad;
  }
}

// A browser's request: Host is the server's own, Origin the page's.
Request BrowserRequest(http::verb method, std::string target, std::string origin,
                       std::string body = {}, std::string content_type = "application/json",
                       std::string authorization = {}) {
  Request r;
  r.method = method;
  r.target = std::move(target);
  r.body = std::move(body);
  r.origin = std::move(origin);
  r.host = "127.0.0.1:8080";
  if (!r.body.empty()) r.content_type = std::move(content_type);
  r.authorization = std::move(authorization);
  r.peer = ip::make_address("127.0.0.1");
  return r;
}

constexpr char kSelf[] = "http://127.0.0.1:8080";
constexpr char kListed[] = "https://app.example";
constexpr char kEvil[] = "https://evil.example";

std::string AdminBearer() { return "Bearer " + std::string(testing::kAdminKey); }

class OriginRoutesTest : public ::testing::Test {
 protected:
  OriginRoutesTest() {
    world_.AllowOrigins({kListed});
    EXPECT_EQ(world_.Admin(http::verb::put, "/v1/rooms/r", R"({"capacity":1})").status, 200u);
  }
  Response Send(Request r) {
    std::optional<Response> answer = world_.SendRequest(std::move(r));
    EXPECT_TRUE(answer.has_value());
    return answer ? std::move(*answer) : Response{};
  }
  int64_t Active() {
    return testing::Json(world_.Admin(http::verb::get, "/v1/rooms/r")).at("active").as_int64();
  }

  FamilyWorld world_;
};

// Cross-site request forgery: a page of another site posts a form to an admin route while the
// browser holds the operator's credentials. Refused before the key is looked at.
TEST_F(OriginRoutesTest, CrossSiteFormsToAdminRoutesAreRefused) {
  Response r = Send(BrowserRequest(http::verb::put, "/v1/rooms/pwned", kEvil, R"({"capacity":5})",
                                   "text/plain", AdminBearer()));
  EXPECT_EQ(r.status, 403u) << r.body;
  EXPECT_EQ(testing::ErrorCode(r), "origin_not_allowed");
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), "");
  // A listed origin is listed for the public room API, not for the admin routes.
  r = Send(BrowserRequest(http::verb::delete_, "/v1/rooms/r", kListed, "", "", AdminBearer()));
  EXPECT_EQ(r.status, 403u) << r.body;
  EXPECT_EQ(world_.Admin(http::verb::get, "/v1/rooms/pwned").status, 404u);
  EXPECT_EQ(world_.Admin(http::verb::get, "/v1/rooms/r").status, 200u);
  // The admin page's own origin may.
  r = Send(BrowserRequest(http::verb::put, "/v1/rooms/mine", kSelf, R"({"capacity":5})",
                          "application/json", AdminBearer()));
  EXPECT_EQ(r.status, 200u) << r.body;
}

// Forms can only send these types, without a preflight; no JSON route takes them.
TEST_F(OriginRoutesTest, NonJsonBodiesAreRefusedWithoutAnOrigin) {
  for (const char* type : {"text/plain", "application/x-www-form-urlencoded",
                           "multipart/form-data; boundary=x", "text/json", "application/jsonx"}) {
    Response r = Send(BrowserRequest(http::verb::post, "/v1/rooms/r/check", "", "{}", type));
    EXPECT_EQ(r.status, 415u) << type;
    EXPECT_EQ(testing::ErrorCode(r), "unsupported_media_type");
  }
  EXPECT_EQ(Active(), 0) << "nothing joined";
  for (const char* type : {"application/json", "Application/JSON; charset=utf-8",
                           "application/merge-patch+json", ""}) {
    Response r = Send(BrowserRequest(http::verb::post, "/v1/rooms/r/check", "", "{}", type));
    EXPECT_EQ(r.status, 200u) << type << ": " << r.body;
  }
}

TEST_F(OriginRoutesTest, RoomApiFromAnAllowedOriginCarriesCorsHeaders) {
  Response r = Send(BrowserRequest(http::verb::post, "/v1/rooms/r/check", kListed, "{}"));
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), kListed);
  EXPECT_EQ(HeaderOf(r, "Vary"), "Origin");
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Credentials"), "") << "no cookies, no keys";
  // Errors too: the page reads their codes.
  r = Send(BrowserRequest(http::verb::post, "/v1/rooms/nowhere/check", kListed, "{}"));
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), kListed);
  r = Send(BrowserRequest(http::verb::post, "/v1/rooms/r/check", kListed, "{", "application/json"));
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), kListed);
}

TEST_F(OriginRoutesTest, RoomApiFromAnotherOriginIsRefusedAndChangesNothing) {
  Response r = Send(BrowserRequest(http::verb::post, "/v1/rooms/r/check", kEvil, "{}"));
  EXPECT_EQ(r.status, 403u) << r.body;
  EXPECT_EQ(testing::ErrorCode(r), "origin_not_allowed");
  EXPECT_NE(testing::ErrorMessage(r).find("--cors-origin"), std::string::npos);
  EXPECT_EQ(Active(), 0);
  // Reading is answered, without the headers that would let the page see it.
  r = Send(BrowserRequest(http::verb::get, "/v1/rooms/r", kEvil));
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), "");
  // A live channel holds a place in line: refused like a change.
  for (const char* path : {"/v1/rooms/r/events", "/v1/rooms/r/ws"}) {
    Request live = BrowserRequest(http::verb::get, path, kEvil);
    live.websocket = std::string_view(path).ends_with("/ws");
    r = Send(std::move(live));
    EXPECT_EQ(r.status, 403u) << path;
  }
}

TEST_F(OriginRoutesTest, ARoomsTargetOriginMayCallItsApi) {
  const std::string shop = "https://shop.example:8443";
  EXPECT_EQ(Send(BrowserRequest(http::verb::post, "/v1/rooms/r/check", shop, "{}")).status, 403u);
  ASSERT_EQ(world_
                .Admin(http::verb::put, "/v1/rooms/r",
                       R"({"target_url":"https://shop.example:8443/sale"})")
                .status,
            200u);
  Response r = Send(BrowserRequest(http::verb::post, "/v1/rooms/r/check", shop, "{}"));
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), shop);
  ASSERT_EQ(world_.Admin(http::verb::delete_, "/v1/rooms/r").status, 200u);
  EXPECT_EQ(Send(BrowserRequest(http::verb::get, "/v1/rooms/r/events", shop)).status, 403u)
      << "the room's site may no longer once the room is gone";
}

// Found by fuzz_http_request (fuzz/corpus/http_request/regress_origin_not_utf8): the refusal
// named the Origin's bytes as sent, and bytes that are not UTF-8 made the answer not JSON.
TEST_F(OriginRoutesTest, AnOriginOfAnyBytesIsRefusedInJson) {
  std::string origin = "https://app.exampl" + std::string(38, '\xf9') + "e";
  for (http::verb method : {http::verb::options, http::verb::post}) {
    Response r = Send(BrowserRequest(method, "/v1/rooms/r/check", origin, "{}"));
    EXPECT_EQ(r.status, 403u);
    EXPECT_TRUE(testing::Json(r).is_object()) << r.body;
    EXPECT_NE(testing::ErrorMessage(r).find("https://app.exampl???"), std::string::npos);
  }
}

TEST_F(OriginRoutesTest, Preflights) {
  Request pre = BrowserRequest(http::verb::options, "/v1/rooms/r/check", kListed);
  Response r = Send(pre);
  EXPECT_EQ(r.status, 204u) << r.body;
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), kListed);
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Methods"), "POST");
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Headers"),
            "Content-Type, Anteroom-Session, Anteroom-Token")
      << "a session or token goes in a header, not the URL";
  EXPECT_FALSE(HeaderOf(r, "Access-Control-Max-Age").empty());
  // A path with an admin method lists only the public one.
  r = Send(BrowserRequest(http::verb::options, "/v1/rooms/r", kListed));
  EXPECT_EQ(r.status, 204u);
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Methods"), "GET");
  // Not allowed: another origin, or a route for no other origin.
  r = Send(BrowserRequest(http::verb::options, "/v1/rooms/r/check", kEvil));
  EXPECT_EQ(r.status, 403u);
  EXPECT_EQ(HeaderOf(r, "Access-Control-Allow-Origin"), "");
  r = Send(BrowserRequest(http::verb::options, "/v1/queues/q/fetch", kListed));
  EXPECT_EQ(r.status, 403u);
  // Not a browser's: what the path allows.
  r = Send(BrowserRequest(http::verb::options, "/v1/rooms/r", ""));
  EXPECT_EQ(r.status, 204u);
  EXPECT_EQ(HeaderOf(r, "Allow"), "PUT, GET, DELETE, OPTIONS");
  // A path with no routes is still 404.
  EXPECT_EQ(Send(BrowserRequest(http::verb::options, "/nowhere", kListed)).status, 404u);
}

}  // namespace
}  // namespace anteroom::server
