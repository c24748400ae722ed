#pragma once
// The rules of one reliable queue, as plain state over an injected time (no I/O, no locking).
//
// Job lifecycle (every transition counted; see QueueStats):
//
//   push with depends_on --> waiting (until every dependency is acked) --> ready | delayed
//                                            \-- a dependency failed --> dead
//   push --> ready <--------------------------- delayed <-- push with delay_ms
//              |  ^  ^  (lease expired, worker dead      ^        nack (backoff or delay_ms)
//        fetch |  |  |   or released: head of priority)  |
//              v  |  |                                   |
//           inflight -----------------------------------+
//              |     \-- attempts used up --> dead --(requeue)--> ready
//          ack v
//            gone (acked)        cancel: ready | delayed | dead --> gone (cancelled)
//
// Invariants (checked by tests/unit/queue_test.cc):
//  - pushed = acked + waiting + ready + delayed + inflight + dead + cancelled, at every moment.
//  - A job is in exactly one of line_ (ready), delayed_, leases_, dead_, or waits for its
//    dependencies (listed under each pending one in dependents_), or is gone.
//  - A waiting job's dependencies are older jobs of the queue (they existed at its push): no
//    cycle can form, and each settles once, so no job waits forever on a settled one.
//  - While a lease is valid no other delivery of its job exists; a lease names one delivery, so
//    a stale or superseded lease never acks, nacks or extends a later delivery (lease_lost).
//  - Ready order: higher priority first, then `order` (FIFO; jobs returned after a failed
//    delivery get an order before every other, so they lead their priority), within a group;
//    across groups as the queue's fairness says, limits holding groups back (core/group_line.h).
//  - Deadlines (delays, leases, heartbeats) are processed in time order whenever the queue is
//    touched or Advance() is called; expiry costs O(expired x log n). Jobs that become ready
//    at the same moment keep their relative order (delayed: push order; returned: their order
//    before delivery).

#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/bytes.h"
#include "core/chunked_slab.h"
#include "core/deadline_heap.h"
#include "core/group_line.h"
#include "core/hmac.h"
#include "core/lease_codec.h"
#include "core/lease_mac.h"
#include "core/queue_types.h"

namespace anteroom::core {

class Queue {
 public:
  // `lease_key` signs leases, so a forged one is told apart from a stale one (it must outlive
  // the queue); `seed` drives the backoff jitter.
  Queue(std::string name, const Hmac& lease_key, int64_t now_ms, uint64_t seed);
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // All jobs are accepted (validation is the caller's). Dedupe hits answer the existing id.
  std::vector<PushResult> Push(const std::vector<JobSpec>& jobs, int64_t now_ms);
  // Up to `max` ready jobs in delivery order, leased to `worker`; none while paused.
  std::vector<Delivery> Fetch(std::string_view worker, size_t max, int64_t lease_ms,
                              int64_t now_ms);
  // A restarted worker takes back what it held (the Redis pattern's "processing list" of a
  // worker, cleared first on restart). Each of `worker`'s in-flight jobs fails its delivery as a
  // release would (a failed attempt, counted expired; one past max_attempts goes dead) and goes
  // to the head of its priority; then up to `max` of those (none while paused), in delivery
  // order, leave the line and are leased to `worker` again, before any other job. `taken_back`
  // is set to how many it held.
  std::vector<Delivery> Reclaim(std::string_view worker, size_t max, int64_t lease_ms,
                                int64_t now_ms, size_t& taken_back);
  // nullopt for a forged or malformed lease (kInvalidLease); no state is read or changed.
  std::optional<LeaseRef> ParseLease(std::string_view lease) const;
  // Idempotent: acking a delivery that was already acked answers kOk again, counting nothing
  // (its result then is ignored). `result` (JSON text, "" for none) is kept with the job while
  // the queue keeps finished jobs (KeepFinished).
  // `ran_ms`, when given, receives how long the acked delivery ran (from its lease's start),
  // when this ack finished the job (kOk, not a repeat).
  LeaseOutcome Ack(LeaseRef lease, int64_t now_ms, std::string_view result = {},
                   int64_t* ran_ms = nullptr);
  // delay_ms absent: exponential backoff (1 s x 2^(attempt-1), at most 1 h, +-20% jitter).
  LeaseOutcome Nack(LeaseRef lease, std::optional<int64_t> delay_ms, std::string_view error,
                    int64_t now_ms);
  LeaseOutcome Extend(LeaseRef lease, int64_t lease_ms, int64_t now_ms);
  // A worker told to slow down (an upstream 429): the delivery ends without using up its
  // attempt (no failure is kept), the job waits `delay_ms` (0: back at the head of its
  // priority), and its group (an ungrouped job: the whole queue) is held as long.
  LeaseOutcome Snooze(LeaseRef lease, int64_t delay_ms, int64_t now_ms);
  // The same, from the lease string (an invalid one answers kInvalidLease).
  LeaseOutcome Ack(std::string_view lease, int64_t now_ms, std::string_view result = {});
  LeaseOutcome Nack(std::string_view lease, std::optional<int64_t> delay_ms, std::string_view error,
                    int64_t now_ms);
  LeaseOutcome Extend(std::string_view lease, int64_t lease_ms, int64_t now_ms);

