// Queues in the Redis backend: queue.lua per operation, leases signed here, and the long
// polls parked in this process.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>

#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include "common/wire_errors.h"
#include "core/lease_codec.h"
#include "store/redis/polls.h"
#include "store/redis/redis_backend.h"
#include "store/redis/script_replies.h"

namespace anteroom::store::redis {

namespace {
using Outcomes = std::vector<core::LeaseOutcome>;

template <typename T>
OpResult<T> Fail(const OpResult<Reply>& r) {
  return {r.status(), r.message()};
}
}  // namespace

// ---- leases --------------------------------------------------------------------------------

// As core::Queue: base64url of the first 12 bytes of the MAC of name "/" id "." delivery.
std::string RedisBackend::LeaseFor(Shard& s, const std::string& queue, core::JobId id,
                                   uint64_t delivery) {
  return core::EncodeLease(s.lease_mac, queue, id, delivery);
}

bool RedisBackend::ParseLease(Shard& s, const std::string& queue, std::string_view lease,
                              core::JobId& id, uint64_t& delivery) {
  std::optional<core::LeaseRef> ref = core::DecodeLease(s.lease_mac, queue, lease);
  if (!ref) return false;
  id = ref->id;
  delivery = ref->delivery;
  return true;
}

std::vector<std::string> RedisBackend::LeaseArgs(Shard& s, const std::string& queue,
                                                 const std::vector<std::string>& leases,
                                                 std::vector<int>& slots, bool triples) {
  std::vector<std::string> args;
  int valid = 0;
  std::uniform_real_distribution<double> jitter(0.8, 1.2);
  for (const std::string& lease : leases) {
    core::JobId id;
    uint64_t delivery;
    if (!ParseLease(s, queue, lease, id, delivery)) {
      slots.push_back(-1);
      continue;
    }
    slots.push_back(valid++);
    args.push_back(std::to_string(id));
    args.push_back(std::to_string(delivery));
    if (triples) args.push_back(fmt::format("{:.6f}", jitter(s.rng)));
  }
  return args;
}

Outcomes RedisBackend::MergeOutcomes(const std::vector<int>& slots, const Outcomes& outcomes) {
  Outcomes out;
  out.reserve(slots.size());
  for (int slot : slots) {
    out.push_back(slot < 0 ? core::LeaseOutcome::kInvalidLease
                           : outcomes[static_cast<size_t>(slot)]);
  }
  return out;
}

std::vector<core::Delivery> RedisBackend::Deliveries(Shard& s, const std::string& queue,
                                                     std::vector<LeasedJob> jobs) {
  std::vector<core::Delivery> out;
  out.reserve(jobs.size());
  for (LeasedJob& j : jobs) {
    out.push_back({.id = j.id,
                   .payload = std::move(j.payload),
                   .attempt = j.attempt,
                   .lease = LeaseFor(s, queue, j.id, j.delivery),
                   .lease_expires_ms = j.lease_expires_ms,
                   .priority = j.priority,
                   .group = std::move(j.group),
                   .ready_ms = j.ready_ms});
    if (j.ready_ms > 0) ProcessEngineMetrics().job_wait.ObserveMs(j.leased_ms - j.ready_ms);
  }
  return out;
}

// ---- operations ----------------------------------------------------------------------------

void RedisBackend::JobArgs(const core::JobSpec& j, std::vector<std::string>& argv) {
  argv.push_back(j.payload);
  argv.push_back(std::to_string(j.delay_ms));
  argv.push_back(std::to_string(j.priority));
  argv.push_back(j.dedupe_key ? "=" + *j.dedupe_key : "");
  argv.push_back(std::to_string(j.max_attempts));
  argv.push_back(j.group);
  argv.push_back(j.batch);
  // depends_on: the ignore flag, then each id in decimal (ids past what Lua's numbers hold
  // exactly are longer than any job's, and the script finds them missing by their length).
  std::string deps;
  if (!j.depends_on.empty()) {
    deps = j.ignore_failed_dependencies ? "1" : "0";
    for (core::JobId id : j.depends_on) deps += " " + std::to_string(id);
  }
  argv.push_back(std::move(deps));
}

void RedisBackend::Push(std::string queue, std::vector<core::JobSpec> jobs,
                        Completion<std::vector<core::PushResult>> done) {
  Post([this, queue = std::move(queue), jobs = std::move(jobs), done = std::move(done)](Shard& s) {
    std::vector<std::string> argv{"push", std::to_string(jobs.size())};
    argv.reserve(2 + jobs.size() * 8);
    bool batched = false;
    for (const core::JobSpec& j : jobs) {
      JobArgs(j, argv);
      batched = batched || !j.batch.empty();
    }
    WithinCap(s, 'q', queue,
              [this, &s, queue, batched, argv = std::move(argv),
               done](std::optional<std::string> refusal) mutable {
                // A queue that cannot be made has no batch: the batch is what is refused first,
                // as the embedded backend refuses it.
                if (refusal && batched) {
                  return done({OpStatus::kUnknownBatch, std::string(wire::kUnknownBatch)});
                }
                if (refusal) return done({OpStatus::kLimitReached, std::move(*refusal)});
                QueueScript(s, queue, std::move(argv), [this, &s, queue, done](OpResult<Reply> r) {
                  if (!r.ok()) return done(Fail<std::vector<core::PushResult>>(r));
                  Created(s, 'q', queue, [done, out = ParsePush(*r)] { done(out); });
                });
              });
  });
}

void RedisBackend::Fetch(std::string queue, core::FetchRequest request,
                         Completion<core::FetchAnswer> done) {
  int64_t started = clock_.NowMs();  // a long poll's deadline counts from the call
  Post([this, queue = std::move(queue), request = std::move(request), started,
        done = std::move(done)](Shard& s) mutable {
    std::vector<int> slots;
    std::vector<std::string> acks = LeaseArgs(s, queue, request.ack, slots, false);
    size_t valid = acks.size() / 2;
    // Each valid ack as (id, delivery, result).
    std::vector<std::string> ack_args;
    ack_args.reserve(valid * 3);
    for (size_t k = 0; k < slots.size(); ++k) {
      if (slots[k] < 0) continue;
      size_t at = static_cast<size_t>(slots[k]) * 2;
      ack_args.push_back(std::move(acks[at]));
      ack_args.push_back(std::move(acks[at + 1]));
      ack_args.push_back(k < request.ack_results.size() ? request.ack_results[k] : "");
    }
    // A client already gone: its acks only (that work was done), no job, no wait.
    bool gone = request.hangup && request.hangup->happened();
    std::vector<std::string> argv{"fetch",
                                  request.worker,
                                  gone ? "0" : std::to_string(request.max),
                                  std::to_string(request.lease_ms),
                                  gone ? "0" : std::to_string(request.wait_ms),
                                  std::to_string(valid)};
    argv.insert(argv.end(), std::make_move_iterator(ack_args.begin()),
                std::make_move_iterator(ack_args.end()));
    if (request.reclaim && !gone) argv.push_back("1");
    QueueScript(s, queue, std::move(argv),
                [this, &s, queue, request = std::move(request), slots = std::move(slots), valid,
                 started, done = std::move(done)](OpResult<Reply> r) mutable {
                  if (!r.ok()) return done(Fail<core::FetchAnswer>(r));
                  FetchReply reply = ParseFetch(*r, valid);
                  core::FetchAnswer answer;
                  answer.acked = MergeOutcomes(slots, reply.acked);
                  answer.jobs = Deliveries(s, queue, std::move(reply.jobs));
                  answer.reclaimed = reply.reclaimed;
                  // The client hung up while the script ran: what it leased goes back at once.
                  if (request.hangup && request.hangup->happened()) {
                    GiveBack(s, queue, answer.jobs);
                    return done(HungUp());
                  }
                  answer.acked_leases = std::move(request.ack);
                  request.ack.clear();
                  bool released = request.hangup && request.hangup->released();
                  if (!answer.jobs.empty() || request.wait_ms <= 0 || released) {
                    return done(std::move(answer));
                  }
                  int64_t deadline = started + request.wait_ms;
                  int64_t retry_in = reply.retry_in_ms;
                  if (&s == &home()) {
                    return Park(queue, std::move(request), std::move(answer), deadline, retry_in,
                                std::move(done));
                  }
                  boost::asio::post(home().io, [this, queue, request = std::move(request),
                                                answer = std::move(answer), deadline, retry_in,
                                                done = std::move(done)]() mutable {
                    Park(queue, std::move(request), std::move(answer), deadline, retry_in,
                         std::move(done));
                  });
                });
  });
}

OpResult<core::FetchAnswer> RedisBackend::HungUp() {
  return {OpStatus::kUnavailable, std::string(wire::kClientHungUp)};
}

// Deliveries whose answer can reach nobody (the client hung up while the fetch ran) go back to
// the head of the queue at once, their attempt not counted: queue.lua `giveback`. A nack would
// count a failure (history, and a dead letter at the last attempt), and a lease of 0 would
// expire as one; neither happened to the job.
void RedisBackend::GiveBack(Shard& s, const std::string& queue,
                            const std::vector<core::Delivery>& jobs) {
  if (jobs.empty()) return;
  std::vector<std::string> argv{"giveback", "0"};
  for (const core::Delivery& d : jobs) {
    core::JobId id;
    uint64_t delivery;
    if (!ParseLease(s, queue, d.lease, id, delivery)) continue;  // signed here: cannot fail
    argv.push_back(std::to_string(id));
    argv.push_back(std::to_string(delivery));
  }
  argv[1] = std::to_string((argv.size() - 2) / 2);
  QueueScript(s, queue, std::move(argv), [queue](OpResult<Reply> r) {
    // Lost with Redis: the lease brings the jobs back when it ends, as after any failure.
    if (!r.ok())
      spdlog::warn("queue {}: could not give back a hung-up fetch's jobs: {}", queue, r.message());
  });
}

void RedisBackend::LeaseOp(const char* op, std::string queue, std::vector<std::string> leases,
                           std::vector<std::string> tail, Completion<Outcomes> done,
                           std::vector<std::string> each) {
  Post([this, op, queue = std::move(queue), leases = std::move(leases), tail = std::move(tail),
        each = std::move(each), done = std::move(done)](Shard& s) {
    std::vector<int> slots;
    std::vector<std::string> args = LeaseArgs(s, queue, leases, slots, true);
    size_t valid = args.size() / 3;
    std::vector<std::string> argv{op, std::to_string(valid)};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), tail.begin(), tail.end());
    // `each` of the valid leases only, in their order (the script numbers those alone).
    for (size_t k = 0; k < each.size() && k < slots.size(); ++k) {
      if (slots[k] >= 0) argv.push_back(each[k]);
    }
    QueueScript(s, queue, std::move(argv),
                [slots = std::move(slots), valid, done](OpResult<Reply> r) {
                  if (!r.ok()) return done(Fail<Outcomes>(r));
                  done(MergeOutcomes(slots, ParseLeaseOutcomes(*r, valid)));
                });
  });
}

