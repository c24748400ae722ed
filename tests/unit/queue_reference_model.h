#pragma once
// A deliberately simple reference model of one reliable queue: one vector of live jobs, one of
// heartbeats, one of remembered acks, and linear scans for everything. It shares no data
// structure with core::Queue (no ordered set, no deadline heaps, no slab, no hash maps), so
// agreement between the two is evidence that the fast structures are right.
//
// It never signs or parses a lease: the test records the lease strings the engine hands out
// and tells the model which delivery (job id, delivery number) each one names, or that it was
// forged (nullopt).
//
// Semantics mirrored from src/core/queue.h:
//  - Ready order: higher priority first, then `order`. A job joining the tail takes the next
//    increasing number; a job returned after a failed delivery takes the next decreasing one,
//    so it leads its priority. Jobs failing at the same moment are returned last-first, so
//    together they keep the order they had.
//  - Deadlines are processed in time order; at one ms: every delayed job due (in the order it
//    was delayed), else every lease running out (together), else one worker's heartbeat.
//  - Every failed delivery (lease ran out, worker silent, worker released) counts in
//    `expired`; a nack counts in `nacked`; either buries the job once attempt >= max_attempts.
//  - A repeated ack of an acked delivery answers ok for an hour; nack and extend of it are
//    lease_lost.
//  - Backoff: 1 s x 2^(attempt-1), at most 1 h, times a uniform draw in [0.8, 1.2) from a
//    mt19937_64 seeded like the engine's (one draw per backoff, nothing else draws).

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/queue_types.h"

namespace anteroom::testing {

// Loops over jobs_ walk plain pointers: the test also runs in Debug sanitizer builds, where
// every iterator step would be a function call.
class ReferenceQueue {
 public:
  struct DeliveryRef {
    core::JobId id = 0;
    uint64_t delivery = 0;
  };
  struct Fetched {
    core::Delivery delivery;  // everything but the lease string
    DeliveryRef ref;
  };
  // Tallies of what the walk went through (not part of the engine's answers).
  struct Seen {
    int64_t redeliveries = 0;
    int64_t buried = 0;
    int64_t expiries = 0;
    int64_t heartbeat_deaths = 0;
    int64_t same_ms_groups = 0;  // several leases or delays at one ms
    int64_t repeated_acks = 0;
    int64_t lease_lost = 0;
    int64_t dedupe_hits = 0;
    int64_t forgotten_acks = 0;
    int64_t finished = 0;
    int64_t forgotten_finished = 0;
    int64_t looked_up = 0;  // lookups that found a job
    int64_t released = 0;   // jobs that stopped waiting for their dependencies
    int64_t failed_by_dependency = 0;
  };

  ReferenceQueue(int64_t now, uint64_t seed) : now_(now), rng_(seed) {}

  std::vector<core::PushResult> Push(const std::vector<core::JobSpec>& specs, int64_t now) {
    Advance(now);
    std::vector<core::PushResult> out;
    for (const core::JobSpec& spec : specs) {
      if (spec.dedupe_key) {
        const Job* hit = nullptr;
        for (const Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
          const Job& j = *p;
          if (j.dedupe_key == spec.dedupe_key) hit = &j;
        }
        if (hit != nullptr) {
          out.push_back({hit->id, false});
          ++seen_.dedupe_hits;
          continue;
        }
      }
      Job job;
      job.id = next_id_++;
      job.payload = spec.payload;
      job.dedupe_key = spec.dedupe_key;
      job.priority = spec.priority;
      job.max_attempts = spec.max_attempts;
      job.ignore = spec.ignore_failed_dependencies;
      std::optional<core::DependencyView> failed;
      for (core::JobId dep : spec.depends_on) {
        bool named = false;
        for (const auto& d : job.deps) named = named || d.id == dep;
        if (named) continue;
        core::DependencyView d = DependencyNow(dep, job.id);
        job.deps.push_back(d);
        if (d.state == core::DependencyState::kPending) {
          ++job.unresolved;
        } else if (d.state != core::DependencyState::kAcked && !failed) {
          failed = d;
        }
      }
      jobs_.push_back(job);
      ++pushed_;
      out.push_back({job.id, true});
      Job& j = jobs_.back();
      if (failed && !j.ignore) {
        std::string error =
            "dependency " + std::to_string(failed->id) + " is " + core::ToString(failed->state);
        j.history.push_back({0, error, now_});
        Bury(j, now_);
      } else if (j.unresolved > 0) {
        j.state = State::kWaiting;
        j.due = now_ + spec.delay_ms;
      } else if (spec.delay_ms > 0) {
        ToDelayed(j, now_ + spec.delay_ms);
      } else {
        ToTail(j);
      }
    }
    return out;
  }

