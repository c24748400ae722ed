// Queues in the memory backend: core::Queue under a mutex, plus the long polls waiting on it.
#include <algorithm>
#include <list>
#include <map>
#include <optional>

#include "common/wire_errors.h"
#include "store/memory/durable_answer.h"
#include "store/memory/memory_slots.h"
#include "store/memory/on_queue.h"

namespace anteroom::store {

uint64_t MemoryBackend::SeedFor(std::string_view queue) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a: the same seed on every run, for replay
  for (char c : queue) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

std::shared_ptr<MemoryBackend::QueueSlot> MemoryBackend::FindQueue(const std::string& name,
                                                                   bool create) {
  {
    std::shared_lock lock(queues_mu_);
    auto it = queues_.find(name);
    if (it != queues_.end()) return it->second;
  }
  if (!create) return nullptr;
  std::unique_lock lock(queues_mu_);
  auto& slot = queues_[name];
  if (!slot) slot = std::make_shared<QueueSlot>(*this, name, clock_.NowMs());
  return slot;
}

bool MemoryBackend::CountQueue() {
  size_t before = listed_queues_.fetch_add(1, std::memory_order_relaxed);
  if (options_.max_queues != 0 && before >= options_.max_queues) {
    listed_queues_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

bool MemoryBackend::MarkListed(QueueSlot& slot) {
  if (slot.listed) return true;
  if (!slot.key_digest && !CountQueue()) return false;  // a queue with a key counts already
  slot.listed = true;
  return true;
}

void MemoryBackend::DropIfEmpty(const std::shared_ptr<QueueSlot>& slot) {
  if (slot->listed.load(std::memory_order_relaxed)) return;
  std::unique_lock lock(queues_mu_);
  std::lock_guard slot_lock(slot->mu);
  if (!slot->HoldsNothing()) return;
  auto it = queues_.find(slot->name);
  if (it != queues_.end() && it->second == slot) queues_.erase(it);  // the timer lets go too
}

void MemoryBackend::RecountQueues() {
  std::unique_lock lock(queues_mu_);
  size_t listed = 0;
  for (auto it = queues_.begin(); it != queues_.end();) {
    std::lock_guard slot_lock(it->second->mu);
    it->second->queue.Advance(clock_.NowMs());
    if (it->second->HoldsNothing()) {
      it = queues_.erase(it);
      continue;
    }
    listed += it->second->Counted() ? 1 : 0;
    ++it;
  }
  listed_queues_ = listed;
}

namespace {
template <typename T>
using Answered = std::optional<OpResult<T>>;
using Outcomes = std::vector<core::LeaseOutcome>;
}  // namespace

void MemoryBackend::Push(std::string queue, std::vector<core::JobSpec> jobs,
                         Completion<std::vector<core::PushResult>> done) {
  using Results = std::vector<core::PushResult>;
  OnQueue<Results>(
      queue, Access::kChange, true, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        for (const core::JobSpec& job : jobs) {  // all or nothing: checked before any is pushed
          if (job.batch.empty()) continue;
          switch (q->queue.CanJoin(job.batch, now)) {
            case core::BatchOutcome::kOk:
              continue;
            case core::BatchOutcome::kSealed:
              return Answered<Results>(
                  OpResult<Results>(OpStatus::kConflict, std::string(wire::kBatchSealed)));
            default:
              return Answered<Results>(
                  OpResult<Results>(OpStatus::kUnknownBatch, std::string(wire::kUnknownBatch)));
          }
        }
        if (!MarkListed(*q)) {
          return Answered<Results>(
              OpResult<Results>(OpStatus::kLimitReached, wire::TooManyQueues(options_.max_queues)));
        }
        Results results = q->queue.Push(jobs, now);
        LogChange(*q, now, PushRecord{.jobs = jobs});
        return Answered<Results>(std::move(results));
      });
}

// Applies `apply(ref)` to each genuine lease of q and records those that answered ok.
template <typename Apply>
Outcomes MemoryBackend::EachLease(QueueSlot* q, const std::vector<std::string>& leases,
                                  std::vector<core::LeaseRef>& applied, Apply&& apply) {
  Outcomes out;
  out.reserve(leases.size());
  for (const auto& lease : leases) {
    std::optional<core::LeaseRef> ref = q ? q->queue.ParseLease(lease) : std::nullopt;
    if (!ref) {
      out.push_back(core::LeaseOutcome::kInvalidLease);
      continue;
    }
    out.push_back(apply(*ref));
    if (out.back() == core::LeaseOutcome::kOk) applied.push_back(*ref);
  }
  return out;
}

// Acks `leases` on q (nullptr: a queue nobody pushed to) with their `results` (empty, or one
// per lease), recording the genuine ones.
Outcomes MemoryBackend::AckLeases(QueueSlot* q, const std::vector<std::string>& leases,
                                  const std::vector<std::string>& results, int64_t now) {
  Outcomes out;
  out.reserve(leases.size());
  std::vector<core::LeaseRef> acked;
  std::vector<std::string_view> kept;  // the results of `acked`
  for (size_t k = 0; k < leases.size(); ++k) {
    std::optional<core::LeaseRef> ref = q ? q->queue.ParseLease(leases[k]) : std::nullopt;
    if (!ref) {
      out.push_back(core::LeaseOutcome::kInvalidLease);
      continue;
    }
    std::string_view result = k < results.size() ? std::string_view(results[k]) : "";
    int64_t ran_ms = -1;
    out.push_back(q->queue.Ack(*ref, now, result, &ran_ms));
    if (out.back() != core::LeaseOutcome::kOk) continue;
    if (ran_ms >= 0) ObserveRan(ran_ms);
    acked.push_back(*ref);
    kept.push_back(result);
  }
  if (q && !acked.empty()) {
    LogChange(*q, now, AckRecord{.acked = {.leases = acked}, .results = kept});
  }
  return out;
}

void MemoryBackend::Fetch(std::string queue, core::FetchRequest request,
                          Completion<core::FetchAnswer> done) {
  std::shared_ptr<Hangup> hangup = request.hangup;
  std::weak_ptr<QueueSlot> parked_in;
  OnQueue<core::FetchAnswer>(
      queue, Access::kChange, request.wait_ms > 0, std::move(done),
      [&](QueueSlot* q, int64_t now,
          Completion<core::FetchAnswer>& done_ref) -> Answered<core::FetchAnswer> {
        core::FetchAnswer answer;
        answer.acked = AckLeases(q, request.ack, request.ack_results, now);
        if (q == nullptr) {
          answer.acked_leases = std::move(request.ack);
          return Answered<core::FetchAnswer>(std::move(answer));
        }
        // A client already gone gets no job (its acks stand: that work was done).
        if (hangup && hangup->happened()) return Answered<core::FetchAnswer>(QueueSlot::HungUp());
        // Ready jobs exist only when nobody is waiting (Serve runs after every change).
        if (request.reclaim) {
          size_t taken_back = 0;
          answer.jobs =
              q->queue.Reclaim(request.worker, request.max, request.lease_ms, now, taken_back);
          answer.reclaimed = answer.jobs.size();
          if (taken_back > 0) {
            LogChange(
                *q, now,
                ReclaimRecord{
                    .worker = request.worker, .max = request.max, .lease_ms = request.lease_ms});
          }
        }
        size_t more = request.max - answer.jobs.size();
        std::vector<core::Delivery> fetched =
            q->queue.Fetch(request.worker, more, request.lease_ms, now);
        ObserveFetched(fetched, now);
        if (!fetched.empty()) {
          LogChange(
              *q, now,
              FetchRecord{.worker = request.worker, .max = more, .lease_ms = request.lease_ms});
          answer.jobs.insert(answer.jobs.end(), std::make_move_iterator(fetched.begin()),
                             std::make_move_iterator(fetched.end()));
        }
        // A released wait (the server draining) answers what it has, as a poll that timed out.
        if (!answer.jobs.empty() || request.wait_ms == 0 || (hangup && hangup->released())) {
          answer.acked_leases = std::move(request.ack);
          return Answered<core::FetchAnswer>(std::move(answer));
        }
        int64_t deadline = now + request.wait_ms;
        // A parked fetch is answered by Serve; its acks must be safe by then, and they are:
        // every later record of this queue has a higher sequence number.
        q->Park(std::move(request), std::move(answer.acked), deadline, std::move(done_ref));
        if (hangup) parked_in = q->weak_from_this();
        return std::nullopt;
      });
  if (parked_in.expired()) return;
  // Registered with no lock held: the callback runs here at once when the client is already
  // gone, and it takes the locks. The waiter may have been answered in between: the callback
  // then finds nothing to drop. It holds the slot weakly: a slot (or backend) gone, it does
  // nothing.
  hangup->OnHangup([parked_in, key = hangup.get()] {
    if (auto slot = parked_in.lock()) slot->backend.DropWaiter(slot, key);
  });
}

void MemoryBackend::DropWaiter(const std::shared_ptr<QueueSlot>& slot, const Hangup* key) {
  std::optional<QueueSlot::Waiter> dropped;
  Deferred released;  // a released wait's answer, once its acks are safe
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    {
      std::lock_guard lock(slot->mu);
      auto it = slot->watched.find(key);
      if (it == slot->watched.end()) return;  // answered meanwhile
      // Released (the server draining): its acks and no job, as when its wait runs out, and
      // like that answer only once the acks it made before parking are durable (the slot's
      // records up to now include them).
      if (key->released()) {
        slot->Reply(it->second, {}, released);
        lsn = slot->last_lsn;
      } else {
        dropped.emplace(slot->Unlink(it->second));
      }
      // Its deadline left the schedule's view: a stale wake-up costs one empty pass.
    }
    DropIfEmpty(slot);  // a long poll's name nobody pushed to is forgotten with its last waiter
  }
  if (!released.empty()) {
    return Answer<Done>(
        lsn, Access::kChange, [](OpResult<Done>) {}, Done{}, std::move(released));
  }
  dropped->done(QueueSlot::HungUp());
}

void MemoryBackend::Ack(std::string queue, std::vector<std::string> leases,
                        std::vector<std::string> results, Completion<Outcomes> done) {
  OnQueue<Outcomes>(queue, Access::kChange, false, std::move(done),
                    [&](QueueSlot* q, int64_t now, auto&) {
                      return Answered<Outcomes>(AckLeases(q, leases, results, now));
                    });
}

void MemoryBackend::GetJob(std::string queue, core::JobId id, Completion<core::JobView> done) {
  OnQueue<core::JobView>(
      queue, Access::kRead, false, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        std::optional<core::JobView> view = q ? q->queue.Lookup(id, now) : std::nullopt;
        if (!view) {
          return Answered<core::JobView>(
              OpResult<core::JobView>(OpStatus::kUnknownJob, std::string(wire::kNoSuchJob)));
        }
        return Answered<core::JobView>(std::move(*view));
      });
}

