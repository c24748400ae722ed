// The embedded backend's lifecycle events (store/memory/event_ring.h) and their positions.
#include <gtest/gtest.h>

#include "store/lifecycle_event.h"
#include "store/memory/event_ring.h"

namespace anteroom::store {
namespace {

constexpr int64_t kT0 = 1'790'000'000'000;

std::vector<LifecycleEvent> Events(int n, const std::string& room = "r") {
  std::vector<LifecycleEvent> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)].type = "room.joined";
    out[static_cast<size_t>(i)].room = room;
    out[static_cast<size_t>(i)].seq = static_cast<uint64_t>(i + 1);
  }
  return out;
}

TEST(EventIdTest, ParsesWhatItWritesAndNothingElse) {
  EventId id{kT0, 7};
  EXPECT_EQ(id.ToString(), "1790000000000-7");
  EXPECT_EQ(EventId::Parse(id.ToString()), id);
  EXPECT_EQ(EventId::Parse("0-0"), (EventId{0, 0}));
  for (const char* bad :
       {"", "-", "1-", "-1", "1", "1-2-3", "+1-2", "1-+2", " 1-2", "1-2 ", "a-1", "1-a",
        "99999999999999999999-1", "1-99999999999999999999", "1--2", "0x1-2"}) {
    EXPECT_FALSE(EventId::Parse(bad).has_value()) << bad;
  }
  EXPECT_LT((EventId{1, 9}), (EventId{2, 1}));
  EXPECT_LT((EventId{2, 1}), (EventId{2, 2}));
}

TEST(EventRingTest, IdsAreOrderedWithinAMillisecondAndWhenTheClockStepsBack) {
  EventRing ring({}, kT0);
  ring.Append(Events(3), kT0 + 5);
  ring.Append(Events(2), kT0 + 3);  // the clock stepped back: the order holds
  ring.Append(Events(1), kT0 + 9);
  EventRead all = ring.ReadAfter(EventId{kT0, 0}, 100);
  ASSERT_EQ(all.events.size(), 6u);
  EXPECT_FALSE(all.reset);
  std::vector<std::string> ids;
  for (const auto& e : all.events) ids.push_back(e.id.ToString());
  EXPECT_EQ(ids,
            (std::vector<std::string>{"1790000000005-1", "1790000000005-2", "1790000000005-3",
                                      "1790000000005-4", "1790000000005-5", "1790000000009-1"}));
  EXPECT_EQ(all.last, all.events.back().id);
}

TEST(EventRingTest, ReadsResumeAfterAPositionInBatches) {
  EventRing ring({}, kT0);
  ring.Append(Events(10), kT0 + 1);
  EventRead first = ring.ReadAfter(EventId{kT0, 0}, 4);
  ASSERT_EQ(first.events.size(), 4u);
  EventRead second = ring.ReadAfter(first.last, 4);
  ASSERT_EQ(second.events.size(), 4u);
  EXPECT_EQ(second.events.front().seq, 5u);
  EventRead third = ring.ReadAfter(second.last, 4);
  ASSERT_EQ(third.events.size(), 2u);
  EventRead none = ring.ReadAfter(third.last, 4);
  EXPECT_TRUE(none.events.empty());
  EXPECT_FALSE(none.reset);
  EXPECT_EQ(none.last, third.last);
}

TEST(EventRingTest, WithoutAPositionAReaderStartsFromNow) {
  EventRing ring({}, kT0);
  ring.Append(Events(3), kT0 + 1);
  EventRead now = ring.ReadAfter(std::nullopt, 100);
  EXPECT_TRUE(now.events.empty());
  EXPECT_FALSE(now.reset);
  ring.Append(Events(1, "later"), kT0 + 2);
  EventRead next = ring.ReadAfter(now.last, 100);
  ASSERT_EQ(next.events.size(), 1u);
  EXPECT_EQ(next.events[0].room, "later");
}

// Kept: the last keep_ms, or keep_count events if that is more, never beyond max_count. A reader
// behind what is kept is told to reset, and goes on from the oldest kept.
TEST(EventRingTest, OldEventsGoAndAReaderBehindThemIsToldToReset) {
  EventRing ring({.keep_count = 5, .keep_ms = 1'000, .max_count = 8}, kT0);
  ring.Append(Events(6), kT0 + 1);
  EXPECT_EQ(ring.size(), 6u);  // within keep_ms: all kept, over keep_count
  ring.Append(Events(1), kT0 + 2'000);
  EXPECT_EQ(ring.size(), 5u);  // older than keep_ms: down to keep_count
  EventRead behind = ring.ReadAfter(EventId{kT0, 0}, 100);
  EXPECT_TRUE(behind.reset);
  ASSERT_EQ(behind.events.size(), 5u);
  EXPECT_EQ(behind.events.front().id, (EventId{kT0 + 1, 3}));
  // At the horizon itself: nothing after it is gone.
  EventRead at = ring.ReadAfter(EventId{kT0 + 1, 2}, 100);
  EXPECT_FALSE(at.reset);
  EXPECT_EQ(at.events.size(), 5u);
  ring.Append(Events(10), kT0 + 2'001);
  EXPECT_EQ(ring.size(), 8u);  // max_count holds even within keep_ms
}

TEST(EventRingTest, APositionFromBeforeTheStartOrNotOfThisOrderResets) {
  EventRing ring({}, kT0);
  ring.Append(Events(2), kT0 + 1);
  EventRead before = ring.ReadAfter(EventId{kT0 - 50, 4}, 100);  // a previous process's
  EXPECT_TRUE(before.reset);
  EXPECT_EQ(before.events.size(), 2u);
  EventRead future = ring.ReadAfter(EventId{kT0 + 60'000, 1}, 100);  // a clock ahead
  EXPECT_TRUE(future.reset);
  EXPECT_EQ(future.events.size(), 2u);
}

TEST(EventRingTest, WatchersRunAfterEachAppend) {
  EventRing ring({}, kT0);
  int calls = 0;
  ring.Watch([&] { ++calls; });
  ring.Append(Events(3), kT0 + 1);
  ring.Append({}, kT0 + 2);  // nothing added: nobody woken
  ring.Append(Events(1), kT0 + 3);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace anteroom::store
