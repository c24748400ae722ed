#include "http/router.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <boost/beast/core/string.hpp>
#include <boost/url/parse.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>

#include "common/wire_errors.h"

namespace anteroom::http {

namespace {

using SteadyClock = std::chrono::steady_clock;

bool IsCapture(const std::string& segment) { return segment.size() > 1 && segment[0] == '{'; }

// What a request does that a page of another origin must be allowed to do: change state (any
// method but GET and HEAD), or hold a live channel (a WebSocket or an event stream keeps a
// place in a line). Browsers send these without asking first when they look like forms.
bool ChangesState(const Request& request, bool stream_route) {
  return (request.method != http::verb::get && request.method != http::verb::head) ||
         request.websocket || stream_route;
}

// Whether a Content-Type names JSON: application/json or a +json type, parameters allowed.
bool IsJsonMediaType(std::string_view content_type) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
  constexpr std::string_view kJson = "application/json", kSuffix = "+json";
  return boost::beast::iequals(type, kJson) ||
         (type.size() > kSuffix.size() && type.starts_with("application/") &&
          boost::beast::iequals(type.substr(type.size() - kSuffix.size()), kSuffix));
}

// The headers that let a page of `origin` read an answer (the origin was allowed).
void AddCorsHeaders(Response& response, const std::string& origin) {
  response.headers.emplace_back("Access-Control-Allow-Origin", origin);
  response.headers.emplace_back("Access-Control-Expose-Headers", "Retry-After");
  response.headers.emplace_back("Vary", "Origin");
}

// A route of the public API called from other origins' pages (Cors::kCorsPublic): what it
// answers depends on Origin.
bool IsCorsRoute(const RouteOptions& options) { return options.cors == Cors::kCorsPublic; }

// An answer made before the handler runs, on a route found: the CORS headers for `cors_origin`
// (an allowed origin), or, on a CORS route, Vary alone (the answer depends on Origin).
Response WithCorsHeaders(Response response, const std::string& cors_origin, bool cors_route) {
  if (!cors_origin.empty()) {
    AddCorsHeaders(response, cors_origin);
  } else if (cors_route) {
    response.headers.emplace_back("Vary", "Origin");
  }
  return response;
}

// The path's segments, decoded, and the query's parameters, appended to request.query.
std::vector<std::string> ReadTarget(const boost::urls::url_view& url, Request& request) {
  std::vector<std::string> path;
  path.reserve(8);
  for (auto segment : url.segments()) path.push_back(std::string(segment));
  for (auto param : url.params()) {
    request.query.emplace_back(std::string(param.key), std::string(param.value));
  }
  return path;
}

// The credentials after "SCHEME " (the scheme case-insensitive, RFC 9110 11.1), or nullopt.
std::optional<std::string_view> Credentials(std::string_view authorization,
                                            std::string_view scheme) {
  if (authorization.size() <= scheme.size() || authorization[scheme.size()] != ' ' ||
      !boost::beast::iequals(authorization.substr(0, scheme.size()), scheme)) {
    return std::nullopt;
  }
  return authorization.substr(scheme.size() + 1);
}

using Digest = std::array<unsigned char, 32>;

Digest Sha256(std::string_view text) {
  Digest out{};
  unsigned int n = 0;
  if (EVP_Digest(text.data(), text.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 ||
      n != out.size()) {
    throw std::runtime_error("SHA-256 failed");
  }
  return out;
}

// Digests of equal length compared in constant time: neither the key's length nor the place
// of the first difference shows in the time taken.
bool SameDigest(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

// The password of HTTP Basic credentials, base64("user:password") (RFC 7617): nullopt unless
// they are canonical padded base64 holding a colon. EVP_DecodeBlock decodes whole 4-character
// groups and answers '=' padding as zero bytes, so those are cut off after it.
std::optional<std::string> BasicPassword(std::string_view encoded) {
  if (encoded.empty() || encoded.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  while (padding < 2 && encoded[encoded.size() - 1 - padding] == '=') ++padding;
  for (size_t i = 0; i < encoded.size() - padding; ++i) {
    if (!IsBase64Char(encoded[i])) return std::nullopt;
  }
  std::string decoded(encoded.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(decoded.data()),
                          reinterpret_cast<const unsigned char*>(encoded.data()),
                          static_cast<int>(encoded.size()));
  if (n < 0 || static_cast<size_t>(n) != decoded.size()) return std::nullopt;
  decoded.resize(decoded.size() - padding);
  size_t colon = decoded.find(':');
  if (colon == std::string::npos) return std::nullopt;
  return decoded.substr(colon + 1);
}

// The key an Authorization header presents: `Bearer KEY`, or the password of HTTP Basic.
std::optional<std::string> PresentedKey(std::string_view authorization) {
  if (auto token = Credentials(authorization, "Bearer")) return std::string(*token);
  // A header is at most 16 KiB (the server's limit), so this decodes little.
  if (auto basic = Credentials(authorization, "Basic")) return BasicPassword(*basic);
  return std::nullopt;
}

}  // namespace

bool HasAdminKey(std::string_view authorization, std::string_view admin_key) {
  if (admin_key.empty()) return true;
  std::optional<std::string> given = PresentedKey(authorization);
  return given && SameDigest(Sha256(*given), Sha256(admin_key));
}

QueueAccess QueueAccessOf(const AccessKeys& keys) {
  if (!keys.queue_key.empty()) return QueueAccess::kQueueKey;
  if (!keys.admin_key.empty()) return QueueAccess::kAdminKey;
  return QueueAccess::kOpen;
}

std::string_view ToString(QueueAccess access) {
  switch (access) {
    case QueueAccess::kOpen:
      return "open";
    case QueueAccess::kAdminKey:
      return "admin_key";
    case QueueAccess::kQueueKey:
      return "queue_key";
  }
  return "?";
}

Router::Router(std::string admin_key)
    : Router(AccessKeys{.admin_key = std::move(admin_key), .queue_key = {}}) {}

void Router::SetOriginPolicy(std::shared_ptr<const OriginPolicy> origins) {
  origins_ = std::move(origins);
}

void Router::SetQueueKeys(std::shared_ptr<QueueKeyLookup> queue_keys) {
  queue_keys_ = std::move(queue_keys);
}

std::string KeyDigest(std::string_view key) {
  Digest d = Sha256(key);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string_view Router::QueueKeyNeeded() const {
  return queue_access() == QueueAccess::kQueueKey ? wire::kQueueKeyNeeded
                                                  : wire::kQueueAdminKeyNeeded;
}

bool Router::AllowsQueue(const std::optional<std::string>& own,
                         std::string_view authorization) const {
  if (!own) return Allows(Scope::kQueue, authorization);
  std::optional<std::string> given = PresentedKey(authorization);
  if (!given) return false;
  Digest digest = Sha256(*given);
  // Both comparisons are made, so the time does not tell which key matched.
  bool mine =
      own->size() == digest.size() && CRYPTO_memcmp(digest.data(), own->data(), digest.size()) == 0;
  std::shared_ptr<const KeyDigests> keys = keys_.load();
  bool admin = keys->admin && SameDigest(digest, *keys->admin);
  return mine || admin;
}

std::shared_ptr<const Router::KeyDigests> Router::DigestsOf(const AccessKeys& keys) {
  auto digests = std::make_shared<KeyDigests>();
  if (!keys.admin_key.empty()) digests->admin = Sha256(keys.admin_key);
  if (!keys.queue_key.empty()) digests->queue = Sha256(keys.queue_key);
  digests->access = QueueAccessOf(keys);
  return digests;
}

void Router::SetAccessKeys(const AccessKeys& keys) { keys_.store(DigestsOf(keys)); }

Router::Router(AccessKeys keys) : keys_(DigestsOf(keys)) {
  for (size_t i = 0; i < kCommonMethods.size(); ++i) {
    unmatched_[i] = metrics_.AddSeries(http::to_string(kCommonMethods[i]), "unmatched", true);
  }
  unmatched_.back() = metrics_.AddSeries("other", "unmatched", true);
}

bool Router::Allows(Scope scope, std::string_view authorization) const {
  switch (scope) {
    case Scope::kPublic:
    case Scope::kSession:
      return true;
    case Scope::kQueue:
    case Scope::kAdmin:
      break;
  }
  std::shared_ptr<const KeyDigests> keys = keys_.load();
  if (scope == Scope::kQueue && keys->access == QueueAccess::kOpen) return true;
  if (scope == Scope::kAdmin && !keys->admin) return true;
  std::optional<std::string> given = PresentedKey(authorization);
  if (!given) return false;
  Digest digest = Sha256(*given);
  // Both comparisons are made, so the time does not tell which key matched.
  bool admin = keys->admin && SameDigest(digest, *keys->admin);
  bool queue = keys->queue && SameDigest(digest, *keys->queue);
  return admin || (scope == Scope::kQueue && queue);
}

HttpMetrics::SeriesId Router::UnmatchedSeries(http::verb method) const {
  for (size_t i = 0; i < kCommonMethods.size(); ++i) {
    if (kCommonMethods[i] == method) return unmatched_[i];
  }
  return unmatched_.back();
}

const std::string* Request::Query(std::string_view key) const {
  for (const auto& [k, v] : query) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string_view ToString(Scope scope) {
  switch (scope) {
    case Scope::kPublic:
      return "public";
    case Scope::kSession:
      return "session";
    case Scope::kQueue:
      return "queue";
    case Scope::kAdmin:
      return "admin";
  }
  return "?";
}

std::string_view ToString(Cors cors) {
  switch (cors) {
    case Cors::kNoCors:
      return "no_cors";
    case Cors::kCorsPublic:
      return "cors_public";
    case Cors::kProxied:
      return "proxied";
  }
  return "?";
}

void Router::Add(http::verb method, std::string_view pattern, Handler handler,
                 RouteOptions options) {
  for (const Route& route : routes_) {
    if (route.method == method && route.pattern == pattern) {
      throw std::logic_error("route registered twice: " + std::string(http::to_string(method)) +
                             " " + std::string(pattern));
    }
  }
  Route route{method,  std::string(pattern),
              {},      std::move(handler),
              options, metrics_.AddSeries(http::to_string(method), pattern)};
  size_t start = 1;  // patterns begin with '/'
  while (start <= pattern.size()) {
    size_t end = pattern.find('/', start);
    if (end == std::string_view::npos) end = pattern.size();
    route.segments.emplace_back(pattern.substr(start, end - start));
    start = end + 1;
  }
  for (size_t i = 0; i < route.segments.size(); ++i) {
    if (route.segments[i] == "{q}") route.queue_param = static_cast<int>(i);
  }
  if (options.stream) stream_patterns_.push_back(route.segments);
  routes_.push_back(std::move(route));
}

std::vector<RouteInfo> Router::Routes() const {
  std::vector<RouteInfo> out;
  out.reserve(routes_.size());
  for (const Route& route : routes_) out.push_back({route.method, route.pattern, route.options});
  return out;
}

bool Router::RawPathMatches(std::string_view path, const std::vector<std::string>& segments) {
  // The raw path's segments against the pattern's literals ('/' inside a segment is
  // percent-encoded, so splitting the raw path counts segments as the router does).
  size_t i = 0;
  size_t start = 1;
  bool match = !path.empty() && path[0] == '/';
  while (match && start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    match = i < segments.size() &&
            (IsCapture(segments[i]) || segments[i] == path.substr(start, end - start));
    ++i;
    start = end + 1;
  }
  return match && i == segments.size();
}

bool Router::MayStream(std::string_view target) const {
  if (stream_patterns_.empty()) return false;
  std::string_view path = target.substr(0, target.find('?'));
  std::string_view last = path.substr(path.rfind('/') + 1);
  for (const std::vector<std::string>& pattern : stream_patterns_) {
    if (last != pattern.back()) continue;
    if (RawPathMatches(path, pattern)) return true;
  }
  return false;
}

size_t Router::BodyLimitFor(std::string_view target) const {
  std::string_view path = target.substr(0, target.find('?'));
  bool matched = false;
  size_t limit = 0;
  for (const Route& route : routes_) {
    if (route.options.body_limit <= limit || !RawPathMatches(path, route.segments)) continue;
    matched = true;
    limit = route.options.body_limit;
  }
  return matched ? limit : kDefaultBodyLimit;
}

void Router::Dispatch(Request& request, Respond respond) const {
  const SteadyClock::time_point start = SteadyClock::now();
  auto url = boost::urls::parse_origin_form(request.target);
  if (!url) {
    return Answer(UnmatchedSeries(request.method), start, respond,
                  ErrorReply(OpStatus::kInvalidArgument, wire::kBadTarget));
  }
  std::vector<std::string> path = ReadTarget(*url, request);
  Match match = MatchRoute(request.method, path);
  if (match.route == nullptr) {
    return Answer(UnmatchedSeries(request.method), start, respond,
                  Unmatched(request, match, url->encoded_path()));
  }
  const Route& route = *match.route;
  // Browsers first, then the key: a form posted from another site with cached credentials
  // must not get in.
  OpResult<std::string> cors_origin = CheckOrigin(route, request);
  if (!cors_origin.ok()) return Answer(route.series, start, respond, ErrorReply(cors_origin));
  if (OpResult<Done> type = CheckMediaType(route, request); !type.ok()) {
    return Answer(route.series, start, respond,
                  WithCorsHeaders(ErrorReply(type), *cors_origin, IsCorsRoute(route.options)));
  }
  Authorize(route, request, path, std::move(respond), start, *cors_origin);
}

void Router::Answer(HttpMetrics::SeriesId series, SteadyClock::time_point start,
                    const Respond& respond, Response response) const {
  metrics_.Record(series, SteadyClock::now() - start);
  respond(std::move(response));
}

Router::Match Router::MatchRoute(http::verb method, const std::vector<std::string>& path) const {
  Match match;
  for (const Route& route : routes_) {
    if (route.segments.size() != path.size()) continue;
    bool same = true;
    for (size_t i = 0; i < path.size() && same; ++i) {
      const std::string& want = route.segments[i];
      same = IsCapture(want) || want == path[i];
    }
    if (!same) continue;
    if (route.method == method) {
      match.route = &route;
      return match;
    }
    if (!match.allowed.empty()) match.allowed += ", ";
    match.allowed += std::string(http::to_string(route.method));
    if (method == http::verb::options) match.preflight.push_back(&route);
  }
  return match;
}

Response Router::Unmatched(const Request& request, const Match& match,
                           std::string_view encoded_path) const {
  if (!match.preflight.empty()) return Preflight(request, match.preflight);
  if (!match.allowed.empty()) {
    Response r = ErrorReply(OpStatus::kMethodNotAllowed, wire::MethodNotAllowed(match.allowed));
    r.headers.emplace_back("Allow", match.allowed);
    return r;
  }
  // The path as sent (ASCII): decoded, it may hold bytes that are not UTF-8, and the answer
  // would not be JSON.
  return ErrorReply(OpStatus::kNotFound, wire::NoSuchRoute(encoded_path));
}

OpResult<std::string> Router::CheckOrigin(const Route& route, const Request& request) const {
  if (route.options.cors == Cors::kProxied || request.origin.empty() ||
      origins_->SameOrigin(request.origin, request.host, request.forwarded_host, request.peer)) {
    return std::string();
  }
  const bool cors_route = IsCorsRoute(route.options);
  if (cors_route && origins_->AllowsCrossOrigin(request.origin)) return request.origin;
  if (ChangesState(request, route.options.stream)) {
    return {OpStatus::kOriginNotAllowed, wire::OriginNotAllowed(request.origin, cors_route)};
  }
  return std::string();
}

OpResult<Done> Router::CheckMediaType(const Route& route, const Request& request) {
  if (route.options.cors == Cors::kProxied || request.method == http::verb::get ||
      request.method == http::verb::head || request.content_type.empty() ||
      IsJsonMediaType(request.content_type)) {
    return Done{};
  }
  return {OpStatus::kUnsupportedMediaType, std::string(wire::kBodyNotJson)};
}

void Router::Authorize(const Route& route, Request& request, std::vector<std::string>& path,
                       Respond respond, SteadyClock::time_point start,
                       const std::string& cors_origin) const {
  if (client_certificates_ && !request.client_certificate &&
      (route.options.scope == Scope::kQueue || route.options.scope == Scope::kAdmin)) {
    return Answer(route.series, start, respond,
                  WithCorsHeaders(ErrorReply(OpStatus::kClientCertificateRequired,
                                             wire::kClientCertificateNeeded),
                                  cors_origin, IsCorsRoute(route.options)));
  }
  if (route.options.scope == Scope::kQueue && queue_keys_ && route.queue_param >= 0) {
    return AuthorizeQueue(route, request, path, std::move(respond), start, cors_origin);
  }
  if (!Allows(route.options.scope, request.authorization)) {
    std::string_view why =
        route.options.scope == Scope::kQueue ? QueueKeyNeeded() : wire::kAdminKeyNeeded;
    return Answer(route.series, start, respond,
                  WithCorsHeaders(ErrorReply(OpStatus::kUnauthorized, why), cors_origin,
                                  IsCorsRoute(route.options)));
  }
  Run(route, request, path, std::move(respond), start, cors_origin);
}

void Router::AuthorizeQueue(const Route& route, Request& request, std::vector<std::string>& path,
                            Respond respond, SteadyClock::time_point start,
                            const std::string& cors_origin) const {
  const std::string& queue = path[static_cast<size_t>(route.queue_param)];
  if (auto own = queue_keys_->Cached(queue)) {
    if (!AllowsQueue(*own, request.authorization)) {
      return Answer(route.series, start, respond,
                    WithCorsHeaders(ErrorReply(OpStatus::kUnauthorized,
                                               *own ? wire::kOwnQueueKeyNeeded : QueueKeyNeeded()),
                                    cors_origin, IsCorsRoute(route.options)));
    }
    return Run(route, request, path, std::move(respond), start, cors_origin);
  }
  // Not known fresh: the request waits for the read (the caller's Request is gone by then).
  if (route.options.parks) request.hangup = std::make_shared<Hangup>();
  auto held = std::make_shared<Request>(request);
  queue_keys_->Fetch(
      queue, [this, &route, held, path = std::move(path), start, cors_origin,
              respond = std::move(respond)](OpResult<std::optional<std::string>> own) mutable {
        std::optional<Response> refusal;
        if (!own.ok()) {
          refusal = ErrorReply(own);
        } else if (!AllowsQueue(*own, held->authorization)) {
          refusal = ErrorReply(OpStatus::kUnauthorized,
                               *own ? wire::kOwnQueueKeyNeeded : QueueKeyNeeded());
        }
        if (refusal) return Answer(route.series, start, respond, std::move(*refusal));
        Run(route, *held, path, std::move(respond), start, cors_origin);
      });
}

void Router::Run(const Route& route, Request& request, std::vector<std::string>& path,
                 Respond respond, SteadyClock::time_point start,
                 const std::string& cors_origin) const {
  request.admin = Allows(Scope::kAdmin, request.authorization) &&
                  (!client_certificates_ || request.client_certificate);
  if (route.options.parks && !request.hangup) request.hangup = std::make_shared<Hangup>();
  request.params.clear();
  for (size_t i = 0; i < path.size(); ++i) {
    if (IsCapture(route.segments[i])) request.params.push_back(std::move(path[i]));
  }
  if (!cors_origin.empty() || route.options.cors == Cors::kCorsPublic) {
    // The CORS headers go on whatever the handler answers, errors too (anteroom.js reads
    // their codes).
    route.handler(request, [this, series = route.series, start, cors_origin,
                            respond = std::move(respond)](Response response) {
      metrics_.Record(series, SteadyClock::now() - start);
      if (!cors_origin.empty()) {
        AddCorsHeaders(response, cors_origin);
      } else {
        response.headers.emplace_back("Vary", "Origin");
      }
      respond(std::move(response));
    });
    return;
  }
  // The one allocation this adds per request: the timed wrapper does not fit std::function's
  // inline storage.
  route.handler(request, [this, series = route.series, start,
                          respond = std::move(respond)](Response response) {
    metrics_.Record(series, SteadyClock::now() - start);
    respond(std::move(response));
  });
}

Response Router::Preflight(const Request& request,
                           const std::vector<const Route*>& matching) const {
  std::string methods, cors_methods;
  for (const Route* route : matching) {
    std::string_view name = http::to_string(route->method);
    (methods.empty() ? methods : methods += ", ") += name;
    if (route->options.cors == Cors::kCorsPublic) {
      (cors_methods.empty() ? cors_methods : cors_methods += ", ") += name;
    }
  }
  Response r;
  r.status = 204;
  r.content_type.clear();  // no content (RFC 9110 15.3.5)
  if (request.origin.empty()) {
    // Not a browser's preflight: what the path allows (RFC 9110 9.3.7).
    r.headers.emplace_back("Allow", methods + ", OPTIONS");
    return r;
  }
  if (cors_methods.empty() ||
      (!origins_->SameOrigin(request.origin, request.host, request.forwarded_host, request.peer) &&
       !origins_->AllowsCrossOrigin(request.origin))) {
    return ErrorReply(OpStatus::kOriginNotAllowed,
                      wire::OriginNotAllowed(request.origin, !cors_methods.empty()));
  }
  r.headers.emplace_back("Access-Control-Allow-Origin", request.origin);
  r.headers.emplace_back("Access-Control-Allow-Methods", cors_methods);
  // The public room API takes JSON bodies, and a session or token in a header where a GET would
  // otherwise put it in the URL (server/preamble.h, CredentialOf); no cookies.
  r.headers.emplace_back("Access-Control-Allow-Headers",
                         "Content-Type, Anteroom-Session, Anteroom-Token");
  r.headers.emplace_back("Access-Control-Max-Age", "600");
  r.headers.emplace_back("Vary",
                         "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
  return r;
}

}  // namespace anteroom::http
