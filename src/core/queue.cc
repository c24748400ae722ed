#include "core/queue.h"

#include <openssl/crypto.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <functional>

#include "core/lease_codec.h"

namespace anteroom::core {

std::string BoundedText(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  std::string marker = " [truncated: " + std::to_string(text.size()) + " bytes]";
  size_t keep = max - marker.size();
  // Back to the start of a character: a continuation byte is 10xxxxxx.
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return std::string(text.substr(0, keep)) + marker;
}

std::string BoundedError(std::string_view error) { return BoundedText(error, kMaxErrorBytes); }

std::string BoundedLogLine(std::string_view line) { return BoundedText(line, kMaxLogLineBytes); }

const char* ToString(DependencyState state) {
  switch (state) {
    case DependencyState::kPending:
      return "pending";
    case DependencyState::kAcked:
      return "acked";
    case DependencyState::kDead:
      return "dead";
    case DependencyState::kCancelled:
      return "cancelled";
    case DependencyState::kMissing:
      return "missing";
  }
  return "missing";
}

const char* ToString(JobState state) {
  switch (state) {
    case JobState::kWaitingDeps:
      return "waiting_deps";
    case JobState::kDelayed:
      return "delayed";
    case JobState::kReady:
      return "ready";
    case JobState::kInflight:
      return "inflight";
    case JobState::kAcked:
      return "acked";
    case JobState::kDead:
      return "dead";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "ready";
}

const char* ToString(LeaseOutcome outcome) {
  switch (outcome) {
    case LeaseOutcome::kOk:
      return "ok";
    case LeaseOutcome::kLeaseLost:
      return "lease_lost";
    case LeaseOutcome::kInvalidLease:
      return "invalid_lease";
  }
  return "invalid_lease";
}

Queue::Queue(std::string name, const Hmac& lease_key, int64_t now_ms, uint64_t seed)
    : name_(std::move(name)), lease_mac_(lease_key), now_(now_ms), rng_(seed) {}

// ---- leases --------------------------------------------------------------------------------

std::string Queue::LeaseFor(JobId id, uint64_t delivery) const {
  return EncodeLease(lease_mac_, name_, id, delivery);
}

std::optional<LeaseRef> Queue::ParseLease(std::string_view lease) const {
  return DecodeLease(lease_mac_, name_, lease);
}

std::optional<Queue::Index> Queue::Current(LeaseRef lease, LeaseOutcome& outcome,
                                           bool& acked_before) {
  acked_before = false;
  outcome = LeaseOutcome::kLeaseLost;
  auto it = by_id_.find(lease.id);
  if (it != by_id_.end()) {
    const Job& job = slab_[*it];
    if (job.state == State::kInflight && job.delivery == lease.delivery) {
      outcome = LeaseOutcome::kOk;
      return *it;
    }
    return std::nullopt;
  }
  auto acked = acked_.find(lease.id);
  if (acked != acked_.end() && acked->second == lease.delivery) {
    outcome = LeaseOutcome::kOk;
    acked_before = true;
  }
  return std::nullopt;
}

// ---- bookkeeping ---------------------------------------------------------------------------

Queue::Index Queue::NewJob() {
  while (!free_.empty()) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());
    Index i = free_.back();
    free_.pop_back();
    if (i < slab_.size() && slab_[i].id == 0) {
      slab_[i] = Job{};
      return i;  // the caller gives it its id before asking for another
    }
  }
  Index i = static_cast<Index>(slab_.size());
  slab_.emplace_back();
  return i;
}

void Queue::FreeJob(Index i) {
  Job& job = slab_[i];
  if (job.dedupe_key()) dedupe_.erase(*job.dedupe_key());
  by_id_.erase(job.id);
  line_.Unref(job.group);
  job = Job{};
  free_.push_back(i);
  std::push_heap(free_.begin(), free_.end(), std::greater<>());
  if (i + 1 == slab_.size()) TrimSlab();
}

void Queue::TrimSlab() {
  size_t n = slab_.size();
  while (n > 0 && slab_[n - 1].id == 0) --n;
  if (n == slab_.size()) return;
  slab_.Truncate(n);
  delayed_.ForgetMembersFrom(static_cast<Index>(n));
  leases_.ForgetMembersFrom(static_cast<Index>(n));
  // Free slots inside the slab: n minus the jobs. Stale entries go once they outnumber them.
  size_t free_inside = n - by_id_.size();
  if (free_.size() > 2 * free_inside + 64) {
    std::erase_if(free_, [&](Index i) { return i >= n || slab_[i].id != 0; });
    std::sort(free_.begin(), free_.end());  // ascending: a min-heap already
    free_.erase(std::unique(free_.begin(), free_.end()), free_.end());
    free_.shrink_to_fit();
  }
  if (by_id_.size() * 8 < by_id_.bucket_count() && by_id_.bucket_count() > 1024) {
    by_id_.rehash(0);
  }
}

void Queue::MakeReady(Index i, bool at_head, int64_t since) {
  Job& job = slab_[i];
  job.state = State::kReady;
  job.due = since;
  job.order = at_head ? head_order_-- : next_order_++;
  job.ticket = next_ticket_++;
  if (at_head) {
    line_.PushFront(job.group, i, job.priority, job.order, job.ticket, now_);
  } else {
    line_.PushBack(job.group, i, job.priority, job.order, job.ticket, now_);
  }
}

