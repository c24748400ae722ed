#pragma once
// Where webhooks may go (`--webhook-allow`): the guard against server-side request forgery, so
// the admin API cannot make anteroom call the services beside it. A destination is judged by
// the address it resolved to (the sender connects to exactly that address: no second lookup a
// rebinding DNS server could answer differently):
//  - a public address is allowed;
//  - an internal one (InternalRange: loopback, private, link-local, CGNAT, unspecified,
//    multicast, reserved, and IPv6's forms of these, IPv4-mapped and NAT64 included) is
//    refused unless it lies in an allowed CIDR or the URL's host name is allowed exactly.
// Entries are CIDRs ("10.1.0.0/16", "fd00::/8"), single addresses ("127.0.0.1", "::1") or
// host names ("hooks.internal", matched exactly, case-insensitively, a trailing dot ignored).

#include <boost/asio/ip/address.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom::webhook {

// Why `addr` is internal ("loopback", "private", "link-local", "shared (CGNAT)",
// "unspecified", "multicast", "reserved"), or nullopt for a public address. An IPv6 address
// that carries an IPv4 one (IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96, 6to4 2002::/16) is
// judged by the IPv4 address it carries.
std::optional<std::string_view> InternalRange(const boost::asio::ip::address& addr);

// A host name as the allow-list compares it: ASCII lower case, one trailing dot removed.
std::string NormalHostName(std::string_view host);

class WebhookAllowList {
 public:
  // The empty list: public destinations only.
  WebhookAllowList() = default;

  // nullopt with `error` saying which entry is wrong and why: a CIDR with a prefix longer than
  // its family, or with bits set after its prefix ("10.0.0.1/8"), or a host name that is not
  // letters, digits, '-', '_' and dots (no wildcards).
  static std::optional<WebhookAllowList> Parse(const std::vector<std::string>& entries,
                                               std::string& error);

  // Whether a delivery to `host` (the URL's host: a name, or the address's own text) may
  // connect to `addr`, what `host` resolved to.
  bool Allows(std::string_view host, const boost::asio::ip::address& addr) const;

  bool empty() const { return cidrs_.empty() && names_.empty(); }

 private:
  struct Cidr {
    std::array<uint8_t, 16> bytes{};  // IPv4 in its first 4 bytes
    bool v6 = false;
    unsigned prefix = 0;
  };
  static bool Contains(const Cidr& cidr, const boost::asio::ip::address& addr);

  std::vector<Cidr> cidrs_;
  std::vector<std::string> names_;  // NormalHostName
};

}  // namespace anteroom::webhook
