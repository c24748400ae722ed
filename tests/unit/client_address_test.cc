// Who the client is (http/client_address.h): trusted proxies, the right-to-left walk of
// X-Forwarded-For, garbage, and the key per-client limits count under (IPv6 per /64).
#include "http/client_address.h"

#include <gtest/gtest.h>

#include <string>

namespace anteroom::http {
namespace {

namespace ip = boost::asio::ip;

ip::address A(const char* text) { return ip::make_address(text); }

TrustedProxies Trust(std::initializer_list<const char*> networks) {
  TrustedProxies t;
  for (const char* n : networks) {
    std::string error;
    EXPECT_TRUE(t.Add(n, &error)) << n << ": " << error;
  }
  return t;
}

std::string Client(const char* peer, std::string_view xff, const TrustedProxies& t) {
  return ClientAddress(A(peer), xff, t).to_string();
}

TEST(ClientAddressTest, CidrsParseWithAndWithoutPrefix) {
  std::string error;
  auto v4 = ParseCidr("10.1.2.3/8", &error);
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->network.to_string(), "10.0.0.0");  // host bits cleared
  EXPECT_EQ(v4->prefix, 8u);
  auto host = ParseCidr("192.0.2.7", &error);
  ASSERT_TRUE(host);
  EXPECT_EQ(host->prefix, 32u);
  auto v6 = ParseCidr("2001:db8:abcd::1/48", &error);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->network.to_string(), "2001:db8:abcd::");
  EXPECT_EQ(ParseCidr("::1", &error)->prefix, 128u);
  EXPECT_EQ(ParseCidr("0.0.0.0/0", &error)->prefix, 0u);
  for (const char* bad :
       {"", "10.0.0.0/33", "2001:db8::/129", "10.0.0/8", "10.0.0.0/", "/8", "10.0.0.0/x",
        "example.com/8", "fe80::1%eth0/64", "::ffff:10.0.0.0/104", "10.0.0.0/8/8", "10.0.0.0/-1"}) {
    error.clear();
    EXPECT_FALSE(ParseCidr(bad, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(ClientAddressTest, TrustedProxiesMatchByPrefix) {
  TrustedProxies t = Trust({"10.0.0.0/8", "192.0.2.1", "2001:db8:1::/48"});
  EXPECT_TRUE(t.Contains(A("10.255.0.1")));
  EXPECT_FALSE(t.Contains(A("11.0.0.1")));
  EXPECT_TRUE(t.Contains(A("192.0.2.1")));
  EXPECT_FALSE(t.Contains(A("192.0.2.2")));
  EXPECT_TRUE(t.Contains(A("2001:db8:1:ffff::5")));
  EXPECT_FALSE(t.Contains(A("2001:db8:2::5")));
  EXPECT_TRUE(t.Contains(A("::ffff:10.1.1.1")));  // IPv4-mapped counts as IPv4
  EXPECT_FALSE(Trust({"0.0.0.0/0"}).Contains(A("::1")));
  EXPECT_TRUE(Trust({"::/0"}).Contains(A("::1")));
}

TEST(ClientAddressTest, WithoutTrustedProxiesTheHeaderIsIgnored) {
  TrustedProxies none;
  EXPECT_EQ(Client("198.51.100.9", "203.0.113.1", none), "198.51.100.9");
  TrustedProxies other = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Client("198.51.100.9", "203.0.113.1", other), "198.51.100.9");
  EXPECT_EQ(Client("::ffff:198.51.100.9", "", none), "198.51.100.9");
}

TEST(ClientAddressTest, RightToLeftWalkStopsAtTheFirstUntrustedHop) {
  TrustedProxies t = Trust({"10.0.0.0/8"});
  // client -> 10.0.0.2 -> 10.0.0.1 (peer); each proxy appended what it saw.
  EXPECT_EQ(Client("10.0.0.1", "203.0.113.5, 10.0.0.2", t), "203.0.113.5");
  // Whatever the client wrote itself (to the left) is never read.
  EXPECT_EQ(Client("10.0.0.1", "1.1.1.1, 6.6.6.6, 203.0.113.5, 10.0.0.2", t), "203.0.113.5");
  EXPECT_EQ(Client("10.0.0.1", "203.0.113.5", t), "203.0.113.5");
  EXPECT_EQ(Client("10.0.0.1", " 203.0.113.5 ,10.0.0.2 ", t), "203.0.113.5");
  // No header: the proxy itself.
  EXPECT_EQ(Client("10.0.0.1", "", t), "10.0.0.1");
  EXPECT_EQ(Client("10.0.0.1", "  ", t), "10.0.0.1");
  // Every hop trusted: the leftmost one.
  EXPECT_EQ(Client("10.0.0.1", "10.0.0.3, 10.0.0.2", t), "10.0.0.3");
}

TEST(ClientAddressTest, GarbageStopsTheWalkAtTheLastTrustedHop) {
  TrustedProxies t = Trust({"10.0.0.0/8"});
  EXPECT_EQ(Client("10.0.0.1", "unknown", t), "10.0.0.1");
  EXPECT_EQ(Client("10.0.0.1", "203.0.113.5, unknown, 10.0.0.2", t), "10.0.0.2");
  EXPECT_EQ(Client("10.0.0.1", "203.0.113.5,, 10.0.0.2", t), "10.0.0.2");
  EXPECT_EQ(Client("10.0.0.1", "203.0.113.5,", t), "10.0.0.1");
  EXPECT_EQ(Client("10.0.0.1", "_hidden, 203.0.113.5", t), "203.0.113.5");  // never reached
  // Too many trusted hops: the walk stops at the bound, at a trusted address.
  std::string many = "203.0.113.5";
  for (int i = 0; i < 40; ++i) many += ", 10.0.0." + std::to_string(i + 2);
  EXPECT_EQ(Client("10.0.0.1", many, t), "10.0.0.10");  // the 32nd entry from the right
}

TEST(ClientAddressTest, EntriesWithPortsAndBrackets) {
  TrustedProxies t = Trust({"10.0.0.0/8", "fd00::/8"});
  EXPECT_EQ(Client("10.0.0.1", "203.0.113.5:4711", t), "203.0.113.5");
  EXPECT_EQ(Client("10.0.0.1", "[2001:db8::7]:4711", t), "2001:db8::7");
  EXPECT_EQ(Client("10.0.0.1", "[2001:db8::7]", t), "2001:db8::7");
  EXPECT_EQ(Client("10.0.0.1", "2001:db8::7", t), "2001:db8::7");
  EXPECT_EQ(Client("fd00::1", "::ffff:203.0.113.5", t), "203.0.113.5");
  for (const char* bad :
       {"[2001:db8::7", "[2001:db8::7]x", "[2001:db8::7]:", "203.0.113.5:", "203.0.113.5:port",
        "[203.0.113.5]", "fe80::1%eth0", "203.0.113", "0x7f.1", "2001:db8::7:99999:1:1:1:1"}) {
    EXPECT_FALSE(ParseForwardedEntry(bad)) << bad;
    EXPECT_EQ(Client("10.0.0.1", bad, t), "10.0.0.1") << bad;
  }
}

TEST(ClientAddressTest, KeysCountIpv6PerSlash64) {
  EXPECT_EQ(ClientKey(A("203.0.113.5")), "203.0.113.5");
  EXPECT_EQ(ClientKey(A("::ffff:203.0.113.5")), "203.0.113.5");
  EXPECT_EQ(ClientKey(A("2001:db8:1:2:aaaa:bbbb:cccc:dddd")), "2001:db8:1:2::/64");
  EXPECT_EQ(ClientKey(A("2001:db8:1:2::1")), ClientKey(A("2001:db8:1:2:ffff::9")));
  EXPECT_NE(ClientKey(A("2001:db8:1:2::1")), ClientKey(A("2001:db8:1:3::1")));
  EXPECT_EQ(ClientKey(A("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")), "ffff:ffff:ffff:ffff::/64");
}

}  // namespace
}  // namespace anteroom::http
