#pragma once
// A webhook's URL as the sender reads it (Boost.URL): an absolute http or https URL with a
// host, no user name or password, no fragment, a host that is a DNS name (letters, digits,
// '-', '_', dots; not ending in a number, which resolvers would read as an IPv4 address), an
// IPv4 address or a bracketed IPv6 one (no zone id). Any port but 0. The route that registers a
// webhook checks its URL with the same function, so a URL it accepted is one the sender can
// call.

#include <boost/asio/ip/address.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace anteroom::webhook {

inline constexpr size_t kMaxWebhookUrlBytes = 2048;

struct WebhookUrl {
  bool https = false;
  // The host as it is resolved, checked by the allow-list and verified in the certificate: a
  // lower-case name without a trailing dot, or an address's text (IPv6 without brackets).
  std::string host;
  std::optional<boost::asio::ip::address> address;  // set when the host is an address
  uint16_t port = 0;                                // as written, or 80 / 443
  std::string host_header;  // `Host:`: the host (IPv6 in brackets), ":port" unless the default
  std::string target;       // the request target: the path ("/" when empty) and "?query"
};

// nullopt with `error` saying what is wrong, in a few words.
std::optional<WebhookUrl> ParseWebhookUrl(std::string_view url, std::string& error);

// Letters, digits, '-' and '_' in dot-separated labels of 1-63 bytes, 253 bytes in all (no
// trailing dot), the last label not all digits.
bool IsWebhookHostName(std::string_view name);

}  // namespace anteroom::webhook
