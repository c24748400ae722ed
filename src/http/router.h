#pragma once
// Routes: (method, path pattern) -> handler. Patterns are segments, "{name}" capturing one
// decoded segment. Families register their routes at start-up (see families.h); after that
// the table is read-only and shared by every I/O thread.

#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/verb.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/hangup.h"
#include "http/http_metrics.h"
#include "http/origin_policy.h"
#include "http/reply.h"

namespace anteroom::http {

// Beast's words for methods and header fields, which this layer's interface is written in:
// `http::verb` names the same type here and in the code that registers routes.
using boost::beast::http::field;
using boost::beast::http::fields;
using boost::beast::http::to_string;
using boost::beast::http::verb;

struct Request {
  http::verb method = http::verb::get;
  std::string target;  // as sent: path and query
  std::string body;
  std::string authorization;  // the Authorization header, if any
  std::string forwarded_for;  // the X-Forwarded-For header, if any
  // For the origin rules (http/origin_policy.h): as sent, empty when absent.
  std::string origin;          // Origin
  std::string host;            // Host
  std::string forwarded_host;  // X-Forwarded-Host (believed from a trusted proxy only)
  std::string content_type;    // Content-Type
  // Every header as sent (moved from the parser, not copied): what a handler reads besides the
  // fields above (the gate: the page's Cookie, Accept, the forwarded request, bypass rules).
  http::fields fields;
  boost::asio::ip::address peer;  // the address the connection came from
  bool websocket = false;         // a WebSocket upgrade request
  // Over TLS: the client showed a certificate the server's client CA verified.
  bool client_certificate = false;
  // Set by the router: the request carries the admin key (or none is set). On kSession routes
  // it may name sessions the short way (common/names.h, kMinClientSessionIdBytes); public
  // routes show the admin what they keep from others (a token's session, a room's gate).
  bool admin = false;
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

inline constexpr size_t kDefaultBodyLimit = 64 * 1024;

// Who may call a route. The router enforces it before the handler runs; the access rules of
// the server are read from the families' route tables (docs/security.md).
enum class Scope : uint8_t {
  kPublic,   // anyone
  kSession,  // acts for a waiting or admitted session (the session id is the credential)
  kQueue,    // the data plane of queues: the queue key or the admin key (see QueueAccess)
  kAdmin,    // requires the admin key when one is set
};
std::string_view ToString(Scope scope);

// Whether a route is meant for pages of other origins (http/origin_policy.h).
enum class Cors : uint8_t {
  kNoCors,      // same origin only: browsers of other origins may not change state here
  kCorsPublic,  // the public room API, called from the pages anteroom.js runs in: answers
                // preflights and carries CORS headers for the allowed origins
  kProxied,     // a forward-auth hook (the gate): a proxy passes the page's own request to it,
                // Origin and Content-Type included, for the gate to judge; neither the origin
                // rules nor the JSON-only rule apply, and it reads no body
};
std::string_view ToString(Cors cors);

struct RouteOptions {
  Scope scope = Scope::kPublic;
  size_t body_limit = kDefaultBodyLimit;  // larger bodies are refused with 413 before reading
  Cors cors = Cors::kNoCors;
  bool stream = false;  // may answer with a live stream (Response::stream)
  bool parks = false;   // may wait long before answering (a long poll): watch for a hang-up
};

// A registered route as the router holds it: what a test walks to check every route.
struct RouteInfo {
  http::verb method;
  std::string pattern;
  RouteOptions options;
};

// The keys `anteroom serve` was given (docs/security.md). Empty: not set.
struct AccessKeys {
  std::string admin_key;  // ANTEROOM_ADMIN_KEY: every route
  std::string queue_key;  // --queue-key / ANTEROOM_QUEUE_KEY: the kQueue routes
};

// Who may call kQueue routes, as decided from the keys set.
enum class QueueAccess : uint8_t {
  kOpen,      // no key set: anyone (a server on a trusted network)
  kAdminKey,  // an admin key and no queue key: the admin key (closed by default)
  kQueueKey,  // a queue key: the queue key or the admin key
};
QueueAccess QueueAccessOf(const AccessKeys& keys);
std::string_view ToString(QueueAccess access);

// Whether an Authorization header carries the admin key: `Bearer KEY`, or HTTP Basic
// (RFC 7617) with any user name and KEY as the password. Schemes are case-insensitive; the key
// is compared in constant time. An empty key lets everyone in (auth off).
bool HasAdminKey(std::string_view authorization, std::string_view admin_key);

// The keys of single queues (server/queue_keys.h), as the router reads them.
class QueueKeyLookup {
 public:
  virtual ~QueueKeyLookup() = default;
  // The queue's key digest when known fresh: nullopt when it must be fetched; an inner
  // nullopt when the queue has no key of its own.
  virtual std::optional<std::optional<std::string>> Cached(const std::string& queue) const = 0;
  // Reads it from the backend (`done` may run inline, or later on another thread).
  virtual void Fetch(const std::string& queue,
                     std::function<void(OpResult<std::optional<std::string>>)> done) = 0;
};

// The SHA-256 of a key (32 raw bytes): what is kept of every key, the server's and the queues'.
std::string KeyDigest(std::string_view key);

class Router {
 public:
  explicit Router(std::string admin_key);
  explicit Router(AccessKeys keys);
  // The origins browsers may call from (default: same origin only). Set before serving.
  void SetOriginPolicy(std::shared_ptr<const OriginPolicy> origins);
  // Queues' own keys (default: none are looked up, every queue follows the server's rule).
  void SetQueueKeys(std::shared_ptr<QueueKeyLookup> queue_keys);