  std::vector<Fetched> Fetch(const std::string& worker, size_t max, int64_t lease_ms, int64_t now) {
    Advance(now);
    std::vector<Fetched> out;
    while (!paused_ && out.size() < max) {
      Job* best = nullptr;
      for (Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
        Job& j = *p;
        if (j.state == State::kReady && (best == nullptr || ReadyBefore(j, *best))) best = &j;
      }
      if (best == nullptr) break;
      out.push_back(LeaseTo(*best, worker, lease_ms));
    }
    return out;
  }

  // core::Queue::Reclaim: the worker's jobs fail together (as a release, but its heartbeat
  // stands), then up to `max` of them still ready (none while paused) are leased to it again,
  // in the order they had, before any other job.
  std::vector<Fetched> Reclaim(const std::string& worker, size_t max, int64_t lease_ms, int64_t now,
                               size_t& taken_back) {
    Advance(now);
    std::vector<Job*> held;
    for (core::JobId id : JobsOf(worker)) held.push_back(Find(id));
    std::sort(held.begin(), held.end(),
              [](const Job* a, const Job* b) { return ReadyBefore(*a, *b); });
    std::vector<core::JobId> ids;
    for (const Job* j : held) ids.push_back(j->id);
    taken_back = FailTogether(ids, "reclaimed: worker '" + worker + "' started again", now_);
    std::vector<Fetched> out;
    for (core::JobId id : ids) {
      if (paused_ || out.size() >= max) break;
      Job* j = Find(id);
      if (j->state == State::kReady) out.push_back(LeaseTo(*j, worker, lease_ms));
    }
    return out;
  }

  core::LeaseOutcome Ack(std::optional<DeliveryRef> ref, int64_t now,
                         const std::string& result = "") {
    Advance(now);
    if (!ref) return core::LeaseOutcome::kInvalidLease;
    Job* j = Current(*ref);
    if (j == nullptr) {
      if (AckedBefore(*ref)) {
        ++seen_.repeated_acks;
        return core::LeaseOutcome::kOk;
      }
      return Lost();
    }
    acked_.push_back({j->id, j->delivery, now_});
    ++acked_count_;
    core::JobId id = j->id;
    Finish(*j, core::JobState::kAcked, result);
    Erase(id);
    Settle(id, core::DependencyState::kAcked, result);
    return core::LeaseOutcome::kOk;
  }

  // Progress and log: the current delivery's only (an acked one is lost, as for extend).
  core::LeaseOutcome SetProgress(std::optional<DeliveryRef> ref, const std::string& progress,
                                 int64_t now) {
    Advance(now);
    if (!ref) return core::LeaseOutcome::kInvalidLease;
    Job* j = Current(*ref);
    if (j == nullptr) return Lost();
    j->progress = progress;
    return core::LeaseOutcome::kOk;
  }
  core::LeaseOutcome AppendLog(std::optional<DeliveryRef> ref,
                               const std::vector<std::string>& lines, int64_t now) {
    Advance(now);
    if (!ref) return core::LeaseOutcome::kInvalidLease;
    Job* j = Current(*ref);
    if (j == nullptr) return Lost();
    for (const std::string& line : lines) {
      j->log.push_back({now_, core::BoundedLogLine(line)});
      if (j->log.size() > core::kKeptLogLines) {
        j->log.erase(j->log.begin());
        ++j->log_dropped;
      }
    }
    return core::LeaseOutcome::kOk;
  }