void MemoryBackend::GetJobDependencies(std::string queue, core::JobId id,
                                       Completion<std::vector<core::DependencyView>> done) {
  using Deps = std::vector<core::DependencyView>;
  OnQueue<Deps>(queue, Access::kRead, false, std::move(done),
                [&](QueueSlot* q, int64_t now, auto&) {
                  std::optional<Deps> deps = q ? q->queue.Dependencies(id, now) : std::nullopt;
                  if (!deps) {
                    return Answered<Deps>(
                        OpResult<Deps>(OpStatus::kUnknownJob, std::string(wire::kNoSuchJob)));
                  }
                  return Answered<Deps>(std::move(*deps));
                });
}

void MemoryBackend::CreateBatch(std::string queue, std::string id, core::BatchSpec spec,
                                Completion<core::BatchView> done) {
  using View = core::BatchView;
  OnQueue<View>(
      queue, Access::kChange, true, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        if (q->queue.CanJoin(id, now) != core::BatchOutcome::kUnknown) {
          return Answered<View>(
              OpResult<View>(OpStatus::kConflict, std::string(wire::kBatchExists)));
        }
        if (!MarkListed(*q)) {
          return Answered<View>(
              OpResult<View>(OpStatus::kLimitReached, wire::TooManyQueues(options_.max_queues)));
        }
        core::BatchSpec copy = spec;
        switch (q->queue.CreateBatch(id, std::move(copy), now)) {
          case core::BatchOutcome::kOk:
            break;
          case core::BatchOutcome::kTooMany:
            return Answered<View>(
                OpResult<View>(OpStatus::kLimitReached, std::string(wire::kTooManyBatches)));
          default:
            return Answered<View>(
                OpResult<View>(OpStatus::kConflict, std::string(wire::kBatchExists)));
        }
        LogChange(*q, now, CreateBatchRecord{.id = id, .spec = spec});
        return Answered<View>(*q->queue.GetBatch(id, now));
      });
}

