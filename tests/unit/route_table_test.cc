// Every registered route, walked from the router's own table: each enforces its scope (a
// request without a key, with a wrong one, with the queue key and with the admin key, for each
// combination of keys the server may be given), each refuses a body over
// its limit (413, as the connection decides it from Router::BodyLimitFor), and no two routes
// share a method and a pattern.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <openssl/evp.h>

#include "common/wire_errors.h"
#include "family_world.h"
#include "http/request_head.h"

namespace anteroom::server {
namespace {

using http::CheckParsedHead;
using http::ConfigureRequestParser;
using http::HeadRefusal;
using http::kHardBodyLimit;
using http::RequestParser;
using testing::FamilyWorld;
using testing::kAdminKey;

// A concrete target for a pattern: every capture a valid name (digits, so job ids read too).
std::string TargetFor(std::string_view pattern) {
  std::string out;
  size_t i = 0;
  while (i < pattern.size()) {
    if (pattern[i] == '{') {
      out += "7";
      i = pattern.find('}', i) + 1;
    } else {
      out += pattern[i++];
    }
  }
  return out;
}

// What the connection answers to a head announcing `length` body bytes for `target`.
std::optional<HeadRefusal> HeadWithBody(const Router& router, http::verb method,
                                        const std::string& target, size_t length) {
  RequestParser parser;
  ConfigureRequestParser(parser);
  std::string head = std::string(http::to_string(method)) + " " + target +
                     " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(length) +
                     "\r\n\r\n";
  boost::beast::error_code ec;
  parser.eager(false);
  parser.put(boost::asio::buffer(head), ec);
  EXPECT_FALSE(ec) << ec.message();
  size_t limit = router.BodyLimitFor(parser.get().target());
  parser.body_limit(limit);
  return CheckParsedHead(parser, limit);
}

TEST(RouteTableTest, EveryFamilyRegistersRoutes) {
  FamilyWorld world;
  std::vector<RouteInfo> routes = world.router().Routes();
  std::set<std::string> patterns;
  for (const RouteInfo& r : routes) patterns.insert(r.pattern);
  for (const char* p : {"/healthz", "/v1/rooms/{room}", "/v1/tokens/verify", "/v1/queues/{q}/fetch",
                        "/v1/rooms/{room}/ws", "/metrics", "/admin"}) {
    EXPECT_TRUE(patterns.count(p)) << p;
  }
  EXPECT_GE(routes.size(), 35u);
}

TEST(RouteTableTest, NoTwoRoutesShareMethodAndPattern) {
  FamilyWorld world;
  std::set<std::pair<http::verb, std::string>> seen;
  for (const RouteInfo& r : world.router().Routes()) {
    EXPECT_TRUE(seen.emplace(r.method, r.pattern).second)
        << http::to_string(r.method) << " " << r.pattern;
  }
  // The router refuses a second registration outright.
  Router router("");
  Handler ok = [](const Request&, Respond respond) { respond(Response{}); };
  router.Add(http::verb::get, "/x/{a}", ok);
  EXPECT_THROW(router.Add(http::verb::get, "/x/{a}", ok), std::logic_error);
  router.Add(http::verb::post, "/x/{a}", ok);
}

TEST(RouteTableTest, EveryRouteHasAKnownScopeAndCors) {
  FamilyWorld world;
  for (const RouteInfo& r : world.router().Routes()) {
    SCOPED_TRACE(std::string(http::to_string(r.method)) + " " + r.pattern);
    EXPECT_NE(ToString(r.options.scope), "?");
    EXPECT_NE(ToString(r.options.cors), "?");
    EXPECT_GT(r.options.body_limit, 0u);
    EXPECT_LE(r.options.body_limit, kHardBodyLimit);
    // Admin routes are never meant for other origins.
    if (r.options.scope == Scope::kAdmin) {
      EXPECT_EQ(r.options.cors, Cors::kNoCors);
    }
  }
}

// The access rules as the tables state them (docs/security.md).
TEST(RouteTableTest, ScopesOfKnownRoutes) {
  FamilyWorld world;
  std::map<std::pair<http::verb, std::string>, Scope> scope;
  for (const RouteInfo& r : world.router().Routes()) scope[{r.method, r.pattern}] = r.options.scope;
  using http::verb;
  EXPECT_EQ((scope[{verb::put, "/v1/rooms/{room}"}]), Scope::kAdmin);
  EXPECT_EQ((scope[{verb::delete_, "/v1/rooms/{room}"}]), Scope::kAdmin);
  EXPECT_EQ((scope[{verb::get, "/v1/rooms/{room}"}]), Scope::kPublic);
  EXPECT_EQ((scope[{verb::post, "/v1/rooms/{room}/check"}]), Scope::kSession);
  EXPECT_EQ((scope[{verb::post, "/v1/queues/{q}/fetch"}]), Scope::kQueue);
  // The data plane, which takes the queue key: fetching, reading dead letters and nacking.
  EXPECT_EQ((scope[{verb::post, "/v1/queues/{q}/jobs"}]), Scope::kQueue);
  EXPECT_EQ((scope[{verb::post, "/v1/queues/{q}/nack"}]), Scope::kQueue);
  EXPECT_EQ((scope[{verb::get, "/v1/queues/{q}/dead"}]), Scope::kQueue);
  EXPECT_EQ((scope[{verb::get, "/v1/queues"}]), Scope::kQueue);
  EXPECT_EQ((scope[{verb::post, "/v1/queues/{q}/pause"}]), Scope::kAdmin);
  EXPECT_EQ((scope[{verb::get, "/metrics"}]), Scope::kAdmin);
  EXPECT_EQ((scope[{verb::get, "/admin"}]), Scope::kAdmin);
  EXPECT_EQ((scope[{verb::get, "/healthz"}]), Scope::kPublic);
}

// What a request with `authorization` must get from a route of `scope`, as docs/security.md
// states the model: true when it must be refused with 401.
struct AccessCase {
  std::string name;
  std::string authorization;
};

void ExpectScopeEnforced(FamilyWorld& world, const RouteInfo& r, const AccessCase& c,
                         bool refused) {
  std::string target = TargetFor(r.pattern);
  SCOPED_TRACE(std::string(http::to_string(r.method)) + " " + target + " (" +
               std::string(ToString(r.options.scope)) + ") " + c.name);
  std::optional<Response> answer = world.Send(r.method, target, "{}", c.authorization);
  if (refused) {
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->status, 401u) << answer->body;
    EXPECT_EQ(testing::ErrorCode(*answer), "unauthorized");
    EXPECT_FALSE(testing::ErrorMessage(*answer).empty());
    bool challenge = false;
    for (const auto& [name, value] : answer->headers) challenge |= name == "WWW-Authenticate";
    EXPECT_TRUE(challenge);
  } else if (answer) {
    EXPECT_NE(answer->status, 401u) << answer->body;
    EXPECT_NE(testing::ErrorCode(*answer), "not_found") << "the route itself answers";
    EXPECT_NE(testing::ErrorCode(*answer), "method_not_allowed");
  }
}

std::string Basic(std::string_view user_password) {
  std::string out(4 * ((user_password.size() + 2) / 3), '\0');
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                  reinterpret_cast<const unsigned char*>(user_password.data()),
                  static_cast<int>(user_password.size()));
  return "Basic " + out;
}

