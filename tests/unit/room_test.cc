// Unit tests of core::Room: every rule of the waiting room (src/core/room.h), with explicit
// millisecond times.

#include "core/room.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;  // a whole second, so window maths is easy to read
constexpr int64_t kTokenTtlMs = 600'000;

RoomConfig Config(int64_t capacity) {
  RoomConfig c;
  c.capacity = capacity;
  c.grace_ms = 5'000;
  c.checkin_timeout_ms = 30'000;
  c.idle_timeout_ms = 300'000;
  return c;
}

std::unique_ptr<Room> MakeRoom(RoomConfig config, int64_t now = kT0) {
  return std::make_unique<Room>(config, kTokenTtlMs, now);
}

// Work-conserving without a rate cap: nobody waits while a slot is free.
void ExpectWorkConserving(const Room& room) {
  if (room.waiting() > 0) {
    EXPECT_GE(room.holders(), room.config().capacity)
        << "someone waits while a slot is free (waiting=" << room.waiting() << ")";
  }
}

TEST(RoomTest, CapacityOneAdmitsExactlyOne) {
  auto room = MakeRoom(Config(1));
  SessionView a = room->Check("a", kT0);
  EXPECT_EQ(a.status, SessionStatus::kActive);
  EXPECT_EQ(a.active, 1);
  EXPECT_EQ(a.capacity, 1);
  EXPECT_EQ(a.position, 0);
  SessionView b = room->Check("b", kT0 + 1);
  EXPECT_EQ(b.status, SessionStatus::kWaiting);
  EXPECT_EQ(b.position, 1);
  EXPECT_EQ(b.waiting, 1);
  EXPECT_EQ(b.active, 1);
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->waiting(), 1);
  // Checking again does not change anybody's place.
  EXPECT_EQ(room->Check("a", kT0 + 2).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("b", kT0 + 3).position, 1);
}

TEST(RoomTest, FirstComeFirstServed) {
  auto room = MakeRoom(Config(2));
  std::vector<std::string> ids;
  for (int i = 0; i < 8; ++i) {
    ids.push_back("s" + std::to_string(i));
    room->Check(ids.back(), kT0 + i);
  }
  // Free one slot at a time; the line must be admitted in arrival order.
  int64_t now = kT0 + 100;
  uint64_t last_admission = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    SessionView v = room->Check(ids[i], now);
    ASSERT_EQ(v.status, SessionStatus::kActive) << ids[i];
    EXPECT_GT(v.admission, last_admission);
    last_admission = v.admission;
    for (size_t j = i + 2; j < ids.size(); ++j) {
      EXPECT_EQ(room->Check(ids[j], now).position, static_cast<int64_t>(j - i - 1)) << ids[j];
    }
    ASSERT_TRUE(room->Leave(ids[i], /*final=*/true, now).ok());
    ExpectWorkConserving(*room);
    now += 10;
  }
}

TEST(RoomTest, PositionsAreExactAfterMiddleLeaves) {
  auto room = MakeRoom(Config(1));
  for (const char* id : {"a", "b", "c", "d", "e", "f"}) room->Check(id, kT0);
  // Line: b c d e f.
  EXPECT_EQ(room->Check("d", kT0 + 1).position, 3);
  EXPECT_EQ(room->Leave("c", /*final=*/false, kT0 + 2)->status, SessionStatus::kGone);
  SessionView d = room->Check("d", kT0 + 3);
  EXPECT_EQ(d.position, 2);
  EXPECT_EQ(d.waiting, 4);
  ASSERT_TRUE(room->Evict("e", kT0 + 4).ok());  // the app removes a waiting session
  SessionView f = room->Check("f", kT0 + 5);
  EXPECT_EQ(f.position, 3);
  EXPECT_EQ(f.waiting, 3);
  EXPECT_EQ(room->Check("b", kT0 + 6).position, 1);
  // The front leaves: everybody moves up by one.
  ASSERT_TRUE(room->Leave("b", /*final=*/true, kT0 + 7).ok());
  EXPECT_EQ(room->Check("d", kT0 + 8).position, 1);
  EXPECT_EQ(room->Check("f", kT0 + 9).position, 2);
  EXPECT_EQ(room->waiting(), 2);
}

TEST(RoomTest, PositionsStayExactInALongLine) {
  auto room = MakeRoom(Config(3));
  const int kSessions = 500;
  for (int i = 0; i < kSessions; ++i) room->Check("s" + std::to_string(i), kT0);
  // Remove every third waiting session; the rest keep their order.
  for (int i = 3; i < kSessions; i += 3) {
    ASSERT_TRUE(room->Leave("s" + std::to_string(i), false, kT0 + 1).ok());
  }
  int64_t expected = 0;
  for (int i = 3; i < kSessions; ++i) {
    if (i % 3 == 0) continue;
    ++expected;
    EXPECT_EQ(room->Check("s" + std::to_string(i), kT0 + 2).position, expected) << i;
  }
  EXPECT_EQ(room->waiting(), expected);
}

TEST(RoomTest, WorkConservingWhenSlotsFree) {
  auto room = MakeRoom(Config(3));
  for (const char* id : {"a", "b", "c", "d", "e"}) room->Check(id, kT0);
  EXPECT_EQ(room->holders(), 3);
  EXPECT_EQ(room->waiting(), 2);
  ASSERT_TRUE(room->Leave("a", true, kT0 + 1).ok());
  EXPECT_EQ(room->holders(), 3);
  EXPECT_EQ(room->waiting(), 1);
  ASSERT_TRUE(room->Evict("b", kT0 + 2).ok());
  EXPECT_EQ(room->holders(), 3);
  EXPECT_EQ(room->waiting(), 0);
  ASSERT_TRUE(room->Leave("c", true, kT0 + 3).ok());
  EXPECT_EQ(room->holders(), 2);
  // A newcomer with a free slot goes straight in.
  EXPECT_EQ(room->Check("f", kT0 + 4).status, SessionStatus::kActive);
  ExpectWorkConserving(*room);
}