  // The job of the current delivery reports its progress (replacing the last), or appends to
  // its log (each line cut by BoundedLogLine; the last kKeptLogLines kept). Both stay with the
  // job through retries and after it finished.
  LeaseOutcome SetProgress(LeaseRef lease, std::string_view progress, int64_t now_ms);
  LeaseOutcome AppendLog(LeaseRef lease, const std::vector<std::string>& lines, int64_t now_ms);
  // Job `id` wherever it is; nullopt when unknown (never pushed, or finished and past what the
  // queue keeps).
  std::optional<JobView> Lookup(JobId id, int64_t now_ms);
  // Batches (BatchSpec). Create: kExists when `id` is taken (open, or settled and kept: for
  // keep_'s age, and for as long as any job of it is dead, so that a job never counts in a
  // later batch of the same name), kTooMany past kMaxOpenBatches. Seal: no job joins after;
  // kUnknown when there is no such batch.
  BatchOutcome CreateBatch(std::string_view id, BatchSpec spec, int64_t now_ms);
  BatchOutcome SealBatch(std::string_view id, int64_t now_ms);
  std::optional<BatchView> GetBatch(std::string_view id, int64_t now_ms);
  // Whether jobs may join batch `id` at `now_ms` (it exists, and is not sealed): what Push
  // takes for granted, so the caller checks every job of a push first. kUnknown also for a
  // batch that the next call forgets (its age is past): CreateBatch may take the id.
  BatchOutcome CanJoin(std::string_view id, int64_t now_ms) const;
  // What became of job `id`'s dependencies, in the order it named them (with their results);
  // nullopt when the job is unknown.
  std::optional<std::vector<DependencyView>> Dependencies(JobId id, int64_t now_ms);

  void Heartbeat(std::string_view worker, int64_t ttl_ms, int64_t now_ms);
  // The worker's jobs go back to the head of their priority now (a failed attempt each).
  size_t ReleaseWorker(std::string_view worker, int64_t now_ms);
  // Every in-flight delivery ends as if it had never been made: a restored backup's, whose
  // workers are gone and were not at fault. No attempt is used up; each job goes back to the
  // head of its priority, in the order they had in the line, ready since the queue's time
  // (nothing is advanced, so a lease that ran out before is not counted as expired). Answers how
  // many.
  size_t ReturnInflight();

  std::vector<InflightJob> Inflight(std::optional<std::string_view> worker, int64_t now_ms);
  // Oldest failures first.
  std::vector<DeadJob> Dead(size_t limit, int64_t now_ms);
  // All dead jobs when `ids` is absent; answers how many were requeued (attempts start over).
  size_t RequeueDead(const std::optional<std::vector<JobId>>& ids, int64_t now_ms);
  CancelOutcome Cancel(JobId id, int64_t now_ms);
  // Whether job `id` is still to be done, as of the last call: ready, delayed or in flight
  // (not acked, cancelled, dead, or unknown).
  bool Pending(JobId id) const;
  void SetPaused(bool paused, int64_t now_ms);
  bool paused() const { return paused_; }
  // Limits and fairness apply from now on (the groups held back are looked at again).
  void Configure(const QueueSettings& settings, int64_t now_ms);
  QueueSettings settings() const { return {line_.settings(), keep_}; }

