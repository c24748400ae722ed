#include <boost/json.hpp>

#include "server/families.h"

namespace anteroom::server {

void RegisterHealthRoutes(Router& router, Services& /*services*/) {
  router.Add(http::verb::get, "/healthz", [](const Request&, Respond respond) {
    respond(JsonReply(boost::json::object{{"status", "ok"}}));
  });
}

}  // namespace anteroom::server
