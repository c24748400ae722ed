// Schedules of repeatable jobs in the memory backend (core/job_schedule.h). A schedule lives in
// its queue's slot, under the queue's lock: a firing, its pushes and its new state are one step
// there, and one log record (FireScheduleRecord). `schedule_queues_` finds a schedule's queue by
// its id.
//
// Locks: schedules_mu_ is taken last, never with another lock taken after it (a slot's mu may be
// held around it).
#include <algorithm>

#include "common/wire_errors.h"
#include "store/memory/on_queue.h"

namespace anteroom::store {

namespace {
template <typename T>
using Answered = std::optional<OpResult<T>>;

OpResult<core::Schedule> UnknownSchedule() {
  return {OpStatus::kUnknownSchedule, std::string(wire::kUnknownSchedule)};
}
}  // namespace

void MemoryBackend::QueueSlot::FireDue(int64_t now) {
  if (now < next_fire) return;
  for (auto& [id, e] : schedules) {
    if (!e.schedule.Due(now)) continue;
    const core::FirePlan plan = core::PlanFire(e.schedule, e.rule, now);
    const std::optional<core::JobId>& last = e.schedule.state.last_job;
    std::vector<int64_t> runs =
        core::FiringRuns(e.schedule.spec, plan, last && queue.Pending(*last));
    std::vector<core::JobSpec> jobs;
    jobs.reserve(runs.size());
    for (int64_t t : runs) jobs.push_back(core::RunJob(e.schedule, t));
    std::vector<core::PushResult> pushed = queue.Push(jobs, now);
    if (!pushed.empty()) listed = true;  // counted when the schedule was put
    core::Fired(e.schedule.state, e.schedule.spec, plan, runs,
                pushed.empty() ? std::nullopt : std::optional<core::JobId>(pushed.back().id), now);
    backend.LogChange(*this, now, FireScheduleRecord{.schedule = e.schedule, .runs = runs});
  }
  SchedulesChanged();
}

std::optional<std::string> MemoryBackend::ScheduleQueue(std::string_view id) {
  std::lock_guard lock(schedules_mu_);
  auto it = schedule_queues_.find(id);
  if (it == schedule_queues_.end()) return std::nullopt;
  return it->second;
}

void MemoryBackend::IndexSchedules() {
  std::lock_guard lock(schedules_mu_);
  schedule_queues_.clear();
  for (auto& [name, slot] : queues_) {
    for (const auto& [id, e] : slot->schedules) schedule_queues_.emplace(id, name);
  }
}

void MemoryBackend::PutSchedule(std::string id, core::ScheduleSpec spec,
                                Completion<core::Schedule> done) {
  auto rule = core::RuleOf(spec, clock_.NowMs());
  if (!rule.ok()) return done(OpResult<core::Schedule>(rule.status(), rule.message()));
  bool reserved = false;  // the id is new: taken here, given back should the put fail
  {
    std::lock_guard lock(schedules_mu_);
    auto it = schedule_queues_.find(id);
    if (it != schedule_queues_.end() && it->second != spec.queue) {
      return done(
          OpResult<core::Schedule>(OpStatus::kConflict, wire::ScheduleQueueMoved(it->second)));
    }
    if (it == schedule_queues_.end()) {
      if (schedule_queues_.size() >= core::kMaxSchedules) {
        return done(OpResult<core::Schedule>(OpStatus::kLimitReached,
                                             wire::TooManySchedules(core::kMaxSchedules)));
      }
      schedule_queues_.emplace(id, spec.queue);
      reserved = true;
    }
  }
  std::string queue = spec.queue;
  OnQueue<core::Schedule>(
      queue, Access::kChange, true, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        if (!MarkListed(*q)) {
          if (reserved) {
            std::lock_guard lock(schedules_mu_);
            schedule_queues_.erase(id);
          }
          return Answered<core::Schedule>(OpResult<core::Schedule>(
              OpStatus::kLimitReached, wire::TooManyQueues(options_.max_queues)));
        }
        // Created `now`, when it has no start of its own (RuleOf above read the clock first).
        auto timing = core::RuleOf(spec, now);
        if (!timing.ok()) {
          return Answered<core::Schedule>(
              OpResult<core::Schedule>(timing.status(), timing.message()));
        }
        auto it = q->schedules.find(id);
        std::optional<core::ScheduleState> before;
        if (it != q->schedules.end()) {
          before = it->second.schedule.state;
          // An unchanged start keeps the creation time a start_at-less rule is anchored at.
          if (!spec.start_at_ms) timing->start_at_ms = before->created_at_ms;
        }
        core::Schedule schedule{id, spec, core::Placed(*timing, before, now)};
        q->schedules.insert_or_assign(id, QueueSlot::ScheduleEntry{schedule, *timing});
        q->SchedulesChanged();
        LogChange(*q, now, PutScheduleRecord{.schedule = schedule});
        return Answered<core::Schedule>(std::move(schedule));
      });
}

