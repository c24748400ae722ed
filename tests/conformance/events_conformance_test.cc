// Lifecycle events on every backend: the same changes tell the same events, in the same order,
// with the same per-room sequence; a read resumes after any position it was given, and a
// position the backend never gave is answered with a reset. On Redis Cluster no event is kept
// (a script may touch only its own slot): the read answers 503, and nothing else changes.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend_fixture.h"
#include "common/wire_errors.h"
#include "core/room_notice.h"
#include "store/backend.h"
#include "store/lifecycle_event.h"

namespace anteroom::store {
namespace {

using core::RoomPatch;
using core::SessionView;

// An event as the tests compare it: what every backend must agree on (not its id or time).
struct Told {
  std::string type;
  std::string subject;  // the session, or the job's id
  uint64_t seq = 0;
  std::string detail;
  bool operator==(const Told&) const = default;
};
std::ostream& operator<<(std::ostream& os, const Told& t) {
  return os << "{" << t.type << " " << t.subject << " #" << t.seq << " '" << t.detail << "'}";
}

class EventsConformanceTest : public conformance::BackendTest {
 protected:
  bool Kept() const { return GetParam().name != "redis_cluster"; }

  OpResult<EventRead> Read(std::optional<EventId> after, size_t max = 1000) {
    return Await<EventRead>([&](auto done) { b().ReadEvents(after, max, done); });
  }
  // The position now: events told after it are read by Since.
  EventId Mark() {
    auto r = Read(std::nullopt);
    EXPECT_TRUE(r.ok()) << r.message();
    EXPECT_TRUE(!r.ok() || r->events.empty());
    return r.ok() ? r->last : EventId{};
  }
  std::vector<LifecycleEvent> Since(EventId mark) {
    auto r = Read(mark);
    EXPECT_TRUE(r.ok()) << r.message();
    if (!r.ok()) return {};
    EXPECT_FALSE(r->reset);
    return r->events;
  }
  static std::vector<Told> Summary(const std::vector<LifecycleEvent>& events) {
    std::vector<Told> out;
    for (const LifecycleEvent& e : events) {
      std::string subject = e.job ? std::to_string(*e.job) : e.session;
      out.push_back({e.type, subject, e.seq, e.detail});
    }
    return out;
  }