  // Jobs that went dead while noting, until TakeBuried: the backend tells them as job.dead
  // lifecycle events. Off while a log is replayed (they were told when they died).
  struct Buried {
    JobId id = 0;
    int64_t at = 0;
    std::string error;
  };
  void set_noting(bool on) { noting_ = on; }
  std::vector<Buried> TakeBuried() { return std::exchange(buried_, {}); }
  QueueStats Stats(int64_t now_ms);

  // True when a fetch now (the time of the last call) would get a job (for waking long polls).
  bool CanDeliver() const { return !paused_ && line_.CanTake(now_); }
  // When a fetch that finds only held-back jobs would get one: the earliest moment a rate or a
  // hold allows, INT64_MAX when nothing waits on time (nothing ready, paused, or only
  // concurrency holds jobs back: a job that ends frees them).
  int64_t NextAllowedAt() const { return paused_ ? INT64_MAX : line_.NextAllowedAt(now_); }
  // True when the queue holds nothing a client put there: no job in any state, no worker, not
  // paused, never pushed to. Such a queue may be forgotten (a name nobody uses costs nothing).
  bool HoldsNothing() const {
    return pushed_ == 0 && line_.empty() && delayed_.empty() && leases_.empty() && dead_.empty() &&
           worker_index_.empty() && !paused_ && line_.settings() == QueueLimits{} &&
           keep_ == KeepFinished{} && batches_.empty();
  }
  void Advance(int64_t now_ms);
  // Earliest time at which Advance has work, INT64_MAX when none.
  int64_t NextDeadline() const;

  // Snapshots (queue_snapshot.cc): the whole state, so that a restored queue answers, expires
  // and draws backoff jitter exactly as this one would have. Restore fills a queue just
  // constructed; false when the bytes do not decode (the queue is then unusable).
  void Save(ByteWriter& out) const;
  bool Restore(ByteReader& in);

  // The lease string of a delivery (core/lease_codec.h).
  std::string LeaseFor(JobId id, uint64_t delivery) const;

 private:
  enum class State : uint8_t { kReady, kDelayed, kInflight, kDead, kWaiting };
  using Index = uint32_t;
  static constexpr uint32_t kNoWorker = UINT32_MAX;

  // What few jobs carry, out of line: a job with none of it carries one null pointer.
  struct JobExtra {
    std::optional<std::string> dedupe_key;
    std::vector<FailedAttempt> history;  // the last kKeptAttempts failures
    std::optional<std::string> progress;
    std::vector<JobLogLine> log;  // the last kKeptLogLines lines
    int64_t log_dropped = 0;
    std::vector<DependencyView> deps;  // as named at push
    int32_t unresolved = 0;            // deps still pending
    bool ignore_failed_deps = false;
    std::string batch;  // "": none
  };
  struct Batch {
    BatchSpec spec;
    BatchView view;
  };
  // 112 bytes (168 before the rare fields went out of line): a queue of 1M ready jobs holds 1M
  // of these in the slab.
  struct Job {
    JobId id = 0;
    std::string payload;
    std::unique_ptr<JobExtra> extra;
    int64_t due = 0;        // delayed: ready at; ready: ready since; inflight: lease expires at
    int64_t order = 0;      // FIFO position within its priority
    uint64_t ticket = 0;    // its live entry in line_ (0: none)
    uint64_t delivery = 0;  // the current (or last) delivery's number
    int64_t failed_at = 0;  // dead: died at; inflight: leased at (ack's run time)
    int32_t priority = 0;
    int32_t max_attempts = kDefaultMaxAttempts;
    int32_t attempt = 0;  // deliveries so far
    uint32_t worker = kNoWorker;
    GroupLine::GroupId group = GroupLine::kUngrouped;
    State state = State::kReady;

