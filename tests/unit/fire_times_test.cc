// Nominal fire times: cron in UTC and through daylight saving in two zones, intervals, the
// window, and a randomized comparison with a brute-force scan of the clock.

#include "core/fire_times.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/time_zones.h"
#include "common/wire_errors.h"
#include "common/wire_time.h"
#include "wire_times.h"

namespace anteroom::core {
namespace {

std::string Text(std::optional<int64_t> t) { return t ? FormatRfc3339Ms(*t) : "none"; }

const date::time_zone* Zone(std::string_view name) {
  OpResult<const date::time_zone*> zone = FindTimeZone(name);
  EXPECT_TRUE(zone.ok()) << name << ": " << zone.message();
  return zone.ok() ? *zone : nullptr;
}

RepeatRule CronRule(std::string_view cron, std::string_view zone, int64_t start_at_ms = 0) {
  OpResult<CronExpr> parsed = ParseCron(cron);
  EXPECT_TRUE(parsed.ok()) << cron << ": " << parsed.message();
  RepeatRule rule;
  rule.timing = CronTiming{parsed.ok() ? *parsed : CronExpr{}, Zone(zone)};
  rule.start_at_ms = start_at_ms;
  return rule;
}

// The next `n` times after `after`, as text.
std::vector<std::string> Next(const RepeatRule& rule, std::string_view after, size_t n) {
  return Texts(NextFireTimes(rule, T(after), 0, n));
}

// The `n` times at or before `at` walking back, oldest first, as text.
std::vector<std::string> Back(const RepeatRule& rule, std::string_view at, size_t n) {
  std::vector<int64_t> out;
  std::optional<int64_t> t = LastFireAtOrBefore(rule, T(at));
  while (t && out.size() < n) {
    out.insert(out.begin(), *t);
    t = LastFireAtOrBefore(rule, *t - 1);
  }
  return Texts(out);
}

TEST(ScheduleTimeZoneTest, FindsIanaNamesAndRefusesTheRest) {
  for (std::string_view name : {"Europe/Berlin", "America/New_York", "UTC", "Etc/UTC", "US/Eastern",
                                "America/Port-au-Prince", "Etc/GMT+5"}) {
    OpResult<const date::time_zone*> zone = FindTimeZone(name);
    ASSERT_TRUE(zone.ok()) << name << ": " << zone.message();
    EXPECT_EQ((*zone)->name(), name);
  }
  for (std::string_view name :
       {"", "Europe/Nowhere", "europe/berlin", "localtime", "../../etc/passwd", "Europe/Berlin ",
        "right/Europe/Berlin", "Europe/Berlin\n"}) {
    OpResult<const date::time_zone*> zone = FindTimeZone(name);
    ASSERT_FALSE(zone.ok()) << name;
    EXPECT_EQ(zone.status(), OpStatus::kInvalidArgument);
    EXPECT_EQ(zone.message(), wire::UnknownTimeZone(name));
  }
  EXPECT_FALSE(FindTimeZone(std::string(kMaxTimeZoneNameBytes + 1, 'A')).ok());
}

TEST(ScheduleCronTest, NextTimesInUtc) {
  const struct {
    std::string_view cron, after, next;
  } kCases[] = {
      {"* * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00.000Z"},  // strictly after
      {"* * * * *", "2026-01-01T00:00:59.999Z", "2026-01-01T00:01:00.000Z"},
      {"*/15 * * * *", "2026-01-01T00:14:00Z", "2026-01-01T00:15:00.000Z"},
      {"0 9 * * MON-FRI", "2026-01-02T09:00:00Z", "2026-01-05T09:00:00.000Z"},  // Fri -> Mon
      {"0 0 1 * *", "2026-01-31T12:00:00Z", "2026-02-01T00:00:00.000Z"},
      {"0 0 31 * *", "2026-01-31T12:00:00Z", "2026-03-31T00:00:00.000Z"},  // no Feb 31st
      {"0 12 29 2 *", "2026-01-01T00:00:00Z", "2028-02-29T12:00:00.000Z"},
      {"@yearly", "2026-06-01T00:00:00Z", "2027-01-01T00:00:00.000Z"},
      {"@weekly", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00.000Z"},  // a Sunday
      {"0 0 13 * FRI", "2026-02-10T00:00:00Z", "2026-02-13T00:00:00.000Z"},
      {"0 0 13 * FRI", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00.000Z"},   // a Friday
      {"0 0 */2 * FRI", "2026-01-01T00:00:00Z", "2026-01-09T00:00:00.000Z"},  // odd and Friday
      {"*/10 * * * * *", "2026-01-01T00:00:05.500Z", "2026-01-01T00:00:10.000Z"},
      {"59 59 23 31 12 *", "2026-06-01T00:00:00Z", "2026-12-31T23:59:59.000Z"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(std::string(c.cron) + " after " + std::string(c.after));
    EXPECT_EQ(Text(NextFireAfter(CronRule(c.cron, "UTC"), T(c.after))), c.next);
    // The mirror: the last time at or before the one found is itself.
    EXPECT_EQ(Text(LastFireAtOrBefore(CronRule(c.cron, "UTC"), T(c.next))), c.next);
    EXPECT_EQ(Text(LastFireAtOrBefore(CronRule(c.cron, "UTC"), T(c.next) - 1)),
              Text(LastFireAtOrBefore(CronRule(c.cron, "UTC"), T(c.after))));
  }
}

TEST(ScheduleCronTest, ZonedTimesAreLocalWallClock) {
  // 09:00 in Berlin is 08:00 UTC in winter and 07:00 in summer; in New York 14:00 and 13:00.
  EXPECT_EQ(Next(CronRule("0 9 * * *", "Europe/Berlin"), "2026-01-10T00:00:00Z", 1),
            std::vector<std::string>{"2026-01-10T08:00:00.000Z"});
  EXPECT_EQ(Next(CronRule("0 9 * * *", "Europe/Berlin"), "2026-07-10T00:00:00Z", 1),
            std::vector<std::string>{"2026-07-10T07:00:00.000Z"});
  EXPECT_EQ(Next(CronRule("0 9 * * *", "America/New_York"), "2026-01-10T00:00:00Z", 1),
            std::vector<std::string>{"2026-01-10T14:00:00.000Z"});
  // The local day decides: Monday 00:30 in Berlin is Sunday 23:30 UTC.
  EXPECT_EQ(Next(CronRule("30 0 * * MON", "Europe/Berlin"), "2026-01-01T00:00:00Z", 1),
            std::vector<std::string>{"2026-01-04T23:30:00.000Z"});
}

// Europe/Berlin 2026: clocks go 02:00 -> 03:00 on 2026-03-29 (01:00 UTC) and 03:00 -> 02:00 on
// 2026-10-25 (01:00 UTC).
TEST(ScheduleDstTest, BerlinDailyAtTwoThirtyFiresOnceEachDay) {
  const RepeatRule rule = CronRule("30 2 * * *", "Europe/Berlin");
  EXPECT_EQ(Next(rule, "2026-03-27T12:00:00Z", 4),
            (std::vector<std::string>{
                "2026-03-28T01:30:00.000Z",  // 02:30 CET
                "2026-03-29T01:00:00.000Z",  // 02:30 does not exist: 03:00 CEST, the transition
                "2026-03-30T00:30:00.000Z",  // 02:30 CEST
                "2026-03-31T00:30:00.000Z",
            }));
  EXPECT_EQ(Next(rule, "2026-10-23T12:00:00Z", 4),
            (std::vector<std::string>{
                "2026-10-24T00:30:00.000Z",  // 02:30 CEST
                "2026-10-25T00:30:00.000Z",  // 02:30 happens twice: the first, CEST
                "2026-10-26T01:30:00.000Z",  // 02:30 CET
                "2026-10-27T01:30:00.000Z",
            }));
  // Asked from inside the repeated hour's second pass (02:10 CET), the day's run is behind.
  EXPECT_EQ(Next(rule, "2026-10-25T01:10:00Z", 1),
            std::vector<std::string>{"2026-10-26T01:30:00.000Z"});
  // Walking back gives the same times.
  EXPECT_EQ(Back(rule, "2026-03-31T00:30:00Z", 4), Next(rule, "2026-03-27T12:00:00Z", 4));
  EXPECT_EQ(Back(rule, "2026-10-27T01:30:00Z", 4), Next(rule, "2026-10-23T12:00:00Z", 4));
  EXPECT_EQ(Back(rule, "2026-10-25T01:59:59Z", 1),
            std::vector<std::string>{"2026-10-25T00:30:00.000Z"});
}

TEST(ScheduleDstTest, BerlinEveryFifteenMinutesThroughBothChanges) {
  const RepeatRule rule = CronRule("*/15 * * * *", "Europe/Berlin");
  EXPECT_EQ(Next(rule, "2026-03-29T00:30:00Z", 4),
            (std::vector<std::string>{
                "2026-03-29T00:45:00.000Z",  // 01:45 CET
                "2026-03-29T01:00:00.000Z",  // 02:00 to 02:45 do not exist; with 03:00, one run
                "2026-03-29T01:15:00.000Z",  // 03:15 CEST
                "2026-03-29T01:30:00.000Z",
            }));
  EXPECT_EQ(Next(rule, "2026-10-24T23:30:00Z", 7),
            (std::vector<std::string>{
                "2026-10-24T23:45:00.000Z",  // 01:45 CEST
                "2026-10-25T00:00:00.000Z",  // 02:00 CEST, first pass
                "2026-10-25T00:15:00.000Z",
                "2026-10-25T00:30:00.000Z",
                "2026-10-25T00:45:00.000Z",  // 02:45 CEST
                "2026-10-25T02:00:00.000Z",  // 03:00 CET: the second pass of 02:xx runs nothing
                "2026-10-25T02:15:00.000Z",
            }));
  EXPECT_EQ(Next(rule, "2026-10-25T01:20:00Z", 1),  // 02:20 CET, second pass
            std::vector<std::string>{"2026-10-25T02:00:00.000Z"});
  EXPECT_EQ(Next(rule, "2026-10-25T00:59:59.999Z", 1),  // just before the clocks go back
            std::vector<std::string>{"2026-10-25T02:00:00.000Z"});
  EXPECT_EQ(Back(rule, "2026-10-25T02:15:00Z", 7), Next(rule, "2026-10-24T23:30:00Z", 7));
  EXPECT_EQ(Back(rule, "2026-03-29T01:30:00Z", 4), Next(rule, "2026-03-29T00:30:00Z", 4));
  EXPECT_EQ(Back(rule, "2026-03-29T00:59:59Z", 1),
            std::vector<std::string>{"2026-03-29T00:45:00.000Z"});
}

// America/New_York 2026: 02:00 -> 03:00 on 2026-03-08 (07:00 UTC), 02:00 -> 01:00 on
// 2026-11-01 (06:00 UTC).
TEST(ScheduleDstTest, NewYorkDailyRunsThroughBothChanges) {
  const RepeatRule at_two_thirty = CronRule("30 2 * * *", "America/New_York");
  EXPECT_EQ(Next(at_two_thirty, "2026-03-07T00:00:00Z", 3),
            (std::vector<std::string>{
                "2026-03-07T07:30:00.000Z",  // 02:30 EST
                "2026-03-08T07:00:00.000Z",  // no 02:30: 03:00 EDT
                "2026-03-09T06:30:00.000Z",  // 02:30 EDT
            }));
  EXPECT_EQ(Next(at_two_thirty, "2026-10-31T00:00:00Z", 3),
            (std::vector<std::string>{
                "2026-10-31T06:30:00.000Z",  // 02:30 EDT
                "2026-11-01T07:30:00.000Z",  // 02:30 EST: after the repeated hour, once
                "2026-11-02T07:30:00.000Z",
            }));
  const RepeatRule at_one_thirty = CronRule("30 1 * * *", "America/New_York");
  EXPECT_EQ(Next(at_one_thirty, "2026-10-31T00:00:00Z", 3),
            (std::vector<std::string>{
                "2026-10-31T05:30:00.000Z",  // 01:30 EDT
                "2026-11-01T05:30:00.000Z",  // 01:30 twice: the first, EDT
                "2026-11-02T06:30:00.000Z",  // 01:30 EST
            }));
  const RepeatRule quarter_hours = CronRule("0/15 * * * *", "America/New_York");
  EXPECT_EQ(Next(quarter_hours, "2026-11-01T05:40:00Z", 3),
            (std::vector<std::string>{
                "2026-11-01T05:45:00.000Z",  // 01:45 EDT
                "2026-11-01T07:00:00.000Z",  // 02:00 EST: 01:00-01:45 EST are not run again
                "2026-11-01T07:15:00.000Z",
            }));
  EXPECT_EQ(Next(quarter_hours, "2026-03-08T06:40:00Z", 3),
            (std::vector<std::string>{
                "2026-03-08T06:45:00.000Z",  // 01:45 EST
                "2026-03-08T07:00:00.000Z",  // 02:00-02:45 do not exist: one run at 03:00 EDT
                "2026-03-08T07:15:00.000Z",
            }));
}

TEST(ScheduleDstTest, SecondsThroughTheGapAndTheRepeat) {
  const RepeatRule rule = CronRule("*/20 59 1,2 * * *", "Europe/Berlin");
  EXPECT_EQ(Next(rule, "2026-03-29T00:59:30Z", 3),
            (std::vector<std::string>{
                "2026-03-29T00:59:40.000Z",  // 01:59:40 CET
                "2026-03-29T01:00:00.000Z",  // 02:59:00-02:59:40 do not exist: the transition
                "2026-03-29T23:59:00.000Z",  // 01:59:00 CEST the next day
            }));
  EXPECT_EQ(Next(rule, "2026-10-25T00:59:30Z", 4),
            (std::vector<std::string>{
                "2026-10-25T00:59:40.000Z",  // 02:59:40 CEST
                "2026-10-26T00:59:00.000Z",  // 01:59 CET on the 26th (02:59 CET ran in CEST)
                "2026-10-26T00:59:20.000Z",
                "2026-10-26T00:59:40.000Z",
            }));
}

TEST(ScheduleWindowTest, StartEndAndMaxRuns) {
  RepeatRule rule = CronRule("0 * * * *", "UTC", T("2026-01-01T10:00:00Z"));
  rule.end_at_ms = T("2026-01-01T13:00:00Z");
  EXPECT_EQ(Next(rule, "2026-01-01T00:00:00Z", 5),
            (std::vector<std::string>{"2026-01-01T10:00:00.000Z", "2026-01-01T11:00:00.000Z",
                                      "2026-01-01T12:00:00.000Z"}));  // end_at is not a run
  EXPECT_EQ(LastFireAtOrBefore(rule, T("2026-01-01T09:59:59Z")), std::nullopt);
  EXPECT_EQ(Text(LastFireAtOrBefore(rule, T("2026-01-02T00:00:00Z"))), "2026-01-01T12:00:00.000Z");
  EXPECT_EQ(NextFireAfter(rule, T("2026-01-01T12:00:00Z")), std::nullopt);
  rule.max_runs = 5;
  EXPECT_EQ(NextFireTimes(rule, T("2026-01-01T00:00:00Z"), 1, 5).size(), 3u);
  EXPECT_EQ(NextFireTimes(rule, T("2026-01-01T00:00:00Z"), 3, 5).size(), 2u);
  EXPECT_EQ(NextFireTimes(rule, T("2026-01-01T00:00:00Z"), 5, 5).size(), 0u);
  // Nothing past the engine's last time (the year 3000).
  const RepeatRule late = CronRule("@yearly", "UTC");
  EXPECT_EQ(Text(NextFireAfter(late, T("2999-06-01T00:00:00Z"))), "3000-01-01T00:00:00.000Z");
  EXPECT_EQ(NextFireAfter(late, T("3000-01-01T00:00:00Z")), std::nullopt);
}

TEST(ScheduleIntervalTest, EveryMsFromStartAt) {
  RepeatRule rule;
  rule.timing = IntervalTiming{90'000};
  rule.start_at_ms = T("2026-01-01T00:00:00.500Z");
  EXPECT_EQ(Next(rule, "2025-12-31T00:00:00Z", 3),
            (std::vector<std::string>{"2026-01-01T00:00:00.500Z", "2026-01-01T00:01:30.500Z",
                                      "2026-01-01T00:03:00.500Z"}));
  EXPECT_EQ(Next(rule, "2026-01-01T00:01:30.500Z", 1),
            std::vector<std::string>{"2026-01-01T00:03:00.500Z"});
  EXPECT_EQ(Text(LastFireAtOrBefore(rule, T("2026-01-01T00:03:00.499Z"))),
            "2026-01-01T00:01:30.500Z");
  EXPECT_EQ(LastFireAtOrBefore(rule, T("2026-01-01T00:00:00.499Z")), std::nullopt);
  // Intervals are UTC: across Berlin's change, still 90 s apart.
  rule.start_at_ms = T("2026-03-29T00:59:00Z");
  EXPECT_EQ(Next(rule, "2026-03-29T00:59:00Z", 1),
            std::vector<std::string>{"2026-03-29T01:00:30.000Z"});
  rule.end_at_ms = T("2026-03-29T01:00:30Z");
  EXPECT_EQ(NextFireAfter(rule, T("2026-03-29T00:59:00Z")), std::nullopt);
  // A huge interval does not overflow.
  rule.timing = IntervalTiming{INT64_MAX};
  rule.end_at_ms.reset();
  EXPECT_EQ(NextFireAfter(rule, T("2026-03-29T00:59:00Z")), std::nullopt);
}

// --- The brute force: every whole minute (or second) of the clock, one by one -------------------

// The fires of `cron` in `zone` in [from_s, to_s) as the clock shows them passing: a local time
// fires at the first instant whose wall clock has reached it, so each fires once, the ones a
// spring-forward jumps over at the jump. `step_s` is 60 for 5 fields (whole minutes), else 1.
std::vector<int64_t> BruteForce(const CronExpr& cron, const date::time_zone* zone, int64_t from_s,
                                int64_t to_s, int64_t step_s) {
  const auto local_of = [zone](int64_t s) {
    const date::sys_seconds t{std::chrono::seconds(s)};
    return date::local_seconds((t + zone->get_info(t).offset).time_since_epoch());
  };
  const std::chrono::seconds step(step_s);
  date::local_seconds reached = local_of(from_s - step_s);
  std::vector<int64_t> fires;
  for (int64_t s = from_s; s < to_s; s += step_s) {
    const date::local_seconds local = local_of(s);
    bool fire = false;
    for (date::local_seconds l = reached + step; l <= local; l += step) fire |= cron.Matches(l);
    if (local > reached) reached = local;
    if (fire) fires.push_back(s * 1000);
  }
  return fires;
}

std::string RandomField(std::mt19937_64& rng, int min, int max, int star_percent) {
  const auto pick = [&rng](int lo, int hi) {
    return static_cast<int>(std::uniform_int_distribution<int>(lo, hi)(rng));
  };
  if (pick(1, 100) <= star_percent) return "*";
  switch (pick(0, 4)) {
    case 0:
      return "*/" + std::to_string(pick(1, std::max(1, (max - min + 1) / 3)));
    case 1:
      return std::to_string(pick(min, max));
    case 2: {
      const int a = pick(min, max);
      return std::to_string(a) + "-" + std::to_string(pick(a, max));
    }
    case 3: {
      const int a = pick(min, max);
      return std::to_string(a) + "-" + std::to_string(pick(a, max)) + "/" +
             std::to_string(pick(1, 5));
    }
    default: {
      std::string list = std::to_string(pick(min, max));
      for (int i = pick(1, 3); i > 0; --i) list += "," + std::to_string(pick(min, max));
      return list;
    }
  }
}

CronExpr RandomCron(std::mt19937_64& rng, bool with_seconds, std::string& text) {
  while (true) {
    text = (with_seconds ? RandomField(rng, 0, 59, 20) + " " : "") + RandomField(rng, 0, 59, 20) +
           " " + RandomField(rng, 0, 23, 30) + " " + RandomField(rng, 1, 31, 70) + " " +
           RandomField(rng, 1, 12, 85) + " " + RandomField(rng, 0, 7, 70);
    OpResult<CronExpr> parsed = ParseCron(text);
    if (parsed.ok()) return *parsed;
  }
}

// Returns how many fire times were compared, so a test can tell it compared something.
size_t CompareWithBruteForce(bool with_seconds, int64_t window_s, int cases) {
  size_t compared = 0;
  std::mt19937_64 rng(with_seconds ? 6 : 5);
  const std::vector<int64_t> changes_s = {
      T("2026-03-29T01:00:00Z") / 1000, T("2026-10-25T01:00:00Z") / 1000,  // Berlin
      T("2026-03-08T07:00:00Z") / 1000, T("2026-11-01T06:00:00Z") / 1000,  // New York
  };
  const int64_t step_s = with_seconds ? 1 : 60;
  const int64_t warm_s = 2 * 3600;  // longer than a repeated hour: the scan's memory settles
  for (const char* zone_name : {"UTC", "Europe/Berlin", "America/New_York"}) {
    const date::time_zone* zone = Zone(zone_name);
    for (int i = 0; i < cases; ++i) {
      std::string text;
      const CronExpr cron = RandomCron(rng, with_seconds, text);
      // Half the windows hold a change of the clocks, the rest anywhere in 2025-2030.
      int64_t from_s =
          i % 2 == 0 ? changes_s[rng() % changes_s.size()] -
                           std::uniform_int_distribution<int64_t>(0, window_s)(rng)
                     : std::uniform_int_distribution<int64_t>(
                           T("2025-01-01T00:00:00Z") / 1000, T("2030-01-01T00:00:00Z") / 1000)(rng);
      from_s -= from_s % step_s;
      const int64_t to_s = from_s + window_s;
      SCOPED_TRACE(std::string(zone_name) + " '" + text + "' from " +
                   FormatRfc3339Ms(from_s * 1000));
      std::vector<int64_t> expected = BruteForce(cron, zone, from_s - warm_s, to_s, step_s);
      std::erase_if(expected, [from_s](int64_t t) { return t < from_s * 1000; });

      RepeatRule rule;
      rule.timing = CronTiming{cron, zone};
      std::vector<int64_t> found;
      for (std::optional<int64_t> t = NextFireAfter(rule, from_s * 1000 - 1); t && *t < to_s * 1000;
           t = NextFireAfter(rule, *t)) {
        found.push_back(*t);
      }
      EXPECT_EQ(Texts(found), Texts(expected));
      compared += expected.size();
      // From any point: the next one, and the last one at or before it.
      for (int probe = 0; probe < 20; ++probe) {
        const int64_t at = std::uniform_int_distribution<int64_t>(from_s * 1000, to_s * 1000)(rng);
        const auto after = std::upper_bound(expected.begin(), expected.end(), at);
        if (after != expected.end()) {
          EXPECT_EQ(Text(NextFireAfter(rule, at)), Text(*after)) << "after " << Text(at);
        } else {
          EXPECT_GE(NextFireAfter(rule, at).value_or(INT64_MAX), to_s * 1000);
        }
        if (after != expected.begin()) {
          EXPECT_EQ(Text(LastFireAtOrBefore(rule, at)), Text(*(after - 1))) << "at " << Text(at);
        } else {
          EXPECT_LT(LastFireAtOrBefore(rule, at).value_or(INT64_MIN), from_s * 1000);
        }
      }
    }
  }
  return compared;
}

TEST(ScheduleCronTest, FiveFieldsMatchABruteForceScanByTheMinute) {
  EXPECT_GT(CompareWithBruteForce(/*with_seconds=*/false, /*window_s=*/3 * 86'400, /*cases=*/120),
            10'000u);
}

TEST(ScheduleCronTest, SixFieldsMatchABruteForceScanByTheSecond) {
  EXPECT_GT(CompareWithBruteForce(/*with_seconds=*/true, /*window_s=*/4 * 3600, /*cases=*/40),
            10'000u);
}

}  // namespace
}  // namespace anteroom::core
