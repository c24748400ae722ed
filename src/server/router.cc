#include "server/router.h"

#include <openssl/crypto.h>

#include <boost/url/parse.hpp>

namespace anteroom::server {

namespace {
bool IsCapture(const std::string& segment) { return segment.size() > 1 && segment[0] == '{'; }
}  // namespace

const std::string* Request::Query(std::string_view key) const {
  for (const auto& [k, v] : query) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Router::Add(http::verb method, std::string_view pattern, Handler handler,
                 RouteOptions options) {
  Route route{method, {}, std::move(handler), options};
  size_t start = 1;  // patterns begin with '/'
  while (start <= pattern.size()) {
    size_t end = pattern.find('/', start);
    if (end == std::string_view::npos) end = pattern.size();
    route.segments.emplace_back(pattern.substr(start, end - start));
    start = end + 1;
  }
  if (options.stream) stream_endings_.push_back(route.segments.back());
  routes_.push_back(std::move(route));
}

bool Router::MayStream(std::string_view target) const {
  if (stream_endings_.empty()) return false;
  std::string_view path = target.substr(0, target.find('?'));
  std::string_view last = path.substr(path.rfind('/') + 1);
  for (const std::string& ending : stream_endings_) {
    if (last == ending) return true;
  }
  return false;
}

void Router::SetBodyLimit(std::string_view path_prefix, size_t limit) {
  body_limits_.emplace_back(std::string(path_prefix), limit);
}

size_t Router::BodyLimitFor(std::string_view target) const {
  for (const auto& [prefix, limit] : body_limits_) {
    if (target.substr(0, prefix.size()) == prefix) return limit;
  }
  return kDefaultBodyLimit;
}

bool Router::Authorized(const Request& request) const {
  if (admin_key_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view auth = request.authorization;
  if (auth.substr(0, kBearer.size()) != kBearer) return false;
  std::string_view given = auth.substr(kBearer.size());
  return given.size() == admin_key_.size() &&
         CRYPTO_memcmp(given.data(), admin_key_.data(), given.size()) == 0;
}

void Router::Dispatch(Request& request, Respond respond) const {
  auto url = boost::urls::parse_origin_form(request.target);
  if (!url) {
    respond(ErrorReply(OpStatus::kInvalidArgument, "the request target is not a valid path"));
    return;
  }
  std::vector<std::string> path;
  path.reserve(8);
  for (auto segment : url->segments()) path.push_back(std::string(segment));
  for (auto param : url->params()) {
    request.query.emplace_back(std::string(param.key), std::string(param.value));
  }

  std::string allowed;
  for (const Route& route : routes_) {
    if (route.segments.size() != path.size()) continue;
    bool match = true;
    for (size_t i = 0; i < path.size() && match; ++i) {
      const std::string& want = route.segments[i];
      match = IsCapture(want) || want == path[i];
    }
    if (!match) continue;
    if (route.method != request.method) {
      if (!allowed.empty()) allowed += ", ";
      allowed += std::string(http::to_string(route.method));
      continue;
    }
    if (route.options.admin && !Authorized(request)) {
      respond(
          ErrorReply(OpStatus::kUnauthorized, "this route needs the admin key as a Bearer token"));
      return;
    }
    request.params.clear();
    for (size_t i = 0; i < path.size(); ++i) {
      if (IsCapture(route.segments[i])) request.params.push_back(std::move(path[i]));
    }
    route.handler(request, std::move(respond));
    return;
  }
  if (!allowed.empty()) {
    Response r = ErrorReply(OpStatus::kMethodNotAllowed, "allowed: " + allowed);
    r.headers.emplace_back("Allow", allowed);
    respond(std::move(r));
    return;
  }
  respond(ErrorReply(OpStatus::kNotFound, "no such route: " + std::string(url->path())));
}

}  // namespace anteroom::server
