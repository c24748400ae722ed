#include "core/draw.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <utility>

namespace anteroom::core {

// The words are the keystream's bytes read in place (the format, like common/bytes.h, is
// little-endian, as x86-64 and arm64 are).
static_assert(std::endian::native == std::endian::little);

DrawStream::DrawStream(const DrawSeed& seed) : key_(seed), ctx_(EVP_CIPHER_CTX_new()) {
  if (ctx_ == nullptr) throw std::runtime_error("OpenSSL: cannot allocate a cipher context");
  StartAt(0);
}

void DrawStream::StartAt(uint64_t block) {
  // OpenSSL's ChaCha20 IV: the 32-bit block counter, then the 96-bit nonce, little-endian. The
  // counter's high half goes into the nonce's first word, where OpenSSL carries it too.
  std::array<unsigned char, 16> iv{};
  const auto low = static_cast<uint32_t>(block);
  const auto high = static_cast<uint32_t>(block >> 32);
  std::memcpy(iv.data(), &low, sizeof(low));
  std::memcpy(iv.data() + 4, &high, sizeof(high));
  if (EVP_EncryptInit_ex(ctx_.get(), EVP_chacha20(), nullptr, key_.data(), iv.data()) != 1) {
    throw std::runtime_error("OpenSSL: cannot initialise ChaCha20");
  }
  base_ = block * kBlockWords;
  pos_ = 0;
  end_ = 0;
  batch_ = kBlockWords;
}

void DrawStream::Refill() {
  // ChaCha20 encrypting zeros gives its keystream; it is done in place.
  base_ += end_;
  const int bytes = static_cast<int>(batch_ * sizeof(uint32_t));
  auto* buf = reinterpret_cast<unsigned char*>(words_.data());
  std::memset(buf, 0, static_cast<size_t>(bytes));
  int out = 0;
  if (EVP_EncryptUpdate(ctx_.get(), buf, &out, buf, bytes) != 1 || out != bytes) {
    throw std::runtime_error("OpenSSL: ChaCha20 failed");
  }
  pos_ = 0;
  end_ = batch_;
  batch_ = std::min(batch_ * 2, kBatchWords);
}

uint32_t DrawStream::Below(uint32_t bound) {
  for (;;) {
    const uint32_t word = Next32();
    // limit = 2^32 - (2^32 mod bound) > 2^32 - bound: a word below 2^32 - bound is accepted.
    if (word <= std::numeric_limits<uint32_t>::max() - bound) return word % bound;
    const uint32_t rest = (0u - bound) % bound;  // 2^32 mod bound, in 32-bit arithmetic
    const uint64_t limit = (uint64_t{1} << 32) - rest;
    if (word < limit) return word % bound;
  }
}

void DrawStream::SkipTo(uint64_t words_used) {
  StartAt(words_used / kBlockWords);
  const size_t within = words_used % kBlockWords;
  if (within != 0) {
    Refill();
    pos_ = within;
  }
}

FisherYates::FisherYates(const DrawSeed& seed, std::vector<uint32_t> order)
    : FisherYates(seed, std::move(order), 0) {}

FisherYates::FisherYates(const DrawSeed& seed, std::vector<uint32_t> order, size_t steps)
    : seed_(seed), stream_(seed), order_(std::move(order)), steps_(steps) {
  if (order_.size() > std::numeric_limits<uint32_t>::max()) {
    throw std::length_error("a draw holds at most 2^32 - 1 people");
  }
}

size_t FisherYates::Step(size_t max_steps) {
  const size_t n = order_.size();
  if (n <= 1) return 0;
  const size_t before = done();
  const size_t end = steps_ + std::min(max_steps, n - 1 - steps_);
  uint32_t* order = order_.data();
  for (size_t i = steps_; i < end; ++i) {
    const size_t j = i + stream_.Below(static_cast<uint32_t>(n - i));
    std::swap(order[i], order[j]);
  }
  steps_ = end;
  return done() - before;
}

// The layout is in the header.
void FisherYates::Save(ByteWriter& out) const {
  for (uint8_t b : seed_) out.Put(b);
  out.Put<uint64_t>(stream_.words_used());
  out.Put<uint64_t>(steps_);
  out.Put<uint64_t>(order_.size());
  for (uint32_t v : order_) out.Put(v);
}

std::optional<FisherYates> FisherYates::Restore(ByteReader& in) {
  DrawSeed seed{};
  for (uint8_t& b : seed) b = in.Get<uint8_t>();
  const auto words_used = in.Get<uint64_t>();
  const auto steps = in.Get<uint64_t>();
  const uint64_t n = in.GetCount(sizeof(uint32_t));
  // Each step reads at least one word. A draw of the largest size reads about 2^32 words and
  // at most twice that on average (a word is rejected with probability below 1/2), so a
  // position past 2^36 words is damage.
  const bool fits = !in.failed() && n <= std::numeric_limits<uint32_t>::max() &&
                    steps <= (n == 0 ? 0 : n - 1) && words_used >= steps &&
                    words_used <= (uint64_t{1} << 36);
  if (!fits) {
    in.Fail();
    return std::nullopt;
  }
  std::vector<uint32_t> order(static_cast<size_t>(n));
  for (uint32_t& v : order) v = in.Get<uint32_t>();
  if (in.failed()) return std::nullopt;
  FisherYates draw(seed, std::move(order), static_cast<size_t>(steps));
  draw.stream_.SkipTo(words_used);
  return draw;
}

}  // namespace anteroom::core
