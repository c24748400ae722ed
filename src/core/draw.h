#pragma once
// The fair draw: the random stream a draw's seed stands for, and the Fisher-Yates shuffle that
// turns an event's pre-queue into its order one bounded chunk at a time. The same stream picks
// who a `random` room admits next. No I/O; the seed is drawn and logged by the caller
// (core/room_event.h), and anyone can recompute a draw from it (docs/design.md, "The draw").

#include <openssl/evp.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/bytes.h"
#include "core/room_event.h"

namespace anteroom::core {

// The random stream of a draw: the ChaCha20 keystream (RFC 8439 block function) under key =
// the seed, 96-bit nonce 0, block counter from 0, read as little-endian 32-bit words (word w is
// bytes 4w..4w+3 of the keystream). Chosen so anyone can recompute a draw from its logged seed
// with any ChaCha20. The stream is exactly RFC 8439's for its first 2^36 words (2^32 blocks, far
// more than any draw uses); past them the block counter carries into the nonce's first word, as
// OpenSSL does (and as the original 64-bit-counter ChaCha20 with a zero nonce reads).
//
// The keystream is made in batches (one block first, doubling up to 4 KiB), so a short use costs
// one block and a long one an OpenSSL call per 1,024 words. Movable, not copyable (a moved-from
// stream may only be assigned to or destroyed). An OpenSSL failure throws std::runtime_error
// (as the project's other OpenSSL calls do): it does not happen with a working library.
class DrawStream {
 public:
  explicit DrawStream(const DrawSeed& seed);
  DrawStream(DrawStream&&) noexcept = default;
  DrawStream& operator=(DrawStream&&) noexcept = default;

  uint32_t Next32() {
    if (pos_ == end_) Refill();
    return words_[pos_++];
  }
  // Uniform in [0, bound), bound >= 1, unbiased by rejection: limit = 2^32 - (2^32 mod bound);
  // words >= limit are skipped; the answer is word % bound. (2^32 mod bound is only computed
  // for words >= 2^32 - bound, the only ones that may be at or above the limit.)
  uint32_t Below(uint32_t bound);
  // The position in the stream: words read so far (for snapshots).
  uint64_t words_used() const { return base_ + pos_; }
  // Repositions the stream so that words_used() == `words_used` (from any position, a fresh
  // stream's included): a seek by block counter, without making the words before it.
  void SkipTo(uint64_t words_used);

 private:
  static constexpr size_t kBlockWords = 16;    // one ChaCha20 block: 64 bytes
  static constexpr size_t kBatchWords = 1024;  // the largest batch: 4 KiB
  struct CtxFree {
    void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
  };
  // Starts the cipher at `block` (the 64-bit counter: the IV's block counter, carrying into the
  // nonce's first word).
  void StartAt(uint64_t block);
  // The next batch of keystream into words_, from where the cipher is.
  void Refill();

  DrawSeed key_;
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx_;
  uint64_t base_ = 0;  // the stream position of words_[0]
  size_t pos_ = 0;     // the next word to read in words_
  size_t end_ = 0;     // words_[0..end_) hold keystream
  size_t batch_ = kBlockWords;
  std::array<uint32_t, kBatchWords> words_;
};

// Forward Fisher-Yates (Durstenfeld), one step at a time: step i (0-based) swaps order[i] with
// order[i + Below(n - i)]; after step i, order[0..i] is final, so a caller can publish the
// front of the order while the rest is still being drawn. n - 1 steps make the permutation: the
// last position is final once they are done, so done() counts it then and reaches size(). With
// n = 0 or 1 there is nothing to draw: done() == size() at once and Step() answers 0.
//
// The order holds whatever the caller numbers its people by (the pre-queue's arrival order for
// a draw: 0 .. n-1); n must fit in 32 bits (the constructor throws std::length_error if not).
class FisherYates {
 public:
  FisherYates(const DrawSeed& seed, std::vector<uint32_t> order);

  // Does up to max_steps more steps; answers how many positions became final (the last step
  // finalises two: its own and the last).
  size_t Step(size_t max_steps);
  size_t done() const {
    return order_.size() <= 1 || steps_ + 1 == order_.size() ? order_.size() : steps_;
  }
  size_t size() const { return order_.size(); }
  const std::vector<uint32_t>& order() const { return order_; }

  // Snapshots: enough to continue a draw exactly where it was. The layout (common/bytes.h,
  // little-endian): the seed (32 bytes), the stream's words_used (u64), the steps done (u64),
  // the order as it stands (a u64 count, then u32 values). No version of its own: it is part of
  // the layout of the snapshot that holds it. Restore answers nullopt, and marks `in` failed, if
  // the bytes do not decode into a draw this class could be in (count past the bytes, more steps
  // than n - 1, fewer words than steps, a position past 2^36 words).
  void Save(ByteWriter& out) const;
  static std::optional<FisherYates> Restore(ByteReader& in);

 private:
  FisherYates(const DrawSeed& seed, std::vector<uint32_t> order, size_t steps);

  DrawSeed seed_;
  DrawStream stream_;
  std::vector<uint32_t> order_;
  size_t steps_ = 0;  // steps done: order_[0..steps_) is final
};

}  // namespace anteroom::core