    JobExtra& Extra() {
      if (!extra) extra = std::make_unique<JobExtra>();
      return *extra;
    }
    const std::optional<std::string>& dedupe_key() const {
      static const std::optional<std::string> kNone;
      return extra ? extra->dedupe_key : kNone;
    }
    // Appends to the history the attempt's error, bounded; only the last kKeptAttempts are
    // kept.
    void AddFailure(FailedAttempt f) {
      std::vector<FailedAttempt>& history = Extra().history;
      if (history.size() >= kKeptAttempts) history.erase(history.begin());
      f.error = BoundedError(f.error);
      history.push_back(std::move(f));
    }
  };
  static_assert(sizeof(Job) <= 112, "a job's record is part of every ready job's cost");
  // A job acked or cancelled, kept for lookup (KeepFinished), oldest first.
  struct FinishedJob {
    JobId id = 0;
    JobState state = JobState::kAcked;
    int32_t priority = 0;
    int32_t attempts = 0;
    int32_t max_attempts = 0;
    int64_t at = 0;
    std::string payload;
    std::string group;
    std::unique_ptr<JobExtra> extra;
    std::optional<std::string> result;
  };
  struct Worker {
    std::string name;
    int64_t alive_until = 0;                // 0: no heartbeat
    boost::unordered_flat_set<Index> jobs;  // in flight
  };
  // (-priority, order, job); -priority in 64 bits, as -INT32_MIN does not fit in 32.
  using ReadyKey = std::tuple<int64_t, int64_t, Index>;

  ReadyKey KeyOf(Index i) const {
    return {-static_cast<int64_t>(slab_[i].priority), slab_[i].order, i};
  }
  // A job in flight whose lease names this exact delivery, or the outcome to answer.
  std::optional<Index> Current(LeaseRef lease, LeaseOutcome& outcome, bool& acked_before);
  Index NewJob();
  void FreeJob(Index i);
  // Gives back the slab's end once its last records are free (FreeJob), and what indexes by
  // slab slot past it.
  void TrimSlab();
  // A ready-line entry still stands for its job (entries of cancelled jobs stay, and may name
  // a slot cut off the slab).
  bool LiveEntry(Index i, uint64_t ticket) const {
    return i < slab_.size() && slab_[i].state == State::kReady && slab_[i].ticket == ticket;
  }
  // `since`: when it became ready (the job's wait is measured from there).
  void MakeReady(Index i, bool at_head, int64_t since);
  void MakeDelayed(Index i, int64_t until);
  void EndLease(Index i);
  void Fail(Index i, std::string_view error, int64_t now, bool expired);
  // Leases job `i` (just taken from the line) to worker `w`.
  Delivery LeaseTo(Index i, uint32_t w, int64_t lease_ms);
  void Bury(Index i, std::string_view error, int64_t now);
  uint32_t WorkerFor(std::string_view name);
  void ForgetWorkerIfIdle(uint32_t w);
  void WorkerDied(uint32_t w, int64_t now);
  void ForgetOldAcks(int64_t now);
  // Job `i` is done (acked or cancelled): kept as finished while the queue keeps any.
  void Finish(Index i, JobState state, std::string_view result);
  // Drops the finished jobs past what keep_ allows.
  void ForgetFinished(int64_t now);
  // Job `id` settled (acked, dead or cancelled): the jobs waiting on it learn it, and stop
  // waiting, or fail in turn (their own dependents then learn that, and so on: a worklist, not
  // recursion, as a chain may be long).
  void Settled(JobId id, DependencyState outcome, std::string_view result);
  // What job `dep` is now, to a job pushed with it as a dependency.
  DependencyView DependencyNow(JobId dep) const;
  // Job `i` waited for its dependencies and may go on: ready, or delayed until its due time.
  void StopWaiting(Index i);
  // Adds the jobs to the queue (Push, at now_).
  void PushJob(const JobSpec& spec, std::vector<PushResult>& results);
  // A job of batch `batch` settled as `state` (kAcked, kDead, kCancelled) or, with kReady, came
  // back from the dead; the batch's callbacks are pushed when it settles.
  void BatchJobMoved(const std::string& batch, JobState state);
  void SettleBatchIfDone(Batch& b);
  // A callback job of a batch, pushed now: answers its id.
  JobId PushCallback(const JobSpec& spec);
  // Drops settled batches kept past keep_'s age, but not one with a job still dead (or
  // requeued from the dead): that one goes when its last job does (BatchJobMoved).
  void ForgetSettledBatches(int64_t now);
  // Whether settled batch `v` may be forgotten at `now`: past its age, none of its jobs left.
  bool BatchForgettable(const BatchView& v, int64_t now) const;
  JobView ViewOf(const Job& job) const;
  static void ViewExtra(const JobExtra* extra, JobView& view);
  // A job's progress and log, as snapshots hold them (queue_snapshot.cc).
  static void SaveNotes(ByteWriter& out, const JobExtra* extra);
  static void LoadNotes(ByteReader& in, std::unique_ptr<JobExtra>& extra);