const std::vector<AccessCase>& Cases() {
  static const std::vector<AccessCase> cases = {
      {"no key", ""},
      {"a wrong key", "Bearer wrong"},
      {"the queue key", "Bearer " + std::string(testing::kQueueKey)},
      {"the queue key in Basic", Basic("worker:" + std::string(testing::kQueueKey))},
      {"the admin key", "Bearer " + std::string(kAdminKey)},
      {"the admin key in Basic", Basic("me:" + std::string(kAdminKey))},
      {"a prefix of the admin key", "Bearer " + std::string(kAdminKey).substr(0, 5)},
      {"the admin key and more", "Bearer " + std::string(kAdminKey) + "x"},
      {"the queue key as the user name", Basic(std::string(testing::kQueueKey) + ":")},
  };
  return cases;
}

bool IsQueueKey(const AccessCase& c) {
  return c.name.starts_with("the queue key in") || c.name == "the queue key";
}
bool IsAdminKey(const AccessCase& c) {
  return c.name.starts_with("the admin key") && c.name.find("more") == std::string::npos;
}

// Both keys set: public and session routes never answer 401; queue routes take the queue key
// or the admin key; admin routes only the admin key.
TEST(RouteTableTest, EveryRouteEnforcesItsScopeWithBothKeys) {
  FamilyWorld world;
  EXPECT_EQ(world.router().queue_access(), QueueAccess::kQueueKey);
  for (const RouteInfo& r : world.router().Routes()) {
    for (const AccessCase& c : Cases()) {
      bool refused = false;
      switch (r.options.scope) {
        case Scope::kPublic:
        case Scope::kSession:
          refused = false;
          break;
        case Scope::kQueue:
          refused = !IsQueueKey(c) && !IsAdminKey(c);
          break;
        case Scope::kAdmin:
          refused = !IsAdminKey(c);
          break;
      }
      ExpectScopeEnforced(world, r, c, refused);
    }
  }
}

