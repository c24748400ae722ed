#pragma once
// Cron expressions: which wall-clock seconds a repeatable job's schedule names, read from text
// and searched on the local calendar. No time zone here: the expression speaks of local wall
// time, and core/fire_times.h maps that to instants through the schedule's zone.
//
// What ParseCron reads:
//
//   [second] minute hour day-of-month month day-of-week     (6 or 5 fields; 5: second 0)
//
//  - fields are separated by spaces or tabs; whitespace before and after is ignored; at most
//    kMaxCronBytes bytes in all;
//  - a field is a comma list of items; an item is `*`, `v`, `a-b`, each optionally followed by
//    a step `/n` (`*/15`, `10-40/10`), or `a/n` (from a to the field's maximum, step n);
//  - ranges: second and minute 0-59, hour 0-23, day-of-month 1-31, month 1-12 or JAN-DEC,
//    day-of-week 0-7 or SUN-SAT (0 and 7 both Sunday; `5-7` is Friday to Sunday); names in
//    any case; a range never wraps (`FRI-MON` and `7-1` are refused); a step is 1 to the
//    number of values of its field;
//  - macros instead of the fields: @yearly and @annually (0 0 1 1 *), @monthly (0 0 1 * *),
//    @weekly (0 0 * * 0), @daily and @midnight (0 0 * * *), @hourly (0 * * * *);
//  - day-of-month and day-of-week as Vixie cron (and crontab(5)) combine them: when both are
//    restricted, a day matches if either does; a field containing `*` (`*`, `*/2`) is not
//    restricted, and then both must match (a `*` field matches every day anyway);
//  - an expression that can never fire (`0 0 30 2 *`: no February 30th) is refused.
//
// Not read: Quartz's `?`, `L`, `W`, `#`, and @reboot.

#include <date/date.h>

#include <bitset>
#include <cstddef>
#include <optional>
#include <string_view>

#include "common/op_status.h"

namespace anteroom::core {

inline constexpr size_t kMaxCronBytes = 256;

// How far a search on the calendar looks, in days. The Gregorian calendar repeats every 400
// years (146097 days, a whole number of weeks), so an expression that matches any day matches
// one within this span from any day: a search that finds nothing here would find nothing ever.
inline constexpr int kCronSearchDays = 146'097 + 366;

// A parsed expression: each field as the set of its values (bit v set when v matches).
struct CronExpr {
  std::bitset<60> seconds;
  std::bitset<60> minutes;
  std::bitset<24> hours;
  std::bitset<32> days_of_month;  // bits 1-31
  std::bitset<13> months;         // bits 1-12
  std::bitset<7> days_of_week;    // 0 = Sunday; a 7 in the text is bit 0
  // Whether day-of-month and day-of-week are restricted (contain no `*`): when both are, a day
  // matches if either does (Vixie cron), else both must match.
  bool day_of_month_restricted = false;
  bool day_of_week_restricted = false;

  bool DayMatches(date::year_month_day day) const;
  bool Matches(date::local_seconds t) const;

  // The first matching second at or after `from`, no later than `until`: nullopt when there is
  // none (or none within kCronSearchDays of `from`, which for a parsed expression means none).
  std::optional<date::local_seconds> FirstAtOrAfter(date::local_seconds from,
                                                    date::local_seconds until) const;
  // The last matching second at or before `to`, no earlier than `not_before`.
  std::optional<date::local_seconds> LastAtOrBefore(date::local_seconds to,
                                                    date::local_seconds not_before) const;

  friend bool operator==(const CronExpr&, const CronExpr&) = default;
};

// `text` as above; kInvalidArgument with a message of wire_errors.h naming the field and the
// item at fault, or saying the expression never fires.
OpResult<CronExpr> ParseCron(std::string_view text);

}  // namespace anteroom::core