  std::string name_;
  mutable LeaseMac lease_mac_;  // the queue is used under one lock: exclusive
  int64_t now_;
  std::mt19937_64 rng_;

  // Jobs by id: a set of slab indexes hashed and compared by their job's id, 4 bytes a slot
  // where a map of id -> index took 16 (open addressing: no node per job either). A slab
  // index must hold its job's id before it goes in, and until it comes out.
  struct IdOfSlot {
    using is_transparent = void;
    const ChunkedSlab<Job>* slab;
    JobId operator()(JobId id) const { return id; }
    JobId operator()(Index i) const { return (*slab)[i].id; }
  };
  struct HashById {
    using is_transparent = void;
    IdOfSlot id;
    template <typename K>
    size_t operator()(K k) const {
      return boost::hash<JobId>()(id(k));
    }
  };
  struct SameId {
    using is_transparent = void;
    IdOfSlot id;
    template <typename A, typename B>
    bool operator()(A a, B b) const {
      return id(a) == id(b);
    }
  };

  ChunkedSlab<Job> slab_;
  // Free slots, a min-heap: the lowest is reused first, so jobs stay packed at the slab's front
  // and its end empties as a backlog drains (TrimSlab). Entries may be stale (a slot cut off the
  // end, or listed twice): a slot is free when it is inside the slab and its job id is 0.
  std::vector<Index> free_;
  boost::unordered_flat_set<Index, HashById, SameId> by_id_{0, HashById{{&slab_}},
                                                            SameId{{&slab_}}};
  GroupLine line_;  // the ready jobs, by group
  KeepFinished keep_;
  uint64_t next_ticket_ = 1;
  DeadlineHeap delayed_;                      // key: ready-at ms
  DeadlineHeap leases_;                       // key: lease expiry ms
  std::set<std::pair<int64_t, JobId>> dead_;  // (failed at, id)
  std::unordered_map<std::string, JobId> dedupe_;

  std::vector<Worker> workers_;
  std::vector<uint32_t> free_workers_;
  std::unordered_map<std::string, uint32_t> worker_index_;
  DeadlineHeap heartbeats_;  // key: alive-until ms, per worker

  // Pending job -> the jobs waiting on it (stale entries skipped: a waiting job cancelled).
  boost::unordered_flat_map<JobId, std::vector<JobId>> dependents_;
  int64_t waiting_ = 0;
  std::vector<std::tuple<JobId, DependencyState, std::string>> settling_;
  bool in_settled_ = false;

  std::map<std::string, Batch, std::less<>> batches_;
  size_t open_batches_ = 0;
  std::deque<std::pair<int64_t, std::string>> settled_batches_;  // (settled at, id), in order

  std::deque<FinishedJob> finished_;
  boost::unordered_flat_map<JobId, uint64_t> finished_seq_;  // id -> sequence number
  uint64_t finished_front_ = 0;                              // finished_.front()'s number

  // Deliveries acked recently, so a repeated ack answers ok rather than lease_lost.
  boost::unordered_flat_map<JobId, uint64_t> acked_;
  std::deque<std::pair<int64_t, JobId>> acked_order_;

  JobId next_id_ = 1;
  uint64_t next_delivery_ = 1;
  int64_t next_order_ = 1;
  int64_t head_order_ = 0;  // decreasing: returned jobs lead their priority
  bool paused_ = false;
  bool noting_ = false;
  std::vector<Buried> buried_;
  int64_t pushed_ = 0, acked_count_ = 0, nacked_ = 0, expired_ = 0, cancelled_ = 0;
};

}  // namespace anteroom::core
