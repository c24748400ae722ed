// The rooms conformance suite: the same tests against every backend, only through
// store::Backend plus a way to move time forward. To add a backend, add a factory to
// Backends() in backend_fixture.h.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend_fixture.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::RoomInfo;
using core::RoomPatch;
using core::SessionStatus;
using core::SessionView;

class RoomsConformanceTest : public conformance::BackendTest {
 protected:
  OpResult<RoomInfo> Put(const std::string& room, RoomPatch patch) {
    return Await<RoomInfo>([&](auto done) { b().PutRoom(room, patch, done); });
  }
  OpResult<RoomInfo> Get(const std::string& room) {
    return Await<RoomInfo>([&](auto done) { b().GetRoom(room, done); });
  }
  OpResult<std::vector<RoomInfo>> List() {
    return Await<std::vector<RoomInfo>>([&](auto done) { b().ListRooms(done); });
  }
  OpResult<RoomInfo> Delete(const std::string& room) {
    return Await<RoomInfo>([&](auto done) { b().DeleteRoom(room, done); });
  }
  OpResult<SessionView> Check(const std::string& room, const std::string& session) {
    return Await<SessionView>([&](auto done) { b().Check(room, session, done); });
  }
  OpResult<SessionView> Join(const std::string& room, const std::string& session,
                             const std::string& client, int64_t proof_bits = 0) {
    core::Arrival arrival{.client = client, .proof_bits = proof_bits};
    return Await<SessionView>([&](auto done) { b().Check(room, session, arrival, done); });
  }
  OpResult<SessionView> Touch(const std::string& room, const std::string& session) {
    return Await<SessionView>([&](auto done) { b().Touch(room, session, done); });
  }
  OpResult<SessionView> Leave(const std::string& room, const std::string& session, bool final) {
    return Await<SessionView>([&](auto done) { b().Leave(room, session, final, done); });
  }
  OpResult<SessionView> End(const std::string& room, const std::string& session) {
    return Await<SessionView>([&](auto done) { b().EndSession(room, session, done); });
  }
  OpResult<bool> Revoked(const std::string& room, const std::string& session, uint64_t adm) {
    return Await<bool>([&](auto done) { b().IsRevoked(room, session, adm, done); });
  }
  // What a token names: the session holding (incarnation, admission), or nullopt.
  OpResult<std::optional<std::string>> Holder(const std::string& room, uint64_t inc, uint64_t adm) {
    return Await<std::optional<std::string>>(
        [&](auto done) { b().AdmissionHolder(room, inc, adm, done); });
  }

  // Joins or checks in, where only success matters to the test.
  void Arrive(const std::string& room, const std::string& session) {
    auto v = Check(room, session);
    ASSERT_TRUE(v.ok()) << v.message();
  }
  SessionStatus StatusOf(const std::string& room, const std::string& session) {
    auto v = Check(room, session);
    EXPECT_TRUE(v.ok());
    return v.ok() ? v->status : SessionStatus::kGone;
  }
  int64_t PositionOf(const std::string& room, const std::string& session) {
    auto v = Check(room, session);
    EXPECT_TRUE(v.ok());
    return v.ok() ? v->position : -1;
  }
  void ExpectCounts(const std::string& room, int64_t active, int64_t waiting) {
    auto info = Get(room);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->active, active);
    EXPECT_EQ(info->waiting, waiting);
  }
};

// ---- rooms ---------------------------------------------------------------------------------

