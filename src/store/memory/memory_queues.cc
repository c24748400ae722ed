// Queues in the memory backend: core::Queue under a mutex, plus the long polls waiting on it.
#include <algorithm>
#include <list>
#include <map>
#include <optional>

#include "store/memory/memory_backend.h"

namespace anteroom::store {

struct MemoryBackend::QueueSlot final : Slot {
  QueueSlot(std::string n, const core::Hmac& key, int64_t now)
      : name(std::move(n)), queue(name, key, now, std::hash<std::string>{}(name) ^ now) {}

  struct Waiter;
  using Waiters = std::list<Waiter>;
  struct Waiter {
    core::FetchRequest request;
    std::vector<core::LeaseOutcome> acked;  // done before it started waiting
    std::multimap<int64_t, Waiters::iterator>::iterator by_deadline;
    Completion<core::FetchAnswer> done;
  };

  // Long polls in the order they started waiting (served in that order), and the same
  // waiters by deadline, so the next deadline and the timed-out ones cost O(log n).
  Waiters waiters;
  std::multimap<int64_t, Waiters::iterator> deadlines;

  void Park(core::FetchRequest request, std::vector<core::LeaseOutcome> acked, int64_t deadline,
            Completion<core::FetchAnswer> done) {
    auto it = waiters.insert(waiters.end(),
                             Waiter{std::move(request), std::move(acked), {}, std::move(done)});
    it->by_deadline = deadlines.emplace(deadline, it);
  }

  // Removes a waiter; its completion is to be called with `jobs` after the locks are released.
  void Reply(Waiters::iterator it, std::vector<core::Delivery> jobs, Deferred& after) {
    deadlines.erase(it->by_deadline);
    after.push_back(
        [done = std::move(it->done),
         answer = core::FetchAnswer{std::move(it->acked), std::move(it->request.ack),
                                    std::move(jobs)}]() mutable { done(std::move(answer)); });
    waiters.erase(it);
  }

  int64_t NextDeadline() const override {
    int64_t next = queue.NextDeadline();
    if (!deadlines.empty()) next = std::min(next, deadlines.begin()->first);
    return next;
  }

  void RunDue(int64_t now, Deferred& after) override {
    queue.Advance(now);
    Serve(now, after);
    // Long polls past their deadline answer an empty list.
    while (!deadlines.empty() && deadlines.begin()->first <= now) {
      Reply(deadlines.begin()->second, {}, after);
    }
  }

  // Hands ready jobs to long polls, oldest waiter first.
  void Serve(int64_t now, Deferred& after) {
    while (!waiters.empty() && queue.CanDeliver()) {
      const core::FetchRequest& r = waiters.front().request;
      Reply(waiters.begin(), queue.Fetch(r.worker, r.max, r.lease_ms, now), after);
    }
  }

  std::string name;
  core::Queue queue;
  bool listed = false;  // pushed to at least once: shown by ListQueues
};

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
  if (!slot) slot = std::make_shared<QueueSlot>(name, lease_key_, clock_.NowMs());
  return slot;
}

template <typename T, typename Fn>
void MemoryBackend::OnQueue(const std::string& name, bool create, const Completion<T>& done,
                            Fn&& fn) {
  std::shared_ptr<QueueSlot> slot = FindQueue(name, create);
  std::optional<OpResult<T>> result;
  Deferred after;
  if (slot) {
    std::lock_guard lock(slot->mu);
    int64_t now = clock_.NowMs();
    result = fn(slot.get(), now);
    slot->Serve(now, after);
    Schedule(slot);
  } else {
    result = fn(nullptr, clock_.NowMs());  // a queue nobody pushed to: the empty answer
  }
  if (result) done(std::move(*result));
  for (auto& f : after) f();
}

namespace {
template <typename T>
using Answer = std::optional<OpResult<T>>;
using Outcomes = std::vector<core::LeaseOutcome>;
}  // namespace

void MemoryBackend::Push(std::string queue, std::vector<core::JobSpec> jobs,
                         Completion<std::vector<core::PushResult>> done) {
  OnQueue<std::vector<core::PushResult>>(queue, true, done, [&](QueueSlot* q, int64_t now) {
    q->listed = true;
    return Answer<std::vector<core::PushResult>>(q->queue.Push(jobs, now));
  });
}

void MemoryBackend::Fetch(std::string queue, core::FetchRequest request,
                          Completion<core::FetchAnswer> done) {
  OnQueue<core::FetchAnswer>(
      queue, request.wait_ms > 0, done,
      [&](QueueSlot* q, int64_t now) -> Answer<core::FetchAnswer> {
        core::FetchAnswer answer;
        for (const auto& lease : request.ack) {
          answer.acked.push_back(q ? q->queue.Ack(lease, now) : core::LeaseOutcome::kInvalidLease);
        }
        if (q == nullptr) {
          answer.acked_leases = std::move(request.ack);
          return Answer<core::FetchAnswer>(std::move(answer));
        }
        // Ready jobs exist only when nobody is waiting (Serve runs after every change).
        answer.jobs = q->queue.Fetch(request.worker, request.max, request.lease_ms, now);
        if (!answer.jobs.empty() || request.wait_ms == 0) {
          answer.acked_leases = std::move(request.ack);
          return Answer<core::FetchAnswer>(std::move(answer));
        }
        int64_t deadline = now + request.wait_ms;
        q->Park(std::move(request), std::move(answer.acked), deadline, done);
        return std::nullopt;  // answered by Serve or at the deadline
      });
}

