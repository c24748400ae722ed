// Where a webhook may go and how its answer reads, without sockets: the allow-list's rules
// (webhook/allow_list.h: every internal range refused, IPv6's carried IPv4 forms judged as that
// IPv4 address, CIDRs and host names let through), the URL rule (webhook/webhook_url.h), and
// the sender's reading of a status and of Retry-After (webhook/sender.h).

#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>

#include <string>
#include <vector>

#include "webhook/allow_list.h"
#include "webhook/sender.h"
#include "webhook/webhook_url.h"

namespace anteroom::webhook {
namespace {

using boost::asio::ip::make_address;
using Kind = WebhookOutcome::Kind;

WebhookAllowList ListOf(const std::vector<std::string>& entries) {
  std::string error;
  auto list = WebhookAllowList::Parse(entries, error);
  EXPECT_TRUE(list) << error;
  return list.value_or(WebhookAllowList{});
}

std::string RangeOf(const char* addr) {
  auto why = InternalRange(make_address(addr));
  return why ? std::string(*why) : "public";
}

TEST(WebhookAllowList, InternalRanges) {
  struct Case {
    const char* addr;
    const char* why;
  };
  for (const Case& c : std::vector<Case>{
           {"127.0.0.1", "loopback"},
           {"127.255.255.254", "loopback"},
           {"10.0.0.1", "private"},
           {"10.255.255.255", "private"},
           {"172.16.0.1", "private"},
           {"172.31.255.255", "private"},
           {"192.168.1.1", "private"},
           {"169.254.169.254", "link-local"},  // the cloud metadata service
           {"100.64.0.1", "shared (CGNAT)"},
           {"100.127.255.255", "shared (CGNAT)"},
           {"0.0.0.0", "unspecified"},
           {"0.1.2.3", "reserved"},
           {"224.0.0.1", "multicast"},
           {"239.255.255.250", "multicast"},
           {"240.0.0.1", "reserved"},
           {"255.255.255.255", "reserved"},
           {"192.0.0.8", "reserved"},
           {"198.18.0.1", "reserved"},
           {"::", "unspecified"},
           {"::1", "loopback"},
           {"fc00::1", "private"},
           {"fd12:3456::1", "private"},
           {"fe80::1", "link-local"},
           {"febf::1", "link-local"},
           {"fec0::1", "private"},
           {"ff02::1", "multicast"},
           {"::ffff:127.0.0.1", "loopback"},  // IPv4-mapped
           {"::ffff:10.1.2.3", "private"},
           {"::ffff:169.254.169.254", "link-local"},
           {"::ffff:0.0.0.0", "unspecified"},
           {"::127.0.0.1", "reserved"},      // IPv4-compatible (deprecated)
           {"64:ff9b::7f00:1", "loopback"},  // NAT64 of 127.0.0.1
           {"64:ff9b::a00:1", "private"},
           {"64:ff9b:1::1", "reserved"},
           {"2002:a00:1::1", "private"},  // 6to4 of 10.0.0.1
           // Public: next to the edges.
           {"8.8.8.8", "public"},
           {"9.255.255.255", "public"},
           {"11.0.0.0", "public"},
           {"100.63.255.255", "public"},
           {"100.128.0.0", "public"},
           {"172.15.255.255", "public"},
           {"172.32.0.0", "public"},
           {"192.167.255.255", "public"},
           {"192.169.0.0", "public"},
           {"223.255.255.255", "public"},
           {"::ffff:8.8.8.8", "public"},
           {"64:ff9b::808:808", "public"},
           {"2606:4700:4700::1111", "public"},
           {"2001:4860:4860::8888", "public"},
           {"fbff:ffff::1", "public"},
           {"fe7f::1", "public"},
       }) {
    EXPECT_EQ(RangeOf(c.addr), c.why) << c.addr;
  }
}

TEST(WebhookAllowList, EmptyListAllowsPublicOnly) {
  WebhookAllowList none;
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.Allows("example.com", make_address("93.184.215.14")));
  EXPECT_TRUE(none.Allows("example.com", make_address("2606:2800:21f:cb07:6820:80da:af6b:8b2c")));
  for (const char* internal :
       {"127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.0.1", "169.254.169.254", "100.64.0.1",
        "0.0.0.0", "224.0.0.1", "::1", "::", "fd00::1", "fe80::1", "ff02::1", "::ffff:127.0.0.1",
        "::ffff:192.168.0.1", "64:ff9b::a9fe:a9fe"}) {
    EXPECT_FALSE(none.Allows("hooks.example.com", make_address(internal))) << internal;
  }
}

TEST(WebhookAllowList, CidrsLetTheirAddressesThrough) {
  WebhookAllowList list = ListOf({"127.0.0.1/32", "10.20.0.0/16", "fd00:1::/32", "::1"});
  EXPECT_FALSE(list.empty());
  EXPECT_TRUE(list.Allows("127.0.0.1", make_address("127.0.0.1")));
  EXPECT_TRUE(list.Allows("localhost", make_address("::ffff:127.0.0.1")));  // mapped form too
  EXPECT_FALSE(list.Allows("127.0.0.2", make_address("127.0.0.2")));
  EXPECT_TRUE(list.Allows("x", make_address("10.20.255.1")));
  EXPECT_FALSE(list.Allows("x", make_address("10.21.0.1")));
  EXPECT_TRUE(list.Allows("x", make_address("fd00:1:ffff::5")));
  EXPECT_FALSE(list.Allows("x", make_address("fd00:2::5")));
  EXPECT_TRUE(list.Allows("x", make_address("::1")));
  EXPECT_FALSE(list.Allows("x", make_address("192.168.1.1")));
  EXPECT_FALSE(list.Allows("x", make_address("169.254.169.254")));
  EXPECT_TRUE(list.Allows("x", make_address("1.1.1.1")));  // public stays allowed
}

TEST(WebhookAllowList, MappedCidrsMatchMappedAddresses) {
  WebhookAllowList list = ListOf({"::ffff:10.0.0.0/104"});
  EXPECT_TRUE(list.Allows("x", make_address("::ffff:10.9.9.9")));
  EXPECT_FALSE(list.Allows("x", make_address("::ffff:192.168.0.1")));
}

TEST(WebhookAllowList, HostNamesAreMatchedExactly) {
  WebhookAllowList list = ListOf({"hooks.internal", "Receiver.Corp.", "localhost"});
  EXPECT_TRUE(list.Allows("hooks.internal", make_address("10.0.0.5")));
  EXPECT_TRUE(list.Allows("HOOKS.internal.", make_address("10.0.0.5")));
  EXPECT_TRUE(list.Allows("receiver.corp", make_address("fd00::7")));
  EXPECT_TRUE(list.Allows("localhost", make_address("127.0.0.1")));
  EXPECT_TRUE(list.Allows("localhost", make_address("::1")));
  EXPECT_FALSE(list.Allows("sub.hooks.internal", make_address("10.0.0.5")));
  EXPECT_FALSE(list.Allows("hooks.internal.evil.example", make_address("10.0.0.5")));
  EXPECT_FALSE(list.Allows("other.internal", make_address("10.0.0.5")));
  EXPECT_FALSE(list.Allows("10.0.0.5", make_address("10.0.0.5")));
}

TEST(WebhookAllowList, BadEntriesAreRefusedWithTheirReason) {
  for (const char* bad :
       {"", "  ", "10.0.0.1/8", "10.0.0.0/33", "::/129", "fd00::1/8", "*.example.com", "10.0.0",
        "1.2.3.4/", "1.2.3.4/a", "1.2.3.4/-1", "1.2.3.4/0032", "fe80::1%eth0", "host name",
        "exa mple.com", "a..b", "-/8", "http://example.com"}) {
    std::string error;
    EXPECT_FALSE(WebhookAllowList::Parse({bad}, error)) << bad;
    EXPECT_NE(error.find("--webhook-allow"), std::string::npos) << error;
  }
  std::string error;
  EXPECT_TRUE(WebhookAllowList::Parse({"0.0.0.0/0", "::/0", " 10.0.0.0/8 ", "a-b_c.d"}, error))
      << error;
}

TEST(WebhookUrl, WhatTheSenderCalls) {
  std::string error;
  auto u = ParseWebhookUrl("https://Hooks.Example.COM/in/anteroom?token=a%20b&x=1", error);
  ASSERT_TRUE(u) << error;
  EXPECT_TRUE(u->https);
  EXPECT_EQ(u->host, "hooks.example.com");
  EXPECT_FALSE(u->address);
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->host_header, "hooks.example.com");
  EXPECT_EQ(u->target, "/in/anteroom?token=a%20b&x=1");

