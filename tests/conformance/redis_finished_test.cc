// Finished jobs on Redis, where the conformance suite cannot look: the records (queue.lua's
// `:f`, `:fo`, and what each keeps under its id in `:p`, `:h`, `:jp`, `:jl`) go when the queue
// no longer keeps them, though nobody calls (the sweeper trims them), and a trim cut short
// (a call trims at most 256) never shows a job the queue no longer keeps, whatever the settings
// say later.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "await_answer.h"
#include "backend_fixture.h"

namespace anteroom::store::conformance {
namespace {

using Outcomes = std::vector<core::LeaseOutcome>;

class RedisFinishedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A prefix of its own per run (--gtest_repeat runs a test again in the same process).
    static int runs = 0;
    prefix_ = "finished" + std::to_string(getpid()) + "-" + std::to_string(++runs) + ":";
    backend_ = std::make_unique<redis::RedisBackend>(
        clock_, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                           .key_prefix = prefix_,
                                           .redis_time = false,
                                           .run_timer = false});
  }
  redis::RedisBackend& b() { return *backend_; }

  // A number redis-cli answers about the queue's key `suffix` (LLEN, HLEN).
  int64_t Count(const std::string& command, const std::string& suffix) {
    const std::string& url = RedisServers::Get().Single();
    std::string cmd = "redis-cli -p " + url.substr(url.rfind(':') + 1) + " " + command + " '" +
                      prefix_ + "{q:" + kQueue + "}:" + suffix + "' 2>&1";
    std::string out;
    if (FILE* p = popen(cmd.c_str(), "r")) {
      char buf[256];
      while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
      pclose(p);
    }
    return std::strtoll(out.c_str(), nullptr, 10);
  }
  void Keep(int64_t count, int64_t age_ms) {
    core::QueueSettings settings;
    settings.keep_acked = {.count = count, .age_ms = age_ms};
    auto r = AwaitAnswer<Done>([&](auto done) { b().SetQueueSettings(kQueue, settings, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  // Pushes n jobs, fetches them, gives each a progress, a log line and a failed attempt, and
  // acks them with a result, in id order.
  void Finish(int n) {
    std::vector<core::JobSpec> jobs(static_cast<size_t>(n));
    for (auto& j : jobs) j.payload = "p";
    auto pushed = AwaitAnswer<std::vector<core::PushResult>>(
        [&](auto done) { b().Push(kQueue, jobs, done); });
    ASSERT_TRUE(pushed.ok()) << pushed.message();
    for (int pass = 0; pass < 2; ++pass) {
      core::FetchRequest request;
      request.worker = "w";
      request.max = static_cast<size_t>(n);
      auto fetched = AwaitAnswer<core::FetchAnswer>(
          [&](auto done) { b().Fetch(kQueue, std::move(request), done); });
      ASSERT_TRUE(fetched.ok() && fetched->jobs.size() == static_cast<size_t>(n));
      std::vector<std::string> leases;
      for (const core::Delivery& d : fetched->jobs) leases.push_back(d.lease);
      if (pass == 0) {
        auto nacked =
            AwaitAnswer<Outcomes>([&](auto done) { b().Nack(kQueue, leases, 0, "once", done); });
        ASSERT_TRUE(nacked.ok());
        continue;
      }
      for (const std::string& lease : leases) {
        auto p = AwaitAnswer<core::LeaseOutcome>(
            [&](auto done) { b().SetProgress(kQueue, lease, "1", done); });
        auto l = AwaitAnswer<core::LeaseOutcome>(
            [&](auto done) { b().AppendJobLog(kQueue, lease, {"line"}, done); });
        ASSERT_TRUE(p.ok() && *p == core::LeaseOutcome::kOk && l.ok());
      }
      std::vector<std::string> results(leases.size(), "true");
      auto acked =
          AwaitAnswer<Outcomes>([&](auto done) { b().Ack(kQueue, leases, results, done); });
      ASSERT_TRUE(acked.ok());
    }
  }
  OpStatus Lookup(core::JobId id) {
    auto r = AwaitAnswer<core::JobView>([&](auto done) { b().GetJob(kQueue, id, done); });
    return r.status();
  }
  // Every key that holds something of a finished job: its record, its place in the order, its
  // payload, history, progress and log.
  void ExpectKept(int64_t n) {
    EXPECT_EQ(Count("HLEN", "f"), n);
    EXPECT_EQ(Count("LLEN", "fo"), n);
    for (const char* k : {"p", "h", "jp", "jl"}) EXPECT_EQ(Count("HLEN", k), n) << k;
  }

  static constexpr const char* kQueue = "done";
  FakeClock clock_;
  std::string prefix_;
  std::unique_ptr<redis::RedisBackend> backend_;
};

TEST_F(RedisFinishedTest, TheSweeperTrimsAQueueNobodyCalls) {
  Keep(1'000, 5'000);
  Finish(20);
  ExpectKept(20);
  clock_.Advance(5'000);
  b().RunDue();  // past the age, within the sweeper's slack: still there, though never shown
  EXPECT_EQ(Count("HLEN", "f"), 20);
  clock_.Advance(60'000);
  b().RunDue();
  ExpectKept(0);
  EXPECT_EQ(Lookup(1), OpStatus::kUnknownJob);
}

TEST_F(RedisFinishedTest, AJobKeptByNoneLeavesNothingBehind) {
  Keep(0, 5'000);
  Finish(5);
  ExpectKept(0);
  EXPECT_EQ(Count("HLEN", "j"), 0);
}

TEST_F(RedisFinishedTest, ATrimCutShortShowsNothingPastTheSettings) {
  Finish(600);
  ExpectKept(600);
  Keep(10, 86'400'000);  // 590 to trim: 256 by this call
  EXPECT_EQ(Count("LLEN", "fo"), 344);
  EXPECT_EQ(Lookup(1), OpStatus::kUnknownJob);
  EXPECT_EQ(Lookup(590), OpStatus::kUnknownJob);
  EXPECT_EQ(Lookup(591), OpStatus::kOk);
  // Keeping more again brings back none of those gone by the count in force before.
  Keep(1'000, 86'400'000);
  EXPECT_EQ(Lookup(1), OpStatus::kUnknownJob);
  EXPECT_EQ(Lookup(591), OpStatus::kOk);
  b().RunDue();  // the rest, by the sweeper, at once
  ExpectKept(10);
  // Gone by the age in force then, not by the one now.
  Finish(600);
  clock_.Advance(1'000);
  Keep(1'000, 1'000);  // every one is past it: 256 go now
  Keep(1'000, 86'400'000);
  EXPECT_EQ(Lookup(1'200), OpStatus::kUnknownJob);
  b().RunDue();
  b().RunDue();
  ExpectKept(0);
  Finish(1);
  EXPECT_EQ(Lookup(1'201), OpStatus::kOk);
}

}  // namespace
}  // namespace anteroom::store::conformance
