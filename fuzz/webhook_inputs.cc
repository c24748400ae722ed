// What the webhook code reads from others: an admin's webhook URL and --webhook-allow entries,
// a receiver's Retry-After, a stored secret's base64. The first byte picks:
//  0: the input as a webhook URL (ParseWebhookUrl): one that parses has a host the allow-list
//     can judge, a request target starting with '/', a nonzero port, and no CR, LF or space in
//     what goes on the request line or in Host;
//  1: the input's lines as --webhook-allow entries (WebhookAllowList::Parse), each accepted list
//     asked about a few addresses;
//  2: the input as a Retry-After value (ParseRetryAfterMs): never negative, never past the cap;
//  3: the input as base64 (Base64Decode): what decodes encodes back to the same text (padded);
//     and as a secret (WebhookSecretKey), which signs only when its key decodes.

#include <boost/asio/ip/address.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness.h"
#include "webhook/allow_list.h"
#include "webhook/sender.h"
#include "webhook/signature.h"
#include "webhook/webhook_url.h"

namespace {

using anteroom::fuzz::Fail;
namespace webhook = anteroom::webhook;
namespace ip = boost::asio::ip;

constexpr int64_t kNow = 1'700'000'000'000;

bool HasLineBreakOrSpace(std::string_view s) {
  return s.find_first_of("\r\n \t") != std::string_view::npos || s.find('\0') != s.npos;
}

void Url(std::string_view text) {
  std::string error;
  auto url = webhook::ParseWebhookUrl(text, error);
  if (!url) {
    if (error.empty()) Fail("a refused URL says nothing", text);
    return;
  }
  if (text.size() > webhook::kMaxWebhookUrlBytes) Fail("an over-long URL parsed", text);
  if (url->host.empty() || url->port == 0) Fail("a URL without host or port", text);
  if (url->target.empty() || url->target[0] != '/') Fail("a target not starting with /", text);
  if (HasLineBreakOrSpace(url->target) || HasLineBreakOrSpace(url->host_header)) {
    Fail("a request line or Host that would split", text);
  }
  if (!url->address && !webhook::IsWebhookHostName(url->host)) Fail("a host name not a name");
  // The allow-list judges every parsed host without trouble.
  webhook::WebhookAllowList none;
  (void)none.Allows(url->host, url->address.value_or(ip::make_address("203.0.113.7")));
  if (url->address) (void)webhook::InternalRange(*url->address);
}

void Allow(std::string_view text) {
  std::vector<std::string> entries;
  size_t start = 0;
  while (start <= text.size() && entries.size() < 64) {
    size_t end = text.find('\n', start);
    if (end == text.npos) end = text.size();
    entries.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string error;
  auto list = webhook::WebhookAllowList::Parse(entries, error);
  if (!list) {
    if (error.empty()) Fail("a refused allow-list says nothing", text);
    return;
  }
  for (const char* a : {"127.0.0.1", "10.1.2.3", "192.168.0.1", "::1", "fd00::1",
                        "::ffff:10.0.0.1", "203.0.113.7", "2001:db8::1"}) {
    auto addr = ip::make_address(a);
    (void)list->Allows(entries.empty() ? "" : entries.front(), addr);
    (void)list->Allows("receiver.example", addr);
  }
}

void RetryAfter(std::string_view text) {
  auto ms = webhook::ParseRetryAfterMs(text, kNow);
  if (ms && (*ms < 0 || *ms > webhook::kMaxRetryAfterMs)) Fail("Retry-After out of range", text);
}

void Base64(std::string_view text) {
  if (auto bytes = webhook::Base64Decode(text)) {
    std::string again = webhook::Base64Encode(*bytes);
    std::string padded(text);
    while (padded.size() % 4 != 0) padded += '=';
    if (again != padded) Fail("base64 that decodes does not encode back", text);
  }
  std::string secret = "whsec_" + std::string(text);
  auto key = webhook::WebhookSecretKey(secret);
  auto signature = webhook::SignWebhook(secret, "msg_1", kNow / 1000, "{}");
  if (key.has_value() != signature.has_value()) Fail("a secret signs iff its key decodes", text);
  if (key && (key->size() < webhook::kMinSecretBytes || key->size() > webhook::kMaxSecretBytes)) {
    Fail("a secret key of a refused length", text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      Url(text);
      break;
    case 1:
      Allow(text);
      break;
    case 2:
      RetryAfter(text);
      break;
    default:
      Base64(text);
      break;
  }
  return 0;
}