void MemoryBackend::SealBatch(std::string queue, std::string id, Completion<core::BatchView> done) {
  using View = core::BatchView;
  OnQueue<View>(queue, Access::kChange, false, std::move(done),
                [&](QueueSlot* q, int64_t now, auto&) {
                  if (q == nullptr || q->queue.SealBatch(id, now) != core::BatchOutcome::kOk) {
                    return Answered<View>(
                        OpResult<View>(OpStatus::kUnknownBatch, std::string(wire::kUnknownBatch)));
                  }
                  LogChange(*q, now, SealBatchRecord{.id = id});
                  return Answered<View>(*q->queue.GetBatch(id, now));
                });
}

void MemoryBackend::GetBatch(std::string queue, std::string id, Completion<core::BatchView> done) {
  using View = core::BatchView;
  OnQueue<View>(queue, Access::kRead, false, std::move(done),
                [&](QueueSlot* q, int64_t now, auto&) {
                  std::optional<View> v = q ? q->queue.GetBatch(id, now) : std::nullopt;
                  if (!v) {
                    return Answered<View>(
                        OpResult<View>(OpStatus::kUnknownBatch, std::string(wire::kUnknownBatch)));
                  }
                  return Answered<View>(std::move(*v));
                });
}

void MemoryBackend::SetProgress(std::string queue, std::string lease, std::string progress,
                                Completion<core::LeaseOutcome> done) {
  OnQueue<core::LeaseOutcome>(
      queue, Access::kChange, false, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        std::optional<core::LeaseRef> ref = q ? q->queue.ParseLease(lease) : std::nullopt;
        if (!ref) return Answered<core::LeaseOutcome>(core::LeaseOutcome::kInvalidLease);
        core::LeaseOutcome out = q->queue.SetProgress(*ref, progress, now);
        if (out == core::LeaseOutcome::kOk) {
          LogChange(*q, now, SetProgressRecord{.lease = *ref, .progress = progress});
        }
        return Answered<core::LeaseOutcome>(out);
      });
}

