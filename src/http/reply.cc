#include "http/reply.h"

#include <boost/json/serialize.hpp>

namespace anteroom::http {

Response JsonReply(const boost::json::value& body, unsigned status) {
  Response r;
  r.status = status;
  r.body = boost::json::serialize(body);
  return r;
}

Response ErrorReply(OpStatus status, std::string_view message) {
  WireError wire = ToWire(status);
  boost::json::object error;
  error["code"] = wire.code;
  error["message"] = message;
  boost::json::object body;
  body["error"] = std::move(error);
  Response r = JsonReply(body, static_cast<unsigned>(wire.http_status));
  if (status == OpStatus::kUnauthorized) {
    // Basic first, so a browser asks for the key (as the password) instead of failing; API
    // clients and Prometheus may use either scheme.
    r.headers.emplace_back("WWW-Authenticate", R"(Basic realm="anteroom", charset="UTF-8")");
    r.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="anteroom")");
  }
  return r;
}

}  // namespace anteroom::http
