#pragma once
// The embedded backend's recent lifecycle events, in one order, in memory: what the admin event
// stream resumes from (Last-Event-ID) and webhooks are fed from. Not durable: a restart starts
// an empty ring whose horizon is the start, so a reader asking for events from before it is told
// to reset (the events themselves are not lost to webhooks: those deliveries are queue jobs).
//
// Kept: every event of the last keep_ms, or the last keep_count events if that is more, but never
// more than max_count (memory: ~150 bytes an event). Invariant: horizon_ < ids of everything
// kept, and every event after horizon_ that was ever appended is kept.

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "store/lifecycle_event.h"

namespace anteroom::store {

struct EventRingLimits {
  size_t keep_count = kEventsKeepCount;
  int64_t keep_ms = kEventsKeepMs;
  size_t max_count = kEventsMaxCount;
};

class EventRing {
 public:
  EventRing(EventRingLimits limits, int64_t start_ms);

  // Gives each event its id (in order, after every id given before) and keeps it; then calls
  // the watchers. Thread-safe.
  void Append(std::vector<LifecycleEvent> events, int64_t now_ms);
  // Up to `max` events after `after` (nullopt: from the newest on, so nothing yet).
  EventRead ReadAfter(std::optional<EventId> after, size_t max) const;
  // `fn` runs after each Append, on its thread, outside the ring's lock; it must not block.
  void Watch(std::function<void()> fn);
  size_t size() const;

 private:
  void Trim(int64_t now_ms);  // under mu_

  EventRingLimits limits_;
  mutable std::mutex mu_;
  std::deque<LifecycleEvent> events_;
  EventId horizon_;  // the newest position not kept (the start, or the newest event dropped)
  EventId last_;     // the newest id given
  std::vector<std::function<void()>> watchers_;
};

}  // namespace anteroom::store