void Queue::MakeDelayed(Index i, int64_t until) {
  Job& job = slab_[i];
  job.state = State::kDelayed;
  job.due = until;
  job.order = next_order_++;  // jobs due at the same ms become ready in this order (FIFO)
  delayed_.Set(i, static_cast<uint64_t>(until));
}

void Queue::EndLease(Index i) {
  Job& job = slab_[i];
  if (leases_.Contains(i)) leases_.Remove(i);
  line_.Finished(job.group, now_);
  if (job.worker != kNoWorker) {
    uint32_t w = job.worker;
    workers_[w].jobs.erase(i);
    job.worker = kNoWorker;
    ForgetWorkerIfIdle(w);
  }
}

void Queue::Bury(Index i, std::string_view error, int64_t now) {
  Job& job = slab_[i];
  job.state = State::kDead;
  job.failed_at = now;
  dead_.emplace(now, job.id);
  if (noting_) buried_.push_back(Buried{job.id, now, std::string(error)});
  JobId id = job.id;
  if (job.extra && !job.extra->batch.empty()) BatchJobMoved(job.extra->batch, JobState::kDead);
  Settled(id, DependencyState::kDead, {});
}

// A delivery that ended without an ack: the lease ran out, or its worker died or was released.
void Queue::Fail(Index i, std::string_view error, int64_t now, bool expired) {
  Job& job = slab_[i];
  EndLease(i);
  job.AddFailure({job.attempt, std::string(error), now});
  if (expired) ++expired_;
  if (job.attempt >= job.max_attempts) return Bury(i, error, now);
  // Ready since its lease ran out, or now when it was taken back before that.
  MakeReady(i, /*at_head=*/true, std::min(job.due, now_));
}

uint32_t Queue::WorkerFor(std::string_view name) {
  auto it = worker_index_.find(std::string(name));
  if (it != worker_index_.end()) return it->second;
  uint32_t w;
  if (!free_workers_.empty()) {
    w = free_workers_.back();
    free_workers_.pop_back();
  } else {
    w = static_cast<uint32_t>(workers_.size());
    workers_.emplace_back();
  }
  workers_[w] = Worker{std::string(name), 0, {}};
  worker_index_.emplace(std::string(name), w);
  return w;
}

void Queue::ForgetWorkerIfIdle(uint32_t w) {
  Worker& worker = workers_[w];
  if (!worker.jobs.empty() || worker.alive_until != 0) return;
  worker_index_.erase(worker.name);
  worker = Worker{};
  free_workers_.push_back(w);
}

void Queue::WorkerDied(uint32_t w, int64_t now) {
  Worker& worker = workers_[w];
  std::string error = "worker '" + worker.name + "' stopped sending heartbeats";
  worker.alive_until = 0;
  if (heartbeats_.Contains(w)) heartbeats_.Remove(w);
  std::vector<Index> jobs(worker.jobs.begin(), worker.jobs.end());
  std::sort(jobs.begin(), jobs.end(), [&](Index a, Index b) { return KeyOf(a) < KeyOf(b); });
  // Each goes to the head: the last first, so together they keep the order they had.
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) Fail(*it, error, now, /*expired=*/true);
  if (jobs.empty()) ForgetWorkerIfIdle(w);
}

void Queue::ForgetOldAcks(int64_t now) {
  while (!acked_order_.empty() &&
         (acked_order_.front().first <= now || acked_order_.size() > kAckMemoryMax)) {
    acked_.erase(acked_order_.front().second);
    acked_order_.pop_front();
  }
  // A burst of acks remembered for an hour must not keep its table once forgotten.
  if (acked_.size() * 8 < acked_.bucket_count() && acked_.bucket_count() > 1024) acked_.rehash(0);
}

// ---- time ----------------------------------------------------------------------------------

void Queue::Advance(int64_t now_ms) {
  int64_t target = std::max(now_ms, now_);
  while (true) {
    uint64_t d = delayed_.empty() ? UINT64_MAX : delayed_.Top().key;
    uint64_t l = leases_.empty() ? UINT64_MAX : leases_.Top().key;
    uint64_t h = heartbeats_.empty() ? UINT64_MAX : heartbeats_.Top().key;
    uint64_t next = std::min({d, l, h});
    if (next == UINT64_MAX || static_cast<int64_t>(next) > target) break;
    int64_t when = std::max(static_cast<int64_t>(next), now_);
    now_ = when;
    if (d == next) {  // every job due at this ms, in the order it was delayed
      std::vector<Index> due;
      while (!delayed_.empty() && delayed_.Top().key == next) {
        due.push_back(delayed_.Top().member);
        delayed_.Remove(due.back());
      }
      std::sort(due.begin(), due.end(),
                [&](Index a, Index b) { return slab_[a].order < slab_[b].order; });
      for (Index i : due) MakeReady(i, /*at_head=*/false, slab_[i].due);
    } else if (l == next) {  // every lease running out at this ms
      std::vector<Index> lost;
      while (!leases_.empty() && leases_.Top().key == next) {
        lost.push_back(leases_.Top().member);
        leases_.Remove(lost.back());
      }
      std::sort(lost.begin(), lost.end(), [&](Index a, Index b) { return KeyOf(a) < KeyOf(b); });
      for (auto it = lost.rbegin(); it != lost.rend(); ++it) {
        Fail(*it, "lease expired", when, /*expired=*/true);  // to the head, keeping their order
      }
    } else {  // every worker silent since this ms, by name (as Redis orders a sorted set's ties)
      std::vector<uint32_t> silent;
      while (!heartbeats_.empty() && heartbeats_.Top().key == next) {
        silent.push_back(heartbeats_.Top().member);
        heartbeats_.Remove(silent.back());  // WorkerDied finds it gone
      }
      std::sort(silent.begin(), silent.end(),
                [&](uint32_t a, uint32_t b) { return workers_[a].name < workers_[b].name; });
      for (uint32_t w : silent) WorkerDied(w, when);
    }
  }
  now_ = target;
  ForgetOldAcks(now_);
  ForgetFinished(now_);
  ForgetSettledBatches(now_);
  line_.Sweep(now_);
}