// Each lease's result goes after the leases (queue.lua op_ack); none when no lease has one.
void RedisBackend::Ack(std::string queue, std::vector<std::string> leases,
                       std::vector<std::string> results, Completion<Outcomes> done) {
  bool any = std::any_of(results.begin(), results.end(), [](auto& r) { return !r.empty(); });
  if (any) results.resize(leases.size());
  LeaseOp("ack", std::move(queue), std::move(leases), {}, std::move(done),
          any ? std::move(results) : std::vector<std::string>{});
}

// Creates the queue within --max-queues and counts its name, as a first push does. The
// callbacks are kept as push arguments, pushed by the script when the batch calls for them.
void RedisBackend::CreateBatch(std::string queue, std::string id, core::BatchSpec spec,
                               Completion<core::BatchView> done) {
  Post([this, queue = std::move(queue), id = std::move(id), spec = std::move(spec),
        done = std::move(done)](Shard& s) {
    std::vector<std::string> argv{"batchcreate", id};
    for (const std::optional<core::JobSpec>* callback :
         {&spec.on_success, &spec.on_complete, &spec.on_dead}) {
      argv.push_back(*callback ? "1" : "0");
      if (*callback) JobArgs(**callback, argv);
    }
    WithinCap(s, 'q', queue,
              [this, &s, queue, argv = std::move(argv),
               done](std::optional<std::string> refusal) mutable {
                if (refusal) return done({OpStatus::kLimitReached, std::move(*refusal)});
                QueueScript(s, queue, std::move(argv), [this, &s, queue, done](OpResult<Reply> r) {
                  if (!r.ok()) return done(Fail<core::BatchView>(r));
                  std::optional<core::BatchView> view = ParseBatchView(*r);
                  if (!view) return done({OpStatus::kInternal, "redis: a batch not made"});
                  Created(s, 'q', queue, [done, view = std::move(*view)] { done(view); });
                });
              });
  });
}

