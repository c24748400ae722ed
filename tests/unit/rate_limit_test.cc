// Gcra: the rate limit of a key, with a fake clock (times are arguments). The model test holds
// it to the bound the queue's limits promise (at most burst + limit * W / period_ms takes in any
// window of W ms) and to a deliberately simple reference: the same algorithm in one 128-bit number
// of limit-ths of a ms, where the engine splits it into ms and a remainder.

#include "core/rate_limit.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "common/bytes.h"

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

RateLimit Limit(int64_t limit, int64_t period_ms, int64_t burst) {
  return RateLimit{.limit = limit, .period_ms = period_ms, .burst = burst};
}

// Takes at `now` while allowed: how many.
int TakeAll(Gcra& g, const RateLimit& l, int64_t now) {
  int n = 0;
  while (g.Allows(l, now) && n < 1'000'000) {
    g.Take(l, now);
    ++n;
  }
  return n;
}

TEST(RateLimitTest, BoundsAreChecked) {
  EXPECT_TRUE(Limit(1, 1, 1).Valid());
  EXPECT_TRUE(Limit(RateLimit::kMaxLimit, RateLimit::kMaxPeriodMs, RateLimit::kMaxBurst).Valid());
  EXPECT_FALSE(Limit(0, 1000, 1).Valid());
  EXPECT_FALSE(Limit(RateLimit::kMaxLimit + 1, 1000, 1).Valid());
  EXPECT_FALSE(Limit(1, 0, 1).Valid());
  EXPECT_FALSE(Limit(1, RateLimit::kMaxPeriodMs + 1, 1).Valid());
  EXPECT_FALSE(Limit(1, 1000, 0).Valid());
  EXPECT_FALSE(Limit(1, 1000, RateLimit::kMaxBurst + 1).Valid());
}

TEST(RateLimitTest, ThreeASecondAreSpacedByAThirdOfASecondRoundedUp) {
  RateLimit l = Limit(3, 1000, 1);
  Gcra g;
  EXPECT_EQ(TakeAll(g, l, kT0), 1);
  EXPECT_EQ(g.AllowedAtMs(l, kT0), kT0 + 334);  // 333 1/3 ms on
  EXPECT_FALSE(g.Allows(l, kT0 + 333));
  EXPECT_EQ(TakeAll(g, l, kT0 + 334), 1);
  // Taken 2/3 ms after it was due: the next is an interval after the take, not after the due
  // time (with burst 1 nothing may come early), 667 1/3 -> 668.
  EXPECT_EQ(g.AllowedAtMs(l, kT0 + 334), kT0 + 668);
}

TEST(RateLimitTest, TheRemainderIsKeptWhileTheKeyIsInDebt) {
  RateLimit l = Limit(3, 1000, 3);
  Gcra g;
  EXPECT_EQ(TakeAll(g, l, kT0), 3);  // TAT kT0 + 1000
  // Each further take adds 333 1/3 ms to TAT exactly: due at 1000 - 666 2/3 = 333 1/3 -> 334,
  // then 666 2/3 -> 667, then exactly 1000.
  EXPECT_EQ(g.AllowedAtMs(l, kT0), kT0 + 334);
  g.Take(l, kT0 + 334);
  EXPECT_EQ(g.AllowedAtMs(l, kT0 + 334), kT0 + 667);
  g.Take(l, kT0 + 667);
  EXPECT_EQ(g.AllowedAtMs(l, kT0 + 667), kT0 + 1000);
}

