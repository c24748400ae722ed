// The gate's handlers in process: the decision a proxy asks for before each request
// of a protected site, the waiting page's hand-over of its admission (enter) and the leave
// link, over a memory backend with a fake clock. The real proxies are in the integration and
// browser tests.
#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/wire_errors.h"
#include "family_world.h"
#include "server/gate_settings.h"

namespace anteroom::server {
namespace {

using http::verb;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::FamilyWorld;
using testing::HeaderOf;
using testing::Json;

constexpr char kShop[] = "shop.example";
// Over https with no cookie_domain: a __Host- cookie (no sibling subdomain can set it).
constexpr char kCookie[] = "__Host-anteroom_shop";

// What nginx (auth_request) or Caddy (forward_auth) sends: the page's own headers (a browser's
// page load unless `more` says otherwise) and the request it asks about.
Request Asked(std::string target, std::string uri, std::string cookie = {},
              std::vector<std::pair<std::string, std::string>> more = {}) {
  Request r;
  r.method = verb::get;
  r.target = std::move(target);
  r.host = "127.0.0.1:8080";
  r.peer = boost::asio::ip::make_address("127.0.0.1");
  r.fields.set("X-Forwarded-Proto", "https");
  r.fields.set("X-Forwarded-Host", kShop);
  r.fields.set("X-Forwarded-Uri", uri);
  r.fields.set("Accept", "text/html,application/xhtml+xml,*/*;q=0.8");
  r.fields.set("Sec-Fetch-Mode", "navigate");
  if (!cookie.empty()) r.fields.set("Cookie", cookie);
  for (auto& [name, value] : more) r.fields.set(name, value);
  return r;
}

// The cookie a Set-Cookie line sets ("name=value"), "" when none.
std::string CookieOf(const Response& r) {
  std::string line = HeaderOf(r, "Set-Cookie");
  return line.substr(0, line.find(';'));
}

class GateTest : public ::testing::Test {
 protected:
  GateTest() {
    // The proxy (127.0.0.1) is trusted: its X-Forwarded-Proto https is believed.
    EXPECT_TRUE(world_.services().trusted_proxies.Add("127.0.0.1/32", nullptr));
    Put(R"({"capacity": 2, "target_url": "https://shop.example/"})");
  }
  void Put(const std::string& body) {
    Response r = world_.Admin(verb::put, "/v1/rooms/shop", body);
    ASSERT_EQ(r.status, 200u) << r.body;
  }
  Response Gate(Request r) {
    std::optional<Response> answer = world_.SendRequest(std::move(r));
    EXPECT_TRUE(answer.has_value());
    return answer ? std::move(*answer) : Response{};
  }
  Response Ask(const std::string& uri, const std::string& cookie = {},
               std::vector<std::pair<std::string, std::string>> more = {}) {
    return Gate(Asked("/v1/gate/shop", uri, cookie, std::move(more)));
  }
  int64_t Active() {
    return Json(world_.Call(verb::get, "/v1/rooms/shop")).at("active").as_int64();
  }
  int64_t Waiting() {
    return Json(world_.Call(verb::get, "/v1/rooms/shop")).at("waiting").as_int64();
  }
  // A visitor let in on the spot: the cookie it got.
  std::string Visitor() {
    Response r = Ask("/");
    EXPECT_EQ(r.status, 200u) << r.body;
    return CookieOf(r);
  }

  FamilyWorld world_;
};

TEST_F(GateTest, AFreeRoomLetsVisitorsInOnTheSpotWithACookie) {
  Response r = Ask("/product/42?x=1");
  ASSERT_EQ(r.status, 200u) << r.body;
  std::string line = HeaderOf(r, "Set-Cookie");
  EXPECT_TRUE(line.starts_with(std::string(kCookie) + "=ey")) << line;
  for (const char* attribute : {"; Path=/", "; HttpOnly", "; SameSite=Lax", "; Secure"}) {
    EXPECT_NE(line.find(attribute), std::string::npos) << attribute << " in " << line;
  }
  EXPECT_EQ(HeaderOf(r, "X-Anteroom-Room"), "shop");
  EXPECT_EQ(HeaderOf(r, "X-Anteroom-Session").size(), 22u);
  EXPECT_EQ(Active(), 1);
  // The cookie passes, with the same session, and takes no other slot.
  std::string cookie = CookieOf(r);
  for (int i = 0; i < 5; ++i) {
    Response again = Ask("/style.css", cookie);
    EXPECT_EQ(again.status, 200u) << again.body;
    EXPECT_EQ(HeaderOf(again, "X-Anteroom-Session"), HeaderOf(r, "X-Anteroom-Session"));
    EXPECT_EQ(HeaderOf(again, "Set-Cookie"), "") << "young tokens are not renewed";
  }
  EXPECT_EQ(Active(), 1);
}

TEST_F(GateTest, AFullRoomSendsThePageToWaitKeepingTheUrlAskedFor) {
  Visitor();
  Visitor();
  Response r = Ask("/product/42?x=1");
  EXPECT_EQ(r.status, 302u) << r.body;
  EXPECT_EQ(HeaderOf(r, "Location"),
            "/wait/shop?return=https%3A%2F%2Fshop.example%2Fproduct%2F42%3Fx%3D1");
  EXPECT_EQ(HeaderOf(r, "Set-Cookie"), "");
  EXPECT_EQ(Waiting(), 0) << "the gate holds no place: the waiting page joins";
  EXPECT_EQ(Active(), 2);
  // nginx's auth_request passes only 2xx/401/403: 401, the same Location.
  Response nginx = Gate(Asked("/v1/gate/shop?proxy=nginx", "/product/42?x=1"));
  EXPECT_EQ(nginx.status, 401u);
  EXPECT_EQ(HeaderOf(nginx, "Location"), HeaderOf(r, "Location"));
  // An app: the line as JSON.
  Response app = Ask("/api/cart", "", {{"Accept", "application/json"}});
  EXPECT_EQ(app.status, 429u);
  EXPECT_EQ(HeaderOf(app, "Retry-After"), "2");
  boost::json::value line = Json(app);
  EXPECT_EQ(line.at("status").as_string(), "waiting");
  EXPECT_EQ(line.at("position").as_int64(), 1);
  EXPECT_EQ(line.at("live").as_string(), "/v1/rooms/shop/ws");
  EXPECT_GT(line.at("retry_after_ms").as_int64(), 0);
  // With every field of a check's status (an app reads the gate and the check alike).
  for (std::string_view field :
       {"session", "status", "position", "waiting", "active", "capacity", "eta_ms", "phase",
        "queueing_method", "refresh_after_ms", "starts_in_ms", "ends_in_ms", "odds", "token"}) {
    EXPECT_TRUE(line.as_object().contains(field)) << field;
  }
  EXPECT_FALSE(line.at("phase").as_string().empty());
  EXPECT_EQ(line.at("queueing_method").as_string(), "fifo");
  EXPECT_EQ(line.at("refresh_after_ms").as_int64(), line.at("retry_after_ms").as_int64());
  // nginx's auth_request fails anything but 2xx/401/403 with a 500: 401 there too.
  Request nginx_app = Asked("/v1/gate/shop?proxy=nginx", "/product/42?x=1");
  nginx_app.fields.set("Accept", "application/json");
  Response nginx_json = Gate(std::move(nginx_app));
  EXPECT_EQ(nginx_json.status, 401u);
  EXPECT_EQ(HeaderOf(nginx_json, "Location"), HeaderOf(r, "Location"));
  EXPECT_EQ(Json(nginx_json).at("status").as_string(), "waiting");
}

TEST_F(GateTest, SomebodyWaitingMeansNoneIsLetInOnTheSpot) {
  Visitor();
  ASSERT_EQ(world_.Call(verb::post, "/v1/rooms/shop/check", "").status, 200u);  // 2nd slot
  ASSERT_EQ(world_.Call(verb::post, "/v1/rooms/shop/check", "").status, 200u);  // waits
  world_.clock().Advance(GateCache::kFreshMs);
  // A slot frees, but someone waits for it: a newcomer goes behind them.
  ASSERT_EQ(Waiting(), 1);
  EXPECT_EQ(Ask("/").status, 302u);
  EXPECT_EQ(Waiting(), 1) << "no ghost left in the line";
}

TEST_F(GateTest, ForgedExpiredRevokedAndForeignCookiesAreNotAdmissions) {
  std::string cookie = Visitor();
  Visitor();
  std::string token = cookie.substr(cookie.find('=') + 1);
  // A changed signature.
  std::string forged = cookie;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  Response r = Ask("/", forged);
  EXPECT_EQ(r.status, 302u) << r.body;
  EXPECT_NE(HeaderOf(r, "Set-Cookie").find("Max-Age=0"), std::string::npos) << "cleared";
  // Another room's token (same key): not this room's admission.
  Put(R"({"capacity": 2})");
  ASSERT_EQ(world_.Admin(verb::put, "/v1/rooms/other", R"({"capacity": 5})").status, 200u);
  Response other = Gate(Asked("/v1/gate/other", "/"));
  ASSERT_EQ(other.status, 200u);
  EXPECT_EQ(
      Ask("/", kCookie + ("=" + CookieOf(other).substr(CookieOf(other).find('=') + 1))).status,
      302u);
  // Revoked: the session left for good through the API.
  Response verify = world_.Admin(verb::post, "/v1/tokens/verify", R"({"token": ")" + token + "\"}");
  std::string session(Json(verify).at("session").as_string());
  ASSERT_EQ(world_
                .Call(verb::post, "/v1/rooms/shop/leave",
                      R"({"session": ")" + session + R"(", "final": true})")
                .status,
            200u);
  EXPECT_EQ(Ask("/", cookie).status, 302u) << "revoked; the gate's counts are a second old";
  world_.clock().Advance(GateCache::kFreshMs);
  EXPECT_EQ(Ask("/", cookie).status, 200u) << "a free slot again: let in anew";
  EXPECT_NE(HeaderOf(Ask("/", cookie), "X-Anteroom-Session"), session);
}

TEST_F(GateTest, AnOldTokenIsRenewedWhileItsAdmissionIsHeld) {
  Put(R"({"idle_timeout_ms": null})");
  std::string cookie = Visitor();
  world_.clock().Advance(world_.signer().ttl_ms() / 2 + 1000);
  Response half = Ask("/", cookie);
  ASSERT_EQ(half.status, 200u);
  std::string renewed = CookieOf(half);
  EXPECT_TRUE(renewed.starts_with(std::string(kCookie) + "=ey"));
  EXPECT_NE(renewed, cookie);
  // Past its expiry, the admission still held: renewed too (the room decides, not the clock).
  world_.clock().Advance(world_.signer().ttl_ms());
  Response late = Ask("/", cookie);
  EXPECT_EQ(late.status, 200u) << late.body;
  EXPECT_FALSE(CookieOf(late).empty());
}

TEST_F(GateTest, GatedRequestsAreActivityOncePerFewSeconds) {
  Put(R"({"idle_timeout_ms": 20000, "grace_ms": 1000})");
  std::string cookie = Visitor();
  // Browsing keeps the slot past the idle timeout.
  for (int i = 0; i < 10; ++i) {
    world_.clock().Advance(4000);
    world_.backend().RunDue();
    ASSERT_EQ(Ask("/page", cookie).status, 200u) << "at " << i;
  }
  EXPECT_EQ(Active(), 1);
  // Silent past the idle timeout and grace: the slot is gone, the cookie with it.
  world_.clock().Advance(25'000);
  world_.backend().RunDue();
  EXPECT_EQ(Active(), 0);
  Visitor();
  Visitor();
  EXPECT_EQ(Ask("/", cookie).status, 302u);
  // At most one touch per session per TouchEvery: asked 50 times at once, noted once.
  GateCache cache(world_.backend(), world_.clock());
  int touches = 0;
  for (int i = 0; i < 50; ++i) touches += cache.ShouldTouch("shop", "s", 5000);
  EXPECT_EQ(touches, 1);
  world_.clock().Advance(5000);
  EXPECT_TRUE(cache.ShouldTouch("shop", "s", 5000));
}

TEST_F(GateTest, BypassRulesPassWithoutASlot) {
  Put(R"({"gate": {"bypass": {"paths": ["/static/", "*.css", "/healthz"],
                               "headers": {"User-Agent": "*Googlebot*"}}}})");
  Visitor();
  Visitor();
  for (const char* uri : {"/static/app.js", "/static/", "/a/b/site.css?v=3", "/healthz"}) {
    Response r = Ask(uri);
    EXPECT_EQ(r.status, 200u) << uri;
    EXPECT_EQ(HeaderOf(r, "Set-Cookie"), "") << uri;
    EXPECT_EQ(HeaderOf(r, "X-Anteroom-Session"), "") << uri;
  }
  EXPECT_EQ(Ask("/", "", {{"User-Agent", "Mozilla/5.0 (compatible; googlebot/2.1)"}}).status, 200u);
  for (const char* uri : {"/statics", "/healthz/x", "/x.css/y", "/"}) {
    EXPECT_EQ(Ask(uri).status, 302u) << uri;
  }
  EXPECT_EQ(Ask("/", "", {{"User-Agent", "curl/8"}}).status, 302u);
  EXPECT_EQ(Active(), 2);
}