void MemoryBackend::AppendJobLog(std::string queue, std::string lease,
                                 std::vector<std::string> lines,
                                 Completion<core::LeaseOutcome> done) {
  OnQueue<core::LeaseOutcome>(
      queue, Access::kChange, false, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        std::optional<core::LeaseRef> ref = q ? q->queue.ParseLease(lease) : std::nullopt;
        if (!ref) return Answered<core::LeaseOutcome>(core::LeaseOutcome::kInvalidLease);
        core::LeaseOutcome out = q->queue.AppendLog(*ref, lines, now);
        if (out == core::LeaseOutcome::kOk) {
          LogChange(*q, now,
                    AppendJobLogRecord{.lease = *ref, .lines = {lines.begin(), lines.end()}});
        }
        return Answered<core::LeaseOutcome>(out);
      });
}

void MemoryBackend::Nack(std::string queue, std::vector<std::string> leases,
                         std::optional<int64_t> delay_ms, std::string error,
                         Completion<Outcomes> done) {
  error = core::BoundedError(error);  // as the job keeps it: the log holds no more
  OnQueue<Outcomes>(
      queue, Access::kChange, false, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        std::vector<core::LeaseRef> applied;
        Outcomes out = EachLease(q, leases, applied, [&](core::LeaseRef ref) {
          return q->queue.Nack(ref, delay_ms, error, now);
        });
        if (q && !applied.empty()) {
          LogChange(
              *q, now,
              NackRecord{.nacked = {.leases = applied}, .delay_ms = delay_ms, .error = error});
        }
        return Answered<Outcomes>(std::move(out));
      });
}

