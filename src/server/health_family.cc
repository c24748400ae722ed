// Health: /healthz for liveness (the process answers; whether changes work is reported, not
// failed), /readyz for load balancers (503 while changes would be refused, so traffic goes to
// a process that can take it).
#include <boost/json.hpp>

#include "server/families.h"

namespace anteroom::server {

namespace {

// {"status": "ok"} or {"status": "degraded", "reason": ...}: always 200, as restarting a
// process whose disk is full or whose Redis is gone would not help.
void CmdHealthz(Services& s, const Request&, Respond respond) {
  s.backend.CheckHealth([respond = std::move(respond)](OpResult<store::HealthReport> r) {
    if (r.ok() && r->changes_ok) return respond(JsonReply(boost::json::object{{"status", "ok"}}));
    std::string reason = r.ok() ? r->problem : r.message();
    respond(JsonReply(boost::json::object{{"status", "degraded"}, {"reason", reason}}));
  });
}

// 200 {"status": "ready"}, or 503 {"status": "not_ready", "reason": ...} with Retry-After.
void CmdReadyz(Services& s, const Request&, Respond respond) {
  s.backend.CheckHealth([respond = std::move(respond)](OpResult<store::HealthReport> r) {
    if (r.ok() && r->changes_ok) {
      return respond(JsonReply(boost::json::object{{"status", "ready"}}));
    }
    std::string reason = r.ok() ? r->problem : r.message();
    Response res = JsonReply(boost::json::object{{"status", "not_ready"}, {"reason", reason}}, 503);
    res.headers.emplace_back("Retry-After", "1");
    respond(std::move(res));
  });
}

}  // namespace

void RegisterHealthRoutes(Router& router, Services& s) {
  using namespace route_table;
  static constexpr RouteDef kRoutes[] = {
      // method, pattern, scope, body limit, CORS, kind, handler
      {verb::get, "/healthz", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdHealthz},
      {verb::get, "/readyz", kPublic, kDefaultBodyLimit, kNoCors, kPlain, CmdReadyz},
  };
  AddRoutes(router, s, kRoutes);
}

}  // namespace anteroom::server