int64_t Queue::NextDeadline() const {
  uint64_t next = UINT64_MAX;
  if (!delayed_.empty()) next = std::min(next, delayed_.Top().key);
  if (!leases_.empty()) next = std::min(next, leases_.Top().key);
  if (!heartbeats_.empty()) next = std::min(next, heartbeats_.Top().key);
  return next == UINT64_MAX ? INT64_MAX : static_cast<int64_t>(next);
}

// ---- operations ----------------------------------------------------------------------------

std::vector<PushResult> Queue::Push(const std::vector<JobSpec>& jobs, int64_t now_ms) {
  Advance(now_ms);
  std::vector<PushResult> results;
  results.reserve(jobs.size());
  for (const JobSpec& spec : jobs) PushJob(spec, results);
  return results;
}

void Queue::PushJob(const JobSpec& spec, std::vector<PushResult>& results) {
  if (spec.dedupe_key) {
    auto hit = dedupe_.find(*spec.dedupe_key);
    if (hit != dedupe_.end()) {
      results.push_back({hit->second, false});
      return;
    }
  }
  Index i = NewJob();
  Job& job = slab_[i];
  job.id = next_id_++;
  job.payload = spec.payload;
  if (spec.dedupe_key) job.Extra().dedupe_key = *spec.dedupe_key;
  job.priority = spec.priority;
  job.max_attempts = spec.max_attempts;
  job.group = line_.Ref(spec.group);
  by_id_.emplace(i);
  if (spec.dedupe_key) dedupe_.emplace(*spec.dedupe_key, job.id);
  ++pushed_;
  results.push_back({job.id, true});
  if (!spec.batch.empty()) {
    auto b = batches_.find(spec.batch);
    if (b != batches_.end() && !b->second.view.sealed) {  // else the caller did not check
      job.Extra().batch = spec.batch;
      ++b->second.view.pending;
    }
  }
  if (!spec.depends_on.empty()) {
    JobExtra& x = job.Extra();
    x.ignore_failed_deps = spec.ignore_failed_dependencies;
    std::optional<DependencyView> failed;
    for (JobId dep : spec.depends_on) {
      if (std::any_of(x.deps.begin(), x.deps.end(), [&](const auto& d) { return d.id == dep; }))
        continue;
      // Only an older job can be waited on: no cycle, and never the job itself.
      DependencyView d =
          dep < job.id ? DependencyNow(dep) : DependencyView{dep, DependencyState::kMissing, {}};
      x.deps.push_back(d);
      if (d.state == DependencyState::kPending) {
        ++x.unresolved;
      } else if (d.state != DependencyState::kAcked && !failed) {
        failed = d;
      }
    }
    if (failed && !x.ignore_failed_deps) {
      std::string error =
          "dependency " + std::to_string(failed->id) + " is " + ToString(failed->state);
      job.AddFailure({0, error, now_});
      Bury(i, error, now_);
      return;
    }
    if (x.unresolved > 0) {
      job.state = State::kWaiting;
      job.due = now_ + spec.delay_ms;
      ++waiting_;
      for (const DependencyView& d : x.deps) {
        if (d.state == DependencyState::kPending) dependents_[d.id].push_back(job.id);
      }
      return;
    }
  }
  if (spec.delay_ms > 0) {
    MakeDelayed(i, now_ + spec.delay_ms);
  } else {
    MakeReady(i, /*at_head=*/false, now_);
  }
}

std::vector<Delivery> Queue::Fetch(std::string_view worker, size_t max, int64_t lease_ms,
                                   int64_t now_ms) {
  Advance(now_ms);
  std::vector<Delivery> out;
  if (paused_ || max == 0 || !line_.CanTake(now_)) return out;
  uint32_t w = WorkerFor(worker);
  auto live = [this](Index j, uint64_t ticket) { return LiveEntry(j, ticket); };
  auto order_of = [this](Index j) { return slab_[j].order; };
  while (out.size() < max) {
    std::optional<Index> i = line_.Take(now_, live, order_of);
    if (!i) break;
    out.push_back(LeaseTo(*i, w, lease_ms));
  }
  return out;
}

