// The draw on the Redis backend, beyond what the conformance suite can see from one process:
// the order it publishes is core::FisherYates over the seed it answers (so an operator
// recomputes any draw from its seed, whatever the backend), two processes publishing the same
// draw at once place everyone exactly once and in that order, a draw skips who left and puts
// who came back behind, and the random method draws uniformly from the line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "await_answer.h"
#include "backend_fixture.h"
#include "core/draw.h"
#include "support/chi_square.h"

namespace anteroom::store::conformance {
namespace {

using core::SessionStatus;

std::string NextPrefix() {
  static std::atomic<int> n{0};
  return "draw" + std::to_string(getpid()) + "." + std::to_string(n++) + ":";
}

// One process's RedisBackend on the standalone test server, on the clock and key prefix it is
// given: processes made with the same two share everything.
std::unique_ptr<redis::RedisBackend> Process(FakeClock& clock, const std::string& prefix,
                                             size_t draw_chunk) {
  return std::make_unique<redis::RedisBackend>(
      clock, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                        .key_prefix = prefix,
                                        .redis_time = false,
                                        .run_timer = false,
                                        .draw_chunk = draw_chunk});
}

std::string Id(int i) { return "p" + std::to_string(i); }

class RedisDrawTest : public ::testing::Test {
 protected:
  void SetUp() override { prefix_ = NextPrefix(); }