  // The admin and queue scopes also need a verified TLS client certificate (Request::
  // client_certificate); without one the admin key grants nothing on public routes either.
  // Set before serving.
  void RequireClientCertificates(bool on) { client_certificates_ = on; }

  // Replaces the keys (SIGHUP): requests authorized from now on use the new ones. Any thread.
  void SetAccessKeys(const AccessKeys& keys);
  QueueAccess queue_access() const { return keys_.load()->access; }
  // Whether an Authorization header lets a request into a route of `scope` (the check
  // Dispatch makes before the handler runs; keys compared as SHA-256 digests, in constant time).
  bool Allows(Scope scope, std::string_view authorization) const;

  void Add(http::verb method, std::string_view pattern, Handler handler, RouteOptions options = {});
  // Largest body accepted for a target (the raw path and query, as sent): the largest limit of
  // the routes whose pattern the path matches (any method: the method is judged after the body
  // is read), or kDefaultBodyLimit when none does.
  size_t BodyLimitFor(std::string_view target) const;
  // Whether a GET of `target` may become a live stream: the connection then reads no request
  // after it. Cheap (the last path segment first, then the whole pattern), called per request.
  bool MayStream(std::string_view target) const;

  // Answers a request in phases: the target read (400), the route matched (else a CORS
  // preflight for OPTIONS, 405 or 404), the origin checked (403), the media type (415), the
  // scope's key (401), then the handler. The time until the answer is recorded in
  // http_metrics() under the route's pattern ("unmatched" for 400/404/405 and preflights).
  void Dispatch(Request& request, Respond respond) const;

  const HttpMetrics& http_metrics() const { return metrics_; }

  // Every registered route, in registration order (read-only; the table does not change after
  // start-up).
  std::vector<RouteInfo> Routes() const;

 private:
  struct Route {
    http::verb method;
    std::string pattern;
    std::vector<std::string> segments;  // "{x}" captures
    Handler handler;
    RouteOptions options;
    HttpMetrics::SeriesId series;
    int queue_param = -1;  // the segment of "{q}", when the pattern has one
  };
  // What a path names for a method: the route, or else what the path has for other methods.
  struct Match {
    const Route* route = nullptr;
    std::string allowed;                  // the path's methods, for 405 and Allow
    std::vector<const Route*> preflight;  // on OPTIONS: the path's routes
  };
  using SteadyTime = std::chrono::steady_clock::time_point;

