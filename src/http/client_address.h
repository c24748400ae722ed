#pragma once
// Who a request comes from, for per-client limits (room settings joins_per_minute_per_client
// and places_per_client). Pure functions over addresses; the HTTP layer supplies the
// connection's peer and the X-Forwarded-For header (http/router.h's Request).
//
// The rule (docs/api.md, "Who the client is"):
//  - the client is the connection's peer address, unless the peer is a trusted proxy
//    (`anteroom serve --trusted-proxy CIDR`, repeatable);
//  - then X-Forwarded-For is read from the right (each proxy appends the address it saw): the
//    client is the first entry that is not itself a trusted proxy;
//  - an entry that is not an IP address ("unknown", an obfuscated id, empty), or more than
//    kMaxForwardedHops entries, stops the walk: the client is then the last trusted hop (the
//    address that passed on what cannot be read), never the garbage. Entries to the left of
//    the first untrusted one are never read: anyone may write them;
//  - every hop trusted (or no header): the leftmost address read.
// Entries may be IPv4 ("203.0.113.7", "203.0.113.7:4711"), IPv6 ("2001:db8::1") or bracketed
// IPv6 with an optional port ("[2001:db8::1]:4711"); IPv4-mapped IPv6 counts as IPv4. Zone ids
// ("fe80::1%eth0") are refused.

#include <boost/asio/ip/address.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom::http {

inline constexpr size_t kMaxForwardedHops = 32;

// A network: an address with its host bits cleared, and the prefix length.
struct Cidr {
  boost::asio::ip::address network;
  unsigned prefix = 0;
};

// "10.0.0.0/8", "2001:db8::/32", or a bare address (/32 or /128). Host bits may be set
// ("10.1.2.3/8" is 10.0.0.0/8). nullopt, with *error saying why, for anything else.
std::optional<Cidr> ParseCidr(std::string_view text, std::string* error);

class TrustedProxies {
 public:
  // Adds a network (ParseCidr's syntax); false with *error when it does not parse.
  bool Add(std::string_view cidr, std::string* error);
  bool Contains(const boost::asio::ip::address& a) const;
  bool empty() const { return networks_.empty(); }

 private:
  std::vector<Cidr> networks_;
};

// One X-Forwarded-For entry (surrounding blanks allowed), IPv4-mapped IPv6 as IPv4; nullopt
// when it is not an address.
std::optional<boost::asio::ip::address> ParseForwardedEntry(std::string_view entry);

// The client of a request by the rule above.
boost::asio::ip::address ClientAddress(const boost::asio::ip::address& peer,
                                       std::string_view forwarded_for,
                                       const TrustedProxies& trusted);

// What per-client limits count under: an IPv4 address as text ("203.0.113.7"), or an IPv6
// address's /64 ("2001:db8:1:2::/64"): one subscriber is routinely given a whole /64, so
// counting single IPv6 addresses would give an attacker 2^64 clients for free.
std::string ClientKey(const boost::asio::ip::address& client);

}  // namespace anteroom::http
