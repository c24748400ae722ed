// PlanDueRuns: what fires after a tick, after a day down under each policy, max_catchup and
// max_runs, through daylight saving, and in bounded work after years down.

#include "core/misfire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/time_zones.h"
#include "common/wire_time.h"
#include "wire_times.h"

namespace anteroom::core {
namespace {

RepeatRule Cron(std::string_view text, std::string_view zone) {
  RepeatRule rule;
  OpResult<CronExpr> cron = ParseCron(text);
  OpResult<const date::time_zone*> tz = FindTimeZone(zone);
  EXPECT_TRUE(cron.ok() && tz.ok());
  rule.timing = CronTiming{cron.ok() ? *cron : CronExpr{}, tz.ok() ? *tz : nullptr};
  return rule;
}

MisfireRule Policy(MisfirePolicy policy, int64_t grace_ms, int64_t max_catchup) {
  return MisfireRule{policy, grace_ms, max_catchup};
}

TEST(ScheduleMisfireTest, PolicyNames) {
  for (MisfirePolicy p : {MisfirePolicy::kSkip, MisfirePolicy::kRunOnce, MisfirePolicy::kRunAll}) {
    EXPECT_EQ(MisfirePolicyNamed(NameOf(p)), p);
  }
  EXPECT_EQ(NameOf(MisfirePolicy::kRunOnce), "run_once");
  EXPECT_EQ(MisfirePolicyNamed("RUN_ALL"), std::nullopt);
  EXPECT_EQ(MisfirePolicyNamed(""), std::nullopt);
}

TEST(ScheduleMisfireTest, ATickFiresWhatCameDueAndNamesTheNext) {
  const RepeatRule hourly = Cron("0 * * * *", "UTC");
  for (MisfirePolicy p : {MisfirePolicy::kSkip, MisfirePolicy::kRunOnce, MisfirePolicy::kRunAll}) {
    const DueRuns due = PlanDueRuns(hourly, Policy(p, 1000, 10), T("2026-01-01T09:00:00Z"), 0,
                                    T("2026-01-01T10:00:00.005Z"));
    EXPECT_EQ(Texts(due.fire), std::vector<std::string>{"2026-01-01T10:00:00.000Z"});
    EXPECT_FALSE(due.passed_over);
    EXPECT_EQ(due.handled_through_ms, T("2026-01-01T10:00:00.005Z"));
    EXPECT_EQ(due.next_ms, T("2026-01-01T11:00:00Z"));
  }
  // Nothing due yet.
  const DueRuns idle = PlanDueRuns(hourly, Policy(MisfirePolicy::kRunAll, 0, 10),
                                   T("2026-01-01T10:00:00Z"), 0, T("2026-01-01T10:30:00Z"));
  EXPECT_TRUE(idle.fire.empty());
  EXPECT_FALSE(idle.passed_over);
  EXPECT_EQ(idle.next_ms, T("2026-01-01T11:00:00Z"));
  // A time already handled does not fire again, whatever is asked twice.
  const DueRuns again =
      PlanDueRuns(hourly, Policy(MisfirePolicy::kRunAll, 60'000, 10), T("2026-01-01T10:00:00.005Z"),
                  1, T("2026-01-01T10:00:00.010Z"));
  EXPECT_TRUE(again.fire.empty());
}

// Down from just after the 00:00 run of 2026-01-01 to 00:30 the next day: 24 hourly times missed
// (01:00 ... 00:00), all older than the grace.
class ScheduleDownForADayTest : public ::testing::Test {
 protected:
  DueRuns Plan(MisfirePolicy policy, int64_t max_catchup,
               std::string_view now = "2026-01-02T00:30:00Z") {
    return PlanDueRuns(rule_, Policy(policy, 60'000, max_catchup), T("2026-01-01T00:00:00Z"), 1,
                       T(now));
  }
  RepeatRule rule_ = Cron("0 * * * *", "UTC");
};

TEST_F(ScheduleDownForADayTest, SkipFiresNothingLate) {
  const DueRuns due = Plan(MisfirePolicy::kSkip, 100);
  EXPECT_TRUE(due.fire.empty());
  EXPECT_TRUE(due.passed_over);
  EXPECT_EQ(due.handled_through_ms, T("2026-01-02T00:30:00Z"));
  EXPECT_EQ(due.next_ms, T("2026-01-02T01:00:00Z"));
}

TEST_F(ScheduleDownForADayTest, SkipStillFiresWhatIsWithinTheGrace) {
  const DueRuns due = Plan(MisfirePolicy::kSkip, 100, "2026-01-02T00:00:30Z");
  EXPECT_EQ(Texts(due.fire), std::vector<std::string>{"2026-01-02T00:00:00.000Z"});
  EXPECT_TRUE(due.passed_over);
}

TEST_F(ScheduleDownForADayTest, RunOnceFiresTheLatestMissed) {
  const DueRuns due = Plan(MisfirePolicy::kRunOnce, 100);
  EXPECT_EQ(Texts(due.fire), std::vector<std::string>{"2026-01-02T00:00:00.000Z"});
  EXPECT_TRUE(due.passed_over);
  EXPECT_EQ(due.next_ms, T("2026-01-02T01:00:00Z"));
  // With an on-time time as well: that one, and one for the late ones.
  const DueRuns both = Plan(MisfirePolicy::kRunOnce, 100, "2026-01-02T00:00:30Z");
  EXPECT_EQ(Texts(both.fire),
            (std::vector<std::string>{"2026-01-01T23:00:00.000Z", "2026-01-02T00:00:00.000Z"}));
  // max_catchup 1 keeps the latest: the on-time one.
  EXPECT_EQ(Texts(Plan(MisfirePolicy::kRunOnce, 1, "2026-01-02T00:00:30Z").fire),
            std::vector<std::string>{"2026-01-02T00:00:00.000Z"});
}

TEST_F(ScheduleDownForADayTest, RunAllFiresEveryMissedTime) {
  const DueRuns due = Plan(MisfirePolicy::kRunAll, 100);
  ASSERT_EQ(due.fire.size(), 24u);
  EXPECT_EQ(FormatRfc3339Ms(due.fire.front()), "2026-01-01T01:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Ms(due.fire.back()), "2026-01-02T00:00:00.000Z");
  EXPECT_TRUE(std::is_sorted(due.fire.begin(), due.fire.end()));
  EXPECT_FALSE(due.passed_over);
  EXPECT_EQ(due.next_ms, T("2026-01-02T01:00:00Z"));
}

TEST_F(ScheduleDownForADayTest, RunAllKeepsTheLatestMaxCatchup) {
  const DueRuns due = Plan(MisfirePolicy::kRunAll, 5);
  EXPECT_EQ(Texts(due.fire),
            (std::vector<std::string>{"2026-01-01T20:00:00.000Z", "2026-01-01T21:00:00.000Z",
                                      "2026-01-01T22:00:00.000Z", "2026-01-01T23:00:00.000Z",
                                      "2026-01-02T00:00:00.000Z"}));
  EXPECT_TRUE(due.passed_over);
  // Out-of-range max_catchup is held to 1..kMaxCatchup.
  EXPECT_EQ(Plan(MisfirePolicy::kRunAll, 0).fire.size(), 1u);
  EXPECT_EQ(Plan(MisfirePolicy::kRunAll, -3).fire.size(), 1u);
}

TEST_F(ScheduleDownForADayTest, MaxRunsKeepsTheEarliestOfWhatWouldFire) {
  rule_.max_runs = 4;  // one run done: three left
  const DueRuns due = Plan(MisfirePolicy::kRunAll, 5);
  EXPECT_EQ(Texts(due.fire),
            (std::vector<std::string>{"2026-01-01T20:00:00.000Z", "2026-01-01T21:00:00.000Z",
                                      "2026-01-01T22:00:00.000Z"}));
  EXPECT_EQ(due.next_ms, std::nullopt);  // over
  rule_.max_runs = 1;
  const DueRuns none = Plan(MisfirePolicy::kRunAll, 5);
  EXPECT_TRUE(none.fire.empty());
  EXPECT_EQ(none.next_ms, std::nullopt);
}

TEST_F(ScheduleDownForADayTest, TheWindowEndsTheSchedule) {
  rule_.end_at_ms = T("2026-01-01T03:30:00Z");
  const DueRuns due = Plan(MisfirePolicy::kRunAll, 100);
  EXPECT_EQ(Texts(due.fire),
            (std::vector<std::string>{"2026-01-01T01:00:00.000Z", "2026-01-01T02:00:00.000Z",
                                      "2026-01-01T03:00:00.000Z"}));
  EXPECT_EQ(due.next_ms, std::nullopt);
}

TEST(ScheduleMisfireTest, DownAcrossDaylightSavingInBothZones) {
  // Berlin, daily 02:30, down over the spring-forward day: the 29th's run is the transition.
  const DueRuns berlin =
      PlanDueRuns(Cron("30 2 * * *", "Europe/Berlin"), Policy(MisfirePolicy::kRunAll, 0, 100),
                  T("2026-03-28T12:00:00Z"), 0, T("2026-03-30T12:00:00Z"));
  EXPECT_EQ(Texts(berlin.fire),
            (std::vector<std::string>{"2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z"}));
  EXPECT_EQ(berlin.next_ms, T("2026-03-31T00:30:00Z"));
  // New York, every 15 minutes, down for the 25-hour day the clocks fall back: 23 hours of
  // distinct wall clock, 92 quarter hours, the repeated 01:xx run once.
  const DueRuns new_york =
      PlanDueRuns(Cron("*/15 * * * *", "America/New_York"), Policy(MisfirePolicy::kRunAll, 0, 1000),
                  T("2026-10-31T12:00:00Z"), 0, T("2026-11-01T12:00:00Z"));
  EXPECT_EQ(new_york.fire.size(), 92u);
  EXPECT_EQ(std::adjacent_find(new_york.fire.begin(), new_york.fire.end()), new_york.fire.end());
  EXPECT_EQ(FormatRfc3339Ms(new_york.fire.back()), "2026-11-01T12:00:00.000Z");
  EXPECT_FALSE(new_york.passed_over);
}

TEST(ScheduleMisfireTest, YearsDownCostBoundedWork) {
  // Every second for ten years is 315M times: only the latest max_catchup are looked at.
  const auto started = std::chrono::steady_clock::now();
  const DueRuns cron =
      PlanDueRuns(Cron("* * * * * *", "Europe/Berlin"), Policy(MisfirePolicy::kRunAll, 0, 1000),
                  T("2016-01-01T00:00:00Z"), 0, T("2026-01-01T00:00:00.500Z"));
  ASSERT_EQ(cron.fire.size(), 1000u);
  EXPECT_EQ(FormatRfc3339Ms(cron.fire.back()), "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Ms(cron.fire.front()), "2025-12-31T23:43:21.000Z");
  EXPECT_TRUE(cron.passed_over);
  EXPECT_EQ(cron.next_ms, T("2026-01-01T00:00:01Z"));

  RepeatRule every_ms;
  every_ms.timing = IntervalTiming{1};
  every_ms.start_at_ms = T("2016-01-01T00:00:00Z");
  const DueRuns interval = PlanDueRuns(every_ms, Policy(MisfirePolicy::kRunOnce, 0, 1000),
                                       T("2016-01-01T00:00:00Z"), 1, T("2026-01-01T00:00:00Z"));
  EXPECT_EQ(Texts(interval.fire),
            (std::vector<std::string>{"2025-12-31T23:59:59.999Z", "2026-01-01T00:00:00.000Z"}));
  for (MisfirePolicy p : {MisfirePolicy::kSkip, MisfirePolicy::kRunOnce}) {
    const DueRuns skipped =
        PlanDueRuns(Cron("* * * * * *", "UTC"), Policy(p, 0, 1000), T("2016-01-01T00:00:00Z"), 0,
                    T("2026-01-01T00:00:00.500Z"));
    EXPECT_LE(skipped.fire.size(), 1u);
  }
  // Loose: a few ms of work, far from the ~hours enumerating would take (ASan included).
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
}

TEST(ScheduleMisfireTest, ANewScheduleStartsAtItsStartOrCreation) {
  RepeatRule rule = Cron("0 * * * *", "UTC");
  rule.start_at_ms = T("2026-01-01T10:00:00Z");
  // Created before start_at: 10:00 itself is the first run.
  int64_t handled = FirstHandledThrough(rule, T("2026-01-01T08:00:00Z"));
  DueRuns due = PlanDueRuns(rule, Policy(MisfirePolicy::kRunAll, 0, 100), handled, 0,
                            T("2026-01-01T10:00:00Z"));
  EXPECT_EQ(Texts(due.fire), std::vector<std::string>{"2026-01-01T10:00:00.000Z"});
  // Created after a start_at in the past: nothing before the creation counts as missed.
  handled = FirstHandledThrough(rule, T("2026-01-01T12:30:00Z"));
  due = PlanDueRuns(rule, Policy(MisfirePolicy::kRunAll, 0, 100), handled, 0,
                    T("2026-01-01T12:30:00Z"));
  EXPECT_TRUE(due.fire.empty());
  EXPECT_FALSE(due.passed_over);
  EXPECT_EQ(due.next_ms, T("2026-01-01T13:00:00Z"));
}

}  // namespace
}  // namespace anteroom::core