void MemoryBackend::Extend(std::string queue, std::vector<std::string> leases, int64_t lease_ms,
                           Completion<Outcomes> done) {
  OnQueue<Outcomes>(
      queue, Access::kChange, false, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        std::vector<core::LeaseRef> applied;
        Outcomes out = EachLease(q, leases, applied, [&](core::LeaseRef ref) {
          return q->queue.Extend(ref, lease_ms, now);
        });
        if (q && !applied.empty()) {
          LogChange(*q, now, ExtendRecord{.extended = {.leases = applied}, .lease_ms = lease_ms});
        }
        return Answered<Outcomes>(std::move(out));
      });
}

// A heartbeat on a queue that holds nothing keeps nothing: a worker matters to a queue once it
// holds jobs (its first fetch registers it), and junk names must cost nothing.
void MemoryBackend::Heartbeat(std::string queue, std::string worker, int64_t ttl_ms,
                              Completion<Done> done) {
  OnQueue<Done>(queue, Access::kChange, false, std::move(done),
                [&](QueueSlot* q, int64_t now, auto&) {
                  if (q == nullptr || (!q->Counted() && q->queue.HoldsNothing())) {
                    return Answered<Done>(Done{});
                  }
                  q->queue.Heartbeat(worker, ttl_ms, now);
                  LogChange(*q, now, HeartbeatRecord{.worker = worker, .ttl_ms = ttl_ms});
                  return Answered<Done>(Done{});
                });
}

void MemoryBackend::ReleaseWorker(std::string queue, std::string worker, Completion<size_t> done) {
  OnQueue<size_t>(queue, Access::kChange, false, std::move(done),
                  [&](QueueSlot* q, int64_t now, auto&) {
                    if (q == nullptr) return Answered<size_t>(size_t{0});
                    size_t released = q->queue.ReleaseWorker(worker, now);
                    LogChange(*q, now, ReleaseWorkerRecord{.worker = worker});
                    return Answered<size_t>(released);
                  });
}

void MemoryBackend::GetQueue(std::string queue, Completion<core::QueueStats> done) {
  OnQueue<core::QueueStats>(
      queue, Access::kRead, false, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        return Answered<core::QueueStats>(q ? q->queue.Stats(now) : core::QueueStats{});
      });
}