  void Keep(core::KeepFinished keep, int64_t now) {
    Advance(now);
    keep_ = keep;
    Trim();
  }

  // A job as core::Queue::Lookup shows it.
  std::optional<core::JobView> Lookup(core::JobId id, int64_t now) {
    Advance(now);
    core::JobView v;
    if (const Job* j = Find(id)) {
      v.id = j->id;
      v.payload = j->payload;
      v.priority = j->priority;
      v.attempts = j->attempt;
      v.max_attempts = j->max_attempts;
      v.history = j->history;
      v.progress = j->progress;
      v.log = j->log;
      v.log_dropped = j->log_dropped;
      for (const auto& d : j->deps) v.depends_on.push_back(d.id);
      v.waiting_on = j->unresolved;
      switch (j->state) {
        case State::kWaiting:
          v.state = core::JobState::kWaitingDeps;
          break;
        case State::kReady:
          v.state = core::JobState::kReady;
          break;
        case State::kDelayed:
          v.state = core::JobState::kDelayed;
          v.due_ms = j->due;
          break;
        case State::kInflight:
          v.state = core::JobState::kInflight;
          v.due_ms = j->due;
          break;
        case State::kDead:
          v.state = core::JobState::kDead;
          v.finished_ms = j->failed_at;
          break;
      }
      return v;
    }
    for (const Finished& f : finished_) {
      if (f.view.id == id) return f.view;
    }
    return std::nullopt;
  }

  std::optional<std::vector<core::DependencyView>> Dependencies(core::JobId id, int64_t now) {
    Advance(now);
    if (const Job* j = Find(id)) return j->deps;
    for (const Finished& f : finished_) {
      if (f.view.id == id) return f.deps;
    }
    return std::nullopt;
  }

  core::LeaseOutcome Nack(std::optional<DeliveryRef> ref, std::optional<int64_t> delay_ms,
                          const std::string& error, int64_t now) {
    Advance(now);
    if (!ref) return core::LeaseOutcome::kInvalidLease;
    Job* j = Current(*ref);
    if (j == nullptr) return Lost();
    ++nacked_;
    Remember(*j, error, now_);
    if (j->attempt >= j->max_attempts) {
      Bury(*j, now_);
      return core::LeaseOutcome::kOk;
    }
    int64_t delay;
    if (delay_ms) {
      delay = *delay_ms;
    } else {
      int64_t base = 1'000;
      for (int k = 1; k < j->attempt && base < 3'600'000; ++k) base *= 2;
      base = std::min<int64_t>(base, 3'600'000);
      std::uniform_real_distribution<double> jitter(0.8, 1.2);
      delay = static_cast<int64_t>(static_cast<double>(base) * jitter(rng_));
    }
    if (delay > 0) {
      ToDelayed(*j, now_ + delay);
    } else {
      ToTail(*j);
    }
    return core::LeaseOutcome::kOk;
  }

  core::LeaseOutcome Extend(std::optional<DeliveryRef> ref, int64_t lease_ms, int64_t now) {
    Advance(now);
    if (!ref) return core::LeaseOutcome::kInvalidLease;
    Job* j = Current(*ref);
    if (j == nullptr) return Lost();
    j->due = now_ + lease_ms;
    return core::LeaseOutcome::kOk;
  }

  void Heartbeat(const std::string& worker, int64_t ttl_ms, int64_t now) {
    Advance(now);
    for (Beat& b : beats_) {
      if (b.worker == worker) {
        b.until = std::max(b.until, now_ + ttl_ms);  // never shortened
        return;
      }
    }
    beats_.push_back({worker, now_ + ttl_ms});
  }