  void Put(const std::string& room, RoomPatch patch) {
    auto r = Await<core::RoomInfo>([&](auto done) { b().PutRoom(room, patch, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  SessionView Check(const std::string& room, const std::string& session) {
    auto r = Await<SessionView>([&](auto done) { b().Check(room, session, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : SessionView{};
  }
  void Leave(const std::string& room, const std::string& session, bool final) {
    auto r = Await<SessionView>([&](auto done) { b().Leave(room, session, final, done); });
    EXPECT_TRUE(r.ok()) << r.message();
  }
};

TEST_P(EventsConformanceTest, ARoomTellsItsLifeInOrder) {
  if (!Kept()) {
    auto r = Read(std::nullopt);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status(), OpStatus::kUnavailable);
    EXPECT_EQ(r.message(), wire::kEventsNotOnCluster);
    return;
  }
  EventId mark = Mark();
  MakeRoom("ev", 1);
  EXPECT_EQ(Check("ev", "a").status, core::SessionStatus::kActive);
  EXPECT_EQ(Check("ev", "b").status, core::SessionStatus::kWaiting);
  Leave("ev", "a", /*final=*/true);  // b takes the slot
  RoomPatch random;
  random.queueing_method = core::QueueingMethod::kRandom;
  Put("ev", random);
  auto evicted = Await<SessionView>([&](auto done) { b().EndSession("ev", "b", done); });
  ASSERT_TRUE(evicted.ok()) << evicted.message();
  auto deleted = Await<core::RoomInfo>([&](auto done) { b().DeleteRoom("ev", done); });
  ASSERT_TRUE(deleted.ok()) << deleted.message();

  std::vector<LifecycleEvent> events = Since(mark);
  std::vector<Told> want = {
      {"room.created", "", 1, ""},   {"room.joined", "a", 2, ""},
      {"room.admitted", "a", 3, ""}, {"room.joined", "b", 4, ""},
      {"room.left", "a", 5, ""},     {"room.admitted", "b", 6, ""},
      {"room.changed", "", 7, ""},   {"room.method_changed", "", 8, "random"},
      {"room.revoked", "b", 9, ""},  {"room.deleted", "", 10, ""},
  };
  EXPECT_EQ(Summary(events), want);
  for (size_t k = 0; k < events.size(); ++k) {
    EXPECT_EQ(events[k].room, "ev");
    EXPECT_TRUE(events[k].queue.empty());
    if (k > 0) {
      EXPECT_LT(events[k - 1].id, events[k].id);
    }
  }
  ASSERT_EQ(events.size(), want.size());
  EXPECT_EQ(events[2].admission, std::optional<uint64_t>(1));
  EXPECT_EQ(events[5].admission, std::optional<uint64_t>(2));
  EXPECT_EQ(events[0].at_ms, NowMs());
}

TEST_P(EventsConformanceTest, TimeTellsDropsAndExpiries) {
  if (!Kept()) GTEST_SKIP() << "no events on Redis Cluster";
  MakeRoom("t", 1);
  EventId mark = Mark();
  int64_t start = NowMs();
  Check("t", "a");
  Check("t", "b");
  Check("t", "c");
  Leave("t", "a", /*final=*/false);  // grace: 5 s
  AdvanceTime(6'000);                // a expires; b is let in (not calling in: unclaimed)
  AdvanceTime(25'000);               // c stopped checking in at 0: dropped at 30 s
  AdvanceTime(6'000);                // b never claimed its slot: dropped at 36 s
  std::vector<LifecycleEvent> events = Since(mark);
  std::vector<Told> want = {
      {"room.joined", "a", 2, ""},  {"room.admitted", "a", 3, ""}, {"room.joined", "b", 4, ""},
      {"room.joined", "c", 5, ""},  {"room.expired", "a", 6, ""},  {"room.admitted", "b", 7, ""},
      {"room.dropped", "c", 8, ""}, {"room.dropped", "b", 9, ""},
  };
  EXPECT_EQ(Summary(events), want);
  ASSERT_EQ(events.size(), want.size());
  // Each at the time the rules decided it, not when the sweeper came by.
  EXPECT_EQ(events[4].at_ms, start + 5'000);
  EXPECT_EQ(events[6].at_ms, start + 30'000);
  EXPECT_EQ(events[7].at_ms, start + 5'000 + 30'000);
}

TEST_P(EventsConformanceTest, ALaunchTellsItsStages) {
  if (!Kept()) GTEST_SKIP() << "no events on Redis Cluster";
  MakeRoom("l", 2);
  EventId mark = Mark();
  core::EventSpec spec;
  spec.name = "drop";
  spec.prequeue_at = NowMs() + 1'000;
  spec.starts_at = NowMs() + 2'000;
  spec.ends_at = NowMs() + 10'000;
  spec.overrides.queueing_method = core::QueueingMethod::kRandom;
  auto put = Await<core::RoomEvent>([&](auto done) { b().PutEvent("l", "d1", spec, done); });
  ASSERT_TRUE(put.ok()) << put.message();
  AdvanceTime(1'500);
  AdvanceTime(1'000);
  AdvanceTime(8'000);
  std::vector<Told> want = {
      {"event.prequeue", "", 2, "d1"},          {"event.started", "", 3, "d1"},
      {"room.method_changed", "", 4, "random"}, {"event.ended", "", 5, "d1"},
      {"room.method_changed", "", 6, "fifo"},
  };
  EXPECT_EQ(Summary(Since(mark)), want);
}

TEST_P(EventsConformanceTest, AQueueTellsDeadJobsAndPauses) {
  if (!Kept()) GTEST_SKIP() << "no events on Redis Cluster";
  EventId mark = Mark();
  core::JobSpec once;
  once.payload = "p";
  once.max_attempts = 1;
  auto pushed =
      Await<std::vector<core::PushResult>>([&](auto done) { b().Push("jobs", {once}, done); });
  ASSERT_TRUE(pushed.ok()) << pushed.message();
  auto fetched = Await<core::FetchAnswer>([&](auto done) {
    b().Fetch("jobs", {.worker = "w", .max = 1, .ack = {}, .ack_results = {}, .hangup = {}}, done);
  });
  ASSERT_TRUE(fetched.ok() && fetched->jobs.size() == 1) << fetched.message();
  auto nacked = Await<std::vector<core::LeaseOutcome>>(
      [&](auto done) { b().Nack("jobs", {fetched->jobs[0].lease}, std::nullopt, "boom", done); });
  ASSERT_TRUE(nacked.ok()) << nacked.message();
  for (bool paused : {true, true, false}) {
    auto r = Await<Done>([&](auto done) { b().SetPaused("jobs", paused, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  std::vector<LifecycleEvent> events = Since(mark);
  std::vector<Told> want = {
      {"job.dead", std::to_string((*pushed)[0].id), 0, "boom"},
      {"queue.paused", "", 0, ""},
      {"queue.resumed", "", 0, ""},
  };
  EXPECT_EQ(Summary(events), want);
  for (const LifecycleEvent& e : events) {
    EXPECT_EQ(e.queue, "jobs");
    EXPECT_TRUE(e.room.empty());
  }
}

// notify_at_position: each session is told once, at the position it reached, whatever moved the
// line (a join, an admission, one leaving ahead, the brake sending a holder back, a wider N).
TEST_P(EventsConformanceTest, NotifyWhenNearTellsEachOnceAtItsPosition) {
  if (!Kept()) GTEST_SKIP() << "no events on Redis Cluster";
  EventId mark = Mark();
  RoomPatch p;
  p.capacity = 1;
  p.grace_ms = 5'000;
  p.checkin_timeout_ms = 30'000;
  p.idle_timeout_ms = 300'000;
  p.notify_at_position = 2;
  Put("n", p);
  for (const char* s : {"a", "b", "c", "d", "e"}) Check("n", s);  // a in; b 1 .. e 4
  Leave("n", "a", /*final=*/true);                                // b in; c 1, d 2
  Leave("n", "c", /*final=*/false);                               // d 1, e 2
  RoomPatch brake;
  brake.queueing_method = core::QueueingMethod::kQueueAll;
  brake.include_active = true;
  Put("n", brake);  // b (told before) back to the head: b, d, e
  RoomPatch wider;
  wider.notify_at_position = 4;
  Put("n", wider);
  Check("n", "f");  // 4
  RoomPatch go;
  go.queueing_method = core::QueueingMethod::kFifo;
  Put("n", go);  // b in again

  std::vector<LifecycleEvent> events = Since(mark);
  std::vector<Told> want = {
      {"room.created", "", 1, ""},        {"room.joined", "a", 2, ""},
      {"room.admitted", "a", 3, ""},      {"room.joined", "b", 4, ""},
      {"room.position_near", "b", 5, ""}, {"room.joined", "c", 6, ""},
      {"room.position_near", "c", 7, ""}, {"room.joined", "d", 8, ""},
      {"room.joined", "e", 9, ""},        {"room.left", "a", 10, ""},
      {"room.admitted", "b", 11, ""},     {"room.position_near", "d", 12, ""},
      {"room.left", "c", 13, ""},         {"room.position_near", "e", 14, ""},
      {"room.changed", "", 15, ""},       {"room.method_changed", "", 16, "queue_all"},
      {"room.revoked", "b", 17, ""},      {"room.changed", "", 18, ""},
      {"room.joined", "f", 19, ""},       {"room.position_near", "f", 20, ""},
      {"room.changed", "", 21, ""},       {"room.method_changed", "", 22, "fifo"},
      {"room.admitted", "b", 23, ""},
  };
  EXPECT_EQ(Summary(events), want);
  std::vector<std::pair<std::string, int64_t>> positions;
  for (const LifecycleEvent& e : events) {
    if (e.type == "room.position_near") {
      positions.emplace_back(e.session, e.position.value_or(-1));
    } else {
      EXPECT_FALSE(e.position.has_value()) << e.type;
    }
  }
  EXPECT_EQ(positions, (std::vector<std::pair<std::string, int64_t>>{
                           {"b", 1}, {"c", 2}, {"d", 2}, {"e", 2}, {"f", 4}}));
  auto info = Await<core::RoomInfo>([&](auto done) { b().GetRoom("n", done); });
  ASSERT_TRUE(info.ok()) << info.message();
  EXPECT_EQ(info->config.notify_at_position, std::optional<int64_t>(4));
}

TEST_P(EventsConformanceTest, AReadResumesAfterAnyPositionItGave) {
  if (!Kept()) GTEST_SKIP() << "no events on Redis Cluster";
  EventId mark = Mark();
  MakeRoom("r", 1);
  for (const char* s : {"a", "b", "c", "d"}) Check("r", s);
  std::vector<LifecycleEvent> all = Since(mark);
  ASSERT_EQ(all.size(), 6u);  // created, 4 joined, 1 admitted
  // In pages of two, each read after the last one's position.
  std::vector<LifecycleEvent> paged;
  EventId at = mark;
  for (int pages = 0; pages < 10; ++pages) {
    auto r = Read(at, 2);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_FALSE(r->reset);
    EXPECT_LE(r->events.size(), 2u);
    if (r->events.empty()) {
      EXPECT_EQ(r->last, at);
      break;
    }
    paged.insert(paged.end(), r->events.begin(), r->events.end());
    at = r->last;
  }
  EXPECT_EQ(Summary(paged), Summary(all));
  // From the third event's position: the fourth on.
  auto from_third = Read(all[2].id);
  ASSERT_TRUE(from_third.ok());
  EXPECT_EQ(Summary(from_third->events), Summary({all.begin() + 3, all.end()}));
  // Without a position: from the newest on, so nothing, and the newest's position.
  auto now = Read(std::nullopt);
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->events.empty());
  EXPECT_EQ(now->last, all.back().id);
  // A position it never gave (from the future): reset, and everything kept from the start.
  auto made_up = Read(EventId{all.back().id.ms + 86'400'000, 1});
  ASSERT_TRUE(made_up.ok());
  EXPECT_TRUE(made_up->reset);
  EXPECT_GE(made_up->events.size(), all.size());
}

INSTANTIATE_TEST_SUITE_P(Backends, EventsConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
