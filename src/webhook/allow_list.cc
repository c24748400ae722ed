#include "webhook/allow_list.h"

#include <algorithm>
#include <charconv>

#include "common/ascii.h"
#include "webhook/webhook_url.h"

namespace anteroom::webhook {

namespace ip = boost::asio::ip;

namespace {

struct V4Range {
  uint32_t base = 0;
  unsigned prefix = 0;
  std::string_view why;
};

// Most specific first: 0.0.0.0 is "unspecified" before 0/8 says "reserved".
constexpr std::array<V4Range, 12> kV4Internal = {{
    {0x00000000, 32, "unspecified"},
    {0x00000000, 8, "reserved"},  // "this network"
    {0x0A000000, 8, "private"},
    {0x64400000, 10, "shared (CGNAT)"},
    {0x7F000000, 8, "loopback"},
    {0xA9FE0000, 16, "link-local"},
    {0xAC100000, 12, "private"},
    {0xC0000000, 24, "reserved"},  // IETF protocol assignments
    {0xC0A80000, 16, "private"},
    {0xC6120000, 15, "reserved"},  // benchmarking
    {0xE0000000, 4, "multicast"},
    {0xF0000000, 4, "reserved"},  // 240/4 and the broadcast address
}};

std::optional<std::string_view> InternalV4(const ip::address_v4& addr) {
  uint32_t a = addr.to_uint();
  for (const V4Range& r : kV4Internal) {
    uint32_t mask = r.prefix == 0 ? 0 : ~uint32_t{0} << (32 - r.prefix);
    if ((a & mask) == r.base) return r.why;
  }
  return std::nullopt;
}

// The IPv4 address an IPv6 one carries where a packet to it reaches that IPv4 host:
// IPv4-mapped (::ffff:a.b.c.d), NAT64's well-known prefix (64:ff9b::a.b.c.d), 6to4
// (2002:aabb:ccdd::).
std::optional<ip::address_v4> CarriedV4(const ip::address_v6& addr) {
  ip::address_v6::bytes_type b = addr.to_bytes();
  auto v4_at = [&b](size_t i) {
    return ip::address_v4(ip::address_v4::bytes_type{b[i], b[i + 1], b[i + 2], b[i + 3]});
  };
  if (addr.is_v4_mapped()) return v4_at(12);
  static constexpr std::array<uint8_t, 12> kNat64 = {0x00, 0x64, 0xff, 0x9b, 0, 0,
                                                     0,    0,    0,    0,    0, 0};
  if (std::equal(kNat64.begin(), kNat64.end(), b.begin())) return v4_at(12);
  if (b[0] == 0x20 && b[1] == 0x02) return v4_at(2);
  return std::nullopt;
}

std::optional<std::string_view> InternalV6(const ip::address_v6& addr) {
  if (auto v4 = CarriedV4(addr)) return InternalV4(*v4);
  ip::address_v6::bytes_type b = addr.to_bytes();
  if (addr.is_unspecified()) return "unspecified";
  if (addr.is_loopback()) return "loopback";
  // The rest of ::/96: deprecated IPv4-compatible addresses, never routed.
  if (std::all_of(b.begin(), b.begin() + 12, [](uint8_t x) { return x == 0; })) return "reserved";
  // 64:ff9b:1::/48: NAT64 for local use, which may translate to anything.
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0x00 && b[5] == 0x01)
    return "reserved";
  if ((b[0] & 0xfe) == 0xfc) return "private";                     // fc00::/7, unique local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";  // fe80::/10
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "private";     // fec0::/10, site-local
  if (b[0] == 0xff) return "multicast";
  return std::nullopt;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<std::string_view> InternalRange(const ip::address& addr) {
  if (addr.is_v4()) return InternalV4(addr.to_v4());
  return InternalV6(addr.to_v6());
}

std::string NormalHostName(std::string_view host) {
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  return AsciiLower(host);
}

std::optional<WebhookAllowList> WebhookAllowList::Parse(const std::vector<std::string>& entries,
                                                        std::string& error) {
  WebhookAllowList list;
  for (const std::string& raw : entries) {
    std::string_view entry = Trim(raw);
    auto refuse = [&](std::string_view why) {
      error = "--webhook-allow '" + raw + "': " + std::string(why);
      return std::nullopt;
    };
    if (entry.empty()) return refuse("empty entry");
    if (entry.find('%') != std::string_view::npos) return refuse("zone ids are not allowed");
    size_t slash = entry.find('/');
    std::string_view addr_text = entry.substr(0, slash);
    boost::system::error_code ec;
    ip::address addr = ip::make_address(std::string(addr_text), ec);
    if (ec) {
      if (slash != std::string_view::npos) return refuse("not an IPv4 or IPv6 CIDR");
      if (!IsWebhookHostName(entry.back() == '.' ? entry.substr(0, entry.size() - 1) : entry)) {
        return refuse("neither an address, a CIDR nor a host name (no wildcards)");
      }
      list.names_.push_back(NormalHostName(entry));
      continue;
    }
    Cidr cidr;
    cidr.v6 = addr.is_v6();
    unsigned max_prefix = cidr.v6 ? 128 : 32;
    cidr.prefix = max_prefix;
    if (slash != std::string_view::npos) {
      std::string_view digits = entry.substr(slash + 1);
      unsigned prefix = 0;
      auto [end, perr] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
      if (digits.empty() || digits.size() > 3 || perr != std::errc() ||
          end != digits.data() + digits.size() || prefix > max_prefix) {
        return refuse("the prefix length must be 0-" + std::to_string(max_prefix));
      }
      cidr.prefix = prefix;
    }
    if (cidr.v6) {
      auto b = addr.to_v6().to_bytes();
      std::copy(b.begin(), b.end(), cidr.bytes.begin());
    } else {
      auto b = addr.to_v4().to_bytes();
      std::copy(b.begin(), b.end(), cidr.bytes.begin());
    }
    for (unsigned bit = cidr.prefix; bit < max_prefix; ++bit) {
      if (cidr.bytes[bit / 8] & (0x80 >> (bit % 8))) {
        return refuse("bits are set after the prefix (a CIDR names its network's first address)");
      }
    }
    list.cidrs_.push_back(cidr);
  }
  return list;
}

bool WebhookAllowList::Contains(const Cidr& cidr, const ip::address& addr) {
  if (cidr.v6 != addr.is_v6()) return false;
  std::array<uint8_t, 16> bytes{};
  if (addr.is_v6()) {
    auto b = addr.to_v6().to_bytes();
    std::copy(b.begin(), b.end(), bytes.begin());
  } else {
    auto b = addr.to_v4().to_bytes();
    std::copy(b.begin(), b.end(), bytes.begin());
  }
  for (unsigned bit = 0; bit < cidr.prefix; ++bit) {
    uint8_t m = 0x80 >> (bit % 8);
    if ((bytes[bit / 8] & m) != (cidr.bytes[bit / 8] & m)) return false;
  }
  return true;
}

bool WebhookAllowList::Allows(std::string_view host, const ip::address& addr) const {
  if (!InternalRange(addr)) return true;
  std::optional<ip::address> carried;
  if (addr.is_v6()) {
    if (auto v4 = CarriedV4(addr.to_v6())) carried = ip::address(*v4);
  }
  for (const Cidr& cidr : cidrs_) {
    if (Contains(cidr, addr) || (carried && Contains(cidr, *carried))) return true;
  }
  if (!names_.empty()) {
    std::string name = NormalHostName(host);
    if (std::find(names_.begin(), names_.end(), name) != names_.end()) return true;
  }
  return false;
}

}  // namespace anteroom::webhook