  size_t ReleaseWorker(const std::string& worker, int64_t now) {
    Advance(now);
    DropBeat(worker);
    return FailTogether(JobsOf(worker), "released: worker '" + worker + "'", now_);
  }

  std::vector<core::InflightJob> Inflight(const std::optional<std::string>& worker, int64_t now) {
    Advance(now);
    std::vector<core::InflightJob> out;
    for (const Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
      const Job& j = *p;
      if (j.state == State::kInflight && (!worker || j.worker == *worker)) {
        out.push_back({j.id, j.worker, j.attempt, j.due});
      }
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
      return std::tie(a.lease_expires_ms, a.id) < std::tie(b.lease_expires_ms, b.id);
    });
    return out;
  }

  std::vector<core::DeadJob> Dead(size_t limit, int64_t now) {
    Advance(now);
    std::vector<core::DeadJob> out;
    for (const Job* j : DeadInOrder()) {
      if (out.size() >= limit) break;
      out.push_back(
          {j->id, j->payload, j->attempt, j->history.back().error, j->failed_at, j->history});
    }
    return out;
  }

  size_t RequeueDead(const std::optional<std::vector<core::JobId>>& ids, int64_t now) {
    Advance(now);
    std::vector<core::JobId> chosen;
    if (ids) {
      chosen = *ids;
    } else {
      for (const Job* j : DeadInOrder()) chosen.push_back(j->id);
    }
    size_t count = 0;
    for (core::JobId id : chosen) {
      Job* j = Find(id);
      if (j == nullptr || j->state != State::kDead) continue;
      j->attempt = 0;
      j->history.clear();
      ToTail(*j);
      ++count;
    }
    return count;
  }

  core::CancelOutcome Cancel(core::JobId id, int64_t now) {
    Advance(now);
    Job* j = Find(id);
    if (j == nullptr) return core::CancelOutcome::kUnknown;
    if (j->state == State::kInflight) return core::CancelOutcome::kInFlight;
    ++cancelled_;
    Finish(*j, core::JobState::kCancelled, "");
    Erase(id);
    Settle(id, core::DependencyState::kCancelled, "");
    return core::CancelOutcome::kCancelled;
  }

  void SetPaused(bool paused, int64_t now) {
    Advance(now);
    paused_ = paused;
  }

  core::QueueStats Stats(int64_t now) {
    Advance(now);
    core::QueueStats s;
    std::vector<const std::string*> workers;
    for (const Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
      const Job& j = *p;
      if (j.state == State::kWaiting) ++s.waiting;
      if (j.state == State::kReady) ++s.ready;
      if (j.state == State::kDelayed) ++s.delayed;
      if (j.state == State::kDead) ++s.dead;
      if (j.state == State::kInflight) {
        ++s.inflight;
        workers.push_back(&j.worker);
      }
    }
    for (const Beat& b : beats_) workers.push_back(&b.worker);
    std::sort(workers.begin(), workers.end(),
              [](const std::string* a, const std::string* b) { return *a < *b; });
    s.workers = std::unique(workers.begin(), workers.end(),
                            [](const std::string* a, const std::string* b) { return *a == *b; }) -
                workers.begin();
    s.pushed = pushed_;
    s.acked = acked_count_;
    s.nacked = nacked_;
    s.expired = expired_;
    s.cancelled = cancelled_;
    s.paused = paused_;
    return s;
  }

  bool CanDeliver() const {
    if (paused_) return false;
    for (const Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
      const Job& j = *p;
      if (j.state == State::kReady) return true;
    }
    return false;
  }

  int64_t NextDeadline() const {
    int64_t next = INT64_MAX;
    for (const Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
      const Job& j = *p;
      if (j.state == State::kDelayed || j.state == State::kInflight) next = std::min(next, j.due);
    }
    for (const Beat& b : beats_) next = std::min(next, b.until);
    return next;
  }

