// The ETA tracer: traces started from waiting answers at most one per room per interval, ended
// by admissions (the relative error), dropped by departures and the cap, bounded per room and
// overall; the summaries; and the event reader resolving traces from a memory backend's events.
#include "server/eta_tracer.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "store/memory/memory_backend.h"

namespace anteroom::server {
namespace {

core::SessionView Waiting(std::string session, int64_t eta_ms, int64_t position = 3) {
  core::SessionView v;
  v.session = std::move(session);
  v.status = core::SessionStatus::kWaiting;
  v.position = position;
  v.eta_ms = eta_ms;
  return v;
}

store::LifecycleEvent Event(std::string_view type, std::string room, std::string session,
                            int64_t at_ms) {
  store::LifecycleEvent e;
  e.type = std::string(type);
  e.room = std::move(room);
  e.session = std::move(session);
  e.at_ms = at_ms;
  return e;
}

class EtaTracerTest : public ::testing::Test {
 protected:
  FakeClock clock;
  EtaTracerOptions options;

  // Traces `session` in `room` now (predicted `eta_ms`) and admits it `actual_ms` later.
  void Admitted(EtaTracer& tracer, std::string room, std::string session, int64_t eta_ms,
                int64_t actual_ms) {
    int64_t start = clock.NowMs();
    tracer.OnAnswer(room, Waiting(session, eta_ms));
    tracer.OnEvents({Event("room.admitted", room, session, start + actual_ms)});
  }
};

TEST_F(EtaTracerTest, AnAdmissionEndsATraceWithItsRelativeError) {
  EtaTracer tracer(clock, options);
  tracer.OnAnswer("shop", Waiting("s1", 10'000));
  EXPECT_EQ(tracer.open_traces(), 1u);
  int64_t start = clock.NowMs();
  clock.Advance(8'000);
  tracer.OnEvents({Event("room.joined", "shop", "s1", start + 100),  // not an end
                   Event("room.admitted", "other", "s1", start + 8'000),
                   Event("room.admitted", "shop", "s1", start + 8'000)});
  EXPECT_EQ(tracer.open_traces(), 0u);
  EtaErrorSummary s = tracer.Summary("shop");
  EXPECT_EQ(s.count, 1u);
  EXPECT_FALSE(s.p50) << "fewer than 5: no figure";
  // Four more: errors 0.25 (above), 0, 0.5, 1, 3.
  Admitted(tracer, "shop", "s2", 10'000, 10'000);
  clock.Advance(options.sample_every_ms);
  Admitted(tracer, "shop", "s3", 5'000, 10'000);
  clock.Advance(options.sample_every_ms);
  Admitted(tracer, "shop", "s4", 20'000, 10'000);
  clock.Advance(options.sample_every_ms);
  Admitted(tracer, "shop", "s5", 4'000, 1'000);
  s = tracer.Summary("shop");
  EXPECT_EQ(s.count, 5u);
  ASSERT_TRUE(s.p50 && s.p90);
  EXPECT_DOUBLE_EQ(*s.p50, 0.5);  // nearest rank: the 3rd of 0, 0.25, 0.5, 1, 3
  EXPECT_DOUBLE_EQ(*s.p90, 3.0);  // the 5th
  auto all = tracer.Summaries();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all.at("shop").count, 5u);
}

TEST_F(EtaTracerTest, StartsAtMostOneTracePerRoomPerInterval) {
  EtaTracer tracer(clock, options);
  tracer.OnAnswer("shop", Waiting("a", 1000));
  tracer.OnAnswer("shop", Waiting("b", 1000));
  tracer.OnAnswer("cafe", Waiting("c", 1000));  // another room: its own interval
  EXPECT_EQ(tracer.open_traces(), 2u);
  clock.Advance(options.sample_every_ms - 1);
  tracer.OnAnswer("shop", Waiting("b", 1000));
  EXPECT_EQ(tracer.open_traces(), 2u);
  clock.Advance(1);
  tracer.OnAnswer("shop", Waiting("a", 1000));  // already followed: not again
  EXPECT_EQ(tracer.open_traces(), 2u);
  tracer.OnAnswer("shop", Waiting("b", 1000));
  EXPECT_EQ(tracer.open_traces(), 3u);
}

TEST_F(EtaTracerTest, TracesOnlyWaitingAnswersWithAnEta) {
  EtaTracer tracer(clock, options);
  core::SessionView active = Waiting("a", 1000);
  active.status = core::SessionStatus::kActive;
  tracer.OnAnswer("shop", active);
  core::SessionView no_eta = Waiting("b", 0);
  no_eta.eta_ms.reset();  // no outflow measured yet
  tracer.OnAnswer("shop", no_eta);
  core::SessionView prequeue = Waiting("c", 1000);
  prequeue.status = core::SessionStatus::kPrequeue;
  tracer.OnAnswer("shop", prequeue);
  EXPECT_EQ(tracer.open_traces(), 0u);
  EXPECT_EQ(tracer.rooms(), 0u);
  // The random method: eta_ms is the odds' median, traced the same way.
  core::SessionView random = Waiting("d", 30'000, 0);
  random.odds =
      core::WaitOdds{.chance_next = 0.1, .p25_ms = 10'000, .p50_ms = 30'000, .p75_ms = 60'000};
  tracer.OnAnswer("shop", random);
  EXPECT_EQ(tracer.open_traces(), 1u);
}

TEST_F(EtaTracerTest, DeparturesDropTraces) {
  options.sample_every_ms = 0;
  EtaTracer tracer(clock, options);
  std::vector<std::string> kinds = {"room.left", "room.dropped", "room.expired", "room.revoked",
                                    "room.pass_used"};
  for (const std::string& kind : kinds) tracer.OnAnswer("shop", Waiting(kind, 10'000));
  ASSERT_EQ(tracer.open_traces(), kinds.size());
  clock.Advance(5'000);
  std::vector<store::LifecycleEvent> events;
  for (const std::string& kind : kinds) {
    events.push_back(Event(kind, "shop", kind, clock.NowMs()));
    events.push_back(Event("room.admitted", "shop", kind, clock.NowMs() + 1));
  }
  tracer.OnEvents(events);
  EXPECT_EQ(tracer.open_traces(), 0u);
  EXPECT_EQ(tracer.Summary("shop").count, 0u) << "admissions after a departure score nothing";
}

TEST_F(EtaTracerTest, IgnoresWhatHappenedBeforeTheTraceAndShortWaits) {
  options.sample_every_ms = 0;
  EtaTracer tracer(clock, options);
  int64_t start = clock.NowMs();
  tracer.OnAnswer("shop", Waiting("a", 10'000));
  tracer.OnAnswer("shop", Waiting("b", 10'000));
  // An earlier stay's departure, read late: the trace stays.
  tracer.OnEvents({Event("room.left", "shop", "a", start - 1)});
  EXPECT_EQ(tracer.open_traces(), 2u);
  // Admitted within a second: ended, not scored.
  tracer.OnEvents({Event("room.admitted", "shop", "b", start + options.min_actual_ms - 1)});
  EXPECT_EQ(tracer.open_traces(), 1u);
  EXPECT_EQ(tracer.Summary("shop").count, 0u);
}

TEST_F(EtaTracerTest, ADeletedRoomForgetsItsTraces) {
  options.sample_every_ms = 0;
  EtaTracer tracer(clock, options);
  tracer.OnAnswer("shop", Waiting("a", 10'000));
  tracer.OnAnswer("shop", Waiting("b", 10'000));
  tracer.OnAnswer("cafe", Waiting("c", 10'000));
  tracer.OnEvents({Event("room.deleted", "shop", "", clock.NowMs())});
  EXPECT_EQ(tracer.open_traces(), 1u);
  EXPECT_EQ(tracer.rooms(), 1u);
}

TEST_F(EtaTracerTest, OpenTracesAndRoomsAreCapped) {
  options.sample_every_ms = 0;
  options.max_open_per_room = 4;
  options.max_rooms = 3;
  EtaTracer tracer(clock, options);
  for (int i = 0; i < 100; ++i) tracer.OnAnswer("shop", Waiting(fmt::format("s{}", i), 1000));
  EXPECT_EQ(tracer.open_traces(), 4u);
  for (int i = 0; i < 100; ++i) tracer.OnAnswer(fmt::format("room{}", i), Waiting("x", 1000));
  EXPECT_EQ(tracer.rooms(), 3u);
  EXPECT_EQ(tracer.open_traces(), 6u);
  // One ended frees its place.
  clock.Advance(2'000);
  tracer.OnEvents({Event("room.admitted", "shop", "s0", clock.NowMs())});
  tracer.OnAnswer("shop", Waiting("s99", 1000));
  EXPECT_EQ(tracer.open_traces(), 6u);
}

TEST_F(EtaTracerTest, ErrorsKeptPerRoomAreCapped) {
  options.sample_every_ms = 0;
  options.max_errors_per_room = 10;
  EtaTracer tracer(clock, options);
  for (int i = 0; i < 50; ++i) Admitted(tracer, "shop", fmt::format("s{}", i), 2000, 1000);
  EXPECT_EQ(tracer.Summary("shop").count, 10u);
}

TEST_F(EtaTracerTest, TracesPastTheCapAndOldErrorsAreSweptAway) {
  EtaTracer tracer(clock, options);
  Admitted(tracer, "shop", "a", 2000, 1000);
  clock.Advance(options.sample_every_ms);
  tracer.OnAnswer("shop", Waiting("b", 1000));
  EXPECT_EQ(tracer.open_traces(), 1u);
  clock.Advance(options.window_ms);
  tracer.Sweep();
  EXPECT_EQ(tracer.Summary("shop").count, 0u) << "out of the 5-minute window";
  EXPECT_TRUE(tracer.Summaries().empty());
  EXPECT_EQ(tracer.open_traces(), 1u);
  clock.Advance(options.max_trace_ms);
  tracer.Sweep();
  EXPECT_EQ(tracer.open_traces(), 0u);
  EXPECT_EQ(tracer.rooms(), 0u) << "a room with nothing left is forgotten";
}

// The reader on a real io_context over the memory backend's events: the holder of a room of one
// leaves, the traced session is admitted, its trace ends with the admission's time.
TEST(EtaEventReaderTest, ResolvesTracesFromTheBackendsEvents) {
  FakeClock clock;
  store::MemoryBackend backend(clock, {.run_timer = false});
  auto wait = [](auto call) {
    std::promise<OpResult<core::SessionView>> p;
    call([&](OpResult<core::SessionView> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  };
  std::promise<void> made;
  core::RoomPatch patch;
  patch.capacity = 1;
  backend.PutRoom("shop", patch, [&](OpResult<core::RoomInfo>) { made.set_value(); });
  made.get_future().wait();
  ASSERT_EQ(wait([&](auto done) { backend.Check("shop", "holder", done); })->status,
            core::SessionStatus::kActive);
  ASSERT_EQ(wait([&](auto done) { backend.Check("shop", "next", done); })->status,
            core::SessionStatus::kWaiting);

  EtaTracer tracer(clock, {});
  boost::asio::io_context io;
  EtaEventReader reader(backend, io, tracer, {.poll = std::chrono::milliseconds(20)});
  reader.Start();
  io.run_for(std::chrono::milliseconds(50));  // the reader's position: the newest event
  tracer.OnAnswer("shop", Waiting("next", 4'000, 1));
  clock.Advance(5'000);
  ASSERT_EQ(wait([&](auto done) { backend.Leave("shop", "holder", /*final=*/true, done); })->status,
            core::SessionStatus::kGone);
  for (int i = 0; i < 100 && tracer.open_traces() > 0; ++i) {
    io.run_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(tracer.open_traces(), 0u);
  EXPECT_EQ(tracer.Summary("shop").count, 1u);
  reader.Stop();
  io.run_for(std::chrono::milliseconds(50));
}

}  // namespace
}  // namespace anteroom::server
