#include "core/challenge.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>

#include "common/base64url.h"
#include "common/names.h"

namespace anteroom::core {

namespace {
constexpr size_t kExpiresBytes = 8;
constexpr size_t kTagBytes = 16;
constexpr size_t kNonceBytes = kExpiresBytes + PowPuzzles::kRandomBytes + kTagBytes;
}  // namespace

int LeadingZeroBits(std::string_view digest) {
  int bits = 0;
  for (char c : digest) {
    auto byte = static_cast<unsigned char>(c);
    if (byte == 0) {
      bits += 8;
      continue;
    }
    while ((byte & 0x80u) == 0) {
      ++bits;
      byte = static_cast<unsigned char>(byte << 1);
    }
    break;
  }
  return bits;
}

std::string Sha256(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  unsigned len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1) {
    return {};
  }
  return std::string(reinterpret_cast<const char*>(out.data()), len);
}

const char* ToString(PowPuzzles::Problem problem) {
  switch (problem) {
    case PowPuzzles::Problem::kNone:
      return "none";
    case PowPuzzles::Problem::kMalformed:
      return "the challenge nonce or solution is malformed";
    case PowPuzzles::Problem::kForged:
      return "the challenge was not issued for this room and session";
    case PowPuzzles::Problem::kExpired:
      return "the challenge has expired";
  }
  return "none";
}

// A separate key: a puzzle tag can never pass for a token signature or a lease tag.
PowPuzzles::PowPuzzles(std::string_view secret)
    : hmac_("anteroom/challenge/" + std::string(secret)) {}

std::string PowPuzzles::Tag(std::string_view room, std::string_view session,
                            std::string_view expires_and_random) const {
  std::string input = "anteroom/pow/1";
  input += '\0';
  input += room;
  input += '\0';
  input += session;
  input += '\0';
  input += expires_and_random;
  return hmac_.Mac(input).substr(0, kTagBytes);
}

PowPuzzles::Puzzle PowPuzzles::Issue(std::string_view room, std::string_view session,
                                     int64_t now_ms, std::string_view random) const {
  Puzzle p;
  p.expires_ms = now_ms + kLifetimeMs;
  std::string raw;
  for (int shift = 56; shift >= 0; shift -= 8) {
    raw += static_cast<char>((static_cast<uint64_t>(p.expires_ms) >> shift) & 0xff);
  }
  raw += random.substr(0, kRandomBytes);
  raw.resize(kExpiresBytes + kRandomBytes, '\0');
  raw += Tag(room, session, raw);
  p.nonce = Base64UrlEncode(raw);
  return p;
}

PowPuzzles::Proof PowPuzzles::Check(std::string_view room, std::string_view session,
                                    std::string_view nonce, std::string_view solution,
                                    int64_t now_ms) const {
  if (solution.size() > kMaxSolutionBytes || !IsValidName(solution) ||
      nonce.size() != (kNonceBytes * 4 + 2) / 3) {
    return {Problem::kMalformed, 0};
  }
  std::optional<std::string> raw = Base64UrlDecode(nonce);
  if (!raw || raw->size() != kNonceBytes) return {Problem::kMalformed, 0};
  std::string_view signed_part = std::string_view(*raw).substr(0, kExpiresBytes + kRandomBytes);
  std::string tag = Tag(room, session, signed_part);
  if (tag.size() != kTagBytes ||
      CRYPTO_memcmp(tag.data(), raw->data() + kExpiresBytes + kRandomBytes, kTagBytes) != 0) {
    return {Problem::kForged, 0};
  }
  uint64_t expires = 0;
  for (size_t i = 0; i < kExpiresBytes; ++i) {
    expires = (expires << 8) | static_cast<unsigned char>((*raw)[i]);
  }
  if (static_cast<int64_t>(expires) <= now_ms) return {Problem::kExpired, 0};
  std::string input(nonce);
  input += solution;
  return {Problem::kNone, LeadingZeroBits(Sha256(input))};
}

}  // namespace anteroom::core