void RedisBackend::BatchOp(const char* op, std::string queue, std::string id,
                           Completion<core::BatchView> done) {
  Post([this, op, queue = std::move(queue), id = std::move(id), done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {op, id}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<core::BatchView>(r));
      std::optional<core::BatchView> view = ParseBatchView(*r);
      if (!view) return done({OpStatus::kUnknownBatch, std::string(wire::kUnknownBatch)});
      done(std::move(*view));
    });
  });
}

void RedisBackend::SealBatch(std::string queue, std::string id, Completion<core::BatchView> done) {
  BatchOp("batchseal", std::move(queue), std::move(id), std::move(done));
}

void RedisBackend::GetBatch(std::string queue, std::string id, Completion<core::BatchView> done) {
  BatchOp("batch", std::move(queue), std::move(id), std::move(done));
}

void RedisBackend::GetJobDependencies(std::string queue, core::JobId id,
                                      Completion<std::vector<core::DependencyView>> done) {
  using Deps = std::vector<core::DependencyView>;
  if (id > kMaxScriptJobId) return done({OpStatus::kUnknownJob, std::string(wire::kNoSuchJob)});
  Post([this, queue = std::move(queue), id, done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"jobdeps", std::to_string(id)}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<Deps>(r));
      std::optional<Deps> deps = ParseDependencies(*r);
      if (!deps) return done({OpStatus::kUnknownJob, std::string(wire::kNoSuchJob)});
      done(std::move(*deps));
    });
  });
}

