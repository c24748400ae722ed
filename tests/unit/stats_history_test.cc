// The stats history: ring buffers of samples, forgetting rooms and queues that are gone, the
// JSON answer; and the sampler on a real io_context over the memory backend.
#include "server/stats_history.h"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "store/memory/memory_backend.h"

namespace anteroom::server {
namespace {

namespace json = boost::json;

core::RoomInfo Room(std::string name, int64_t active, int64_t admitted) {
  core::RoomInfo info;
  info.room = std::move(name);
  info.config.capacity = 5;
  info.active = active;
  info.waiting = 2;
  info.counters.admitted_total = admitted;
  info.counters.dropped_total = 1;
  info.counters.released_total = 3;
  return info;
}

std::pair<std::string, core::QueueStats> Queue(std::string name, int64_t pushed) {
  core::QueueStats s;
  s.ready = 4;
  s.inflight = 1;
  s.delayed = 2;
  s.dead = 3;
  s.pushed = pushed;
  s.acked = 6;
  s.nacked = 7;
  s.expired = 8;
  return {std::move(name), s};
}

TEST(SampleRingTest, KeepsTheLatestOldestFirst) {
  SampleRing<int> ring(3);
  EXPECT_EQ(ring.size(), 0u);
  for (int i = 1; i <= 5; ++i) ring.Push(i);
  ASSERT_EQ(ring.size(), 3u);
  EXPECT_EQ(ring[0], 3);
  EXPECT_EQ(ring[1], 4);
  EXPECT_EQ(ring[2], 5);
}

TEST(StatsHistoryTest, KeepsFifteenMinutesOfSamples) {
  EXPECT_EQ(StatsHistory(5000).capacity(), 181u);
  EXPECT_EQ(StatsHistory(100).capacity(), 9001u);
  EXPECT_EQ(StatsHistory(StatsHistory::kWindowMs).capacity(), 2u);
  EXPECT_EQ(StatsHistory::minute_capacity(), 61u);
  StatsHistory history(300'000);  // 4 samples
  for (int64_t i = 0; i < 10; ++i) history.AddRooms(1000 + i, {Room("r", i, 10 * i)});
  json::object out = history.ToJson(2000);
  const json::array& samples = out.at("rooms").as_array().at(0).at("samples").as_array();
  // The 4 latest, after the one-minute sample older than them (the first: the others came
  // within its minute).
  ASSERT_EQ(samples.size(), 5u);
  EXPECT_EQ(samples.front().at("t"), 1000);
  EXPECT_EQ(samples[1].at("t"), 1006);
  EXPECT_EQ(samples.back().at("t"), 1009);
  EXPECT_EQ(samples.back().at("active"), 9);
  EXPECT_EQ(samples.back().at("admitted_total"), 90);
}

// Every sample of the last 15 minutes, then one a minute back to an hour: bounded however long
// it runs.
TEST(StatsHistoryTest, KeepsAnHourOfOneMinuteSamples) {
  StatsHistory history(5000);
  const int64_t start = 1'000'000;
  const int64_t two_hours = 2 * StatsHistory::kHourMs;
  for (int64_t t = start; t <= start + two_hours; t += 5000) {
    history.AddRooms(t, {Room("r", 1, t / 1000)});
  }
  json::object out = history.ToJson(start + two_hours);
  EXPECT_EQ(out.at("window_ms"), StatsHistory::kHourMs);
  EXPECT_EQ(out.at("minute_ms"), 60'000);
  const json::array& samples = out.at("rooms").as_array().at(0).at("samples").as_array();
  int64_t oldest = samples.front().at("t").as_int64();
  int64_t newest = samples.back().at("t").as_int64();
  EXPECT_EQ(newest, start + two_hours);
  EXPECT_GE(newest - oldest, StatsHistory::kHourMs) << "an hour is covered";
  EXPECT_LE(newest - oldest, StatsHistory::kHourMs + 60'000);
  EXPECT_LE(samples.size(), 181u + 61u);
  int64_t prev = 0;
  size_t minutes = 0;
  for (const json::value& s : samples) {
    int64_t t = s.at("t").as_int64();
    EXPECT_GT(t, prev) << "oldest first, no repeats";
    if (prev != 0 && t - prev == 60'000) ++minutes;
    prev = t;
  }
  EXPECT_GE(minutes, 44u) << "one a minute before the last 15 minutes";
  EXPECT_EQ(samples.back().at("eta_traces"), 0);
  EXPECT_TRUE(samples.back().at("eta_error_p50").is_null());
}

TEST(StatsHistoryTest, CarriesTheRoomsEtaErrors) {
  StatsHistory history(5000);
  StatsHistory::EtaErrors eta;
  eta["a"] = EtaErrorSummary{.count = 7, .p50 = 0.125, .p90 = 0.5};
  eta["b"] = EtaErrorSummary{.count = 2, .p50 = std::nullopt, .p90 = std::nullopt};
  history.AddRooms(100, {Room("a", 1, 1), Room("b", 1, 1), Room("c", 1, 1)}, &eta);
  json::object out = history.ToJson(200);
  auto last = [&](size_t i) {
    return out.at("rooms").as_array().at(i).at("samples").as_array().back().as_object();
  };
  EXPECT_EQ(last(0).at("eta_traces"), 7);
  EXPECT_EQ(last(0).at("eta_error_p50").as_double(), 0.125);
  EXPECT_EQ(last(0).at("eta_error_p90").as_double(), 0.5);
  EXPECT_EQ(last(1).at("eta_traces"), 2);
  EXPECT_TRUE(last(1).at("eta_error_p50").is_null()) << "too few to say";
  EXPECT_TRUE(last(1).at("eta_error_p90").is_null());
  EXPECT_EQ(last(2).at("eta_traces"), 0);
}

TEST(StatsHistoryTest, AnswersTheDocumentedShape) {
  StatsHistory history(5000);
  history.AddRooms(100, {Room("b", 1, 2), Room("a", 3, 4)});
  history.AddQueues(101, {Queue("emails", 100)});
  json::object out = history.ToJson(200);
  EXPECT_EQ(out.at("interval_ms"), 5000);
  EXPECT_EQ(out.at("now_ms"), 200);
  const json::array& rooms = out.at("rooms").as_array();
  ASSERT_EQ(rooms.size(), 2u);
  EXPECT_EQ(rooms[0].at("room"), "a") << "names in order";
  EXPECT_EQ(rooms[1].at("room"), "b");
  json::value want_room = json::parse(
      R"({"t":100,"active":3,"waiting":2,"capacity":5,"paused":false,"admitted_total":4,"dropped_total":1,
          "released_total":3,"eta_traces":0,"eta_error_p50":null,"eta_error_p90":null})");
  EXPECT_EQ(rooms[0].at("samples").as_array().at(0), want_room);
  const json::array& queues = out.at("queues").as_array();
  ASSERT_EQ(queues.size(), 1u);
  EXPECT_EQ(queues[0].at("queue"), "emails");
  json::value want_queue = json::parse(
      R"({"t":101,"ready":4,"inflight":1,"delayed":2,"dead":3,"pushed_total":100,
          "acked_total":6,"nacked_total":7,"expired_total":8})");
  EXPECT_EQ(queues[0].at("samples").as_array().at(0), want_queue);
}

TEST(StatsHistoryTest, ForgetsWhatIsGone) {
  StatsHistory history(5000);
  history.AddRooms(1, {Room("a", 0, 0), Room("b", 0, 0)});
  history.AddQueues(1, {Queue("q1", 1), Queue("q2", 1)});
  history.AddRooms(2, {Room("b", 0, 0)});
  history.AddQueues(2, {});
  json::object out = history.ToJson(3);
  const json::array& rooms = out.at("rooms").as_array();
  ASSERT_EQ(rooms.size(), 1u);
  EXPECT_EQ(rooms[0].at("room"), "b");
  EXPECT_EQ(rooms[0].at("samples").as_array().size(), 2u);
  EXPECT_TRUE(out.at("queues").as_array().empty());
  // A room that comes back starts afresh.
  history.AddRooms(4, {Room("a", 0, 0), Room("b", 0, 0)});
  out = history.ToJson(5);
  EXPECT_EQ(out.at("rooms").as_array()[0].at("samples").as_array().size(), 1u);
}

// A room or queue made a minute ago costs a minute of samples: space grows with what is kept.
TEST(SampleRingTest, GrowsWithItsSamplesUpToItsCapacity) {
  SampleRing<int> ring(181);
  ring.Push(1);
  EXPECT_EQ(ring.size(), 1u);
  for (int i = 2; i <= 400; ++i) ring.Push(i);
  ASSERT_EQ(ring.size(), 181u);
  EXPECT_EQ(ring[0], 220);
  EXPECT_EQ(ring[180], 400);
}

// One GET answers a bounded page however many rooms and queues there are; following `next`
// walks every name exactly once, each kind on its own.
TEST(StatsHistoryTest, AnswersAPageAndItsNextCursor) {
  StatsHistory history(5000);
  std::vector<core::RoomInfo> rooms;
  for (int i = 0; i < 45; ++i) rooms.push_back(Room(fmt::format("room-{:02}", i), i, i));
  history.AddRooms(1, rooms);
  history.AddQueues(1, {Queue("q-a", 1), Queue("q-b", 2), Queue("q-c", 3)});

  HistoryPage page;
  page.limit = 20;
  std::vector<std::string> seen_rooms;
  std::vector<std::string> seen_queues;
  for (int pages = 0; pages < 10; ++pages) {
    json::object out = history.ToJson(2, page);
    EXPECT_EQ(out.at("rooms_total"), 45);
    EXPECT_EQ(out.at("queues_total"), 3);
    const json::array& r = out.at("rooms").as_array();
    EXPECT_LE(r.size(), 20u);
    for (const json::value& row : r) seen_rooms.emplace_back(row.at("room").as_string());
    for (const json::value& row : out.at("queues").as_array()) {
      seen_queues.emplace_back(row.at("queue").as_string());
    }
    const json::object& next = out.at("next").as_object();
    if (next.at("room_after").is_null()) break;
    page.room_after = next.at("room_after").as_string();
    page.queues = false;
    EXPECT_TRUE(next.at("queue_after").is_null()) << "the queues fit in one page";
  }
  ASSERT_EQ(seen_rooms.size(), 45u);
  for (int i = 0; i < 45; ++i) EXPECT_EQ(seen_rooms[i], fmt::format("room-{:02}", i));
  EXPECT_EQ(seen_queues, (std::vector<std::string>{"q-a", "q-b", "q-c"}));

  // A kind left out is not answered and has no next page.
  page = HistoryPage{};
  page.rooms = false;
  page.limit = 2;
  json::object out = history.ToJson(2, page);
  EXPECT_TRUE(out.at("rooms").as_array().empty());
  EXPECT_TRUE(out.at("next").at("room_after").is_null());
  EXPECT_EQ(out.at("queues").as_array().size(), 2u);
  EXPECT_EQ(out.at("next").at("queue_after"), "q-b");
  // The limit is clamped.
  page = HistoryPage{};
  page.limit = 100'000;
  EXPECT_EQ(history.ToJson(2, page).at("rooms").as_array().size(), 45u);
  std::vector<core::RoomInfo> many;
  for (int i = 0; i < 300; ++i) many.push_back(Room(fmt::format("r{:03}", i), 0, 0));
  history.AddRooms(3, many);
  page.limit = 100'000;
  EXPECT_EQ(history.ToJson(4, page).at("rooms").as_array().size(), HistoryPage::kMaxLimit);
}

TEST(StatsSamplerTest, SamplesOnItsTimerUntilStopped) {
  SystemClock clock;
  store::MemoryBackend backend(clock, {.run_timer = false});
  std::promise<void> made;
  core::RoomPatch patch;
  patch.capacity = 2;
  backend.PutRoom("demo", patch, [&](OpResult<core::RoomInfo>) { made.set_value(); });
  made.get_future().wait();

  boost::asio::io_context io;
  StatsHistory history(100);
  StatsSampler sampler(io, backend, clock, history);
  sampler.Start();
  // Run for ~450 ms: a sample at once, then one every 100 ms.
  boost::asio::steady_timer stop(io, std::chrono::milliseconds(450));
  stop.async_wait([&](auto) { sampler.Stop(); });
  io.run_for(std::chrono::seconds(5));  // returns once stopped: nothing left to wait for
  json::object out = history.ToJson(clock.NowMs());
  const json::array& rooms = out.at("rooms").as_array();
  ASSERT_EQ(rooms.size(), 1u);
  size_t samples = rooms[0].at("samples").as_array().size();
  EXPECT_GE(samples, 3u);
  EXPECT_LE(samples, 6u);
  EXPECT_EQ(rooms[0].at("samples").as_array()[0].at("capacity"), 2);
}

}  // namespace
}  // namespace anteroom::server
