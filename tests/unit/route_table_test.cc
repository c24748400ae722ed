// Every registered route, walked from the router's own table: each has a scope, admin routes
// refuse a request without the admin key (401) and take one with it, each refuses a body over
// its limit (413, as the connection decides it from Router::BodyLimitFor), and no two routes
// share a method and a pattern.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>

#include "family_world.h"
#include "server/request_head.h"

namespace anteroom::server {
namespace {

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

// The access rules as the tables state them today (issue 16 adds the queue key and sessions).
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
  EXPECT_EQ((scope[{verb::post, "/v1/queues/{q}/pause"}]), Scope::kAdmin);
  EXPECT_EQ((scope[{verb::get, "/metrics"}]), Scope::kAdmin);
  EXPECT_EQ((scope[{verb::get, "/admin"}]), Scope::kAdmin);
  EXPECT_EQ((scope[{verb::get, "/healthz"}]), Scope::kPublic);
}

TEST(RouteTableTest, AdminRoutesNeedTheKeyAndOthersDoNot) {
  FamilyWorld world;
  for (const RouteInfo& r : world.router().Routes()) {
    std::string target = TargetFor(r.pattern);
    SCOPED_TRACE(std::string(http::to_string(r.method)) + " " + target);
    for (const std::string& auth : {std::string(), std::string("Bearer wrong")}) {
      std::optional<Response> without = world.Send(r.method, target, "{}", auth);
      if (r.options.scope == Scope::kAdmin) {
        ASSERT_TRUE(without.has_value());
        EXPECT_EQ(without->status, 401u);
        EXPECT_EQ(testing::ErrorCode(*without), "unauthorized");
      } else if (without) {
        EXPECT_NE(without->status, 401u) << without->body;  // kQueue/kSession: public for now
      }
    }
    std::optional<Response> with =
        world.Send(r.method, target, "{}", "Bearer " + std::string(kAdminKey));
    if (with) {
      EXPECT_NE(with->status, 401u) << with->body;
      EXPECT_NE(testing::ErrorCode(*with), "not_found") << "the route itself answers";
      EXPECT_NE(testing::ErrorCode(*with), "method_not_allowed");
    }
  }
}

TEST(RouteTableTest, WithoutAnAdminKeyAdminRoutesAreOpen) {
  FamilyWorld world("");
  for (const RouteInfo& r : world.router().Routes()) {
    std::optional<Response> answer = world.Send(r.method, TargetFor(r.pattern), "{}");
    if (answer) {
      EXPECT_NE(answer->status, 401u) << r.pattern;
    }
  }
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
