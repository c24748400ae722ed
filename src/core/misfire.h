#pragma once
// Which of a schedule's nominal times to fire now: the ones that came due since the last
// call, on time or missed (the server was down, or busy), as the schedule's misfire policy
// says. Pure: `now_ms` is an argument.
//
// A due time is on time while now - misfire_grace_ms <= it <= now; older, it is late.
//  - skip:     on-time times fire; late ones are passed over.
//  - run_once: on-time times fire; the late ones together fire once, keyed by the latest of
//              them (the run stands for the missed stretch).
//  - run_all:  on-time and late times all fire.
// Under every policy one call fires at most max_catchup times (clamped to 1..kMaxCatchup):
// the latest ones, as a long-down server's backlog matters less the older it is, and the
// latest is the one whose data is current. Earlier due times beyond that are passed over.
// max_runs then keeps the earliest of those, the runs the schedule has left.
//
// The work is bounded by max_catchup whatever the downtime: due times are found walking back
// from now (core/fire_times.h's LastFireAtOrBefore), never counted from the last one fired, so
// a year down under an every-second cron costs the same as a minute.
//
// Each time fired is a run key (schedule, nominal time): a caller that pushes each key once
// (and remembers handled_through_ms with the pushes) fires every nominal time at most once,
// whatever is retried.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/fire_times.h"

namespace anteroom::core {

inline constexpr int64_t kMaxCatchup = 1000;

enum class MisfirePolicy : uint8_t { kSkip, kRunOnce, kRunAll };

// The wire names: "skip", "run_once", "run_all".
std::string_view NameOf(MisfirePolicy policy);
std::optional<MisfirePolicy> MisfirePolicyNamed(std::string_view name);

struct MisfireRule {
  MisfirePolicy policy = MisfirePolicy::kSkip;
  int64_t grace_ms = 0;     // a due time this late is still on time (>= 0)
  int64_t max_catchup = 1;  // times fired by one call at most (1..kMaxCatchup)
  friend bool operator==(const MisfireRule&, const MisfireRule&) = default;
};

struct DueRuns {
  std::vector<int64_t> fire;       // the nominal times to fire now, oldest first: the run keys
  bool passed_over = false;        // some due time was not fired (late under skip or run_once, or
                                   // beyond max_catchup); not counting those max_runs ended
  int64_t handled_through_ms = 0;  // every nominal time up to here is fired or passed over:
                                   // the next call's handled_through_ms
  std::optional<int64_t> next_ms;  // the next nominal time to wait for (> now); nullopt: the
                                   // schedule is over (window ended, or max_runs reached)
};

// Nominal times in (handled_through_ms, now_ms] are due. `runs_done`: runs fired before this
// call (max_runs counts them). A new schedule starts from FirstHandledThrough.
DueRuns PlanDueRuns(const RepeatRule& rule, const MisfireRule& misfire, int64_t handled_through_ms,
                    int64_t runs_done, int64_t now_ms);

// handled_through_ms for a schedule created at `created_at_ms`: its first run is its first
// nominal time at or after both its start_at and its creation (nothing before it was created
// counts as missed).
int64_t FirstHandledThrough(const RepeatRule& rule, int64_t created_at_ms);

}  // namespace anteroom::core
