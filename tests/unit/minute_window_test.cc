// MinuteWindow: counts over the current whole second and the 59 before it.

#include "core/minute_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;  // a whole second

TEST(MinuteWindowTest, EmptyCountsZeroAndIsOpenAtOnce) {
  MinuteWindow w;
  EXPECT_EQ(w.Count(kT0), 0);
  EXPECT_EQ(w.NextBelow(kT0 + 123, 1), kT0 + 123);
}

TEST(MinuteWindowTest, EventLeavesSixtySecondsAfterItsSecondBegan) {
  MinuteWindow w;
  w.Add(kT0 + 999);  // second kT0/1000
  EXPECT_EQ(w.Count(kT0 + 999), 1);
  EXPECT_EQ(w.Count(kT0 + 59'999), 1);
  EXPECT_EQ(w.Count(kT0 + 60'000), 0);
  w.Add(kT0 + 60'000);
  EXPECT_EQ(w.Count(kT0 + 60'000), 1);
  EXPECT_EQ(w.Count(kT0 + 119'999), 1);
  EXPECT_EQ(w.Count(kT0 + 120'000), 0);
}

TEST(MinuteWindowTest, CountsEverySecondOfTheWindow) {
  MinuteWindow w;
  for (int64_t s = 0; s < 60; ++s) w.Add(kT0 + s * 1000 + 500);
  EXPECT_EQ(w.Count(kT0 + 59'500), 60);
  EXPECT_EQ(w.Count(kT0 + 60'000), 59);
  EXPECT_EQ(w.Count(kT0 + 90'000), 29);
  EXPECT_EQ(w.Count(kT0 + 119'000), 0);
}

TEST(MinuteWindowTest, ReusedBucketForgetsTheOldSecond) {
  MinuteWindow w;
  w.Add(kT0);
  w.Add(kT0);
  w.Add(kT0 + 60'000);  // the same bucket, one minute later
  EXPECT_EQ(w.Count(kT0 + 60'000), 1);
  w.Add(kT0 + 10 * 60'000);  // long after
  EXPECT_EQ(w.Count(kT0 + 10 * 60'000), 1);
}

TEST(MinuteWindowTest, NextBelowIsWhenTheOldestSecondsLeave) {
  MinuteWindow w;
  for (int i = 0; i < 3; ++i) w.Add(kT0 + 500);
  for (int i = 0; i < 2; ++i) w.Add(kT0 + 10'200);
  const int64_t now = kT0 + 20'000;
  EXPECT_EQ(w.Count(now), 5);
  EXPECT_EQ(w.NextBelow(now, 6), now);
  EXPECT_EQ(w.NextBelow(now, 5), kT0 + 60'000);  // the 3 of second 0 leave
  EXPECT_EQ(w.NextBelow(now, 3), kT0 + 60'000);
  EXPECT_EQ(w.NextBelow(now, 2), kT0 + 70'000);  // then the 2 of second 10
  EXPECT_EQ(w.NextBelow(now, 1), kT0 + 70'000);
}

TEST(MinuteWindowTest, NegativeTimesUseFloorSeconds) {
  MinuteWindow w;
  w.Add(-1);  // second -1
  EXPECT_EQ(w.Count(-1), 1);
  EXPECT_EQ(w.Count(58'999), 1);
  EXPECT_EQ(w.Count(59'000), 0);
}

// Reference: a plain list of event times, counted by whole seconds.
int64_t RefCount(const std::vector<int64_t>& events, int64_t now) {
  int64_t sec = now / 1000;
  return std::count_if(events.begin(), events.end(),
                       [&](int64_t t) { return t / 1000 > sec - 60 && t / 1000 <= sec; });
}

TEST(MinuteWindowTest, MatchesAReferenceUnderRandomUse) {
  std::mt19937 rng(5);
  MinuteWindow w;
  std::vector<int64_t> events;
  int64_t now = kT0;
  for (int step = 0; step < 20'000; ++step) {
    int op = static_cast<int>(rng() % 10);
    if (op < 5) {
      w.Add(now);
      events.push_back(now);
    } else if (op < 9) {
      now += rng() % 1'500;
    } else {
      now += rng() % 70'000;
    }
    // Older events can never count again (times only go forward).
    events.erase(events.begin(), std::lower_bound(events.begin(), events.end(), now - 61'000));
    ASSERT_EQ(w.Count(now), RefCount(events, now)) << "step " << step;
    int64_t limit = 1 + static_cast<int64_t>(rng() % 40);
    int64_t next = w.NextBelow(now, limit);
    ASSERT_GE(next, now);
    ASSERT_LT(RefCount(events, next), limit) << "step " << step;
    if (next > now) {  // the earliest such time: one ms before, still at the limit
      ASSERT_GE(RefCount(events, next - 1), limit) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace anteroom::core
