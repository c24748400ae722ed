#pragma once
// Standard Webhooks signing (https://www.standardwebhooks.com/, "Signature scheme"): the
// symmetric scheme, `v1`. A secret is "whsec_" followed by the standard base64 (with padding)
// of 24 to 64 random bytes; a signature is "v1," followed by the standard base64 of
// HMAC-SHA256(key = those bytes, message = "<id>.<timestamp>.<body>"), the timestamp in decimal
// seconds. Several signatures (one per secret while a secret is being rotated) travel in one
// `webhook-signature` header, separated by single spaces; a receiver accepts the delivery when
// any of them verifies. OpenSSL does the HMAC (core/hmac.h) and the base64.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom::webhook {

inline constexpr std::string_view kSecretPrefix = "whsec_";
// The key sizes the specification allows: "at least 24 bytes (192 bits, 512 maximum)".
inline constexpr size_t kMinSecretBytes = 24;
inline constexpr size_t kMaxSecretBytes = 64;
// What NewWebhookSecret draws: 32 bytes (256 bits, as many as HMAC-SHA256 outputs).
inline constexpr size_t kNewSecretBytes = 32;

// "whsec_" + base64 of kNewSecretBytes bytes from OpenSSL's CSPRNG (RAND_bytes). Throws
// std::runtime_error only if the CSPRNG fails.
std::string NewWebhookSecret();

// The HMAC key of `secret`: the bytes after "whsec_", base64-decoded. nullopt when the prefix
// is missing, the base64 is not canonical standard base64 (padding optional), or the key is
// shorter than kMinSecretBytes or longer than kMaxSecretBytes.
std::optional<std::string> WebhookSecretKey(std::string_view secret);

// "v1,<base64 HMAC-SHA256(key, id + "." + timestamp_s + "." + body)>", or nullopt for a
// malformed secret (WebhookSecretKey).
std::optional<std::string> SignWebhook(std::string_view secret, std::string_view id,
                                       int64_t timestamp_s, std::string_view body);

// The `webhook-signature` header value: one signature per secret, in the order given (newest
// first), separated by single spaces. nullopt when `secrets` is empty or any of them is
// malformed: a delivery is never sent with fewer signatures than its endpoint has secrets.
std::optional<std::string> WebhookSignatureHeader(const std::vector<std::string>& secrets,
                                                  std::string_view id, int64_t timestamp_s,
                                                  std::string_view body);

// Standard base64 (RFC 4648 section 4) with padding, as the specification's secrets and
// signatures spell it.
std::string Base64Encode(std::string_view bytes);
// nullopt on a character outside the alphabet, a wrong length or padding, or a non-canonical
// last character. Padding may be left out.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace anteroom::webhook