void MemoryBackend::GetSchedule(std::string id, Completion<core::Schedule> done) {
  std::optional<std::string> queue = ScheduleQueue(id);
  if (!queue) return done(UnknownSchedule());
  OnQueue<core::Schedule>(*queue, Access::kRead, false, std::move(done),
                          [&](QueueSlot* q, int64_t, auto&) {
                            if (!q || !q->schedules.contains(id))
                              return Answered<core::Schedule>(UnknownSchedule());
                            return Answered<core::Schedule>(q->schedules.find(id)->second.schedule);
                          });
}

void MemoryBackend::ListSchedules(Completion<std::vector<core::Schedule>> done) {
  std::vector<core::Schedule> all;
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::shared_lock lock(queues_mu_);
    for (auto& [name, slot] : queues_) {
      std::lock_guard slot_lock(slot->mu);
      for (const auto& [id, e] : slot->schedules) all.push_back(e.schedule);
      if (!slot->schedules.empty()) lsn = std::max(lsn, slot->last_lsn);
    }
  }
  std::sort(all.begin(), all.end(),
            [](const core::Schedule& a, const core::Schedule& b) { return a.id < b.id; });
  Answer<std::vector<core::Schedule>>(lsn, Access::kRead, std::move(done), std::move(all), {});
}

void MemoryBackend::PauseSchedule(std::string id, bool paused, Completion<core::Schedule> done) {
  std::optional<std::string> queue = ScheduleQueue(id);
  if (!queue) return done(UnknownSchedule());
  OnQueue<core::Schedule>(*queue, Access::kChange, false, std::move(done),
                          [&](QueueSlot* q, int64_t now, auto&) {
                            if (!q || !q->schedules.contains(id))
                              return Answered<core::Schedule>(UnknownSchedule());
                            auto it = q->schedules.find(id);
                            core::Schedule& schedule = it->second.schedule;
                            if (schedule.state.paused != paused) {
                              core::SetPaused(schedule.state, it->second.rule, paused, now);
                              q->SchedulesChanged();
                              LogChange(*q, now, PutScheduleRecord{.schedule = schedule});
                            }
                            return Answered<core::Schedule>(schedule);
                          });
}

void MemoryBackend::DeleteSchedule(std::string id, Completion<core::Schedule> done) {
  std::optional<std::string> queue = ScheduleQueue(id);
  if (!queue) return done(UnknownSchedule());
  OnQueue<core::Schedule>(*queue, Access::kChange, false, std::move(done),
                          [&](QueueSlot* q, int64_t now, auto&) {
                            if (!q || !q->schedules.contains(id))
                              return Answered<core::Schedule>(UnknownSchedule());
                            auto it = q->schedules.find(id);
                            core::Schedule gone = std::move(it->second.schedule);
                            q->schedules.erase(it);
                            q->SchedulesChanged();
                            {
                              std::lock_guard lock(schedules_mu_);
                              schedule_queues_.erase(id);
                            }
                            LogChange(*q, now, DeleteScheduleRecord{.id = id});
                            return Answered<core::Schedule>(std::move(gone));
                          });
}

}  // namespace anteroom::store
