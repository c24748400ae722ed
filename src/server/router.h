#pragma once
// Routes: (method, path pattern) -> handler. Patterns are segments, "{name}" capturing one
// decoded segment. Families register their routes at start-up (see families.h); after that
// the table is read-only and shared by every I/O thread.

#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/verb.hpp>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/hangup.h"
#include "server/http_metrics.h"
#include "server/reply.h"

namespace anteroom::server {

namespace http = boost::beast::http;

struct Request {
  http::verb method = http::verb::get;
  std::string target;  // as sent: path and query
  std::string body;
  std::string authorization;      // the Authorization header, if any
  std::string forwarded_for;      // the X-Forwarded-For header, if any
  boost::asio::ip::address peer;  // the address the connection came from
  bool websocket = false;         // a WebSocket upgrade request
  // Set by the router for routes that may park (RouteOptions::parks): the connection signals
  // it when the client hangs up before the answer.
  std::shared_ptr<Hangup> hangup;
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
  bool parks = false;   // may wait long before answering (a long poll): watch for a hang-up
};

// Whether an Authorization header carries the admin key: `Bearer KEY`, or HTTP Basic
// (RFC 7617) with any user name and KEY as the password. Schemes are case-insensitive; the key
// is compared in constant time. An empty key lets everyone in (auth off).
bool HasAdminKey(std::string_view authorization, std::string_view admin_key);

class Router {
 public:
  explicit Router(std::string admin_key);

  void Add(http::verb method, std::string_view pattern, Handler handler, RouteOptions options = {});
  // Largest body accepted for a target (64 KiB unless a family raised it for its prefix).
  void SetBodyLimit(std::string_view path_prefix, size_t limit);
  size_t BodyLimitFor(std::string_view target) const;
  // Whether a GET of `target` may become a live stream: the connection then reads no request
  // after it. Cheap (the last path segment first, then the whole pattern), called per request.
  bool MayStream(std::string_view target) const;

  // Matches the route and answers: the handler's reply, or 400/401/404/405. The time until
  // the answer is recorded in http_metrics() under the route's pattern ("unmatched" for
  // 400/404/405 answered here).
  void Dispatch(Request& request, Respond respond) const;

  const HttpMetrics& http_metrics() const { return metrics_; }

 private:
  struct Route {
    http::verb method;
    std::vector<std::string> segments;  // "{x}" captures
    Handler handler;
    RouteOptions options;
    HttpMetrics::SeriesId series;
  };
  HttpMetrics::SeriesId UnmatchedSeries(http::verb method) const;

  std::string admin_key_;
  std::vector<Route> routes_;
  std::vector<std::pair<std::string, size_t>> body_limits_;
  std::vector<std::vector<std::string>> stream_patterns_;  // segments of the stream routes
  HttpMetrics metrics_;
  // Unmatched requests by method: the common ones, then one series for every other method.
  static constexpr std::array<http::verb, 7> kCommonMethods = {
      http::verb::get,     http::verb::head,  http::verb::post,   http::verb::put,
      http::verb::delete_, http::verb::patch, http::verb::options};
  std::array<HttpMetrics::SeriesId, kCommonMethods.size() + 1> unmatched_{};
};

inline constexpr size_t kDefaultBodyLimit = 64 * 1024;

}  // namespace anteroom::server
