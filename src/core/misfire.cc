#include "core/misfire.h"

#include <algorithm>
#include <array>
#include <cstddef>

#include "core/room_types.h"

namespace anteroom::core {

namespace {

struct PolicyName {
  MisfirePolicy policy;
  std::string_view name;
};
constexpr std::array<PolicyName, 3> kPolicyNames = {{{MisfirePolicy::kSkip, "skip"},
                                                     {MisfirePolicy::kRunOnce, "run_once"},
                                                     {MisfirePolicy::kRunAll, "run_all"}}};

// LastFireAtOrBefore with "none" as a time before every other: the walk below compares it.
constexpr int64_t kNone = INT64_MIN;
int64_t LastOrNone(const RepeatRule& rule, int64_t at_ms) {
  return LastFireAtOrBefore(rule, at_ms).value_or(kNone);
}

}  // namespace

std::string_view NameOf(MisfirePolicy policy) {
  for (const PolicyName& p : kPolicyNames) {
    if (p.policy == policy) return p.name;
  }
  return "skip";
}

std::optional<MisfirePolicy> MisfirePolicyNamed(std::string_view name) {
  for (const PolicyName& p : kPolicyNames) {
    if (p.name == name) return p.policy;
  }
  return std::nullopt;
}

DueRuns PlanDueRuns(const RepeatRule& rule, const MisfireRule& misfire, int64_t handled_through_ms,
                    int64_t runs_done, int64_t now_ms) {
  DueRuns out;
  out.handled_through_ms = std::max(handled_through_ms, now_ms);
  const int64_t runs_left =
      rule.max_runs ? std::max<int64_t>(*rule.max_runs - std::max<int64_t>(runs_done, 0), 0)
                    : INT64_MAX;
  if (runs_left == 0) return out;

  const size_t cap = static_cast<size_t>(std::clamp<int64_t>(misfire.max_catchup, 1, kMaxCatchup));
  const int64_t on_time_from = now_ms - std::clamp<int64_t>(misfire.grace_ms, 0, kLatestTimeMs);
  // Walk back from now: first the times every policy fires (for run_all, all of them), newest
  // first. `due` is always the newest due time not yet taken.
  const int64_t walk_floor = misfire.policy == MisfirePolicy::kRunAll
                                 ? handled_through_ms
                                 : std::max(handled_through_ms, on_time_from - 1);
  std::vector<int64_t> newest_first;
  int64_t due = now_ms > handled_through_ms ? LastOrNone(rule, now_ms) : kNone;
  while (due > walk_floor && newest_first.size() < cap) {
    newest_first.push_back(due);
    due = LastOrNone(rule, due - 1);
  }
  // run_once: the latest late time stands for all of them.
  if (misfire.policy == MisfirePolicy::kRunOnce && due > handled_through_ms &&
      newest_first.size() < cap) {
    newest_first.push_back(due);
    due = LastOrNone(rule, due - 1);
  }
  out.passed_over = due > handled_through_ms;

  out.fire.assign(newest_first.rbegin(), newest_first.rend());
  if (static_cast<int64_t>(out.fire.size()) > runs_left) {
    out.fire.resize(static_cast<size_t>(runs_left));
  }
  if (static_cast<int64_t>(out.fire.size()) < runs_left) {
    out.next_ms = NextFireAfter(rule, out.handled_through_ms);
  }
  return out;
}

int64_t FirstHandledThrough(const RepeatRule& rule, int64_t created_at_ms) {
  return std::max(rule.start_at_ms, created_at_ms) - 1;
}

}  // namespace anteroom::core