  HttpMetrics::SeriesId UnmatchedSeries(http::verb method) const;
  // Answers before any handler runs: the time since `start` is recorded under `series` first
  // (so a scrape that follows the answer counts it).
  void Answer(HttpMetrics::SeriesId series, SteadyTime start, const Respond& respond,
              Response response) const;
  // Dispatch's phases, in order.
  Match MatchRoute(http::verb method, const std::vector<std::string>& path) const;
  // No route for the method: a preflight, 405 with the path's methods, or 404.
  Response Unmatched(const Request& request, const Match& match,
                     std::string_view encoded_path) const;
  // A page of another origin may only do what the route's CORS column and the origin policy
  // allow (http/origin_policy.h): the origin to send CORS headers for (empty: none), or 403.
  OpResult<std::string> CheckOrigin(const Route& route, const Request& request) const;
  // A body in a form's types (text/plain, urlencoded, multipart) is what a cross-site form
  // sends: every route with a body reads JSON, so only JSON is taken (or no type at all).
  static OpResult<Done> CheckMediaType(const Route& route, const Request& request);
  // The route's scope, from its family's table: the one place access is decided. Runs the
  // route when the request may call it, else answers 401.
  void Authorize(const Route& route, Request& request, std::vector<std::string>& path,
                 Respond respond, SteadyTime start, const std::string& cors_origin) const;
  // A kQueue route when queues may have keys of their own (SetQueueKeys): the queue's key from
  // the lookup's cache, or read first (the request then waits for it).
  void AuthorizeQueue(const Route& route, Request& request, std::vector<std::string>& path,
                      Respond respond, SteadyTime start, const std::string& cors_origin) const;
  // The answer to OPTIONS on a path with routes (`matching`: those of every method).
  Response Preflight(const Request& request, const std::vector<const Route*>& matching) const;
  // What a refused kQueue request is told, by the server's rule.
  std::string_view QueueKeyNeeded() const;
  // The access of a kQueue route whose queue has `own` key (nullopt: none of its own).
  bool AllowsQueue(const std::optional<std::string>& own, std::string_view authorization) const;
  // Runs the route's handler, access granted: the timing, and CORS headers when `cors_origin`
  // is set (or Vary on a CORS route).
  void Run(const Route& route, Request& request, std::vector<std::string>& path, Respond respond,
           SteadyTime start, const std::string& cors_origin) const;
  // Whether the raw path (percent-encoded, without the query) has the pattern's segments.
  static bool RawPathMatches(std::string_view path, const std::vector<std::string>& segments);

  using Digest = std::array<unsigned char, 32>;
  // What is kept of the keys, replaced whole by SetAccessKeys: a request reads one version.
  struct KeyDigests {
    std::optional<Digest> admin;  // SHA-256 of the admin key, when one is set
    std::optional<Digest> queue;  // SHA-256 of the queue key, when one is set
    QueueAccess access = QueueAccess::kOpen;
  };
  static std::shared_ptr<const KeyDigests> DigestsOf(const AccessKeys& keys);
  std::atomic<std::shared_ptr<const KeyDigests>> keys_;
  bool client_certificates_ = false;  // RequireClientCertificates
  std::shared_ptr<const OriginPolicy> origins_ = std::make_shared<OriginPolicy>();
  std::shared_ptr<QueueKeyLookup> queue_keys_;
  std::vector<Route> routes_;
  std::vector<std::vector<std::string>> stream_patterns_;  // segments of the stream routes
  HttpMetrics metrics_;
  // Unmatched requests by method: the common ones, then one series for every other method.
  static constexpr std::array<http::verb, 7> kCommonMethods = {
      http::verb::get,     http::verb::head,  http::verb::post,   http::verb::put,
      http::verb::delete_, http::verb::patch, http::verb::options};
  std::array<HttpMetrics::SeriesId, kCommonMethods.size() + 1> unmatched_{};
};

}  // namespace anteroom::http