TEST_F(GateTest, EnterSetsTheCookieAndGoesBackOnlyToAllowedHosts) {
  Put(R"({"capacity": 5, "gate": {"hosts": ["www.shop.example"]}})");
  Response joined = world_.Call(verb::post, "/v1/rooms/shop/check", "");
  std::string token(Json(joined).at("token").as_string());
  auto enter = [&](const std::string& body) {
    Request r = Asked("/v1/gate/shop/enter", "/");
    r.method = verb::post;
    r.body = body;
    r.content_type = "application/json";
    return Gate(std::move(r));
  };
  Response r =
      enter(R"({"token": ")" + token + R"(", "return": "https://shop.example/product/42?x=1"})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(Json(r).at("location").as_string(), "https://shop.example/product/42?x=1");
  EXPECT_EQ(CookieOf(r), kCookie + ("=" + token));
  EXPECT_NE(HeaderOf(r, "Set-Cookie").find("HttpOnly"), std::string::npos);
  EXPECT_EQ(enter(R"({"token": ")" + token + R"(", "return": "https://www.shop.example/"})").status,
            200u);
  EXPECT_EQ(Json(enter(R"({"token": ")" + token + R"("})")).at("location").as_string(),
            "https://shop.example/")
      << "no return: the room's target";
  for (const char* bad :
       {"https://evil.example/", "https://shop.example.evil.example/", "javascript:alert(1)",
        "//evil.example/", "/relative", "https://user@evil.example/", "ftp://shop.example/"}) {
    Response refused = enter(R"({"token": ")" + token + R"(", "return": ")" + bad + "\"}");
    EXPECT_EQ(refused.status, 400u) << bad;
    EXPECT_EQ(ErrorMessage(refused), wire::kGateReturn) << bad;
    EXPECT_EQ(HeaderOf(refused, "Set-Cookie"), "") << bad;
  }
  EXPECT_EQ(ErrorMessage(enter(R"({"token": "x.y.z"})")), wire::kGateNotAdmitted);
}

// The leave page's own POST, as a browser sends it from that page.
Request LeavePost(std::string target, std::string cookie,
                  std::vector<std::pair<std::string, std::string>> more = {}) {
  Request r = Asked(std::move(target), "/", std::move(cookie), std::move(more));
  r.method = verb::post;
  r.fields.set("Sec-Fetch-Mode", "cors");
  if (r.fields.find("Sec-Fetch-Site") == r.fields.end())
    r.fields.set("Sec-Fetch-Site", "same-origin");
  r.origin = std::string(r.fields["Origin"]);
  return r;
}

TEST_F(GateTest, TheLeavePagePostsTheLeaveWhichFreesTheSlotAndClearsTheCookie) {
  std::string first = Visitor();
  Visitor();
  Response waiting = world_.Call(verb::post, "/v1/rooms/shop/check", "");
  ASSERT_EQ(Json(waiting).at("status").as_string(), "waiting");
  const std::string target = "/v1/gate/shop/leave?return=https%3A%2F%2Fshop.example%2Fbye";
  // The link only shows the page that asks (any site can make a browser follow a link).
  Response page = Gate(Asked(target, "/", first, {{"Sec-Fetch-Site", "cross-site"}}));
  EXPECT_EQ(page.status, 200u);
  EXPECT_NE(page.body.find("id=leave-confirm"), std::string::npos);
  EXPECT_NE(page.body.find("rel=icon"), std::string::npos) << "no /favicon.ico through the gate";
  EXPECT_EQ(HeaderOf(page, "Content-Security-Policy"), "frame-ancestors 'none'");
  EXPECT_EQ(HeaderOf(page, "Set-Cookie"), "");
  EXPECT_EQ(Active(), 2);
  EXPECT_EQ(Waiting(), 1);
  Response r = Gate(LeavePost(target, first));
  EXPECT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(Json(r).at("location").as_string(), "https://shop.example/bye");
  EXPECT_TRUE(Json(r).at("left").as_bool());
  EXPECT_TRUE(HeaderOf(r, "Set-Cookie").starts_with(std::string(kCookie) + "=;"));
  EXPECT_NE(HeaderOf(r, "Set-Cookie").find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(Waiting(), 0) << "the next in line is in at once";
  EXPECT_EQ(Active(), 2);
  // Without a cookie, or to another host: no location, nothing else.
  Response plain = Gate(LeavePost("/v1/gate/shop/leave?return=https%3A%2F%2Fevil.example%2F", ""));
  EXPECT_EQ(plain.status, 200u);
  EXPECT_TRUE(Json(plain).at("location").is_null());
  EXPECT_FALSE(Json(plain).at("left").as_bool());
}

TEST_F(GateTest, LeavingIsRefusedToOtherSites) {
  std::string cookie = Visitor();
  // A link followed from another site (the Lax cookie goes along with a top-level GET).
  Response link =
      Gate(Asked("/v1/gate/shop/leave", "/", cookie,
                 {{"Sec-Fetch-Site", "cross-site"}, {"Referer", "https://evil.example/"}}));
  EXPECT_EQ(link.status, 200u);
  EXPECT_EQ(Active(), 1) << "a GET changes nothing";
  // A post from another site, by its Origin (the router's rule) or its Sec-Fetch-Site.
  for (auto more : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"Origin", "https://evil.example"}},
           {{"Origin", "null"}},
           {{"Sec-Fetch-Site", "cross-site"}},
           {{"Sec-Fetch-Site", "same-site"}}}) {
    Response r = Gate(LeavePost("/v1/gate/shop/leave", cookie, more));
    EXPECT_EQ(r.status, 403u) << more[0].first << ": " << more[0].second << " " << r.body;
    EXPECT_EQ(Active(), 1);
  }
  // The leave page's own post (same origin; "none": typed in or bookmarked).
  Response own = Gate(LeavePost("/v1/gate/shop/leave", cookie, {{"Sec-Fetch-Site", "none"}}));
  EXPECT_EQ(own.status, 200u) << own.body;
  EXPECT_EQ(Active(), 0);
}

