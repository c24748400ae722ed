// DeadlineHeap: random Set/Remove against a std::multiset reference.

#include "core/deadline_heap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <utility>

namespace anteroom::core {
namespace {

TEST(DeadlineHeapTest, EmptyAndSingle) {
  DeadlineHeap h;
  EXPECT_TRUE(h.empty());
  EXPECT_FALSE(h.Contains(0));
  EXPECT_FALSE(h.Contains(1'000));
  h.Set(3, 50);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.Top().member, 3u);
  EXPECT_EQ(h.KeyOf(3), 50u);
  h.Set(3, 10);  // move, not a second entry
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.Top().key, 10u);
  h.Remove(3);
  EXPECT_TRUE(h.empty());
  EXPECT_FALSE(h.Contains(3));
}

TEST(DeadlineHeapTest, RaiseAndLowerReorder) {
  DeadlineHeap h;
  for (uint32_t m = 0; m < 10; ++m) h.Set(m, 100 + m);
  EXPECT_EQ(h.Top().member, 0u);
  h.Set(0, 1'000);  // raised: no longer first
  EXPECT_EQ(h.Top().member, 1u);
  h.Set(9, 5);  // lowered: now first
  EXPECT_EQ(h.Top().member, 9u);
  EXPECT_EQ(h.Top().key, 5u);
  h.Remove(9);
  EXPECT_EQ(h.Top().member, 1u);
}

TEST(DeadlineHeapTest, MatchesMultisetUnderRandomSetAndRemove) {
  for (uint32_t seed : {1u, 17u, 123u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    DeadlineHeap h;
    std::multiset<uint64_t> keys;
    std::map<uint32_t, uint64_t> key_of;
    for (int step = 0; step < 50'000; ++step) {
      uint32_t m = rng() % 300;
      uint64_t key = rng() % 100;  // small range: many equal and adjacent keys
      if (rng() % 3 != 0) {
        if (auto it = key_of.find(m); it != key_of.end()) keys.erase(keys.find(it->second));
        h.Set(m, key);
        key_of[m] = key;
        keys.insert(key);
      } else if (key_of.count(m) != 0) {
        h.Remove(m);
        keys.erase(keys.find(key_of[m]));
        key_of.erase(m);
      }
      ASSERT_EQ(h.size(), keys.size());
      ASSERT_EQ(h.Contains(m), key_of.count(m) != 0);
      if (key_of.count(m) != 0) {
        ASSERT_EQ(h.KeyOf(m), key_of[m]);
      }
      if (!keys.empty()) {
        ASSERT_EQ(h.Top().key, *keys.begin()) << "step " << step;
        ASSERT_EQ(key_of.at(h.Top().member), h.Top().key);
      }
    }
    // Draining gives every key in order, each member once.
    uint64_t last = 0;
    while (!h.empty()) {
      DeadlineHeap::Entry top = h.Top();
      ASSERT_GE(top.key, last);
      ASSERT_EQ(key_of.at(top.member), top.key);
      key_of.erase(top.member);
      last = top.key;
      h.Remove(top.member);
    }
    EXPECT_TRUE(key_of.empty());
  }
}

}  // namespace
}  // namespace anteroom::core