// An admin key and no queue key must not leave the data plane open: queue routes then take the
// admin key only.
TEST(RouteTableTest, WithOnlyAnAdminKeyQueueRoutesNeedIt) {
  FamilyWorld world(std::string(kAdminKey), "");
  EXPECT_EQ(world.router().queue_access(), QueueAccess::kAdminKey);
  for (const RouteInfo& r : world.router().Routes()) {
    for (const AccessCase& c : Cases()) {
      bool refused =
          (r.options.scope == Scope::kQueue || r.options.scope == Scope::kAdmin) && !IsAdminKey(c);
      ExpectScopeEnforced(world, r, c, refused);
    }
  }
}

// A queue key without an admin key: queue routes closed, admin routes open (auth off there).
TEST(RouteTableTest, WithOnlyAQueueKeyAdminRoutesAreOpen) {
  FamilyWorld world("", std::string(testing::kQueueKey));
  EXPECT_EQ(world.router().queue_access(), QueueAccess::kQueueKey);
  for (const RouteInfo& r : world.router().Routes()) {
    for (const AccessCase& c : Cases()) {
      bool refused = r.options.scope == Scope::kQueue && !IsQueueKey(c);
      ExpectScopeEnforced(world, r, c, refused);
    }
  }
}

TEST(RouteTableTest, WithoutKeysEveryRouteIsOpen) {
  FamilyWorld world("", "");
  EXPECT_EQ(world.router().queue_access(), QueueAccess::kOpen);
  for (const RouteInfo& r : world.router().Routes()) {
    for (const AccessCase& c : Cases()) ExpectScopeEnforced(world, r, c, false);
  }
}

// A queue with a key of its own (PUT /v1/queues/{q}/key) takes that key or the admin key on
// every kQueue route that names it, under each combination of server keys; the server's queue
// key no longer opens it, nor does no key on an open server. Other queues are as before.
TEST(RouteTableTest, AQueuesOwnKeyIsTheOnlyQueueKeyItTakes) {
  const std::string own = "queue-7-own-key-0123456789";
  for (auto [admin, queue] : std::vector<std::pair<std::string, std::string>>{
           {std::string(kAdminKey), std::string(testing::kQueueKey)},
           {std::string(kAdminKey), ""},
           {"", std::string(testing::kQueueKey)},
           {"", ""}}) {
    SCOPED_TRACE("admin key " + std::string(admin.empty() ? "unset" : "set") + ", queue key " +
                 (queue.empty() ? "unset" : "set"));
    FamilyWorld world(admin, queue);
    Response set = world.Admin(http::verb::put, "/v1/queues/7/key", R"({"key":")" + own + "\"}");
    ASSERT_EQ(set.status, 200u) << set.body;
    std::vector<AccessCase> cases = Cases();
    cases.push_back({"the queue's own key", "Bearer " + own});
    cases.push_back({"the queue's own key in Basic", Basic("w:" + own)});
    for (const RouteInfo& r : world.router().Routes()) {
      if (r.options.scope != Scope::kQueue || r.pattern.find("{q}") == std::string::npos) continue;
      for (const AccessCase& c : cases) {
        bool own_key = c.name.starts_with("the queue's own key");
        bool admin_key = !admin.empty() && IsAdminKey(c);
        ExpectScopeEnforced(world, r, c, !own_key && !admin_key);
        // The same route of another queue follows the server's rule.
        std::string other = TargetFor(r.pattern);
        other.replace(other.find("/7"), 2, "/8");
        std::optional<Response> answer = world.Send(r.method, other, "{}", c.authorization);
        if (answer) {
          bool open = queue.empty() && admin.empty();
          bool server_key = (!queue.empty() && IsQueueKey(c)) ||
                            (!admin.empty() && IsAdminKey(c)) || (queue.empty() && admin.empty());
          EXPECT_EQ(answer->status == 401u, !(open || server_key))
              << other << " " << c.name << ": " << answer->body;
        }
      }
    }
    // Removed: the queue follows the server's rule again.
    ASSERT_EQ(world.Admin(http::verb::delete_, "/v1/queues/7/key").status, 200u);
    std::optional<Response> by_own =
        world.Send(http::verb::get, "/v1/queues/7", "", "Bearer " + own);
    ASSERT_TRUE(by_own.has_value());
    EXPECT_EQ(by_own->status == 401u, !(queue.empty() && admin.empty())) << by_own->body;
  }
}