void MemoryBackend::ListQueues(
    Completion<std::vector<std::pair<std::string, core::QueueStats>>> done) {
  using List = std::vector<std::pair<std::string, core::QueueStats>>;
  List out;
  Deferred after;
  uint64_t lsn = 0;
  {
    std::shared_lock world(world_);
    std::vector<std::shared_ptr<QueueSlot>> slots;
    {
      std::shared_lock lock(queues_mu_);
      for (auto& [name, slot] : queues_) slots.push_back(slot);
    }
    for (auto& slot : slots) {
      std::lock_guard lock(slot->mu);
      if (!slot->Counted()) continue;
      int64_t now = clock_.NowMs();
      out.emplace_back(slot->name, slot->queue.Stats(now));
      slot->Serve(now, after);
      Schedule(slot);
      lsn = std::max(lsn, slot->last_lsn);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  Answer<List>(lsn, Access::kRead, std::move(done), std::move(out), std::move(after));
}

void MemoryBackend::Inflight(std::string queue, std::optional<std::string> worker,
                             Completion<std::vector<core::InflightJob>> done) {
  using Jobs = std::vector<core::InflightJob>;
  OnQueue<Jobs>(queue, Access::kRead, false, std::move(done),
                [&](QueueSlot* q, int64_t now, auto&) {
                  if (q == nullptr) return Answered<Jobs>(Jobs{});
                  std::optional<std::string_view> w;
                  if (worker) w = *worker;
                  return Answered<Jobs>(q->queue.Inflight(w, now));
                });
}

void MemoryBackend::Dead(std::string queue, size_t limit,
                         Completion<std::vector<core::DeadJob>> done) {
  using Jobs = std::vector<core::DeadJob>;
  OnQueue<Jobs>(queue, Access::kRead, false, std::move(done),
                [&](QueueSlot* q, int64_t now, auto&) {
                  return Answered<Jobs>(q ? q->queue.Dead(limit, now) : Jobs{});
                });
}

void MemoryBackend::RequeueDead(std::string queue, std::optional<std::vector<core::JobId>> ids,
                                Completion<size_t> done) {
  OnQueue<size_t>(queue, Access::kChange, false, std::move(done),
                  [&](QueueSlot* q, int64_t now, auto&) {
                    if (q == nullptr) return Answered<size_t>(size_t{0});
                    size_t count = q->queue.RequeueDead(ids, now);
                    if (count > 0) {
                      RequeueDeadRecord record{.all = !ids.has_value()};
                      if (ids) record.ids = *ids;
                      LogChange(*q, now, record);
                    }
                    return Answered<size_t>(count);
                  });
}

void MemoryBackend::Cancel(std::string queue, core::JobId id,
                           Completion<core::CancelOutcome> done) {
  OnQueue<core::CancelOutcome>(
      queue, Access::kChange, false, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        if (q == nullptr) return Answered<core::CancelOutcome>(core::CancelOutcome::kUnknown);
        core::CancelOutcome outcome = q->queue.Cancel(id, now);
        if (outcome == core::CancelOutcome::kCancelled) {
          LogChange(*q, now, CancelRecord{.id = id});
        }
        return Answered<core::CancelOutcome>(outcome);
      });
}

void MemoryBackend::SetPaused(std::string queue, bool paused, Completion<Done> done) {
  OnQueue<Done>(
      queue, Access::kChange, true, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        bool was = q->queue.paused();
        q->queue.SetPaused(paused, now);
        LogChange(*q, now, SetPausedRecord{.paused = paused});
        if (was != paused) {
          TellQueueEvent(q->name, std::string(paused ? kQueuePaused : kQueueResumed), now);
        }
        return Answered<Done>(Done{});
      });
}

// Setting a key creates the queue (counted against max_queues, as a first push is); removing
// the key of a queue that holds nothing else lets it be forgotten (DropIfEmpty, in OnQueue).
// A change that changes nothing (the same digest again, removing no key) writes no record.
void MemoryBackend::SetQueueKey(std::string queue, std::optional<std::string> digest,
                                Completion<Done> done) {
  if (digest && digest->size() != kQueueKeyDigestBytes) {
    // Replay refuses any other length as damage: it must never be logged.
    return done(OpResult<Done>(OpStatus::kInvalidArgument,
                               "a queue key is stored as its SHA-256 digest (32 bytes)"));
  }
  OnQueue<Done>(queue, Access::kChange, digest.has_value(), std::move(done),
                [&](QueueSlot* q, int64_t now, auto&) {
                  if (q == nullptr || q->key_digest == digest) return Answered<Done>(Done{});
                  if (digest && !q->Counted() && !CountQueue()) {
                    return Answered<Done>(OpResult<Done>(
                        OpStatus::kLimitReached, wire::TooManyQueuesForAKey(options_.max_queues)));
                  }
                  if (!digest && !q->listed) listed_queues_.fetch_sub(1, std::memory_order_relaxed);
                  q->key_digest = digest;
                  LogChange(*q, now, SetQueueKeyRecord{.digest = digest});
                  return Answered<Done>(Done{});
                });
}