std::vector<Delivery> Queue::Reclaim(std::string_view worker, size_t max, int64_t lease_ms,
                                     int64_t now_ms, size_t& taken_back) {
  Advance(now_ms);
  taken_back = 0;
  std::vector<Delivery> out;
  auto it = worker_index_.find(std::string(worker));
  if (it == worker_index_.end()) return out;
  const Worker& held = workers_[it->second];
  std::vector<Index> jobs(held.jobs.begin(), held.jobs.end());
  std::sort(jobs.begin(), jobs.end(), [&](Index a, Index b) { return KeyOf(a) < KeyOf(b); });
  taken_back = jobs.size();
  if (jobs.empty()) return out;
  // Released first, exactly as ReleaseWorker does (the last first, so together they keep their
  // order), but the worker is alive: its heartbeat deadline stands.
  std::string error = "reclaimed: worker '" + std::string(worker) + "' started again";
  for (auto j = jobs.rbegin(); j != jobs.rend(); ++j) Fail(*j, error, now_, /*expired=*/true);
  if (paused_) return out;
  for (Index i : jobs) {
    if (out.size() >= max) break;
    if (slab_[i].state != State::kReady) continue;  // dead: attempts used up
    // Held back by its limits: it waits, ready, at the head of its group (LeaseTo makes its
    // entry stale when it is taken).
    if (!line_.TakeThis(slab_[i].group, now_)) continue;
    // Looked up per job: the release may have forgotten the worker, and one left with no job
    // must not be made again.
    out.push_back(LeaseTo(i, WorkerFor(worker), lease_ms));
  }
  return out;
}

Delivery Queue::LeaseTo(Index i, uint32_t w, int64_t lease_ms) {
  Job& job = slab_[i];
  job.ticket = 0;
  job.state = State::kInflight;
  job.attempt += 1;
  job.delivery = next_delivery_++;
  int64_t ready_since = job.due;
  job.due = now_ + lease_ms;
  job.failed_at = now_;
  job.worker = w;
  workers_[w].jobs.insert(i);
  leases_.Set(i, static_cast<uint64_t>(job.due));
  return {job.id,  job.payload,  job.attempt,           LeaseFor(job.id, job.delivery),
          job.due, job.priority, line_.Name(job.group), ready_since};
}

LeaseOutcome Queue::Ack(std::string_view lease, int64_t now_ms, std::string_view result) {
  std::optional<LeaseRef> ref = ParseLease(lease);
  if (!ref) {
    Advance(now_ms);
    return LeaseOutcome::kInvalidLease;
  }
  return Ack(*ref, now_ms, result);
}

LeaseOutcome Queue::Nack(std::string_view lease, std::optional<int64_t> delay_ms,
                         std::string_view error, int64_t now_ms) {
  std::optional<LeaseRef> ref = ParseLease(lease);
  if (!ref) {
    Advance(now_ms);
    return LeaseOutcome::kInvalidLease;
  }
  return Nack(*ref, delay_ms, error, now_ms);
}

LeaseOutcome Queue::Extend(std::string_view lease, int64_t lease_ms, int64_t now_ms) {
  std::optional<LeaseRef> ref = ParseLease(lease);
  if (!ref) {
    Advance(now_ms);
    return LeaseOutcome::kInvalidLease;
  }
  return Extend(*ref, lease_ms, now_ms);
}

LeaseOutcome Queue::Ack(LeaseRef lease, int64_t now_ms, std::string_view result, int64_t* ran_ms) {
  Advance(now_ms);
  LeaseOutcome outcome;
  bool acked_before;
  std::optional<Index> i = Current(lease, outcome, acked_before);
  if (!i) return outcome;
  Job& job = slab_[*i];
  // 0: leased before jobs kept their lease's start (a snapshot of an older version).
  if (ran_ms && job.failed_at > 0) *ran_ms = now_ - job.failed_at;
  EndLease(*i);
  acked_[job.id] = job.delivery;
  acked_order_.emplace_back(now_ + kAckMemoryMs, job.id);
  ++acked_count_;
  JobId id = job.id;
  std::string batch = job.extra ? job.extra->batch : std::string();
  Finish(*i, JobState::kAcked, result);
  FreeJob(*i);
  if (!batch.empty()) BatchJobMoved(batch, JobState::kAcked);
  Settled(id, DependencyState::kAcked, result);
  return LeaseOutcome::kOk;
}

LeaseOutcome Queue::SetProgress(LeaseRef lease, std::string_view progress, int64_t now_ms) {
  Advance(now_ms);
  LeaseOutcome outcome;
  bool acked_before;
  std::optional<Index> i = Current(lease, outcome, acked_before);
  if (!i) return acked_before ? LeaseOutcome::kLeaseLost : outcome;
  slab_[*i].Extra().progress = std::string(progress);
  return LeaseOutcome::kOk;
}

LeaseOutcome Queue::AppendLog(LeaseRef lease, const std::vector<std::string>& lines,
                              int64_t now_ms) {
  Advance(now_ms);
  LeaseOutcome outcome;
  bool acked_before;
  std::optional<Index> i = Current(lease, outcome, acked_before);
  if (!i) return acked_before ? LeaseOutcome::kLeaseLost : outcome;
  JobExtra& extra = slab_[*i].Extra();
  for (const std::string& line : lines) extra.log.push_back({now_, BoundedLogLine(line)});
  if (extra.log.size() > kKeptLogLines) {
    size_t drop = extra.log.size() - kKeptLogLines;
    extra.log.erase(extra.log.begin(), extra.log.begin() + static_cast<ptrdiff_t>(drop));
    extra.log_dropped += static_cast<int64_t>(drop);
  }
  return LeaseOutcome::kOk;
}