TEST_F(GateTest, ProxiedRequestsKeepThePagesOwnOriginAndType) {
  // A form posted to the protected site from elsewhere reaches the gate with the page's Origin
  // and Content-Type: the gate judges it (no 403/415 of the browser rules).
  std::string cookie = Visitor();
  Request r =
      Asked("/v1/gate/shop", "/checkout", cookie, {{"Origin", "https://elsewhere.example"}});
  r.method = verb::post;
  r.origin = "https://elsewhere.example";
  r.content_type = "application/x-www-form-urlencoded";
  EXPECT_EQ(Gate(std::move(r)).status, 200u);
}

TEST_F(GateTest, BypassRulesMatchOnlyPathsAlreadyInTheirNormalForm) {
  Put(R"({"gate": {"bypass": {"paths": ["/static/", "*.css", "/favicon.ico"]}}})");
  Visitor();
  Visitor();
  // What the origin resolves to /secret.html (or serves as it), though the raw text matches.
  for (const char* uri :
       {"/static/../secret.html", "/static/%2e%2e/secret.html", "/static/%2E%2E/secret.html",
        "/static/..%2fsecret.html", "/static/..%2Fsecret.html", "/static/.%2e/secret.html",
        "/static/..\\secret.html", "/static/%5c../secret.html", "/secret.html#.css",
        "/secret.html;.css", "/static/./../secret.html", "/static//../secret.html",
        "/static/%252e%252e/secret.html", "/static/%00/../x", "/static/%zz", "/static/%2",
        "/secret.html%23.css", "/secret.html%3f.css", "/secret.html%3b.css"}) {
    Response r = Ask(uri);
    EXPECT_EQ(r.status, 302u) << uri;
    EXPECT_EQ(HeaderOf(r, "X-Anteroom-Room"), "") << uri;
  }
  // Plain paths, and escapes of nothing structural, still pass.
  for (const char* uri : {"/static/app.js", "/static/a%20b.js", "/x.c%73s", "/favicon.ico",
                          "/static/", "/a/b/site.css?v=../../x"}) {
    EXPECT_EQ(Ask(uri).status, 200u) << uri;
  }
  EXPECT_EQ(Active(), 2);
}