void MemoryBackend::Ack(std::string queue, std::vector<std::string> leases,
                        Completion<Outcomes> done) {
  OnQueue<Outcomes>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    Outcomes out;
    for (const auto& lease : leases) {
      // Without the queue no lease can be current; the tag still tells forged from stale.
      out.push_back(q ? q->queue.Ack(lease, now) : core::LeaseOutcome::kInvalidLease);
    }
    return Answer<Outcomes>(std::move(out));
  });
}

void MemoryBackend::Nack(std::string queue, std::vector<std::string> leases,
                         std::optional<int64_t> delay_ms, std::string error,
                         Completion<Outcomes> done) {
  OnQueue<Outcomes>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    Outcomes out;
    for (const auto& lease : leases) {
      out.push_back(q ? q->queue.Nack(lease, delay_ms, error, now)
                      : core::LeaseOutcome::kInvalidLease);
    }
    return Answer<Outcomes>(std::move(out));
  });
}

void MemoryBackend::Extend(std::string queue, std::vector<std::string> leases, int64_t lease_ms,
                           Completion<Outcomes> done) {
  OnQueue<Outcomes>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    Outcomes out;
    for (const auto& lease : leases) {
      out.push_back(q ? q->queue.Extend(lease, lease_ms, now) : core::LeaseOutcome::kInvalidLease);
    }
    return Answer<Outcomes>(std::move(out));
  });
}

void MemoryBackend::Heartbeat(std::string queue, std::string worker, int64_t ttl_ms,
                              Completion<Done> done) {
  OnQueue<Done>(queue, true, done, [&](QueueSlot* q, int64_t now) {
    q->queue.Heartbeat(worker, ttl_ms, now);
    return Answer<Done>(Done{});
  });
}

void MemoryBackend::ReleaseWorker(std::string queue, std::string worker, Completion<size_t> done) {
  OnQueue<size_t>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    return Answer<size_t>(q ? q->queue.ReleaseWorker(worker, now) : 0);
  });
}

void MemoryBackend::GetQueue(std::string queue, Completion<core::QueueStats> done) {
  OnQueue<core::QueueStats>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    return Answer<core::QueueStats>(q ? q->queue.Stats(now) : core::QueueStats{});
  });
}

void MemoryBackend::ListQueues(
    Completion<std::vector<std::pair<std::string, core::QueueStats>>> done) {
  std::vector<std::shared_ptr<QueueSlot>> slots;
  {
    std::shared_lock lock(queues_mu_);
    for (auto& [name, slot] : queues_) slots.push_back(slot);
  }
  std::vector<std::pair<std::string, core::QueueStats>> out;
  Deferred after;
  for (auto& slot : slots) {
    std::lock_guard lock(slot->mu);
    if (!slot->listed) continue;
    int64_t now = clock_.NowMs();
    out.emplace_back(slot->name, slot->queue.Stats(now));
    slot->Serve(now, after);
    Schedule(slot);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  done(std::move(out));
  for (auto& f : after) f();
}

void MemoryBackend::Inflight(std::string queue, std::optional<std::string> worker,
                             Completion<std::vector<core::InflightJob>> done) {
  using Jobs = std::vector<core::InflightJob>;
  OnQueue<Jobs>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    if (q == nullptr) return Answer<Jobs>(Jobs{});
    std::optional<std::string_view> w;
    if (worker) w = *worker;
    return Answer<Jobs>(q->queue.Inflight(w, now));
  });
}

void MemoryBackend::Dead(std::string queue, size_t limit,
                         Completion<std::vector<core::DeadJob>> done) {
  using Jobs = std::vector<core::DeadJob>;
  OnQueue<Jobs>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    return Answer<Jobs>(q ? q->queue.Dead(limit, now) : Jobs{});
  });
}

void MemoryBackend::RequeueDead(std::string queue, std::optional<std::vector<core::JobId>> ids,
                                Completion<size_t> done) {
  OnQueue<size_t>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    return Answer<size_t>(q ? q->queue.RequeueDead(ids, now) : 0);
  });
}

void MemoryBackend::Cancel(std::string queue, core::JobId id,
                           Completion<core::CancelOutcome> done) {
  OnQueue<core::CancelOutcome>(queue, false, done, [&](QueueSlot* q, int64_t now) {
    return Answer<core::CancelOutcome>(q ? q->queue.Cancel(id, now)
                                         : core::CancelOutcome::kUnknown);
  });
}

void MemoryBackend::SetPaused(std::string queue, bool paused, Completion<Done> done) {
  OnQueue<Done>(queue, true, done, [&](QueueSlot* q, int64_t now) {
    q->queue.SetPaused(paused, now);
    return Answer<Done>(Done{});
  });
}

}  // namespace anteroom::store
