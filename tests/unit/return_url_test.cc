// Where the gate may send a browser back to (server/return_url.h): the parser pitfalls known to
// open redirects, as a table. The browser suite (tests/browser/gate_return_urls.test.mjs) checks
// the rule against the WHATWG parser over generated URLs.
#include "server/return_url.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace anteroom::server {
namespace {

const std::vector<std::string> kAllowed = {"shop.example", "127.0.0.1", "127.0.0.1:8080",
                                           "[::1]:8443"};

std::optional<std::string> Http(std::string_view url) {
  return AllowedReturnUrl(url, kAllowed, /*https_only=*/false);
}

TEST(ReturnUrlTest, AllowedHostsAreRebuiltFromTheirParts) {
  EXPECT_EQ(Http("https://shop.example/product/42?x=1#top"),
            "https://shop.example/product/42?x=1#top");
  EXPECT_EQ(Http("HTTPS://SHOP.Example"), "https://shop.example/");
  EXPECT_EQ(Http("http://shop.example:80/a"), "http://shop.example:80/a")
      << "the default port, written";
  EXPECT_EQ(Http("http://127.0.0.1/x"), "http://127.0.0.1/x");
  EXPECT_EQ(Http("http://127.0.0.1:8080/x"), "http://127.0.0.1:8080/x");
  EXPECT_EQ(Http("https://[::1]:8443/x"), "https://[::1]:8443/x");
  EXPECT_EQ(Http("https://shop.example/a%20b?q=%22"), "https://shop.example/a%20b?q=%22");
}

TEST(ReturnUrlTest, ParserPitfallsAreRefused) {
  for (const char* bad : {
           // boostorg/url#755: Boost.URL 1.81 reads host 127.0.0.1, path ".evil.example/x".
           "https://127.0.0.1.evil.example/x",
           "http://127.0.0.1.evil.example/phish",
           "http://127.0.0.1:8080.evil.example/",
           // User info: browsers go to the host after '@'.
           "http://127.0.0.1@evil.example/",
           "http://shop.example:80@evil.example/",
           "http://@shop.example/",
           "http://shop.example%40evil.example/",
           // Backslashes: '/' to browsers in http(s) URLs.
           "http://evil.example\\@shop.example/",
           "http://shop.example\\evil.example/",
           "http:/\\evil.example",
           "http:\\\\evil.example",
           "https://shop.example\\.evil.example/",
           // Blanks that browsers drop or keep.
           "https://shop.ex\tample.evil.example/",
           "https://shop.example\n.evil.example/",
           "https://shop.example\r/",
           " https://shop.example/",
           "https://shop.example /",
           // Escapes in the host.
           "http://evil.example%2fshop.example/",
           "http://shop.example%2eevil.example/",
           "http://%73hop.example/",
           // Not absolute http(s) with an authority.
           "//evil.example/",
           "/relative",
           "javascript:alert(1)",
           "data:text/html,x",
           "ftp://shop.example/",
           "https:shop.example",
           "https:/shop.example/",
           "https://",
           "http:///shop.example/",
           // Hosts not on the list, or on it at another port.
           "https://evil.example/",
           "https://shop.example.evil.example/",
           "https://evil-shop.example/",
           "https://shop.example:8443/",
           "http://127.0.0.1:9/",
           "http://127.1/",
           "http://0x7f.0.0.1/",
           "http://2130706433/",
           "http://[::1]/",
           "https://shop.example./",
           // Ports that are not ports.
           "https://shop.example:0/",
           "https://shop.example:65536/",
           "https://shop.example:/",
           "https://shop.example:+443/",
           // Non-ASCII (IDN look-alikes reach the parser only as punycode).
           "https://shöp.example/",
           "https://shop.example\xE2\x80\x8B/",
       }) {
    EXPECT_EQ(Http(bad), std::nullopt) << bad;
  }
}

TEST(ReturnUrlTest, AnHttpsSiteNeverReturnsToHttp) {
  EXPECT_EQ(AllowedReturnUrl("http://shop.example/", kAllowed, /*https_only=*/true), std::nullopt);
  EXPECT_EQ(AllowedReturnUrl("https://shop.example/", kAllowed, /*https_only=*/true),
            "https://shop.example/");
}

TEST(ReturnUrlTest, APortIsAllowedOnlyWhereTheListNamesIt) {
  // "shop.example": the scheme's default port only; "127.0.0.1:8080": that port only.
  EXPECT_TRUE(Http("https://shop.example:443/"));
  EXPECT_TRUE(Http("http://shop.example:80/"));
  EXPECT_FALSE(Http("http://shop.example:443/"));
  EXPECT_FALSE(Http("http://shop.example:8080/"));
  EXPECT_TRUE(Http("http://127.0.0.1:8080/"));
  EXPECT_FALSE(Http("https://[::1]/"));
}

}  // namespace
}  // namespace anteroom::server
