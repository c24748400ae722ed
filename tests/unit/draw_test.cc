#include "core/draw.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "support/chi_square.h"

namespace anteroom::core {
namespace {

using Block = std::array<uint32_t, 16>;

// The ChaCha20 block function as RFC 8439 section 2.3 writes it, without OpenSSL: what a reader
// of docs/design.md ("The draw") would write to recompute a draw. `counter` is the 32-bit
// block counter; its high half goes into the nonce's first word, as DrawStream defines it.
uint32_t Rotl(uint32_t v, int c) { return (v << c) | (v >> (32 - c)); }

void QuarterRound(Block& s, int a, int b, int c, int d) {
  s[a] += s[b];
  s[d] = Rotl(s[d] ^ s[a], 16);
  s[c] += s[d];
  s[b] = Rotl(s[b] ^ s[c], 12);
  s[a] += s[b];
  s[d] = Rotl(s[d] ^ s[a], 8);
  s[c] += s[d];
  s[b] = Rotl(s[b] ^ s[c], 7);
}

uint32_t LittleEndian32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

Block ReferenceBlock(const DrawSeed& key, uint64_t counter,
                     const std::array<uint8_t, 12>& nonce = {}) {
  Block state{0x61707865, 0x3320646e, 0x79622d32, 0x6b206574};
  for (int i = 0; i < 8; ++i) state[4 + i] = LittleEndian32(key.data() + 4 * i);
  state[12] = static_cast<uint32_t>(counter);
  for (int i = 0; i < 3; ++i) state[13 + i] = LittleEndian32(nonce.data() + 4 * i);
  state[13] += static_cast<uint32_t>(counter >> 32);
  Block x = state;
  for (int round = 0; round < 10; ++round) {
    QuarterRound(x, 0, 4, 8, 12);
    QuarterRound(x, 1, 5, 9, 13);
    QuarterRound(x, 2, 6, 10, 14);
    QuarterRound(x, 3, 7, 11, 15);
    QuarterRound(x, 0, 5, 10, 15);
    QuarterRound(x, 1, 6, 11, 12);
    QuarterRound(x, 2, 7, 8, 13);
    QuarterRound(x, 3, 4, 9, 14);
  }
  for (int i = 0; i < 16; ++i) x[i] += state[i];
  return x;
}

// Word `w` of a draw's stream: word w % 16 of block w / 16 (nonce 0).
uint32_t ReferenceWord(const DrawSeed& seed, uint64_t w) {
  return ReferenceBlock(seed, w / 16)[w % 16];
}

DrawSeed CountingSeed() {
  DrawSeed seed{};
  for (size_t i = 0; i < seed.size(); ++i) seed[i] = static_cast<uint8_t>(i);  // 00 01 .. 1f
  return seed;
}

// The seeds of the statistical tests: a counter, little-endian, in the first 8 bytes. Fixed,
// so every run draws the same permutations.
DrawSeed SeedOf(uint64_t counter) {
  DrawSeed seed{};
  std::memcpy(seed.data(), &counter, sizeof(counter));
  return seed;
}

std::vector<uint32_t> Iota(size_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}

// RFC 8439 section 2.3.2: key 00..1f, nonce 00 00 00 09 00 00 00 4a 00 00 00 00, block counter
// 1. The words of the block function's output ("ChaCha state at the end of the ChaCha20
// operation"), serialized little-endian as 10 f1 e7 e4 d1 3b 59 15 ...
TEST(DrawStreamTest, ReferenceBlockFunctionIsRfc8439Section232) {
  const Block want = {0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3, 0xc7f4d1c7, 0x0368c033,
                      0x9aaa2204, 0x4e6cd4c3, 0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
                      0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2};
  EXPECT_EQ(ReferenceBlock(CountingSeed(), 1, {0, 0, 0, 9, 0, 0, 0, 0x4a, 0, 0, 0, 0}), want);
}

// RFC 8439 appendix A.1, test vectors 1-3: the block function with nonce 0, which is exactly
// the draw's stream: words 16c .. 16c+15 are block c. (Vector 1's keystream begins
// 76 b8 e0 ad a0 f1 3d 90, vector 2's 9f 07 e7 be 55 51 38 7a, vector 3's 3a eb 52 24.)
TEST(DrawStreamTest, IsRfc8439ChaCha20WithNonceZero) {
  const Block a1_1 = {0xade0b876, 0x903df1a0, 0xe56a5d40, 0x28bd8653, 0xb819d2bd, 0x1aed8da0,
                      0xccef36a8, 0xc70d778b, 0x7c5941da, 0x8d485751, 0x3fe02477, 0x374ad8b8,
                      0xf4b8436a, 0x1ca11815, 0x69b687c3, 0x8665eeb2};
  const Block a1_2 = {0xbee7079f, 0x7a385155, 0x7c97ba98, 0x0d082d73, 0xa0290fcb, 0x6965e348,
                      0x3e53c612, 0xed7aee32, 0x7621b729, 0x434ee69c, 0xb03371d5, 0xd539d874,
                      0x281fed31, 0x45fb0a51, 0x1f0ae1ac, 0x6f4d794b};
  const Block a1_3 = {0x2452eb3a, 0x9249f8ec, 0x8d829d9b, 0xddd4ceb1, 0xe8252083, 0x60818b01,
                      0xf38422b8, 0x5aaa49c9, 0xbb00ca8e, 0xda3ba7b4, 0xc4b592d1, 0xfdf2732f,
                      0x4436274e, 0x2561b3c8, 0xebdd4aa6, 0xa0136c00};
  DrawSeed zero{};
  DrawStream stream(zero);
  Block got{};
  for (uint32_t& w : got) w = stream.Next32();  // block 0: vector 1
  EXPECT_EQ(got, a1_1);
  for (uint32_t& w : got) w = stream.Next32();  // block 1: vector 2
  EXPECT_EQ(got, a1_2);
  EXPECT_EQ(stream.words_used(), 32u);
  EXPECT_EQ(ReferenceBlock(zero, 0), a1_1);
  EXPECT_EQ(ReferenceBlock(zero, 1), a1_2);

  DrawSeed one{};
  one[31] = 1;  // vector 3: key 00 .. 00 01, block counter 1
  DrawStream third(one);
  third.SkipTo(16);
  for (uint32_t& w : got) w = third.Next32();
  EXPECT_EQ(got, a1_3);
  EXPECT_EQ(ReferenceBlock(one, 1), a1_3);
}

// OpenSSL's stream is the reference's word for word: across its batches (1, 2, 4, ... 64
// blocks), after a seek, and past 2^32 blocks, where the counter carries into the nonce.
TEST(DrawStreamTest, MatchesTheReferenceAcrossBatchesSeeksAndTheCounterCarry) {
  const DrawSeed seed = CountingSeed();
  DrawStream stream(seed);
  for (uint64_t w = 0; w < 5'000; ++w) ASSERT_EQ(stream.Next32(), ReferenceWord(seed, w)) << w;
  const uint64_t carry = (uint64_t{1} << 32) * 16;  // the first word of block 2^32
  for (uint64_t start : {carry - 40, carry - 1, carry, (uint64_t{1} << 40) + 7}) {
    stream.SkipTo(start);
    for (uint64_t w = start; w < start + 80; ++w) {
      ASSERT_EQ(stream.Next32(), ReferenceWord(seed, w)) << w;
    }
    EXPECT_EQ(stream.words_used(), start + 80);
  }
}

// SkipTo lands on any word, mid-block and mid-batch included, from a fresh stream or a used
// one, forwards or back; the words that follow are the stream's own.
TEST(DrawStreamTest, SkipToReproducesTheStreamFromAnyPosition) {
  const DrawSeed seed = SeedOf(42);
  DrawStream whole(seed);
  std::vector<uint32_t> words(20'000);
  for (uint32_t& w : words) w = whole.Next32();

  DrawStream reused(seed);
  for (uint64_t start : {0,    1,    15,   16,   17,   31,   33,    47,     48, 1023, 1024,
                         1025, 1500, 2047, 2048, 4095, 4097, 9'999, 12'345, 3,  0}) {
    DrawStream fresh(seed);
    fresh.SkipTo(start);
    reused.SkipTo(start);
    EXPECT_EQ(fresh.words_used(), start);
    EXPECT_EQ(reused.words_used(), start);
    for (uint64_t w = start; w < start + 5'000; ++w) {
      ASSERT_EQ(fresh.Next32(), words[w]) << start << " " << w;
      ASSERT_EQ(reused.Next32(), words[w]) << start << " " << w;
    }
    EXPECT_EQ(fresh.words_used(), start + 5'000);
  }
}

// The rule, word by word against the raw stream: limit = 2^32 - (2^32 mod bound), words at or
// above it are skipped, the answer is word % bound. Bounds where rejection is frequent
// (2^31 + 1: nearly half the words; 3 * 2^30: a quarter), rare (2^32 - 2^20), or never happens
// (powers of two, 1), and at the edges.
TEST(DrawStreamTest, BelowRejectsExactlyTheWordsAtOrAboveTheLimit) {
  const DrawSeed seed = SeedOf(7);
  for (uint64_t bound64 : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{10},
                           uint64_t{1} << 31, (uint64_t{1} << 31) + 1, uint64_t{3} << 30,
                           (uint64_t{1} << 32) - (uint64_t{1} << 20), (uint64_t{1} << 32) - 1}) {
    const auto bound = static_cast<uint32_t>(bound64);
    const uint64_t limit = (uint64_t{1} << 32) - (uint64_t{1} << 32) % bound64;
    DrawStream raw(seed);
    DrawStream stream(seed);
    int64_t rejected = 0;
    for (int call = 0; call < 20'000; ++call) {
      uint32_t word = raw.Next32();
      while (word >= limit) {
        ++rejected;
        word = raw.Next32();
      }
      ASSERT_EQ(stream.Below(bound), word % bound) << bound << " call " << call;
      ASSERT_EQ(stream.words_used(), raw.words_used()) << bound << " call " << call;
    }
    if (bound64 == (uint64_t{1} << 31) + 1) {
      EXPECT_GT(rejected, 9'000) << "about half";
    }
    if (bound64 == uint64_t{3} << 30) {
      EXPECT_GT(rejected, 5'000) << "about a quarter";
    }
    if ((bound & (bound - 1)) == 0) {
      EXPECT_EQ(rejected, 0) << bound;
    }
  }
}

// Unbiased: with bound 3 * 2^30, word % bound without rejection would answer below 2^30 half
// the time (twice as often as each other third); Below answers each third a third of the time.
// Chi-square, 2 degrees of freedom, p = 1e-6 (fixed seed: the outcome is the same every run).
TEST(DrawStreamTest, BelowIsUnbiasedWhereTheModuloAloneIsNot) {
  constexpr int64_t kDraws = 300'000;
  const uint32_t bound = uint32_t{3} << 30;
  DrawStream stream(SeedOf(11));
  std::vector<int64_t> thirds(3);
  for (int64_t i = 0; i < kDraws; ++i) ++thirds[stream.Below(bound) >> 30];
  const double chi = testing::ChiSquare(thirds, kDraws / 3.0);
  EXPECT_LT(chi, testing::ChiSquareCritical(1e-6, 2))
      << thirds[0] << " " << thirds[1] << " " << thirds[2];
}

// The draw as docs/design.md says to recompute it: the reference stream, the rejection rule,
// forward Fisher-Yates over 0 .. n-1.
std::vector<uint32_t> ReferenceDraw(const DrawSeed& seed, size_t n) {
  std::vector<uint32_t> order = Iota(n);
  uint64_t w = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    const uint64_t bound = n - i;
    const uint64_t limit = (uint64_t{1} << 32) - (uint64_t{1} << 32) % bound;
    uint32_t word = ReferenceWord(seed, w++);
    while (word >= limit) word = ReferenceWord(seed, w++);
    std::swap(order[i], order[i + word % bound]);
  }
  return order;
}

TEST(FisherYatesTest, IsTheDocumentedDraw) {
  // docs/design.md's example ("Recomputing a draw from its seed", in Python).
  FisherYates example(CountingSeed(), Iota(10));
  example.Step(9);
  EXPECT_EQ(example.order(), (std::vector<uint32_t>{3, 9, 7, 2, 6, 5, 8, 1, 0, 4}));
  EXPECT_EQ(ReferenceDraw(CountingSeed(), 10), example.order());

  for (size_t n : {2, 3, 10, 1'000, 3'000}) {
    const DrawSeed seed = SeedOf(1'000 + n);
    FisherYates draw(seed, Iota(n));
    EXPECT_EQ(draw.Step(n), n);
    EXPECT_EQ(draw.order(), ReferenceDraw(seed, n)) << n;
    std::vector<uint32_t> sorted = draw.order();
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, Iota(n));
  }
}

TEST(FisherYatesTest, NothingToDrawForZeroOrOnePerson) {
  for (size_t n : {0, 1}) {
    FisherYates draw(SeedOf(5), Iota(n));
    EXPECT_EQ(draw.size(), n);
    EXPECT_EQ(draw.done(), n) << "at once";
    EXPECT_EQ(draw.Step(10), 0u);
    EXPECT_EQ(draw.done(), n);
    EXPECT_EQ(draw.order(), Iota(n));
  }
}

// Any chunking gives the order of one Step(n); each Step answers how far done() moved; the
// final front never changes afterwards (what a caller publishes between chunks stays true).
TEST(FisherYatesTest, StepWiseEqualsAllAtOnceForAnyChunking) {
  for (size_t n : {2, 3, 17, 1'024, 5'000}) {
    const DrawSeed seed = SeedOf(n);
    FisherYates whole(seed, Iota(n));
    whole.Step(SIZE_MAX);
    ASSERT_EQ(whole.done(), n);
    uint64_t mix = n;
    for (size_t chunk :
         {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, n - 1, n, size_t{0}}) {
      FisherYates draw(seed, Iota(n));
      std::vector<uint32_t> published;
      for (int calls = 0; draw.done() < n; ++calls) {
        ASSERT_LT(calls, 100'000) << "no progress";
        mix = mix * 6364136223846793005ULL + 1442695040888963407ULL;
        const size_t steps =
            chunk != 0 ? chunk : static_cast<size_t>(mix >> 33) % 50;  // 0: random chunks
        const size_t before = draw.done();
        const size_t finalised = draw.Step(steps);
        EXPECT_EQ(draw.done(), before + finalised);
        EXPECT_LE(finalised, steps + 1);
        // What a caller would publish now: the newly final positions.
        published.insert(published.end(), draw.order().begin() + before,
                         draw.order().begin() + draw.done());
      }
      EXPECT_EQ(draw.order(), whole.order()) << n << " in chunks of " << chunk;
      EXPECT_EQ(published, whole.order()) << "a published position changed later";
      EXPECT_EQ(draw.Step(5), 0u);
    }
  }
}

std::string Saved(const FisherYates& draw) {
  std::string bytes;
  ByteWriter out(bytes);
  draw.Save(out);
  return bytes;
}

// A draw saved at any point and restored continues exactly as the original, and the restored
// one saves the same bytes; a draw is read from the middle of a larger snapshot.
TEST(FisherYatesTest, SaveAndRestoreMidDrawContinuesIdentically) {
  constexpr size_t kN = 3'000;
  const DrawSeed seed = SeedOf(99);
  FisherYates whole(seed, Iota(kN));
  whole.Step(SIZE_MAX);
  for (size_t at : {size_t{0}, size_t{1}, size_t{5}, size_t{16}, size_t{1'000}, kN - 2, kN - 1}) {
    FisherYates draw(seed, Iota(kN));
    draw.Step(at);
    std::string bytes = "head";
    ByteWriter out(bytes);
    draw.Save(out);
    out.Put<uint32_t>(0xfeedbeef);
    ByteReader in(bytes);
    in.Get<uint32_t>();
    std::optional<FisherYates> restored = FisherYates::Restore(in);
    ASSERT_TRUE(restored.has_value()) << at;
    EXPECT_EQ(in.Get<uint32_t>(), 0xfeedbeefu);
    EXPECT_TRUE(in.done());
    EXPECT_EQ(restored->done(), draw.done());
    EXPECT_EQ(restored->order(), draw.order());
    EXPECT_EQ(Saved(*restored), Saved(draw));
    FisherYates moved = std::move(*restored);
    moved.Step(SIZE_MAX);
    EXPECT_EQ(moved.order(), whole.order()) << "restored after " << at << " steps";
  }
  FisherYates empty(seed, {});
  std::string bytes = Saved(empty);
  ByteReader in(bytes);
  std::optional<FisherYates> restored = FisherYates::Restore(in);
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(restored->size(), 0u);
  EXPECT_EQ(restored->done(), 0u);
}

// Damaged bytes: every truncation and every impossible field answer nullopt and leave the
// reader failed; a flipped bit elsewhere (seed, order values) is still a draw that completes.
TEST(FisherYatesTest, RestoreOfDamagedBytesAnswersNullopt) {
  FisherYates draw(SeedOf(3), Iota(40));
  draw.Step(12);
  const std::string bytes = Saved(draw);
  for (size_t len = 0; len < bytes.size(); ++len) {
    ByteReader in(std::string_view(bytes).substr(0, len));
    EXPECT_FALSE(FisherYates::Restore(in).has_value()) << len;
    EXPECT_TRUE(in.failed());
  }
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      ByteReader in(damaged);
      std::optional<FisherYates> restored = FisherYates::Restore(in);
      if (restored) {
        EXPECT_LE(restored->done(), restored->size());
        restored->Step(SIZE_MAX);
        EXPECT_EQ(restored->done(), restored->size());
      } else {
        EXPECT_TRUE(in.failed());
      }
    }
  }

  // Field by field: seed (32 bytes), words_used (u64 at 32), steps (u64 at 40), count (u64 at
  // 48), values. The draw above read one word per step (no bound up to 40 rejected a word).
  uint64_t words_used = 0;
  std::memcpy(&words_used, bytes.data() + 32, sizeof(words_used));
  ASSERT_EQ(words_used, 12u);
  auto restores = [&](std::vector<std::pair<size_t, uint64_t>> fields) {
    std::string damaged = bytes;
    for (auto [offset, value] : fields) std::memcpy(damaged.data() + offset, &value, sizeof(value));
    ByteReader in(damaged);
    std::optional<FisherYates> restored = FisherYates::Restore(in);
    EXPECT_EQ(restored.has_value(), !in.failed());
    return restored.has_value();
  };
  EXPECT_TRUE(restores({}));
  EXPECT_TRUE(restores({{32, 1'000}}));                     // rejections happened: possible
  EXPECT_FALSE(restores({{32, 11}}));                       // fewer words than steps
  EXPECT_FALSE(restores({{32, (uint64_t{1} << 36) + 1}}));  // past any draw
  EXPECT_TRUE(restores({{32, 39}, {40, 39}}));              // n - 1 steps: complete
  EXPECT_FALSE(restores({{32, 40}, {40, 40}}));             // more steps than a draw of 40 has
  EXPECT_FALSE(restores({{48, 41}}));                       // more values than the bytes hold
  EXPECT_FALSE(restores({{48, uint64_t{1} << 40}}));        // a count that would allocate terabytes
  EXPECT_FALSE(restores({{48, UINT64_MAX}}));
}

// Uniformity of the whole permutation: n = 4 has 24 orders; 120,000 draws (5,000 expected per
// order), seeds 0 .. 119,999. Pearson's chi-square with 23 degrees of freedom against its
// critical value at p = 1e-6 (support/chi_square.h, Wilson-Hilferty, whose error makes the
// true tail smaller still): a uniform shuffle fails this with probability below 1e-6, i.e.
// under once in a million runs, far below the 1 in 10,000 allowed. The seeds are fixed, so
// the outcome is the same on every run: a pass is not luck that may change.
TEST(FisherYatesTest, PermutationsOfFourAreUniform) {
  constexpr int64_t kDraws = 120'000;
  std::vector<int64_t> counts(24);
  for (int64_t d = 0; d < kDraws; ++d) {
    FisherYates draw(SeedOf(static_cast<uint64_t>(d)), Iota(4));
    draw.Step(3);
    const std::vector<uint32_t>& o = draw.order();
    // The order's index among the 24 (Lehmer code).
    int index = 0;
    for (int i = 0; i < 4; ++i) {
      int smaller_after = 0;
      for (int j = i + 1; j < 4; ++j) smaller_after += o[j] < o[i] ? 1 : 0;
      index = index * (4 - i) + smaller_after;
    }
    ++counts[index];
  }
  const double chi = testing::ChiSquare(counts, kDraws / 24.0);
  EXPECT_LT(chi, testing::ChiSquareCritical(1e-6, 23));
  EXPECT_GT(*std::min_element(counts.begin(), counts.end()), 0) << "an order never drawn";
}

// Uniformity of positions: n = 10, 100,000 draws (seeds 10^6 .. 10^6 + 99,999); how often
// element e lands at position p, 10,000 expected in each of the 100 cells. The cells of a
// random permutation are not a plain multinomial: row and column sums are fixed, and each
// draw adds a permutation matrix, whose covariance is n/(n-1) times that of a contingency
// table's. So (n-1)/n * Pearson's statistic is chi-square with (n-1)^2 = 81 degrees of
// freedom, tested at p = 1e-6 as above (false failure under once in a million runs; fixed
// seeds, the same outcome every run).
TEST(FisherYatesTest, EveryElementLandsAtEveryPositionEquallyOften) {
  constexpr size_t kN = 10;
  constexpr int64_t kDraws = 100'000;
  std::vector<int64_t> cells(kN * kN);
  for (int64_t d = 0; d < kDraws; ++d) {
    FisherYates draw(SeedOf(1'000'000 + static_cast<uint64_t>(d)), Iota(kN));
    draw.Step(kN);
    for (size_t p = 0; p < kN; ++p) ++cells[draw.order()[p] * kN + p];
  }
  const double chi = testing::ChiSquare(cells, static_cast<double>(kDraws) / kN) * (kN - 1) / kN;
  EXPECT_LT(chi, testing::ChiSquareCritical(1e-6, (kN - 1) * (kN - 1)));
}

}  // namespace
}  // namespace anteroom::core
