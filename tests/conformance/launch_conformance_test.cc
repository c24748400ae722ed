// The launch-day conformance suite: scheduled events, the pre-queue and its draw, queueing
// methods, through store::Backend with the backend's own timer driving the draw (the embedded
// backend's timer, the Redis backend's sweeper). Every backend runs all of it.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "backend_fixture.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::EventSpec;
using core::QueueingMethod;
using core::RoomEvent;
using core::RoomPatch;
using core::SessionStatus;
using core::SessionView;

class LaunchConformanceTest : public conformance::BackendTest {
 protected:
  OpResult<core::RoomInfo> Put(const std::string& room, RoomPatch patch) {
    return Await<core::RoomInfo>([&](auto done) { b().PutRoom(room, patch, done); });
  }
  OpResult<SessionView> Check(const std::string& room, const std::string& session) {
    return Await<SessionView>([&](auto done) { b().Check(room, session, done); });
  }
  OpResult<RoomEvent> PutEvent(const std::string& room, const std::string& id, EventSpec spec) {
    return Await<RoomEvent>([&](auto done) { b().PutEvent(room, id, spec, done); });
  }
  OpResult<std::vector<RoomEvent>> Events(const std::string& room) {
    return Await<std::vector<RoomEvent>>([&](auto done) { b().ListEvents(room, done); });
  }
  OpResult<RoomEvent> DeleteEvent(const std::string& room, const std::string& id) {
    return Await<RoomEvent>([&](auto done) { b().DeleteEvent(room, id, done); });
  }
  std::vector<std::string> Line(const std::string& room) {
    auto v = Await<core::LineView>([&](auto done) { b().ReadLine(room, 0, done); });
    std::vector<std::string> ids;
    if (!v.ok()) return ids;
    for (size_t i = 0; i < v->line.size(); ++i) ids.emplace_back(v->line[i]);
    return ids;
  }
  void MakeRoom(const std::string& room, int64_t capacity) {
    RoomPatch p;
    p.capacity = capacity;
    p.grace_ms = 5'000;
    p.checkin_timeout_ms = 30'000;
    p.idle_timeout_ms = 300'000;
    auto info = Put(room, p);
    ASSERT_TRUE(info.ok()) << info.message();
  }
  EventSpec Drop(int64_t prequeue_in, int64_t starts_in, int64_t ends_in, bool shuffle) {
    EventSpec e;
    e.name = "drop";
    e.prequeue_at = NowMs() + prequeue_in;
    e.starts_at = NowMs() + starts_in;
    e.ends_at = NowMs() + ends_in;
    e.shuffle_at_start = shuffle;
    return e;
  }
  // Passes are not in the Redis scripts yet: there they answer kUnavailable.
  bool OnRedis() const { return GetParam().name.rfind("redis", 0) == 0; }
  bool Scheduled(const OpResult<RoomEvent>& put) {
    EXPECT_TRUE(put.ok()) << put.message();
    return put.ok();
  }
};

