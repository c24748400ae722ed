// The room wait histogram (anteroom_room_wait_seconds) on every backend: each admission is
// counted once, by the process whose call made it, with the time from joining the line (or
// being sent back to it by the brake) to admission, by the backend's clock; one let in at once
// waited 0. Each test is its own process under ctest, so the histogram starts empty; the tests
// still read it as a difference.

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "backend_fixture.h"
#include "common/histogram.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::RoomPatch;
using core::SessionStatus;
using core::SessionView;

struct Counted {
  uint64_t count = 0;
  double sum_seconds = 0;
  uint64_t within_100ms = 0;  // the first bucket
};

Counted ReadWaits() {
  Histogram::Totals t = ProcessEngineMetrics().room_wait.Read();
  return {t.count, t.sum_seconds, t.cumulative.at(0)};
}

class RoomWaitConformanceTest : public conformance::BackendTest {
 protected:
  void SetUp() override {
    BackendTest::SetUp();
    start_ = ReadWaits();
  }
  // What was counted since the test began.
  Counted Waits() const {
    Counted now = ReadWaits();
    return {now.count - start_.count, now.sum_seconds - start_.sum_seconds,
            now.within_100ms - start_.within_100ms};
  }

  void Reconfigure(const std::string& room, RoomPatch p) {
    auto info = Await<core::RoomInfo>([&](auto done) { b().PutRoom(room, p, done); });
    ASSERT_TRUE(info.ok()) << info.message();
  }
  SessionStatus Check(const std::string& room, const std::string& session) {
    auto v = Await<SessionView>([&](auto done) { b().Check(room, session, done); });
    EXPECT_TRUE(v.ok()) << v.message();
    return v.ok() ? v->status : SessionStatus::kGone;
  }
  void LeaveForGood(const std::string& room, const std::string& session) {
    auto v = Await<SessionView>([&](auto done) { b().Leave(room, session, true, done); });
    ASSERT_TRUE(v.ok()) << v.message();
  }

  Counted start_;
};

TEST_P(RoomWaitConformanceTest, EachAdmissionCountsItsWaitOnceFromJoiningTheLine) {
  MakeRoom("r", 1);
  EXPECT_EQ(Check("r", "a"), SessionStatus::kActive);  // let in at once: waited 0
  EXPECT_EQ(Check("r", "b"), SessionStatus::kWaiting);
  EXPECT_EQ(Check("r", "c"), SessionStatus::kWaiting);
  Counted first = Waits();
  EXPECT_EQ(first.count, 1u);
  EXPECT_EQ(first.sum_seconds, 0);
  EXPECT_EQ(first.within_100ms, 1u);

  AdvanceTime(2'000);
  EXPECT_EQ(Check("r", "c"), SessionStatus::kWaiting);  // a check-in is no new wait
  LeaveForGood("r", "a");                               // b in, having waited 2 s
  AdvanceTime(3'000);
  LeaveForGood("r", "b");  // c in, having waited 5 s
  EXPECT_EQ(Check("r", "c"), SessionStatus::kActive);
  Counted all = Waits();
  EXPECT_EQ(all.count, 3u);
  EXPECT_DOUBLE_EQ(all.sum_seconds, 7.0);
  EXPECT_EQ(all.within_100ms, 1u);

  // Check-ins of the admitted and leaving count nothing more.
  AdvanceTime(1'000);
  EXPECT_EQ(Check("r", "c"), SessionStatus::kActive);
  LeaveForGood("r", "c");
  EXPECT_EQ(Waits().count, 3u);
}

TEST_P(RoomWaitConformanceTest, AHolderSentBackByTheBrakeWaitsFromThen) {
  MakeRoom("r", 1);
  EXPECT_EQ(Check("r", "a"), SessionStatus::kActive);  // 0
  AdvanceTime(10'000);
  RoomPatch brake;
  brake.queueing_method = core::QueueingMethod::kQueueAll;
  brake.include_active = true;
  Reconfigure("r", brake);
  EXPECT_EQ(Check("r", "a"), SessionStatus::kWaiting);
  AdvanceTime(4'000);
  EXPECT_EQ(Check("r", "a"), SessionStatus::kWaiting);
  RoomPatch go;
  go.queueing_method = core::QueueingMethod::kFifo;
  Reconfigure("r", go);  // a in again: 4 s since it was sent back, not 14 since it joined
  EXPECT_EQ(Check("r", "a"), SessionStatus::kActive);
  Counted all = Waits();
  EXPECT_EQ(all.count, 2u);
  EXPECT_DOUBLE_EQ(all.sum_seconds, 4.0);
}

TEST_P(RoomWaitConformanceTest, AWaitGoesOnAcrossARestart) {
  MakeRoom("r", 1);
  EXPECT_EQ(Check("r", "a"), SessionStatus::kActive);
  EXPECT_EQ(Check("r", "b"), SessionStatus::kWaiting);
  AdvanceTime(1'500);
  if (!harness_->Restart()) GTEST_SKIP() << GetParam().name << " keeps nothing across a restart";
  // The restarted backend replays (or reads) b's join; the replay itself counts nothing.
  EXPECT_EQ(Waits().count, 1u);
  AdvanceTime(1'000);
  EXPECT_EQ(Check("r", "b"), SessionStatus::kWaiting);
  LeaveForGood("r", "a");
  Counted all = Waits();
  EXPECT_EQ(all.count, 2u);
  EXPECT_DOUBLE_EQ(all.sum_seconds, 2.5);
}

INSTANTIATE_TEST_SUITE_P(Backends, RoomWaitConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
