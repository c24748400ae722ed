// Hostile clients, ghost deliveries: a job handed to a long poll whose
// client had already closed stayed leased until the lease ran out (30 s by default, an attempt
// burnt), while a live worker got nothing. The server now watches a parked fetch's socket and
// drops the waiter when its client hangs up. Against the real server.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/hostile.h"
#include "support/server_fixture.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

std::string FetchRequest(const std::string& worker, int64_t wait_ms) {
  return RawRequest("POST", "/v1/queues/q/fetch",
                    R"({"worker":")" + worker + R"(","max":1,"lease_ms":30000,"wait_ms":)" +
                        std::to_string(wait_ms) + "}");
}

class HostileGhostTest : public ServerTest {};

TEST_F(HostileGhostTest, AJobIsNeverHandedToALongPollWhoseClientHungUp) {
  // Ghosts: long polls opened, then their clients gone (some reset, some closed cleanly).
  for (int i = 0; i < 20; ++i) {
    RawConnection ghost(server().port());
    ASSERT_TRUE(ghost.connected());
    ASSERT_TRUE(ghost.Send(FetchRequest("ghost-" + std::to_string(i), 30'000)));
    if (i % 2 == 0) ghost.ShutdownWrite();
  }                                                // closed here
  std::this_thread::sleep_for(milliseconds(200));  // the server sees the hang-ups

  // A live worker waits behind them.
  Client worker(server().url());
  std::optional<HttpResult> got;
  std::thread waiting([&] { got = worker.Fetch("q", "alive", 1, 30'000, 10'000); });
  std::this_thread::sleep_for(milliseconds(200));
  auto pushed_at = SteadyClock::now();
  ASSERT_EQ(client().Push("q", json::object{{"n", 1}}).status, 201);
  waiting.join();
  double took_ms =
      std::chrono::duration<double, std::milli>(SteadyClock::now() - pushed_at).count();
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->status, 200) << got->body << got->error;
  const json::array& jobs = got->json.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 1u) << "the live worker got nothing: the job went to a ghost "
                             << got->body;
  EXPECT_EQ(IntField(jobs[0], "attempt"), 1) << "no attempt was burnt on a ghost";
  EXPECT_LT(took_ms, 1000) << "the job waited for a lease to end";
  HttpResult stats = client().QueueStats("q");
  EXPECT_EQ(IntField(stats.json, "inflight"), 1) << stats.body;
  std::printf(
      "[ note     ] 20 hung-up long polls ahead: the live worker got the job %.1f ms "
      "after the push\n",
      took_ms);
}

TEST_F(HostileGhostTest, PipelinedRequestsBehindALongPollDoNotHideTheHangUp) {
  // A client parks a fetch, sends another request behind it, then hangs up.
  RawConnection ghost(server().port());
  ASSERT_TRUE(ghost.connected());
  ASSERT_TRUE(ghost.Send(FetchRequest("ghost", 30'000) + RawRequest("GET", "/healthz")));
  std::this_thread::sleep_for(milliseconds(100));
  ghost.ShutdownWrite();
  std::this_thread::sleep_for(milliseconds(200));
  ASSERT_EQ(client().Push("q", json::object{{"n", 1}}).status, 201);
  HttpResult r = client().Fetch("q", "alive", 1, 30'000, 2'000);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json.at("jobs").as_array().size(), 1u) << r.body;
}

TEST_F(HostileGhostTest, ALongPollWhoseClientStaysIsStillAnswered) {
  // The hang-up watch must not drop a client that is merely waiting.
  RawConnection live(server().port());
  ASSERT_TRUE(live.connected());
  ASSERT_TRUE(live.Send(FetchRequest("patient", 5'000)));
  std::this_thread::sleep_for(milliseconds(300));
  ASSERT_EQ(client().Push("q", json::object{{"n", 1}}).status, 201);
  std::string answer = live.ReadResponse(seconds(5));
  ASSERT_EQ(RawStatus(answer), 200) << answer;
  EXPECT_NE(RawBody(answer).find("\"attempt\":1"), std::string::npos) << answer;
}

}  // namespace
}  // namespace anteroom::testing