void RedisBackend::GetJob(std::string queue, core::JobId id, Completion<core::JobView> done) {
  // Ids are numbers below 2^53 in Lua (as the embedded backend's never come near): a larger one
  // names no job.
  if (id > kMaxScriptJobId) {
    return done({OpStatus::kUnknownJob, std::string(wire::kNoSuchJob)});
  }
  Post([this, queue = std::move(queue), id, done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"getjob", std::to_string(id)}, [id, done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<core::JobView>(r));
      std::optional<core::JobView> view = ParseJobView(id, *r);
      if (!view) return done({OpStatus::kUnknownJob, std::string(wire::kNoSuchJob)});
      done(std::move(*view));
    });
  });
}

// Progress and log lines name their lease, checked here as an ack's is (a forged or malformed
// one is kInvalidLease before Redis is asked); the script checks that it is the current
// delivery.
void RedisBackend::ReportOp(const char* op, std::string queue, std::string lease,
                            std::vector<std::string> args, Completion<core::LeaseOutcome> done) {
  Post([this, op, queue = std::move(queue), lease = std::move(lease), args = std::move(args),
        done = std::move(done)](Shard& s) mutable {
    core::JobId id;
    uint64_t delivery;
    if (!ParseLease(s, queue, lease, id, delivery)) return done(core::LeaseOutcome::kInvalidLease);
    std::vector<std::string> argv{op, std::to_string(id), std::to_string(delivery)};
    argv.insert(argv.end(), std::make_move_iterator(args.begin()),
                std::make_move_iterator(args.end()));
    QueueScript(s, queue, std::move(argv), [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<core::LeaseOutcome>(r));
      done(ParseLeaseOutcome(*r));
    });
  });
}

void RedisBackend::SetProgress(std::string queue, std::string lease, std::string progress,
                               Completion<core::LeaseOutcome> done) {
  ReportOp("progress", std::move(queue), std::move(lease), {std::move(progress)}, std::move(done));
}