TEST_P(RoomsConformanceTest, CreatingARoomRequiresCapacity) {
  RoomPatch p;
  p.grace_ms = 1'000;
  EXPECT_EQ(Put("r", p).status(), OpStatus::kInvalidArgument);
  EXPECT_EQ(Get("r").status(), OpStatus::kUnknownRoom);
  auto list = List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST_P(RoomsConformanceTest, CreateAppliesDefaultsAndAnswersTheRoom) {
  RoomPatch p;
  p.capacity = 3;
  auto created = Put("shop", p);
  ASSERT_TRUE(created.ok()) << created.message();
  EXPECT_EQ(created->room, "shop");
  EXPECT_EQ(created->config.capacity, 3);
  EXPECT_EQ(created->config.grace_ms, 30'000);
  EXPECT_EQ(created->config.checkin_timeout_ms, 30'000);
  EXPECT_EQ(created->config.idle_timeout_ms, std::optional<int64_t>(300'000));
  EXPECT_EQ(created->config.admit_per_minute, std::nullopt);
  EXPECT_FALSE(created->config.paused);
  EXPECT_EQ(created->config.target_url, std::nullopt);
  EXPECT_EQ(created->config.joins_per_minute_per_client, std::nullopt);
  EXPECT_EQ(created->config.places_per_client, std::nullopt);
  EXPECT_EQ(created->config.challenge_difficulty, std::nullopt);
  EXPECT_EQ(created->active, 0);
  EXPECT_EQ(created->waiting, 0);
  auto got = Get("shop");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->room, "shop");
  EXPECT_EQ(got->config.capacity, 3);
  EXPECT_EQ(got->config.idle_timeout_ms, std::optional<int64_t>(300'000));
}

TEST_P(RoomsConformanceTest, PatchChangesOnlyTheGivenFields) {
  MakeRoom("r", 2, 1'000, 2'000, 3'000, 10);
  RoomPatch grace;
  grace.grace_ms = 5'000;
  auto a = Put("r", grace);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->config.capacity, 2);
  EXPECT_EQ(a->config.grace_ms, 5'000);
  EXPECT_EQ(a->config.checkin_timeout_ms, 2'000);
  EXPECT_EQ(a->config.idle_timeout_ms, std::optional<int64_t>(3'000));
  EXPECT_EQ(a->config.admit_per_minute, std::optional<int64_t>(10));

  RoomPatch nulls;  // explicit nulls: idle timeout off, no rate cap
  nulls.idle_timeout_ms = std::optional<int64_t>();
  nulls.admit_per_minute = std::optional<int64_t>();
  auto b = Put("r", nulls);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->config.capacity, 2);
  EXPECT_EQ(b->config.grace_ms, 5'000);
  EXPECT_EQ(b->config.checkin_timeout_ms, 2'000);
  EXPECT_EQ(b->config.idle_timeout_ms, std::nullopt);
  EXPECT_EQ(b->config.admit_per_minute, std::nullopt);

  RoomPatch capacity;
  capacity.capacity = 7;
  capacity.checkin_timeout_ms = 4'000;
  auto c = Put("r", capacity);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->config.capacity, 7);
  EXPECT_EQ(c->config.grace_ms, 5'000);
  EXPECT_EQ(c->config.checkin_timeout_ms, 4'000);
  EXPECT_EQ(c->config.idle_timeout_ms, std::nullopt);
  EXPECT_EQ(c->config.admit_per_minute, std::nullopt);

  auto got = Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config.capacity, 7);
  EXPECT_EQ(got->config.grace_ms, 5'000);
  EXPECT_EQ(got->config.checkin_timeout_ms, 4'000);
  EXPECT_EQ(got->config.idle_timeout_ms, std::nullopt);
}

TEST_P(RoomsConformanceTest, PatchKeepsTheSessions) {
  MakeRoom("r", 1);
  ASSERT_EQ(StatusOf("r", "a"), SessionStatus::kActive);
  ASSERT_EQ(StatusOf("r", "b"), SessionStatus::kWaiting);
  RoomPatch grace;
  grace.grace_ms = 9'000;
  ASSERT_TRUE(Put("r", grace).ok());
  ExpectCounts("r", 1, 1);
  EXPECT_EQ(StatusOf("r", "a"), SessionStatus::kActive);
  EXPECT_EQ(PositionOf("r", "b"), 1);
}

TEST_P(RoomsConformanceTest, ListRoomsIsSortedByName) {
  for (std::string name : {"b", "a", "c:1", "A", "a.b"}) {
    MakeRoom(name, 1 + static_cast<int64_t>(name.size()));
  }
  auto list = List();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const RoomInfo& r : *list) {
    names.push_back(r.room);
    EXPECT_EQ(r.config.capacity, static_cast<int64_t>(1 + r.room.size())) << r.room;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"A", "a", "a.b", "b", "c:1"}));
}

TEST_P(RoomsConformanceTest, ListRoomsShowsLiveCounts) {
  MakeRoom("x", 1);
  MakeRoom("y", 2);
  Arrive("x", "s1");
  Arrive("x", "s2");
  Arrive("y", "s1");
  auto list = List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].active, 1);
  EXPECT_EQ((*list)[0].waiting, 1);
  EXPECT_EQ((*list)[1].active, 1);
  EXPECT_EQ((*list)[1].waiting, 0);
}

TEST_P(RoomsConformanceTest, DeleteRoomAnswersItThenForgetsIt) {
  MakeRoom("gone", 1);
  MakeRoom("kept", 1);
  Arrive("gone", "a");
  Arrive("gone", "b");
  auto deleted = Delete("gone");
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->room, "gone");
  EXPECT_EQ(deleted->active, 1);
  EXPECT_EQ(deleted->waiting, 1);
  EXPECT_EQ(Get("gone").status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Delete("gone").status(), OpStatus::kUnknownRoom);
  auto list = List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].room, "kept");
  // Created again, it starts empty: its old sessions are unknown.
  MakeRoom("gone", 1);
  ExpectCounts("gone", 0, 0);
  EXPECT_EQ(Touch("gone", "a").status(), OpStatus::kUnknownSession);
  EXPECT_EQ(StatusOf("gone", "b"), SessionStatus::kActive);
}

TEST_P(RoomsConformanceTest, UnknownRoomOnEveryCall) {
  MakeRoom("other", 1);
  EXPECT_EQ(Get("nope").status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Delete("nope").status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Check("nope", "s").status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Touch("nope", "s").status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Leave("nope", "s", false).status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Leave("nope", "s", true).status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(End("nope", "s").status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Revoked("nope", "s", 1).status(), OpStatus::kUnknownRoom);
  // None of them created the room.
  auto list = List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);
}

// ---- sessions ------------------------------------------------------------------------------

TEST_P(RoomsConformanceTest, CheckJoinsAdmitsAndQueuesInOrder) {
  MakeRoom("r", 2);
  auto a = Check("r", "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->session, "a");
  EXPECT_EQ(a->status, SessionStatus::kActive);
  EXPECT_GT(a->admission, 0u);
  EXPECT_EQ(StatusOf("r", "b"), SessionStatus::kActive);
  auto c = Check("r", "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status, SessionStatus::kWaiting);
  EXPECT_EQ(c->position, 1);
  EXPECT_EQ(c->waiting, 1);
  EXPECT_EQ(c->active, 2);
  EXPECT_EQ(c->capacity, 2);
  EXPECT_FALSE(c->eta_ms.has_value());  // no slot has freed yet
  auto d = Check("r", "d");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->position, 2);
  EXPECT_EQ(d->waiting, 2);
  EXPECT_EQ(PositionOf("r", "c"), 1);  // checking in keeps the place
  ExpectCounts("r", 2, 2);
}

TEST_P(RoomsConformanceTest, FinalLeaveFreesTheSlotForTheHeadOfTheLine) {
  MakeRoom("r", 1);
  Arrive("r", "a");
  Arrive("r", "b");
  Arrive("r", "c");
  auto gone = Leave("r", "a", true);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, SessionStatus::kGone);
  ExpectCounts("r", 1, 1);
  EXPECT_EQ(StatusOf("r", "b"), SessionStatus::kActive);
  auto c = Check("r", "c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->position, 1);
  ASSERT_TRUE(c->eta_ms.has_value());  // a slot has freed: the rate is known
  EXPECT_GT(*c->eta_ms, 0);
  EXPECT_EQ(Touch("r", "a").status(), OpStatus::kUnknownSession);
}

// The ETA on every backend (core::EstimateFlow over the same counts, core/outflow_estimate.h):
// the position over the slots freed per ms, counted since the first one, never over less
// than 10 s.
TEST_P(RoomsConformanceTest, TheEtaIsThePositionOverTheMeasuredOutflow) {
  MakeRoom("r", 2, /*grace_ms=*/0, /*checkin_timeout_ms=*/3'600'000, std::nullopt);
  for (const char* s : {"a", "b", "c", "d", "e"}) Arrive("r", s);
  AdvanceTime(5'000);
  ASSERT_TRUE(Leave("r", "a", true).ok());  // c in: one slot freed, counted over 10 s
  auto e = Check("r", "e");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->position, 2);
  EXPECT_EQ(e->eta_ms, 20'000);
  AdvanceTime(15'000);
  ASSERT_TRUE(Leave("r", "b", true).ok());  // d in: two slots in the 15 s since the first
  e = Check("r", "e");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->position, 1);
  EXPECT_EQ(e->eta_ms, core::EtaMs(1, core::Flow{2.0 / 15'000, 0}, std::nullopt));
  EXPECT_NEAR(static_cast<double>(e->eta_ms.value_or(0)), 7'500, 1);
}

// The random method's odds on every backend: the quartile waits of those waiting when each
// admission draws one of a line that people keep joining (core::RandomWaitMs), from the same
// measured outflow and inflow.
TEST_P(RoomsConformanceTest, RandomOddsCountThePeopleStillJoining) {
  MakeRoom("r", 1, /*grace_ms=*/0, /*checkin_timeout_ms=*/3'600'000, std::nullopt);
  RoomPatch random;
  random.queueing_method = core::QueueingMethod::kRandom;
  ASSERT_TRUE(Put("r", random).ok());
  Arrive("r", "h");  // joins, in at once: ten joins at the start
  for (int i = 0; i < 9; ++i) Arrive("r", "w" + std::to_string(i));
  AdvanceTime(10'000);
  ASSERT_TRUE(Leave("r", "h", true).ok());  // one drawn in: eight wait
  // One slot freed and ten joins in 10 s: so few counts that the allowance for their noise is
  // the most it can be (the waits halved).
  auto expected =
      core::RandomOdds(8, core::Flow{1.0 / 10'000, 10.0 / 10'000, 1, 10}, std::nullopt, true);
  ASSERT_TRUE(expected.has_value());
  int seen = 0;
  for (int i = 0; i < 9; ++i) {
    auto v = Check("r", "w" + std::to_string(i));
    ASSERT_TRUE(v.ok());
    if (v->status != SessionStatus::kWaiting) continue;
    ++seen;
    ASSERT_TRUE(v->odds.has_value());
    EXPECT_DOUBLE_EQ(v->odds->chance_next, 1.0 / 8);
    EXPECT_EQ(v->odds->p25_ms, expected->p25_ms);
    EXPECT_EQ(v->odds->p50_ms, expected->p50_ms);
    EXPECT_EQ(v->odds->p75_ms, expected->p75_ms);
    EXPECT_EQ(v->eta_ms, expected->p50_ms);
  }
  EXPECT_EQ(seen, 8);
  // Joins at ten times the outflow: the line grows, the median wait is far past 8 slots' time.
  EXPECT_GT(expected->p50_ms.value_or(0), 10 * 4 * 10'000);
  EXPECT_NEAR(static_cast<double>(expected->p50_ms.value_or(0)),
              static_cast<double>(*core::RandomWaitMs(8, 1.0 / 10'000, 10.0 / 10'000, 0.5)) / 2, 1);
}

TEST_P(RoomsConformanceTest, LeaveThenReturnWithinGrace) {
  MakeRoom("r", 1, /*grace_ms=*/5'000);
  Arrive("r", "a");
  Arrive("r", "b");
  auto left = Leave("r", "a", false);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->status, SessionStatus::kGrace);
  EXPECT_EQ(left->active, 1);
  AdvanceTime(4'000);
  ExpectCounts("r", 1, 1);
  EXPECT_EQ(StatusOf("r", "a"), SessionStatus::kActive);
  AdvanceTime(4'000);  // past the old grace end: a is active, so nothing moves
  ExpectCounts("r", 1, 1);
  EXPECT_EQ(PositionOf("r", "b"), 1);
}

TEST_P(RoomsConformanceTest, TouchInGraceIsActiveAgain) {
  MakeRoom("r", 1, /*grace_ms=*/5'000);
  Arrive("r", "a");
  Arrive("r", "b");
  ASSERT_TRUE(Leave("r", "a", false).ok());
  auto t = Touch("r", "a");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->status, SessionStatus::kActive);
  AdvanceTime(6'000);
  ExpectCounts("r", 1, 1);
}

TEST_P(RoomsConformanceTest, GraceOverMovesTheSlotByTimeAlone) {
  MakeRoom("r", 1, /*grace_ms=*/5'000);
  Arrive("r", "a");
  Arrive("r", "b");
  ASSERT_TRUE(Leave("r", "a", false).ok());
  AdvanceTime(4'999);
  ExpectCounts("r", 1, 1);
  AdvanceTime(1);
  ExpectCounts("r", 1, 0);  // b holds the slot; neither a nor b called
  EXPECT_EQ(StatusOf("r", "b"), SessionStatus::kActive);
  auto a = Check("r", "a");  // after grace: joins at the back
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->status, SessionStatus::kWaiting);
  EXPECT_EQ(a->position, 1);
}

TEST_P(RoomsConformanceTest, WaitingSessionIsDroppedByTimeAndRejoinsAtTheBack) {
  MakeRoom("r", 1, 5'000, /*checkin_timeout_ms=*/10'000);
  Arrive("r", "a");
  Arrive("r", "b");
  AdvanceTime(5'000);
  Arrive("r", "c");
  AdvanceTime(5'000);  // b is 10 s without a check-in
  ExpectCounts("r", 1, 1);
  EXPECT_EQ(PositionOf("r", "c"), 1);
  EXPECT_EQ(Touch("r", "b").status(), OpStatus::kUnknownSession);
  auto b = Check("r", "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->status, SessionStatus::kWaiting);
  EXPECT_EQ(b->position, 2);
}

TEST_P(RoomsConformanceTest, IdleActiveSessionLosesItsSlotByTimeAlone) {
  MakeRoom("r", 1, /*grace_ms=*/1'000, /*checkin_timeout_ms=*/10'000,
           /*idle_timeout_ms=*/4'000);
  Arrive("r", "a");
  Arrive("r", "b");
  AdvanceTime(3'000);
  Arrive("r", "b");
  AdvanceTime(1'000);  // a idle: into grace, still holding
  ExpectCounts("r", 1, 1);
  AdvanceTime(1'000);  // grace over
  ExpectCounts("r", 1, 0);
  EXPECT_EQ(StatusOf("r", "b"), SessionStatus::kActive);
}

TEST_P(RoomsConformanceTest, NoIdleTimeoutKeepsTheSlot) {
  MakeRoom("r", 1, 1'000, 10'000, /*idle_timeout_ms=*/std::nullopt);
  Arrive("r", "a");
  AdvanceTime(24LL * 3600 * 1000);
  ExpectCounts("r", 1, 0);
  EXPECT_EQ(StatusOf("r", "b"), SessionStatus::kWaiting);
}

TEST_P(RoomsConformanceTest, UnclaimedAdmissionIsDroppedByTimeAlone) {
  MakeRoom("r", 1, 5'000, /*checkin_timeout_ms=*/10'000);
  Arrive("r", "a");
  Arrive("r", "b");
  Arrive("r", "c");
  ASSERT_TRUE(Leave("r", "a", true).ok());  // b admitted while not calling in
  AdvanceTime(6'000);
  EXPECT_EQ(PositionOf("r", "c"), 1);
  AdvanceTime(4'000);  // b did not claim within 10 s
  ExpectCounts("r", 1, 0);
  EXPECT_EQ(StatusOf("r", "c"), SessionStatus::kActive);
}

TEST_P(RoomsConformanceTest, ClaimedAdmissionKeepsTheSlot) {
  MakeRoom("r", 1, 5'000, /*checkin_timeout_ms=*/10'000);
  Arrive("r", "a");
  Arrive("r", "b");
  Arrive("r", "c");
  ASSERT_TRUE(Leave("r", "a", true).ok());
  AdvanceTime(6'000);
  EXPECT_EQ(StatusOf("r", "b"), SessionStatus::kActive);  // the claim
  EXPECT_EQ(PositionOf("r", "c"), 1);
  AdvanceTime(6'000);
  ExpectCounts("r", 1, 1);
}

TEST_P(RoomsConformanceTest, LeaveOfAWaitingSessionTakesItOut) {
  MakeRoom("r", 1);
  Arrive("r", "a");
  Arrive("r", "b");
  Arrive("r", "c");
  auto gone = Leave("r", "b", false);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, SessionStatus::kGone);
  EXPECT_EQ(gone->waiting, 1);
  EXPECT_EQ(PositionOf("r", "c"), 1);
  ExpectCounts("r", 1, 1);
}

TEST_P(RoomsConformanceTest, UnknownSession) {
  MakeRoom("r", 1);
  Arrive("r", "a");
  EXPECT_EQ(Touch("r", "x").status(), OpStatus::kUnknownSession);
  EXPECT_EQ(Leave("r", "x", false).status(), OpStatus::kUnknownSession);
  EXPECT_EQ(Leave("r", "x", true).status(), OpStatus::kUnknownSession);
  EXPECT_EQ(End("r", "x").status(), OpStatus::kUnknownSession);
  ExpectCounts("r", 1, 0);
}

TEST_P(RoomsConformanceTest, EndSessionFreesTheSlotAndRevokes) {
  MakeRoom("r", 1);
  auto a = Check("r", "a");
  ASSERT_TRUE(a.ok());
  Arrive("r", "b");
  auto ended = End("r", "a");
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->status, SessionStatus::kGone);
  ExpectCounts("r", 1, 0);
  auto revoked = Revoked("r", "a", a->admission);
  ASSERT_TRUE(revoked.ok());
  EXPECT_TRUE(*revoked);
}

TEST_P(RoomsConformanceTest, FinalLeaveRevokesOnlyThatAdmission) {
  MakeRoom("r", 1);
  auto first = Check("r", "a");
  ASSERT_TRUE(first.ok());
  auto before = Revoked("r", "a", first->admission);
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE(*before);
  ASSERT_TRUE(Leave("r", "a", true).ok());
  auto after = Revoked("r", "a", first->admission);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(*after);
  auto again = Check("r", "a");
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->status, SessionStatus::kActive);
  EXPECT_GT(again->admission, first->admission);
  auto fresh = Revoked("r", "a", again->admission);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(*fresh);
}

// What /v1/tokens/verify asks: a token names (room, incarnation, admission), and is valid only
// while that admission is held.
TEST_P(RoomsConformanceTest, AdmissionHolderFollowsTheAdmission) {
  MakeRoom("r", 1);
  auto a = Check("r", "a");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->status, SessionStatus::kActive);
  EXPECT_NE(a->incarnation, 0u);
  EXPECT_LT(a->incarnation, uint64_t{1} << 53);
  auto held = Holder("r", a->incarnation, a->admission);
  ASSERT_TRUE(held.ok()) << held.message();
  EXPECT_EQ(*held, std::optional<std::string>("a"));
  EXPECT_EQ(*Holder("r", a->incarnation + 1, a->admission), std::nullopt);  // another room's
  EXPECT_EQ(*Holder("r", a->incarnation, a->admission + 1), std::nullopt);  // never given
  ASSERT_TRUE(Leave("r", "a", false).ok());                                 // grace: still held
  EXPECT_EQ(*Holder("r", a->incarnation, a->admission), std::optional<std::string>("a"));
  ASSERT_TRUE(Leave("r", "a", true).ok());
  EXPECT_EQ(*Holder("r", a->incarnation, a->admission), std::nullopt);
  auto again = Check("r", "a");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->incarnation, a->incarnation);
  EXPECT_EQ(*Holder("r", again->incarnation, again->admission), std::optional<std::string>("a"));
  EXPECT_EQ(*Holder("r", a->incarnation, a->admission), std::nullopt);
  EXPECT_EQ(Holder("nope", 1, 1).status(), OpStatus::kUnknownRoom);
}

// Token revocation: after a final leave, deleting and re-creating the room restarts admission
// numbers at 1; the old token must not become valid again.
TEST_P(RoomsConformanceTest, RevocationSurvivesDeleteAndRecreate) {
  MakeRoom("r", 1);
  auto a = Check("r", "a");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->status, SessionStatus::kActive);
  ASSERT_TRUE(Leave("r", "a", true).ok());
  EXPECT_EQ(*Holder("r", a->incarnation, a->admission), std::nullopt);
  ASSERT_TRUE(Delete("r").ok());
  MakeRoom("r", 1);
  auto b = Check("r", "b");
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->status, SessionStatus::kActive);
  EXPECT_EQ(b->admission, a->admission);      // numbers restarted...
  EXPECT_NE(b->incarnation, a->incarnation);  // ...in another incarnation
  // The old token (a's incarnation) stays revoked; the new holder's is valid.
  EXPECT_EQ(*Holder("r", a->incarnation, a->admission), std::nullopt);
  EXPECT_EQ(*Holder("r", b->incarnation, b->admission), std::optional<std::string>("b"));
}

TEST_P(RoomsConformanceTest, CapacityRaisedAndLowered) {
  MakeRoom("r", 1);
  for (const char* s : {"a", "b", "c", "d"}) Arrive("r", s);
  RoomPatch up;
  up.capacity = 3;
  auto raised = Put("r", up);
  ASSERT_TRUE(raised.ok());
  EXPECT_EQ(raised->active, 3);
  EXPECT_EQ(raised->waiting, 1);
  RoomPatch down;
  down.capacity = 1;
  auto lowered = Put("r", down);
  ASSERT_TRUE(lowered.ok());
  EXPECT_EQ(lowered->active, 3);  // nobody is thrown out
  ASSERT_TRUE(Leave("r", "a", true).ok());
  ASSERT_TRUE(Leave("r", "b", true).ok());
  ExpectCounts("r", 1, 1);  // still at capacity: d waits
  ASSERT_TRUE(Leave("r", "c", true).ok());
  ExpectCounts("r", 1, 0);
  EXPECT_EQ(StatusOf("r", "d"), SessionStatus::kActive);
}

TEST_P(RoomsConformanceTest, RateCapOpensWithTheWindow) {
  MakeRoom("r", 3, 5'000, /*checkin_timeout_ms=*/120'000, 300'000, /*admit_per_minute=*/1);
  for (const char* s : {"a", "b", "c"}) Arrive("r", s);
  ExpectCounts("r", 1, 2);  // slots free, but the cap holds them
  AdvanceTime(30'000);
  ExpectCounts("r", 1, 2);
  AdvanceTime(30'000);
  ExpectCounts("r", 2, 1);
  EXPECT_EQ(StatusOf("r", "b"), SessionStatus::kActive);
  EXPECT_EQ(PositionOf("r", "c"), 1);
}

// ---- pause and target URL ------------------------------------------------------------------

RoomPatch Paused(bool paused) {
  RoomPatch p;
  p.paused = paused;
  return p;
}

TEST_P(RoomsConformanceTest, PauseHoldsTheLineAndResumeAdmitsInOrder) {
  MakeRoom("r", 2);
  Arrive("r", "a");
  auto paused = Put("r", Paused(true));
  ASSERT_TRUE(paused.ok()) << paused.message();
  EXPECT_TRUE(paused->config.paused);
  EXPECT_EQ(paused->config.capacity, 2);  // other fields kept
  // Arrivals join the line even with a slot free, and have no ETA.
  for (const char* s : {"b", "c"}) Arrive("r", s);
  auto b = Check("r", "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->status, SessionStatus::kWaiting);
  EXPECT_EQ(b->position, 1);
  EXPECT_EQ(b->eta_ms, std::nullopt);
  EXPECT_EQ(StatusOf("r", "a"), SessionStatus::kActive);  // holders keep their slots
  // A freed slot stays free, also as time passes.
  ASSERT_TRUE(Leave("r", "a", true).ok());
  ExpectCounts("r", 0, 2);
  AdvanceTime(10'000);
  ExpectCounts("r", 0, 2);
  auto got = Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(got->config.paused);
  EXPECT_EQ(got->counters.released_total, 1);

  auto resumed = Put("r", Paused(false));
  ASSERT_TRUE(resumed.ok());
  EXPECT_FALSE(resumed->config.paused);
  EXPECT_EQ(resumed->active, 2);
  EXPECT_EQ(resumed->waiting, 0);
  auto b2 = Check("r", "b");
  auto c2 = Check("r", "c");
  ASSERT_TRUE(b2.ok() && c2.ok());
  EXPECT_EQ(b2->status, SessionStatus::kActive);
  EXPECT_EQ(c2->status, SessionStatus::kActive);
  EXPECT_LT(b2->admission, c2->admission);  // in line order
}

TEST_P(RoomsConformanceTest, RoomCreatedPausedAdmitsNobodyAndStillDropsSilentWaiters) {
  RoomPatch p;
  p.capacity = 1;
  p.checkin_timeout_ms = 5'000;
  p.paused = true;
  auto created = Put("r", p);
  ASSERT_TRUE(created.ok()) << created.message();
  EXPECT_TRUE(created->config.paused);
  EXPECT_EQ(StatusOf("r", "a"), SessionStatus::kWaiting);
  AdvanceTime(5'000);
  ExpectCounts("r", 0, 0);
  auto got = Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->counters.dropped_total, 1);
}

TEST_P(RoomsConformanceTest, RateCapStillCountsAfterResume) {
  MakeRoom("r", 3, 5'000, /*checkin_timeout_ms=*/300'000, 300'000, /*admit_per_minute=*/1);
  ASSERT_TRUE(Put("r", Paused(true)).ok());
  for (const char* s : {"a", "b"}) Arrive("r", s);
  AdvanceTime(61'000);  // a whole window passes while paused: nothing banked
  ExpectCounts("r", 0, 2);
  ASSERT_TRUE(Put("r", Paused(false)).ok());
  ExpectCounts("r", 1, 1);
  AdvanceTime(60'000);
  ExpectCounts("r", 2, 0);
}

TEST_P(RoomsConformanceTest, TargetUrlRoundTripsAndClears) {
  RoomPatch p;
  p.capacity = 1;
  p.target_url = std::optional<std::string>("https://shop.example/checkout?from=wait#top");
  auto created = Put("r", p);
  ASSERT_TRUE(created.ok()) << created.message();
  EXPECT_EQ(created->config.target_url, p.target_url);
  auto got = Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config.target_url, p.target_url);
  auto list = List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().config.target_url, p.target_url);

  RoomPatch other;  // a patch without the field keeps it
  other.capacity = 2;
  auto kept = Put("r", other);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->config.target_url, p.target_url);

  RoomPatch path;
  path.target_url = std::optional<std::string>("/welcome");
  auto changed = Put("r", path);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->config.target_url, std::optional<std::string>("/welcome"));

  RoomPatch clear;
  clear.target_url = std::optional<std::string>();
  auto cleared = Put("r", clear);
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->config.target_url, std::nullopt);
  got = Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config.target_url, std::nullopt);
  EXPECT_EQ(got->config.capacity, 2);
}

// A room's gate settings: one JSON text the engine keeps byte for byte and never reads (any
// UTF-8, escapes, up to core::kMaxGateBytes).
const std::string kGate =
    R"({"cookie":"anteroom_pass","bypass":{"paths":["/static/*","/caf\u00e9/*"],)"
    R"("headers":[{"name":"X-Probe","value":"1"}]},"hosts":["shop.example",)"
    "\"b\xc3\xbc"
    "cher.example\"],\"note\":\"\xf0\x9f\x9a\xaa \\\"quoted\\\"\\n\"}";

RoomPatch GatePatch(std::optional<std::string> gate) {
  RoomPatch p;
  p.gate = std::move(gate);
  return p;
}

TEST_P(RoomsConformanceTest, GateRoundTripsReplacesAndClears) {
  RoomPatch p;
  p.capacity = 1;
  p.target_url = std::optional<std::string>("/in");
  p.gate = kGate;
  auto created = Put("r", p);
  ASSERT_TRUE(created.ok()) << created.message();
  EXPECT_EQ(created->config.gate, kGate);
  auto got = Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config.gate, kGate);
  auto list = List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().config.gate, kGate);
  EXPECT_EQ(Check("r", "a")->status, SessionStatus::kActive) << "the rules do not read it";

  RoomPatch other;  // a patch without the field keeps it
  other.capacity = 2;
  other.paused = true;
  auto kept = Put("r", other);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->config.gate, kGate);
  EXPECT_EQ(kept->config.target_url, std::optional<std::string>("/in"));

  const char raw_bytes[] = "{\"raw\":\"\0\xff:\"}";  // binary-safe: a NUL, a byte not UTF-8
  for (const std::string& replacement :
       {std::string(R"({"cookie":"other"})"), std::string(core::kMaxGateBytes, 'x'),
        std::string(raw_bytes, sizeof raw_bytes - 1), std::string()}) {
    auto changed = Put("r", GatePatch(replacement));
    ASSERT_TRUE(changed.ok()) << changed.message();
    EXPECT_EQ(changed->config.gate, replacement) << replacement.size();
    got = Get("r");
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->config.gate, replacement) << "an empty text is a gate, not none";
  }

  auto cleared = Put("r", GatePatch(std::nullopt));
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->config.gate, std::nullopt);
  got = Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config.gate, std::nullopt);
  EXPECT_EQ(got->config.capacity, 2);
  EXPECT_TRUE(got->config.paused);
  EXPECT_EQ(got->config.target_url, std::optional<std::string>("/in"));
  list = List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().config.gate, std::nullopt);
  EXPECT_EQ(Put("r", GatePatch(std::nullopt))->config.gate, std::nullopt) << "cleared twice";

  // Deleting answers the gate; the room made again under the name starts without one.
  ASSERT_TRUE(Put("r", GatePatch(kGate)).ok());
  auto deleted = Delete("r");
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->config.gate, kGate);
  RoomPatch again;
  again.capacity = 1;
  auto remade = Put("r", again);
  ASSERT_TRUE(remade.ok());
  EXPECT_EQ(remade->config.gate, std::nullopt);
  EXPECT_EQ(Get("r")->config.gate, std::nullopt);
  // A change that names only the gate creates nothing.
  EXPECT_EQ(Put("absent", GatePatch(kGate)).status(), OpStatus::kInvalidArgument);
  EXPECT_EQ(Get("absent").status(), OpStatus::kUnknownRoom);
}

// A room's page settings: one JSON text kept byte for byte beside the gate (and apart from it),
// replaced, cleared, gone with the room, and back after a restart.
const std::string kPage =
    R"({"title":"Winter \u00e9 <drop>","message":"line\nline","colors":{"accent":"#2f6fde"},)"
    "\"language\":\"ja\",\"note\":\"\xe3\x81\x8a\"}";

RoomPatch PagePatch(std::optional<std::string> page) {
  RoomPatch p;
  p.page = std::move(page);
  return p;
}

TEST_P(RoomsConformanceTest, PageRoundTripsReplacesClearsAndSurvivesRestarts) {
  RoomPatch p;
  p.capacity = 1;
  p.gate = kGate;
  p.page = kPage;
  auto created = Put("r", p);
  ASSERT_TRUE(created.ok()) << created.message();
  EXPECT_EQ(created->config.page, kPage);
  EXPECT_EQ(created->config.gate, kGate);
  EXPECT_EQ(Get("r")->config.page, kPage);
  auto list = List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().config.page, kPage);
  EXPECT_EQ(Check("r", "a")->status, SessionStatus::kActive) << "the rules do not read it";

  RoomPatch other;  // a patch without the field keeps it
  other.capacity = 2;
  EXPECT_EQ(Put("r", other)->config.page, kPage);
  EXPECT_EQ(Put("r", GatePatch(std::nullopt))->config.page, kPage) << "apart from the gate";
  for (const std::string& replacement :
       {std::string(R"({"title":"x"})"), std::string(core::kMaxPageBytes, 'p'), std::string()}) {
    auto changed = Put("r", PagePatch(replacement));
    ASSERT_TRUE(changed.ok()) << changed.message();
    EXPECT_EQ(changed->config.page, replacement) << replacement.size();
    EXPECT_EQ(Get("r")->config.page, replacement) << "an empty text is a page, not none";
  }
  auto cleared = Put("r", PagePatch(std::nullopt));
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->config.page, std::nullopt);
  EXPECT_EQ(Get("r")->config.page, std::nullopt);
  EXPECT_EQ(Get("r")->config.capacity, 2);

  // Deleting answers the page; the room made again under the name starts without one.
  ASSERT_TRUE(Put("r", PagePatch(kPage)).ok());
  auto deleted = Delete("r");
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->config.page, kPage);
  RoomPatch again;
  again.capacity = 1;
  EXPECT_EQ(Put("r", again)->config.page, std::nullopt);
  EXPECT_EQ(Put("absent", PagePatch(kPage)).status(), OpStatus::kInvalidArgument);

  // Across restarts: from the log alone, then from a snapshot plus the log.
  RoomPatch created_with;
  created_with.capacity = 1;
  created_with.page = kPage;
  ASSERT_TRUE(Put("created", created_with).ok());
  MakeRoom("cleared", 1);
  ASSERT_TRUE(Put("cleared", PagePatch(kPage)).ok());
  ASSERT_TRUE(Put("cleared", PagePatch(std::nullopt)).ok());
  if (!harness_->Restart()) GTEST_SKIP() << GetParam().name << " keeps nothing across restarts";
  EXPECT_EQ(Get("created")->config.page, kPage);
  EXPECT_EQ(Get("cleared")->config.page, std::nullopt);
  EXPECT_EQ(Get("r")->config.page, std::nullopt);
  auto* durable = dynamic_cast<conformance::DurableHarness*>(harness_.get());
  if (durable) durable->Compact();
  ASSERT_TRUE(Put("cleared", PagePatch(R"({"title":"after"})")).ok());
  ASSERT_TRUE(harness_->Restart());
  EXPECT_EQ(Get("created")->config.page, kPage);
  EXPECT_EQ(Get("cleared")->config.page, std::optional<std::string>(R"({"title":"after"})"));
}

// Kept across restarts: from the log alone, then (log backends) from a snapshot plus the log;
// for Redis, by another backend on the same prefix.
TEST_P(RoomsConformanceTest, GateSurvivesRestarts) {
  const std::string other = R"({"cookie":"second"})";
  RoomPatch create;
  create.capacity = 1;
  create.gate = kGate;
  ASSERT_TRUE(Put("created", create).ok());
  MakeRoom("replaced", 1);
  ASSERT_TRUE(Put("replaced", GatePatch(kGate)).ok());
  MakeRoom("cleared", 1);
  ASSERT_TRUE(Put("cleared", GatePatch(kGate)).ok());
  ASSERT_TRUE(Put("cleared", GatePatch(std::nullopt)).ok());
  MakeRoom("kept", 1);
  ASSERT_TRUE(Put("kept", GatePatch(other)).ok());
  ASSERT_TRUE(Put("kept", create).ok()) << "capacity and the gate";
  ASSERT_TRUE(Put("kept", GatePatch(other)).ok());
  Arrive("kept", "a");
  if (!harness_->Restart()) GTEST_SKIP() << GetParam().name << " keeps nothing across restarts";
  auto expect_gates = [&](std::optional<std::string> replaced, std::optional<std::string> cleared) {
    std::map<std::string, std::optional<std::string>> want = {
        {"created", kGate}, {"kept", other}, {"replaced", replaced}, {"cleared", cleared}};
    auto list = List();
    ASSERT_TRUE(list.ok()) << list.message();
    EXPECT_EQ(list->size(), want.size());
    for (const RoomInfo& info : *list) {
      EXPECT_EQ(info.config.gate, want[info.room]) << info.room;
      auto got = Get(info.room);
      ASSERT_TRUE(got.ok()) << info.room;
      EXPECT_EQ(got->config.gate, want[info.room]) << info.room;
    }
  };
  expect_gates(kGate, std::nullopt);  // the log alone
  EXPECT_EQ(Check("kept", "a")->status, SessionStatus::kActive);

  auto* durable = dynamic_cast<conformance::DurableHarness*>(harness_.get());
  if (durable) durable->Compact();  // the gates so far come back from the snapshot
  ASSERT_TRUE(Put("replaced", GatePatch(other)).ok());
  ASSERT_TRUE(Put("cleared", GatePatch(kGate)).ok());
  RoomPatch capacity_only;
  capacity_only.capacity = 2;
  ASSERT_TRUE(Put("created", capacity_only).ok());
  ASSERT_TRUE(harness_->Restart());
  expect_gates(other, kGate);
  EXPECT_EQ(Get("created")->config.capacity, 2);
  AdvanceTime(1'000);
  ASSERT_TRUE(harness_->Restart());  // after a restart that replayed them
  expect_gates(other, kGate);
}

TEST_P(RoomsConformanceTest, RoomsAreIndependent) {
  MakeRoom("one", 1, /*grace_ms=*/1'000);
  MakeRoom("two", 1, /*grace_ms=*/60'000);
  Arrive("one", "x");
  Arrive("one", "u");
  Arrive("two", "u");
  Arrive("two", "x");
  EXPECT_EQ(StatusOf("one", "u"), SessionStatus::kWaiting);
  EXPECT_EQ(StatusOf("two", "u"), SessionStatus::kActive);
  ASSERT_TRUE(Leave("one", "x", false).ok());
  ASSERT_TRUE(Leave("two", "u", false).ok());
  AdvanceTime(1'000);
  ExpectCounts("one", 1, 0);  // grace over in "one" only
  ExpectCounts("two", 1, 1);
  ASSERT_TRUE(Delete("one").ok());
  EXPECT_EQ(StatusOf("two", "u"), SessionStatus::kActive);
  EXPECT_EQ(PositionOf("two", "x"), 1);
}

// ---- per-client limits and the challenge ----------------------------------------------------

TEST_P(RoomsConformanceTest, LimitsAndChallengeAreSetEchoedAndCleared) {
  MakeRoom("r", 2);
  RoomPatch on;
  on.joins_per_minute_per_client = std::optional<int64_t>(60);
  on.places_per_client = std::optional<int64_t>(5);
  on.challenge_difficulty = std::optional<int64_t>(12);
  auto set = Put("r", on);
  ASSERT_TRUE(set.ok()) << set.message();
  EXPECT_EQ(set->config.joins_per_minute_per_client, std::optional<int64_t>(60));
  EXPECT_EQ(set->config.places_per_client, std::optional<int64_t>(5));
  EXPECT_EQ(set->config.challenge_difficulty, std::optional<int64_t>(12));
  EXPECT_EQ(set->config.capacity, 2);
  RoomPatch other;
  other.capacity = 3;
  auto kept = Put("r", other);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->config.places_per_client, std::optional<int64_t>(5));
  RoomPatch off;
  off.joins_per_minute_per_client = std::optional<int64_t>();
  off.places_per_client = std::optional<int64_t>();
  off.challenge_difficulty = std::optional<int64_t>();
  auto cleared = Put("r", off);
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->config.joins_per_minute_per_client, std::nullopt);
  EXPECT_EQ(cleared->config.places_per_client, std::nullopt);
  EXPECT_EQ(cleared->config.challenge_difficulty, std::nullopt);
  auto got = Get("r");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->config.places_per_client, std::nullopt);
}

TEST_P(RoomsConformanceTest, PlacesPerClientCapsLivePlaces) {
  MakeRoom("r", 1, /*grace_ms=*/5'000, /*checkin_timeout_ms=*/9'000);
  RoomPatch limit;
  limit.places_per_client = std::optional<int64_t>(2);
  ASSERT_TRUE(Put("r", limit).ok());
  ASSERT_TRUE(Join("r", "a", "192.0.2.1").ok());  // active
  ASSERT_TRUE(Join("r", "b", "192.0.2.1").ok());  // waiting
  auto third = Join("r", "c", "192.0.2.1");
  EXPECT_EQ(third.status(), OpStatus::kRateLimited);
  EXPECT_EQ(third.retry_after_ms(), 9'000);  // a place left behind drops out by then
  EXPECT_NE(third.message().find("places_per_client"), std::string::npos) << third.message();
  ExpectCounts("r", 1, 1);  // the refused join changed nothing
  // Check-ins of places it holds are never refused; other clients and joins without a client
  // are not counted.
  EXPECT_TRUE(Join("r", "a", "192.0.2.1").ok());
  EXPECT_TRUE(Join("r", "b", "192.0.2.1").ok());
  EXPECT_TRUE(Join("r", "x", "192.0.2.2").ok());
  EXPECT_TRUE(Check("r", "y").ok());
  // A place given up (here: a waiting session leaving) lets it join again.
  ASSERT_TRUE(Leave("r", "b", false).ok());
  EXPECT_TRUE(Join("r", "c", "192.0.2.1").ok());
  EXPECT_EQ(Join("r", "d", "192.0.2.1").status(), OpStatus::kRateLimited);
  // Grace still holds the place; the end of grace gives it back.
  ASSERT_TRUE(Leave("r", "a", false).ok());
  EXPECT_EQ(Join("r", "d", "192.0.2.1").status(), OpStatus::kRateLimited);
  AdvanceTime(5'000);
  EXPECT_TRUE(Join("r", "d", "192.0.2.1").ok());
}

TEST_P(RoomsConformanceTest, JoinsPerMinutePerClientIsATokenBucket) {
  MakeRoom("r", 100);
  RoomPatch limit;
  limit.joins_per_minute_per_client = std::optional<int64_t>(3);  // one token per 20 s
  ASSERT_TRUE(Put("r", limit).ok());
  for (const char* s : {"a", "b", "c"}) ASSERT_TRUE(Join("r", s, "192.0.2.1").ok()) << s;
  auto empty = Join("r", "d", "192.0.2.1");
  EXPECT_EQ(empty.status(), OpStatus::kRateLimited);
  EXPECT_EQ(empty.retry_after_ms(), 20'000);
  EXPECT_NE(empty.message().find("joins_per_minute_per_client"), std::string::npos);
  // Check-ins take no token; another client has a bucket of its own.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Join("r", "a", "192.0.2.1").ok());
  EXPECT_TRUE(Join("r", "x", "2001:db8::/64").ok());
  // Refilled continuously: one token after 20 s, not a whole minute's worth.
  AdvanceTime(19'999);
  EXPECT_EQ(Join("r", "d", "192.0.2.1").retry_after_ms(), 1);
  AdvanceTime(1);
  EXPECT_TRUE(Join("r", "d", "192.0.2.1").ok());
  EXPECT_EQ(Join("r", "e", "192.0.2.1").retry_after_ms(), 20'000);
  // Leaving gives no token back: tokens count joins, places count what is held.
  ASSERT_TRUE(Leave("r", "d", true).ok());
  EXPECT_EQ(Join("r", "e", "192.0.2.1").status(), OpStatus::kRateLimited);
  // A new rate starts every bucket full.
  limit.joins_per_minute_per_client = std::optional<int64_t>(2);
  ASSERT_TRUE(Put("r", limit).ok());
  EXPECT_TRUE(Join("r", "e", "192.0.2.1").ok());
  EXPECT_TRUE(Join("r", "f", "192.0.2.1").ok());
  EXPECT_EQ(Join("r", "g", "192.0.2.1").retry_after_ms(), 30'000);
  ExpectCounts("r", 6, 0);  // a, b, c, x, e, f
}

TEST_P(RoomsConformanceTest, ChallengeGuardsNewPlacesOnly) {
  MakeRoom("r", 1);
  RoomPatch on;
  on.challenge_difficulty = std::optional<int64_t>(6);
  on.places_per_client = std::optional<int64_t>(1);
  ASSERT_TRUE(Put("r", on).ok());
  auto weak = Join("r", "a", "192.0.2.1", 5);
  EXPECT_EQ(weak.status(), OpStatus::kChallengeRequired);
  EXPECT_EQ(Check("r", "a").status(), OpStatus::kChallengeRequired);  // no client, no proof
  ExpectCounts("r", 0, 0);
  auto a = Join("r", "a", "192.0.2.1", 6);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->status, SessionStatus::kActive);
  // Known: check-ins need no proof. The challenge comes before the per-client limits.
  EXPECT_TRUE(Join("r", "a", "192.0.2.1", 0).ok());
  EXPECT_TRUE(Check("r", "a").ok());
  EXPECT_EQ(Join("r", "b", "192.0.2.1", 0).status(), OpStatus::kChallengeRequired);
  EXPECT_EQ(Join("r", "b", "192.0.2.1", 30).status(), OpStatus::kRateLimited);
  // Gone, it must show a proof again.
  ASSERT_TRUE(Leave("r", "a", true).ok());
  EXPECT_EQ(Join("r", "a", "192.0.2.1", 0).status(), OpStatus::kChallengeRequired);
  // Off again: anyone joins.
  RoomPatch off;
  off.challenge_difficulty = std::optional<int64_t>();
  ASSERT_TRUE(Put("r", off).ok());
  EXPECT_TRUE(Check("r", "z").ok());
}

TEST_P(RoomsConformanceTest, ClientStateOfADeletedRoomIsGone) {
  MakeRoom("r", 1);
  RoomPatch limit;
  limit.places_per_client = std::optional<int64_t>(1);
  ASSERT_TRUE(Put("r", limit).ok());
  ASSERT_TRUE(Join("r", "a", "192.0.2.1").ok());
  EXPECT_EQ(Join("r", "b", "192.0.2.1").status(), OpStatus::kRateLimited);
  ASSERT_TRUE(Delete("r").ok());
  MakeRoom("r", 1);
  ASSERT_TRUE(Put("r", limit).ok());
  EXPECT_TRUE(Join("r", "b", "192.0.2.1").ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, RoomsConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
