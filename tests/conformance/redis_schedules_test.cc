// Schedules fired by two processes sharing one Redis: two RedisBackends on the same key prefix
// and clock both run their sweepers at the same moments (from two threads, so their firings
// race), and every run must be pushed once: the schedules and the jobs they pushed, step by
// step, equal those of the embedded backend (the core, firing alone) on the same times.
//
// The stretch: cron schedules in Europe/Berlin across the change to summer time (2026-03-29)
// and back (2026-10-25), intervals with overlap allow and skip, jitter, max_runs, and run_all
// catching up after a day with no sweeper, then after half a year.
#include <gtest/gtest.h>

#include <date/date.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "await_answer.h"
#include "redis_servers.h"
#include "store/memory/memory_backend.h"
#include "store/redis/redis_backend.h"

namespace anteroom::store::conformance {
namespace {

using core::Schedule;
using core::ScheduleSpec;

constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;

int64_t Utc(int y, unsigned mo, unsigned d, int h = 0) {
  using namespace std::chrono;
  auto day = date::sys_days(date::year(y) / mo / d);
  return duration_cast<milliseconds>((day + hours(h)).time_since_epoch()).count();
}

ScheduleSpec Every(std::string queue, int64_t every_ms, std::string payload) {
  ScheduleSpec s;
  s.queue = std::move(queue);
  s.every_ms = every_ms;
  s.job.payload = std::move(payload);
  return s;
}
ScheduleSpec Cron(std::string queue, std::string cron, std::string payload) {
  ScheduleSpec s;
  s.queue = std::move(queue);
  s.cron = std::move(cron);
  s.time_zone = "Europe/Berlin";
  s.job.payload = std::move(payload);
  return s;
}

std::string Show(const Schedule& s) {
  const core::ScheduleState& st = s.state;
  return fmt::format(
      "{} q={} created={} updated={} handled={} runs={} paused={} last_run={} "
      "last_job={} next={}",
      s.id, s.spec.queue, st.created_at_ms, st.updated_at_ms, st.handled_through_ms, st.runs_done,
      st.paused, st.last_run_ms ? *st.last_run_ms : -1,
      st.last_job ? static_cast<int64_t>(*st.last_job) : -1, st.next_ms ? *st.next_ms : -1);
}

class RedisSchedulesTest : public ::testing::Test {
 protected:
  RedisSchedulesTest()
      : memory_clock_(Utc(2026, 3, 27, 22)),
        redis_clock_(Utc(2026, 3, 27, 22)),
        memory_(memory_clock_, MemoryBackendOptions{.run_timer = false}) {
    redis::RedisBackendOptions options{.url = RedisServers::Get().Single(),
                                       .key_prefix = "sched2p." + std::to_string(getpid()) + ":",
                                       .redis_time = false,
                                       .run_timer = false};
    first_.emplace(redis_clock_, options);
    second_.emplace(redis_clock_, options);
  }

  // Both clocks on, then every backend's timer: the two Redis processes at the same moment.
  void Step(int64_t ms) {
    memory_clock_.Advance(ms);
    redis_clock_.Advance(ms);
    memory_.RunDue();
    std::thread other([this] { second_->RunDue(); });
    first_->RunDue();
    other.join();
  }