// Each line is cut here (core::BoundedLogLine), so the script only appends and trims.
void RedisBackend::AppendJobLog(std::string queue, std::string lease,
                                std::vector<std::string> lines,
                                Completion<core::LeaseOutcome> done) {
  for (std::string& line : lines) {
    if (line.size() > core::kMaxLogLineBytes) line = core::BoundedLogLine(line);
  }
  ReportOp("joblog", std::move(queue), std::move(lease), std::move(lines), std::move(done));
}

void RedisBackend::Nack(std::string queue, std::vector<std::string> leases,
                        std::optional<int64_t> delay_ms, std::string error,
                        Completion<Outcomes> done) {
  LeaseOp("nack", std::move(queue), std::move(leases),
          {delay_ms ? std::to_string(*delay_ms) : "", core::BoundedError(error)}, std::move(done));
}

void RedisBackend::Extend(std::string queue, std::vector<std::string> leases, int64_t lease_ms,
                          Completion<Outcomes> done) {
  LeaseOp("extend", std::move(queue), std::move(leases), {std::to_string(lease_ms)},
          std::move(done));
}

void RedisBackend::Heartbeat(std::string queue, std::string worker, int64_t ttl_ms,
                             Completion<Done> done) {
  Post([this, queue = std::move(queue), worker = std::move(worker), ttl_ms,
        done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"heartbeat", worker, std::to_string(ttl_ms)}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<Done>(r));
      done(Done{});
    });
  });
}

void RedisBackend::ReleaseWorker(std::string queue, std::string worker, Completion<size_t> done) {
  Post([this, queue = std::move(queue), worker = std::move(worker),
        done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"release", worker}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<size_t>(r));
      done(ParseJobCount(*r));
    });
  });
}

void RedisBackend::GetQueue(std::string queue, Completion<core::QueueStats> done) {
  Post([this, queue = std::move(queue), done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"stats"}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<core::QueueStats>(r));
      done(ParseStats(*r).stats);
    });
  });
}

void RedisBackend::ListQueues(
    Completion<std::vector<std::pair<std::string, core::QueueStats>>> done) {
  Post([this, done = std::move(done)](Shard& s) {
    auto read = [this](Shard& s, const std::string& name, Answer<core::QueueStats> answer) {
      QueueScript(s, name, {"stats"}, [answer](OpResult<Reply> r) {
        if (!r.ok()) return answer({r.status(), r.message()});
        StatsReply reply = ParseStats(*r);
        if (!reply.counted) return answer(std::optional<core::QueueStats>());
        // Pushed to at least once, or holding a key: listed.
        answer(std::optional(reply.stats));
      });
    };
    ReadRegistered<core::QueueStats>(s, 'q', read, std::move(done));
  });
}

void RedisBackend::Inflight(std::string queue, std::optional<std::string> worker,
                            Completion<std::vector<core::InflightJob>> done) {
  Post([this, queue = std::move(queue), worker = std::move(worker),
        done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"inflight", worker.value_or("")}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<std::vector<core::InflightJob>>(r));
      done(ParseInflight(*r));
    });
  });
}

void RedisBackend::Dead(std::string queue, size_t limit,
                        Completion<std::vector<core::DeadJob>> done) {
  Post([this, queue = std::move(queue), limit, done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"dead", std::to_string(limit)}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<std::vector<core::DeadJob>>(r));
      done(ParseDead(*r));
    });
  });
}

void RedisBackend::RequeueDead(std::string queue, std::optional<std::vector<core::JobId>> ids,
                               Completion<size_t> done) {
  Post([this, queue = std::move(queue), ids = std::move(ids), done = std::move(done)](Shard& s) {
    std::vector<std::string> argv{"requeue"};
    if (!ids) {
      argv.push_back("*");
    } else {
      argv.push_back(std::to_string(ids->size()));
      for (core::JobId id : *ids) argv.push_back(std::to_string(id));
    }
    QueueScript(s, queue, std::move(argv), [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<size_t>(r));
      done(ParseJobCount(*r));
    });
  });
}

void RedisBackend::Cancel(std::string queue, core::JobId id, Completion<core::CancelOutcome> done) {
  Post([this, queue = std::move(queue), id, done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"cancel", std::to_string(id)}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<core::CancelOutcome>(r));
      done(ParseCancel(*r));
    });
  });
}

