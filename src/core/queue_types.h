#pragma once
// Values that cross the engine interface for queues. Plain data, shared by every backend and
// the HTTP layer. Payloads are opaque bytes here (the HTTP layer stores serialized JSON).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/hangup.h"
#include "core/queue_limits.h"

namespace anteroom::core {

// Wire ranges (enforced by the HTTP layer before the engine sees a value).
inline constexpr int64_t kMinLeaseMs = 100;
inline constexpr int64_t kMaxLeaseMs = 43'200'000;  // 12 h
inline constexpr int64_t kDefaultLeaseMs = 30'000;
inline constexpr int32_t kDefaultMaxAttempts = 5;
// A failed delivery without a delay waits base * 2^(attempt - 1), at most the cap, +-20%.
inline constexpr int64_t kBackoffBaseMs = 1'000;
inline constexpr int64_t kBackoffCapMs = 3'600'000;
inline constexpr int kBackoffMaxShift = 22;  // 2^22 s is past the cap already
// How long, and for how many jobs, a repeated ack still answers ok.
inline constexpr int64_t kAckMemoryMs = 3'600'000;
inline constexpr size_t kAckMemoryMax = 1'000'000;
inline constexpr int32_t kMaxMaxAttempts = 1000;
inline constexpr size_t kMaxBatch = 1000;
// What a failed attempt keeps: its error up to kMaxErrorBytes (BoundedError), and a job the
// errors of its last kKeptAttempts attempts. A worker's nack cannot grow a job's record (in
// memory, in the log, in Redis) without bound: 1,000 attempts of a 16 MiB error each would.
inline constexpr size_t kMaxErrorBytes = 8 * 1024;
inline constexpr size_t kKeptAttempts = 10;
// A job's group (a tenant, a customer, an API key): what per-group limits and round-robin turns
// are kept by. Bounded, as every group named by a job is held while the job is.
inline constexpr size_t kMaxGroupBytes = 128;
// How many jobs one job may wait on (JobSpec::depends_on).
inline constexpr size_t kMaxDependencies = 100;

using JobId = uint64_t;

struct JobSpec {
  std::string payload;
  int64_t delay_ms = 0;
  int32_t priority = 0;
  std::optional<std::string> dedupe_key;
  int32_t max_attempts = kDefaultMaxAttempts;
  std::string group;  // "": none (exempt from per-group limits)
  // Jobs of the same queue this one waits for (waiting_deps, not fetchable) until every one is
  // acked. One that dies, is cancelled or is not known fails it at once, unless
  // `ignore_failed_dependencies` (then it only stops waiting for it).
  std::vector<JobId> depends_on;
  bool ignore_failed_dependencies = false;
  std::string batch;  // "": none; else an open batch of the queue (Queue::CanJoin)
};

// A batch of jobs with callbacks (POST /v1/queues/{q}/batches): jobs join it at push until it is
// sealed; once sealed with none of its jobs pending it settles, and its callbacks are pushed to
// the queue then, each once: on_complete always, on_success when none died or was cancelled.
// on_dead is pushed once, when the first of its jobs dies.
struct BatchSpec {
  std::optional<JobSpec> on_success;
  std::optional<JobSpec> on_complete;
  std::optional<JobSpec> on_dead;
};
inline constexpr size_t kMaxOpenBatches = 10'000;  // per queue: unsettled batches

struct BatchView {
  std::string id;
  bool sealed = false;
  bool settled = false;
  int64_t pending = 0;  // jobs not yet acked, dead or cancelled
  int64_t acked = 0;
  int64_t dead = 0;
  int64_t cancelled = 0;
  int64_t created_ms = 0;
  int64_t settled_ms = 0;
  // The callback jobs pushed so far (0: not pushed).
  JobId on_success_job = 0;
  JobId on_complete_job = 0;
  JobId on_dead_job = 0;
};

enum class BatchOutcome : uint8_t { kOk, kUnknown, kSealed, kExists, kTooMany };

// What a job may carry for whoever looks it up (GET /v1/queues/{q}/jobs/{id}): the result its
// worker gave at ack, its latest progress (both JSON text, as the HTTP layer wrote them), and a
// log a worker appends to, of which the last kKeptLogLines lines are kept, each cut to
// kMaxLogLineBytes. Bounded, as each is held in memory (and in the log, and in Redis) for as
// long as the job is.
inline constexpr size_t kMaxResultBytes = 64 * 1024;
inline constexpr size_t kMaxProgressBytes = 4 * 1024;
inline constexpr size_t kMaxLogLineBytes = 1024;
inline constexpr size_t kKeptLogLines = 100;

// How many finished jobs (acked or cancelled) a queue keeps for lookup, and for how long: a
// finished job goes when it is past either. count 0: none is kept.
struct KeepFinished {
  int64_t count = 1'000;
  int64_t age_ms = 86'400'000;  // a day
  friend bool operator==(const KeepFinished&, const KeepFinished&) = default;
};
inline constexpr int64_t kMaxKeepCount = 1'000'000;
inline constexpr int64_t kMaxKeepAgeMs = 30 * 86'400'000LL;  // 30 days

// What a queue's owner sets for it (PUT /v1/queues/{q}/settings), kept durably beside its jobs.
struct QueueSettings {
  QueueLimits limits;
  KeepFinished keep_acked;
  friend bool operator==(const QueueSettings&, const QueueSettings&) = default;
};

struct PushResult {
  JobId id = 0;
  bool created = true;  // false: a dedupe hit answered an existing job
};

struct Delivery {
  JobId id = 0;
  std::string payload;
  int32_t attempt = 0;  // 1 for the first delivery
  std::string lease;
  int64_t lease_expires_ms = 0;
  int32_t priority = 0;
  std::string group;
  // When the job became ready (its wait is the fetch's time minus this); 0: not known.
  int64_t ready_ms = 0;
};

// Per-item outcome of ack, nack and extend.
enum class LeaseOutcome : uint8_t { kOk, kLeaseLost, kInvalidLease };
const char* ToString(LeaseOutcome outcome);

// A fetch, optionally acking the worker's finished jobs first: a worker loop then needs one
// request per job (finish one, take the next), as BullMQ's moveToFinished does.
struct FetchRequest {
  std::string worker;
  size_t max = 1;
  int64_t lease_ms = kDefaultLeaseMs;
  int64_t wait_ms = 0;                   // > 0: long poll
  std::vector<std::string> ack;          // acked before the fetch, whether or not it then waits
  std::vector<std::string> ack_results;  // empty, or one per `ack` (Backend::Ack's `results`)
  // First take back the jobs in flight under `worker` (Queue::Reclaim): a worker with a stable
  // name does so once, when it starts again after a crash.
  bool reclaim = false;
  // Signalled when the client hangs up while the fetch is parked: the waiter is then dropped
  // and nothing is delivered to it. Null: nobody watches (the engine's own callers).
  std::shared_ptr<Hangup> hangup;
};

struct FetchAnswer {
  std::vector<LeaseOutcome> acked;        // one per FetchRequest::ack, in order
  std::vector<std::string> acked_leases;  // FetchRequest::ack handed back, for the answer
  std::vector<Delivery> jobs;
  size_t reclaimed = 0;  // how many of `jobs` were the worker's own, taken back (the first ones)
};

struct InflightJob {
  JobId id = 0;
  std::string worker;
  int32_t attempt = 0;
  int64_t lease_expires_ms = 0;
};

// `error` cut to at most kMaxErrorBytes, at a UTF-8 character's start, ending with a marker
// that says how long it was ("... [truncated: 8388608 bytes]"); shorter errors as they are.
std::string BoundedError(std::string_view error);
// `text` cut the same way to at most `max` bytes (max > 40, room for the marker).
std::string BoundedText(std::string_view text, size_t max);
// A line of a job's log: BoundedText(line, kMaxLogLineBytes).
std::string BoundedLogLine(std::string_view line);

struct FailedAttempt {
  int32_t attempt = 0;
  std::string error;
  int64_t at_ms = 0;
};

struct DeadJob {
  JobId id = 0;
  std::string payload;
  int32_t attempts = 0;
  std::string error;
  int64_t failed_at_ms = 0;
  std::vector<FailedAttempt> history;
};

struct QueueStats {
  int64_t waiting = 0;  // for their dependencies
  int64_t ready = 0;
  int64_t delayed = 0;
  int64_t inflight = 0;
  int64_t dead = 0;
  int64_t pushed = 0;
  int64_t acked = 0;
  int64_t nacked = 0;
  int64_t expired = 0;
  int64_t cancelled = 0;
  int64_t workers = 0;  // with jobs in flight or a live heartbeat
  bool paused = false;
};

enum class CancelOutcome : uint8_t { kCancelled, kUnknown, kInFlight };

// Where a job is. kAcked and kCancelled are kept only as long as the queue's keep_acked says
// (a job past it, or never pushed, is unknown).
enum class JobState : uint8_t {
  kWaitingDeps,
  kDelayed,
  kReady,
  kInflight,
  kAcked,
  kDead,
  kCancelled
};
const char* ToString(JobState state);

struct JobLogLine {
  int64_t at_ms = 0;
  std::string text;
  friend bool operator==(const JobLogLine&, const JobLogLine&) = default;
};

// What became of a job another one depends on, as the dependent saw it (kPending: not yet).
// kMissing: not known when the dependent was pushed (never pushed, or finished and forgotten).
enum class DependencyState : uint8_t { kPending, kAcked, kDead, kCancelled, kMissing };
const char* ToString(DependencyState state);

struct DependencyView {
  JobId id = 0;
  DependencyState state = DependencyState::kPending;
  std::optional<std::string> result;  // acked with one
  friend bool operator==(const DependencyView&, const DependencyView&) = default;
};

// One job as GET /v1/queues/{q}/jobs/{id} shows it.
struct JobView {
  JobId id = 0;
  JobState state = JobState::kReady;
  std::string payload;
  int32_t priority = 0;
  std::string group;
  int32_t attempts = 0;  // deliveries so far
  int32_t max_attempts = kDefaultMaxAttempts;
  // delayed: when it becomes ready; inflight: when its lease expires; otherwise 0.
  int64_t due_ms = 0;
  // acked, cancelled, dead: when it got there; otherwise 0.
  int64_t finished_ms = 0;
  std::vector<FailedAttempt> history;  // the last kKeptAttempts failures, oldest first
  std::optional<std::string> progress;
  std::optional<std::string> result;  // acked with one
  std::vector<JobLogLine> log;        // the last kKeptLogLines lines, oldest first
  int64_t log_dropped = 0;            // lines appended before those, no longer kept
  std::vector<JobId> depends_on;
  int32_t waiting_on = 0;  // dependencies not yet settled
  std::string batch;       // the batch it joined at push ("": none)
};

}  // namespace anteroom::core