  u = ParseWebhookUrl("http://[::1]:8080", error);
  ASSERT_TRUE(u) << error;
  EXPECT_FALSE(u->https);
  EXPECT_EQ(u->host, "::1");
  ASSERT_TRUE(u->address);
  EXPECT_EQ(*u->address, make_address("::1"));
  EXPECT_EQ(u->host_header, "[::1]:8080");
  EXPECT_EQ(u->target, "/");

  u = ParseWebhookUrl("http://127.0.0.1:80/hook", error);
  ASSERT_TRUE(u) << error;
  EXPECT_EQ(*u->address, make_address("127.0.0.1"));
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->host_header, "127.0.0.1");

  u = ParseWebhookUrl("HTTP://example.com.:8443/", error);
  ASSERT_TRUE(u) << error;
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->host_header, "example.com:8443");
}

TEST(WebhookUrl, RefusedUrls) {
  for (const std::string& bad : std::vector<std::string>{
           "", "/relative/path", "example.com/hook", "ftp://example.com/", "file:///etc/passwd",
           "gopher://example.com/", "http:///nohost", "http://user:pw@example.com/",
           "http://user@example.com/", "https://example.com/#fragment", "http://1.2.3/",
           "http://2130706433/", "http://[fe80::1%25eth0]/", "http://[v7.future]/",
           "http://example.com:0/", "http://example.com:99999/",
           // Boost.URL 1.81 reads port 484 and the path "om3/x" (the fuzzer's
           // find): common/uri_shape.h
           "https://hooks.example.c:484om3/x", "http://[::1]:80ab/x", "http://%65xample.com/",
           "http://exa_mple!.com/", "http://exa mple.com/", "http://example.com/a b",
           "http://example.com/\r\nX-Injected: 1", "https://" + std::string(2040, 'a') + ".com/"}) {
    std::string error;
    EXPECT_FALSE(ParseWebhookUrl(bad, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(WebhookOutcomeRules, StatusKinds) {
  EXPECT_EQ(KindOfStatus(200), Kind::kDelivered);
  EXPECT_EQ(KindOfStatus(204), Kind::kDelivered);
  EXPECT_EQ(KindOfStatus(299), Kind::kDelivered);
  EXPECT_EQ(KindOfStatus(410), Kind::kGone);
  for (int status : {300, 301, 302, 307, 308, 400, 401, 403, 404, 408,
                     409, 413, 429, 500, 502, 503, 504, 599, 600, 999}) {
    EXPECT_EQ(KindOfStatus(status), Kind::kRetry) << status;
  }
  EXPECT_EQ(OutcomeKindName(Kind::kDelivered), "delivered");
  EXPECT_EQ(OutcomeKindName(Kind::kRetry), "retry");
  EXPECT_EQ(OutcomeKindName(Kind::kGone), "gone");
  EXPECT_EQ(OutcomeKindName(Kind::kRefused), "refused");
}

TEST(WebhookOutcomeRules, RetryAfter) {
  constexpr int64_t kThen = 784111777000;  // Sun, 06 Nov 1994 08:49:37 GMT
  EXPECT_EQ(ParseRetryAfterMs("7", 0), 7000);
  EXPECT_EQ(ParseRetryAfterMs(" 120 ", 0), 120000);
  EXPECT_EQ(ParseRetryAfterMs("0", 0), 0);
  EXPECT_EQ(ParseRetryAfterMs("86400", 0), kMaxRetryAfterMs);
  EXPECT_EQ(ParseRetryAfterMs("99999999999999999999999", 0), kMaxRetryAfterMs);
  EXPECT_EQ(ParseRetryAfterMs("Sun, 06 Nov 1994 08:49:37 GMT", kThen - 10'000), 10'000);
  EXPECT_EQ(ParseRetryAfterMs("Sunday, 06-Nov-94 08:49:37 GMT", kThen - 5'000), 5'000);
  EXPECT_EQ(ParseRetryAfterMs("Sun Nov  6 08:49:37 1994", kThen - 1'000), 1'000);
  EXPECT_EQ(ParseRetryAfterMs("Sun, 06 Nov 1994 08:49:37 GMT", kThen + 60'000), 0);  // past
  EXPECT_EQ(ParseRetryAfterMs("Wed, 06 Nov 2024 08:49:37 GMT", kThen), kMaxRetryAfterMs);
  for (const char* bad : {"", "-1", "1.5", "7s", "soon", "Sun, 31 Feb 1994 08:49:37 GMT",
                          "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
                          "Sun, 06 Nov 1994 08:49:37 UTC"}) {
    EXPECT_EQ(ParseRetryAfterMs(bad, kThen), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace anteroom::webhook
