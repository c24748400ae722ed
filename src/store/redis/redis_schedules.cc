// Schedules of repeatable jobs on Redis (core/job_schedule.h). A schedule lives in its queue's
// keys, so its firing and the pushes it makes are one queue.lua call; the schedule index
// (KeyLayout::ScheduleIndex, a slot of its own) finds a schedule's queue by its id.
//
// The core's timing (cron, time zones, misfires) cannot run in Lua: this file computes
// core::Placed, core::SetPaused and core::PlanFire from the record it read, and the script
// applies the result only if the record is still those exact bytes. A put or pause that lost a
// race is read and computed again; a firing that lost one is dropped (another process fired
// the schedule, or changed it: the sweeper comes back for whatever is due then). So each run
// key is pushed at most once, whichever processes fire.
//
// The index is written before the queue's script creates a schedule and cleaned after it
// deletes one; a process stopped in between leaves an entry whose queue holds no such schedule.
// Such an entry reads as absent (get, list, pause, delete) and a put anywhere takes it over. It
// counts towards core::kMaxSchedules until then.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>

#include "common/wire_errors.h"
#include "store/redis/redis_backend.h"
#include "store/redis/script_replies.h"

namespace anteroom::store::redis {

namespace {
using core::Schedule;

template <typename T, typename U>
OpResult<T> Fail(const OpResult<U>& r) {
  return {r.status(), r.message()};
}
template <typename T>
OpResult<T> Unavailable(const Reply& r) {
  return {OpStatus::kUnavailable, wire::RedisUnavailable(r.str)};
}
OpResult<Schedule> UnknownSchedule() {
  return {OpStatus::kUnknownSchedule, std::string(wire::kUnknownSchedule)};
}

// The timing a kept schedule fires by: its own start, else its creation (as the embedded
// backend keeps it).
OpResult<core::RepeatRule> KeptRule(const Schedule& schedule) {
  return core::RuleOf(schedule.spec, schedule.state.created_at_ms);
}

// The spec's bytes as queue.lua keeps them: core::SaveSchedule of the schedule with an empty
// state (the state lives in fields the script reads and writes).
std::string SpecBytes(const Schedule& schedule) {
  std::string out;
  ByteWriter writer(out);
  core::SaveSchedule(writer, Schedule{schedule.id, schedule.spec, {}});
  return out;
}

std::string Opt(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; }
}  // namespace

// ---- the index and the records ---------------------------------------------------------------

void RedisBackend::LookUpSchedule(Shard& s, const std::string& id,
                                  std::function<void(OpResult<IndexEntry>)> k) {
  const std::string index = keys_.ScheduleIndex();
  auto entry = std::make_shared<IndexEntry>();
  auto failed = std::make_shared<std::optional<Reply>>();
  // Both on the connection of the index's slot: answered in order.
  s.client->Call(index, {"HGET", index, id}, [entry, failed](Reply r) {
    if (r.failed()) {
      *failed = std::move(r);
    } else if (r.type == Reply::Type::kString) {
      entry->queue = std::move(r.str);
    }
  });
  s.client->Call(index, {"HLEN", index}, [entry, failed, k](Reply r) {
    if (*failed) return k(Unavailable<IndexEntry>(**failed));
    if (r.failed()) return k(Unavailable<IndexEntry>(r));
    entry->count = r.AsInt();
    k(std::move(*entry));
  });
}

void RedisBackend::ReadSchedule(Shard& s, const std::string& queue, const std::string& id,
                                std::function<void(OpResult<ScheduleAt>)> k) {
  QueueScript(s, queue, {"schedules", id}, [k](OpResult<Reply> r) {
    if (!r.ok()) return k(Fail<ScheduleAt>(r));
    ScheduleRead read = ParseSchedules(*r);
    ScheduleAt at;
    at.now_ms = read.now_ms;
    if (!read.schedules.empty()) at.stored = std::move(read.schedules.front());
    k(std::move(at));
  });
}

// queue.lua `schedput` with the record read: written, or (another process wrote first) read and
// computed again.
void RedisBackend::ChangeSchedule(Shard& s, const std::string& queue, const std::string& id,
                                  ScheduleChange change, int tries, Completion<Schedule> done) {
  ReadSchedule(s, queue, id, [this, &s, queue, id, change, tries, done](OpResult<ScheduleAt> r) {
    if (!r.ok()) return done(Fail<Schedule>(r));
    std::optional<Schedule> before;
    if (r->stored) before = r->stored->schedule;
    OpResult<std::optional<Schedule>> next = change(before, r->now_ms);
    if (!next.ok()) return done(Fail<Schedule>(next));
    if (!*next) return done(std::move(*before));
    const Schedule& after = **next;
    const core::ScheduleState& st = after.state;
    std::vector<std::string> argv{"schedput",
                                  id,
                                  r->stored ? r->stored->record : "",
                                  SpecBytes(after),
                                  std::to_string(st.created_at_ms),
                                  std::to_string(st.updated_at_ms),
                                  std::to_string(st.handled_through_ms),
                                  std::to_string(st.runs_done),
                                  st.paused ? "1" : "0",
                                  Opt(st.last_run_ms),
                                  st.last_job ? std::to_string(*st.last_job) : "",
                                  Opt(st.next_ms)};
    QueueScript(s, queue, std::move(argv),
                [this, &s, queue, id, change, tries, done,
                 after = std::move(**next)](OpResult<Reply> w) mutable {
                  if (!w.ok()) return done(Fail<Schedule>(w));
                  if (ParseScheduleWritten(*w)) return done(std::move(after));
                  if (tries <= 1) {
                    return done({OpStatus::kUnavailable, std::string(wire::kScheduleBusy)});
                  }
                  ChangeSchedule(s, queue, id, change, tries - 1, done);
                });
  });
}

void RedisBackend::DropIndexEntry(Shard& s, const std::string& id, const std::string& queue,
                                  std::function<void()> then) {
  s.client->Eval(index_drop_script_, {keys_.ScheduleIndex()}, {id, queue},
                 [then = std::move(then)](Reply) { then(); });
}

// ---- operations ------------------------------------------------------------------------------

// As the embedded backend: the spec is checked against now, an id kept by another queue is
// refused, a new one must fit under core::kMaxSchedules and its queue under --max-queues; then
// the schedule is placed (core::Placed) from what it was, if anything, in its queue's time.
void RedisBackend::PutSchedule(std::string id, core::ScheduleSpec spec, Completion<Schedule> done) {
  auto rule = core::RuleOf(spec, clock_.NowMs());
  if (!rule.ok()) return done({rule.status(), rule.message()});
  Post([this, id = std::move(id), spec = std::move(spec), done = std::move(done)](Shard& s) {
    const std::string queue = spec.queue;
    ScheduleChange place = [id, spec](const std::optional<Schedule>& before,
                                      int64_t now) -> OpResult<std::optional<Schedule>> {
      // Created `now`, when it has no start of its own; an existing one keeps its creation.
      auto timing = core::RuleOf(spec, now);
      if (!timing.ok()) return {timing.status(), timing.message()};
      std::optional<core::ScheduleState> was;
      if (before) {
        was = before->state;
        if (!spec.start_at_ms) timing->start_at_ms = was->created_at_ms;
      }
      return std::optional<Schedule>(Schedule{id, spec, core::Placed(*timing, was, now)});
    };
    auto store = [this, &s, queue, id, place, done] {
      ChangeSchedule(s, queue, id, place, kScheduleTries,
                     [this, &s, queue, done](OpResult<Schedule> r) {
                       if (!r.ok()) return done(std::move(r));
                       Created(s, 'q', queue, [done, r = std::move(r)] { done(std::move(r)); });
                     });
    };
    LookUpSchedule(s, id, [this, &s, queue, id, store, done](OpResult<IndexEntry> e) {
      if (!e.ok()) return done(Fail<Schedule>(e));
      if (e->queue == queue) return store();  // kept here (or left here by a stopped process)
      // A new id (or one another queue no longer holds): counted, then its queue made.
      auto claim = [this, &s, queue, id, store, done, count = e->count - (e->queue ? 1 : 0)] {
        if (count >= static_cast<int64_t>(core::kMaxSchedules)) {
          return done({OpStatus::kLimitReached, wire::TooManySchedules(core::kMaxSchedules)});
        }
        WithinCap(s, 'q', queue,
                  [this, &s, queue, id, store, done](std::optional<std::string> refusal) {
                    if (refusal) return done({OpStatus::kLimitReached, std::move(*refusal)});
                    const std::string index = keys_.ScheduleIndex();
                    s.client->Call(index, {"HSET", index, id, queue}, [store, done](Reply r) {
                      if (r.failed()) return done(Unavailable<Schedule>(r));
                      store();
                    });
                  });
      };
      if (!e->queue) return claim();
      const std::string other = *e->queue;
      ReadSchedule(s, other, id, [other, claim, done](OpResult<ScheduleAt> r) {
        if (!r.ok()) return done(Fail<Schedule>(r));
        if (r->stored) {
          return done({OpStatus::kConflict, wire::ScheduleQueueMoved(other)});
        }
        claim();
      });
    });
  });
}

void RedisBackend::GetSchedule(std::string id, Completion<Schedule> done) {
  Post([this, id = std::move(id), done = std::move(done)](Shard& s) {
    LookUpSchedule(s, id, [this, &s, id, done](OpResult<IndexEntry> e) {
      if (!e.ok()) return done(Fail<Schedule>(e));
      if (!e->queue) return done(UnknownSchedule());
      ReadSchedule(s, *e->queue, id, [done](OpResult<ScheduleAt> r) {
        if (!r.ok()) return done(Fail<Schedule>(r));
        if (!r->stored) return done(UnknownSchedule());
        done(std::move(r->stored->schedule));
      });
    });
  });
}

// The index read whole, then each queue it names asked for its schedules in one call.
void RedisBackend::ListSchedules(Completion<std::vector<Schedule>> done) {
  Post([this, done = std::move(done)](Shard& s) {
    const std::string index = keys_.ScheduleIndex();
    s.client->Call(index, {"HGETALL", index}, [this, &s, done](Reply r) {
      if (r.failed()) return done(Unavailable<std::vector<Schedule>>(r));
      std::map<std::string, std::vector<std::string>> by_queue;
      for (size_t k = 0; k + 1 < r.elements.size(); k += 2) {
        by_queue[r.elements[k + 1].str].push_back(r.elements[k].str);
      }
      struct Gather {
        std::vector<Schedule> all;
        size_t left = 0;
        std::optional<OpResult<std::vector<Schedule>>> failure;
      };
      auto g = std::make_shared<Gather>();
      g->left = by_queue.size();
      auto finish = [g, done] {
        if (g->failure) return done(std::move(*g->failure));
        std::sort(g->all.begin(), g->all.end(),
                  [](const Schedule& a, const Schedule& b) { return a.id < b.id; });
        done(std::move(g->all));
      };
      if (by_queue.empty()) return finish();
      for (auto& [queue, ids] : by_queue) {
        std::vector<std::string> argv{"schedules"};
        argv.insert(argv.end(), ids.begin(), ids.end());
        QueueScript(s, queue, std::move(argv), [g, finish](OpResult<Reply> q) {
          if (!q.ok()) {
            g->failure.emplace(q.status(), q.message());
          } else {
            for (auto& stored : ParseSchedules(*q).schedules) {
              if (stored) g->all.push_back(std::move(stored->schedule));
            }
          }
          if (--g->left == 0) finish();
        });
      }
    });
  });
}

// core::SetPaused, written only when it changes whether the schedule is paused.
void RedisBackend::PauseSchedule(std::string id, bool paused, Completion<Schedule> done) {
  Post([this, id = std::move(id), paused, done = std::move(done)](Shard& s) {
    LookUpSchedule(s, id, [this, &s, id, paused, done](OpResult<IndexEntry> e) {
      if (!e.ok()) return done(Fail<Schedule>(e));
      if (!e->queue) return done(UnknownSchedule());
      ScheduleChange pause = [paused](const std::optional<Schedule>& before,
                                      int64_t now) -> OpResult<std::optional<Schedule>> {
        if (!before) return {OpStatus::kUnknownSchedule, std::string(wire::kUnknownSchedule)};
        if (before->state.paused == paused) return std::optional<Schedule>();
        auto rule = KeptRule(*before);
        if (!rule.ok()) return {rule.status(), rule.message()};
        Schedule after = *before;
        core::SetPaused(after.state, *rule, paused, now);
        return std::optional<Schedule>(std::move(after));
      };
      ChangeSchedule(s, *e->queue, id, pause, kScheduleTries, done);
    });
  });
}

void RedisBackend::DeleteSchedule(std::string id, Completion<Schedule> done) {
  Post([this, id = std::move(id), done = std::move(done)](Shard& s) {
    LookUpSchedule(s, id, [this, &s, id, done](OpResult<IndexEntry> e) {
      if (!e.ok()) return done(Fail<Schedule>(e));
      if (!e->queue) return done(UnknownSchedule());
      const std::string queue = *e->queue;
      QueueScript(s, queue, {"scheddelete", id}, [this, &s, queue, id, done](OpResult<Reply> r) {
        if (!r.ok()) return done(Fail<Schedule>(r));
        std::optional<StoredSchedule> gone = ParseDeletedSchedule(*r);
        // Answered once the index forgets the id too, so a put that follows finds it free.
        DropIndexEntry(s, id, queue, [done, gone = std::move(gone)]() mutable {
          if (!gone) return done(UnknownSchedule());
          done(std::move(gone->schedule));
        });
      });
    });
  });
}

// ---- firing ----------------------------------------------------------------------------------

// core::PlanFire from the record `advance` answered, each run's job as core::RunJob makes it;
// queue.lua `schedfire` pushes the runs that fire (core::FiringRuns) and moves the state on
// (core::Fired), or does nothing when the record changed since.
void RedisBackend::FireDue(const std::string& queue, ScheduleRead due,
                           std::function<void(std::optional<Reply>)> done) {
  struct Firing {
    std::vector<StoredSchedule> due;
    size_t next = 0;
    int64_t now = 0;
    std::optional<Reply> last;
    bool failed = false;  // then the advance's answer stands: the sweeper comes back at once
    std::function<void()> step;
  };
  auto f = std::make_shared<Firing>();
  f->now = due.now_ms;
  for (auto& stored : due.schedules) {
    if (stored) f->due.push_back(std::move(*stored));
  }
  std::sort(f->due.begin(), f->due.end(), [](const StoredSchedule& a, const StoredSchedule& b) {
    return a.schedule.id < b.schedule.id;
  });
  // `step` holds `f` only weakly: the chain ends when the last answer is in.
  f->step = [this, queue, weak = std::weak_ptr<Firing>(f), done] {
    std::shared_ptr<Firing> f = weak.lock();
    if (!f) return;
    while (f->next < f->due.size()) {
      const StoredSchedule& stored = f->due[f->next++];
      const Schedule& schedule = stored.schedule;
      auto rule = KeptRule(schedule);
      if (!rule.ok()) {
        spdlog::warn("schedule '{}' cannot fire: {}", schedule.id, rule.message());
        continue;
      }
      const core::FirePlan plan = core::PlanFire(schedule, *rule, f->now);
      std::vector<std::string> argv{"schedfire",
                                    schedule.id,
                                    stored.record,
                                    std::to_string(f->now),
                                    std::to_string(plan.handled_through_ms),
                                    Opt(plan.next_if_runs_left),
                                    Opt(schedule.spec.max_runs),
                                    std::string(core::NameOf(schedule.spec.overlap)),
                                    schedule.spec.job.payload,
                                    std::to_string(schedule.spec.job.priority),
                                    std::to_string(schedule.spec.job.max_attempts),
                                    schedule.spec.job.group,
                                    std::to_string(plan.due.size())};
      for (int64_t t : plan.due) {
        core::JobSpec job = core::RunJob(schedule, t);
        argv.push_back(std::to_string(t));
        argv.push_back(std::to_string(job.delay_ms));
        argv.push_back(job.dedupe_key.value_or(core::RunKey(schedule.id, t)));
      }
      QueueScript(home(), queue, std::move(argv), [f](OpResult<Reply> r) {
        if (r.ok()) {
          f->last = std::move(*r);
        } else {
          f->failed = true;
          spdlog::warn("a schedule could not fire: {}", r.message());
        }
        f->step();
      });
      return;
    }
    done(f->failed ? std::nullopt : std::move(f->last));
  };
  f->step();
}

}  // namespace anteroom::store::redis
