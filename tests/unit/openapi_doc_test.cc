// The OpenAPI document against the route table: every registered route is in it with the
// scope, body limit and kind its table row gives, nothing else is, and the builder refuses a
// route without a description, a description with a typo, an unknown path parameter and a
// route without an example. The document's validity as OpenAPI 3.1, and its examples against
// the real server, are tests/openapi/'s.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "family_world.h"
#include "server/openapi_doc.h"

namespace anteroom::server {
namespace {

namespace json = boost::json;
using testing::FamilyWorld;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

TEST(OpenApiDocTest, EveryRouteIsDescribedAsItsTableSaysAndNothingElse) {
  FamilyWorld world;
  std::vector<RouteInfo> routes = world.router().Routes();
  ApiDoc doc = BuildOpenApi(routes, EmbeddedApiDocs(), "test");
  ASSERT_TRUE(doc.problems.empty()) << Joined(doc.problems);
  EXPECT_TRUE(doc.unused.empty()) << "descriptions of no route:" << Joined(doc.unused);

  json::object root = json::parse(doc.json).as_object();
  EXPECT_EQ(root.at("openapi").as_string(), "3.1.0");
  const json::object& paths = root.at("paths").as_object();
  size_t operations = 0;
  for (const auto& item : paths) operations += item.value().as_object().size();
  EXPECT_EQ(operations, routes.size()) << "one operation per route, no more";
  for (const RouteInfo& r : routes) {
    std::string what = std::string(http::to_string(r.method)) + " " + r.pattern;
    const json::value* item = paths.if_contains(r.pattern);
    ASSERT_NE(item, nullptr) << what;
    const json::value* op = item->as_object().if_contains(Lower(http::to_string(r.method)));
    ASSERT_NE(op, nullptr) << what;
    const json::object& o = op->as_object();
    EXPECT_EQ(o.at("x-anteroom-scope").as_string(), http::ToString(r.options.scope)) << what;
    EXPECT_EQ(o.at("x-anteroom-body-limit").to_number<size_t>(), r.options.body_limit) << what;
    EXPECT_EQ(o.at("x-anteroom-cors").as_string(), http::ToString(r.options.cors)) << what;
    // The scope's key is the operation's security: none on public and session routes.
    switch (r.options.scope) {
      case Scope::kPublic:
      case Scope::kSession:
        EXPECT_FALSE(o.contains("security")) << what;
        break;
      case Scope::kQueue:
        EXPECT_EQ(json::serialize(o.at("security")), R"([{"queueKey":[]},{"adminKey":[]}])")
            << what;
        break;
      case Scope::kAdmin:
        EXPECT_EQ(json::serialize(o.at("security")), R"([{"adminKey":[]}])") << what;
        EXPECT_TRUE(o.at("responses").as_object().contains("401")) << what;
        break;
    }
    EXPECT_TRUE(o.at("responses").as_object().contains("503")) << what;
  }
}

TEST(OpenApiDocTest, ErrorCodesAreTheServersOwn) {
  FamilyWorld world;
  ApiDoc doc = BuildOpenApi(world.router().Routes(), EmbeddedApiDocs(), "test");
  ASSERT_TRUE(doc.problems.empty()) << Joined(doc.problems);
  json::value root = json::parse(doc.json);
  const json::array& codes = root.at_pointer(
                                     "/components/schemas/Error/properties/error/"
                                     "properties/code/enum")
                                 .as_array();
  for (auto s : {OpStatus::kInvalidJson, OpStatus::kUnknownRoom, OpStatus::kRateLimited,
                 OpStatus::kUnavailable}) {
    EXPECT_NE(std::find(codes.begin(), codes.end(), json::value(ToWire(s).code)), codes.end())
        << ToWire(s).code;
  }
}

TEST(OpenApiDocTest, TheServedDocumentIsTheBuiltOne) {
  FamilyWorld world;
  Response r = world.Call(http::verb::get, "/openapi.json");
  ASSERT_EQ(r.status, 200u);
  EXPECT_EQ(r.content_type, "application/json");
  json::value served = json::parse(r.body);
  EXPECT_EQ(served.at_pointer("/info/title").as_string(), "anteroom");
  EXPECT_NE(served.at("paths").as_object().if_contains("/openapi.json"), nullptr);
}

// Each refusal of the builder, on a document made for the test.
constexpr std::string_view kCommon = R"({"path_params": {"q": {"schema": {"type": "string"}}},
  "schemas": {"Error": {"type": "object", "properties": {"error": {"type": "object",
  "properties": {"code": {"type": "string"}}}}}}})";

