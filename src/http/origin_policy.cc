#include "http/origin_policy.h"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <stdexcept>

#include "common/ascii.h"
#include "common/uri_shape.h"

namespace anteroom::http {

namespace urls = boost::urls;

namespace {

std::string_view DefaultPort(urls::scheme scheme) {
  return scheme == urls::scheme::https ? "443" : "80";
}

// scheme://host[:port] of a parsed http(s) URL, the default port left out.
std::optional<std::string> OriginOf(const urls::url_view& u) {
  if (u.scheme_id() != urls::scheme::http && u.scheme_id() != urls::scheme::https) {
    return std::nullopt;
  }
  if (!u.has_authority() || u.host().empty() || u.has_userinfo()) return std::nullopt;
  std::string out = AsciiLower(u.scheme());
  out += "://";
  out += AsciiLower(u.encoded_host());
  if (u.has_port() && !u.port().empty() && u.port() != DefaultPort(u.scheme_id())) {
    out += ':';
    out += u.port();
  }
  return out;
}

// host[:port] as a Host header says it, the default port of `scheme` left out.
std::string HostAs(std::string_view host, std::string_view default_port) {
  std::string out = AsciiLower(host);
  size_t colon = out.rfind(':');
  // "[::1]:8080" has a port; "[::1]" has none (its colons are inside the brackets).
  if (colon != std::string::npos && out.find(']', colon) == std::string::npos &&
      std::string_view(out).substr(colon + 1) == default_port) {
    out.resize(colon);
  }
  return out;
}

}  // namespace

std::optional<std::string> NormalizeOrigin(std::string_view text) {
  auto u = urls::parse_absolute_uri(text);
  if (!u) return std::nullopt;
  // An origin is the scheme and authority alone: no path, no query.
  if (!u->encoded_path().empty() || u->has_query()) return std::nullopt;
  return OriginOf(*u);
}

std::optional<std::string> OriginOfUrl(std::string_view url) {
  auto u = urls::parse_uri(url);
  if (!u || !PathFollowsAuthority(*u)) return std::nullopt;
  return OriginOf(*u);
}

OriginPolicy::Listed OriginPolicy::ParseListed(const std::vector<std::string>& cors_origins) {
  Listed listed;
  for (const std::string& text : cors_origins) {
    if (text == "*") {
      listed.any = true;
      continue;
    }
    auto origin = NormalizeOrigin(text);
    if (!origin) {
      throw std::invalid_argument("--cors-origin wants an origin such as https://shop.example " +
                                  std::string("(scheme, host and port only) or *, got '") + text +
                                  "'");
    }
    listed.origins.push_back(std::move(*origin));
  }
  return listed;
}

OriginPolicy::OriginPolicy(OriginPolicyOptions options)
    : trusted_(std::move(options.trusted_proxies)), listed_(ParseListed(options.cors_origins)) {}

void OriginPolicy::SetCorsOrigins(const std::vector<std::string>& cors_origins) {
  Listed listed = ParseListed(cors_origins);
  std::lock_guard lock(mu_);
  listed_ = std::move(listed);
}

bool OriginPolicy::SameOrigin(std::string_view origin, std::string_view host,
                              std::string_view forwarded_host,
                              const boost::asio::ip::address& peer) const {
  auto o = NormalizeOrigin(origin);
  if (!o) return false;
  size_t authority = o->find("://") + 3;
  std::string_view own = std::string_view(*o).substr(authority);
  std::string_view port = o->starts_with("https") ? "443" : "80";
  if (!host.empty() && HostAs(host, port) == own) return true;
  if (forwarded_host.empty() || !trusted_.Contains(peer)) return false;
  // A proxy may add to a list: the last value is the one it wrote.
  std::string_view last = forwarded_host.substr(forwarded_host.rfind(',') + 1);
  while (!last.empty() && last.front() == ' ') last.remove_prefix(1);
  while (!last.empty() && last.back() == ' ') last.remove_suffix(1);
  return HostAs(last, port) == own;
}

bool OriginPolicy::AllowsCrossOrigin(std::string_view origin) const {
  auto o = NormalizeOrigin(origin);
  if (!o) return false;
  std::lock_guard lock(mu_);
  if (listed_.any) return true;
  if (std::find(listed_.origins.begin(), listed_.origins.end(), *o) != listed_.origins.end()) {
    return true;
  }
  return origins_.contains(*o);
}

void OriginPolicy::NoteRoom(const std::string& room, std::optional<std::string> target_origin) {
  std::lock_guard lock(mu_);
  auto it = room_origins_.find(room);
  if (it != room_origins_.end()) {
    origins_.erase(origins_.find(it->second));
    room_origins_.erase(it);
  }
  if (target_origin) {
    origins_.insert(*target_origin);
    room_origins_.emplace(room, std::move(*target_origin));
  }
}

void OriginPolicy::SetRooms(std::map<std::string, std::string> target_origins) {
  std::multiset<std::string> origins;
  for (const auto& [room, origin] : target_origins) origins.insert(origin);
  std::lock_guard lock(mu_);
  room_origins_ = std::move(target_origins);
  origins_ = std::move(origins);
}

}  // namespace anteroom::http