// The refusal says which key a route takes.
TEST(RouteTableTest, RefusalsNameTheKeyNeeded) {
  FamilyWorld both;
  FamilyWorld admin_only(std::string(kAdminKey), "");
  using http::verb;
  EXPECT_EQ(testing::ErrorMessage(*both.Send(verb::post, "/v1/queues/q/fetch", "{}", "")),
            wire::kQueueKeyNeeded);
  EXPECT_EQ(testing::ErrorMessage(*admin_only.Send(verb::post, "/v1/queues/q/fetch", "{}", "")),
            wire::kQueueAdminKeyNeeded);
  EXPECT_EQ(testing::ErrorMessage(*both.Send(verb::post, "/v1/queues/q/pause", "{}")),
            wire::kAdminKeyNeeded);
}

// Cross-origin pages, from the tables: a page of an origin not allowed changes nothing anywhere
// (403 before the key is looked at) and reads nothing (no CORS headers); a listed origin gets
// CORS headers on exactly the routes whose CORS column says so, and is refused elsewhere; every
// path's preflight lists exactly its CORS routes' methods.
TEST(RouteTableTest, EveryRouteFollowsItsCorsColumn) {
  FamilyWorld world;
  world.AllowOrigins({"https://app.example"});
  std::map<std::string, std::set<std::string>> cors_methods;  // pattern -> methods
  std::set<std::string> proxied_patterns;                     // answer OPTIONS themselves
  for (const RouteInfo& r : world.router().Routes()) {
    std::string target = TargetFor(r.pattern);
    SCOPED_TRACE(std::string(http::to_string(r.method)) + " " + target);
    const bool changes =
        (r.method != http::verb::get && r.method != http::verb::head) || r.options.stream;
    const bool cors = r.options.cors == Cors::kCorsPublic;
    if (cors) cors_methods[r.pattern].insert(std::string(http::to_string(r.method)));
    // The gate judges the page's request itself (Cors::kProxied): never refused for its Origin,
    // never readable by another origin.
    const bool proxied = r.options.cors == Cors::kProxied;
    if (proxied) proxied_patterns.insert(r.pattern);
    for (const char* origin : {"https://evil.example", "https://app.example"}) {
      SCOPED_TRACE(origin);
      const bool allowed = cors && std::string_view(origin) == "https://app.example";
      for (const std::string& auth : {std::string(), "Bearer " + std::string(kAdminKey)}) {
        Request request;
        request.method = r.method;
        request.target = target;
        request.body = "{}";
        request.content_type = "application/json";
        request.origin = origin;
        request.host = "127.0.0.1:8080";
        request.authorization = auth;
        request.websocket = r.pattern.ends_with("/ws");
        std::optional<Response> answer = world.SendRequest(std::move(request));
        if (!allowed && changes && !proxied) {
          ASSERT_TRUE(answer.has_value());
          EXPECT_EQ(answer->status, 403u) << answer->body;
          EXPECT_EQ(testing::ErrorCode(*answer), "origin_not_allowed");
        } else if (answer) {
          EXPECT_NE(answer->status, 403u) << answer->body;
          EXPECT_EQ(testing::HeaderOf(*answer, "Access-Control-Allow-Origin"),
                    allowed ? origin : "");
        }
      }
    }
  }
  // Preflights, per path.
  std::set<std::string> paths;
  for (const RouteInfo& r : world.router().Routes()) paths.insert(r.pattern);
  for (const std::string& pattern : paths) {
    if (proxied_patterns.contains(pattern)) continue;
    SCOPED_TRACE("OPTIONS " + pattern);
    Request request;
    request.method = http::verb::options;
    request.target = TargetFor(pattern);
    request.origin = "https://app.example";
    request.host = "127.0.0.1:8080";
    std::optional<Response> answer = world.SendRequest(std::move(request));
    ASSERT_TRUE(answer.has_value());
    auto it = cors_methods.find(pattern);
    if (it == cors_methods.end()) {
      EXPECT_EQ(answer->status, 403u);
      continue;
    }
    EXPECT_EQ(answer->status, 204u);
    for (const std::string& m : it->second) {
      EXPECT_NE(testing::HeaderOf(*answer, "Access-Control-Allow-Methods").find(m),
                std::string::npos);
    }
  }
}

