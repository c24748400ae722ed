// The schedules conformance suite (core/job_schedule.h through store::Backend): the same tests
// against every backend, time moved by the harness's clock. Times are absolute (a schedule's
// cron speaks of a zone's calendar), so each test first moves the clock to a chosen instant.

#include <gtest/gtest.h>

#include <date/date.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend_fixture.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::Schedule;
using core::ScheduleSpec;

constexpr int64_t kSecond = 1'000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;

// ms since the epoch of a UTC calendar time.
int64_t Utc(int y, unsigned mo, unsigned d, int h = 0, int mi = 0) {
  using namespace std::chrono;
  auto day = date::sys_days(date::year(y) / mo / d);
  return duration_cast<milliseconds>((day + hours(h) + minutes(mi)).time_since_epoch()).count();
}

ScheduleSpec Every(std::string queue, int64_t every_ms, std::string payload = "tick") {
  ScheduleSpec s;
  s.queue = std::move(queue);
  s.every_ms = every_ms;
  s.job.payload = std::move(payload);
  return s;
}

ScheduleSpec Cron(std::string queue, std::string cron, std::string zone) {
  ScheduleSpec s;
  s.queue = std::move(queue);
  s.cron = std::move(cron);
  s.time_zone = std::move(zone);
  s.job.payload = "cron";
  return s;
}

