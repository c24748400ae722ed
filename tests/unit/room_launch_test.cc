// Unit tests of launch day in core::Room (room.h "Launch day", room_events.cc): queueing
// methods and their switches, scheduled events, the pre-queue and its draw, with explicit
// millisecond times.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/room.h"
#include "core/schedule.h"
#include "support/chi_square.h"

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
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
  auto room = std::make_unique<Room>(config, kTokenTtlMs, now);
  DrawSeed seed{};
  seed[0] = 7;
  room->set_seed(seed);
  return room;
}

RoomPatch Method(QueueingMethod m) {
  RoomPatch p;
  p.queueing_method = m;
  return p;
}

DrawSeed Seed(uint8_t b) {
  DrawSeed s{};
  s.fill(b);
  return s;
}

// The ids waiting, first in line first.
std::vector<std::string> Line(Room& room, int64_t now) {
  LineView v = room.ReadLine(0, now);
  std::vector<std::string> ids;
  for (size_t i = 0; i < v.line.size(); ++i) ids.emplace_back(v.line[i]);
  return ids;
}

std::string Id(int i) { return "s" + std::to_string(i); }

void Must(const OpResult<SessionView>& r) { ASSERT_TRUE(r.ok()) << r.message(); }

// ---- queueing methods ----------------------------------------------------------------------

TEST(RoomLaunchTest, RejectClosesTheDoorButTheLineStillMoves) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Reconfigure(Method(QueueingMethod::kReject), kT0 + 1);
  SessionView c = room->Check("c", kT0 + 2);
  EXPECT_EQ(c.status, SessionStatus::kClosed);
  EXPECT_EQ(c.phase, RoomPhase::kClosed);
  EXPECT_EQ(room->sessions(), 2u) << "a closed join keeps nothing";
  EXPECT_EQ(room->Check("b", kT0 + 3).position, 1) << "those waiting keep their place";
  Must(room->Leave("a", /*final=*/true, kT0 + 4));
  EXPECT_EQ(room->Check("b", kT0 + 5).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("a", kT0 + 6).status, SessionStatus::kClosed);
}

TEST(RoomLaunchTest, PassthroughAdmitsEveryoneWhateverTheCapacity) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("c", kT0);
  room->Reconfigure(Method(QueueingMethod::kPassthrough), kT0 + 1);
  EXPECT_EQ(room->holders(), 3) << "those waiting are admitted at the switch";
  EXPECT_EQ(room->Check("d", kT0 + 2).status, SessionStatus::kActive);
  EXPECT_EQ(room->counters().admitted_total, 4);
  // Back to fifo: nobody more gets in until the holders are below capacity again.
  room->Reconfigure(Method(QueueingMethod::kFifo), kT0 + 3);
  EXPECT_EQ(room->Check("e", kT0 + 4).status, SessionStatus::kWaiting);
  for (const char* id : {"a", "b", "c"}) Must(room->Leave(id, /*final=*/true, kT0 + 5));
  EXPECT_EQ(room->Check("e", kT0 + 6).status, SessionStatus::kWaiting) << "d still holds";
  Must(room->Leave("d", /*final=*/true, kT0 + 7));
  EXPECT_EQ(room->Check("e", kT0 + 8).status, SessionStatus::kActive);
}

TEST(RoomLaunchTest, QueueAllIsABrake) {
  auto room = MakeRoom(Config(3));
  room->Check("a", kT0);
  room->Reconfigure(Method(QueueingMethod::kQueueAll), kT0 + 1);
  SessionView b = room->Check("b", kT0 + 2);
  EXPECT_EQ(b.status, SessionStatus::kWaiting) << "waits even with free slots";
  EXPECT_EQ(b.phase, RoomPhase::kQueue);
  EXPECT_FALSE(b.eta_ms.has_value()) << "nobody moves until the brake is let go";
  EXPECT_EQ(room->Check("a", kT0 + 3).status, SessionStatus::kActive) << "holders keep slots";
  room->Reconfigure(Method(QueueingMethod::kFifo), kT0 + 4);
  EXPECT_EQ(room->Check("b", kT0 + 5).status, SessionStatus::kActive);
}

