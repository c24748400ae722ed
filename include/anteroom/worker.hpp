#pragma once
// A queue worker over Client: long-polls for jobs, runs a handler per job on up to `concurrency`
// threads, acks (the ack riding on the next fetch) or nacks with the handler's error, extends
// the leases of running jobs at a third of the lease, and heartbeats. RequestStop() starts a
// drain: no more fetching, running handlers get up to `shutdown_grace_ms` to finish, then what
// is left is released at once (nack, delay 0) so another worker takes it without waiting for the
// lease; acks not yet sent go out before Run() returns. A fetch that gets no answer is tried
// again after a backoff (100 ms doubling to 10 s, jittered).
//
//   anteroom::Worker worker({.server_url = "http://127.0.0.1:8080", .queue = "emails"},
//                           [](const anteroom::Job& job) {
//                             send(job.payload);
//                             return anteroom::HandlerResult::Success();
//                           });
//   // from a signal handler (async-signal-safe): worker.RequestStop();
//   worker.Run();  // returns after the drain
//
// Threads: Run()'s thread fetches, one thread per handler slot runs handlers, one more extends
// leases and heartbeats; each has its own Client (a Client is not thread-safe).

#include <boost/json/value.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "anteroom/client.hpp"

namespace anteroom {

// One delivery, as the fetch answered it.
struct Job {
  std::string id;
  boost::json::value payload;  // parsed: a number beyond 64-bit integers is a double
  int64_t attempt = 1;         // 1 for the first delivery
  std::string lease;
  int64_t lease_expires_ms = 0;  // as delivered (ms since the epoch); extensions move it
  int64_t priority = 0;
  // The whole fetch answer this job came in and the job's index in its "jobs", for a handler
  // that needs the payload's text exactly as stored (numbers byte for byte).
  std::shared_ptr<const std::string> answer;
  size_t index = 0;

  // True once the worker has given the job back (its shutdown grace ran out, or StopNow()):
  // whatever the handler answers is ignored, and it should stop soon.
  bool abandoned() const { return abandoned_ && abandoned_->load(); }

  std::shared_ptr<std::atomic<bool>> abandoned_;  // set by the worker
};

// What a handler answers: success (the job is acked) or failure (nacked with `error`; the
// server retries with backoff, or dead-letters after max_attempts). A handler that throws
// fails with the exception's what().
struct HandlerResult {
  bool ok = true;
  std::string error;

  static HandlerResult Success() { return {}; }
  static HandlerResult Failure(std::string error) { return {false, std::move(error)}; }
};

// What the worker reports along the way, for logs and metrics.
struct WorkerEvent {
  enum class Kind {
    kAcked,               // job_id's ack was taken
    kAckRefused,          // job_id finished, but the server did not take its ack (text: why)
    kNacked,              // job_id failed and was nacked (text: the handler's error)
    kReleased,            // job_id was handed back unfinished (nack, delay 0) on the way out
    kLeaseLost,           // an extension of job_id's lease was refused: it may run elsewhere
    kReclaimed,           // the first fetch took back `count` jobs in flight under this name
    kReclaimUnsupported,  // the server refused "reclaim": fetching without it (once)
    kRequestFailed,       // a fetch, extension or heartbeat got no good answer (text: what)
    kDraining,            // the drain began: no more fetching
    kStopped,             // Run() is about to return
  };
  Kind kind;
  std::string job_id;
  std::string text;
  int64_t count = 0;
};

struct WorkerOptions {
  std::string server_url = "http://127.0.0.1:8080";
  std::string key;  // queue key or admin key, sent as a Bearer token (empty: none)
  ClientTls tls;    // for an https:// server_url
  std::string queue;
  // Stable across restarts for reclaim; empty: a random one ("worker-" and 16 hex digits).
  std::string worker_id;
  int concurrency = 1;                 // handlers at once, 1..1000 (also the fetch's largest `max`)
  int64_t lease_ms = 30'000;           // per delivery; running jobs are extended at a third of it
  int64_t heartbeat_ms = 10'000;       // the heartbeat's ttl; sent every third of it
  int64_t shutdown_grace_ms = 25'000;  // how long a drain waits for running handlers
  int64_t wait_ms = 30'000;            // a fetch's long poll, 0..60000
  // The first fetch sends "reclaim": true: jobs still in flight under worker_id (from before a
  // restart) come back to this worker first. Default: on when worker_id is given. A server
  // that refuses the field (400) gets fetches without it from then on (kReclaimUnsupported).
  std::optional<bool> reclaim_on_start;
  // Called from the worker's threads, possibly at once and under the worker's lock: must be
  // thread-safe and quick, and may call no Worker method but RequestStop, StopNow, stopping.
  std::function<void(const WorkerEvent&)> on_event;
};

class Worker {
 public:
  using Handler = std::function<HandlerResult(const Job&)>;

  Worker(WorkerOptions options, Handler handler);
  // Waits for handler threads still running (told by Job::abandoned()).
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Fetches and runs jobs until RequestStop(), then drains and returns. Once per Worker.
  void Run();

  // Starts the drain: a parked long poll is cut short at once. Async-signal-safe (an atomic
  // and a write to an eventfd): may be called from a signal handler, and before Run().
  void RequestStop() noexcept;
  // Ends the drain's grace at once: running jobs are released now. Async-signal-safe.
  void StopNow() noexcept;

  bool stopping() const noexcept;
  const std::string& worker_id() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anteroom