class SchedulesConformanceTest : public conformance::BackendTest {
 protected:
  // Moves the clock to `at_ms` (which must not be behind it).
  void MoveTo(int64_t at_ms) {
    ASSERT_GE(at_ms, NowMs());
    AdvanceTime(at_ms - NowMs());
  }
  // Moves the clock forward in steps of `step_ms`, `steps` times, the timer running each.
  void Walk(int64_t step_ms, int steps) {
    for (int k = 0; k < steps; ++k) AdvanceTime(step_ms);
  }
  OpResult<Schedule> Put(const std::string& id, ScheduleSpec spec) {
    return Await<Schedule>([&](auto done) { b().PutSchedule(id, std::move(spec), done); });
  }
  Schedule PutOk(const std::string& id, ScheduleSpec spec) {
    auto r = Put(id, std::move(spec));
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Schedule{};
  }
  OpResult<Schedule> Get(const std::string& id) {
    return Await<Schedule>([&](auto done) { b().GetSchedule(id, done); });
  }
  Schedule GetOk(const std::string& id) {
    auto r = Get(id);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Schedule{};
  }
  std::vector<Schedule> List() {
    auto r = Await<std::vector<Schedule>>([&](auto done) { b().ListSchedules(done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<Schedule>{};
  }
  OpResult<Schedule> Pause(const std::string& id, bool paused) {
    return Await<Schedule>([&](auto done) { b().PauseSchedule(id, paused, done); });
  }
  OpResult<Schedule> Delete(const std::string& id) {
    return Await<Schedule>([&](auto done) { b().DeleteSchedule(id, done); });
  }
  core::QueueStats Stats(const std::string& q) {
    auto r = Await<core::QueueStats>([&](auto done) { b().GetQueue(q, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : core::QueueStats{};
  }
  // Every job ready now, leased (and acked, when `ack`).
  std::vector<core::Delivery> Drain(const std::string& q, bool ack = true) {
    std::vector<core::Delivery> all;
    for (int k = 0; k < 100; ++k) {
      auto r = Await<core::FetchAnswer>([&](auto done) {
        core::FetchRequest request;
        request.worker = "w";
        request.max = 100;
        request.lease_ms = kHour;  // outlives the steps of a test that holds its jobs
        b().Fetch(q, std::move(request), done);
      });
      EXPECT_TRUE(r.ok()) << r.message();
      if (!r.ok() || r->jobs.empty()) break;
      std::vector<std::string> leases;
      for (auto& d : r->jobs) {
        leases.push_back(d.lease);
        all.push_back(std::move(d));
      }
      if (ack) {
        auto a = Await<std::vector<core::LeaseOutcome>>(
            [&](auto done) { b().Ack(q, std::move(leases), done); });
        EXPECT_TRUE(a.ok()) << a.message();
      }
    }
    return all;
  }
  // The nominal times a schedule's runs were pushed at, watched by stepping the clock through
  // [from, to) `step_ms` at a time: its latest run after each step (steps finer than its
  // period see every run).
  std::vector<int64_t> RunsSeen(const std::string& id, int64_t to_ms, int64_t step_ms) {
    std::vector<int64_t> runs;
    int64_t done_before = GetOk(id).state.runs_done;
    while (NowMs() + step_ms <= to_ms) {
      AdvanceTime(step_ms);
      Schedule s = GetOk(id);
      EXPECT_LE(s.state.runs_done, done_before + 1) << "two runs within one step";
      if (s.state.runs_done > done_before && s.state.last_run_ms) {
        runs.push_back(*s.state.last_run_ms);
      }
      done_before = s.state.runs_done;
    }
    return runs;
  }
};

TEST_P(SchedulesConformanceTest, PutGetListPauseDelete) {
  MoveTo(Utc(2026, 6, 1));
  const int64_t t0 = NowMs();
  Schedule s = PutOk("nightly", Every("jobs", kHour));
  EXPECT_EQ(s.id, "nightly");
  EXPECT_EQ(s.spec.queue, "jobs");
  EXPECT_EQ(s.state.created_at_ms, t0);
  EXPECT_EQ(s.state.runs_done, 0);
  EXPECT_FALSE(s.state.paused);
  ASSERT_TRUE(s.state.next_ms);
  EXPECT_EQ(*s.state.next_ms, t0);  // an interval anchored at its creation fires at once
  EXPECT_EQ(GetOk("nightly"), s);

  PutOk("another", Every("other", kMinute));
  std::vector<Schedule> all = List();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "another");
  EXPECT_EQ(all[1].id, "nightly");

  auto paused = Pause("nightly", true);
  ASSERT_TRUE(paused.ok()) << paused.message();
  EXPECT_TRUE(paused->state.paused);
  EXPECT_TRUE(GetOk("nightly").state.paused);

  auto gone = Delete("nightly");
  ASSERT_TRUE(gone.ok()) << gone.message();
  EXPECT_EQ(gone->id, "nightly");
  EXPECT_EQ(Get("nightly").status(), OpStatus::kUnknownSchedule);
  EXPECT_EQ(Delete("nightly").status(), OpStatus::kUnknownSchedule);
  EXPECT_EQ(Pause("nightly", false).status(), OpStatus::kUnknownSchedule);
  EXPECT_EQ(List().size(), 1u);
}

TEST_P(SchedulesConformanceTest, AnIdBelongsToOneQueue) {
  PutOk("s", Every("a", kMinute));
  auto moved = Put("s", Every("b", kMinute));
  EXPECT_EQ(moved.status(), OpStatus::kConflict);
  EXPECT_EQ(GetOk("s").spec.queue, "a");
  ASSERT_TRUE(Delete("s").ok());
  EXPECT_TRUE(Put("s", Every("b", kMinute)).ok());
}

TEST_P(SchedulesConformanceTest, BadTimingChangesNothing) {
  ScheduleSpec bad = Cron("q", "61 * * * *", "UTC");
  EXPECT_EQ(Put("s", bad).status(), OpStatus::kInvalidArgument);
  ScheduleSpec zone = Cron("q", "0 * * * *", "Mars/Olympus");
  EXPECT_EQ(Put("s", zone).status(), OpStatus::kInvalidArgument);
  EXPECT_EQ(Get("s").status(), OpStatus::kUnknownSchedule);
  EXPECT_TRUE(List().empty());
}

TEST_P(SchedulesConformanceTest, AnIntervalPushesOneJobPerRun) {
  MoveTo(Utc(2026, 6, 1));
  ScheduleSpec spec = Every("jobs", kMinute, "report");
  spec.start_at_ms = NowMs() + kMinute;
  spec.job.priority = 7;
  spec.job.group = "tenant-a";
  PutOk("report", spec);
  Walk(10 * kSecond, 6 * 10);  // 10 minutes: runs at +1 .. +10 minutes
  std::vector<core::Delivery> jobs = Drain("jobs");
  ASSERT_EQ(jobs.size(), 10u);
  std::set<core::JobId> ids;
  for (const auto& d : jobs) {
    EXPECT_EQ(d.payload, "report");
    EXPECT_EQ(d.priority, 7);
    EXPECT_EQ(d.group, "tenant-a");
    ids.insert(d.id);
  }
  EXPECT_EQ(ids.size(), 10u);
  Schedule s = GetOk("report");
  EXPECT_EQ(s.state.runs_done, 10);
  EXPECT_EQ(*s.state.last_run_ms, *spec.start_at_ms + 9 * kMinute);
  EXPECT_EQ(*s.state.next_ms, *spec.start_at_ms + 10 * kMinute);
}

TEST_P(SchedulesConformanceTest, CronAcrossSpringForwardInBerlin) {
  // Clocks go from 02:00 to 03:00 local (01:00 UTC) on 2026-03-29: a daily 02:30 runs at
  // 03:00 local that day, once.
  MoveTo(Utc(2026, 3, 26, 12));
  PutOk("b", Cron("q", "30 2 * * *", "Europe/Berlin"));
  std::vector<int64_t> runs = RunsSeen("b", Utc(2026, 3, 31, 12), 15 * kMinute);
  EXPECT_EQ(runs, (std::vector<int64_t>{Utc(2026, 3, 27, 1, 30), Utc(2026, 3, 28, 1, 30),
                                        Utc(2026, 3, 29, 1, 0), Utc(2026, 3, 30, 0, 30),
                                        Utc(2026, 3, 31, 0, 30)}));
  EXPECT_EQ(Drain("q").size(), 5u);
}

TEST_P(SchedulesConformanceTest, CronAcrossFallBackInNewYork) {
  // Clocks go from 02:00 EDT back to 01:00 EST on 2026-11-01: 01:30 happens twice and runs
  // once, at its first occurrence (05:30 UTC).
  MoveTo(Utc(2026, 10, 30, 12));
  PutOk("ny", Cron("q", "30 1 * * *", "America/New_York"));
  std::vector<int64_t> runs = RunsSeen("ny", Utc(2026, 11, 3, 12), 15 * kMinute);
  EXPECT_EQ(runs, (std::vector<int64_t>{Utc(2026, 10, 31, 5, 30), Utc(2026, 11, 1, 5, 30),
                                        Utc(2026, 11, 2, 6, 30), Utc(2026, 11, 3, 6, 30)}));
}

TEST_P(SchedulesConformanceTest, ADayDownFollowsTheMisfirePolicy) {
  MoveTo(Utc(2026, 6, 1));
  const int64_t start = NowMs() + kHour;
  ScheduleSpec skip = Every("skip", kHour);
  skip.start_at_ms = start;
  ScheduleSpec once = Every("once", kHour);
  once.start_at_ms = start;
  once.misfire.policy = core::MisfirePolicy::kRunOnce;
  ScheduleSpec all = Every("all", kHour);
  all.start_at_ms = start;
  all.misfire.policy = core::MisfirePolicy::kRunAll;
  all.misfire.max_catchup = 5;
  PutOk("skip", skip);
  PutOk("once", once);
  PutOk("all", all);
  // Nothing turns the timer for a day and half an hour: every run in it is late.
  AdvanceTime(kDay + 90 * kMinute);
  EXPECT_EQ(Drain("skip").size(), 0u);
  EXPECT_EQ(Drain("once").size(), 1u);
  EXPECT_EQ(Drain("all").size(), 5u);
  EXPECT_EQ(*GetOk("once").state.last_run_ms, start + 24 * kHour);
  EXPECT_EQ(*GetOk("all").state.last_run_ms, start + 24 * kHour);
  // Then each goes on on time.
  for (const char* id : {"skip", "once", "all"}) {
    EXPECT_EQ(*GetOk(id).state.next_ms, start + 25 * kHour) << id;
  }
  AdvanceTime(30 * kMinute);
  EXPECT_EQ(Drain("skip").size(), 1u);
  EXPECT_EQ(Drain("once").size(), 1u);
  EXPECT_EQ(Drain("all").size(), 1u);
}

TEST_P(SchedulesConformanceTest, ATimerWakingLateStillRunsEveryRunByDefault) {
  // The default grace (a minute) keeps runs the timer reaches a few ms late on time: under
  // `skip` with no grace each of them would be lost.
  MoveTo(Utc(2026, 6, 1));
  Schedule s = PutOk("s", Every("q", kSecond));
  EXPECT_EQ(s.spec.misfire.grace_ms, core::kDefaultMisfireGraceMs);
  AdvanceTime(7);  // the first run, 7 ms late
  Walk(kSecond + 3, 10);
  EXPECT_EQ(GetOk("s").state.runs_done, 11);
  EXPECT_EQ(Stats("q").ready, 11);
}

TEST_P(SchedulesConformanceTest, OverlapSkipWaitsForThePreviousRun) {
  MoveTo(Utc(2026, 6, 1));
  ScheduleSpec spec = Every("q", kMinute);
  spec.overlap = core::Overlap::kSkip;
  PutOk("s", spec);
  AdvanceTime(0);
  EXPECT_EQ(Stats("q").ready, 1);
  Walk(kMinute, 3);  // the first run's job is still ready: no run fires
  EXPECT_EQ(Stats("q").ready, 1);
  EXPECT_EQ(GetOk("s").state.runs_done, 1);
  // In flight still counts as running.
  std::vector<core::Delivery> taken = Drain("q", /*ack=*/false);
  ASSERT_EQ(taken.size(), 1u);
  Walk(kMinute, 2);
  EXPECT_EQ(GetOk("s").state.runs_done, 1);
  auto acked = Await<std::vector<core::LeaseOutcome>>(
      [&](auto done) { b().Ack("q", {taken[0].lease}, done); });
  ASSERT_TRUE(acked.ok());
  ASSERT_EQ(*acked, std::vector<core::LeaseOutcome>{core::LeaseOutcome::kOk});
  AdvanceTime(kMinute);
  EXPECT_EQ(GetOk("s").state.runs_done, 2);
  EXPECT_EQ(Stats("q").ready, 1);
}

TEST_P(SchedulesConformanceTest, OverlapAllowRunsBesideThePrevious) {
  MoveTo(Utc(2026, 6, 1));
  PutOk("s", Every("q", kMinute));
  AdvanceTime(0);
  Walk(kMinute, 3);
  EXPECT_EQ(Stats("q").ready, 4);
}

TEST_P(SchedulesConformanceTest, PausedFiresNothingAndResumesFromNow) {
  MoveTo(Utc(2026, 6, 1));
  ScheduleSpec spec = Every("q", kMinute);
  spec.misfire.policy = core::MisfirePolicy::kRunAll;
  spec.misfire.max_catchup = 100;
  PutOk("s", spec);
  AdvanceTime(0);
  ASSERT_TRUE(Pause("s", true).ok());
  Walk(kMinute, 10);
  EXPECT_EQ(Stats("q").ready, 1);
  auto resumed = Pause("s", false);
  ASSERT_TRUE(resumed.ok());
  EXPECT_FALSE(resumed->state.paused);
  AdvanceTime(0);
  EXPECT_EQ(Stats("q").ready, 2);  // the run due now, not the ten it missed while paused
  EXPECT_EQ(GetOk("s").state.runs_done, 2);
}

TEST_P(SchedulesConformanceTest, MaxRunsEndsTheSchedule) {
  MoveTo(Utc(2026, 6, 1));
  ScheduleSpec spec = Every("q", kMinute);
  spec.max_runs = 3;
  PutOk("s", spec);
  AdvanceTime(0);
  Walk(kMinute, 10);
  EXPECT_EQ(Stats("q").ready, 3);
  Schedule s = GetOk("s");
  EXPECT_EQ(s.state.runs_done, 3);
  EXPECT_FALSE(s.state.next_ms);
}

TEST_P(SchedulesConformanceTest, EndAtEndsTheSchedule) {
  MoveTo(Utc(2026, 6, 1));
  ScheduleSpec spec = Every("q", kMinute);
  spec.end_at_ms = NowMs() + 5 * kMinute;  // runs at +0 .. +4
  PutOk("s", spec);
  AdvanceTime(0);
  Walk(kMinute, 10);
  EXPECT_EQ(Stats("q").ready, 5);
  EXPECT_FALSE(GetOk("s").state.next_ms);
}

TEST_P(SchedulesConformanceTest, AChangeKeepsWhatRanAndNeverRunsATimeTwice) {
  MoveTo(Utc(2026, 6, 1, 10));
  PutOk("s", Cron("q", "0 * * * *", "UTC"));
  AdvanceTime(0);  // 10:00 runs
  Walk(kHour, 2);  // 11:00, 12:00
  EXPECT_EQ(GetOk("s").state.runs_done, 3);
  // Now every 30 minutes: 12:00 ran already and does not run again; 12:30 does.
  Schedule changed = PutOk("s", Cron("q", "0,30 * * * *", "UTC"));
  EXPECT_EQ(changed.state.runs_done, 3);
  EXPECT_EQ(*changed.state.next_ms, Utc(2026, 6, 1, 12, 30));
  AdvanceTime(0);
  EXPECT_EQ(GetOk("s").state.runs_done, 3);
  Walk(30 * kMinute, 2);
  EXPECT_EQ(GetOk("s").state.runs_done, 5);
  EXPECT_EQ(Stats("q").ready, 5);
}

TEST_P(SchedulesConformanceTest, JitterDelaysEachRunByItsOwnFixedAmount) {
  MoveTo(Utc(2026, 6, 1));
  ScheduleSpec spec = Every("q", kHour);
  spec.jitter_ms = 10 * kMinute;
  PutOk("s", spec);
  const int64_t first = NowMs();
  const int64_t delay = core::RunJitterMs("s", first, spec.jitter_ms);
  ASSERT_GT(delay, 0);  // the test's run key draws a delay
  AdvanceTime(0);
  EXPECT_EQ(Stats("q").delayed, 1);
  EXPECT_EQ(Stats("q").ready, 0);
  AdvanceTime(delay);
  EXPECT_EQ(Stats("q").ready, 1);
}

TEST_P(SchedulesConformanceTest, ARestartGoesOnWithoutRunningATimeTwice) {
  MoveTo(Utc(2026, 6, 1));
  ScheduleSpec spec = Every("q", kMinute);
  spec.misfire.policy = core::MisfirePolicy::kRunAll;
  spec.misfire.max_catchup = 10;
  PutOk("s", spec);
  AdvanceTime(0);
  Walk(kMinute, 4);
  EXPECT_EQ(Stats("q").ready, 5);
  Schedule before = GetOk("s");
  if (!harness_->Restart()) GTEST_SKIP() << "this backend keeps nothing across a restart";
  EXPECT_EQ(GetOk("s"), before);
  AdvanceTime(0);
  EXPECT_EQ(Stats("q").ready, 5);
  // Down for three runs: run_all catches them up.
  AdvanceTime(3 * kMinute);
  EXPECT_EQ(Stats("q").ready, 8);
  EXPECT_EQ(GetOk("s").state.runs_done, 8);
  std::set<core::JobId> ids;
  for (const auto& d : Drain("q")) ids.insert(d.id);
  EXPECT_EQ(ids.size(), 8u);
}

TEST_P(SchedulesConformanceTest, ADeletedScheduleFiresNoMore) {
  MoveTo(Utc(2026, 6, 1));
  PutOk("s", Every("q", kMinute));
  AdvanceTime(0);
  ASSERT_TRUE(Delete("s").ok());
  Walk(kMinute, 3);
  EXPECT_EQ(Stats("q").ready, 1);
}

TEST_P(SchedulesConformanceTest, ScheduledQueueCountsAgainstMaxQueues) {
  Remake({.max_queues = 1});
  PutOk("s", Every("first", kMinute));
  auto second = Put("t", Every("second", kMinute));
  EXPECT_EQ(second.status(), OpStatus::kLimitReached);
  EXPECT_EQ(Get("t").status(), OpStatus::kUnknownSchedule);
  EXPECT_EQ(List().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, SchedulesConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