TEST(RateLimitTest, ABurstIsTakenAtOnceAfterAQuietSpellAndThenThePaceHolds) {
  RateLimit l = Limit(5, 1000, 5);
  Gcra g;
  EXPECT_EQ(TakeAll(g, l, kT0), 5);
  EXPECT_EQ(g.AllowedAtMs(l, kT0), kT0 + 200);
  EXPECT_EQ(TakeAll(g, l, kT0 + 200), 1);
  EXPECT_EQ(TakeAll(g, l, kT0 + 399), 0);
  EXPECT_EQ(TakeAll(g, l, kT0 + 400), 1);
  // A quiet second gives the whole burst back, and no more.
  EXPECT_EQ(TakeAll(g, l, kT0 + 5'000), 5);
}

TEST(RateLimitTest, AKeyWithNothingOwedIsIdleAndAnswersAsAFreshOne) {
  RateLimit l = Limit(2, 1000, 1);
  Gcra g;
  EXPECT_TRUE(g.Idle(kT0));
  g.Take(l, kT0);
  EXPECT_FALSE(g.Idle(kT0 + 499));
  EXPECT_TRUE(g.Idle(kT0 + 500));
  Gcra fresh;
  for (int64_t t : {kT0 + 500, kT0 + 501, kT0 + 10'000}) {
    EXPECT_EQ(g.Allows(l, t), fresh.Allows(l, t));
    EXPECT_EQ(g.AllowedAtMs(l, t), fresh.AllowedAtMs(l, t));
  }
}

TEST(RateLimitTest, AllowedAtIsTheFirstMillisecondThatAllows) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    RateLimit l =
        Limit(1 + static_cast<int64_t>(rng() % 40), 1 + static_cast<int64_t>(rng() % 3000),
              1 + static_cast<int64_t>(rng() % 6));
    Gcra g;
    int64_t now = kT0;
    for (int i = 0; i < 30; ++i) {
      now += static_cast<int64_t>(rng() % 200);
      TakeAll(g, l, now);
      int64_t at = g.AllowedAtMs(l, now);
      ASSERT_GT(at, now);
      ASSERT_TRUE(g.Allows(l, at));
      ASSERT_FALSE(g.Allows(l, at - 1));
    }
  }
}

TEST(RateLimitTest, ANewLimitNeverAllowsMoreThanTheOldStateOwed) {
  RateLimit from = Limit(3, 1000, 1);
  RateLimit to = Limit(7, 1000, 1);
  Gcra g;
  g.Take(from, kT0);  // TAT kT0 + 333 1/3
  g.Rescale(from, to);
  EXPECT_EQ(g.tat(), (GcraTime{kT0 + 333, 3}));  // 1/3 -> 3/7, rounded up
  g.Rescale(to, Limit(2, 1000, 1));
  EXPECT_EQ(g.tat(), (GcraTime{kT0 + 333, 1}));  // 3/7 -> 1/2
  g.Rescale(Limit(2, 1000, 1), Limit(1, 1000, 1));
  EXPECT_EQ(g.tat(), (GcraTime{kT0 + 334, 0}));  // 1/2 -> the next whole ms
}

TEST(RateLimitTest, StateSurvivesSaveAndLoad) {
  RateLimit l = Limit(3, 1000, 2);
  Gcra g;
  TakeAll(g, l, kT0);
  std::string bytes;
  ByteWriter out(bytes);
  g.Save(out);
  ByteReader in(bytes);
  Gcra back;
  ASSERT_TRUE(back.Load(in));
  EXPECT_EQ(back.tat(), g.tat());
  ByteReader cut(std::string_view(bytes).substr(0, 5));
  EXPECT_FALSE(Gcra().Load(cut));
}

// The reference: GCRA in one number, limit-ths of a ms (times * limit fit in 128 bits).
struct ReferenceGcra {
  __int128 tat = 0;
  bool Allows(const RateLimit& l, int64_t now) const {
    return static_cast<__int128>(now) * l.limit >=
           tat - static_cast<__int128>(l.burst - 1) * l.period_ms;
  }
  void Take(const RateLimit& l, int64_t now) {
    __int128 n = static_cast<__int128>(now) * l.limit;
    tat = (tat > n ? tat : n) + l.period_ms;
  }
};

// Random limits (with the extremes among them) and random demand: every answer as the
// reference's, and in every window [t_i, t_j] of takes, j - i + 1 <= burst + limit * W / period.
TEST(RateLimitModelTest, MatchesTheReferenceAndNeverExceedsTheBound) {
  std::mt19937_64 rng(2026);
  for (int round = 0; round < 400; ++round) {
    RateLimit l;
    switch (round % 4) {
      case 0:
        l = Limit(1 + static_cast<int64_t>(rng() % 10), 1 + static_cast<int64_t>(rng() % 2000),
                  1 + static_cast<int64_t>(rng() % 4));
        break;
      case 1:
        l = Limit(1 + static_cast<int64_t>(rng() % 1000), 1 + static_cast<int64_t>(rng() % 100),
                  1 + static_cast<int64_t>(rng() % 50));
        break;
      case 2:
        l = Limit(RateLimit::kMaxLimit - static_cast<int64_t>(rng() % 7), RateLimit::kMaxPeriodMs,
                  RateLimit::kMaxBurst);
        break;
      default:
        l = Limit(1 + static_cast<int64_t>(rng() % 97), 1 + static_cast<int64_t>(rng() % 997),
                  1 + static_cast<int64_t>(rng() % 13));
    }
    ASSERT_TRUE(l.Valid());
    Gcra g;
    ReferenceGcra ref;
    std::vector<int64_t> taken;
    int64_t now = kT0 + static_cast<int64_t>(rng() % 1000);
    for (int step = 0; step < 300 && taken.size() < 2'000; ++step) {
      now += static_cast<int64_t>(rng() % 3 == 0 ? rng() % 5 : rng() % 400);
      int want = static_cast<int>(rng() % 4);
      for (int k = 0; k < want; ++k) {
        bool allows = g.Allows(l, now);
        ASSERT_EQ(allows, ref.Allows(l, now)) << "round " << round << " step " << step;
        if (!allows) break;
        g.Take(l, now);
        ref.Take(l, now);
        taken.push_back(now);
      }
    }
    for (size_t i = 0; i < taken.size(); ++i) {
      for (size_t j = i; j < taken.size() && j < i + 400; ++j) {
        __int128 n = static_cast<__int128>(j - i + 1);
        __int128 w = taken[j] - taken[i];
        ASSERT_LE((n - l.burst) * l.period_ms, w * l.limit)
            << "round " << round << ": " << (j - i + 1) << " takes in " << (taken[j] - taken[i])
            << " ms with limit " << l.limit << "/" << l.period_ms << " burst " << l.burst;
      }
    }
  }
}

// Not stricter than it says: a key asked for all the time gets limit per period (less one
// interval's rounding) after its burst.
TEST(RateLimitModelTest, ConstantDemandGetsTheFullRate) {
  for (RateLimit l : {Limit(3, 1000, 1), Limit(7, 60'000, 2), Limit(1000, 1000, 10),
                      Limit(999'999, 86'400'000, 3)}) {
    Gcra g;
    int64_t takes = 0;
    int64_t span = 10 * l.period_ms;
    for (int64_t now = kT0; now <= kT0 + span; now = g.AllowedAtMs(l, now)) {
      takes += TakeAll(g, l, now);
      if (g.AllowedAtMs(l, now) > kT0 + span) break;
    }
    EXPECT_GE(takes, l.burst + 10 * l.limit - 1) << l.limit << "/" << l.period_ms;
    EXPECT_LE(takes, l.burst + 10 * l.limit) << l.limit << "/" << l.period_ms;
  }
}

}  // namespace
}  // namespace anteroom::core