TEST(RoomLaunchTest, QueueAllWithIncludeActiveSendsHoldersToTheHeadInAdmissionOrder) {
  auto room = MakeRoom(Config(2));
  room->Check("a", kT0);
  room->Check("b", kT0 + 1);
  room->Check("c", kT0 + 2);
  uint64_t a_admission = room->Check("a", kT0 + 3).admission;
  RoomPatch brake = Method(QueueingMethod::kQueueAll);
  brake.include_active = true;
  room->Reconfigure(brake, kT0 + 4);
  EXPECT_EQ(room->holders(), 0);
  EXPECT_EQ(Line(*room, kT0 + 5), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(room->IsRevoked("a", a_admission, kT0 + 5)) << "their tokens are revoked";
  EXPECT_FALSE(room->AdmissionHolder(a_admission, kT0 + 5).has_value());
  room->Reconfigure(Method(QueueingMethod::kFifo), kT0 + 6);
  EXPECT_EQ(room->Check("a", kT0 + 7).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("b", kT0 + 7).status, SessionStatus::kActive);
  EXPECT_EQ(room->Check("c", kT0 + 7).position, 1);
}

TEST(RoomLaunchTest, RandomHidesThePositionAndShowsTheOdds) {
  auto room = MakeRoom(Config(1));
  room->Reconfigure(Method(QueueingMethod::kRandom), kT0);
  room->Check("a", kT0);
  for (int i = 0; i < 4; ++i) room->Check(Id(i), kT0 + 1);
  SessionView v = room->Check(Id(0), kT0 + 2);
  EXPECT_EQ(v.status, SessionStatus::kWaiting);
  EXPECT_EQ(v.position, 0);
  ASSERT_TRUE(v.odds.has_value());
  EXPECT_DOUBLE_EQ(v.odds->chance_next, 0.25);
  EXPECT_EQ(v.queueing_method, QueueingMethod::kRandom);
}

TEST(RoomLaunchTest, RandomToFifoGivesBackArrivalOrder) {
  auto room = MakeRoom(Config(1));
  room->Check("a", kT0);
  for (int i = 0; i < 10; ++i) room->Check(Id(i), kT0 + 1 + i);
  room->Reconfigure(Method(QueueingMethod::kRandom), kT0 + 20);
  Must(room->Leave("a", /*final=*/true, kT0 + 21));  // one drawn at random
  std::vector<std::string> line = Line(*room, kT0 + 22);
  ASSERT_EQ(line.size(), 9u);
  EXPECT_TRUE(std::is_sorted(line.begin(), line.end(), [](const auto& x, const auto& y) {
    return std::stoi(x.substr(1)) < std::stoi(y.substr(1));
  })) << "the line stays in arrival order under random";
  room->Reconfigure(Method(QueueingMethod::kFifo), kT0 + 23);
  EXPECT_EQ(Line(*room, kT0 + 24), line);
}

TEST(RoomLaunchTest, RandomPicksFollowTheSeedSoEqualRoomsPickAlike) {
  auto pick_order = [](uint8_t seed_byte) {
    auto room = MakeRoom(Config(1));
    room->set_seed(Seed(seed_byte));
    room->Reconfigure(Method(QueueingMethod::kRandom), kT0);
    room->Check("holder", kT0);
    for (int i = 0; i < 20; ++i) room->Check(Id(i), kT0 + 1);
    std::vector<std::string> admitted;
    std::string holder = "holder";
    for (int k = 0; k < 20; ++k) {
      Must(room->Leave(holder, /*final=*/true, kT0 + 2 + k));
      auto held = room->AdmissionHolder(static_cast<uint64_t>(k + 2), kT0 + 2 + k);
      if (!held) break;
      holder = *held;
      admitted.push_back(holder);
    }
    return admitted;
  };
  EXPECT_EQ(pick_order(1), pick_order(1));
  EXPECT_NE(pick_order(1), pick_order(2));
  EXPECT_EQ(pick_order(1).size(), 20u);
}

// The random method draws the next one uniformly among those waiting: a line of 5, one slot
// freed, many rooms with distinct seeds; every place in the line is drawn equally often
// (chi-square at p = 1e-6, seeds from a counter, so a build passes or fails always alike).
TEST(RoomLaunchTest, RandomAdmissionIsUniformOverTheLine) {
  constexpr int kLine = 5;
  constexpr int kRooms = 20'000;
  std::vector<int64_t> drawn(kLine, 0);
  for (int r = 0; r < kRooms; ++r) {
    auto room = MakeRoom(Config(1));
    DrawSeed seed{};
    for (int k = 0; k < 4; ++k) seed[static_cast<size_t>(k)] = static_cast<uint8_t>(r >> (8 * k));
    room->set_seed(seed);
    room->Reconfigure(Method(QueueingMethod::kRandom), kT0);
    room->Check("holder", kT0);
    for (int i = 0; i < kLine; ++i) room->Check(Id(i), kT0 + 1);
    Must(room->Leave("holder", /*final=*/true, kT0 + 2));
    auto held = room->AdmissionHolder(2, kT0 + 2);
    ASSERT_TRUE(held.has_value());
    ++drawn[static_cast<size_t>(std::stoi(held->substr(1)))];
  }
  double stat = testing::ChiSquare(drawn, static_cast<double>(kRooms) / kLine);
  EXPECT_LT(stat, testing::ChiSquareCritical(1e-6, kLine - 1)) << stat;
}

// ---- the schedule --------------------------------------------------------------------------

EventSpec Event(int64_t prequeue_at, int64_t starts_at, int64_t ends_at, bool shuffle = false) {
  EventSpec e;
  e.name = "drop";
  e.prequeue_at = prequeue_at;
  e.starts_at = starts_at;
  e.ends_at = ends_at;
  e.shuffle_at_start = shuffle;
  return e;
}

TEST(RoomLaunchTest, ScheduleRules) {
  auto room = MakeRoom(Config(1));
  EventSpec bad = Event(kT0 + 2'000, kT0 + 1'000, kT0 + 3'000);
  EXPECT_EQ(room->PutEvent("x", bad, kT0).status(), OpStatus::kInvalidArgument);
  EXPECT_EQ(room->PutEvent("x", Event(kT0, kT0 + 1'000, kT0 + 1'000), kT0).status(),
            OpStatus::kInvalidArgument);
  EXPECT_EQ(room->PutEvent("x", Event(kT0 - 3'000, kT0 - 2'000, kT0 - 1'000), kT0).status(),
            OpStatus::kInvalidArgument)
      << "already over";
  ASSERT_TRUE(room->PutEvent("a", Event(kT0 + 10'000, kT0 + 20'000, kT0 + 30'000), kT0).ok());
  auto overlap = room->PutEvent("b", Event(kT0 + 29'000, kT0 + 40'000, kT0 + 50'000), kT0);
  EXPECT_EQ(overlap.status(), OpStatus::kConflict);
  EXPECT_NE(overlap.message().find("'a'"), std::string::npos) << overlap.message();
  ASSERT_TRUE(room->PutEvent("b", Event(kT0 + 30'000, kT0 + 40'000, kT0 + 50'000), kT0).ok())
      << "touching is not overlapping";
  EXPECT_EQ(room->events().size(), 2u);
  EXPECT_EQ(room->DeleteEvent("zzz", kT0).status(), OpStatus::kNotFound);
}

TEST(RoomLaunchTest, AtMostAHundredEvents) {
  auto room = MakeRoom(Config(1));
  for (int i = 0; i < static_cast<int>(kMaxEventsPerRoom); ++i) {
    int64_t at = kT0 + 10'000 + i * 1'000;
    ASSERT_TRUE(room->PutEvent(Id(i), Event(at, at, at + 1'000), kT0).ok()) << i;
  }
  int64_t at = kT0 + 1'000'000;
  EXPECT_EQ(room->PutEvent("one-more", Event(at, at, at + 1), kT0).status(), OpStatus::kConflict);
}

TEST(RoomLaunchTest, AStartedEventCanBeShortenedNotMoved) {
  auto room = MakeRoom(Config(1));
  EventSpec e = Event(kT0 + 1'000, kT0 + 2'000, kT0 + 10'000);
  ASSERT_TRUE(room->PutEvent("e", e, kT0).ok());
  room->Advance(kT0 + 1'500);
  EventSpec moved = e;
  moved.prequeue_at = kT0 + 1'200;
  EXPECT_EQ(room->PutEvent("e", moved, kT0 + 1'500).status(), OpStatus::kConflict)
      << "an opened pre-queue stays opened";
  room->Advance(kT0 + 3'000);
  ASSERT_EQ(room->events()[0].stage, EventStage::kRunning);
  EventSpec later = e;
  later.ends_at = kT0 + 20'000;
  EXPECT_EQ(room->PutEvent("e", later, kT0 + 3'000).status(), OpStatus::kConflict);
  EventSpec shifted = e;
  shifted.starts_at = kT0 + 2'500;
  EXPECT_EQ(room->PutEvent("e", shifted, kT0 + 3'000).status(), OpStatus::kConflict);
  EventSpec ended = e;
  ended.ends_at = kT0 + 3'000;
  auto now_over = room->PutEvent("e", ended, kT0 + 3'000);
  ASSERT_TRUE(now_over.ok()) << now_over.message();
  room->Advance(kT0 + 3'000);  // the time reached takes effect at the next Advance
  EXPECT_EQ(room->events()[0].stage, EventStage::kEnded);
  EXPECT_EQ(room->PutEvent("e", ended, kT0 + 4'000).status(), OpStatus::kConflict)
      << "an ended event is deleted, not changed";
}

// ---- the pre-queue and the draw ------------------------------------------------------------

TEST(RoomLaunchTest, PrequeueHoldsNewArrivalsEvenWithFreeSlots) {
  auto room = MakeRoom(Config(10));
  room->Check("early", kT0);
  ASSERT_TRUE(room->PutEvent("e", Event(kT0 + 1'000, kT0 + 60'000, kT0 + 120'000), kT0).ok());
  SessionView before = room->Check("before", kT0 + 500);
  EXPECT_EQ(before.status, SessionStatus::kActive);
  EXPECT_EQ(before.starts_in_ms, 59'500);
  SessionView v = room->Check("p1", kT0 + 2'000);
  EXPECT_EQ(v.status, SessionStatus::kPrequeue);
  EXPECT_EQ(v.phase, RoomPhase::kPrequeue);
  EXPECT_EQ(v.starts_in_ms, 58'000);
  EXPECT_EQ(v.ends_in_ms, 118'000);
  EXPECT_GE(v.refresh_after_ms, 250);
  EXPECT_LE(v.refresh_after_ms, 15'000) << "within half the check-in timeout";
  EXPECT_EQ(room->Check("early", kT0 + 2'000).status, SessionStatus::kActive)
      << "those admitted before keep their slot (scope new)";
  EXPECT_EQ(room->prequeued(), 1);
}

TEST(RoomLaunchTest, WhoDropsOutOfThePrequeueLosesTheDraw) {
  auto room = MakeRoom(Config(10));
  ASSERT_TRUE(room->PutEvent("e", Event(kT0, kT0 + 60'000, kT0 + 120'000), kT0).ok());
  room->Check("stays", kT0 + 1);
  room->Check("drops", kT0 + 1);
  for (int64_t t = kT0 + 20'000; t <= kT0 + 60'000; t += 20'000) room->Check("stays", t);
  room->Advance(kT0 + 60'000);
  EXPECT_FALSE(room->NeedsSeed()) << "no shuffle: arrival order";
  while (room->Drawing()) room->DrawStep(10, kT0 + 60'000);
  EXPECT_EQ(room->Check("stays", kT0 + 60'001).status, SessionStatus::kActive);
  EXPECT_EQ(room->counters().dropped_total, 1);
}

TEST(RoomLaunchTest, WithoutShuffleThePrequeueKeepsArrivalOrderBehindThoseWaiting) {
  auto room = MakeRoom(Config(1));
  room->Check("holder", kT0);
  room->Check("w1", kT0);
  ASSERT_TRUE(room->PutEvent("e", Event(kT0 + 1'000, kT0 + 5'000, kT0 + 60'000), kT0).ok());
  for (int i = 0; i < 5; ++i) room->Check(Id(i), kT0 + 1'000 + i);
  room->Advance(kT0 + 5'000);
  ASSERT_TRUE(room->Drawing());
  room->DrawStep(2, kT0 + 5'000);
  room->Check("late", kT0 + 5'001);  // during the draw: behind the drawn
  while (room->Drawing()) room->DrawStep(2, kT0 + 5'002);
  EXPECT_EQ(Line(*room, kT0 + 5'003),
            (std::vector<std::string>{"w1", "s0", "s1", "s2", "s3", "s4", "late"}));
  EXPECT_EQ(room->Check("late", kT0 + 5'004).position, 7);
}

std::vector<std::string> DrawnOrder(const DrawSeed& seed, int people, size_t chunk) {
  auto room = MakeRoom(Config(1));
  room->Check("holder", kT0);
  EXPECT_TRUE(room->PutEvent("e", Event(kT0 + 1'000, kT0 + 5'000, kT0 + 60'000, true), kT0).ok());
  for (int i = 0; i < people; ++i) room->Check(Id(i), kT0 + 1'000);
  room->Advance(kT0 + 5'000);
  EXPECT_TRUE(room->NeedsSeed());
  EXPECT_FALSE(room->Drawing());
  SessionView waiting = room->Check(Id(0), kT0 + 5'000);
  EXPECT_EQ(waiting.status, SessionStatus::kPrequeue) << "until its place is drawn";
  EXPECT_EQ(waiting.starts_in_ms, 0);
  room->SeedDraw(seed);
  while (room->Drawing()) room->DrawStep(chunk, kT0 + 5'000);
  const RoomEvent& e = room->events()[0];
  EXPECT_TRUE(e.shuffle.has_value());
  if (e.shuffle) {
    EXPECT_EQ(e.shuffle->seed, seed);
    EXPECT_EQ(e.shuffle->count, people);
    EXPECT_EQ(e.shuffle->at, kT0 + 5'000);
  }
  return Line(*room, kT0 + 5'000);
}

TEST(RoomLaunchTest, TheShuffleFollowsTheSeedWhateverTheChunks) {
  std::vector<std::string> a = DrawnOrder(Seed(1), 50, 1);
  EXPECT_EQ(a, DrawnOrder(Seed(1), 50, 7));
  EXPECT_EQ(a, DrawnOrder(Seed(1), 50, 1000));
  EXPECT_NE(a, DrawnOrder(Seed(2), 50, 7));
  std::vector<std::string> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> everyone;
  for (int i = 0; i < 50; ++i) everyone.push_back(Id(i));
  std::sort(everyone.begin(), everyone.end());
  EXPECT_EQ(sorted, everyone) << "nobody lost or duplicated";
}

// The room's shuffle, end to end: three in the pre-queue, each of the 6 orders equally often
// over many seeds (chi-square at p = 1e-6; seeds from a counter).
TEST(RoomLaunchTest, TheShuffleIsUniform) {
  constexpr int kDraws = 12'000;
  std::vector<int64_t> orders(6, 0);
  for (int d = 0; d < kDraws; ++d) {
    DrawSeed seed{};
    for (int k = 0; k < 4; ++k) seed[static_cast<size_t>(k)] = static_cast<uint8_t>(d >> (8 * k));
    std::vector<std::string> line = DrawnOrder(seed, 3, 1);
    ASSERT_EQ(line.size(), 3u);
    int a = std::stoi(line[0].substr(1)), b = std::stoi(line[1].substr(1));
    ++orders[static_cast<size_t>(a * 2 + (b > a ? b - 1 : b))];
  }
  double stat = testing::ChiSquare(orders, kDraws / 6.0);
  EXPECT_LT(stat, testing::ChiSquareCritical(1e-6, 5)) << stat;
}

TEST(RoomLaunchTest, ADrawPublishesItsFrontFirstAndAdmitsAtOnce) {
  auto room = MakeRoom(Config(2));
  ASSERT_TRUE(room->PutEvent("e", Event(kT0, kT0 + 5'000, kT0 + 60'000, true), kT0).ok());
  for (int i = 0; i < 100; ++i) room->Check(Id(i), kT0 + 1);
  room->Advance(kT0 + 5'000);
  room->SeedDraw(Seed(3));
  room->DrawStep(10, kT0 + 5'000);
  EXPECT_EQ(room->holders(), 2) << "the first drawn are admitted as soon as they are final";
  EXPECT_EQ(room->waiting(), 8);
  EXPECT_EQ(room->prequeued(), 90);
}

TEST(RoomLaunchTest, OverridesApplyWhileTheEventRunsAndTheRoomsOwnReturn) {
  auto room = MakeRoom(Config(1));
  EventSpec e;
  e.starts_at = kT0 + 1'000;
  e.ends_at = kT0 + 2'000;
  e.overrides.capacity = 3;
  e.overrides.queueing_method = QueueingMethod::kRandom;
  ASSERT_TRUE(room->PutEvent("e", e, kT0).ok());
  for (int i = 0; i < 4; ++i) room->Check(Id(i), kT0);
  EXPECT_EQ(room->holders(), 1);
  room->Advance(kT0 + 1'000);
  EXPECT_EQ(room->holders(), 3) << "the event's capacity";
  EXPECT_EQ(room->effective().queueing_method, QueueingMethod::kRandom);
  EXPECT_EQ(room->config().capacity, 1) << "the room's own settings stay as they were";
  room->Advance(kT0 + 2'000);
  EXPECT_EQ(room->effective().capacity, 1);
  EXPECT_EQ(room->holders(), 3) << "nobody admitted loses their slot when it ends";
  EXPECT_EQ(room->waiting(), 1);
}

// The operator's brake wins over a running event's method (and include_active works then).
TEST(RoomLaunchTest, TheBrakeHoldsWhileAnEventSetsItsOwnMethod) {
  auto room = MakeRoom(Config(1));
  EventSpec e;
  e.starts_at = kT0;
  e.ends_at = kT0 + 60'000;
  e.overrides.queueing_method = QueueingMethod::kFifo;
  ASSERT_TRUE(room->PutEvent("e", e, kT0).ok());
  room->Check("a", kT0 + 1);
  room->Check("b", kT0 + 2);
  RoomPatch brake = Method(QueueingMethod::kQueueAll);
  brake.include_active = true;
  room->Reconfigure(brake, kT0 + 3);
  EXPECT_EQ(room->effective().queueing_method, QueueingMethod::kQueueAll);
  EXPECT_EQ(room->holders(), 0) << "a went back to the head of the line";
  EXPECT_EQ(Line(*room, kT0 + 4), (std::vector<std::string>{"a", "b"}));
  room->Reconfigure(Method(QueueingMethod::kFifo), kT0 + 5);
  EXPECT_EQ(room->Check("a", kT0 + 6).status, SessionStatus::kActive);
}

TEST(RoomLaunchTest, PrequeueScopeAllStartsTheDropFromAnEmptyRoom) {
  auto room = MakeRoom(Config(2));
  room->Check("a", kT0);
  room->Check("b", kT0);
  room->Check("c", kT0);
  uint64_t a_admission = room->Check("a", kT0).admission;
  EventSpec e = Event(kT0 + 1'000, kT0 + 5'000, kT0 + 60'000);
  e.prequeue_scope = PrequeueScope::kAll;
  ASSERT_TRUE(room->PutEvent("e", e, kT0).ok());
  room->Advance(kT0 + 1'000);
  EXPECT_EQ(room->holders(), 0);
  EXPECT_EQ(room->waiting(), 0);
  EXPECT_EQ(room->prequeued(), 3);
  EXPECT_TRUE(room->IsRevoked("a", a_admission, kT0 + 1'000));
  EXPECT_EQ(room->Check("a", kT0 + 1'001).status, SessionStatus::kPrequeue);
  room->Advance(kT0 + 5'000);
  while (room->Drawing()) room->DrawStep(100, kT0 + 5'000);
  EXPECT_EQ(Line(*room, kT0 + 5'000), (std::vector<std::string>{"c"}))
      << "holders first, in admission order, then the line";
}

TEST(RoomLaunchTest, SuspendingOrCancellingAPrequeueLetsItIntoTheLineInArrivalOrder) {
  for (bool cancel : {false, true}) {
    auto room = MakeRoom(Config(1));
    room->Check("holder", kT0);
    EventSpec e = Event(kT0, kT0 + 60'000, kT0 + 120'000, true);
    ASSERT_TRUE(room->PutEvent("e", e, kT0).ok());
    room->Check("p1", kT0 + 1);
    room->Check("p2", kT0 + 2);
    if (cancel) {
      ASSERT_TRUE(room->DeleteEvent("e", kT0 + 3).ok());
    } else {
      e.suspended = true;
      ASSERT_TRUE(room->PutEvent("e", e, kT0 + 3).ok());
    }
    EXPECT_EQ(Line(*room, kT0 + 4), (std::vector<std::string>{"p1", "p2"})) << cancel;
    EXPECT_EQ(room->Check("p3", kT0 + 5).status, SessionStatus::kWaiting) << cancel;
    room->Advance(kT0 + 60'000);
    EXPECT_FALSE(room->NeedsSeed()) << "a suspended or cancelled event draws nothing";
  }
}

TEST(RoomLaunchTest, ASnapshotMidDrawGoesOnWithTheSameOrder) {
  auto make = [] {
    auto room = MakeRoom(Config(1));
    room->Check("holder", kT0);
    EXPECT_TRUE(room->PutEvent("e", Event(kT0 + 1'000, kT0 + 5'000, kT0 + 60'000, true), kT0).ok());
    for (int i = 0; i < 40; ++i) room->Check(Id(i), kT0 + 1'000);
    room->Advance(kT0 + 5'000);
    room->SeedDraw(Seed(9));
    room->DrawStep(13, kT0 + 5'000);
    Must(room->Leave(Id(5), /*final=*/true, kT0 + 5'001));  // gone mid-draw, wherever it was
    return room;
  };
  auto live = make();
  std::string bytes;
  ByteWriter w(bytes);
  live->Save(w);
  Room restored(Config(1), kTokenTtlMs, kT0);
  ByteReader r(bytes);
  ASSERT_TRUE(restored.Restore(r));
  std::string again;
  ByteWriter w2(again);
  restored.Save(w2);
  EXPECT_EQ(bytes, again);
  while (live->Drawing()) live->DrawStep(5, kT0 + 5'002);
  while (restored.Drawing()) restored.DrawStep(11, kT0 + 5'002);
  EXPECT_EQ(Line(*live, kT0 + 5'003), Line(restored, kT0 + 5'003));
  EXPECT_EQ(live->waiting(), 39);
  EXPECT_EQ(live->events()[0], restored.events()[0]);
}

// ---- passes --------------------------------------------------------------------------------

// A pass whose code is "<id>.secret-<id>".
std::string AddPass(Room& room, const std::string& id, PassKind kind, int64_t uses = 1,
                    std::optional<int64_t> expires_at = std::nullopt) {
  std::string code = id + ".secret-" + id;
  RoomPass p{.id = id,
             .digest = PassDigest(code),
             .kind = kind,
             .uses = uses,
             .uses_left = uses,
             .expires_at = expires_at,
             .created_at = kT0};
  EXPECT_TRUE(room.AddPasses({p}, kT0).ok());
  return code;
}

OpResult<SessionView> CheckWith(Room& room, const std::string& id, const std::string& code,
                                int64_t now) {
  return room.Check(id, Arrival{.client = "", .proof_bits = 0, .pass = code}, now);
}

TEST(RoomLaunchTest, AnAdmitPassGetsInAtOnceWhenASlotIsFreeEvenInAPrequeue) {
  auto room = MakeRoom(Config(2));
  ASSERT_TRUE(room->PutEvent("e", Event(kT0, kT0 + 60'000, kT0 + 120'000), kT0).ok());
  std::string code = AddPass(*room, "staff", PassKind::kAdmit);
  EXPECT_EQ(room->Check("fan", kT0 + 1).status, SessionStatus::kPrequeue);
  auto in = CheckWith(*room, "staffer", code, kT0 + 2);
  ASSERT_TRUE(in.ok()) << in.message();
  EXPECT_EQ(in->status, SessionStatus::kActive);
  EXPECT_EQ(room->counters().passes_used, 1);
  EXPECT_EQ(room->Passes()[0].uses_left, 0);
  auto again = CheckWith(*room, "other", code, kT0 + 3);
  EXPECT_EQ(again.status(), OpStatus::kInvalidArgument) << "used up";
  EXPECT_EQ(room->sessions(), 2u) << "a refused pass changes nothing";
}

TEST(RoomLaunchTest, PassHoldersGoFirstInLineInTheOrderTheyCameAndNeverPastCapacity) {
  auto room = MakeRoom(Config(1));
  room->Check("holder", kT0);
  room->Check("w1", kT0);
  room->Check("w2", kT0);
  std::string admit = AddPass(*room, "a", PassKind::kAdmit);
  std::string front = AddPass(*room, "f", PassKind::kFront, 2);
  auto a = CheckWith(*room, "w2", admit, kT0 + 1);  // no slot: first in line
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->status, SessionStatus::kWaiting);
  EXPECT_EQ(a->position, 1);
  EXPECT_EQ(room->holders(), 1) << "never past capacity";
  auto f = CheckWith(*room, "late", front, kT0 + 2);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->position, 2) << "behind the earlier pass holder";
  EXPECT_EQ(room->Check("w1", kT0 + 3).position, 3);
  EXPECT_EQ(Line(*room, kT0 + 3), (std::vector<std::string>{"w2", "late", "w1"}));
  Must(room->Leave("holder", /*final=*/true, kT0 + 4));
  EXPECT_EQ(room->Check("w2", kT0 + 5).status, SessionStatus::kActive);
  // A holder's pass is not used: it is in already.
  EXPECT_EQ(CheckWith(*room, "w2", front, kT0 + 6)->status, SessionStatus::kActive);
  EXPECT_EQ(room->Passes()[1].uses_left, 1);
}

TEST(RoomLaunchTest, WrongExpiredAndRevokedCodesAreRefusedAndChangeNothing) {
  auto room = MakeRoom(Config(1));
  room->Check("holder", kT0);
  std::string code = AddPass(*room, "p", PassKind::kFront, 5, kT0 + 1'000);
  std::string other = AddPass(*room, "q", PassKind::kFront, 5);
  EXPECT_EQ(CheckWith(*room, "x", "p.wrong-secret", kT0).status(), OpStatus::kInvalidArgument);
  EXPECT_EQ(CheckWith(*room, "x", "nothing", kT0).status(), OpStatus::kInvalidArgument);
  EXPECT_EQ(CheckWith(*room, "x", code, kT0 + 1'000).status(), OpStatus::kInvalidArgument)
      << "expired";
  ASSERT_TRUE(room->RevokePasses(std::string_view("q"), kT0 + 1'001).ok());
  EXPECT_EQ(CheckWith(*room, "x", other, kT0 + 1'002).status(), OpStatus::kInvalidArgument);
  EXPECT_EQ(room->sessions(), 1u);
  EXPECT_EQ(room->counters().passes_used, 0);
  EXPECT_EQ(room->RevokePasses(std::string_view("q"), kT0 + 1'003).status(), OpStatus::kNotFound);
  EXPECT_EQ(*room->RevokePasses(std::nullopt, kT0 + 1'004), 1);
}

TEST(RoomLaunchTest, PassesAndTheFrontLineSurviveASnapshot) {
  auto room = MakeRoom(Config(1));
  room->Check("holder", kT0);
  room->Check("w1", kT0);
  std::string code = AddPass(*room, "f", PassKind::kFront, 3);
  ASSERT_TRUE(CheckWith(*room, "vip", code, kT0 + 1).ok());
  std::string bytes;
  ByteWriter w(bytes);
  room->Save(w);
  Room restored(Config(1), kTokenTtlMs, kT0);
  ByteReader r(bytes);
  ASSERT_TRUE(restored.Restore(r));
  EXPECT_EQ(Line(restored, kT0 + 2), (std::vector<std::string>{"vip", "w1"}));
  EXPECT_EQ(restored.Passes(), room->Passes());
  EXPECT_EQ(restored.counters().passes_used, 1);
  ASSERT_TRUE(CheckWith(restored, "vip2", code, kT0 + 3).ok()) << "the code still opens it";
}

}  // namespace
}  // namespace anteroom::core
