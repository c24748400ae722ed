// core/job_schedule.h: a schedule's placing, pausing, firing and bytes, and a randomized test
// that drives the firing rule through random ticks, downtimes, pauses and overlaps and compares
// every run it fires with a deliberately simple model that lists an interval's nominal times
// one by one.

#include "core/job_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'800'000'000'000;
constexpr int64_t kSecond = 1'000;

ScheduleSpec Every(int64_t every_ms) {
  ScheduleSpec s;
  s.queue = "q";
  s.every_ms = every_ms;
  s.job.payload = "{}";
  return s;
}

Schedule Made(const ScheduleSpec& spec, int64_t now, RepeatRule* rule_out = nullptr) {
  auto rule = RuleOf(spec, now);
  EXPECT_TRUE(rule.ok()) << rule.message();
  if (rule_out) *rule_out = *rule;
  return Schedule{"s", spec, Placed(*rule, std::nullopt, now)};
}

// Fires `s` at `now` as a backend does; answers the runs pushed.
std::vector<int64_t> Fire(Schedule& s, const RepeatRule& rule, int64_t now, bool pending) {
  if (!s.Due(now)) return {};
  FirePlan plan = PlanFire(s, rule, now);
  std::vector<int64_t> runs = FiringRuns(s.spec, plan, pending);
  Fired(s.state, s.spec, plan, runs, runs.empty() ? std::nullopt : std::optional<JobId>(7), now);
  return runs;
}

TEST(JobScheduleTest, RuleOfChecksTheTiming) {
  EXPECT_TRUE(RuleOf(Every(1000), kT0).ok());
  EXPECT_FALSE(RuleOf(Every(999), kT0).ok());
  ScheduleSpec cron = Every(0);
  cron.cron = "0 9 * * MON-FRI";
  cron.time_zone = "Europe/Berlin";
  EXPECT_TRUE(RuleOf(cron, kT0).ok());
  cron.time_zone = "Nowhere/Else";
  EXPECT_EQ(RuleOf(cron, kT0).status(), OpStatus::kInvalidArgument);
  cron.time_zone = "UTC";
  cron.cron = "0 0 31 2 *";
  EXPECT_EQ(RuleOf(cron, kT0).status(), OpStatus::kInvalidArgument);
  ScheduleSpec ends = Every(1000);
  ends.start_at_ms = kT0;
  ends.end_at_ms = kT0;
  EXPECT_EQ(RuleOf(ends, kT0).status(), OpStatus::kInvalidArgument);
  ScheduleSpec jitter = Every(1000);
  jitter.jitter_ms = kMaxJitterMs + 1;
  EXPECT_EQ(RuleOf(jitter, kT0).status(), OpStatus::kInvalidArgument);
}

TEST(JobScheduleTest, ANewScheduleStartsAtItsFirstTimeNotBeforeNow) {
  Schedule s = Made(Every(60 * kSecond), kT0);
  EXPECT_EQ(s.state.created_at_ms, kT0);
  EXPECT_EQ(s.state.next_ms, kT0);
  ScheduleSpec later = Every(60 * kSecond);
  later.start_at_ms = kT0 - 90 * kSecond;  // anchored in the past: the next on its grid
  Schedule t = Made(later, kT0);
  EXPECT_EQ(t.state.next_ms, kT0 + 30 * kSecond);
}

TEST(JobScheduleTest, AChangeNeverMovesHandledThroughBack) {
  RepeatRule rule;
  Schedule s = Made(Every(60 * kSecond), kT0, &rule);
  EXPECT_EQ(Fire(s, rule, kT0 + 120 * kSecond, false).size(), 1u);  // skip: only the on-time one
  ScheduleState before = s.state;
  ScheduleSpec every_30s = Every(30 * kSecond);
  every_30s.start_at_ms = kT0;
  auto changed = RuleOf(every_30s, kT0);
  ASSERT_TRUE(changed.ok());
  ScheduleState after = Placed(*changed, before, kT0 + 121 * kSecond);
  EXPECT_EQ(after.runs_done, before.runs_done);
  EXPECT_EQ(after.created_at_ms, before.created_at_ms);
  EXPECT_GE(after.handled_through_ms, before.handled_through_ms);
  EXPECT_EQ(after.next_ms, kT0 + 150 * kSecond);
}