  void Advance(int64_t target) {
    target = std::max(target, now_);
    while (true) {
      int64_t next = NextDeadline();
      if (next == INT64_MAX || next > target) break;
      now_ = std::max(next, now_);
      std::vector<Job*> due;
      for (Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
        Job& j = *p;
        if (j.state == State::kDelayed && j.due == next) due.push_back(&j);
      }
      if (!due.empty()) {
        std::sort(due.begin(), due.end(),
                  [](const Job* a, const Job* b) { return a->order < b->order; });
        if (due.size() > 1) ++seen_.same_ms_groups;
        for (Job* j : due) ToTail(*j);
        continue;
      }
      std::vector<core::JobId> lost;
      for (const Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
        const Job& j = *p;
        if (j.state == State::kInflight && j.due == next) lost.push_back(j.id);
      }
      if (!lost.empty()) {
        if (lost.size() > 1) ++seen_.same_ms_groups;
        FailTogether(lost, "lease expired", now_);
        continue;
      }
      // A heartbeat (the test keeps workers' deadlines apart, so there is one).
      std::string worker;
      for (const Beat& b : beats_) {
        if (b.until == next) worker = b.worker;
      }
      DropBeat(worker);
      std::vector<core::JobId> jobs = JobsOf(worker);
      seen_.heartbeat_deaths += static_cast<int64_t>(jobs.size());
      FailTogether(jobs, "worker '" + worker + "' stopped sending heartbeats", now_);
    }
    now_ = target;
    // Acks are remembered in time order: forget from the front.
    size_t forget = 0;
    while (forget < acked_.size() && acked_[forget].at + kAckMemoryMs <= now_) ++forget;
    acked_.erase(acked_.begin(), acked_.begin() + static_cast<ptrdiff_t>(forget));
    seen_.forgotten_acks += static_cast<int64_t>(forget);
    Trim();
  }

  const Seen& seen() const { return seen_; }