TEST(NormalPathTest, DecodesAndRefusesWhatServersReadDifferently) {
  EXPECT_EQ(NormalPath("/"), "/");
  EXPECT_EQ(NormalPath("/static/"), "/static/");
  EXPECT_EQ(NormalPath("/a%20b/c%41"), "/a b/cA");
  EXPECT_EQ(NormalPath("/caf%C3%A9"), "/caf\xC3\xA9");
  EXPECT_EQ(NormalPath("/..."), "/...") << "three dots are a name";
  for (const char* bad :
       {"",      "x",      "/.",     "/..",      "/a/.",   "/a/..",  "/a/./b", "/a/../b",
        "//a",   "/a//b",  "/%2e",   "/%2E%2e/", "/a%2fb", "/a%5Cb", "/a\\b",  "/a#b",
        "/a;b",  "/a%3Bb", "/a%3fb", "/a%23b",   "/a%25",  "/a%",    "/a%4",   "/a%g0",
        "/a%00", "/a%0a",  "/a b",   "/a\tb",    "/a%7f",  "/a?b"}) {
    EXPECT_EQ(NormalPath(bad), std::nullopt) << bad;
  }
}

TEST_F(GateTest, HeaderSecretsAreKeptAsDigestsAndTheGateIsTheAdminsToRead) {
  Put(R"({"gate": {"hosts": ["shop.example"], "cookie_domain": "shop.example",
                    "bypass": {"headers": {"X-Partner-Token": "s3cr3t-partner-9f8e",
                                           "User-Agent": "*Googlebot*"}}}})");
  // Anyone: the room, without its gate settings.
  for (const char* target : {"/v1/rooms/shop"}) {
    boost::json::value room = Json(world_.Call(verb::get, target));
    EXPECT_EQ(room.as_object().if_contains("gate"), nullptr) << boost::json::serialize(room);
  }
  boost::json::value list = Json(world_.Call(verb::get, "/v1/rooms"));
  std::string listed = boost::json::serialize(list);
  EXPECT_EQ(listed.find("s3cr3t"), std::string::npos);
  EXPECT_EQ(listed.find("\"gate\""), std::string::npos) << listed;
  // The admin: the settings, the secret only as its digest.
  boost::json::value admin = Json(world_.Admin(verb::get, "/v1/rooms/shop"));
  std::string headers = boost::json::serialize(admin.at("gate").at("bypass").at("headers"));
  EXPECT_EQ(headers.find("s3cr3t"), std::string::npos) << headers;
  std::string digest(admin.at("gate").at("bypass").at("headers").at("x-partner-token").as_string());
  EXPECT_TRUE(digest.starts_with("sha256:")) << digest;
  EXPECT_EQ(digest.size(), 7u + 64u);
  EXPECT_EQ(admin.at("gate").at("bypass").at("headers").at("user-agent").as_string(), "*Googlebot*")
      << "a glob is a pattern, not a secret";
  // The secret still lets the partner through; anything else does not.
  Visitor();
  Visitor();
  EXPECT_EQ(Ask("/api", "", {{"X-Partner-Token", "s3cr3t-partner-9f8e"}}).status, 200u);
  for (const char* wrong : {"s3cr3t-partner-9f8", "S3CR3T-PARTNER-9F8E", "*", "", digest.c_str()}) {
    EXPECT_EQ(Ask("/api", "", {{"X-Partner-Token", wrong}}).status, 302u) << wrong;
  }
  // The settings as read back PUT again: the digest is kept, not hashed again.
  Put(R"({"gate": )" + boost::json::serialize(admin.at("gate")) + "}");
  EXPECT_EQ(Json(world_.Admin(verb::get, "/v1/rooms/shop"))
                .at("gate")
                .at("bypass")
                .at("headers")
                .at("x-partner-token")
                .as_string(),
            digest);
  EXPECT_EQ(Ask("/api", "", {{"X-Partner-Token", "s3cr3t-partner-9f8e"}}).status, 200u);
}

