#include "server/return_url.h"

#include <boost/url/parse.hpp>

#include <algorithm>
#include <charconv>

#include "common/ascii.h"

namespace anteroom::server {

namespace urls = boost::urls;

namespace {

bool VisibleAsciiWithoutBackslash(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return c > 0x20 && c < 0x7f && c != '\\'; });
}

bool PlainHostName(std::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
  });
}

bool Ipv6Literal(std::string_view host) {
  return host.size() > 2 && host.front() == '[' && host.back() == ']' &&
         std::all_of(host.begin() + 1, host.end() - 1, [](unsigned char c) {
           return (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9') || c == ':' || c == '.';
         });
}

// The port as written, or nullopt when it is not 1-65535.
std::optional<int> PortNumber(std::string_view text) {
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return port;
}

}  // namespace

std::optional<std::string> AllowedReturnUrl(std::string_view url,
                                            const std::vector<std::string>& allowed,
                                            bool https_only) {
  if (url.empty() || url.size() > 4096 || !VisibleAsciiWithoutBackslash(url)) return std::nullopt;
  auto parsed = urls::parse_uri(url);
  if (!parsed) return std::nullopt;
  const urls::url_view& u = *parsed;
  const bool https = u.scheme_id() == urls::scheme::https;
  if (!https && (u.scheme_id() != urls::scheme::http || https_only)) return std::nullopt;
  if (!u.has_authority() || u.has_userinfo()) return std::nullopt;
  std::string host = AsciiLower(u.encoded_host());
  switch (u.host_type()) {
    case urls::host_type::name:
    case urls::host_type::ipv4:
      if (!PlainHostName(host)) return std::nullopt;
      break;
    case urls::host_type::ipv6:
      if (!Ipv6Literal(host)) return std::nullopt;
      break;
    default:
      return std::nullopt;
  }
  std::string_view path = u.encoded_path();
  if (!path.empty() && path.front() != '/') return std::nullopt;
  const int default_port = https ? 443 : 80;
  int port = default_port;
  if (u.has_port()) {
    std::optional<int> written = PortNumber(u.port());
    if (!written) return std::nullopt;
    port = *written;
  }
  const bool on_list = std::any_of(allowed.begin(), allowed.end(), [&](const std::string& entry) {
    if (entry == host) return port == default_port;
    return entry == host + ":" + std::to_string(port);
  });
  if (!on_list) return std::nullopt;
  // Rebuilt from the parts read (each already checked or percent-encoded by the parser).
  std::string out = https ? "https://" : "http://";
  out += host;
  if (u.has_port()) out += ":" + std::to_string(port);
  out += path.empty() ? std::string_view("/") : path;
  if (u.has_query()) {
    out += '?';
    out += u.encoded_query();
  }
  if (u.has_fragment()) {
    out += '#';
    out += u.encoded_fragment();
  }
  return out;
}

}  // namespace anteroom::server
