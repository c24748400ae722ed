// Unit tests of core::Queue's job state: Lookup, results kept at ack, progress and logs, and the
// retention of finished jobs (KeepFinished), with explicit millisecond times.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/hmac.h"
#include "core/queue.h"

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

class QueueJobStateTest : public ::testing::Test {
 protected:
  QueueJobStateTest() : key_(std::string(32, 'k')), q_("q", key_, kT0, 7) {}

  JobId Push(std::string payload, std::optional<std::string> dedupe = std::nullopt) {
    JobSpec spec;
    spec.payload = std::move(payload);
    spec.dedupe_key = std::move(dedupe);
    return q_.Push({spec}, now_)[0].id;
  }
  Delivery Take() {
    std::vector<Delivery> d = q_.Fetch("w", 1, 30'000, now_);
    EXPECT_EQ(d.size(), 1u);
    return d.empty() ? Delivery{} : d[0];
  }
  void Keep(int64_t count, int64_t age_ms) {
    q_.Configure(QueueSettings{{}, {.count = count, .age_ms = age_ms}}, now_);
  }
  LeaseRef Ref(const Delivery& d) { return *q_.ParseLease(d.lease); }

  Hmac key_;
  Queue q_;
  int64_t now_ = kT0;
};

TEST_F(QueueJobStateTest, AFinishedJobGoesExactlyAtItsAge) {
  Keep(10, 1'000);
  JobId id = Push("a");
  ASSERT_EQ(q_.Ack(Take().lease, now_, "1"), LeaseOutcome::kOk);
  EXPECT_TRUE(q_.Lookup(id, now_ + 999).has_value());
  EXPECT_FALSE(q_.Lookup(id, now_ + 1'000).has_value());
}

TEST_F(QueueJobStateTest, ACountLoweredDropsTheOldestAtOnce) {
  std::vector<JobId> ids;
  for (int k = 0; k < 5; ++k) ids.push_back(Push("j"));
  for (int k = 0; k < 5; ++k) ASSERT_EQ(q_.Ack(Take().lease, now_), LeaseOutcome::kOk);
  Keep(2, 60'000);
  for (int k = 0; k < 3; ++k) EXPECT_FALSE(q_.Lookup(ids[k], now_).has_value()) << k;
  EXPECT_TRUE(q_.Lookup(ids[3], now_).has_value());
  EXPECT_TRUE(q_.Lookup(ids[4], now_).has_value());
}

TEST_F(QueueJobStateTest, AFinishedJobFreesItsDedupeKey) {
  JobId first = Push("a", "key");
  EXPECT_EQ(Push("again", "key"), first);  // a hit while it is pending
  ASSERT_EQ(q_.Ack(Take().lease, now_), LeaseOutcome::kOk);
  JobId second = Push("b", "key");
  EXPECT_NE(second, first);
  EXPECT_EQ(q_.Lookup(first, now_)->state, JobState::kAcked);
  EXPECT_EQ(q_.Lookup(second, now_)->state, JobState::kReady);
  // Cancelled, the same.
  ASSERT_EQ(q_.Cancel(second, now_), CancelOutcome::kCancelled);
  EXPECT_NE(Push("c", "key"), second);
}

TEST_F(QueueJobStateTest, GroupAndPriorityAreShown) {
  JobSpec spec;
  spec.payload = "g";
  spec.group = "tenant-1";
  spec.priority = 3;
  JobId id = q_.Push({spec}, now_)[0].id;
  std::optional<JobView> v = q_.Lookup(id, now_);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->group, "tenant-1");
  EXPECT_EQ(v->priority, 3);
  ASSERT_EQ(q_.Ack(Take().lease, now_), LeaseOutcome::kOk);
  v = q_.Lookup(id, now_);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->group, "tenant-1");  // kept by name: the group itself may be gone
  EXPECT_EQ(v->state, JobState::kAcked);
}

TEST_F(QueueJobStateTest, AQueueThatKeepsOtherThanTheDefaultIsNotEmpty) {
  Queue fresh("f", key_, kT0, 1);
  EXPECT_TRUE(fresh.HoldsNothing());
  fresh.Configure(QueueSettings{{}, {.count = 5, .age_ms = 1'000}}, kT0);
  EXPECT_FALSE(fresh.HoldsNothing());
}

TEST_F(QueueJobStateTest, ALogLineIsCutAtACharacterBoundary) {
  Push("l");
  Delivery d = Take();
  std::string line(kMaxLogLineBytes - 30, 'a');
  for (int k = 0; k < 100; ++k) line += "\xc3\xa9";  // é, two bytes each
  ASSERT_EQ(q_.AppendLog(Ref(d), {line}, now_), LeaseOutcome::kOk);
  std::optional<JobView> v = q_.Lookup(d.id, now_);
  ASSERT_TRUE(v && v->log.size() == 1);
  const std::string& kept = v->log[0].text;
  EXPECT_LE(kept.size(), kMaxLogLineBytes);
  EXPECT_NE(kept.find("[truncated: "), std::string::npos);
  // No character is cut in two: what precedes the marker ends on a whole character.
  size_t marker = kept.find(" [truncated: ");
  EXPECT_NE(static_cast<unsigned char>(kept[marker - 1]), 0xc3);
}

TEST_F(QueueJobStateTest, ANackedJobKeepsItsNotesAndARequeuedOneToo) {
  JobSpec spec;
  spec.payload = "n";
  spec.max_attempts = 1;
  JobId id = q_.Push({spec}, now_)[0].id;
  Delivery d = Take();
  ASSERT_EQ(q_.SetProgress(Ref(d), "50", now_), LeaseOutcome::kOk);
  ASSERT_EQ(q_.AppendLog(Ref(d), {"trying"}, now_), LeaseOutcome::kOk);
  ASSERT_EQ(q_.Nack(d.lease, std::nullopt, "failed", now_), LeaseOutcome::kOk);
  std::optional<JobView> dead = q_.Lookup(id, now_);
  ASSERT_TRUE(dead);
  EXPECT_EQ(dead->state, JobState::kDead);
  EXPECT_EQ(dead->progress, std::optional<std::string>("50"));
  ASSERT_EQ(dead->log.size(), 1u);
  ASSERT_EQ(q_.RequeueDead(std::nullopt, now_), 1u);
  std::optional<JobView> again = q_.Lookup(id, now_);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->state, JobState::kReady);
  EXPECT_TRUE(again->history.empty());
  EXPECT_EQ(again->log.size(), 1u);  // what the worker wrote is still worth reading
}

}  // namespace
}  // namespace anteroom::core