// Answered at once, not once the queue's latest records are safe as other reads are: the
// router reads the key on every request to the queue, which must not wait for the group commit
// of others' pushes. A key whose own record is not safe yet may so open the queue (or stop
// opening it) up to one fsync early; the call that set it is answered only once it is safe.
void MemoryBackend::GetQueueKey(std::string queue, Completion<std::optional<std::string>> done) {
  std::optional<std::string> digest;
  {
    std::shared_lock world(world_);
    if (std::shared_ptr<QueueSlot> slot = FindQueue(queue, false)) {
      std::lock_guard lock(slot->mu);
      digest = slot->key_digest;
    }
  }
  done(std::move(digest));
}

void MemoryBackend::TellQueue(QueueSlot& slot) {
  std::vector<core::Queue::Buried> buried = slot.queue.TakeBuried();
  if (buried.empty()) return;
  std::vector<LifecycleEvent> events;
  events.reserve(buried.size());
  for (core::Queue::Buried& b : buried) {
    LifecycleEvent& e = events.emplace_back();
    e.type = kJobDead;
    e.at_ms = b.at;
    e.queue = slot.name;
    e.job = b.id;
    e.detail = std::move(b.error);
  }
  events_.Append(std::move(events), clock_.NowMs());
}

void MemoryBackend::TellQueueEvent(const std::string& queue, std::string type, int64_t now) {
  std::vector<LifecycleEvent> one(1);
  one[0].type = std::move(type);
  one[0].at_ms = now;
  one[0].queue = queue;
  events_.Append(std::move(one), clock_.NowMs());
}

void MemoryBackend::Snooze(std::string queue, std::vector<std::string> leases, int64_t delay_ms,
                           Completion<Outcomes> done) {
  OnQueue<Outcomes>(
      queue, Access::kChange, false, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        std::vector<core::LeaseRef> applied;
        Outcomes out = EachLease(q, leases, applied, [&](core::LeaseRef ref) {
          return q->queue.Snooze(ref, delay_ms, now);
        });
        if (q && !applied.empty()) {
          LogChange(*q, now, SnoozeRecord{.snoozed = {.leases = applied}, .delay_ms = delay_ms});
        }
        return Answered<Outcomes>(std::move(out));
      });
}

// Setting them creates the queue (counted against max_queues, as a first push is). Settings
// equal to the ones in force write no record.
void MemoryBackend::SetQueueSettings(std::string queue, core::QueueSettings settings,
                                     Completion<Done> done) {
  if (!core::ValidLimits(settings.limits)) {
    // Replay refuses them as damage: they must never be logged.
    return done(OpResult<Done>(OpStatus::kInvalidArgument, std::string(wire::kQueueLimitsRange)));
  }
  OnQueue<Done>(
      queue, Access::kChange, true, std::move(done), [&](QueueSlot* q, int64_t now, auto&) {
        if (!MarkListed(*q)) {
          return Answered<Done>(
              OpResult<Done>(OpStatus::kLimitReached, wire::TooManyQueues(options_.max_queues)));
        }
        if (q->queue.settings() == settings) return Answered<Done>(Done{});
        q->queue.Configure(settings, now);
        LogChange(*q, now, SetQueueSettingsRecord{.settings = settings});
        return Answered<Done>(Done{});
      });
}

void MemoryBackend::GetQueueSettings(std::string queue, Completion<core::QueueSettings> done) {
  OnQueue<core::QueueSettings>(
      queue, Access::kRead, false, std::move(done), [&](QueueSlot* q, int64_t, auto&) {
        return Answered<core::QueueSettings>(q ? q->queue.settings() : core::QueueSettings{});
      });
}

}  // namespace anteroom::store