// ---- dependencies --------------------------------------------------------------------------

DependencyView Queue::DependencyNow(JobId dep) const {
  if (auto it = by_id_.find(dep); it != by_id_.end()) {
    bool dead = slab_[*it].state == State::kDead;
    return {dep, dead ? DependencyState::kDead : DependencyState::kPending, {}};
  }
  if (auto seq = finished_seq_.find(dep); seq != finished_seq_.end()) {
    const FinishedJob& f = finished_[seq->second - finished_front_];
    if (f.state == JobState::kAcked) return {dep, DependencyState::kAcked, f.result};
    return {dep, DependencyState::kCancelled, {}};
  }
  // Acked, and still remembered as such (an hour) though no longer kept: its result is gone.
  if (acked_.contains(dep)) return {dep, DependencyState::kAcked, {}};
  return {dep, DependencyState::kMissing, {}};
}

void Queue::StopWaiting(Index i) {
  Job& job = slab_[i];
  --waiting_;
  if (job.due > now_) {
    MakeDelayed(i, job.due);
  } else {
    MakeReady(i, /*at_head=*/false, now_);
  }
}

// Jobs settle in the order they did; the jobs waiting on one are told in id order (their push
// order), so the order they become ready in is the same after a replay or on Redis.
void Queue::Settled(JobId id, DependencyState outcome, std::string_view result) {
  if (dependents_.empty()) return;  // the common case: nobody waits on anything
  settling_.emplace_back(id, outcome, std::string(result));
  if (in_settled_) return;  // the loop below is running: it will come to it
  in_settled_ = true;
  for (size_t next = 0; next < settling_.size(); ++next) {
    auto [dep, state, res] = settling_[next];
    auto it = dependents_.find(dep);
    if (it == dependents_.end()) continue;
    std::vector<JobId> waiting = std::move(it->second);
    dependents_.erase(it);
    std::sort(waiting.begin(), waiting.end());
    for (JobId w : waiting) {
      auto j = by_id_.find(w);
      if (j == by_id_.end() || slab_[*j].state != State::kWaiting) continue;  // cancelled
      Index i = *j;
      JobExtra& x = *slab_[i].extra;
      for (DependencyView& d : x.deps) {
        if (d.id != dep || d.state != DependencyState::kPending) continue;
        d.state = state;
        if (!res.empty()) d.result = res;
      }
      --x.unresolved;
      if (state != DependencyState::kAcked && !x.ignore_failed_deps) {
        --waiting_;
        std::string error = "dependency " + std::to_string(dep) + " is " + ToString(state);
        slab_[i].AddFailure({0, error, now_});
        Bury(i, error, now_);  // its own dependents are told next
      } else if (x.unresolved == 0) {
        StopWaiting(i);
      }
    }
  }
  settling_.clear();
  in_settled_ = false;
}

std::optional<std::vector<DependencyView>> Queue::Dependencies(JobId id, int64_t now_ms) {
  Advance(now_ms);
  const JobExtra* x = nullptr;
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    x = slab_[*it].extra.get();
  } else if (auto seq = finished_seq_.find(id); seq != finished_seq_.end()) {
    x = finished_[seq->second - finished_front_].extra.get();
  } else {
    return std::nullopt;
  }
  return x ? x->deps : std::vector<DependencyView>{};
}

// ---- batches -------------------------------------------------------------------------------

BatchOutcome Queue::CreateBatch(std::string_view id, BatchSpec spec, int64_t now_ms) {
  Advance(now_ms);
  if (batches_.find(id) != batches_.end()) return BatchOutcome::kExists;
  if (open_batches_ >= kMaxOpenBatches) return BatchOutcome::kTooMany;
  Batch& b = batches_[std::string(id)];
  b.spec = std::move(spec);
  b.view.id = std::string(id);
  b.view.created_ms = now_;
  ++open_batches_;
  return BatchOutcome::kOk;
}

BatchOutcome Queue::SealBatch(std::string_view id, int64_t now_ms) {
  Advance(now_ms);
  auto it = batches_.find(id);
  if (it == batches_.end()) return BatchOutcome::kUnknown;
  if (!it->second.view.sealed) {
    it->second.view.sealed = true;
    SettleBatchIfDone(it->second);
  }
  return BatchOutcome::kOk;
}

std::optional<BatchView> Queue::GetBatch(std::string_view id, int64_t now_ms) {
  Advance(now_ms);
  auto it = batches_.find(id);
  if (it == batches_.end()) return std::nullopt;
  return it->second.view;
}

BatchOutcome Queue::CanJoin(std::string_view id, int64_t now_ms) const {
  auto it = batches_.find(id);
  if (it == batches_.end() || BatchForgettable(it->second.view, std::max(now_ms, now_))) {
    return BatchOutcome::kUnknown;
  }
  return it->second.view.sealed ? BatchOutcome::kSealed : BatchOutcome::kOk;
}

