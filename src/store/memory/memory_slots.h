#pragma once
// The two kinds of slot the memory backend schedules: a room and a queue (with its long polls).
// Private to src/store/memory/.

#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/hangup.h"
#include "common/wire_errors.h"
#include "store/memory/memory_backend.h"

namespace anteroom::store {

struct MemoryBackend::RoomSlot final : Slot {
  RoomSlot(std::string n, core::RoomConfig config, int64_t ttl, int64_t now, size_t max_clients)
      : name(std::move(n)), room(config, ttl, now) {
    room.set_max_clients(max_clients);
  }
  int64_t NextDeadline() const override { return room.NextDeadline(); }
  void RunDue(int64_t now, Deferred&) override { room.Advance(now); }
  std::string name;
  core::Room room;
};

// Long polls and their clients' hang-ups: a waiter whose request carries a Hangup is also in
// `watched`, and its hang-up callback (registered by Fetch once the locks are released) holds
// only a weak_ptr to the slot, so it does nothing once the slot (or the backend) is gone.
// Invariants (under mu): `waiters`, `deadlines` and `watched` name the same waiters; a waiter
// leaves all three at once (Unlink), and its hang-up is then cleared, so the callback (and what
// it holds) goes with it; a waiter whose client hung up is never handed a job.
struct MemoryBackend::QueueSlot final : Slot, std::enable_shared_from_this<QueueSlot> {
  QueueSlot(MemoryBackend& b, std::string n, int64_t now)
      : backend(b), name(std::move(n)), queue(name, b.lease_key_, now, SeedFor(name)) {
    queue.set_noting(!b.replaying_);
  }

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
  // The waiters whose client may hang up, by their Hangup (one per request).
  std::unordered_map<const Hangup*, Waiters::iterator> watched;

  void Park(core::FetchRequest request, std::vector<core::LeaseOutcome> acked, int64_t deadline,
            Completion<core::FetchAnswer> done) {
    auto it = waiters.insert(waiters.end(),
                             Waiter{std::move(request), std::move(acked), {}, std::move(done)});
    it->by_deadline = deadlines.emplace(deadline, it);
    if (it->request.hangup) watched.emplace(it->request.hangup.get(), it);
  }

  // Takes a waiter out of the line; its hang-up callback is dropped with it.
  Waiter Unlink(Waiters::iterator it) {
    deadlines.erase(it->by_deadline);
    if (it->request.hangup) {
      watched.erase(it->request.hangup.get());
      it->request.hangup->Clear();
    }
    Waiter w = std::move(*it);
    waiters.erase(it);
    return w;
  }

  // Removes a waiter; its completion is to be called with `jobs` after the locks are released
  // (and, with a journal, once the deliveries are safe).
  void Reply(Waiters::iterator it, std::vector<core::Delivery> jobs, Deferred& after) {
    Waiter w = Unlink(it);
    after.push_back([done = std::move(w.done),
                     answer = core::FetchAnswer{std::move(w.acked), std::move(w.request.ack),
                                                std::move(jobs)}](bool safe) mutable {
      if (safe) return done(std::move(answer));
      done(OpResult<core::FetchAnswer>(OpStatus::kUnavailable,
                                       std::string(wire::kDeliveryNotSaved)));
    });
  }

  // Removes a waiter whose client hung up, with nothing for it (nothing to log: it got no job).
  // Its completion is returned, to be called after the locks are released; the answer goes
  // nowhere, or to a client that only half-closed.
  Completion<core::FetchAnswer> Drop(Waiters::iterator it) { return std::move(Unlink(it).done); }
  static OpResult<core::FetchAnswer> HungUp() {
    return {OpStatus::kUnavailable, std::string(wire::kClientHungUp)};
  }
  static bool HungUp(const Waiter& w) { return w.request.hangup && w.request.hangup->happened(); }

  int64_t NextDeadline() const override {
    int64_t next = queue.NextDeadline();
    if (!deadlines.empty()) next = std::min(next, deadlines.begin()->first);
    // Waiters and only held-back jobs: served when a rate or a hold allows. (Waiters while a
    // job may be taken are waiting on a refused journal, which no timer helps.)
    if (!waiters.empty() && !queue.CanDeliver()) next = std::min(next, queue.NextAllowedAt());
    return std::min(next, next_fire);
  }

  void RunDue(int64_t now, Deferred& after) override {
    queue.Advance(now);
    FireDue(now);
    Serve(now, after);
    // Long polls past their deadline answer an empty list.
    while (!deadlines.empty() && deadlines.begin()->first <= now) {
      Reply(deadlines.begin()->second, {}, after);
    }
  }

  // Hands ready jobs to long polls, oldest waiter first (not while changes are refused). A
  // waiter whose client hung up is dropped instead, should its callback not have run yet.
  void Serve(int64_t now, Deferred& after) {
    if (waiters.empty() || !queue.CanDeliver() || backend.Refusal(Access::kChange)) return;
    while (!waiters.empty() && queue.CanDeliver()) {
      if (HungUp(waiters.front())) {
        after.push_back([done = Drop(waiters.begin())](bool) { done(HungUp()); });
        continue;
      }
      const core::FetchRequest& r = waiters.front().request;
      std::vector<core::Delivery> jobs = queue.Fetch(r.worker, r.max, r.lease_ms, now);
      ObserveFetched(jobs, now);
      backend.LogChange(*this, now,
                        FetchRecord{.worker = r.worker, .max = r.max, .lease_ms = r.lease_ms});
      Reply(waiters.begin(), std::move(jobs), after);
    }
  }

  MemoryBackend& backend;
  std::string name;
  core::Queue queue;
  // Pushed to at least once: shown by ListQueues, counted against max_queues, never forgotten.
  // Atomic so DropIfEmpty may skip listed queues without the slot's lock.
  std::atomic<bool> listed = false;
  // The SHA-256 of the queue's own key (kQueueKeyDigestBytes raw bytes; Backend::SetQueueKey),
  // guarded by mu. Kept here rather than in core::Queue: it says who may call, not how jobs
  // move, and the backend's own snapshot (memory_state.cc, format 2) already writes a record
  // per queue beside core::Queue's, so the queue's format stays as it was.
  std::optional<std::string> key_digest;

  // With mu held. Shown by ListQueues and counted against max_queues (once): pushed to, or
  // holding a key. Invariant: listed_queues_ counts the slots for which this is true.
  bool Counted() const { return listed || key_digest.has_value(); }
  // With mu held: nothing here a client would miss if the name were forgotten (a key is kept
  // until it is removed, even on a queue that never held a job).
  bool HoldsNothing() const {
    return !Counted() && waiters.empty() && schedules.empty() && queue.HoldsNothing();
  }

  // The queue's schedules (core/job_schedule.h) by id, each with its timing read once, and the
  // earliest time one of them fires (INT64_MAX: none), kept by SchedulesChanged. Guarded by mu.
  struct ScheduleEntry {
    core::Schedule schedule;
    core::RepeatRule rule;
  };
  std::map<std::string, ScheduleEntry, std::less<>> schedules;
  int64_t next_fire = INT64_MAX;
  void SchedulesChanged() {
    next_fire = INT64_MAX;
    for (const auto& [id, e] : schedules) {
      if (!e.schedule.state.paused && e.schedule.state.next_ms) {
        next_fire = std::min(next_fire, *e.schedule.state.next_ms);
      }
    }
  }
  // Fires the schedules due at `now`, each in one step with its pushes (memory_schedules.cc).
  void FireDue(int64_t now);
};

}  // namespace anteroom::store