void RedisBackend::SetPaused(std::string queue, bool paused, Completion<Done> done) {
  Post([this, queue = std::move(queue), paused, done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"setpaused", paused ? "1" : "0"}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<Done>(r));
      done(Done{});
    });
  });
}

// The queue's own key, kept by queue.lua (`setkey`) at KeyLayout::QueueKey. Setting one
// creates the queue within --max-queues and counts its name, as a first push does; removing
// the key of a queue never pushed to uncounts the name (the script forgets the queue too if it
// holds nothing else).
void RedisBackend::SetQueueKey(std::string queue, std::optional<std::string> digest,
                               Completion<Done> done) {
  if (digest && digest->size() != kQueueKeyDigestBytes) {
    return done({OpStatus::kInvalidArgument, std::string(wire::kQueueKeyDigestSize)});
  }
  Post([this, queue = std::move(queue), digest = std::move(digest),
        done = std::move(done)](Shard& s) {
    if (!digest) {
      QueueScript(s, queue, {"setkey", ""}, [this, &s, queue, done](OpResult<Reply> r) {
        if (!r.ok()) return done(Fail<Done>(r));
        if (!ParseKeyRemovalUncounts(*r)) return done(Done{});
        Uncounted(s, 'q', queue, [done] { done(Done{}); });
      });
      return;
    }
    WithinCap(
        s, 'q', queue,
        [this, &s, queue, digest = *digest, done](std::optional<std::string> refusal) {
          if (refusal) {
            return done({OpStatus::kLimitReached, wire::TooManyQueuesForAKey(options_.max_queues)});
          }
          QueueScript(s, queue, {"setkey", digest}, [this, &s, queue, done](OpResult<Reply> r) {
            if (!r.ok()) return done(Fail<Done>(r));
            Created(s, 'q', queue, [done] { done(Done{}); });
          });
        });
  });
}

// A plain GET: the key is written whole by one script, so no script is needed to read it.
void RedisBackend::GetQueueKey(std::string queue, Completion<std::optional<std::string>> done) {
  Post([this, queue = std::move(queue), done = std::move(done)](Shard& s) {
    std::string key = keys_.QueueKey(queue);
    s.client->Call(key, {"GET", key}, [done](Reply r) {
      if (r.failed()) {
        return done({OpStatus::kUnavailable, wire::RedisUnavailable(r.str)});
      }
      if (r.type != Reply::Type::kString) return done(std::optional<std::string>());
      done(std::optional<std::string>(std::move(r.str)));
    });
  });
}

void RedisBackend::Snooze(std::string queue, std::vector<std::string> leases, int64_t delay_ms,
                          Completion<Outcomes> done) {
  LeaseOp("snooze", std::move(queue), std::move(leases), {std::to_string(delay_ms)},
          std::move(done));
}

// Kept in the queue's state by queue.lua (`setsettings`), applied there from the next call on.
// Setting any (the defaults too) creates the queue within --max-queues and lists it, as a first
// push does.
void RedisBackend::SetQueueSettings(std::string queue, core::QueueSettings settings,
                                    Completion<Done> done) {
  if (!core::ValidLimits(settings.limits)) {
    return done({OpStatus::kInvalidArgument, std::string(wire::kQueueLimitsRange)});
  }
  Post([this, queue = std::move(queue), settings, done = std::move(done)](Shard& s) {
    WithinCap(s, 'q', queue,
              [this, &s, queue, argv = SettingsArgs(settings),
               done](std::optional<std::string> refusal) mutable {
                if (refusal) return done({OpStatus::kLimitReached, std::move(*refusal)});
                QueueScript(s, queue, std::move(argv), [this, &s, queue, done](OpResult<Reply> r) {
                  if (!r.ok()) return done(Fail<Done>(r));
                  Created(s, 'q', queue, [done] { done(Done{}); });
                });
              });
  });
}

void RedisBackend::GetQueueSettings(std::string queue, Completion<core::QueueSettings> done) {
  Post([this, queue = std::move(queue), done = std::move(done)](Shard& s) {
    QueueScript(s, queue, {"settings"}, [done](OpResult<Reply> r) {
      if (!r.ok()) return done(Fail<core::QueueSettings>(r));
      done(ParseQueueSettings(*r));
    });
  });
}

