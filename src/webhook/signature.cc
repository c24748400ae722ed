#include "webhook/signature.h"

#include "common/base64url.h"
#include "common/random_id.h"
#include "core/hmac.h"

namespace anteroom::webhook {

std::string Base64Encode(std::string_view bytes) {
  // base64url (common/base64url.h) with the standard alphabet's two characters and padding.
  std::string out = Base64UrlEncode(bytes);
  for (char& c : out) {
    if (c == '-')
      c = '+';
    else if (c == '_')
      c = '/';
  }
  out.append((4 - out.size() % 4) % 4, '=');
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  size_t pad = 0;
  while (pad < text.size() && pad < 3 && text[text.size() - 1 - pad] == '=') ++pad;
  if (pad > 2 || (pad > 0 && text.size() % 4 != 0)) return std::nullopt;
  std::string url(text.substr(0, text.size() - pad));
  for (char& c : url) {
    if (c == '+')
      c = '-';
    else if (c == '/')
      c = '_';
    else if (c == '-' || c == '_')  // base64url's characters are not standard base64
      return std::nullopt;
  }
  // Base64UrlDecode checks the alphabet, the length and the canonical last character.
  return Base64UrlDecode(url);
}

std::string NewWebhookSecret() {
  return std::string(kSecretPrefix) + Base64Encode(RandomBytes(kNewSecretBytes));
}

std::optional<std::string> WebhookSecretKey(std::string_view secret) {
  if (!secret.starts_with(kSecretPrefix)) return std::nullopt;
  auto key = Base64Decode(secret.substr(kSecretPrefix.size()));
  if (!key || key->size() < kMinSecretBytes || key->size() > kMaxSecretBytes) return std::nullopt;
  return key;
}

std::optional<std::string> SignWebhook(std::string_view secret, std::string_view id,
                                       int64_t timestamp_s, std::string_view body) {
  auto key = WebhookSecretKey(secret);
  if (!key) return std::nullopt;
  std::string message;
  message.reserve(id.size() + body.size() + 24);
  message.append(id);
  message.push_back('.');
  message.append(std::to_string(timestamp_s));
  message.push_back('.');
  message.append(body);
  std::string mac = core::Hmac(*key).Mac(message);
  if (mac.empty()) return std::nullopt;  // OpenSSL failed: nothing to sign with
  return "v1," + Base64Encode(mac);
}

std::optional<std::string> WebhookSignatureHeader(const std::vector<std::string>& secrets,
                                                  std::string_view id, int64_t timestamp_s,
                                                  std::string_view body) {
  if (secrets.empty()) return std::nullopt;
  std::string header;
  for (const std::string& secret : secrets) {
    auto signature = SignWebhook(secret, id, timestamp_s, body);
    if (!signature) return std::nullopt;
    if (!header.empty()) header.push_back(' ');
    header.append(*signature);
  }
  return header;
}

}  // namespace anteroom::webhook