TEST(RoomTest, WaitingSessionDroppedAfterCheckinTimeout) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);          // waits, never checks in again
  room->Check("c", kT0 + 1'000);  // waits behind b
  room->Advance(kT0 + 29'999);
  EXPECT_EQ(room->waiting(), 2);
  room->Advance(kT0 + 30'000);  // b's deadline: exactly checkin_timeout after its last check
  EXPECT_EQ(room->waiting(), 1);
  EXPECT_EQ(room->counters().dropped_total, 1);
  SessionView c = room->Check("c", kT0 + 30'500);
  EXPECT_EQ(c.position, 1);
  // b comes back: it joins at the back, like a new arrival.
  SessionView b = room->Check("b", kT0 + 30'600);
  EXPECT_EQ(b.status, SessionStatus::kWaiting);
  EXPECT_EQ(b.position, 2);
  EXPECT_EQ(b.waiting, 2);
}

TEST(RoomTest, WaitingSessionThatChecksInKeepsItsPlace) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("c", kT0);
  // b checks in just before each deadline; c does too: both keep their places for minutes.
  for (int64_t t = kT0 + 29'999; t < kT0 + 200'000; t += 29'999) {
    EXPECT_EQ(room->Check("b", t).position, 1);
    EXPECT_EQ(room->Check("c", t).position, 2);
  }
  // Last checks at kT0 + 179994. A touch is a sign of life too.
  ASSERT_TRUE(room->Touch("b", kT0 + 200'000).ok());
  ASSERT_TRUE(room->Touch("c", kT0 + 200'000).ok());
  room->Advance(kT0 + 229'999);
  EXPECT_EQ(room->waiting(), 2);
  room->Advance(kT0 + 230'000);
  EXPECT_EQ(room->waiting(), 0);
}

TEST(RoomTest, LeaveThenCheckWithinGraceIsActiveAgainAtOnce) {
  auto room = MakeRoom(Config(1));  // grace 5 s
  room->Check("a", kT0);
  room->Check("b", kT0);
  auto left = room->Leave("a", /*final=*/false, kT0 + 1'000);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->status, SessionStatus::kGrace);
  EXPECT_EQ(left->active, 1);  // a slot in grace still counts as held
  EXPECT_EQ(room->Check("b", kT0 + 2'000).status, SessionStatus::kWaiting);
  SessionView back = room->Check("a", kT0 + 5'999);
  EXPECT_EQ(back.status, SessionStatus::kActive);
  // Active again: the old grace deadline must not free the slot.
  room->Check("b", kT0 + 6'000);
  room->Advance(kT0 + 20'000);
  EXPECT_EQ(room->Check("b", kT0 + 20'000).status, SessionStatus::kWaiting);
  EXPECT_EQ(room->holders(), 1);
}

TEST(RoomTest, TouchWithinGraceIsActiveAgain) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  ASSERT_TRUE(room->Leave("a", false, kT0 + 1'000).ok());
  auto touched = room->Touch("a", kT0 + 2'000);
  ASSERT_TRUE(touched.ok());
  EXPECT_EQ(touched->status, SessionStatus::kActive);
  room->Advance(kT0 + 10'000);
  EXPECT_EQ(room->waiting(), 1);
  EXPECT_EQ(room->holders(), 1);
}

TEST(RoomTest, GraceOverGivesSlotToHeadOfLine) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("c", kT0);
  ASSERT_TRUE(room->Leave("a", false, kT0 + 1'000).ok());  // grace ends at kT0 + 6000
  room->Advance(kT0 + 5'999);
  EXPECT_EQ(room->waiting(), 2);
  room->Advance(kT0 + 6'000);
  EXPECT_EQ(room->waiting(), 1);
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->Check("b", kT0 + 6'001).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("c", kT0 + 6'002).position, 1);
  // a returns after grace: joins at the back.
  SessionView a = room->Check("a", kT0 + 6'003);
  EXPECT_EQ(a.status, SessionStatus::kWaiting);
  EXPECT_EQ(a.position, 2);
}

TEST(RoomTest, CheckExactlyAtGraceEndJoinsAtBack) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  ASSERT_TRUE(room->Leave("a", false, kT0).ok());
  // Grace is [leave, leave + grace_ms): at the end the slot already went to b.
  SessionView a = room->Check("a", kT0 + 5'000);
  EXPECT_EQ(a.status, SessionStatus::kWaiting);
  EXPECT_EQ(a.position, 1);
}

TEST(RoomTest, NonFinalLeaveInGraceDoesNotExtendGrace) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  ASSERT_TRUE(room->Leave("a", false, kT0).ok());
  auto again = room->Leave("a", false, kT0 + 4'000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status, SessionStatus::kGrace);
  room->Advance(kT0 + 5'000);
  EXPECT_EQ(room->waiting(), 0);  // b got the slot at the first grace's end
}

TEST(RoomTest, FinalLeaveFreesSlotAtOnce) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  auto gone = room->Leave("a", /*final=*/true, kT0 + 1);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, SessionStatus::kGone);
  EXPECT_EQ(gone->active, 1);  // b is in
  EXPECT_EQ(gone->waiting, 0);
  EXPECT_EQ(room->Check("b", kT0 + 2).status, SessionStatus::kActive);
  // a is forgotten: touch no longer knows it.
  EXPECT_EQ(room->Touch("a", kT0 + 3).status(), OpStatus::kUnknownSession);
}

TEST(RoomTest, FinalLeaveInGraceFreesSlotAtOnce) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  ASSERT_TRUE(room->Leave("a", false, kT0 + 1).ok());
  auto gone = room->Leave("a", true, kT0 + 2);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, SessionStatus::kGone);
  EXPECT_EQ(room->waiting(), 0);
  EXPECT_EQ(room->holders(), 1);
}

TEST(RoomTest, LeaveOfWaitingSessionTakesItOutOfLine) {
  for (bool final : {false, true}) {
    SCOPED_TRACE(final ? "final" : "not final");
    auto room = MakeRoom(Config(1));
    room->Check("a", kT0);
    room->Check("b", kT0);
    room->Check("c", kT0);
    auto gone = room->Leave("b", final, kT0 + 1);
    ASSERT_TRUE(gone.ok());
    EXPECT_EQ(gone->status, SessionStatus::kGone);
    EXPECT_EQ(gone->waiting, 1);
    EXPECT_EQ(room->Check("c", kT0 + 2).position, 1);
    EXPECT_EQ(room->Touch("b", kT0 + 3).status(), OpStatus::kUnknownSession);
    EXPECT_EQ(room->Check("b", kT0 + 4).position, 2);  // back of the line
  }
}

TEST(RoomTest, UnknownSessionIsReportedAndChangesNothing) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  EXPECT_EQ(room->Touch("nobody", kT0 + 1).status(), OpStatus::kUnknownSession);
  EXPECT_EQ(room->Leave("nobody", false, kT0 + 1).status(), OpStatus::kUnknownSession);
  EXPECT_EQ(room->Leave("nobody", true, kT0 + 1).status(), OpStatus::kUnknownSession);
  EXPECT_EQ(room->Evict("nobody", kT0 + 1).status(), OpStatus::kUnknownSession);
  EXPECT_EQ(room->sessions(), 2u);
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->waiting(), 1);
  // A session that was dropped is unknown too.
  room->Advance(kT0 + 30'000);
  EXPECT_EQ(room->waiting(), 0);
  EXPECT_EQ(room->Touch("b", kT0 + 30'001).status(), OpStatus::kUnknownSession);
  EXPECT_EQ(room->Leave("b", false, kT0 + 30'001).status(), OpStatus::kUnknownSession);
  EXPECT_EQ(room->Evict("b", kT0 + 30'001).status(), OpStatus::kUnknownSession);
}

TEST(RoomTest, IdleActiveSessionIsTreatedAsHavingLeft) {
  RoomConfig config = Config(1);
  config.idle_timeout_ms = 10'000;
  auto room = MakeRoom(config);
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Advance(kT0 + 9'999);
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->Check("b", kT0 + 9'999).status, SessionStatus::kWaiting);
  // At kT0 + 10000 a goes into grace (5 s): the slot is still held.
  room->Advance(kT0 + 14'999);
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->waiting(), 1);
  room->Advance(kT0 + 15'000);
  EXPECT_EQ(room->waiting(), 0);
  EXPECT_EQ(room->Check("b", kT0 + 15'000).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("a", kT0 + 15'001).status, SessionStatus::kWaiting);
}

TEST(RoomTest, IdleSessionReturningWithinGraceIsActiveAgain) {
  RoomConfig config = Config(1);
  config.idle_timeout_ms = 10'000;
  auto room = MakeRoom(config);
  room->Check("a", kT0);
  room->Check("b", kT0);
  // Idle since kT0: grace from kT0 + 10000 to kT0 + 15000.
  SessionView a = room->Check("a", kT0 + 14'000);
  EXPECT_EQ(a.status, SessionStatus::kActive);
  room->Check("b", kT0 + 14'000);
  room->Advance(kT0 + 23'999);  // the idle clock restarted at kT0 + 14000
  EXPECT_EQ(room->waiting(), 1);
  // b's own waiting deadline (kT0 + 44000) is later than a's release (kT0 + 29000).
  room->Advance(kT0 + 29'000);
  EXPECT_EQ(room->waiting(), 0);
  EXPECT_EQ(room->holders(), 1);
}

TEST(RoomTest, TouchKeepsActiveSessionFromIdling) {
  RoomConfig config = Config(1);
  config.idle_timeout_ms = 10'000;
  auto room = MakeRoom(config);
  room->Check("a", kT0);
  for (int64_t t = kT0 + 9'000; t < kT0 + 100'000; t += 9'000) {
    auto v = room->Touch("a", t);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->status, SessionStatus::kActive);
    EXPECT_EQ(room->Check("b" + std::to_string(t), t).status, SessionStatus::kWaiting);
  }
}

TEST(RoomTest, NoIdleTimeoutKeepsActiveSessionForever) {
  RoomConfig config = Config(1);
  config.idle_timeout_ms = std::nullopt;
  auto room = MakeRoom(config);
  room->Check("a", kT0);
  // The claim deadline's heap key is dropped lazily once reached; then nothing is pending.
  room->Advance(kT0 + 30'000);
  EXPECT_EQ(room->NextDeadline(), INT64_MAX);
  const int64_t later = kT0 + 30LL * 24 * 3600 * 1000;
  room->Advance(later);
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->Check("b", later).status, SessionStatus::kWaiting);
}

TEST(RoomTest, ClaimedActiveSessionNeedsNoCheckinsBeforeIdleTimeout) {
  auto room = MakeRoom(Config(1));  // checkin 30 s, idle 300 s
  room->Check("a", kT0);            // admitted during its own check: claimed
  room->Advance(kT0 + 299'999);
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->Check("b", kT0 + 299'999).status, SessionStatus::kWaiting);
}

TEST(RoomTest, UnclaimedAdmissionIsDroppedAndSlotGoesToNext) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("c", kT0);
  // b is admitted at kT0 + 10000 while not calling in.
  ASSERT_TRUE(room->Leave("a", true, kT0 + 10'000).ok());
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->Check("c", kT0 + 20'000).position, 1);
  EXPECT_EQ(room->Check("c", kT0 + 39'999).position, 1);
  // b never claimed: at kT0 + 40000 it is dropped and c takes the slot.
  SessionView c = room->Check("c", kT0 + 40'000);
  EXPECT_EQ(c.status, SessionStatus::kActive);
  EXPECT_EQ(room->counters().dropped_total, 1);
  SessionView b = room->Check("b", kT0 + 40'001);
  EXPECT_EQ(b.status, SessionStatus::kWaiting);
  EXPECT_EQ(b.position, 1);
}

TEST(RoomTest, UnclaimedAdmissionThatChecksInTimeKeepsSlot) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("c", kT0);
  ASSERT_TRUE(room->Leave("a", true, kT0 + 10'000).ok());
  room->Check("c", kT0 + 20'000);
  SessionView b = room->Check("b", kT0 + 39'999);
  EXPECT_EQ(b.status, SessionStatus::kActive);
  room->Check("c", kT0 + 45'000);
  room->Advance(kT0 + 60'000);
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->Check("c", kT0 + 60'000).status, SessionStatus::kWaiting);
}

TEST(RoomTest, CapacityRaisedAdmitsMoreAtOnce) {
  auto room = MakeRoom(Config(1));
  for (const char* id : {"a", "b", "c", "d"}) room->Check(id, kT0);
  RoomPatch patch;
  patch.capacity = 3;
  room->Reconfigure(patch, kT0 + 1);
  EXPECT_EQ(room->holders(), 3);
  EXPECT_EQ(room->waiting(), 1);
  EXPECT_EQ(room->Check("b", kT0 + 2).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("c", kT0 + 2).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("d", kT0 + 2).position, 1);
}

TEST(RoomTest, CapacityLoweredKeepsHoldersAndAdmitsNobodyUntilBelow) {
  auto room = MakeRoom(Config(3));
  for (const char* id : {"a", "b", "c", "d"}) room->Check(id, kT0);
  RoomPatch patch;
  patch.capacity = 1;
  room->Reconfigure(patch, kT0 + 1);
  EXPECT_EQ(room->holders(), 3);  // nobody is thrown out
  EXPECT_EQ(room->Check("a", kT0 + 2).status, SessionStatus::kActive);
  ASSERT_TRUE(room->Leave("a", true, kT0 + 3).ok());
  EXPECT_EQ(room->holders(), 2);
  EXPECT_EQ(room->Check("d", kT0 + 4).position, 1);
  ASSERT_TRUE(room->Leave("b", true, kT0 + 5).ok());
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->Check("d", kT0 + 6).position, 1);
  ASSERT_TRUE(room->Leave("c", true, kT0 + 7).ok());
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->Check("d", kT0 + 8).status, SessionStatus::kActive);
}

TEST(RoomTest, RateCapHoldsSlotsFreeUntilTheWindowAllows) {
  RoomConfig config = Config(10);
  config.admit_per_minute = 2;
  config.checkin_timeout_ms = 120'000;  // the waiters need not check in during the test
  auto room = MakeRoom(config);
  // Mid-second: the window is whole seconds, so these admissions leave it at kT0 + 60000.
  for (const char* id : {"a", "b", "c", "d", "e"}) room->Check(id, kT0 + 500);
  EXPECT_EQ(room->holders(), 2);
  EXPECT_EQ(room->waiting(), 3);
  EXPECT_EQ(room->Check("c", kT0 + 600).position, 1);
  EXPECT_EQ(room->NextDeadline(), kT0 + 60'000);
  room->Advance(kT0 + 59'999);
  EXPECT_EQ(room->holders(), 2);
  EXPECT_EQ(room->waiting(), 3);
  // Without any client call, the window opens and two more are admitted in order.
  room->Advance(kT0 + 60'000);
  EXPECT_EQ(room->holders(), 4);
  EXPECT_EQ(room->waiting(), 1);
  EXPECT_EQ(room->Check("c", kT0 + 60'001).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("d", kT0 + 60'001).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("e", kT0 + 60'001).position, 1);
  EXPECT_EQ(room->NextDeadline(), kT0 + 120'000);
}

TEST(RoomTest, RateCapDoesNotHoldBackWhenUnderTheCap) {
  RoomConfig config = Config(2);
  config.admit_per_minute = 5;
  auto room = MakeRoom(config);
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("c", kT0);
  ASSERT_TRUE(room->Leave("a", true, kT0 + 1'000).ok());  // 3rd admission: under the cap
  EXPECT_EQ(room->holders(), 2);
  EXPECT_EQ(room->waiting(), 0);
}

TEST(RoomTest, RemovingTheRateCapAdmitsAtOnce) {
  RoomConfig config = Config(5);
  config.admit_per_minute = 1;
  auto room = MakeRoom(config);
  for (const char* id : {"a", "b", "c"}) room->Check(id, kT0);
  EXPECT_EQ(room->holders(), 1);
  RoomPatch patch;
  patch.admit_per_minute = std::optional<int64_t>();  // null: unlimited
  room->Reconfigure(patch, kT0 + 1);
  EXPECT_EQ(room->holders(), 3);
  EXPECT_EQ(room->waiting(), 0);
  EXPECT_FALSE(room->config().admit_per_minute.has_value());
}

RoomPatch Paused(bool paused) {
  RoomPatch patch;
  patch.paused = paused;
  return patch;
}

TEST(RoomTest, PauseStopsAdmissionsButNotArrivalsLeavesOrDeadlines) {
  RoomConfig config = Config(2);
  config.checkin_timeout_ms = 10'000;
  auto room = MakeRoom(config);
  ASSERT_EQ(room->Check("a", kT0).status, SessionStatus::kActive);
  ASSERT_EQ(room->Check("b", kT0).status, SessionStatus::kActive);
  room->Reconfigure(Paused(true), kT0 + 1);
  EXPECT_TRUE(room->config().paused);
  // Arrivals join the line and keep their place; holders keep their slots.
  SessionView c = room->Check("c", kT0 + 2);
  EXPECT_EQ(c.status, SessionStatus::kWaiting);
  EXPECT_EQ(c.position, 1);
  EXPECT_EQ(room->Check("d", kT0 + 3).position, 2);
  EXPECT_EQ(room->Check("a", kT0 + 4).status, SessionStatus::kActive);
  ASSERT_TRUE(room->Touch("b", kT0 + 4).ok());
  // A final leave frees a slot, and it stays free.
  ASSERT_TRUE(room->Leave("a", /*final=*/true, kT0 + 5).ok());
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->waiting(), 2);
  EXPECT_EQ(room->Check("c", kT0 + 6).status, SessionStatus::kWaiting);
  // Grace running out frees the other slot; still nobody is admitted.
  ASSERT_TRUE(room->Leave("b", /*final=*/false, kT0 + 7).ok());
  room->Advance(kT0 + 7 + 5'000);
  EXPECT_EQ(room->holders(), 0);
  EXPECT_EQ(room->counters().released_total, 2);
  EXPECT_EQ(room->counters().admitted_total, 2);
  // Drop-outs still happen: d stopped checking in.
  room->Advance(kT0 + 3 + 10'000);
  EXPECT_EQ(room->waiting(), 1);
  EXPECT_EQ(room->counters().dropped_total, 1);
  EXPECT_EQ(room->Check("c", kT0 + 12'000).position, 1);
  EXPECT_EQ(room->holders(), 0);
}

TEST(RoomTest, ResumeAdmitsAtOnceInLineOrder) {
  RoomConfig config = Config(3);
  config.paused = true;  // created paused: even the first arrival waits
  auto room = MakeRoom(config);
  std::vector<std::string> ids{"a", "b", "c", "d", "e"};
  for (size_t i = 0; i < ids.size(); ++i) {
    SessionView v = room->Check(ids[i], kT0 + static_cast<int64_t>(i));
    EXPECT_EQ(v.status, SessionStatus::kWaiting) << ids[i];
    EXPECT_EQ(v.position, static_cast<int64_t>(i + 1)) << ids[i];
  }
  EXPECT_EQ(room->holders(), 0);
  room->Reconfigure(Paused(false), kT0 + 100);
  EXPECT_FALSE(room->config().paused);
  EXPECT_EQ(room->holders(), 3);
  EXPECT_EQ(room->waiting(), 2);
  for (uint64_t k = 0; k < 3; ++k) {
    SessionView v = room->Check(ids[k], kT0 + 101);
    EXPECT_EQ(v.status, SessionStatus::kActive) << ids[k];
    EXPECT_EQ(v.admission, k + 1) << ids[k];  // admitted in arrival order
  }
  EXPECT_EQ(room->Check("d", kT0 + 101).position, 1);
  EXPECT_EQ(room->Check("e", kT0 + 101).position, 2);
  ExpectWorkConserving(*room);
  // Pausing again and resuming with nobody free changes nothing.
  room->Reconfigure(Paused(true), kT0 + 200);
  room->Reconfigure(Paused(false), kT0 + 201);
  EXPECT_EQ(room->holders(), 3);
  EXPECT_EQ(room->waiting(), 2);
}

TEST(RoomTest, RateCapStillAppliesAfterResume) {
  RoomConfig config = Config(10);
  config.admit_per_minute = 2;
  config.checkin_timeout_ms = 120'000;
  config.paused = true;
  auto room = MakeRoom(config);
  for (const char* id : {"a", "b", "c", "d", "e"}) room->Check(id, kT0 + 100);
  EXPECT_EQ(room->holders(), 0);
  EXPECT_EQ(room->NextDeadline(), kT0 + 100 + 120'000);  // no rate-cap reopening while paused
  room->Reconfigure(Paused(false), kT0 + 500);
  EXPECT_EQ(room->holders(), 2);
  EXPECT_EQ(room->waiting(), 3);
  EXPECT_EQ(room->NextDeadline(), kT0 + 60'000);
  room->Advance(kT0 + 59'999);
  EXPECT_EQ(room->holders(), 2);
  room->Advance(kT0 + 60'000);
  EXPECT_EQ(room->holders(), 4);
  EXPECT_EQ(room->Check("c", kT0 + 60'001).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("d", kT0 + 60'001).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("e", kT0 + 60'001).position, 1);
}

TEST(RoomTest, PausedWhileTheRateCapHoldsASlotThenResumedLater) {
  RoomConfig config = Config(5);
  config.admit_per_minute = 1;
  config.checkin_timeout_ms = 300'000;
  auto room = MakeRoom(config);
  for (const char* id : {"a", "b", "c"}) room->Check(id, kT0);
  EXPECT_EQ(room->holders(), 1);
  room->Reconfigure(Paused(true), kT0 + 1);
  room->Advance(kT0 + 120'000);  // the window reopened twice: nobody comes in
  EXPECT_EQ(room->holders(), 1);
  room->Reconfigure(Paused(false), kT0 + 120'000);
  EXPECT_EQ(room->holders(), 2);  // one at once: the cap still counts
  EXPECT_EQ(room->Check("b", kT0 + 120'001).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("c", kT0 + 120'001).position, 1);
}

TEST(RoomTest, EtaIsNullWhilePaused) {
  auto room = MakeRoom(Config(1));
  for (const char* id : {"a", "b", "c"}) room->Check(id, kT0);
  ASSERT_TRUE(room->Leave("a", true, kT0 + 1'000).ok());  // b in; one release measured
  SessionView before = room->Check("c", kT0 + 1'001);
  ASSERT_TRUE(before.eta_ms.has_value());
  room->Reconfigure(Paused(true), kT0 + 1'002);
  SessionView paused = room->Check("c", kT0 + 1'003);
  EXPECT_EQ(paused.status, SessionStatus::kWaiting);
  EXPECT_EQ(paused.position, 1);
  EXPECT_FALSE(paused.eta_ms.has_value());
  auto touched = room->Touch("c", kT0 + 1'004);
  ASSERT_TRUE(touched.ok());
  EXPECT_FALSE(touched->eta_ms.has_value());
  EXPECT_EQ(room->Check("b", kT0 + 1'004).eta_ms, std::optional<int64_t>(0));  // a holder's eta
  room->Reconfigure(Paused(false), kT0 + 1'005);
  EXPECT_EQ(room->Check("c", kT0 + 1'006).eta_ms, before.eta_ms);
}

TEST(RoomTest, TargetUrlIsSetKeptAndCleared) {
  auto room = MakeRoom(Config(1));
  EXPECT_FALSE(room->config().target_url.has_value());
  RoomPatch set;
  set.target_url = std::optional<std::string>("https://shop.example/checkout");
  room->Reconfigure(set, kT0);
  EXPECT_EQ(room->config().target_url, std::optional<std::string>("https://shop.example/checkout"));
  RoomPatch other;
  other.capacity = 2;
  room->Reconfigure(other, kT0 + 1);
  EXPECT_EQ(room->config().target_url, std::optional<std::string>("https://shop.example/checkout"));
  RoomPatch clear;
  clear.target_url = std::optional<std::string>();
  room->Reconfigure(clear, kT0 + 2);
  EXPECT_FALSE(room->config().target_url.has_value());
}

TEST(RoomTest, FinalLeaveAndEvictRevokeOnlyThatAdmission) {
  auto room = MakeRoom(Config(1));
  SessionView a1 = room->Check("a", kT0);
  ASSERT_EQ(a1.status, SessionStatus::kActive);
  EXPECT_FALSE(room->IsRevoked("a", a1.admission, kT0 + 1));
  ASSERT_TRUE(room->Leave("a", /*final=*/true, kT0 + 2).ok());
  EXPECT_TRUE(room->IsRevoked("a", a1.admission, kT0 + 3));
  // Re-admitted: a larger admission number, not revoked; the old one stays revoked.
  SessionView a2 = room->Check("a", kT0 + 4);
  ASSERT_EQ(a2.status, SessionStatus::kActive);
  EXPECT_GT(a2.admission, a1.admission);
  EXPECT_FALSE(room->IsRevoked("a", a2.admission, kT0 + 5));
  EXPECT_TRUE(room->IsRevoked("a", a1.admission, kT0 + 5));
  ASSERT_TRUE(room->Evict("a", kT0 + 6).ok());
  EXPECT_TRUE(room->IsRevoked("a", a2.admission, kT0 + 7));
  EXPECT_EQ(room->holders(), 0);
  // Another session is not affected.
  SessionView b = room->Check("b", kT0 + 8);
  EXPECT_FALSE(room->IsRevoked("b", b.admission, kT0 + 9));
}

TEST(RoomTest, NonFinalLeaveDoesNotRevoke) {
  auto room = MakeRoom(Config(1));
  SessionView a = room->Check("a", kT0);
  ASSERT_TRUE(room->Leave("a", false, kT0 + 1).ok());
  EXPECT_FALSE(room->IsRevoked("a", a.admission, kT0 + 2));
  EXPECT_EQ(room->Check("a", kT0 + 3).admission, a.admission);  // same admission again
}

TEST(RoomTest, EvictFreesSlotForNextInLine) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  auto gone = room->Evict("a", kT0 + 1);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, SessionStatus::kGone);
  EXPECT_EQ(gone->active, 1);
  EXPECT_EQ(gone->waiting, 0);
  EXPECT_EQ(room->Check("b", kT0 + 2).status, SessionStatus::kActive);
}

TEST(RoomTest, EtaIsUnknownUntilSlotsFree) {
  auto room = MakeRoom(Config(1));
  for (const char* id : {"a", "b", "c", "d"}) room->Check(id, kT0);
  EXPECT_FALSE(room->Check("c", kT0 + 1).eta_ms.has_value());
  ASSERT_TRUE(room->Leave("a", true, kT0 + 1'000).ok());
  SessionView c = room->Check("c", kT0 + 1'001);
  SessionView d = room->Check("d", kT0 + 1'001);
  ASSERT_EQ(c.position, 1);
  ASSERT_TRUE(c.eta_ms.has_value());
  ASSERT_TRUE(d.eta_ms.has_value());
  EXPECT_GT(*c.eta_ms, 0);
  EXPECT_GT(*d.eta_ms, *c.eta_ms);  // further back waits longer
  // A faster measured rate gives a shorter estimate for the same position.
  ASSERT_TRUE(room->Leave("b", true, kT0 + 2'000).ok());  // c admitted; d is now first
  SessionView d2 = room->Check("d", kT0 + 2'001);
  ASSERT_EQ(d2.position, 1);
  ASSERT_TRUE(d2.eta_ms.has_value());
  EXPECT_LT(*d2.eta_ms, *c.eta_ms);
}

TEST(RoomTest, AdvanceProcessesDeadlinesWithoutClientCalls) {
  auto room = MakeRoom(Config(1));
  EXPECT_EQ(room->NextDeadline(), INT64_MAX);
  room->Check("a", kT0);          // claimed: idle deadline kT0 + 300000
  room->Check("b", kT0 + 1'000);  // waiting: drop-out at kT0 + 31000
  // a's old claim key (kT0 + 30000) may still be queued: keys are never late, maybe early.
  EXPECT_GE(room->NextDeadline(), kT0 + 30'000);
  EXPECT_LE(room->NextDeadline(), kT0 + 31'000);
  room->Advance(kT0 + 30'999);
  EXPECT_EQ(room->waiting(), 1);
  EXPECT_EQ(room->NextDeadline(), kT0 + 31'000);
  room->Advance(kT0 + 31'000);
  EXPECT_EQ(room->waiting(), 0);
  EXPECT_EQ(room->NextDeadline(), kT0 + 300'000);
  room->Advance(kT0 + 300'000);  // a idles into grace
  EXPECT_EQ(room->holders(), 1);
  EXPECT_EQ(room->NextDeadline(), kT0 + 305'000);
  room->Advance(kT0 + 305'000);
  EXPECT_EQ(room->holders(), 0);
  EXPECT_EQ(room->NextDeadline(), INT64_MAX);
}

TEST(RoomTest, NextDeadlineIsNeverLaterThanTheTrueDeadline) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("b", kT0 + 20'000);  // b's true deadline moves to kT0 + 50000
  EXPECT_LE(room->NextDeadline(), kT0 + 50'000);
  room->Advance(kT0 + 49'999);
  EXPECT_EQ(room->waiting(), 1);
  EXPECT_EQ(room->NextDeadline(), kT0 + 50'000);  // re-keyed once reached
  room->Advance(kT0 + 50'000);
  EXPECT_EQ(room->waiting(), 0);
}

TEST(RoomTest, DeadlinesAreProcessedAtTheirOwnTimeWhenAdvancedLate) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("c", kT0);
  // One late Advance: a's grace ends at kT0 + 5000 and b (still in line then) is admitted;
  // b never claims, so it is dropped at kT0 + 35000; c had been dropped at kT0 + 30000.
  ASSERT_TRUE(room->Leave("a", false, kT0).ok());
  room->Advance(kT0 + 100'000);
  EXPECT_EQ(room->holders(), 0);
  EXPECT_EQ(room->waiting(), 0);
  EXPECT_EQ(room->counters().admitted_total, 2);
  EXPECT_EQ(room->counters().dropped_total, 2);
}

TEST(RoomTest, CheckAnswersOnlyActiveOrWaiting) {
  auto room = MakeRoom(Config(1));
  auto is_active_or_waiting = [](const SessionView& v) {
    return v.status == SessionStatus::kActive || v.status == SessionStatus::kWaiting;
  };
  EXPECT_TRUE(is_active_or_waiting(room->Check("a", kT0)));  // new, admitted
  EXPECT_TRUE(is_active_or_waiting(room->Check("b", kT0)));  // new, waiting
  ASSERT_TRUE(room->Leave("a", false, kT0 + 1).ok());
  EXPECT_EQ(room->Check("a", kT0 + 2).status, SessionStatus::kActive);  // from grace
  ASSERT_TRUE(room->Leave("a", true, kT0 + 3).ok());
  EXPECT_EQ(room->Check("a", kT0 + 4).status, SessionStatus::kWaiting);  // from gone
}

TEST(RoomTest, ViewsReportActiveWaitingAndCapacity) {
  auto room = MakeRoom(Config(2));
  room->Check("a", kT0);
  room->Check("b", kT0);
  SessionView c = room->Check("c", kT0);
  EXPECT_EQ(c.session, "c");
  EXPECT_EQ(c.active, 2);
  EXPECT_EQ(c.waiting, 1);
  EXPECT_EQ(c.capacity, 2);
  SessionView a = room->Check("a", kT0 + 1);
  EXPECT_EQ(a.position, 0);
  EXPECT_GT(a.admission, 0u);
  EXPECT_EQ(c.admission, 0u);
}

TEST(RoomTest, RoomsAreIndependent) {
  auto r1 = MakeRoom(Config(1));
  RoomConfig c2 = Config(2);
  c2.grace_ms = 60'000;
  auto r2 = MakeRoom(c2);
  r1->Check("x", kT0);
  r1->Check("u", kT0);
  r2->Check("u", kT0);
  EXPECT_EQ(r1->Check("u", kT0 + 1).status, SessionStatus::kWaiting);
  EXPECT_EQ(r2->Check("u", kT0 + 1).status, SessionStatus::kActive);
  ASSERT_TRUE(r2->Leave("u", true, kT0 + 2).ok());
  EXPECT_EQ(r1->Check("u", kT0 + 3).position, 1);
  ASSERT_TRUE(r1->Leave("x", false, kT0 + 4).ok());
  r1->Advance(kT0 + 5'004);
  r2->Advance(kT0 + 5'004);
  EXPECT_EQ(r1->Check("u", kT0 + 5'005).status, SessionStatus::kActive);
  EXPECT_EQ(r2->holders(), 0);
  EXPECT_EQ(r2->Touch("x", kT0 + 5'006).status(), OpStatus::kUnknownSession);
}

// Random operations and clock jumps: holders never exceed capacity (except right after it was
// lowered, when nobody may be admitted), and nobody waits while a slot is free.
TEST(RoomTest, InvariantsHoldUnderRandomOperations) {
  for (uint32_t seed : {1u, 2u, 3u, 42u, 2024u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    RoomConfig config = Config(3);
    config.grace_ms = 2'000;
    config.checkin_timeout_ms = 5'000;
    config.idle_timeout_ms = 8'000;
    auto room = MakeRoom(config);
    int64_t now = kT0;
    for (int step = 0; step < 20'000; ++step) {
      int64_t holders_before = room->holders();
      std::string id = "s" + std::to_string(pick(40));
      int op = pick(100);
      if (op < 40) {
        SessionView v = room->Check(id, now);
        ASSERT_TRUE(v.status == SessionStatus::kActive || v.status == SessionStatus::kWaiting);
        if (v.status == SessionStatus::kWaiting) {
          ASSERT_GE(v.position, 1);
          ASSERT_LE(v.position, v.waiting);
        } else {
          ASSERT_EQ(v.position, 0);
        }
        ASSERT_EQ(v.active, room->holders());
        ASSERT_EQ(v.waiting, room->waiting());
      } else if (op < 50) {
        auto v = room->Touch(id, now);
        ASSERT_TRUE(!v.ok() || v->status != SessionStatus::kGone);
      } else if (op < 65) {
        auto v = room->Leave(id, pick(2) == 0, now);
        ASSERT_TRUE(v.ok() || v.status() == OpStatus::kUnknownSession);
      } else if (op < 70) {
        auto v = room->Evict(id, now);
        ASSERT_TRUE(!v.ok() || v->status == SessionStatus::kGone);
      } else if (op < 72) {
        RoomPatch patch;
        patch.capacity = 1 + pick(5);
        room->Reconfigure(patch, now);
        holders_before = std::min(holders_before, room->holders());
      } else if (op < 85) {
        now += pick(3'000);
        room->Advance(now);
      } else {
        now += pick(200);
      }
      int64_t capacity = room->config().capacity;
      if (room->holders() > capacity) {
        // Only allowed after a lowering, and then nobody may have been admitted.
        ASSERT_LE(room->holders(), holders_before) << "step " << step;
      }
      if (room->waiting() > 0) {
        ASSERT_GE(room->holders(), capacity) << "step " << step << ": a slot is free";
      }
      ASSERT_GE(room->holders(), 0);
      ASSERT_EQ(static_cast<size_t>(room->holders() + room->waiting()), room->sessions());
    }
  }
}

// With a rate cap, a slot may stay free while people wait only because of the cap: then the
// room must have the reopening of the window scheduled within the next minute, and no 60 s
// window may ever hold more admissions than the cap.
TEST(RoomTest, RateCapInvariantsHoldUnderRandomOperations) {
  for (uint32_t seed : {7u, 8u, 9u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    RoomConfig config = Config(4);
    config.admit_per_minute = 3;
    config.grace_ms = 1'000;
    config.checkin_timeout_ms = 20'000;
    config.idle_timeout_ms = 5'000;
    auto room = MakeRoom(config);
    int64_t now = kT0;
    std::vector<std::pair<int64_t, int64_t>> admitted;  // (time seen, admitted_total)
    for (int step = 0; step < 20'000; ++step) {
      std::string id = "s" + std::to_string(pick(30));
      int op = pick(100);
      if (op < 50) {
        room->Check(id, now);
      } else if (op < 65) {
        (void)room->Leave(id, pick(2) == 0, now);
      } else if (op < 80) {
        now += pick(4'000);
        room->Advance(now);
      } else {
        now += pick(300);  // no call: the room has not seen this time yet
      }
      ASSERT_LE(room->holders(), room->config().capacity) << "step " << step;
      bool caught_up = op < 80;
      if (caught_up && room->waiting() > 0 && room->holders() < room->config().capacity) {
        ASSERT_GT(room->NextDeadline(), now) << "step " << step << ": an overdue admission";
        ASSERT_LE(room->NextDeadline(), now + 60'000) << "step " << step;
      }
      // Admissions happen at or before `now`; those counted by `now - 60 s` are out of any
      // window that ends at `now`, so the window holds at most total(now) - total(now - 60 s).
      admitted.emplace_back(now, room->counters().admitted_total);
      int64_t floor = 0;
      for (auto it = admitted.rbegin(); it != admitted.rend(); ++it) {
        if (it->first <= now - 61'000) {
          floor = it->second;
          break;
        }
      }
      ASSERT_LE(room->counters().admitted_total - floor, 2 * *config.admit_per_minute)
          << "step " << step;
    }
  }
}

// Ids of every length the naming rule allows (1-128 bytes), inline or on the heap, and up to
// SessionId's own bound.
TEST(RoomTest, IdsOfEveryLengthAreKeptWhole) {
  auto room = MakeRoom(Config(1'000));
  std::vector<std::string> ids;
  for (size_t n : {size_t{1}, size_t{22}, size_t{23}, size_t{24}, size_t{128}, size_t{255}}) {
    ids.push_back(std::string(n - 1, 'x') + std::to_string(n % 10));
  }
  for (const std::string& id : ids) EXPECT_EQ(room->Check(id, kT0).session, id);
  for (const std::string& id : ids) EXPECT_TRUE(room->Touch(id, kT0 + 1).ok()) << id.size();
  EXPECT_EQ(room->sessions(), ids.size());
}

// ---- per-client limits and the challenge --------------------------------------------------

Arrival From(const char* client, int64_t proof_bits = 0) {
  return Arrival{.client = client, .proof_bits = proof_bits};
}

TEST(RoomTest, BucketRefillsContinuouslyOneJoinAtATime) {
  RoomConfig c = Config(1'000);
  c.joins_per_minute_per_client = 60;  // a token a second, 60 at most
  auto room = MakeRoom(c);
  int accepted = 0;
  for (int i = 0; i < 100; ++i) {
    accepted += room->Check("s" + std::to_string(i), From("192.0.2.1"), kT0).ok() ? 1 : 0;
  }
  EXPECT_EQ(accepted, 60);  // the bucket's worth, at once
  auto refused = room->Check("x", From("192.0.2.1"), kT0);
  EXPECT_EQ(refused.status(), OpStatus::kRateLimited);
  EXPECT_EQ(refused.retry_after_ms(), 1'000);
  // 2.5 s later: two tokens, not a minute's worth and not three.
  EXPECT_TRUE(room->Check("x", From("192.0.2.1"), kT0 + 2'500).ok());
  EXPECT_TRUE(room->Check("y", From("192.0.2.1"), kT0 + 2'500).ok());
  auto third = room->Check("z", From("192.0.2.1"), kT0 + 2'500);
  EXPECT_EQ(third.retry_after_ms(), 500);
  // Over a long run the rate is the figure: 60 more in the next minute, no more.
  int later = 0;
  for (int64_t t = kT0 + 2'500; t <= kT0 + 62'500; t += 100) {
    later += room->Check("late" + std::to_string(t), From("192.0.2.1"), t).ok() ? 1 : 0;
  }
  EXPECT_EQ(later, 60);
  EXPECT_EQ(room->PlacesOf("192.0.2.1"), 60 + 2 + 60);
}

TEST(RoomTest, PlacesCountWaitingActiveAndGraceUntilGone) {
  RoomConfig c = Config(1);
  c.places_per_client = 2;
  auto room = MakeRoom(c);
  ASSERT_TRUE(room->Check("a", From("192.0.2.1"), kT0).ok());      // active
  ASSERT_TRUE(room->Check("b", From("192.0.2.1"), kT0 + 1).ok());  // waiting
  EXPECT_EQ(room->PlacesOf("192.0.2.1"), 2);
  ASSERT_TRUE(room->Leave("a", false, kT0 + 2).ok());  // grace: still a place
  EXPECT_EQ(room->Check("c", From("192.0.2.1"), kT0 + 3).status(), OpStatus::kRateLimited);
  // a's grace ends at kT0 + 5,002 and b is admitted then; b never claims its slot (no check
  // within the check-in timeout), so it is dropped at kT0 + 35,002.
  room->Advance(kT0 + 5'002);
  EXPECT_EQ(room->PlacesOf("192.0.2.1"), 1);
  room->Advance(kT0 + 35'002);
  EXPECT_EQ(room->PlacesOf("192.0.2.1"), 0);
  EXPECT_EQ(room->clients(), 0u);  // no place and no bucket: forgotten
  EXPECT_TRUE(room->Check("c", From("192.0.2.1"), kT0 + 35'003).ok());
}

TEST(RoomTest, TheClientTableIsBoundedAndForgetsFullBuckets) {
  RoomConfig c = Config(10);
  c.joins_per_minute_per_client = 6;  // a token every 10 s
  auto room = MakeRoom(c);
  room->set_max_clients(2);
  ASSERT_TRUE(room->Check("a", From("2001:db8:0:1::/64"), kT0).ok());
  ASSERT_TRUE(room->Check("b", From("2001:db8:0:2::/64"), kT0).ok());
  auto third = room->Check("c", From("2001:db8:0:3::/64"), kT0);
  EXPECT_EQ(third.status(), OpStatus::kRateLimited);
  EXPECT_EQ(third.retry_after_ms(), 60'000);
  EXPECT_NE(third.message().find("as many clients"), std::string::npos);
  // Known clients still join; untracked joins (no client) are not limited.
  EXPECT_TRUE(room->Check("a2", From("2001:db8:0:1::/64"), kT0 + 1).ok());
  EXPECT_TRUE(room->Check("u", kT0 + 1).status == SessionStatus::kActive);
  // b leaves: its client holds no place but its bucket refills until kT0 + 10 s.
  ASSERT_TRUE(room->Leave("b", true, kT0 + 2).ok());
  EXPECT_EQ(room->clients(), 2u);
  EXPECT_EQ(room->Check("c", From("2001:db8:0:3::/64"), kT0 + 9'999).status(),
            OpStatus::kRateLimited);
  EXPECT_TRUE(room->Check("c", From("2001:db8:0:3::/64"), kT0 + 10'000).ok());
  EXPECT_EQ(room->clients(), 2u);
}

TEST(RoomTest, ChallengeComesFirstAndOnlyForNewPlaces) {
  RoomConfig c = Config(1);
  c.challenge_difficulty = 8;
  c.joins_per_minute_per_client = 1;
  auto room = MakeRoom(c);
  auto none = room->Check("a", From("192.0.2.1", 7), kT0);
  EXPECT_EQ(none.status(), OpStatus::kChallengeRequired);
  EXPECT_EQ(room->sessions(), 0u);
  EXPECT_EQ(room->clients(), 0u);  // refused: no token taken, nothing kept
  ASSERT_TRUE(room->Check("a", From("192.0.2.1", 8), kT0).ok());
  EXPECT_TRUE(room->Check("a", From("192.0.2.1", 0), kT0 + 1).ok());  // a check-in
  EXPECT_EQ(room->Check("b", From("192.0.2.1", 0), kT0 + 2).status(), OpStatus::kChallengeRequired);
  EXPECT_EQ(room->Check("b", From("192.0.2.1", 20), kT0 + 2).status(), OpStatus::kRateLimited);
  // A replayed log record is never refused, whatever it shows.
  EXPECT_EQ(room->CheckRecorded("b", "192.0.2.1", kT0 + 3).status, SessionStatus::kWaiting);
  EXPECT_EQ(room->PlacesOf("192.0.2.1"), 2);
}

}  // namespace
}  // namespace anteroom::core