// queue.lua's eleven numbers of a queue's settings (op_set_settings): the limits, then
// keep_acked.
std::vector<std::string> RedisBackend::SettingsArgs(const core::QueueSettings& settings) {
  const core::QueueLimits& limits = settings.limits;
  std::vector<std::string> argv{"setsettings",
                                limits.fairness == core::Fairness::kRoundRobin ? "1" : "0"};
  for (const core::JobLimits* l : {&limits.per_group, &limits.queue}) {
    argv.push_back(std::to_string(l->rate ? l->rate->limit : 0));
    argv.push_back(std::to_string(l->rate ? l->rate->period_ms : 0));
    argv.push_back(std::to_string(l->rate ? l->rate->burst : 0));
    argv.push_back(std::to_string(l->concurrency));
  }
  argv.push_back(std::to_string(settings.keep_acked.count));
  argv.push_back(std::to_string(settings.keep_acked.age_ms));
  return argv;
}

// ---- long polls ----------------------------------------------------------------------------

void RedisBackend::Park(const std::string& queue, core::FetchRequest request,
                        core::FetchAnswer answer, int64_t deadline, int64_t retry_in,
                        Completion<core::FetchAnswer> done) {
  if (request.hangup && request.hangup->happened()) return done(HungUp());
  if (request.hangup && request.hangup->released()) return done(std::move(answer));
  auto& polls = polls_[queue];
  if (!polls) polls = std::make_unique<Polls>();
  auto w = std::make_shared<Waiter>(home().io, queue, std::move(request), std::move(answer),
                                    deadline, std::move(done));
  polls->waiters.push_back(w);
  ArmWaiter(w, retry_in);
  if (w->request.hangup) {
    // Signalled on any thread (or here, if the client is gone already): the waiter is dropped
    // on this one. The waiter is held weakly, and `this` is touched only while it is parked
    // (Retire clears the callback; the backend retires every waiter before it goes).
    w->request.hangup->OnHangup([this, weak = std::weak_ptr<Waiter>(w), &io = home().io] {
      boost::asio::post(io, [this, weak] {
        if (auto waiter = weak.lock(); waiter && !waiter->gone) DropWaiter(waiter);
      });
    });
  }
  // A job may have been pushed between the fetch and now: look once more.
  ServeWaiters(queue);
}

// Every process's waiters are woken when a held-back job may go (the script registers that time
// with the sweeper, whose `advance` then wakes them); the waiter's own process also looks again
// at that moment by itself, not up to a sweep interval later.
void RedisBackend::ArmWaiter(const std::shared_ptr<Waiter>& w, int64_t retry_in) {
  if (!options_.run_timer || w->gone) return;
  int64_t to_deadline = std::max<int64_t>(0, w->deadline - clock_.NowMs());
  bool retry = retry_in > 0 && retry_in < to_deadline;
  w->timer.expires_after(std::chrono::milliseconds(retry ? retry_in : to_deadline));
  w->timer.async_wait([this, w, retry](const boost::system::error_code& ec) {
    if (ec || w->gone) return;
    if (!retry) return ExpireWaiters(clock_.NowMs());
    ArmWaiter(w, 0);
    Wake(w->queue);
  });
}

// A waiter whose client hung up leaves the line at once, answered with no job; unless its fetch
// is in flight: that answer drops it (and gives back what it leased).
void RedisBackend::DropWaiter(const std::shared_ptr<Waiter>& w) {
  auto it = polls_.find(w->queue);
  if (it == polls_.end()) return;
  Polls& p = *it->second;
  if (p.serving && !p.waiters.empty() && p.waiters.front() == w) return;
  p.waiters.remove(w);
  w->Retire();
  if (p.waiters.empty() && !p.serving) polls_.erase(it);
  // Released (the server draining): its acks and no job, as when its wait runs out.
  if (w->request.hangup->released()) return w->done(std::move(w->answer));
  w->done(HungUp());
}

