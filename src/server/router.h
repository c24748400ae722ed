#pragma once
// Routes: (method, path pattern) -> handler. Patterns are segments, "{name}" capturing one
// decoded segment. Families register their routes at start-up (see families.h); after that
// the table is read-only and shared by every I/O thread.

#include <boost/beast/http/verb.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "server/reply.h"

namespace anteroom::server {

namespace http = boost::beast::http;

struct Request {
  http::verb method = http::verb::get;
  std::string target;  // as sent: path and query
  std::string body;
  std::string authorization;        // the Authorization header, if any
  bool websocket = false;           // a WebSocket upgrade request
  std::vector<std::string> params;  // captured path segments, in pattern order
  std::vector<std::pair<std::string, std::string>> query;  // decoded query parameters

  // The first value of a query parameter, or nullptr.
  const std::string* Query(std::string_view key) const;
};

// The request stays alive until the handler responds.
using Handler = std::function<void(const Request&, Respond)>;

struct RouteOptions {
  bool admin = false;   // requires the admin key when one is set
  bool stream = false;  // may answer with a live stream (Response::stream)
};

class Router {
 public:
  explicit Router(std::string admin_key) : admin_key_(std::move(admin_key)) {}

  void Add(http::verb method, std::string_view pattern, Handler handler, RouteOptions options = {});
  // Largest body accepted for a target (64 KiB unless a family raised it for its prefix).
  void SetBodyLimit(std::string_view path_prefix, size_t limit);
  size_t BodyLimitFor(std::string_view target) const;
  // Whether a GET of `target` may become a live stream: the connection then reads no request
  // after it. Cheap (the last path segment against the stream routes'), called per request.
  bool MayStream(std::string_view target) const;

  // Matches the route and answers: the handler's reply, or 400/401/404/405.
  void Dispatch(Request& request, Respond respond) const;

 private:
  struct Route {
    http::verb method;
    std::vector<std::string> segments;  // "{x}" captures
    Handler handler;
    RouteOptions options;
  };
  bool Authorized(const Request& request) const;

  std::string admin_key_;
  std::vector<Route> routes_;
  std::vector<std::pair<std::string, size_t>> body_limits_;
  std::vector<std::string> stream_endings_;  // last segments of stream routes
};

inline constexpr size_t kDefaultBodyLimit = 64 * 1024;

}  // namespace anteroom::server