  std::vector<Schedule> List(Backend& b) {
    auto r = AwaitAnswer<std::vector<Schedule>>([&](auto done) { b.ListSchedules(done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<Schedule>{};
  }
  // Every ready job of `queue`, fetched (and acked) on `b`: "id payload" each.
  std::vector<std::string> Drain(Backend& b, const std::string& queue) {
    std::vector<std::string> out;
    for (int k = 0; k < 50; ++k) {
      auto r = AwaitAnswer<core::FetchAnswer>([&](auto done) {
        core::FetchRequest request;
        request.worker = "w";
        request.max = 100;
        request.lease_ms = kHour;
        b.Fetch(queue, std::move(request), done);
      });
      EXPECT_TRUE(r.ok()) << r.message();
      if (!r.ok() || r->jobs.empty()) break;
      std::vector<std::string> leases;
      for (const auto& d : r->jobs) {
        out.push_back(fmt::format("{} {}", d.id, d.payload));
        leases.push_back(d.lease);
      }
      auto acked = AwaitAnswer<std::vector<core::LeaseOutcome>>(
          [&](auto done) { b.Ack(queue, std::move(leases), done); });
      EXPECT_TRUE(acked.ok()) << acked.message();
    }
    return out;
  }
  // The same schedules, in the same state, on both sides (read from either process).
  void ExpectSame(const std::string& when) {
    std::vector<Schedule> want = List(memory_);
    Backend& redis = (++reads_ % 2 == 0) ? static_cast<Backend&>(*first_) : *second_;
    std::vector<Schedule> got = List(redis);
    ASSERT_EQ(want.size(), got.size()) << when;
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(want[k], got[k]) << when << "\n memory: " << Show(want[k])
                                 << "\n redis:  " << Show(got[k]);
    }
  }
  // The jobs of `queue` taken from both sides: the same ids and payloads; each id once.
  void DrainBoth(const std::string& queue, const std::string& when) {
    std::vector<std::string> want = Drain(memory_, queue);
    std::vector<std::string> got = Drain(*first_, queue);
    ASSERT_EQ(want, got) << when << " queue " << queue;
    for (const std::string& job : got) {
      EXPECT_TRUE(taken_.insert(queue + " " + job).second) << "taken twice: " << job;
    }
    jobs_ += got.size();
  }

  FakeClock memory_clock_, redis_clock_;
  MemoryBackend memory_;
  std::optional<redis::RedisBackend> first_, second_;
  int reads_ = 0;
  std::set<std::string> taken_;
  size_t jobs_ = 0;
};

TEST_F(RedisSchedulesTest, TwoProcessesFireEachRunOnce) {
  std::vector<std::pair<std::string, ScheduleSpec>> specs;
  specs.emplace_back("berlin-hourly", Cron("cron", "30 * * * *", "hourly"));
  specs.emplace_back("berlin-night", Cron("cron", "30 2 * * *", "night"));
  specs.emplace_back("berlin-quarter", Cron("cron", "*/15 1-4 * * *", "quarter"));
  specs.emplace_back("tick", Every("ticks", 7 * kMinute, "tick"));
  {
    ScheduleSpec jittered = Every("ticks", 20 * kMinute, "jittered");
    jittered.jitter_ms = 5 * kMinute;
    specs.emplace_back("jittered", jittered);
    ScheduleSpec limited = Every("ticks", 3 * kMinute, "limited");
    limited.max_runs = 50;
    specs.emplace_back("limited", limited);
    ScheduleSpec skipper = Every("skip", 10 * kMinute, "skipper");
    skipper.overlap = core::Overlap::kSkip;
    specs.emplace_back("skipper", skipper);
    ScheduleSpec catchup = Every("catch", kHour, "catchup");
    catchup.misfire.policy = core::MisfirePolicy::kRunAll;
    catchup.misfire.max_catchup = 30;
    specs.emplace_back("catchup", catchup);
    ScheduleSpec skip_catchup = Cron("catch", "0 */2 * * *", "every-two");
    skip_catchup.overlap = core::Overlap::kSkip;
    skip_catchup.misfire.policy = core::MisfirePolicy::kRunAll;
    skip_catchup.misfire.max_catchup = 10;
    specs.emplace_back("skip-catchup", skip_catchup);
  }
  for (auto& entry : specs) {
    const std::string& id = entry.first;  // not a structured binding: lambdas capture these
    const ScheduleSpec& spec = entry.second;
    auto m = AwaitAnswer<Schedule>([&](auto done) { memory_.PutSchedule(id, spec, done); });
    // Put through either process.
    Backend& redis = (id.size() % 2 == 0) ? static_cast<Backend&>(*first_) : *second_;
    auto r = AwaitAnswer<Schedule>([&](auto done) { redis.PutSchedule(id, spec, done); });
    ASSERT_TRUE(m.ok()) << m.message();
    ASSERT_TRUE(r.ok()) << r.message();
    ASSERT_EQ(*m, *r) << Show(*m) << "\n" << Show(*r);
  }
  ExpectSame("after the puts");

  int step = 0;
  auto walk = [&](int64_t until_ms, int64_t step_ms) {
    while (redis_clock_.NowMs() + step_ms <= until_ms && !HasFatalFailure()) {
      Step(step_ms);
      ++step;
      std::string when = fmt::format("step {} at {}", step, redis_clock_.NowMs());
      ExpectSame(when);
      for (const char* q : {"cron", "ticks", "catch"}) DrainBoth(q, when);
      if (step % 7 == 0) DrainBoth("skip", when);  // else its last job waits: runs are skipped
    }
  };
  // Across the change to summer time, in 5-minute steps.
  walk(Utc(2026, 3, 30, 12), 5 * kMinute);
  // A day with no sweeper anywhere, then on.
  Step(kDay);
  ExpectSame("after a day down");
  walk(redis_clock_.NowMs() + kDay, 5 * kMinute);
  // Half a year down, then across the change back to winter time.
  Step(Utc(2026, 10, 24, 12) - redis_clock_.NowMs());
  ExpectSame("after half a year down");
  walk(Utc(2026, 10, 26, 12), 5 * kMinute);
  for (const char* q : {"cron", "ticks", "catch", "skip"}) DrainBoth(q, "at the end");

  // Every run pushed was one job, each taken once (or still delayed by its jitter).
  int64_t runs = 0, delayed = 0;
  for (const Schedule& s : List(*first_)) runs += s.state.runs_done;
  for (const char* q : {"cron", "ticks", "catch", "skip"}) {
    auto stats = AwaitAnswer<core::QueueStats>([&](auto done) { first_->GetQueue(q, done); });
    ASSERT_TRUE(stats.ok()) << stats.message();
    EXPECT_EQ(stats->ready + stats->inflight, 0) << q;
    delayed += stats->delayed;
  }
  EXPECT_EQ(static_cast<int64_t>(jobs_) + delayed, runs);
  EXPECT_EQ(taken_.size(), jobs_);
  EXPECT_GT(runs, 1000);
}

}  // namespace
}  // namespace anteroom::store::conformance
