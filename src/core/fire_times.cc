#include "core/fire_times.h"

#include <algorithm>
#include <chrono>

#include "core/room_types.h"

namespace anteroom::core {

namespace {

using date::local_seconds;
using date::sys_seconds;
using std::chrono::seconds;

int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// The latest instant the window lets a nominal time take.
int64_t LastAllowedMs(const RepeatRule& rule) {
  return rule.end_at_ms ? std::min(kLatestTimeMs, *rule.end_at_ms - 1) : kLatestTimeMs;
}

sys_seconds SecondsAt(int64_t s) { return sys_seconds(seconds(s)); }
int64_t MsOf(sys_seconds t) { return t.time_since_epoch().count() * 1000; }

// The local wall time of `t` as its zone's clocks show it.
local_seconds LocalOf(const date::time_zone* zone, sys_seconds t) {
  return local_seconds((t + zone->get_info(t).offset).time_since_epoch());
}

// The instant a matching local time fires at: its one instant; the first of two in a repeated
// hour; the end of the gap (the transition) for a local time that does not exist.
sys_seconds InstantOf(const date::time_zone* zone, local_seconds local) {
  const date::local_info info = zone->get_info(local);
  if (info.result == date::local_info::nonexistent) return info.second.begin;
  return sys_seconds(local.time_since_epoch() - info.first.offset);
}

// Where the offset changed last before `t` (the period `t` lies in begins there): the offset
// before, or nullopt when the zone has no earlier period.
struct Change {
  sys_seconds at;
  seconds offset_before;
  seconds offset_after;
};
std::optional<Change> LastChange(const date::time_zone* zone, sys_seconds t) {
  const date::sys_info info = zone->get_info(t);
  if (info.begin < date::sys_days(date::year(1800) / 1 / 1)) return std::nullopt;
  return Change{info.begin, zone->get_info(info.begin - seconds(1)).offset, info.offset};
}

// The least local time whose instant (InstantOf) is at or after `from`. InstantOf keeps the
// order of local times, so the first match from there is the first fire at or after `from`.
// Two places differ from `from`'s own wall time: inside the second pass of a repeated hour
// (every local time up to the repeat's end already had its instant), and at the very instant
// clocks sprang forward (the gap's local times fire there).
local_seconds FirstLocalFrom(const date::time_zone* zone, sys_seconds from) {
  const local_seconds local = LocalOf(zone, from);
  const std::optional<Change> change = LastChange(zone, from);
  if (!change) return local;
  const local_seconds old_clock(
      (change->at + change->offset_before).time_since_epoch());  // the change, on old clocks
  if (change->offset_before > change->offset_after && local < old_clock) return old_clock;
  if (change->offset_before < change->offset_after && from == change->at) return old_clock;
  return local;
}

// The greatest local time whose instant is at or before `to`: the mirror of FirstLocalFrom.
local_seconds LastLocalTo(const date::time_zone* zone, sys_seconds to) {
  const local_seconds local = LocalOf(zone, to);
  const std::optional<Change> change = LastChange(zone, to);
  if (!change) return local;
  const local_seconds old_clock((change->at + change->offset_before).time_since_epoch());
  if (change->offset_before > change->offset_after && local < old_clock) {
    return old_clock - seconds(1);
  }
  return local;
}

// Local search bounds a day wider than the window: offsets are under a day, and the instants
// found are held to the window itself afterwards.
constexpr seconds kDay(86'400);

std::optional<int64_t> CronNext(const CronTiming& t, int64_t after_ms, int64_t last_ms) {
  const sys_seconds from = SecondsAt(FloorDiv(after_ms, 1000) + 1);
  const sys_seconds last = SecondsAt(FloorDiv(last_ms, 1000));
  if (from > last) return std::nullopt;
  const std::optional<local_seconds> local =
      t.cron.FirstAtOrAfter(FirstLocalFrom(t.zone, from), LocalOf(t.zone, last) + kDay);
  if (!local) return std::nullopt;
  const sys_seconds at = InstantOf(t.zone, *local);
  if (at > last) return std::nullopt;
  return MsOf(at);
}

std::optional<int64_t> CronLast(const CronTiming& t, int64_t at_ms, int64_t first_ms) {
  const sys_seconds to = SecondsAt(FloorDiv(at_ms, 1000));
  const sys_seconds first = SecondsAt(FloorDiv(first_ms + 999, 1000));  // first whole second
  if (to < first) return std::nullopt;
  const std::optional<local_seconds> local =
      t.cron.LastAtOrBefore(LastLocalTo(t.zone, to), LocalOf(t.zone, first) - kDay);
  if (!local) return std::nullopt;
  const sys_seconds at = InstantOf(t.zone, *local);
  if (at < first) return std::nullopt;
  return MsOf(at);
}

std::optional<int64_t> IntervalNext(const IntervalTiming& t, int64_t start_ms, int64_t after_ms,
                                    int64_t last_ms) {
  const int64_t every = std::max<int64_t>(t.every_ms, 1);
  const int64_t steps = after_ms < start_ms ? 0 : FloorDiv(after_ms - start_ms, every) + 1;
  if (last_ms < start_ms || steps > (last_ms - start_ms) / every) return std::nullopt;
  return start_ms + steps * every;
}

std::optional<int64_t> IntervalLast(const IntervalTiming& t, int64_t start_ms, int64_t at_ms) {
  const int64_t every = std::max<int64_t>(t.every_ms, 1);
  if (at_ms < start_ms) return std::nullopt;
  return start_ms + FloorDiv(at_ms - start_ms, every) * every;
}

}  // namespace

std::optional<int64_t> NextFireAfter(const RepeatRule& rule, int64_t after_ms) {
  const int64_t last_ms = LastAllowedMs(rule);
  const int64_t after = std::max(after_ms, rule.start_at_ms - 1);
  if (after >= last_ms) return std::nullopt;
  if (const auto* cron = std::get_if<CronTiming>(&rule.timing)) {
    return CronNext(*cron, after, last_ms);
  }
  return IntervalNext(std::get<IntervalTiming>(rule.timing), rule.start_at_ms, after, last_ms);
}

std::optional<int64_t> LastFireAtOrBefore(const RepeatRule& rule, int64_t at_ms) {
  const int64_t at = std::min(at_ms, LastAllowedMs(rule));
  if (at < rule.start_at_ms) return std::nullopt;
  if (const auto* cron = std::get_if<CronTiming>(&rule.timing)) {
    return CronLast(*cron, at, rule.start_at_ms);
  }
  return IntervalLast(std::get<IntervalTiming>(rule.timing), rule.start_at_ms, at);
}

std::vector<int64_t> NextFireTimes(const RepeatRule& rule, int64_t after_ms, int64_t runs_done,
                                   size_t count) {
  if (rule.max_runs) {
    count = std::min<size_t>(count, static_cast<size_t>(std::max<int64_t>(
                                        *rule.max_runs - std::max<int64_t>(runs_done, 0), 0)));
  }
  std::vector<int64_t> out;
  out.reserve(count);
  std::optional<int64_t> next = after_ms;
  while (out.size() < count && (next = NextFireAfter(rule, *next))) out.push_back(*next);
  return out;
}

}  // namespace anteroom::core
