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
  StatsHistory history(300'000);  // 4 samples
  for (int64_t i = 0; i < 10; ++i) history.AddRooms(1000 + i, {Room("r", i, 10 * i)});
  json::object out = history.ToJson(2000);
  const json::array& samples = out.at("rooms").as_array().at(0).at("samples").as_array();
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples.front().at("t"), 1006);
  EXPECT_EQ(samples.back().at("t"), 1009);
  EXPECT_EQ(samples.back().at("active"), 9);
  EXPECT_EQ(samples.back().at("admitted_total"), 90);
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
          "released_total":3})");
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