void RedisBackend::Wake(const std::string& queue) {
  auto it = polls_.find(queue);
  if (it != polls_.end() && !it->second->waiters.empty()) ServeWaiters(queue);
}

// By name, from a copy: waking a queue whose waiters all hung up erases its entry
// (ServeWaiters), which would invalidate an iterator over polls_ (a segfault seen in CI).
void RedisBackend::WakeAll() {
  std::vector<std::string> queues;
  queues.reserve(polls_.size());
  for (const auto& entry : polls_) queues.push_back(entry.first);
  for (const std::string& queue : queues) Wake(queue);
}

// Fetches for the oldest waiter; while that succeeds, for the next one.
void RedisBackend::ServeWaiters(const std::string& queue) {
  auto it = polls_.find(queue);
  if (it == polls_.end()) return;
  Polls& p = *it->second;
  if (p.serving) {
    p.again = true;
    return;
  }
  // Waiters whose client hung up are not served (their drop may not have run yet).
  std::vector<std::shared_ptr<Waiter>> dropped;
  while (!p.waiters.empty() && p.waiters.front()->hung_up()) {
    dropped.push_back(std::move(p.waiters.front()));
    p.waiters.pop_front();
    dropped.back()->Retire();
  }
  bool empty = p.waiters.empty();
  if (!empty) {
    p.serving = true;
    p.again = false;
    std::shared_ptr<Waiter> w = p.waiters.front();
    int64_t left = std::max<int64_t>(1, w->deadline - clock_.NowMs());
    QueueScript(home(), queue,
                {"fetch", w->request.worker, std::to_string(w->request.max),
                 std::to_string(w->request.lease_ms), std::to_string(left), "0"},
                [this, queue, w](OpResult<Reply> r) { Served(queue, w, std::move(r)); });
  } else {
    polls_.erase(it);
  }
  for (auto& w : dropped) w->done(HungUp());
}

// The answer of the fetch made for `w`, the first waiter.
void RedisBackend::Served(const std::string& queue, const std::shared_ptr<Waiter>& w,
                          OpResult<Reply> r) {
  auto it = polls_.find(queue);
  if (it == polls_.end()) return;  // stopping
  Polls& p = *it->second;
  p.serving = false;
  std::vector<core::Delivery> jobs;
  int64_t retry_in = 0;
  if (r.ok()) {
    FetchReply reply = ParseFetch(*r, 0);
    jobs = Deliveries(home(), queue, std::move(reply.jobs));
    retry_in = reply.retry_in_ms;
  }
  bool hung_up = w->hung_up();
  // A released wait (the server draining) is answered now, as one whose time is up.
  bool released = w->request.hangup && w->request.hangup->released();
  bool expired = released || w->deadline <= clock_.NowMs();
  if (hung_up || !jobs.empty() || expired) {
    p.waiters.remove(w);
    w->Retire();
    if (hung_up) {
      // Given back before the next waiter's fetch is sent, on the same connection: Redis runs
      // them in that order, so the next waiter can take these jobs.
      GiveBack(home(), queue, jobs);
      w->done(HungUp());
    } else {
      w->answer.jobs = std::move(jobs);
      w->done(std::move(w->answer));
    }
    return ServeWaiters(queue);
  }
  if (retry_in > 0) ArmWaiter(w, retry_in);
  if (p.again) ServeWaiters(queue);
}

// Long polls past their deadline answer their acks and no jobs (not one being served: its
// fetch answers it).
void RedisBackend::ExpireWaiters(int64_t now) {
  std::vector<std::shared_ptr<Waiter>> expired;
  for (auto it = polls_.begin(); it != polls_.end();) {
    Polls& p = *it->second;
    for (auto w = p.waiters.begin(); w != p.waiters.end();) {
      bool busy = p.serving && w == p.waiters.begin();
      if ((*w)->deadline <= now && !busy) {
        expired.push_back(*w);
        w = p.waiters.erase(w);
        expired.back()->Retire();
      } else {
        ++w;
      }
    }
    if (p.waiters.empty() && !p.serving) {
      it = polls_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& w : expired) {
    if (w->hung_up()) {
      w->done(HungUp());
    } else {
      w->done(std::move(w->answer));
    }
  }
}

}  // namespace anteroom::store::redis
