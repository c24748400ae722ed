#include "webhook/webhook_url.h"

#include <boost/url/parse.hpp>

#include <algorithm>

#include "common/ascii.h"
#include "common/uri_shape.h"

namespace anteroom::webhook {

namespace urls = boost::urls;
namespace ip = boost::asio::ip;

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool IsWebhookHostName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  std::string_view last;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    std::string_view label =
        name.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || label.size() > 63 ||
        !std::all_of(label.begin(), label.end(), IsNameChar)) {
      return false;
    }
    last = label;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return !std::all_of(last.begin(), last.end(), IsDigit);
}

std::optional<WebhookUrl> ParseWebhookUrl(std::string_view url, std::string& error) {
  auto refuse = [&error](std::string why) {
    error = std::move(why);
    return std::nullopt;
  };
  if (url.size() > kMaxWebhookUrlBytes) {
    return refuse("the URL is longer than " + std::to_string(kMaxWebhookUrlBytes) + " bytes");
  }
  auto parsed = urls::parse_absolute_uri(url);
  if (!parsed) {
    // parse_absolute_uri refuses a fragment too: say so rather than "syntax error".
    if (url.find('#') != std::string_view::npos && urls::parse_uri(url)) {
      return refuse("the URL has a fragment");
    }
    return refuse("not an absolute URL");
  }
  const urls::url_view& u = *parsed;
  WebhookUrl out;
  if (u.scheme_id() == urls::scheme::https) {
    out.https = true;
  } else if (u.scheme_id() != urls::scheme::http) {
    return refuse("the scheme must be http or https");
  }
  if (!u.has_authority() || u.encoded_host().empty()) return refuse("the URL has no host");
  if (!PathFollowsAuthority(u)) return refuse("the port must be digits, then '/' or nothing");
  if (u.has_userinfo()) return refuse("a user name or password is not allowed in the URL");
  switch (u.host_type()) {
    case urls::host_type::ipv4: {
      auto b = u.host_ipv4_address().to_bytes();
      out.address = ip::address(ip::address_v4(ip::address_v4::bytes_type{b[0], b[1], b[2], b[3]}));
      out.host = out.address->to_string();
      out.host_header = out.host;
      break;
    }
    case urls::host_type::ipv6: {
      auto b = u.host_ipv6_address().to_bytes();
      ip::address_v6::bytes_type bytes{};
      std::copy(b.begin(), b.end(), bytes.begin());
      out.address = ip::address(ip::address_v6(bytes));
      out.host = out.address->to_string();
      out.host_header = "[" + out.host + "]";
      break;
    }
    case urls::host_type::name: {
      std::string_view name = u.encoded_host();
      if (!name.empty() && name.back() == '.') name.remove_suffix(1);
      if (!IsWebhookHostName(name)) return refuse("the host is not a valid DNS name");
      out.host = AsciiLower(name);
      out.host_header = out.host;
      break;
    }
    default:
      return refuse("the host must be a DNS name, an IPv4 or an IPv6 address");
  }
  uint16_t default_port = out.https ? 443 : 80;
  out.port = default_port;
  if (u.has_port() && !u.port().empty()) {
    // Read here: port_number() wraps a port past 65535 around.
    unsigned port = 0;
    for (char c : u.port()) {
      port = port * 10 + static_cast<unsigned>(c - '0');  // the grammar allows digits only
      if (port > 65535) break;
    }
    if (port == 0 || port > 65535) return refuse("the port must be 1-65535");
    out.port = static_cast<uint16_t>(port);
  }
  if (out.port != default_port) out.host_header += ":" + std::to_string(out.port);
  out.target = u.encoded_path().empty() ? "/" : std::string(u.encoded_path());
  if (u.has_query()) {
    out.target += '?';
    out.target += u.encoded_query();
  }
  return out;
}

}  // namespace anteroom::webhook
