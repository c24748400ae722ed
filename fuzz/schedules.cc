// What a repeatable job's schedule reads from a client: a cron expression and a time zone name,
// then the fire times and misfires computed from them. Input: byte 0 picks the zone (five
// fixed ones with daylight saving, half-hour and 45-minute offsets, or the text after the
// first '\n' as a name for FindTimeZone), byte 1 the moment searched from (around each clock
// change of 2026, and the ends of the library's range), byte 2 the misfire policy and its
// bounds; the rest, up to '\n', is the expression.
//
// Checked besides crashes and hangs: an expression that parses gives strictly increasing fire
// times after the moment, each the next after the one before and the last at or before
// itself, with no fire time between two of them (LastFireAtOrBefore(b - 1) is a); a misfire
// plan fires at most max_catchup times, in order, all due, and says what comes next after now.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/time_zones.h"
#include "core/cron.h"
#include "core/fire_times.h"
#include "core/misfire.h"
#include "harness.h"

namespace {

using anteroom::fuzz::Fail;
namespace core = anteroom::core;

constexpr std::string_view kZones[] = {"UTC", "Europe/Berlin", "America/New_York",
                                       "Australia/Lord_Howe", "Asia/Kathmandu"};
constexpr int64_t kFrom[] = {
    1'774'742'400'000,                // 2026-03-29T00:00Z: Europe springs forward at 01:00Z
    1'792'886'400'000,                // 2026-10-25T00:00Z: Europe falls back
    1'772'928'000'000,                // 2026-03-08T00:00Z: New York springs forward
    1'793'502'000'000,                // 2026-11-01T03:00Z: New York falls back at 06:00Z
    0,                                // the epoch
    2'145'916'800'000,                // 2038-01-01: past the zone files' listed transitions
    32'503'680'000'000 - 86'400'000,  // the day before the year 3000 (kLatestTimeMs)
};

std::string Show(int64_t a, int64_t b) { return std::to_string(a) + " " + std::to_string(b); }

void CheckTimes(const core::RepeatRule& rule, int64_t from) {
  std::vector<int64_t> times = core::NextFireTimes(rule, from, 0, 5);
  int64_t before = from;
  std::optional<int64_t> previous;
  for (int64_t t : times) {
    if (t <= before) Fail("fire times not increasing", Show(before, t));
    std::optional<int64_t> next = core::NextFireAfter(rule, before);
    if (next != t) Fail("not the next fire time", Show(before, t));
    if (core::LastFireAtOrBefore(rule, t) != t) Fail("a fire time is not its own last", Show(t, 0));
    std::optional<int64_t> between = core::LastFireAtOrBefore(rule, t - 1);
    if (previous && between != previous) Fail("a fire time between two", Show(*previous, t));
    if (!previous && between && *between > from) Fail("a fire time skipped", Show(*between, t));
    previous = t;
    before = t;
  }
}

void CheckMisfires(const core::RepeatRule& rule, int64_t from, uint8_t knobs) {
  core::MisfireRule misfire{
      .policy = static_cast<core::MisfirePolicy>(knobs % 3),
      .grace_ms = (knobs >> 2 & 3) * int64_t{60'000},
      .max_catchup = 1 + (knobs >> 4) * 7,
  };
  int64_t now = from + 3 * 86'400'000;  // three days down
  core::DueRuns due = core::PlanDueRuns(rule, misfire, from, 0, now);
  if (static_cast<int64_t>(due.fire.size()) > misfire.max_catchup) {
    Fail("more than max_catchup fired", std::to_string(due.fire.size()));
  }
  int64_t last = from;
  for (int64_t t : due.fire) {
    if (t <= last || t > now) Fail("a fired time out of order or not due", Show(last, t));
    if (core::LastFireAtOrBefore(rule, t) != t) Fail("fired a time that is not a fire time");
    last = t;
  }
  if (due.handled_through_ms > now) Fail("handled past now", Show(due.handled_through_ms, now));
  if (due.next_ms && *due.next_ms <= now) Fail("the next time is not after now");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 3, size - 3);
  std::string_view zone_name;
  if (size_t nl = text.find('\n'); nl != std::string_view::npos) {
    zone_name = text.substr(nl + 1);
    text = text.substr(0, nl);
  }
  const date::time_zone* zone = nullptr;
  if (data[0] % 6 < 5) {
    zone = anteroom::FindTimeZone(kZones[data[0] % 6]).value();
  } else {
    auto found = anteroom::FindTimeZone(zone_name);
    if (found.ok() && *found == nullptr) Fail("a zone found is null");
    if (found.ok() && zone_name == "localtime") Fail("localtime was found");
    if (!found.ok()) return 0;
    zone = *found;
  }
  auto cron = core::ParseCron(text);
  if (!cron.ok()) {
    if (cron.message().empty()) Fail("a refusal without a message");
    return 0;
  }
  core::RepeatRule rule{.timing = core::CronTiming{*cron, zone},
                        .start_at_ms = 0,
                        .end_at_ms = std::nullopt,
                        .max_runs = std::nullopt};
  int64_t from = kFrom[data[1] % std::size(kFrom)];
  CheckTimes(rule, from);
  CheckMisfires(rule, from, data[2]);
  return 0;
}
