// The OpenAPI document: GET /openapi.json, public (it says what the routes take, which the
// code already tells anyone; no key, no state). Built once at start-up from the route table.
#include <fmt/format.h>

#include <stdexcept>

#include "server/families.h"
#include "server/openapi_doc.h"

namespace anteroom::server {

namespace {

constexpr std::string_view kDocCache = "public, max-age=300";

// GET /openapi.json
void CmdOpenApi(Services& s, const Request&, Respond respond) {
  Response res;
  res.body = s.openapi_json;
  res.headers.emplace_back("Cache-Control", kDocCache);
  respond(std::move(res));
}

}  // namespace

void RegisterOpenApiRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/openapi.json", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdOpenApi},
  };
  AddRoutes(router, s, kRoutes);
  std::vector<RouteInfo> routes = router.Routes();
  ApiDoc doc = BuildOpenApi(routes, EmbeddedApiDocs(), ANTEROOM_VERSION);
  if (!doc.problems.empty()) {
    throw std::runtime_error(
        fmt::format("the OpenAPI document is wrong:\n  {}", fmt::join(doc.problems, "\n  ")));
  }
  s.openapi_json = std::move(doc.json);
}

}  // namespace anteroom::server
