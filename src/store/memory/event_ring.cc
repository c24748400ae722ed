#include "store/memory/event_ring.h"

#include <algorithm>

namespace anteroom::store {

EventRing::EventRing(EventRingLimits limits, int64_t start_ms)
    : limits_(limits), horizon_{start_ms, 0}, last_{start_ms, 0} {}

void EventRing::Append(std::vector<LifecycleEvent> events, int64_t now_ms) {
  if (events.empty()) return;
  std::vector<std::function<void()>> watchers;
  {
    std::lock_guard lock(mu_);
    for (LifecycleEvent& e : events) {
      // Ids follow the order of appends even if the clock steps back.
      last_ = now_ms > last_.ms ? EventId{now_ms, 1} : EventId{last_.ms, last_.n + 1};
      e.id = last_;
      events_.push_back(std::move(e));
    }
    Trim(now_ms);
    watchers = watchers_;
  }
  for (auto& fn : watchers) fn();
}

void EventRing::Trim(int64_t now_ms) {
  while (!events_.empty()) {
    const LifecycleEvent& oldest = events_.front();
    bool over_max = events_.size() > limits_.max_count;
    bool old = oldest.id.ms < now_ms - limits_.keep_ms && events_.size() > limits_.keep_count;
    if (!over_max && !old) break;
    horizon_ = oldest.id;
    events_.pop_front();
  }
}

EventRead EventRing::ReadAfter(std::optional<EventId> after, size_t max) const {
  std::lock_guard lock(mu_);
  EventRead out;
  EventId from = after.value_or(last_);
  // Before the horizon: some of what came after it is gone. After the newest id given: not a
  // position of this order (another process's clock, a made-up id), so everything kept is new.
  if (from < horizon_ || last_ < from) {
    out.reset = true;
    from = horizon_;
  }
  auto it = std::upper_bound(events_.begin(), events_.end(), from,
                             [](const EventId& id, const LifecycleEvent& e) { return id < e.id; });
  for (; it != events_.end() && out.events.size() < max; ++it) out.events.push_back(*it);
  out.last = out.events.empty() ? from : out.events.back().id;
  return out;
}

void EventRing::Watch(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  watchers_.push_back(std::move(fn));
}

size_t EventRing::size() const {
  std::lock_guard lock(mu_);
  return events_.size();
}

}  // namespace anteroom::store
