#pragma once
// Where the gate may send a browser back to: the `return` URL of /v1/gate/{room}/enter and
// /leave. An open redirect here would hand phishers a link on the shop's own site, so the URL
// is read strictly and the browser is sent to a URL rebuilt from the parts read, never to the
// text as sent:
//
//  - visible ASCII only (no blanks, tabs, newlines: browsers drop some of those and keep
//    others), no backslash (browsers read it as '/' in http(s) URLs; RFC 3986 does not);
//  - an absolute http or https URL with an authority, no user info, a host that is a plain
//    name ([a-z0-9.-], no escapes), an IPv4 address or an IPv6 literal, and a port of 1-65535
//    when one is written;
//  - a path that is empty or starts with '/' (Boost.URL 1.81 reads
//    "https://127.0.0.1.evil.example/x" as host 127.0.0.1 and path ".evil.example/x",
//    boostorg/url#755, where browsers see the host 127.0.0.1.evil.example);
//  - over https (`https_only`), never http: a return must not downgrade the visit;
//  - a host (and port) on the allow-list: an entry "host" allows that host on the scheme's
//    default port only; "host:port" that port only.
// tests/unit/return_url_test.cc holds the parser pitfalls as a table; the browser suite checks
// the rule differentially against the WHATWG parser browsers follow.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom::server {

// The URL to send the browser to, or nullopt when `url` may not be gone back to. `allowed`:
// "host" or "host:port" entries, lowercase (an IPv6 host in brackets).
std::optional<std::string> AllowedReturnUrl(std::string_view url,
                                            const std::vector<std::string>& allowed,
                                            bool https_only);

}  // namespace anteroom::server
