// What the gate reads from a client's URLs: a request path matched by the bypass rules
// (NormalPath) and the `return` URL the browser is sent back to (AllowedReturnUrl). The first
// byte picks:
//  0: the input as a raw path: a normal form, when there is one, has no dot or empty segment,
//     no byte a server may split or cut at, and is what the path decodes to;
//  1: the input as a `return` URL, against an allow-list of a name, an IPv4 address with a
//     port and an IPv6 literal (and, by the second byte, https only): a URL accepted is
//     visible ASCII, http(s), on the list, and accepted again as itself once rebuilt.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness.h"
#include "server/gate_settings.h"
#include "server/return_url.h"

namespace {

using anteroom::fuzz::Fail;

void CheckNormalPath(std::string_view raw) {
  std::optional<std::string> path = anteroom::server::NormalPath(raw);
  if (!path) return;
  if (path->empty() || path->front() != '/') Fail("a normal path that is not absolute", *path);
  for (char c : *path) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '#' || c == ';' || c == '?' || u < 0x20 || u == 0x7f) {
      Fail("a normal path with a byte servers split at", *path);
    }
  }
  size_t start = 1;
  while (true) {
    size_t end = path->find('/', start);
    std::string_view segment =
        std::string_view(*path).substr(start, end == std::string::npos ? end : end - start);
    if (segment == "." || segment == "..") Fail("a dot segment in a normal path", *path);
    if (end == std::string::npos) break;
    if (segment.empty()) Fail("an empty segment in a normal path", *path);
    start = end + 1;
  }
  // Without escapes the raw path is its own normal form.
  if (raw.find('%') == std::string_view::npos && *path != raw) Fail("not the raw path", raw);
}

// The host[:port] of an accepted URL ("scheme://host[:port]/...").
std::string_view Authority(std::string_view url) {
  url.remove_prefix(url.find("://") + 3);
  return url.substr(0, url.find_first_of("/?#"));
}

void CheckReturn(std::string_view url, bool https_only) {
  static const std::vector<std::string> kAllowed = {"shop.example", "127.0.0.1:8080", "[::1]"};
  std::optional<std::string> to = anteroom::server::AllowedReturnUrl(url, kAllowed, https_only);
  if (!to) return;
  const bool https = to->starts_with("https://");
  if (!https && (https_only || !to->starts_with("http://"))) Fail("scheme", *to);
  for (char c : *to) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '\\') Fail("not visible ASCII", *to);
  }
  std::string authority(Authority(*to));
  const std::string default_port = https ? ":443" : ":80";
  if (authority.ends_with(default_port)) authority.resize(authority.size() - default_port.size());
  bool listed = false;
  for (const std::string& entry : kAllowed) listed = listed || entry == authority;
  if (!listed) Fail("off the list", *to);
  std::optional<std::string> again = anteroom::server::AllowedReturnUrl(*to, kAllowed, https_only);
  if (!again || *again != *to) Fail("the rebuilt URL does not read back as itself", *to);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 2, size - 2);
  if (data[0] % 2 == 0) {
    CheckNormalPath(in);
  } else {
    CheckReturn(in, data[1] % 2 == 1);
  }
  return 0;
}