void Queue::BatchJobMoved(const std::string& batch, JobState state) {
  auto it = batches_.find(batch);
  // A batch is kept while any job of it is left (ForgetSettledBatches), so it is always found;
  // a snapshot made by an older build may still name one forgotten.
  if (it == batches_.end()) return;
  Batch& b = it->second;
  BatchView& v = b.view;
  bool was_settled = v.settled;  // and this job was requeued from the dead since
  switch (state) {
    case JobState::kAcked:
      --v.pending;
      ++v.acked;
      break;
    case JobState::kCancelled:
      --v.pending;
      ++v.cancelled;
      break;
    case JobState::kDead:
      --v.pending;
      ++v.dead;
      if (b.spec.on_dead && v.on_dead_job == 0) v.on_dead_job = PushCallback(*b.spec.on_dead);
      break;
    case JobState::kReady:  // requeued from the dead
      --v.dead;
      ++v.pending;
      return;
    default:
      return;
  }
  if (was_settled) {
    // Past its age with nothing left, it goes now (ForgetSettledBatches let it stay for this
    // job).
    if (BatchForgettable(v, now_)) batches_.erase(it);
    return;
  }
  SettleBatchIfDone(b);
}

void Queue::SettleBatchIfDone(Batch& b) {
  BatchView& v = b.view;
  if (v.settled || !v.sealed || v.pending > 0) return;
  v.settled = true;
  v.settled_ms = now_;
  --open_batches_;
  settled_batches_.emplace_back(now_, v.id);
  if (b.spec.on_complete) v.on_complete_job = PushCallback(*b.spec.on_complete);
  if (b.spec.on_success && v.dead == 0 && v.cancelled == 0) {
    v.on_success_job = PushCallback(*b.spec.on_success);
  }
}

JobId Queue::PushCallback(const JobSpec& spec) {
  std::vector<PushResult> results;
  PushJob(spec, results);
  return results.empty() ? 0 : results[0].id;
}

bool Queue::BatchForgettable(const BatchView& v, int64_t now) const {
  return v.settled && v.settled_ms + keep_.age_ms <= now && v.pending == 0 && v.dead == 0;
}

void Queue::ForgetSettledBatches(int64_t now) {
  while (!settled_batches_.empty() && settled_batches_.front().first + keep_.age_ms <= now) {
    auto it = batches_.find(settled_batches_.front().second);
    if (it != batches_.end() && BatchForgettable(it->second.view, now)) batches_.erase(it);
    settled_batches_.pop_front();
  }
}

// ---- finished jobs -------------------------------------------------------------------------

void Queue::Finish(Index i, JobState state, std::string_view result) {
  if (keep_.count <= 0) return;
  Job& job = slab_[i];
  FinishedJob f;
  f.id = job.id;
  f.state = state;
  f.priority = job.priority;
  f.attempts = job.attempt;
  f.max_attempts = job.max_attempts;
  f.at = now_;
  f.payload = std::move(job.payload);
  f.group = std::string(line_.Name(job.group));
  f.extra = std::move(job.extra);
  if (f.extra && f.extra->dedupe_key) {  // FreeJob will not see it: the job's extra moved here
    dedupe_.erase(*f.extra->dedupe_key);
    f.extra->dedupe_key.reset();
  }
  if (!result.empty()) f.result = std::string(result);
  finished_seq_[f.id] = finished_front_ + finished_.size();
  finished_.push_back(std::move(f));
  ForgetFinished(now_);
}

void Queue::ForgetFinished(int64_t now) {
  while (!finished_.empty() && (static_cast<int64_t>(finished_.size()) > keep_.count ||
                                finished_.front().at + keep_.age_ms <= now)) {
    finished_seq_.erase(finished_.front().id);
    finished_.pop_front();
    ++finished_front_;
  }
  if (finished_seq_.size() * 8 < finished_seq_.bucket_count() &&
      finished_seq_.bucket_count() > 1024) {
    finished_seq_.rehash(0);
  }
}

void Queue::ViewExtra(const JobExtra* extra, JobView& view) {
  if (!extra) return;
  view.history = extra->history;
  view.progress = extra->progress;
  view.log = extra->log;
  view.log_dropped = extra->log_dropped;
  for (const DependencyView& d : extra->deps) view.depends_on.push_back(d.id);
  view.waiting_on = extra->unresolved;
  view.batch = extra->batch;
}

JobView Queue::ViewOf(const Job& job) const {
  JobView v;
  v.id = job.id;
  v.payload = job.payload;
  v.priority = job.priority;
  v.group = std::string(line_.Name(job.group));
  v.attempts = job.attempt;
  v.max_attempts = job.max_attempts;
  switch (job.state) {
    case State::kReady:
      v.state = JobState::kReady;
      break;
    case State::kDelayed:
      v.state = JobState::kDelayed;
      v.due_ms = job.due;
      break;
    case State::kInflight:
      v.state = JobState::kInflight;
      v.due_ms = job.due;
      break;
    case State::kDead:
      v.state = JobState::kDead;
      v.finished_ms = job.failed_at;
      break;
    case State::kWaiting:
      v.state = JobState::kWaitingDeps;
      break;
  }
  ViewExtra(job.extra.get(), v);
  return v;
}