// An opaque origin ("Origin: null": a sandboxed iframe, a data: or file: page, a redirect
// across origins) is not an origin any page can be trusted for: every route that changes state
// refuses it (403, before the key is looked at), even on a server that allows every origin
// (`--cors-origin '*'`) and with the admin key, and no answer is made readable to it.
TEST(RouteTableTest, AnOpaqueOriginChangesNothingAnywhere) {
  FamilyWorld world;
  world.AllowOrigins({"*"});
  auto ask = [&](const RouteInfo& r, std::string origin, std::string auth) {
    Request request;
    request.method = r.method;
    request.target = TargetFor(r.pattern);
    request.body = "{}";
    request.content_type = "application/json";
    request.origin = std::move(origin);
    request.host = "127.0.0.1:8080";
    request.authorization = std::move(auth);
    request.websocket = r.pattern.ends_with("/ws");
    return world.SendRequest(std::move(request));
  };
  size_t refused = 0;
  for (const RouteInfo& r : world.router().Routes()) {
    // The gate's decision judges the page's own request (Cors::kProxied): not the router's.
    if (r.options.cors == Cors::kProxied) continue;
    SCOPED_TRACE(std::string(http::to_string(r.method)) + " " + r.pattern);
    const bool changes =
        (r.method != http::verb::get && r.method != http::verb::head) || r.options.stream;
    for (const std::string& auth : {std::string(), "Bearer " + std::string(kAdminKey)}) {
      std::optional<Response> answer = ask(r, "null", auth);
      if (changes) {
        ASSERT_TRUE(answer.has_value());
        EXPECT_EQ(answer->status, 403u) << answer->body;
        EXPECT_EQ(testing::ErrorCode(*answer), "origin_not_allowed");
        ++refused;
      }
      if (answer) {
        EXPECT_EQ(testing::HeaderOf(*answer, "Access-Control-Allow-Origin"), "");
      }
    }
    // The control: '*' is in force, so a real origin is let into the public room API.
    if (changes && r.options.cors == Cors::kCorsPublic) {
      std::optional<Response> answer = ask(r, "https://app.example", "");
      if (answer) {
        EXPECT_NE(answer->status, 403u) << answer->body;
        EXPECT_EQ(testing::HeaderOf(*answer, "Access-Control-Allow-Origin"), "https://app.example");
      }
    }
  }
  EXPECT_GE(refused, 40u) << "every changing route, with and without the key";
}

TEST(RouteTableTest, EveryRouteRefusesABodyOverItsLimit) {
  FamilyWorld world;
  // Routes on the same path share a limit (the connection learns it before the method matters).
  std::map<std::string, size_t> limit_of_pattern;
  for (const RouteInfo& r : world.router().Routes()) {
    auto [it, inserted] = limit_of_pattern.emplace(r.pattern, r.options.body_limit);
    EXPECT_EQ(it->second, r.options.body_limit) << r.pattern;
  }
  for (const RouteInfo& r : world.router().Routes()) {
    std::string target = TargetFor(r.pattern);
    SCOPED_TRACE(std::string(http::to_string(r.method)) + " " + target);
    EXPECT_EQ(world.router().BodyLimitFor(target), r.options.body_limit);
    EXPECT_EQ(world.router().BodyLimitFor(target + "?a=b"), r.options.body_limit);
    EXPECT_FALSE(HeadWithBody(world.router(), r.method, target, r.options.body_limit));
    std::optional<HeadRefusal> over =
        HeadWithBody(world.router(), r.method, target, r.options.body_limit + 1);
    ASSERT_TRUE(over.has_value());
    EXPECT_EQ(over->status, OpStatus::kPayloadTooLarge);
    EXPECT_EQ(ErrorReply(over->status, over->message).status, 413u);
  }
  // Paths no route has: the default.
  EXPECT_EQ(world.router().BodyLimitFor("/nowhere"), kDefaultBodyLimit);
  EXPECT_EQ(world.router().BodyLimitFor("/v1/queues/q/nowhere"), kDefaultBodyLimit);
}

TEST(RouteTableTest, QueueBatchesMayBeLargeAndRoomBodiesSmall) {
  FamilyWorld world;
  EXPECT_EQ(world.router().BodyLimitFor("/v1/queues/q/jobs"), size_t{16} * 1024 * 1024);
  EXPECT_EQ(world.router().BodyLimitFor("/v1/queues/q%2Fx/ack"), size_t{16} * 1024 * 1024);
  EXPECT_EQ(world.router().BodyLimitFor("/v1/rooms/r/check"), kDefaultBodyLimit);
  EXPECT_EQ(world.router().BodyLimitFor("/v1/queues"), kDefaultBodyLimit);
}

}  // namespace
}  // namespace anteroom::server
