// Queue snapshots: the state of core::Queue written field by field, and read back into a queue
// that behaves exactly like the original (same slab indices, delivery order, counters and
// random-number state). Indexes that follow from the jobs (ids, dedupe keys, deadline heaps,
// dead list, workers' job sets) are rebuilt rather than stored.
#include <algorithm>
#include <sstream>

#include "core/queue.h"
#include "core/room_types.h"

namespace anteroom::core {

namespace {
// 2 added groups and limits: a job's group id, and the ready jobs by group with the limits'
// state (core::GroupLine::Save) where 1 had one line of ready jobs. 3 added job state: each
// job's progress and log after its history, and at the end what the queue keeps of finished
// jobs and those it keeps.
constexpr uint32_t kQueueFormat = 3;
constexpr uint32_t kOldestQueueFormat = 1;

// A batch's callback: u8 has | str payload | i64 delay | i32 priority | opt-str dedupe |
// i32 max_attempts | str group
void SaveCallback(ByteWriter& out, const std::optional<JobSpec>& spec) {
  out.PutBool(spec.has_value());
  if (!spec) return;
  out.PutString(spec->payload);
  out.Put(spec->delay_ms);
  out.Put(spec->priority);
  out.PutBool(spec->dedupe_key.has_value());
  if (spec->dedupe_key) out.PutString(*spec->dedupe_key);
  out.Put(spec->max_attempts);
  out.PutString(spec->group);
}
void LoadCallback(ByteReader& in, std::optional<JobSpec>& spec) {
  if (!in.GetBool()) return;
  JobSpec s;
  s.payload = in.GetString();
  s.delay_ms = in.Get<int64_t>();
  s.priority = in.Get<int32_t>();
  if (in.GetBool()) s.dedupe_key = in.GetString();
  s.max_attempts = in.Get<int32_t>();
  s.group = in.GetString();
  spec = std::move(s);
}

// u32 n | n x (i32 attempt, str error, i64 at)
void SaveHistory(ByteWriter& out, const std::vector<FailedAttempt>& history) {
  out.Put<uint32_t>(static_cast<uint32_t>(history.size()));
  for (const FailedAttempt& f : history) {
    out.Put(f.attempt);
    out.PutString(f.error);
    out.Put(f.at_ms);
  }
}
void LoadHistory(ByteReader& in, std::vector<FailedAttempt>& history) {
  uint32_t n = in.Get<uint32_t>();
  if (n > in.remaining() / 16 || n > kKeptAttempts) in.Fail();
  for (uint32_t k = 0; k < n && !in.failed(); ++k) {
    FailedAttempt f;
    f.attempt = in.Get<int32_t>();
    f.error = in.GetString();
    f.at_ms = in.Get<int64_t>();
    history.push_back(std::move(f));
  }
}
}  // namespace

// opt-str progress | u32 n | n x (i64 at, str line) | i64 dropped | u32 deps | deps x (u64 id,
// u8 state, opt-str result) | i32 unresolved | u8 ignore failed
void Queue::SaveNotes(ByteWriter& out, const JobExtra* extra) {
  bool has = extra && extra->progress;
  out.PutBool(has);
  if (has) out.PutString(*extra->progress);
  out.Put<uint32_t>(extra ? static_cast<uint32_t>(extra->log.size()) : 0);
  if (extra) {
    for (const JobLogLine& line : extra->log) {
      out.Put(line.at_ms);
      out.PutString(line.text);
    }
  }
  out.Put<int64_t>(extra ? extra->log_dropped : 0);
  out.Put<uint32_t>(extra ? static_cast<uint32_t>(extra->deps.size()) : 0);
  if (extra) {
    for (const DependencyView& d : extra->deps) {
      out.Put(d.id);
      out.Put(d.state);
      out.PutBool(d.result.has_value());
      if (d.result) out.PutString(*d.result);
    }
  }
  out.Put<int32_t>(extra ? extra->unresolved : 0);
  out.PutBool(extra && extra->ignore_failed_deps);
  out.PutString(extra ? std::string_view(extra->batch) : std::string_view());
}

void Queue::LoadNotes(ByteReader& in, std::unique_ptr<JobExtra>& extra) {
  auto make = [&]() -> JobExtra& {
    if (!extra) extra = std::make_unique<JobExtra>();
    return *extra;
  };
  if (in.GetBool()) make().progress = in.GetString();
  uint32_t n = in.Get<uint32_t>();
  if (n > kKeptLogLines || n > in.remaining() / 12) in.Fail();
  for (uint32_t k = 0; k < n && !in.failed(); ++k) {
    JobLogLine line;
    line.at_ms = in.Get<int64_t>();
    line.text = in.GetString();
    make().log.push_back(std::move(line));
  }
  int64_t dropped = in.Get<int64_t>();
  if (dropped < 0) in.Fail();
  if (dropped > 0) make().log_dropped = dropped;
  uint32_t deps = in.Get<uint32_t>();
  if (deps > kMaxDependencies || deps > in.remaining() / 10) in.Fail();
  for (uint32_t k = 0; k < deps && !in.failed(); ++k) {
    DependencyView d;
    d.id = in.Get<JobId>();
    d.state = in.Get<DependencyState>();
    if (in.GetBool()) d.result = in.GetString();
    if (d.state > DependencyState::kMissing) in.Fail();
    make().deps.push_back(std::move(d));
  }
  int32_t unresolved = in.Get<int32_t>();
  bool ignore = in.GetBool();
  if (unresolved < 0 || unresolved > static_cast<int32_t>(deps)) in.Fail();
  if (unresolved > 0 || ignore) {
    make().unresolved = unresolved;
    make().ignore_failed_deps = ignore;
  }
  std::string batch = in.GetString();
  if (!batch.empty()) make().batch = std::move(batch);
}

void Queue::Save(ByteWriter& out) const {
  out.Put(kQueueFormat);
  out.Put(now_);
  std::ostringstream rng;
  rng << rng_;
  out.PutString(rng.str());

  out.Put<uint64_t>(slab_.size());
  for (size_t i = 0; i < slab_.size(); ++i) {
    const Job& job = slab_[i];
    out.Put(job.id);
    if (job.id == 0) continue;  // a free slot
    out.PutString(job.payload);
    out.PutBool(job.dedupe_key().has_value());
    if (job.dedupe_key()) out.PutString(*job.dedupe_key());
    out.Put(job.due);
    out.Put(job.order);
    out.Put(job.ticket);
    out.Put(job.delivery);
    out.Put(job.failed_at);
    out.Put(job.priority);
    out.Put(job.max_attempts);
    out.Put(job.attempt);
    out.Put(job.state);
    out.Put(job.worker);
    out.Put(job.group);
    SaveHistory(out, job.extra ? job.extra->history : std::vector<FailedAttempt>{});
    SaveNotes(out, job.extra.get());
  }
  // The free slots, ascending: the heap's order is its own business (stale entries and all);
  // the slots themselves decide which is reused next.
  std::vector<Index> free_slots;
  for (Index i = 0; i < slab_.size(); ++i) {
    if (slab_[i].id == 0) free_slots.push_back(i);
  }
  out.Put<uint64_t>(free_slots.size());
  for (Index i : free_slots) out.Put(i);

  // Live ready entries only, in delivery order (stale ones would be skipped anyway).
  line_.Save(out, [this](Index i, uint64_t ticket) { return LiveEntry(i, ticket); });
  out.Put(next_ticket_);

  out.Put<uint64_t>(workers_.size());
  for (const Worker& w : workers_) {
    out.PutString(w.name);
    out.Put(w.alive_until);
  }
  out.Put<uint64_t>(free_workers_.size());
  for (uint32_t w : free_workers_) out.Put(w);

  out.Put<uint64_t>(acked_order_.size());
  for (const auto& [until, id] : acked_order_) {
    out.Put(until);
    out.Put(id);
    auto it = acked_.find(id);
    out.Put<uint64_t>(it == acked_.end() ? 0 : it->second);
  }
  out.Put(next_id_);
  out.Put(next_delivery_);
  out.Put(next_order_);
  out.Put(head_order_);
  out.PutBool(paused_);
  out.Put(pushed_);
  out.Put(acked_count_);
  out.Put(nacked_);
  out.Put(expired_);
  out.Put(cancelled_);

  out.Put(keep_.count);
  out.Put(keep_.age_ms);
  out.Put<uint64_t>(finished_.size());
  out.Put(finished_front_);
  for (const FinishedJob& f : finished_) {
    out.Put(f.id);
    out.Put(f.state);
    out.Put(f.priority);
    out.Put(f.attempts);
    out.Put(f.max_attempts);
    out.Put(f.at);
    out.PutString(f.payload);
    out.PutString(f.group);
    out.PutBool(f.result.has_value());
    if (f.result) out.PutString(*f.result);
    SaveHistory(out, f.extra ? f.extra->history : std::vector<FailedAttempt>{});
    SaveNotes(out, f.extra.get());
  }
  out.Put<uint64_t>(batches_.size());
  for (const auto& [id, b] : batches_) {
    out.PutString(id);
    SaveCallback(out, b.spec.on_success);
    SaveCallback(out, b.spec.on_complete);
    SaveCallback(out, b.spec.on_dead);
    const BatchView& v = b.view;
    out.PutBool(v.sealed);
    out.PutBool(v.settled);
    for (int64_t n : {v.pending, v.acked, v.dead, v.cancelled, v.created_ms, v.settled_ms})
      out.Put(n);
    for (JobId j : {v.on_success_job, v.on_complete_job, v.on_dead_job}) out.Put(j);
  }
}

bool Queue::Restore(ByteReader& in) {
  uint32_t format = in.Get<uint32_t>();
  if (format < kOldestQueueFormat || format > kQueueFormat) return false;
  Queue& q = *this;
  q.now_ = in.Get<int64_t>();
  std::istringstream rng(std::string(in.GetView()));
  rng >> q.rng_;
  if (in.failed() || rng.fail() || q.now_ < 0 || q.now_ > kLatestTimeMs) return false;

  uint64_t n = in.GetCount(sizeof(JobId));
  q.slab_.resize(n);
  for (Index i = 0; i < n && !in.failed(); ++i) {
    Job& job = q.slab_[i];
    job.id = in.Get<JobId>();
    if (job.id == 0) continue;
    job.payload = in.GetString();
    if (in.GetBool()) job.Extra().dedupe_key = in.GetString();
    job.due = in.Get<int64_t>();
    job.order = in.Get<int64_t>();
    job.ticket = in.Get<uint64_t>();
    job.delivery = in.Get<uint64_t>();
    job.failed_at = in.Get<int64_t>();
    job.priority = in.Get<int32_t>();
    job.max_attempts = in.Get<int32_t>();
    job.attempt = in.Get<int32_t>();
    job.state = in.Get<State>();
    job.worker = in.Get<uint32_t>();
    if (format >= 2) job.group = in.Get<GroupLine::GroupId>();
    std::vector<FailedAttempt> history;
    LoadHistory(in, history);
    for (FailedAttempt& f : history) job.AddFailure(std::move(f));
    if (format >= 3) LoadNotes(in, job.extra);
    if (job.state > State::kWaiting || !q.by_id_.emplace(i).second) in.Fail();
    if (job.state == State::kWaiting && (!job.extra || job.extra->unresolved <= 0)) in.Fail();
  }
  uint64_t free_count = in.GetCount(sizeof(Index));
  for (uint64_t k = 0; k < free_count && !in.failed(); ++k) {
    Index i = in.Get<Index>();
    if (i >= n || q.slab_[i].id != 0) in.Fail();
    q.free_.push_back(i);
  }
  // Every free slot once: the listed ones are the slots without a job.
  std::sort(q.free_.begin(), q.free_.end());  // ascending: a min-heap already
  if (std::adjacent_find(q.free_.begin(), q.free_.end()) != q.free_.end() ||
      q.free_.size() + q.by_id_.size() != n) {
    in.Fail();
  }
  // Each job counted in its group (refs, in flight), before format 1's line is filled (its
  // jobs are all ungrouped, and the line takes their count in flight into account).
  auto count_jobs = [&] {
    for (Index i = 0; i < n && !in.failed(); ++i) {
      const Job& job = q.slab_[i];
      if (job.id != 0 && !q.line_.CountJob(job.group, job.state == State::kInflight)) in.Fail();
    }
  };
  auto ready_job = [&](Index i) {
    return i < n && q.slab_[i].id != 0 && q.slab_[i].state == State::kReady;
  };
  if (format >= 2) {
    bool placed = q.line_.Restore(in, [&](Index i) -> std::optional<std::pair<int32_t, uint64_t>> {
      if (!ready_job(i)) return std::nullopt;
      return std::pair{q.slab_[i].priority, q.slab_[i].ticket};
    });
    if (!placed) in.Fail();
    count_jobs();
  } else {
    count_jobs();
    uint64_t ready = in.GetCount(sizeof(Index));
    for (uint64_t k = 0; k < ready && !in.failed(); ++k) {
      Index i = in.Get<Index>();
      if (!ready_job(i)) {
        in.Fail();
      } else {
        const Job& job = q.slab_[i];
        q.line_.PushBack(GroupLine::kUngrouped, i, job.priority, job.order, job.ticket, q.now_);
      }
    }
  }
  q.line_.Restored();
  q.next_ticket_ = in.Get<uint64_t>();

  uint64_t workers = in.GetCount(4 + 8);
  q.workers_.resize(workers);
  for (Worker& w : q.workers_) {
    w.name = in.GetString();
    w.alive_until = in.Get<int64_t>();
  }
  uint64_t free_workers = in.GetCount(4);
  std::vector<bool> is_free(workers, false);
  for (uint64_t k = 0; k < free_workers && !in.failed(); ++k) {
    uint32_t w = in.Get<uint32_t>();
    if (w >= workers || is_free[w]) {
      in.Fail();
    } else {
      is_free[w] = true;
      q.free_workers_.push_back(w);
    }
  }
  if (in.failed()) return false;
  for (uint32_t w = 0; w < workers; ++w) {
    if (is_free[w]) continue;
    q.worker_index_.emplace(q.workers_[w].name, w);
    if (q.workers_[w].alive_until != 0) {
      q.heartbeats_.Set(w, static_cast<uint64_t>(q.workers_[w].alive_until));
    }
  }
  // The indexes that follow from the jobs.
  for (Index i = 0; i < n; ++i) {
    Job& job = q.slab_[i];
    if (job.id == 0) continue;
    if (job.dedupe_key()) q.dedupe_.emplace(*job.dedupe_key(), job.id);
    switch (job.state) {
      case State::kReady:
        break;
      case State::kDelayed:
        q.delayed_.Set(i, static_cast<uint64_t>(job.due));
        break;
      case State::kInflight:
        if (job.worker >= workers || is_free[job.worker]) return false;
        q.leases_.Set(i, static_cast<uint64_t>(job.due));
        q.workers_[job.worker].jobs.insert(i);
        break;
      case State::kDead:
        q.dead_.emplace(job.failed_at, job.id);
        break;
      case State::kWaiting:
        ++q.waiting_;
        for (const DependencyView& d : job.extra->deps) {
          if (d.state == DependencyState::kPending) q.dependents_[d.id].push_back(job.id);
        }
        break;
    }
  }

  uint64_t acked = in.GetCount(24);
  for (uint64_t k = 0; k < acked && !in.failed(); ++k) {
    int64_t until = in.Get<int64_t>();
    JobId id = in.Get<JobId>();
    uint64_t delivery = in.Get<uint64_t>();
    q.acked_order_.emplace_back(until, id);
    q.acked_[id] = delivery;
  }
  q.next_id_ = in.Get<JobId>();
  q.next_delivery_ = in.Get<uint64_t>();
  q.next_order_ = in.Get<int64_t>();
  q.head_order_ = in.Get<int64_t>();
  q.paused_ = in.GetBool();
  q.pushed_ = in.Get<int64_t>();
  q.acked_count_ = in.Get<int64_t>();
  q.nacked_ = in.Get<int64_t>();
  q.expired_ = in.Get<int64_t>();
  q.cancelled_ = in.Get<int64_t>();
  if (format < 3) return !in.failed();

  q.keep_.count = in.Get<int64_t>();
  q.keep_.age_ms = in.Get<int64_t>();
  if (q.keep_.count < 0 || q.keep_.count > kMaxKeepCount || q.keep_.age_ms < 0 ||
      q.keep_.age_ms > kMaxKeepAgeMs) {
    return false;
  }
  uint64_t finished = in.GetCount(8 + 1 + 12 + 8 + 4 + 4 + 1 + 4 + 1 + 4 + 8);
  q.finished_front_ = in.Get<uint64_t>();
  for (uint64_t k = 0; k < finished && !in.failed(); ++k) {
    FinishedJob f;
    f.id = in.Get<JobId>();
    f.state = in.Get<JobState>();
    f.priority = in.Get<int32_t>();
    f.attempts = in.Get<int32_t>();
    f.max_attempts = in.Get<int32_t>();
    f.at = in.Get<int64_t>();
    f.payload = in.GetString();
    f.group = in.GetString();
    if (in.GetBool()) f.result = in.GetString();
    std::vector<FailedAttempt> history;
    LoadHistory(in, history);
    if (!history.empty()) {
      f.extra = std::make_unique<JobExtra>();
      f.extra->history = std::move(history);
    }
    LoadNotes(in, f.extra);
    if ((f.state != JobState::kAcked && f.state != JobState::kCancelled) || f.at < 0 ||
        f.at > kLatestTimeMs || !q.finished_seq_.emplace(f.id, q.finished_front_ + k).second) {
      in.Fail();
    }
    q.finished_.push_back(std::move(f));
  }
  uint64_t batches = in.GetCount(4 + 3 + 2 + 6 * 8 + 3 * 8);
  for (uint64_t k = 0; k < batches && !in.failed(); ++k) {
    std::string id = in.GetString();
    Batch b;
    LoadCallback(in, b.spec.on_success);
    LoadCallback(in, b.spec.on_complete);
    LoadCallback(in, b.spec.on_dead);
    BatchView& v = b.view;
    v.id = id;
    v.sealed = in.GetBool();
    v.settled = in.GetBool();
    for (int64_t* n : {&v.pending, &v.acked, &v.dead, &v.cancelled, &v.created_ms, &v.settled_ms}) {
      *n = in.Get<int64_t>();
    }
    for (JobId* j : {&v.on_success_job, &v.on_complete_job, &v.on_dead_job}) *j = in.Get<JobId>();
    // Times are added to (a batch goes at settled + age): out of range is damage, not a time.
    for (int64_t t : {v.created_ms, v.settled_ms}) {
      if (t < 0 || t > kLatestTimeMs) in.Fail();
    }
    if (v.settled) {
      q.settled_batches_.emplace_back(v.settled_ms, id);
    } else {
      ++q.open_batches_;
    }
    if (id.empty() || !q.batches_.emplace(std::move(id), std::move(b)).second) in.Fail();
  }
  std::sort(q.settled_batches_.begin(), q.settled_batches_.end());
  return !in.failed();
}

}  // namespace anteroom::core