std::optional<JobView> Queue::Lookup(JobId id, int64_t now_ms) {
  Advance(now_ms);
  if (auto it = by_id_.find(id); it != by_id_.end()) return ViewOf(slab_[*it]);
  auto seq = finished_seq_.find(id);
  if (seq == finished_seq_.end()) return std::nullopt;
  const FinishedJob& f = finished_[seq->second - finished_front_];
  JobView v;
  v.id = f.id;
  v.state = f.state;
  v.payload = f.payload;
  v.priority = f.priority;
  v.group = f.group;
  v.attempts = f.attempts;
  v.max_attempts = f.max_attempts;
  v.finished_ms = f.at;
  ViewExtra(f.extra.get(), v);
  v.result = f.result;
  return v;
}

LeaseOutcome Queue::Nack(LeaseRef lease, std::optional<int64_t> delay_ms, std::string_view error,
                         int64_t now_ms) {
  Advance(now_ms);
  LeaseOutcome outcome;
  bool acked_before;
  std::optional<Index> i = Current(lease, outcome, acked_before);
  if (!i) return acked_before ? LeaseOutcome::kLeaseLost : outcome;  // an acked job is done
  Job& job = slab_[*i];
  EndLease(*i);
  ++nacked_;
  job.AddFailure({job.attempt, std::string(error), now_});
  if (job.attempt >= job.max_attempts) {
    Bury(*i, error, now_);
    return LeaseOutcome::kOk;
  }
  int64_t delay;
  if (delay_ms) {
    delay = *delay_ms;
  } else {
    int shift = std::min(job.attempt - 1, kBackoffMaxShift);
    int64_t base = std::min(kBackoffBaseMs << shift, kBackoffCapMs);
    std::uniform_real_distribution<double> jitter(0.8, 1.2);
    delay = static_cast<int64_t>(static_cast<double>(base) * jitter(rng_));
  }
  if (delay > 0) {
    MakeDelayed(*i, now_ + delay);
  } else {
    MakeReady(*i, /*at_head=*/false, now_);
  }
  return LeaseOutcome::kOk;
}

LeaseOutcome Queue::Snooze(LeaseRef lease, int64_t delay_ms, int64_t now_ms) {
  Advance(now_ms);
  LeaseOutcome outcome;
  bool acked_before;
  std::optional<Index> i = Current(lease, outcome, acked_before);
  if (!i) return acked_before ? LeaseOutcome::kLeaseLost : outcome;
  Job& job = slab_[*i];
  EndLease(*i);
  job.attempt -= 1;  // this delivery was never tried
  line_.Hold(job.group, now_ + delay_ms, now_);
  if (delay_ms > 0) {
    MakeDelayed(*i, now_ + delay_ms);
  } else {
    MakeReady(*i, /*at_head=*/true, now_);
  }
  return LeaseOutcome::kOk;
}

LeaseOutcome Queue::Extend(LeaseRef lease, int64_t lease_ms, int64_t now_ms) {
  Advance(now_ms);
  LeaseOutcome outcome;
  bool acked_before;
  std::optional<Index> i = Current(lease, outcome, acked_before);
  if (!i) return acked_before ? LeaseOutcome::kLeaseLost : outcome;
  Job& job = slab_[*i];
  job.due = now_ + lease_ms;
  leases_.Set(*i, static_cast<uint64_t>(job.due));
  return LeaseOutcome::kOk;
}

// A heartbeat extends the worker's deadline, never shortens it: anyone who may heartbeat (the
// queue key) may name any worker, and a deadline cut short would fail that worker's leases.
// Declaring a worker gone at once is the admin's ReleaseWorker.
void Queue::Heartbeat(std::string_view worker, int64_t ttl_ms, int64_t now_ms) {
  Advance(now_ms);
  uint32_t w = WorkerFor(worker);
  workers_[w].alive_until = std::max(workers_[w].alive_until, now_ + ttl_ms);
  heartbeats_.Set(w, static_cast<uint64_t>(workers_[w].alive_until));
}

size_t Queue::ReleaseWorker(std::string_view worker, int64_t now_ms) {
  Advance(now_ms);
  auto it = worker_index_.find(std::string(worker));
  if (it == worker_index_.end()) return 0;
  uint32_t w = it->second;
  std::vector<Index> jobs(workers_[w].jobs.begin(), workers_[w].jobs.end());
  std::sort(jobs.begin(), jobs.end(), [&](Index a, Index b) { return KeyOf(a) < KeyOf(b); });
  std::string error = "released: worker '" + std::string(worker) + "'";
  if (workers_[w].alive_until != 0) {  // a released worker is known to be gone
    workers_[w].alive_until = 0;
    heartbeats_.Remove(w);
  }
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) Fail(*it, error, now_, /*expired=*/true);
  if (jobs.empty()) ForgetWorkerIfIdle(w);
  return jobs.size();
}

size_t Queue::ReturnInflight() {
  std::vector<Index> jobs;
  for (Index i = 0; i < slab_.size(); ++i) {
    if (slab_[i].id != 0 && slab_[i].state == State::kInflight) jobs.push_back(i);
  }
  std::sort(jobs.begin(), jobs.end(), [&](Index a, Index b) { return KeyOf(a) < KeyOf(b); });
  // The last first: each goes to the head, so together they keep their order.
  for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
    EndLease(*it);
    slab_[*it].attempt -= 1;
    MakeReady(*it, /*at_head=*/true, now_);
  }
  return jobs.size();
}