 private:
  static constexpr int64_t kAckMemoryMs = 3'600'000;
  enum class State { kReady, kDelayed, kInflight, kDead, kWaiting };
  struct Job {
    core::JobId id = 0;
    std::string payload;
    std::optional<std::string> dedupe_key;
    int32_t priority = 0;
    int32_t max_attempts = core::kDefaultMaxAttempts;
    int32_t attempt = 0;
    State state = State::kReady;
    int64_t due = 0;    // delayed: ready at; inflight: lease deadline
    int64_t order = 0;  // ready: place within the priority; delayed: when it was delayed
    uint64_t delivery = 0;
    std::string worker;
    int64_t failed_at = 0;
    std::vector<core::FailedAttempt> history;
    std::optional<std::string> progress;
    std::vector<core::JobLogLine> log;
    int64_t log_dropped = 0;
    std::vector<core::DependencyView> deps;
    int32_t unresolved = 0;
    bool ignore = false;
  };
  struct Finished {
    core::JobView view;
    std::vector<core::DependencyView> deps;
  };
  // What `dep` is to a job `self` pushed now: only older jobs can be waited on.
  core::DependencyView DependencyNow(core::JobId dep, core::JobId self) {
    using S = core::DependencyState;
    if (dep >= self) return {dep, S::kMissing, {}};
    if (const Job* j = Find(dep))
      return {dep, j->state == State::kDead ? S::kDead : S::kPending, {}};
    for (const Finished& f : finished_) {
      if (f.view.id != dep) continue;
      if (f.view.state == core::JobState::kAcked) return {dep, S::kAcked, f.view.result};
      return {dep, S::kCancelled, {}};
    }
    for (const AckedDelivery& a : acked_) {
      if (a.id == dep) return {dep, S::kAcked, {}};
    }
    return {dep, S::kMissing, {}};
  }
  // Job `id` settled: each job waiting on it (in id order) learns it, and goes on or fails;
  // those failing settle in turn, after the ones before them.
  void Settle(core::JobId id, core::DependencyState outcome, const std::string& result) {
    std::vector<std::tuple<core::JobId, core::DependencyState, std::string>> todo{
        {id, outcome, result}};
    for (size_t next = 0; next < todo.size(); ++next) {
      auto [dep, state, res] = todo[next];
      std::vector<Job*> waiting;
      for (Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
        if (p->state != State::kWaiting) continue;
        for (const auto& d : p->deps) {
          if (d.id == dep && d.state == core::DependencyState::kPending) waiting.push_back(p);
        }
      }
      std::sort(waiting.begin(), waiting.end(),
                [](const Job* a, const Job* b) { return a->id < b->id; });
      for (Job* j : waiting) {
        for (auto& d : j->deps) {
          if (d.id != dep || d.state != core::DependencyState::kPending) continue;
          d.state = state;
          if (!res.empty()) d.result = res;
        }
        --j->unresolved;
        if (state != core::DependencyState::kAcked && !j->ignore) {
          std::string error = "dependency " + std::to_string(dep) + " is " + core::ToString(state);
          j->history.push_back({0, error, now_});
          j->state = State::kDead;
          j->failed_at = now_;
          ++seen_.buried;
          ++seen_.failed_by_dependency;
          todo.emplace_back(j->id, core::DependencyState::kDead, "");
        } else if (j->unresolved == 0) {
          ++seen_.released;
          if (j->due > now_) {
            ToDelayed(*j, j->due);
          } else {
            ToTail(*j);
          }
        }
      }
    }
  }
  void Finish(const Job& j, core::JobState state, const std::string& result) {
    if (keep_.count == 0) return;
    core::JobView v;
    v.id = j.id;
    v.state = state;
    v.payload = j.payload;
    v.priority = j.priority;
    v.attempts = j.attempt;
    v.max_attempts = j.max_attempts;
    v.finished_ms = now_;
    v.history = j.history;
    v.progress = j.progress;
    v.log = j.log;
    v.log_dropped = j.log_dropped;
    for (const auto& d : j.deps) v.depends_on.push_back(d.id);
    v.waiting_on = j.unresolved;
    if (!result.empty()) v.result = result;
    finished_.push_back({v, j.deps});
    ++seen_.finished;
    Trim();
  }
  // Oldest first: past the count, or past the age.
  void Trim() {
    while (!finished_.empty() && (static_cast<int64_t>(finished_.size()) > keep_.count ||
                                  finished_.front().view.finished_ms + keep_.age_ms <= now_)) {
      finished_.erase(finished_.begin());
      ++seen_.forgotten_finished;
    }
  }
  struct Beat {
    std::string worker;
    int64_t until = 0;
  };
  // A failure as a job keeps it: the error bounded, the last kKeptAttempts attempts only.
  static void Remember(Job& j, const std::string& error, int64_t at) {
    if (j.history.size() >= core::kKeptAttempts) j.history.erase(j.history.begin());
    j.history.push_back({j.attempt, core::BoundedError(error), at});
  }
  struct AckedDelivery {
    core::JobId id = 0;
    uint64_t delivery = 0;
    int64_t at = 0;
  };

  static bool ReadyBefore(const Job& a, const Job& b) {
    return std::make_tuple(-int64_t{a.priority}, a.order) <
           std::make_tuple(-int64_t{b.priority}, b.order);
  }