TEST(JobScheduleTest, ResumingGoesOnFromNow) {
  RepeatRule rule;
  ScheduleSpec spec = Every(kSecond);
  spec.misfire = MisfireRule{MisfirePolicy::kRunAll, 0, 1000};
  Schedule s = Made(spec, kT0, &rule);
  SetPaused(s.state, rule, true, kT0 + 10);
  EXPECT_FALSE(s.Due(kT0 + 100 * kSecond));
  SetPaused(s.state, rule, false, kT0 + 100 * kSecond + 500);
  EXPECT_EQ(s.state.next_ms, kT0 + 101 * kSecond);
  EXPECT_EQ(Fire(s, rule, kT0 + 101 * kSecond, false), (std::vector<int64_t>{kT0 + 101 * kSecond}));
}

TEST(JobScheduleTest, OverlapSkipFiresNothingWhileThePreviousIsPendingAndOnlyTheLatestAfter) {
  RepeatRule rule;
  ScheduleSpec spec = Every(kSecond);
  spec.overlap = Overlap::kSkip;
  spec.misfire = MisfireRule{MisfirePolicy::kRunAll, 0, 10};
  Schedule s = Made(spec, kT0, &rule);
  EXPECT_EQ(Fire(s, rule, kT0, false).size(), 1u);
  EXPECT_TRUE(Fire(s, rule, kT0 + 3 * kSecond, true).empty());
  EXPECT_EQ(s.state.runs_done, 1);
  EXPECT_EQ(s.state.handled_through_ms, kT0 + 3 * kSecond);
  EXPECT_EQ(Fire(s, rule, kT0 + 6 * kSecond, false), (std::vector<int64_t>{kT0 + 6 * kSecond}));
}

TEST(JobScheduleTest, MaxRunsCountsOnlyRunsPushed) {
  RepeatRule rule;
  ScheduleSpec spec = Every(kSecond);
  spec.overlap = Overlap::kSkip;
  spec.max_runs = 3;
  spec.misfire = MisfireRule{MisfirePolicy::kRunAll, 0, 10};
  Schedule s = Made(spec, kT0, &rule);
  // Three due at once, overlap keeps one: two runs are still left afterwards.
  EXPECT_EQ(Fire(s, rule, kT0 + 2 * kSecond, false).size(), 1u);
  EXPECT_EQ(s.state.runs_done, 1);
  ASSERT_TRUE(s.state.next_ms);
  EXPECT_EQ(*s.state.next_ms, kT0 + 3 * kSecond);
  Fire(s, rule, kT0 + 3 * kSecond, false);
  Fire(s, rule, kT0 + 4 * kSecond, false);
  EXPECT_EQ(s.state.runs_done, 3);
  EXPECT_FALSE(s.state.next_ms);
  EXPECT_FALSE(s.Due(kT0 + 100 * kSecond));
}