TEST_F(GateTest, TheDecisionAnswersTheProxyOnly) {
  std::string cookie = Visitor();
  // Through the public passage (the example configs mark it with X-Forwarded-Prefix).
  Response r = Ask("/", cookie, {{"X-Forwarded-Prefix", "/anteroom"}});
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(HeaderOf(r, "X-Anteroom-Session"), "");
  EXPECT_EQ(ErrorMessage(r), wire::kGateDecisionForProxy);
  // A token names its session to the admin only.
  std::string token = cookie.substr(cookie.find('=') + 1);
  const std::string body = R"({"token": ")" + token + "\"}";
  boost::json::value anyone = Json(world_.Call(verb::post, "/v1/tokens/verify", body));
  EXPECT_TRUE(anyone.at("valid").as_bool());
  EXPECT_TRUE(anyone.at("session").is_null()) << boost::json::serialize(anyone);
  EXPECT_FALSE(anyone.at("sub").as_string().empty());
  boost::json::value admin = Json(world_.Admin(verb::post, "/v1/tokens/verify", body));
  EXPECT_EQ(admin.at("session").as_string(), HeaderOf(Ask("/", cookie), "X-Anteroom-Session"));
}

TEST_F(GateTest, OnlyPageLoadsAreLetInOnTheSpotAndHoldTheSlotOnlyUntilTheCookieComesBack) {
  Put(R"({"capacity": 3, "grace_ms": 2000})");
  // Probes, previews, crawlers, scripts: the waiting answer, no slot.
  std::vector<std::vector<std::pair<std::string, std::string>>> probes = {
      {{"Accept", "*/*"}, {"Sec-Fetch-Mode", ""}},                    // curl
      {{"Accept", "text/html"}, {"Sec-Fetch-Mode", "no-cors"}},       // a script's fetch
      {{"Accept", "text/html"}, {"X-Forwarded-Method", "HEAD"}},      // curl -I via Caddy
      {{"Accept", "text/html"}, {"X-Forwarded-Method", "POST"}},      // a form
      {{"Accept", "application/json"}, {"Sec-Fetch-Mode", "cors"}}};  // an app
  for (auto& headers : probes) {
    Request r = Asked("/v1/gate/shop", "/", "", headers);
    if (headers[1].second.empty()) r.fields.erase("Sec-Fetch-Mode");
    Response answer = Gate(std::move(r));
    EXPECT_TRUE(answer.status == 302u || answer.status == 429u) << answer.status;
    EXPECT_EQ(HeaderOf(answer, "Set-Cookie"), "");
  }
  Request head = Asked("/v1/gate/shop", "/");
  head.method = verb::head;
  EXPECT_EQ(Gate(std::move(head)).status, 302u);
  EXPECT_EQ(Active(), 0) << "no probe took a slot";
  // A page load without Sec-Fetch-Mode (an older browser) that takes HTML is one.
  Request old = Asked("/v1/gate/shop", "/");
  old.fields.erase("Sec-Fetch-Mode");
  std::string kept = CookieOf(Gate(std::move(old)));
  ASSERT_FALSE(kept.empty());
  std::string dropped = Visitor();
  EXPECT_EQ(Active(), 2);
  // One comes back with its cookie within the grace; the other never does.
  world_.clock().Advance(1500);
  world_.backend().RunDue();
  EXPECT_EQ(Ask("/next", kept).status, 200u);
  world_.clock().Advance(1000);
  world_.backend().RunDue();
  EXPECT_EQ(Active(), 1) << "the cookie that never came back held its slot for the grace only";
  world_.clock().Advance(10'000);
  world_.backend().RunDue();
  EXPECT_EQ(Active(), 1) << "the one that came back keeps it";
  world_.clock().Advance(GateCache::kFreshMs);
  EXPECT_EQ(Ask("/", dropped).status, 200u) << "a free slot: let in anew";
}

TEST_F(GateTest, ABypassedAssetWithTheCookieConfirmsAnOnTheSpotAdmission) {
  Put(R"({"capacity": 3, "grace_ms": 2000, "gate": {"bypass": {"paths": ["/static/"]}}})");
  // The page's stylesheet, moments after the page, with the cookie the page set.
  std::string cookie = Visitor();
  EXPECT_EQ(Ask("/static/site.css", cookie).status, 200u);
  world_.clock().Advance(5000);
  world_.backend().RunDue();
  EXPECT_EQ(Active(), 1) << "confirmed: kept past the grace";
  // Without the cookie (or with another room's), an asset confirms nothing.
  Visitor();
  EXPECT_EQ(Ask("/static/site.css").status, 200u);
  EXPECT_EQ(Ask("/static/site.css", "anteroom_other=x.y.z").status, 200u);
  world_.clock().Advance(3000);
  world_.backend().RunDue();
  EXPECT_EQ(Active(), 1);
}

TEST_F(GateTest, RoomsNeverShareACookieAndHttpsCookiesAreHostOnly) {
  GateSettings plain;
  std::set<std::string> names;
  for (const char* room : {"x.y", "x_y", "x:y", "x__y", "x_dy", "x_cy", "x-y", "xy"}) {
    EXPECT_TRUE(names.insert(plain.CookieName(room, false)).second) << room;
  }
  EXPECT_EQ(plain.CookieName("shop", false), "anteroom_shop");
  EXPECT_EQ(plain.CookieName("shop", true), "__Host-anteroom_shop");
  GateSettings domain;
  domain.cookie_domain = "shop.example";
  EXPECT_EQ(domain.CookieName("shop", true), "anteroom_shop") << "__Host- forbids Domain";
  GateSettings named;
  named.cookie = "q_1";
  EXPECT_EQ(named.CookieName("shop", true), "q_1");
  // Through the gate: three rooms, three cookies, none overwriting another.
  std::set<std::string> set;
  for (const char* room : {"x.y", "x_y", "x:y"}) {
    ASSERT_EQ(
        world_.Admin(verb::put, std::string("/v1/rooms/") + room, R"({"capacity": 5})").status,
        200u);
    Response r = Gate(Asked(std::string("/v1/gate/") + room, "/"));
    ASSERT_EQ(r.status, 200u) << room << r.body;
    std::string cookie = CookieOf(r);
    EXPECT_TRUE(set.insert(cookie.substr(0, cookie.find('='))).second) << cookie;
    EXPECT_NE(HeaderOf(r, "Set-Cookie").find("; Secure"), std::string::npos);
    EXPECT_EQ(HeaderOf(r, "Set-Cookie").find("Domain="), std::string::npos);
  }
}

TEST_F(GateTest, SecureAndHttpsComeFromATrustedProxyOrAnHttpsPublicUrl) {
  // Not from a trusted proxy: its X-Forwarded-Proto is not believed.
  Request r = Asked("/v1/gate/shop", "/");
  r.peer = boost::asio::ip::make_address("192.0.2.9");
  Response answer = Gate(std::move(r));
  ASSERT_EQ(answer.status, 200u);
  EXPECT_TRUE(CookieOf(answer).starts_with("anteroom_shop=")) << CookieOf(answer);
  EXPECT_EQ(HeaderOf(answer, "Set-Cookie").find("Secure"), std::string::npos);
  // An https --public-url: the site is https, whoever asks.
  server::WebOptions web = *world_.services().web.Get();
  web.public_url = "https://queue.shop.example";
  world_.services().web.Set(std::move(web));
  Request again = Asked("/v1/gate/shop", "/");
  again.peer = boost::asio::ip::make_address("192.0.2.9");
  EXPECT_TRUE(CookieOf(Gate(std::move(again))).starts_with(std::string(kCookie) + "="));
}

TEST_F(GateTest, UnknownRoomsAndBadNames) {
  EXPECT_EQ(ErrorCode(Gate(Asked("/v1/gate/nowhere", "/"))), "unknown_room");
  EXPECT_EQ(Gate(Asked("/v1/gate/a%20b", "/")).status, 400u);
}

TEST(GateSettingsTest, ValidatedAndCanonical) {
  FamilyWorld w;
  Response r = w.Admin(verb::put, "/v1/rooms/r",
                       R"({"capacity": 1, "gate": {"hosts": ["WWW.Shop.example"],
                           "bypass": {"headers": {"user-AGENT": "*bot*"}}, "cookie": "q_1"}})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(
      boost::json::serialize(Json(r).at("gate")),
      R"({"cookie":"q_1","hosts":["www.shop.example"],"bypass":{"paths":[],"headers":{"user-agent":"*bot*"}}})");
  for (const char* bad :
       {R"({"gate": 1})", R"({"gate": {"other": 1}})", R"({"gate": {"cookie": "a b"}})",
        R"({"gate": {"cookie": ""}})", R"({"gate": {"cookie_domain": "a:1"}})",
        R"({"gate": {"hosts": "x"}})", R"({"gate": {"hosts": ["a/b"]}})",
        R"({"gate": {"bypass": {"paths": [""]}}})", R"({"gate": {"bypass": {"paths": [1]}}})",
        R"({"gate": {"bypass": {"headers": {"a b": "x"}}}})",
        R"({"gate": {"bypass": {"headers": {"ua": 1}}}})", R"({"gate": {"bypass": []}})"}) {
    Response refused = w.Admin(verb::put, "/v1/rooms/r", bad);
    EXPECT_EQ(refused.status, 400u) << bad;
  }
  std::string many = R"({"gate": {"bypass": {"paths": [)";
  for (size_t i = 0; i <= kMaxGatePaths; ++i) many += std::string(i ? "," : "") + "\"/p\"";
  EXPECT_EQ(w.Admin(verb::put, "/v1/rooms/r", many + "]}}}").status, 400u);
  EXPECT_EQ(Json(w.Admin(verb::get, "/v1/rooms/r")).at("gate").at("cookie").as_string(), "q_1")
      << "refused changes changed nothing";
  EXPECT_TRUE(Json(w.Admin(verb::put, "/v1/rooms/r", R"({"gate": null})")).at("gate").is_null());
  GateSettings defaults;
  EXPECT_EQ(defaults.CookieName("a.b:c", false), "anteroom_a_db_cc");
}

}  // namespace
}  // namespace anteroom::server