  Job* Find(core::JobId id) {
    for (Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
      Job& j = *p;
      if (j.id == id) return &j;
    }
    return nullptr;
  }
  // The order of jobs_ means nothing (every answer is sorted or picked by a key).
  void Erase(core::JobId id) {
    for (Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
      Job& j = *p;
      if (j.id == id) {
        std::swap(j, jobs_.back());
        jobs_.pop_back();
        return;
      }
    }
  }
  Job* Current(const DeliveryRef& ref) {
    Job* j = Find(ref.id);
    if (j != nullptr && j->state == State::kInflight && j->delivery == ref.delivery) return j;
    return nullptr;
  }
  bool AckedBefore(const DeliveryRef& ref) const {
    for (const AckedDelivery& a : acked_) {
      if (a.id == ref.id && a.delivery == ref.delivery) return true;
    }
    return false;
  }
  core::LeaseOutcome Lost() {
    ++seen_.lease_lost;
    return core::LeaseOutcome::kLeaseLost;
  }
  void ToTail(Job& j) {
    j.state = State::kReady;
    j.order = tail_++;
  }
  void ToDelayed(Job& j, int64_t until) {
    j.state = State::kDelayed;
    j.due = until;
    j.order = tail_++;
  }
  void Bury(Job& j, int64_t at) {
    j.state = State::kDead;
    j.failed_at = at;
    ++seen_.buried;
    Settle(j.id, core::DependencyState::kDead, "");
  }
  void DropBeat(const std::string& worker) {
    beats_.erase(std::remove_if(beats_.begin(), beats_.end(),
                                [&](const Beat& b) { return b.worker == worker; }),
                 beats_.end());
  }
  std::vector<core::JobId> JobsOf(const std::string& worker) const {
    std::vector<core::JobId> out;
    for (const Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
      const Job& j = *p;
      if (j.state == State::kInflight && j.worker == worker) out.push_back(j.id);
    }
    return out;
  }
  std::vector<const Job*> DeadInOrder() const {
    std::vector<const Job*> out;
    for (const Job *p = jobs_.data(), *end = p + jobs_.size(); p != end; ++p) {
      const Job& j = *p;
      if (j.state == State::kDead) out.push_back(&j);
    }
    std::sort(out.begin(), out.end(), [](const Job* a, const Job* b) {
      return std::tie(a->failed_at, a->id) < std::tie(b->failed_at, b->id);
    });
    return out;
  }
  // Deliveries that failed together: each to the head of its priority, the last first.
  Fetched LeaseTo(Job& j, const std::string& worker, int64_t lease_ms) {
    j.state = State::kInflight;
    j.attempt += 1;
    j.delivery = next_delivery_++;
    j.due = now_ + lease_ms;
    j.worker = worker;
    if (j.attempt > 1) ++seen_.redeliveries;
    core::Delivery d;
    d.id = j.id;
    d.payload = j.payload;
    d.attempt = j.attempt;
    d.lease_expires_ms = j.due;
    d.priority = j.priority;
    return {d, {j.id, j.delivery}};
  }
  size_t FailTogether(std::vector<core::JobId> ids, const std::string& error, int64_t at) {
    std::vector<Job*> group;
    for (core::JobId id : ids) group.push_back(Find(id));
    std::sort(group.begin(), group.end(),
              [](const Job* a, const Job* b) { return ReadyBefore(*b, *a); });  // last first
    for (Job* j : group) {
      j->worker.clear();
      Remember(*j, error, at);
      ++expired_;
      ++seen_.expiries;
      if (j->attempt >= j->max_attempts) {
        Bury(*j, at);
      } else {
        j->state = State::kReady;
        j->order = head_--;
      }
    }
    return group.size();
  }

  int64_t now_;
  std::mt19937_64 rng_;
  std::vector<Job> jobs_;           // live jobs only (acked and cancelled ones are erased)
  std::vector<Finished> finished_;  // acked and cancelled, oldest first
  core::KeepFinished keep_;
  std::vector<Beat> beats_;
  std::vector<AckedDelivery> acked_;
  core::JobId next_id_ = 1;
  uint64_t next_delivery_ = 1;
  int64_t tail_ = 1;
  int64_t head_ = 0;
  bool paused_ = false;
  int64_t pushed_ = 0, acked_count_ = 0, nacked_ = 0, expired_ = 0, cancelled_ = 0;
  Seen seen_;
};

}  // namespace anteroom::testing
