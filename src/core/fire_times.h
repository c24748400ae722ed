#pragma once
// When a repeatable job's schedule fires: its nominal times, the instants (ms since the epoch)
// each run is keyed by (schedule, nominal time). Pure arithmetic over the arguments: no clock.
//
// Two kinds of timing:
//  - a cron expression (core/cron.h) read in a time zone: it names local wall-clock seconds,
//    matched on the zone's local calendar, then mapped to instants;
//  - a fixed interval: start_at, start_at + every_ms, start_at + 2 * every_ms, ... in UTC, with
//    no time zone and no daylight saving.
//
// Daylight saving, for cron timing. Each local wall time the expression names fires once:
//  - a local time that does not exist (the gap when clocks spring forward, 02:00-02:59 in
//    Europe/Berlin on 2026-03-29) fires at the first instant after the gap, the transition
//    itself (03:00 local): a daily 02:30 runs at 03:00 that day. Every named time in the gap
//    maps to that one instant, and one instant is one run: `*/15 * * * *` runs once for 02:00,
//    02:15, 02:30, 02:45 and 03:00 together;
//  - a local time that occurs twice (clocks fall back, 02:00-02:59 in Europe/Berlin on
//    2026-10-25) fires at its first occurrence only: a daily 02:30 runs once, in summer time,
//    and `*/15 * * * *` runs at 02:00, 02:15, 02:30, 02:45 summer time, then not again until
//    03:00 winter time, 75 minutes later. (The repeated hour's wall times are not run twice: a
//    job that must run every 15 real minutes is an interval schedule.)
// Mapping local times to instants this way keeps their order, which is what lets a search for
// the next time (or the last one) be a single search on the local calendar.
//
// A window bounds the nominal times: none before start_at, none at or after end_at, none after
// kLatestTimeMs. max_runs is counted by the caller (runs fired so far) and passed where a
// count matters.

#include <date/tz.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "core/cron.h"

namespace anteroom::core {

struct CronTiming {
  CronExpr cron;
  const date::time_zone* zone = nullptr;  // never null (common/time_zones.h finds it by name)
};

struct IntervalTiming {
  int64_t every_ms = 1;  // >= 1; anchored at the rule's start_at
};

struct RepeatRule {
  std::variant<CronTiming, IntervalTiming> timing;
  // The first nominal time is the first at or after start_at (an interval's own anchor).
  // Without one given, the schedule's creation time.
  int64_t start_at_ms = 0;
  std::optional<int64_t> end_at_ms;  // nominal times are before it
  std::optional<int64_t> max_runs;   // runs in all, >= 1
};

// The first nominal time strictly after `after_ms`; nullopt when the window has no more.
std::optional<int64_t> NextFireAfter(const RepeatRule& rule, int64_t after_ms);

// The last nominal time at or before `at_ms`; nullopt when the window has none so early.
std::optional<int64_t> LastFireAtOrBefore(const RepeatRule& rule, int64_t at_ms);

// The next `count` nominal times after `after_ms` (fewer when the window ends, or when
// max_runs leaves fewer runs after `runs_done`), in order: what a schedule's GET shows.
std::vector<int64_t> NextFireTimes(const RepeatRule& rule, int64_t after_ms, int64_t runs_done,
                                   size_t count);

}  // namespace anteroom::core