TEST_P(LaunchConformanceTest, ScheduleIsKeptListedAndCancelled) {
  MakeRoom("r", 1);
  if (!Scheduled(PutEvent("r", "drop", Drop(10'000, 20'000, 30'000, true)))) return;
  auto conflict = PutEvent("r", "other", Drop(25'000, 26'000, 40'000, false));
  EXPECT_EQ(conflict.status(), OpStatus::kConflict);
  auto events = Events("r");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].id, "drop");
  EXPECT_EQ((*events)[0].stage, core::EventStage::kScheduled);
  EXPECT_EQ(DeleteEvent("r", "nope").status(), OpStatus::kNotFound);
  ASSERT_TRUE(DeleteEvent("r", "drop").ok());
  EXPECT_TRUE(Events("r")->empty());
  EXPECT_EQ(Events("nowhere").status(), OpStatus::kUnknownRoom);
}

TEST_P(LaunchConformanceTest, AShuffledDropLosesNobodyAndTheOrderSurvivesARestart) {
  MakeRoom("r", 2);
  if (!Scheduled(PutEvent("r", "drop", Drop(0, 5'000, 600'000, true)))) return;
  std::set<std::string> everyone;
  for (int i = 0; i < 200; ++i) {
    std::string id = "p" + std::to_string(i);
    auto v = Check("r", id);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->status, SessionStatus::kPrequeue);
    everyone.insert(id);
  }
  AdvanceTime(5'000);  // the start: the timer draws and publishes, a chunk a turn
  for (int turn = 0; turn < 50 && Line("r").size() < 198; ++turn) AdvanceTime(1);
  std::vector<std::string> line = Line("r");
  ASSERT_EQ(line.size(), 198u) << "two were admitted";
  auto events = Events("r");
  ASSERT_TRUE(events.ok());
  ASSERT_TRUE((*events)[0].shuffle.has_value());
  EXPECT_EQ((*events)[0].shuffle->count, 200);
  EXPECT_EQ((*events)[0].stage, core::EventStage::kRunning);
  std::set<std::string> seen(line.begin(), line.end());
  EXPECT_EQ(seen.size(), 198u) << "nobody twice";
  int active = 0;
  for (const std::string& id : everyone) {
    auto v = Check("r", id);
    ASSERT_TRUE(v.ok());
    if (v->status == SessionStatus::kActive) {
      ++active;
    } else {
      ASSERT_EQ(v->status, SessionStatus::kWaiting) << id;
      auto at = std::find(line.begin(), line.end(), id);
      ASSERT_NE(at, line.end()) << id;
      EXPECT_EQ(v->position, at - line.begin() + 1) << "an exact place";
    }
  }
  EXPECT_EQ(active, 2);
  std::vector<int64_t> arrival;  // the drawn order is not arrival order
  for (const std::string& id : line) arrival.push_back(std::stoi(id.substr(1)));
  EXPECT_FALSE(std::is_sorted(arrival.begin(), arrival.end()));
  if (harness_->Restart()) {
    EXPECT_EQ(Line("r"), line) << "the same order after a restart";
    auto again = Events("r");
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)[0].shuffle, (*events)[0].shuffle);
  }
}

TEST_P(LaunchConformanceTest, ARestartMidDrawGoesOnWithTheSameSeed) {
  MakeRoom("r", 1);
  if (!Scheduled(PutEvent("r", "drop", Drop(0, 1'000, 600'000, true)))) return;
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(Check("r", "p" + std::to_string(i)).ok());
  AdvanceTime(1'000);  // one chunk drawn (the harness's draw_chunk: 64)
  auto events = Events("r");
  ASSERT_TRUE(events.ok());
  ASSERT_TRUE((*events)[0].shuffle.has_value());
  size_t published = Line("r").size();
  if (!harness_->Restart()) return;
  auto after = Events("r");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[0].shuffle, (*events)[0].shuffle);
  std::vector<std::string> front = Line("r");
  EXPECT_EQ(front.size(), published);
  EXPECT_LT(front.size(), 299u) << "the restart came mid-draw";
  for (int turn = 0; turn < 20 && Line("r").size() < 299; ++turn) AdvanceTime(1);
  EXPECT_EQ(Line("r").size(), 299u);
}

TEST_P(LaunchConformanceTest, MethodSwitchesKeepEveryPlace) {
  MakeRoom("r", 1);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(Check("r", "s" + std::to_string(i)).ok());
  std::vector<std::string> before = Line("r");
  RoomPatch random;
  random.queueing_method = QueueingMethod::kRandom;
  auto put = Put("r", random);
  ASSERT_TRUE(put.ok()) << put.message();
  EXPECT_EQ(put->config.queueing_method, QueueingMethod::kRandom);
  auto v = Check("r", "s3");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->odds.has_value());
  RoomPatch fifo;
  fifo.queueing_method = QueueingMethod::kFifo;
  ASSERT_TRUE(Put("r", fifo).ok());
  EXPECT_EQ(Line("r"), before);
  RoomPatch reject;
  reject.queueing_method = QueueingMethod::kReject;
  ASSERT_TRUE(Put("r", reject).ok());
  EXPECT_EQ(Check("r", "new")->status, SessionStatus::kClosed);
  EXPECT_EQ(Line("r"), before);
  if (harness_->Restart()) {
    EXPECT_EQ(Line("r"), before);
    EXPECT_EQ(Check("r", "new2")->status, SessionStatus::kClosed);
  }
}

TEST_P(LaunchConformanceTest, PassesAreMintedRedeemedAndRevoked) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "holder").ok());
  ASSERT_TRUE(Check("r", "w1").ok());
  core::PassMint mint{
      .kind = core::PassKind::kFront, .uses = 2, .expires_at = std::nullopt, .count = 3};
  auto minted =
      Await<std::vector<core::MintedPass>>([&](auto done) { b().MintPasses("r", mint, done); });
  if (OnRedis()) {
    EXPECT_EQ(minted.status(), OpStatus::kUnavailable);
    return;
  }
  ASSERT_TRUE(minted.ok()) << minted.message();
  ASSERT_EQ(minted->size(), 3u);
  std::set<std::string> codes;
  for (const auto& m : *minted) codes.insert(m.code);
  EXPECT_EQ(codes.size(), 3u);
  core::Arrival with_pass{.client = "", .proof_bits = 0, .pass = (*minted)[0].code};
  auto vip = Await<SessionView>([&](auto done) { b().Check("r", "vip", with_pass, done); });
  ASSERT_TRUE(vip.ok()) << vip.message();
  EXPECT_EQ(vip->position, 1) << "first in line, ahead of w1";
  core::Arrival wrong{.client = "", .proof_bits = 0, .pass = (*minted)[0].pass.id + ".nope"};
  EXPECT_EQ(Await<SessionView>([&](auto done) { b().Check("r", "x", wrong, done); }).status(),
            OpStatus::kInvalidArgument);
  if (harness_->Restart()) {
    EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip", "w1"}));
  }
  auto passes = Await<std::vector<core::RoomPass>>([&](auto done) { b().ListPasses("r", done); });
  ASSERT_TRUE(passes.ok());
  ASSERT_EQ(passes->size(), 3u);
  int64_t left = 0;
  for (const auto& p : *passes) left += p.uses_left;
  EXPECT_EQ(left, 5);
  auto one = Await<int64_t>([&](auto done) { b().RevokePasses("r", (*minted)[1].pass.id, done); });
  EXPECT_EQ(one.ok() ? *one : -1, 1);
  auto rest = Await<int64_t>([&](auto done) { b().RevokePasses("r", std::nullopt, done); });
  EXPECT_EQ(rest.ok() ? *rest : -1, 2);
  EXPECT_EQ(Await<SessionView>([&](auto done) { b().Check("r", "y", with_pass, done); }).status(),
            OpStatus::kInvalidArgument)
      << "revoked";
}

INSTANTIATE_TEST_SUITE_P(Backends, LaunchConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
