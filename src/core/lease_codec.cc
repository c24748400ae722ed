#include "core/lease_codec.h"

#include <openssl/crypto.h>

#include <fmt/format.h>

#include <charconv>

#include "common/base64url.h"

namespace anteroom::core {

namespace {

bool ParseU64(std::string_view text, uint64_t& out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// The tag of `signed_part` (id "." delivery) in `queue`; empty on an OpenSSL failure.
std::string Tag(LeaseMac& mac, std::string_view queue, std::string_view signed_part) {
  unsigned char out[LeaseMac::kSize];
  if (!mac.Tag({queue, "/", signed_part}, out)) return {};
  return Base64UrlEncode(std::string_view(reinterpret_cast<const char*>(out), kLeaseTagBytes));
}

}  // namespace

std::string EncodeLease(LeaseMac& mac, std::string_view queue, JobId id, uint64_t delivery) {
  char buf[48];
  auto end = fmt::format_to_n(buf, sizeof buf, "{}.{}", id, delivery).out;
  std::string_view signed_part(buf, static_cast<size_t>(end - buf));
  std::string lease;
  lease.reserve(signed_part.size() + 1 + 16);
  lease.append(signed_part).append(1, '.').append(Tag(mac, queue, signed_part));
  return lease;
}

std::optional<LeaseRef> DecodeLease(LeaseMac& mac, std::string_view queue, std::string_view lease) {
  size_t dot1 = lease.find('.');
  size_t dot2 = dot1 == std::string_view::npos ? dot1 : lease.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) return std::nullopt;
  LeaseRef ref;
  if (!ParseU64(lease.substr(0, dot1), ref.id) ||
      !ParseU64(lease.substr(dot1 + 1, dot2 - dot1 - 1), ref.delivery)) {
    return std::nullopt;
  }
  // Forged or damaged? Compared in constant time, so timing tells nothing about the tag.
  std::string tag = Tag(mac, queue, lease.substr(0, dot2));
  std::string_view given = lease.substr(dot2 + 1);
  if (tag.empty() || given.size() != tag.size() ||
      CRYPTO_memcmp(given.data(), tag.data(), tag.size()) != 0) {
    return std::nullopt;
  }
  return ref;
}

}  // namespace anteroom::core