std::vector<InflightJob> Queue::Inflight(std::optional<std::string_view> worker, int64_t now_ms) {
  Advance(now_ms);
  std::vector<InflightJob> out;
  auto add = [&](Index i) {
    const Job& job = slab_[i];
    out.push_back({job.id, workers_[job.worker].name, job.attempt, job.due});
  };
  if (worker) {
    auto it = worker_index_.find(std::string(*worker));
    if (it != worker_index_.end()) {
      for (Index i : workers_[it->second].jobs) add(i);
    }
  } else {
    for (Index i = 0; i < slab_.size(); ++i) {
      if (slab_[i].id != 0 && slab_[i].state == State::kInflight) add(i);
    }
  }
  std::sort(out.begin(), out.end(), [](const InflightJob& a, const InflightJob& b) {
    return std::tie(a.lease_expires_ms, a.id) < std::tie(b.lease_expires_ms, b.id);
  });
  return out;
}

std::vector<DeadJob> Queue::Dead(size_t limit, int64_t now_ms) {
  Advance(now_ms);
  std::vector<DeadJob> out;
  for (const auto& [failed_at, id] : dead_) {
    if (out.size() >= limit) break;
    const Job& job = slab_[*by_id_.find(id)];
    std::vector<FailedAttempt> history =
        job.extra ? job.extra->history : std::vector<FailedAttempt>{};
    std::string error = history.empty() ? "" : history.back().error;
    out.push_back({id, job.payload, job.attempt, std::move(error), failed_at, std::move(history)});
  }
  return out;
}

size_t Queue::RequeueDead(const std::optional<std::vector<JobId>>& ids, int64_t now_ms) {
  Advance(now_ms);
  std::vector<JobId> chosen;
  if (ids) {
    for (JobId id : *ids) {
      auto it = by_id_.find(id);
      if (it != by_id_.end() && slab_[*it].state == State::kDead) chosen.push_back(id);
    }
  } else {
    for (const auto& entry : dead_) chosen.push_back(entry.second);
  }
  size_t count = 0;
  for (JobId id : chosen) {
    Index i = *by_id_.find(id);
    Job& job = slab_[i];
    if (job.state != State::kDead) continue;  // named twice
    dead_.erase({job.failed_at, id});
    job.attempt = 0;
    if (job.extra) job.extra->history.clear();
    MakeReady(i, /*at_head=*/false, now_);
    if (job.extra && !job.extra->batch.empty()) BatchJobMoved(job.extra->batch, JobState::kReady);
    ++count;
  }
  return count;
}

bool Queue::Pending(JobId id) const {
  auto it = by_id_.find(id);
  return it != by_id_.end() && slab_[*it].state != State::kDead;
}

CancelOutcome Queue::Cancel(JobId id, int64_t now_ms) {
  Advance(now_ms);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return CancelOutcome::kUnknown;
  Index i = *it;
  Job& job = slab_[i];
  switch (job.state) {
    case State::kInflight:
      return CancelOutcome::kInFlight;
    case State::kReady:
      job.ticket = 0;  // its entry in its group's line is dropped when reached
      line_.Forget(job.group, now_);
      break;
    case State::kDelayed:
      delayed_.Remove(i);
      break;
    case State::kDead:
      dead_.erase({job.failed_at, id});
      break;
    case State::kWaiting:
      --waiting_;  // its entries under its dependencies are skipped when they settle
      break;
  }
  ++cancelled_;
  bool was_dead = job.state == State::kDead;
  std::string batch = job.extra ? job.extra->batch : std::string();
  Finish(i, JobState::kCancelled, {});
  FreeJob(i);
  if (!batch.empty()) {
    // A dead job's batch counted it pending no more: it leaves dead, then is cancelled.
    if (was_dead) BatchJobMoved(batch, JobState::kReady);
    BatchJobMoved(batch, JobState::kCancelled);
  }
  Settled(id, DependencyState::kCancelled, {});
  return CancelOutcome::kCancelled;
}

void Queue::Configure(const QueueSettings& settings, int64_t now_ms) {
  Advance(now_ms);
  line_.Configure(settings.limits, now_);
  keep_ = settings.keep_acked;
  ForgetFinished(now_);
}

void Queue::SetPaused(bool paused, int64_t now_ms) {
  Advance(now_ms);
  paused_ = paused;
}

QueueStats Queue::Stats(int64_t now_ms) {
  Advance(now_ms);
  QueueStats s;
  s.waiting = waiting_;
  s.ready = static_cast<int64_t>(line_.size());
  s.delayed = static_cast<int64_t>(delayed_.size());
  s.inflight = static_cast<int64_t>(leases_.size());
  s.dead = static_cast<int64_t>(dead_.size());
  s.pushed = pushed_;
  s.acked = acked_count_;
  s.nacked = nacked_;
  s.expired = expired_;
  s.cancelled = cancelled_;
  s.workers = static_cast<int64_t>(worker_index_.size());
  s.paused = paused_;
  return s;
}

}  // namespace anteroom::core