TEST(JobScheduleTest, RunJobCarriesTheRunKeyAndAFixedJitter) {
  ScheduleSpec spec = Every(kSecond);
  spec.jitter_ms = 5'000;
  spec.job = ScheduleJob{"{\"a\":1}", 4, "tenant", 3};
  Schedule s{"nightly", spec, {}};
  JobSpec job = RunJob(s, kT0);
  EXPECT_EQ(job.payload, "{\"a\":1}");
  EXPECT_EQ(job.priority, 4);
  EXPECT_EQ(job.group, "tenant");
  EXPECT_EQ(job.max_attempts, 3);
  EXPECT_EQ(job.dedupe_key, "schedule:nightly:" + std::to_string(kT0));
  EXPECT_EQ(job.delay_ms, RunJitterMs("nightly", kT0, 5'000));
  std::set<int64_t> delays;
  for (int k = 0; k < 200; ++k) {
    int64_t d = RunJitterMs("nightly", kT0 + k * kSecond, 5'000);
    EXPECT_GE(d, 0);
    EXPECT_LE(d, 5'000);
    delays.insert(d);
  }
  EXPECT_GT(delays.size(), 150u);  // spread, not one value
  EXPECT_EQ(RunJitterMs("nightly", kT0, 0), 0);
}

TEST(JobScheduleTest, BytesRoundTripAndDamageIsRefused) {
  ScheduleSpec spec;
  spec.queue = "q";
  spec.cron = "*/5 * * * *";
  spec.time_zone = "America/New_York";
  spec.start_at_ms = kT0;
  spec.end_at_ms = kT0 + 1;
  spec.max_runs = 9;
  spec.overlap = Overlap::kSkip;
  spec.misfire = MisfireRule{MisfirePolicy::kRunOnce, 5, 6};
  spec.jitter_ms = 7;
  spec.job = ScheduleJob{"[1,2]", -3, "g", 8};
  Schedule s{"id", spec, ScheduleState{1, 2, 3, 4, true, 5, JobId{6}, 7}};
  std::string bytes;
  ByteWriter w(bytes);
  SaveSchedule(w, s);
  ByteReader r(bytes);
  Schedule back;
  ASSERT_TRUE(LoadSchedule(r, back));
  EXPECT_EQ(back, s);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    ByteReader shorter(std::string_view(bytes).substr(0, cut));
    Schedule partial;
    EXPECT_FALSE(LoadSchedule(shorter, partial)) << cut;
  }
}

// The model: an interval's nominal times listed one by one, each tick deciding by the policy's
// words (core/misfire.h, core/job_schedule.h) which of those not yet handled fire.
struct Model {
  int64_t start, every, grace, catchup;
  MisfirePolicy policy;
  bool skip_overlap;
  std::optional<int64_t> max_runs;
  int64_t handled;  // every time <= handled was fired or passed over
  int64_t runs = 0;
  bool paused = false;

  std::vector<int64_t> Tick(int64_t now, bool pending) {
    if (paused) return {};
    std::vector<int64_t> due, on_time, late;
    for (int64_t t = start; t <= now; t += every) {
      if (t <= handled) continue;
      (t >= now - grace ? on_time : late).push_back(t);
    }
    if (policy == MisfirePolicy::kSkip) due = on_time;
    if (policy == MisfirePolicy::kRunOnce) {
      if (!late.empty()) due.push_back(late.back());
      due.insert(due.end(), on_time.begin(), on_time.end());
    }
    if (policy == MisfirePolicy::kRunAll) {
      due = late;
      due.insert(due.end(), on_time.begin(), on_time.end());
    }
    if (static_cast<int64_t>(due.size()) > catchup) due.erase(due.begin(), due.end() - catchup);
    if (max_runs) {
      int64_t left = std::max<int64_t>(*max_runs - runs, 0);
      if (static_cast<int64_t>(due.size()) > left) due.resize(static_cast<size_t>(left));
    }
    if (skip_overlap && !due.empty())
      due = pending ? std::vector<int64_t>{} : std::vector{due.back()};
    handled = std::max(handled, now);
    runs += static_cast<int64_t>(due.size());
    return due;
  }
};

TEST(JobScheduleTest, RandomTicksFireWhatTheModelFires) {
  std::mt19937_64 rng(20261128);
  size_t total = 0, passed_over_by_overlap = 0;
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::uniform_int_distribution<int> pick(0, 2);
    ScheduleSpec spec = Every(kSecond * std::uniform_int_distribution<int64_t>(1, 5)(rng));
    spec.misfire.policy = static_cast<MisfirePolicy>(pick(rng));
    spec.misfire.grace_ms = std::uniform_int_distribution<int64_t>(0, 3 * kSecond)(rng);
    spec.misfire.max_catchup = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    spec.overlap = pick(rng) == 0 ? Overlap::kSkip : Overlap::kAllow;
    if (pick(rng) == 0) spec.max_runs = std::uniform_int_distribution<int64_t>(1, 20)(rng);
    int64_t now = kT0 + std::uniform_int_distribution<int64_t>(0, 999)(rng);
    RepeatRule rule;
    Schedule s = Made(spec, now, &rule);
    Model m{now,
            spec.every_ms,
            spec.misfire.grace_ms,
            spec.misfire.max_catchup,
            spec.misfire.policy,
            spec.overlap == Overlap::kSkip,
            spec.max_runs,
            now - 1};
    std::set<int64_t> fired;
    bool pending = false;
    for (int step = 0; step < 60; ++step) {
      // Mostly short ticks, sometimes a long time down.
      now += pick(rng) == 0 ? std::uniform_int_distribution<int64_t>(kSecond, 30 * kSecond)(rng)
                            : std::uniform_int_distribution<int64_t>(1, 1500)(rng);
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
        bool pause = !s.state.paused;
        SetPaused(s.state, rule, pause, now);
        m.paused = pause;
        if (!pause) m.handled = std::max(m.handled, now - 1);
      }
      std::vector<int64_t> want = m.Tick(now, pending);
      std::vector<int64_t> got = Fire(s, rule, now, pending);
      ASSERT_EQ(got, want) << "at +" << now - kT0 << " ms";
      for (int64_t t : got) {
        EXPECT_TRUE(fired.insert(t).second) << "run " << t << " fired twice";
        EXPECT_LE(t, now);
      }
      EXPECT_EQ(s.state.runs_done, m.runs);
      total += got.size();
      if (pending && got.empty() && spec.overlap == Overlap::kSkip) ++passed_over_by_overlap;
      if (!got.empty()) pending = true;
      if (pick(rng) == 0) pending = false;  // the job was done
    }
  }
  // The rounds exercised what they are for: many runs, and overlaps that held runs back.
  EXPECT_GT(total, 3000u);
  EXPECT_GT(passed_over_by_overlap, 100u);
}

}  // namespace
}  // namespace anteroom::core