ApiDoc BuildWith(std::string_view family, std::vector<RouteInfo> routes) {
  std::vector<ApiDocFile> files = {{"common.json", kCommon}, {"family.json", family}};
  return BuildOpenApi(routes, files, "test");
}

RouteInfo Get(std::string pattern) {
  return RouteInfo{http::verb::get, std::move(pattern), RouteOptions{}};
}

bool Mentions(const std::vector<std::string>& lines, std::string_view what) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

TEST(OpenApiDocTest, TheBuilderRefusesWhatWouldDrift) {
  constexpr std::string_view kGood = R"({"tag": {"name": "t"}, "routes": {
    "GET /v1/queues/{q}": {"summary": "s", "responses": {"200": {"description": "d",
      "example": {"a": 1}}}}}})";
  ApiDoc good = BuildWith(kGood, {Get("/v1/queues/{q}")});
  EXPECT_TRUE(good.problems.empty()) << Joined(good.problems);
  EXPECT_FALSE(good.json.empty());

  ApiDoc undescribed = BuildWith(kGood, {Get("/v1/queues/{q}"), Get("/v1/other")});
  EXPECT_TRUE(Mentions(undescribed.problems, "GET /v1/other: no description"))
      << Joined(undescribed.problems);
  EXPECT_TRUE(undescribed.json.empty());

  ApiDoc stale = BuildWith(kGood, {});
  EXPECT_TRUE(stale.problems.empty());
  EXPECT_TRUE(Mentions(stale.unused, "GET /v1/queues/{q}"));

  ApiDoc typo = BuildWith(R"({"tag": {"name": "t"}, "routes": {"GET /v1/queues/{q}": {
    "summary": "s", "respones": {}, "responses": {"200": {"description": "d", "example": 1}}}}})",
                          {Get("/v1/queues/{q}")});
  EXPECT_TRUE(Mentions(typo.problems, "unknown key 'respones'")) << Joined(typo.problems);

  ApiDoc param = BuildWith(R"({"tag": {"name": "t"}, "routes": {"GET /v1/x/{nope}": {
    "summary": "s", "responses": {"200": {"description": "d", "example": 1}}}}})",
                           {Get("/v1/x/{nope}")});
  EXPECT_TRUE(Mentions(param.problems, "path parameter 'nope'")) << Joined(param.problems);

  ApiDoc no_example = BuildWith(R"({"tag": {"name": "t"}, "routes": {"GET /v1/queues/{q}": {
    "summary": "s", "responses": {"200": {"description": "d"}}}}})",
                                {Get("/v1/queues/{q}")});
  EXPECT_TRUE(Mentions(no_example.problems, "no response has an 'example'"))
      << Joined(no_example.problems);
}

TEST(OpenApiDocTest, QueryAndHeaderParametersAreTheRoutesOwn) {
  ApiDoc doc = BuildWith(R"({"tag": {"name": "t"}, "routes": {"GET /v1/queues/{q}": {
    "summary": "s", "query": {"limit": {"schema": {"type": "integer"}}},
    "headers": {"Anteroom-Session": {"schema": {"type": "string"}, "required": true}},
    "responses": {"200": {"description": "d", "example": 1}}}}})",
                         {Get("/v1/queues/{q}")});
  ASSERT_TRUE(doc.problems.empty()) << Joined(doc.problems);
  json::value root = json::parse(doc.json);
  const json::array& params = root.at_pointer("/paths/~1v1~1queues~1{q}/get/parameters").as_array();
  ASSERT_EQ(params.size(), 3u);
  EXPECT_EQ(params[0].at("in").as_string(), "path");
  EXPECT_EQ(params[1].at("in").as_string(), "query");
  EXPECT_EQ(params[1].at("required").as_bool(), false);
  EXPECT_EQ(params[2].at("in").as_string(), "header");
  EXPECT_EQ(params[2].at("name").as_string(), "Anteroom-Session");
  EXPECT_EQ(params[2].at("required").as_bool(), true);
}

}  // namespace
}  // namespace anteroom::server
