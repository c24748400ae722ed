#include "core/job_schedule.h"

#include <algorithm>
#include <array>

#include "common/time_zones.h"
#include "common/wire_errors.h"
#include "core/room_types.h"

namespace anteroom::core {

namespace {

constexpr std::array<std::pair<Overlap, std::string_view>, 2> kOverlapNames = {
    {{Overlap::kAllow, "allow"}, {Overlap::kSkip, "skip"}}};

OpResult<RepeatRule> Invalid(std::string message) {
  return {OpStatus::kInvalidArgument, std::move(message)};
}

bool InTimeRange(int64_t ms) { return ms >= 0 && ms <= kLatestTimeMs; }

// Bounds a log record or a snapshot is held to, as the HTTP layer holds a request to them.
bool InBounds(const ScheduleSpec& s) {
  return s.time_zone.size() <= kMaxTimeZoneNameBytes && s.cron.size() <= kMaxCronBytes &&
         (s.cron.empty() ? s.every_ms >= kMinEveryMs && s.every_ms <= kLatestTimeMs
                         : s.every_ms == 0) &&
         (!s.start_at_ms || InTimeRange(*s.start_at_ms)) &&
         (!s.end_at_ms || InTimeRange(*s.end_at_ms)) && (!s.max_runs || *s.max_runs >= 1) &&
         s.misfire.grace_ms >= 0 && s.misfire.grace_ms <= kMaxMisfireGraceMs &&
         s.misfire.max_catchup >= 1 && s.misfire.max_catchup <= kMaxCatchup && s.jitter_ms >= 0 &&
         s.jitter_ms <= kMaxJitterMs && s.job.group.size() <= kMaxGroupBytes &&
         s.job.max_attempts >= 1 && s.job.max_attempts <= kMaxMaxAttempts;
}

}  // namespace

std::string_view NameOf(Overlap overlap) {
  for (const auto& [o, name] : kOverlapNames) {
    if (o == overlap) return name;
  }
  return "allow";
}

std::optional<Overlap> OverlapNamed(std::string_view name) {
  for (const auto& [o, n] : kOverlapNames) {
    if (n == name) return o;
  }
  return std::nullopt;
}

OpResult<RepeatRule> RuleOf(const ScheduleSpec& spec, int64_t created_at_ms) {
  RepeatRule rule;
  if (spec.cron.empty()) {
    if (spec.every_ms < kMinEveryMs || spec.every_ms > kLatestTimeMs) {
      return Invalid(wire::ScheduleEveryOutOfRange(kMinEveryMs));
    }
    rule.timing = IntervalTiming{spec.every_ms};
  } else {
    auto cron = ParseCron(spec.cron);
    if (!cron.ok()) return {cron.status(), cron.message()};
    auto zone = FindTimeZone(spec.time_zone);
    if (!zone.ok()) return {zone.status(), zone.message()};
    rule.timing = CronTiming{*cron, *zone};
  }
  if (!InBounds(spec)) return Invalid(std::string(wire::kScheduleOutOfBounds));
  rule.start_at_ms = spec.start_at_ms.value_or(created_at_ms);
  rule.end_at_ms = spec.end_at_ms;
  if (rule.end_at_ms && *rule.end_at_ms <= rule.start_at_ms) {
    return Invalid(std::string(wire::kScheduleEndsBeforeStart));
  }
  rule.max_runs = spec.max_runs;
  return rule;
}

ScheduleState Placed(const RepeatRule& rule, const std::optional<ScheduleState>& before,
                     int64_t now_ms) {
  ScheduleState s;
  if (before) s = *before;
  if (!before) s.created_at_ms = now_ms;
  s.updated_at_ms = now_ms;
  const int64_t first = FirstHandledThrough(rule, now_ms);
  s.handled_through_ms = before ? std::max(before->handled_through_ms, first) : first;
  const bool runs_left = !rule.max_runs || s.runs_done < *rule.max_runs;
  s.next_ms = runs_left ? NextFireAfter(rule, s.handled_through_ms) : std::nullopt;
  return s;
}

void SetPaused(ScheduleState& state, const RepeatRule& rule, bool paused, int64_t now_ms) {
  state.updated_at_ms = now_ms;
  if (state.paused == paused) return;
  state.paused = paused;
  if (paused) return;
  state.handled_through_ms = std::max(state.handled_through_ms, now_ms - 1);
  const bool runs_left = !rule.max_runs || state.runs_done < *rule.max_runs;
  state.next_ms = runs_left ? NextFireAfter(rule, state.handled_through_ms) : std::nullopt;
}

FirePlan PlanFire(const Schedule& schedule, const RepeatRule& rule, int64_t now_ms) {
  const ScheduleState& s = schedule.state;
  DueRuns due = PlanDueRuns(rule, schedule.spec.misfire, s.handled_through_ms, s.runs_done, now_ms);
  FirePlan plan;
  plan.expected_handled_through_ms = s.handled_through_ms;
  plan.due = std::move(due.fire);
  plan.handled_through_ms = due.handled_through_ms;
  RepeatRule unbounded = rule;
  unbounded.max_runs.reset();
  plan.next_if_runs_left = NextFireAfter(unbounded, plan.handled_through_ms);
  return plan;
}

std::vector<int64_t> FiringRuns(const ScheduleSpec& spec, const FirePlan& plan,
                                bool previous_pending) {
  if (spec.overlap == Overlap::kAllow || plan.due.empty()) return plan.due;
  if (previous_pending) return {};
  return {plan.due.back()};
}

std::string RunKey(std::string_view id, int64_t nominal_ms) {
  std::string key = "schedule:";
  key.append(id);
  key += ':';
  key += std::to_string(nominal_ms);
  return key;
}

int64_t RunJitterMs(std::string_view id, int64_t nominal_ms, int64_t jitter_ms) {
  if (jitter_ms <= 0) return 0;
  // FNV-1a over the run key: fixed, unlike the process-seeded id hash, so every process and
  // every restart draws the same delay for a run.
  uint64_t h = 1469598103934665603ull;
  for (char c : RunKey(id, nominal_ms)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h % static_cast<uint64_t>(jitter_ms + 1));
}

JobSpec RunJob(const Schedule& schedule, int64_t nominal_ms) {
  const ScheduleJob& job = schedule.spec.job;
  JobSpec spec;
  spec.payload = job.payload;
  spec.delay_ms = RunJitterMs(schedule.id, nominal_ms, schedule.spec.jitter_ms);
  spec.priority = job.priority;
  spec.dedupe_key = RunKey(schedule.id, nominal_ms);
  spec.max_attempts = job.max_attempts;
  spec.group = job.group;
  return spec;
}

void Fired(ScheduleState& state, const ScheduleSpec& spec, const FirePlan& plan,
           const std::vector<int64_t>& runs, std::optional<JobId> last_job, int64_t now_ms) {
  state.updated_at_ms = std::max(state.updated_at_ms, now_ms);
  state.handled_through_ms = plan.handled_through_ms;
  state.runs_done += static_cast<int64_t>(runs.size());
  if (!runs.empty()) {
    state.last_run_ms = runs.back();
    state.last_job = last_job;
  }
  const bool runs_left = !spec.max_runs || state.runs_done < *spec.max_runs;
  state.next_ms = runs_left ? plan.next_if_runs_left : std::nullopt;
}

// Layout: str id | str queue | str cron | str zone | i64 every_ms | opt start_at | opt end_at |
// opt max_runs | u8 overlap | u8 misfire policy | i64 grace | i64 max_catchup | i64 jitter |
// str payload | i32 priority | str group | i32 max_attempts | i64 created | i64 updated |
// i64 handled_through | i64 runs_done | u8 paused | opt last_run | opt last_job | opt next.
namespace {
void PutOpt(ByteWriter& out, const std::optional<int64_t>& v) {
  out.PutBool(v.has_value());
  if (v) out.Put(*v);
}
std::optional<int64_t> GetOpt(ByteReader& in) {
  if (!in.GetBool()) return std::nullopt;
  return in.Get<int64_t>();
}
}  // namespace

void SaveSchedule(ByteWriter& out, const Schedule& schedule) {
  const ScheduleSpec& s = schedule.spec;
  out.PutString(schedule.id);
  out.PutString(s.queue);
  out.PutString(s.cron);
  out.PutString(s.time_zone);
  out.Put(s.every_ms);
  PutOpt(out, s.start_at_ms);
  PutOpt(out, s.end_at_ms);
  PutOpt(out, s.max_runs);
  out.Put(s.overlap);
  out.Put(s.misfire.policy);
  out.Put(s.misfire.grace_ms);
  out.Put(s.misfire.max_catchup);
  out.Put(s.jitter_ms);
  out.PutString(s.job.payload);
  out.Put(s.job.priority);
  out.PutString(s.job.group);
  out.Put(s.job.max_attempts);
  const ScheduleState& st = schedule.state;
  out.Put(st.created_at_ms);
  out.Put(st.updated_at_ms);
  out.Put(st.handled_through_ms);
  out.Put(st.runs_done);
  out.PutBool(st.paused);
  PutOpt(out, st.last_run_ms);
  out.PutBool(st.last_job.has_value());
  if (st.last_job) out.Put(*st.last_job);
  PutOpt(out, st.next_ms);
}

bool LoadSchedule(ByteReader& in, Schedule& schedule) {
  schedule = Schedule{};
  ScheduleSpec& s = schedule.spec;
  schedule.id = in.GetString();
  s.queue = in.GetString();
  s.cron = in.GetString();
  s.time_zone = in.GetString();
  s.every_ms = in.Get<int64_t>();
  s.start_at_ms = GetOpt(in);
  s.end_at_ms = GetOpt(in);
  s.max_runs = GetOpt(in);
  s.overlap = in.Get<Overlap>();
  s.misfire.policy = in.Get<MisfirePolicy>();
  s.misfire.grace_ms = in.Get<int64_t>();
  s.misfire.max_catchup = in.Get<int64_t>();
  s.jitter_ms = in.Get<int64_t>();
  s.job.payload = in.GetString();
  s.job.priority = in.Get<int32_t>();
  s.job.group = in.GetString();
  s.job.max_attempts = in.Get<int32_t>();
  ScheduleState& st = schedule.state;
  st.created_at_ms = in.Get<int64_t>();
  st.updated_at_ms = in.Get<int64_t>();
  st.handled_through_ms = in.Get<int64_t>();
  st.runs_done = in.Get<int64_t>();
  st.paused = in.GetBool();
  st.last_run_ms = GetOpt(in);
  if (in.GetBool()) st.last_job = in.Get<JobId>();
  st.next_ms = GetOpt(in);
  return !in.failed() && InBounds(s) && OverlapNamed(NameOf(s.overlap)) == s.overlap &&
         MisfirePolicyNamed(NameOf(s.misfire.policy)) == s.misfire.policy && st.runs_done >= 0;
}

}  // namespace anteroom::core
