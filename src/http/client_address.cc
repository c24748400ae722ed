#include "http/client_address.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace anteroom::http {

namespace ip = boost::asio::ip;

namespace {

ip::address Unmapped(const ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return ip::make_address_v4(ip::v4_mapped, a.to_v6());
  }
  return a;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 5 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A plain address (no port, brackets or zone id); inet_pton's strict syntax.
std::optional<ip::address> PlainAddress(std::string_view text) {
  if (text.empty() || text.size() > 45 || text.find('%') != std::string_view::npos) {
    return std::nullopt;
  }
  boost::system::error_code ec;
  ip::address a = ip::make_address(std::string(text), ec);
  if (ec) return std::nullopt;
  return Unmapped(a);
}

// The address's bytes, IPv4 as 4 bytes and IPv6 as 16.
std::array<unsigned char, 16> Bytes(const ip::address& a, size_t& size) {
  std::array<unsigned char, 16> out{};
  if (a.is_v4()) {
    auto b = a.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), out.begin());
    size = 4;
  } else {
    auto b = a.to_v6().to_bytes();
    std::copy(b.begin(), b.end(), out.begin());
    size = 16;
  }
  return out;
}

// Clears every bit after the first `prefix`.
void Mask(std::array<unsigned char, 16>& bytes, size_t size, unsigned prefix) {
  for (size_t i = 0; i < size; ++i) {
    unsigned keep = prefix >= 8 * (i + 1) ? 8 : (prefix > 8 * i ? prefix - 8 * i : 0);
    bytes[i] &= static_cast<unsigned char>(0xff00u >> keep);
  }
}

ip::address FromBytes(const std::array<unsigned char, 16>& bytes, size_t size) {
  if (size == 4) return ip::address_v4({bytes[0], bytes[1], bytes[2], bytes[3]});
  return ip::address_v6(bytes);
}

}  // namespace

std::optional<Cidr> ParseCidr(std::string_view text, std::string* error) {
  std::string_view addr = text;
  std::optional<unsigned> prefix;
  if (size_t slash = text.find('/'); slash != std::string_view::npos) {
    addr = text.substr(0, slash);
    std::string_view digits = text.substr(slash + 1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || digits.size() > 3 || ec != std::errc() ||
        end != digits.data() + digits.size()) {
      *error = "'" + std::string(text) + "': the prefix length must be a number";
      return std::nullopt;
    }
    prefix = value;
  }
  // A v4-mapped network would be a second spelling of an IPv4 one: refused, not guessed at.
  boost::system::error_code ec;
  ip::address a = ip::make_address(std::string(addr), ec);
  if (ec || addr.find('%') != std::string_view::npos || (a.is_v6() && a.to_v6().is_v4_mapped())) {
    *error = "'" + std::string(text) + "' is not an IPv4 or IPv6 network (CIDR)";
    return std::nullopt;
  }
  size_t size = 0;
  auto bytes = Bytes(a, size);
  unsigned bits = static_cast<unsigned>(size * 8);
  if (prefix && *prefix > bits) {
    *error = "'" + std::string(text) + "': the prefix length is at most " + std::to_string(bits);
    return std::nullopt;
  }
  Cidr cidr;
  cidr.prefix = prefix.value_or(bits);
  Mask(bytes, size, cidr.prefix);
  cidr.network = FromBytes(bytes, size);
  return cidr;
}

bool TrustedProxies::Add(std::string_view cidr, std::string* error) {
  auto parsed = ParseCidr(cidr, error);
  if (!parsed) return false;
  networks_.push_back(*parsed);
  return true;
}

bool TrustedProxies::Contains(const ip::address& address) const {
  ip::address a = Unmapped(address);
  size_t size = 0;
  auto bytes = Bytes(a, size);
  for (const Cidr& n : networks_) {
    if (n.network.is_v4() != a.is_v4()) continue;
    auto masked = bytes;
    Mask(masked, size, n.prefix);
    if (FromBytes(masked, size) == n.network) return true;
  }
  return false;
}

std::optional<ip::address> ParseForwardedEntry(std::string_view entry) {
  std::string_view e = Trim(entry);
  if (!e.empty() && e.front() == '[') {  // [IPv6] or [IPv6]:port
    size_t close = e.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    std::string_view rest = e.substr(close + 1);
    if (!rest.empty() && (rest.front() != ':' || !AllDigits(rest.substr(1)))) return std::nullopt;
    auto a = PlainAddress(e.substr(1, close - 1));
    if (!a || (a->is_v4() && e.substr(1, close - 1).find(':') == std::string_view::npos)) {
      return std::nullopt;  // brackets hold IPv6 only
    }
    return a;
  }
  size_t colon = e.find(':');
  if (colon != std::string_view::npos && e.find(':', colon + 1) == std::string_view::npos) {
    // One colon: IPv4 with a port.
    if (!AllDigits(e.substr(colon + 1))) return std::nullopt;
    auto a = PlainAddress(e.substr(0, colon));
    if (!a || !a->is_v4()) return std::nullopt;
    return a;
  }
  return PlainAddress(e);
}

ip::address ClientAddress(const ip::address& peer, std::string_view forwarded_for,
                          const TrustedProxies& trusted) {
  ip::address client = Unmapped(peer);
  if (trusted.empty() || !trusted.Contains(client)) return client;
  std::string_view rest = Trim(forwarded_for);
  for (size_t hops = 0; !rest.empty(); ++hops) {
    if (hops == kMaxForwardedHops) return client;
    size_t comma = rest.rfind(',');
    std::string_view entry = comma == std::string_view::npos ? rest : rest.substr(comma + 1);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(0, comma);
    auto a = ParseForwardedEntry(entry);
    if (!a) return client;  // garbage from a trusted hop: that hop is all we know
    client = *a;
    if (!trusted.Contains(client)) return client;
  }
  return client;
}

std::string ClientKey(const ip::address& address) {
  ip::address a = Unmapped(address);
  if (a.is_v4()) return a.to_string();
  size_t size = 0;
  auto bytes = Bytes(a, size);
  Mask(bytes, size, 64);
  return FromBytes(bytes, size).to_string() + "/64";
}

}  // namespace anteroom::http
