// A fetch script in flight when its client hangs up (Redis backend): the script leases jobs
// that nobody will receive, and the backend must give them back at once, as if never fetched
// (queue.lua `giveback`), not leave them leased until the lease ends. The window is made wide
// and certain by keeping the standalone test server busy in a Lua loop while the fetch waits
// behind it.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend_fixture.h"

namespace anteroom::store::conformance {
namespace {

using core::Delivery;

// Keeps Redis busy for `ms` with a script that loops on TIME: every other client's command
// waits behind it. Sent on a connection of its own; its answer is read by Wait().
class BusyRedis {
 public:
  BusyRedis(int port, int ms) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "cannot connect to redis on port " << port;
      return;
    }
    std::string script =
        "local t0 = redis.call('TIME') local s = t0[1] * 1000000 + t0[2] "
        "while true do local t = redis.call('TIME') "
        "if t[1] * 1000000 + t[2] - s >= " +
        std::to_string(ms * 1000) + " then return 1 end end";
    std::vector<std::string> args{"EVAL", script, "0"};
    std::string resp = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) resp += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    EXPECT_EQ(write(fd_, resp.data(), resp.size()), static_cast<ssize_t>(resp.size()));
  }
  ~BusyRedis() { Wait(); }
  // Until the script has answered (":1").
  void Wait() {
    if (fd_ < 0) return;
    char buf[64];
    ssize_t n = read(fd_, buf, sizeof buf);
    EXPECT_GT(n, 0) << "the busy script did not answer";
    close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

int SinglePort() {
  const std::string& url = RedisServers::Get().Single();
  return std::stoi(url.substr(url.rfind(':') + 1));
}

class RedisHangupTest : public ::testing::Test {
 protected:
  RedisHangupTest() : harness_(RedisServers::Get().Single()) {}

  template <typename T, typename Call>
  OpResult<T> Await(Call&& call) {
    auto promise = std::make_shared<std::promise<OpResult<T>>>();
    auto future = promise->get_future();
    call([promise](OpResult<T> r) { promise->set_value(std::move(r)); });
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "the backend did not answer";
      return OpResult<T>(OpStatus::kInternal, "timeout");
    }
    return future.get();
  }
  void Push(const std::string& q, std::vector<std::string> payloads, int32_t max_attempts) {
    std::vector<core::JobSpec> jobs;
    for (auto& p : payloads) {
      core::JobSpec spec;
      spec.payload = std::move(p);
      spec.max_attempts = max_attempts;
      jobs.push_back(std::move(spec));
    }
    auto r = Await<std::vector<core::PushResult>>(
        [&](auto done) { harness_.backend().Push(q, std::move(jobs), done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  std::future<OpResult<core::FetchAnswer>> StartFetch(const std::string& q,
                                                      const std::string& worker, size_t max,
                                                      int64_t wait_ms,
                                                      std::shared_ptr<Hangup> hangup) {
    auto promise = std::make_shared<std::promise<OpResult<core::FetchAnswer>>>();
    auto future = promise->get_future();
    harness_.backend().Fetch(
        q,
        {.worker = worker,
         .max = max,
         .lease_ms = 30'000,
         .wait_ms = wait_ms,
         .ack = {},
         .ack_results = {},
         .hangup = std::move(hangup)},
        [promise](OpResult<core::FetchAnswer> r) { promise->set_value(std::move(r)); });
    return future;
  }
  core::QueueStats Stats(const std::string& q) {
    auto r = Await<core::QueueStats>([&](auto done) { harness_.backend().GetQueue(q, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : core::QueueStats{};
  }

  // A fetch of two jobs (each allowed one attempt) leaves for Redis, waits there behind a busy
  // script, and its client hangs up meanwhile: when the script runs and leases the jobs, the
  // answer finds nobody, and the jobs must be ready again for the next worker, first attempts.
  void HangUpWhileTheScriptWaits(int64_t wait_ms) {
    Push("q", {"a", "b"}, /*max_attempts=*/1);
    auto hangup = std::make_shared<Hangup>();
    std::future<OpResult<core::FetchAnswer>> gone;
    {
      BusyRedis busy(SinglePort(), 1'000);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the loop runs
      gone = StartFetch("q", "gone", 2, wait_ms, hangup);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the fetch is sent
      hangup->Signal();
      EXPECT_EQ(gone.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
          << "answered before its script ran: the test did not hold the script back";
    }
    ASSERT_EQ(gone.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    auto g = gone.get();
    EXPECT_TRUE(!g.ok() || g->jobs.empty()) << "jobs answered to a client that hung up";
    auto live = StartFetch("q", "live", 2, 0, nullptr).get();
    ASSERT_TRUE(live.ok()) << live.message();
    ASSERT_EQ(live->jobs.size(), 2u) << "the jobs stayed leased to the client that hung up";
    EXPECT_EQ(live->jobs[0].payload, "a");
    EXPECT_EQ(live->jobs[1].payload, "b");
    for (const Delivery& d : live->jobs) EXPECT_EQ(d.attempt, 1);
    core::QueueStats s = Stats("q");
    EXPECT_EQ(s.inflight, 2);
    EXPECT_EQ(s.dead, 0) << "the hung-up delivery counted as the one attempt allowed";
    EXPECT_EQ(s.nacked, 0);
    EXPECT_EQ(s.expired, 0);
  }

  RedisHarness harness_;
};

TEST_F(RedisHangupTest, AFetchScriptAnsweredAfterTheHangUpGivesItsJobsBack) {
  HangUpWhileTheScriptWaits(0);
}

TEST_F(RedisHangupTest, ALongPollScriptAnsweredAfterTheHangUpGivesItsJobsBack) {
  HangUpWhileTheScriptWaits(5'000);
}

}  // namespace
}  // namespace anteroom::store::conformance
