// What live channels read from every backend: the line in order with its version
// (Backend::ReadLine) and check-ins of many connected sessions at once (Backend::Present).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend_fixture.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::LineView;
using core::SessionStatus;
using core::SessionView;

class LiveConformanceTest : public conformance::BackendTest {
 protected:
  void MakeRoom(const std::string& room, int64_t capacity, int64_t checkin_timeout_ms = 1'000,
                int64_t grace_ms = 500) {
    core::RoomPatch p;
    p.capacity = capacity;
    p.grace_ms = grace_ms;
    p.checkin_timeout_ms = checkin_timeout_ms;
    p.idle_timeout_ms = 300'000;
    auto r = Await<core::RoomInfo>([&](auto done) { b().PutRoom(room, p, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  OpResult<SessionView> Check(const std::string& room, const std::string& session) {
    return Await<SessionView>([&](auto done) { b().Check(room, session, done); });
  }
  OpResult<LineView> Read(const std::string& room, uint64_t since) {
    return Await<LineView>([&](auto done) { b().ReadLine(room, since, done); });
  }
  OpResult<std::vector<SessionView>> Present(const std::string& room,
                                             std::vector<std::string> sessions) {
    return Await<std::vector<SessionView>>(
        [&](auto done) { b().Present(room, std::move(sessions), done); });
  }
  static std::vector<std::string> Ids(const LineView& v) {
    std::vector<std::string> out;
    for (size_t i = 0; i < v.line.size(); ++i) out.emplace_back(v.line[i]);
    return out;
  }
};

TEST_P(LiveConformanceTest, ReadLineAnswersTheLineInOrderWithTheCounts) {
  MakeRoom("r", 2);
  for (const char* s : {"a", "b", "c", "d", "e"}) ASSERT_TRUE(Check("r", s).ok());
  auto v = Read("r", 0);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_TRUE(v->changed);
  EXPECT_EQ(Ids(*v), (std::vector<std::string>{"c", "d", "e"}));
  EXPECT_EQ(v->active, 2);
  EXPECT_EQ(v->waiting, 3);
  EXPECT_EQ(v->capacity, 2);
  EXPECT_EQ(v->checkin_timeout_ms, 1'000);
  EXPECT_EQ(v->flow.out_per_ms, 0);
}

TEST_P(LiveConformanceTest, AnUnchangedLineIsNotCopiedAgain) {
  MakeRoom("r", 1);
  for (const char* s : {"a", "b", "c"}) ASSERT_TRUE(Check("r", s).ok());
  auto first = Read("r", 0);
  ASSERT_TRUE(first.ok());
  auto again = Read("r", first->version);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(again->version, first->version);
  EXPECT_EQ(again->line.size(), 0u);
  EXPECT_EQ(again->waiting, 2);
  // A plain check-in of someone waiting moves nobody.
  ASSERT_TRUE(Check("r", "c").ok());
  EXPECT_FALSE(Read("r", first->version)->changed);
}

TEST_P(LiveConformanceTest, EveryChangeOfTheLineOrOfAHolderMovesTheVersion) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "a").ok());
  ASSERT_TRUE(Check("r", "b").ok());
  uint64_t v0 = Read("r", 0)->version;
  ASSERT_TRUE(Check("r", "c").ok());  // joins
  uint64_t v1 = Read("r", v0)->version;
  EXPECT_NE(v1, v0);
  auto left = Await<SessionView>([&](auto done) { b().Leave("r", "a", false, done); });
  ASSERT_TRUE(left.ok());  // a: active -> grace
  auto after_grace = Read("r", v1);
  EXPECT_TRUE(after_grace->changed);
  ASSERT_TRUE(Await<SessionView>([&](auto done) { b().Leave("r", "a", true, done); }).ok());
  auto admitted = Read("r", after_grace->version);  // b admitted: the line is c alone
  EXPECT_TRUE(admitted->changed);
  EXPECT_EQ(Ids(*admitted), std::vector<std::string>{"c"});
  EXPECT_EQ(admitted->flow.out_per_ms, 1.0 / 10'000);  // one slot freed, in 10 s at least
}

// The ETA's basis (core::EstimateFlow): slots freed and joins, counted in 10 s buckets over 5
// minutes, equal on every backend (Redis keeps the buckets in room.lua and the backend runs the
// core's formula on them). One slot is freed in each of 70 seconds, then time runs on without
// any: the rate is the count over the time observed (never less than 10 s) while the first
// minute lasts, then the windows' choice, and an ETA follows it.
TEST_P(LiveConformanceTest, TheFlowFollowsTheOutflowAsTimeRuns) {
  MakeRoom("r", 1, /*checkin_timeout_ms=*/3'600'000, /*grace_ms=*/0);
  core::FlowHistory out, in;  // the same events, counted here
  ASSERT_TRUE(Check("r", "h0").ok());
  for (int i = 0; i < 80; ++i) ASSERT_TRUE(Check("r", "w" + std::to_string(i)).ok());
  for (int i = 0; i < 81; ++i) in.Add(NowMs());  // h0 too: it joined the line, then got in
  auto flow = [&] {
    auto v = Read("r", 0);
    EXPECT_TRUE(v.ok()) << v.message();
    return v.ok() ? v->flow : core::Flow{-1, -1};
  };
  auto expected = [&] { return core::EstimateFlow(out, in, NowMs()); };
  EXPECT_EQ(flow(), (core::Flow{0, 81.0 / 10'000, 0, 81}));  // no slot freed yet: no ETA
  // The holder leaves each second and the next in line is admitted (and holds the slot).
  std::string holder = "h0";
  for (int sec = 0; sec < 70; ++sec) {
    auto left = Await<SessionView>([&](auto done) { b().Leave("r", holder, true, done); });
    ASSERT_TRUE(left.ok()) << left.message();
    out.Add(NowMs());
    holder = "w" + std::to_string(sec);
    core::Flow f = flow();
    EXPECT_EQ(f, expected()) << "second " << sec;
    // The first 10 s are divided by 10 s; then by the time since the first slot freed.
    double rate = sec < 10 ? (sec + 1) / 10'000.0 : (sec + 1) / (sec * 1'000.0);
    if (sec < 60) {
      EXPECT_DOUBLE_EQ(f.out_per_ms, rate) << "second " << sec;
    }
    AdvanceTime(1'000);
  }
  auto waiting = Check("r", "w75");
  ASSERT_TRUE(waiting.ok());
  ASSERT_TRUE(waiting->eta_ms.has_value());
  EXPECT_EQ(waiting->eta_ms, core::EtaMs(waiting->position, expected(), std::nullopt));
  EXPECT_NEAR(*waiting->eta_ms, waiting->position * 1'000, waiting->position * 20);
  // Then none for a while: the rate falls as the windows without any win.
  for (int step = 0; step < 28; ++step) {
    AdvanceTime(10'000);
    EXPECT_EQ(flow(), expected()) << "quiet for " << (step + 1) * 10 << " s";
  }
  EXPECT_LT(flow().out_per_ms, 0.2 / 1'000);
}

TEST_P(LiveConformanceTest, ExpiryIsSeenByTheNextRead) {
  MakeRoom("r", 1, /*checkin_timeout_ms=*/1'000);
  for (const char* s : {"a", "b", "c"}) ASSERT_TRUE(Check("r", s).ok());
  uint64_t v0 = Read("r", 0)->version;
  AdvanceTime(600);
  ASSERT_TRUE(Check("r", "c").ok());
  AdvanceTime(600);  // b stopped checking in 1.2 s ago; c 0.6 s ago
  auto v = Read("r", v0);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->changed);
  EXPECT_EQ(Ids(*v), std::vector<std::string>{"c"});
}

TEST_P(LiveConformanceTest, PresentKeepsWaitingSessionsInLine) {
  MakeRoom("r", 1, /*checkin_timeout_ms=*/1'000);
  for (const char* s : {"a", "b", "c"}) ASSERT_TRUE(Check("r", s).ok());
  for (int i = 0; i < 5; ++i) {
    AdvanceTime(600);
    auto views = Present("r", {"a", "b", "c"});
    ASSERT_TRUE(views.ok()) << views.message();
    ASSERT_EQ(views->size(), 3u);
  }
  auto views = Present("r", {"c", "b", "a"});
  ASSERT_TRUE(views.ok());
  EXPECT_EQ((*views)[0].status, SessionStatus::kWaiting);
  EXPECT_EQ((*views)[0].position, 2);
  EXPECT_EQ((*views)[0].session, "c");
  EXPECT_EQ((*views)[1].position, 1);
  EXPECT_EQ((*views)[2].status, SessionStatus::kActive);
  EXPECT_GT((*views)[2].admission, 0u);
}

TEST_P(LiveConformanceTest, PresentNeverJoinsAndAnswersGoneForStrangers) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "a").ok());
  auto views = Present("r", {"nobody", "a"});
  ASSERT_TRUE(views.ok());
  EXPECT_EQ((*views)[0].status, SessionStatus::kGone);
  EXPECT_EQ((*views)[0].session, "nobody");
  EXPECT_EQ((*views)[1].status, SessionStatus::kActive);
  auto line = Read("r", 0);
  EXPECT_EQ(line->waiting, 0);
  EXPECT_EQ(line->active, 1);
}

TEST_P(LiveConformanceTest, PresentClaimsAnAdmissionAndEndsGrace) {
  MakeRoom("r", 1, /*checkin_timeout_ms=*/1'000, /*grace_ms=*/500);
  ASSERT_TRUE(Check("r", "a").ok());
  ASSERT_TRUE(Check("r", "b").ok());
  ASSERT_TRUE(Await<SessionView>([&](auto done) { b().Leave("r", "a", true, done); }).ok());
  // b was admitted while not calling in: Present claims it, so it is not dropped as unclaimed.
  ASSERT_EQ(Present("r", {"b"})->at(0).status, SessionStatus::kActive);
  AdvanceTime(1'500);
  ASSERT_TRUE(Await<SessionView>([&](auto done) { b().Leave("r", "b", false, done); }).ok());
  AdvanceTime(300);  // in grace
  auto back = Present("r", {"b"});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->at(0).status, SessionStatus::kActive);
  AdvanceTime(1'000);  // grace would have ended by now
  auto line = Read("r", 0);
  EXPECT_EQ(line->active, 1);
}

TEST_P(LiveConformanceTest, UnknownRoom) {
  EXPECT_EQ(Read("nope", 0).status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Present("nope", {"a"}).status(), OpStatus::kUnknownRoom);
}

INSTANTIATE_TEST_SUITE_P(Backends, LiveConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