  static void Must(Backend& b, const core::RoomPatch& patch) {
    auto r = AwaitAnswer<core::RoomInfo>([&](auto done) { b.PutRoom("r", patch, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  static OpResult<core::SessionView> Check(Backend& b, const std::string& id) {
    return AwaitAnswer<core::SessionView>([&](auto done) { b.Check("r", id, done); });
  }
  static std::vector<std::string> Line(Backend& b) {
    auto v = AwaitAnswer<core::LineView>([&](auto done) { b.ReadLine("r", 0, done); });
    std::vector<std::string> ids;
    if (!v.ok()) return ids;
    for (size_t i = 0; i < v->line.size(); ++i) ids.emplace_back(v->line[i]);
    return ids;
  }
  static std::optional<core::ShuffleOutcome> Shuffle(Backend& b) {
    auto events =
        AwaitAnswer<std::vector<core::RoomEvent>>([&](auto done) { b.ListEvents("r", done); });
    if (!events.ok() || events->empty()) return std::nullopt;
    return (*events)[0].shuffle;
  }
  // A room of one slot, held by "holder" (so the drawn all wait, in the drawn order), and a
  // shuffled drop whose pre-queue is open now and which starts in 1 s, with `people` in its
  // pre-queue, p0 .. p{people-1} in arrival order.
  void Prepare(Backend& b, int people) {
    core::RoomPatch room;
    room.capacity = 1;
    room.checkin_timeout_ms = 600'000;
    Must(b, room);
    ASSERT_EQ(Check(b, "holder")->status, SessionStatus::kActive);
    core::EventSpec drop;
    drop.name = "drop";
    drop.prequeue_at = clock_.NowMs();
    drop.starts_at = clock_.NowMs() + 1'000;
    drop.ends_at = clock_.NowMs() + 600'000;
    drop.shuffle_at_start = true;
    auto put =
        AwaitAnswer<core::RoomEvent>([&](auto done) { b.PutEvent("r", "drop", drop, done); });
    ASSERT_TRUE(put.ok()) << put.message();
    for (int i = 0; i < people; ++i) {
      auto v = Check(b, Id(i));
      ASSERT_TRUE(v.ok());
      ASSERT_EQ(v->status, SessionStatus::kPrequeue);
    }
  }
  // The ids in the order core::FisherYates gives the arrival numbers 0 .. count-1 under `seed`.
  static std::vector<std::string> Expected(const core::ShuffleOutcome& shuffle) {
    std::vector<uint32_t> arrival(static_cast<size_t>(shuffle.count));
    std::iota(arrival.begin(), arrival.end(), 0u);
    core::FisherYates fy(shuffle.seed, std::move(arrival));
    fy.Step(fy.size());
    std::vector<std::string> ids;
    for (uint32_t a : fy.order()) ids.push_back(Id(static_cast<int>(a)));
    return ids;
  }

  FakeClock clock_;
  std::string prefix_;
};

TEST_F(RedisDrawTest, TheOrderIsCoreFisherYatesOverTheSeedItAnswers) {
  auto b = Process(clock_, prefix_, 37);  // chunks that do not divide the draw
  Prepare(*b, 500);
  clock_.Advance(1'000);
  b->RunDue();  // the start: the draw's seed is the sweeping call's entropy, a first chunk
  auto shuffle = Shuffle(*b);
  ASSERT_TRUE(shuffle.has_value()) << "the seed is answered as soon as the draw starts";
  EXPECT_EQ(shuffle->count, 500);
  EXPECT_EQ(shuffle->at, clock_.NowMs());
  EXPECT_EQ(Line(*b).size(), 37u) << "one chunk a sweep";
  for (int turn = 0; turn < 30 && Line(*b).size() < 500; ++turn) b->RunDue();
  std::vector<std::string> line = Line(*b);
  EXPECT_EQ(line, Expected(*shuffle));
  EXPECT_EQ(Check(*b, line[0])->position, 1);
  EXPECT_EQ(Check(*b, line[499])->position, 500);
}

TEST_F(RedisDrawTest, TwoProcessesPublishingOneDrawPlaceEveryoneOnceInItsOrder) {
  auto a = Process(clock_, prefix_, 16);
  auto b = Process(clock_, prefix_, 16);
  Prepare(*a, 300);
  clock_.Advance(1'000);
  // Both sweep at once, turn after turn: each computes the same chunks and sends them; the
  // script takes each chunk once, at the count already published.
  for (int turn = 0; turn < 60 && Line(*a).size() < 300; ++turn) {
    std::thread other([&] { b->RunDue(); });
    a->RunDue();
    other.join();
  }
  auto shuffle = Shuffle(*b);
  ASSERT_TRUE(shuffle.has_value());
  std::vector<std::string> line = Line(*b);
  EXPECT_EQ(std::set<std::string>(line.begin(), line.end()).size(), line.size()) << "nobody twice";
  EXPECT_EQ(line, Expected(*shuffle));
}

TEST_F(RedisDrawTest, ARestartedProcessGoesOnWhereTheDrawWas) {
  auto a = Process(clock_, prefix_, 50);
  Prepare(*a, 200);
  clock_.Advance(1'000);
  a->RunDue();
  a->RunDue();
  ASSERT_EQ(Line(*a).size(), 100u);
  a.reset();                              // gone mid-draw, its shuffle with it
  auto b = Process(clock_, prefix_, 64);  // another chunk size: the order does not depend on it
  for (int turn = 0; turn < 10 && Line(*b).size() < 200; ++turn) b->RunDue();
  auto shuffle = Shuffle(*b);
  ASSERT_TRUE(shuffle.has_value());
  EXPECT_EQ(Line(*b), Expected(*shuffle));
}

// With its own timer (as `anteroom serve` runs it), a sweep that published a chunk sweeps
// again at once: a draw of 2,000 in chunks of 20 (100 chunks) is over long before 100 sweeps
// 100 ms apart would be (10 s).
TEST_F(RedisDrawTest, TheTimerPublishesChunkAfterChunk) {
  redis::RedisBackend b(clock_, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                                           .key_prefix = prefix_,
                                                           .redis_time = false,
                                                           .run_timer = true,
                                                           .draw_chunk = 20});
  Prepare(b, 2'000);
  clock_.Advance(1'000);
  auto start = std::chrono::steady_clock::now();
  while (Line(b).size() < 2'000 &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto took = std::chrono::steady_clock::now() - start;
  auto shuffle = Shuffle(b);
  ASSERT_TRUE(shuffle.has_value());
  EXPECT_EQ(Line(b), Expected(*shuffle));
  EXPECT_LT(took, std::chrono::seconds(8)) << "chunk after chunk, not a sweep interval apart";
}

TEST_F(RedisDrawTest, ADrawSkipsWhoLeftAndPutsWhoCameBackBehindTheDrawn) {
  auto b = Process(clock_, prefix_, 10);
  Prepare(*b, 40);
  clock_.Advance(1'000);
  b->RunDue();
  auto shuffle = Shuffle(*b);
  ASSERT_TRUE(shuffle.has_value());
  std::vector<std::string> drawn = Expected(*shuffle);
  // One not published yet leaves for good; another leaves and comes back during the draw; a
  // newcomer arrives: both wait in the pre-queue, and follow the drawn in arrival order.
  const std::string gone = drawn[30], back = drawn[20];
  for (const std::string& id : {gone, back}) {
    auto left = AwaitAnswer<core::SessionView>([&](auto done) { b->Leave("r", id, true, done); });
    ASSERT_TRUE(left.ok());
  }
  auto again = Check(*b, back);
  EXPECT_EQ(again->status, SessionStatus::kPrequeue);
  EXPECT_EQ(again->starts_in_ms, 0) << "being drawn";
  EXPECT_EQ(again->phase, core::RoomPhase::kPrequeue);
  EXPECT_EQ(Check(*b, "late")->status, SessionStatus::kPrequeue);
  for (int turn = 0; turn < 10 && Line(*b).size() < 40; ++turn) b->RunDue();
  std::vector<std::string> want;
  for (const std::string& id : drawn) {
    if (id != gone && id != back) want.push_back(id);
  }
  want.push_back(back);
  want.push_back("late");
  EXPECT_EQ(Line(*b), want);
  EXPECT_EQ(Check(*b, "late")->status, SessionStatus::kWaiting);
  EXPECT_EQ(Check(*b, "next")->status, SessionStatus::kWaiting) << "the draw is over";
}

// A slot freed in a random room goes to someone drawn uniformly from the line: four waiting,
// one slot freed, many rooms; each place in the line is drawn equally often (chi-square at
// p = 1e-6: a fair draw fails it about once in a million runs).
TEST_F(RedisDrawTest, TheRandomMethodDrawsUniformlyFromTheLine) {
  constexpr int kLine = 4;
  constexpr int kRooms = 1'600;
  auto b = Process(clock_, prefix_, 64);
  std::vector<int64_t> drawn(kLine, 0);
  for (int k = 0; k < kRooms; ++k) {
    std::string room = "u" + std::to_string(k);
    core::RoomPatch p;
    p.capacity = 1;
    p.queueing_method = core::QueueingMethod::kRandom;
    ASSERT_TRUE(AwaitAnswer<core::RoomInfo>([&](auto done) { b->PutRoom(room, p, done); }).ok());
    auto check = [&](const std::string& id) {
      return AwaitAnswer<core::SessionView>([&](auto done) { b->Check(room, id, done); });
    };
    ASSERT_EQ(check("holder")->status, SessionStatus::kActive);
    for (int i = 0; i < kLine; ++i) {
      auto v = check(Id(i));
      ASSERT_EQ(v->status, SessionStatus::kWaiting);
      ASSERT_EQ(v->position, 0) << "odds, not places";
      ASSERT_TRUE(v->odds.has_value());
      EXPECT_DOUBLE_EQ(v->odds->chance_next, 1.0 / (i + 1));
    }
    ASSERT_TRUE(AwaitAnswer<core::SessionView>([&](auto done) {
                  b->Leave(room, "holder", true, done);
                }).ok());
    int admitted = -1;
    for (int i = 0; i < kLine; ++i) {
      if (check(Id(i))->status == SessionStatus::kActive) {
        ASSERT_EQ(admitted, -1) << "one slot";
        admitted = i;
      }
    }
    ASSERT_NE(admitted, -1);
    ++drawn[static_cast<size_t>(admitted)];
    std::vector<std::string> line;
    auto v = AwaitAnswer<core::LineView>([&](auto done) { b->ReadLine(room, 0, done); });
    for (size_t i = 0; i < v->line.size(); ++i) line.emplace_back(v->line[i]);
    EXPECT_TRUE(std::is_sorted(line.begin(), line.end())) << "the line stays in arrival order";
    ASSERT_TRUE(AwaitAnswer<core::RoomInfo>([&](auto done) { b->DeleteRoom(room, done); }).ok());
  }
  double stat = testing::ChiSquare(drawn, static_cast<double>(kRooms) / kLine);
  EXPECT_LT(stat, testing::ChiSquareCritical(1e-6, kLine - 1)) << stat;
}

}  // namespace
}  // namespace anteroom::store::conformance
