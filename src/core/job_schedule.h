#pragma once
// A repeatable job's schedule (PUT /v1/schedules/{id}): what each run pushes, when it runs
// (core/fire_times.h), what happens to runs it missed (core/misfire.h) or that would overlap the
// one before, and what it has done so far. The one firing rule every backend applies, inside
// the same atomic step as the pushes it makes.
//
// Exactly once. Each run has a run key, (schedule id, nominal time). A schedule remembers
// handled_through_ms: every nominal time up to it was fired or passed over. A firing pushes
// the runs in (handled_through_ms, now] and moves handled_through_ms past them in the same
// atomic step (one log record; one Lua script that refuses to run when handled_through_ms is
// not the one its caller planned from), so however many processes fire and however often they
// restart, a run key is pushed at most once. The job carries its run key as its dedupe key too.
//
// Overlap. `skip`: a run does not fire while the job of the schedule's latest run is still
// ready, delayed or in flight (it is passed over, as a misfire is); when a firing finds several
// runs due (a catch-up), only the latest of them fires, as the others would overlap it.
//
// Pause. A paused schedule fires nothing; when resumed, the times that passed while it was
// paused are not run (it goes on from the moment it was resumed), as the operator held it back
// on purpose.
//
// Change. Changing a schedule (another PUT) keeps what it has done: its run count, its latest
// job, and handled_through_ms (never moved back, so no run key fires twice); the new timing
// applies to times after the change.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/op_status.h"
#include "core/fire_times.h"
#include "core/misfire.h"
#include "core/queue_types.h"

namespace anteroom::core {

// At most this many schedules on one server (or one Redis): each costs a little at every
// firing and in every snapshot.
inline constexpr size_t kMaxSchedules = 10'000;
// An interval schedule's shortest period (cron's finest is a second too).
inline constexpr int64_t kMinEveryMs = 1'000;
inline constexpr int64_t kMaxJitterMs = 3'600'000;
inline constexpr int64_t kMaxMisfireGraceMs = 86'400'000;
// How late a run may fire and still be on time unless a schedule says otherwise: a timer wakes
// a little late, a busy server later still, and with no grace at all such a run would be a
// misfire (under `skip`, lost). Quartz's misfire threshold is the same minute.
inline constexpr int64_t kDefaultMisfireGraceMs = 60'000;
// What GET shows of the times to come.
inline constexpr size_t kFireTimesShown = 5;

enum class Overlap : uint8_t { kAllow, kSkip };
std::string_view NameOf(Overlap overlap);  // "allow", "skip"
std::optional<Overlap> OverlapNamed(std::string_view name);

// The job each run pushes (its delay is the run's jitter; its dedupe key is the run key).
struct ScheduleJob {
  std::string payload;
  int32_t priority = 0;
  std::string group;
  int32_t max_attempts = kDefaultMaxAttempts;
  friend bool operator==(const ScheduleJob&, const ScheduleJob&) = default;
};

struct ScheduleSpec {
  std::string queue;
  std::string cron;  // "": an interval schedule (every_ms)
  std::string time_zone = "UTC";
  int64_t every_ms = 0;
  std::optional<int64_t> start_at_ms;  // nullopt: when it was created
  std::optional<int64_t> end_at_ms;
  std::optional<int64_t> max_runs;
  Overlap overlap = Overlap::kAllow;
  MisfireRule misfire{MisfirePolicy::kSkip, kDefaultMisfireGraceMs, 1};
  int64_t jitter_ms = 0;  // a run's job waits 0..jitter_ms (fixed per run key) before it is ready
  ScheduleJob job;
  friend bool operator==(const ScheduleSpec&, const ScheduleSpec&) = default;
};

struct ScheduleState {
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  int64_t handled_through_ms = 0;  // every nominal time up to it was fired or passed over
  int64_t runs_done = 0;           // runs pushed (what max_runs counts)
  bool paused = false;
  std::optional<int64_t> last_run_ms;  // the nominal time of the latest run pushed
  std::optional<JobId> last_job;       // its job
  std::optional<int64_t> next_ms;      // the next nominal time; nullopt: the schedule is over
  friend bool operator==(const ScheduleState&, const ScheduleState&) = default;
};

struct Schedule {
  std::string id;
  ScheduleSpec spec;
  ScheduleState state;
  // Fires now: not paused, and its next nominal time has come.
  bool Due(int64_t now_ms) const {
    return !state.paused && state.next_ms.has_value() && *state.next_ms <= now_ms;
  }
  friend bool operator==(const Schedule&, const Schedule&) = default;
};

// The timing a spec describes, for a schedule created at `created_at_ms`: kInvalidArgument
// (wire_errors.h) for a cron expression that does not parse, an unknown zone, an interval
// out of range, an end not after the start, or a job or policy out of its bounds.
OpResult<RepeatRule> RuleOf(const ScheduleSpec& spec, int64_t created_at_ms);

// The state of schedule `spec` put at `now_ms`: a new one (no `before`) starts from its first
// nominal time at or after both its start and now; a changed one keeps what it has done.
ScheduleState Placed(const RepeatRule& rule, const std::optional<ScheduleState>& before,
                     int64_t now_ms);
// Paused, or resumed at `now_ms` (going on from now: what passed while paused is not run).
void SetPaused(ScheduleState& state, const RepeatRule& rule, bool paused, int64_t now_ms);

// What firing a due schedule at `now_ms` does, planned before the queue is looked at (a Redis
// script applies it, so the plan must not depend on what only the script can see).
struct FirePlan {
  int64_t expected_handled_through_ms = 0;  // what the schedule must still say (else: no-op)
  std::vector<int64_t> due;                 // nominal times to fire, oldest first
  int64_t handled_through_ms = 0;           // after the firing
  // The next nominal time if runs are left after this firing (max_runs aside: that is
  // counted when the firing knows how many it pushed); nullopt: the window is over.
  std::optional<int64_t> next_if_runs_left;
};
FirePlan PlanFire(const Schedule& schedule, const RepeatRule& rule, int64_t now_ms);

// The runs of `plan` that fire, given whether the job of the schedule's latest run is still
// ready, delayed or in flight: all of them (overlap allow), or none or the latest (skip).
std::vector<int64_t> FiringRuns(const ScheduleSpec& spec, const FirePlan& plan,
                                bool previous_pending);
// The job run `nominal_ms` pushes.
JobSpec RunJob(const Schedule& schedule, int64_t nominal_ms);
// "schedule:<id>:<nominal ms>": the run's key, and its job's dedupe key.
std::string RunKey(std::string_view id, int64_t nominal_ms);
// 0..jitter_ms, the same for a run key in every process and after every restart.
int64_t RunJitterMs(std::string_view id, int64_t nominal_ms, int64_t jitter_ms);
// The state once `runs` (of `plan`) were pushed, the latest as job `last_job`.
void Fired(ScheduleState& state, const ScheduleSpec& spec, const FirePlan& plan,
           const std::vector<int64_t>& runs, std::optional<JobId> last_job, int64_t now_ms);

// As snapshots and log records hold a schedule (Load checks the bounds, not the cron text).
void SaveSchedule(ByteWriter& out, const Schedule& schedule);
bool LoadSchedule(ByteReader& in, Schedule& schedule);

}  // namespace anteroom::core
