#pragma once
// The ready jobs of a queue in delivery order: higher priority first; within a priority, jobs
// put at the head (returned after a failed delivery) before the rest, the latest first, then
// FIFO. One deque per priority present, so a push or a take is O(1) (plus O(log p) for p
// priorities in use) and costs no allocation per job, unlike a node-based ordered set.
//
// Removal from the middle (a cancelled job) is lazy: the entry stays and is skipped when it
// reaches the front. An entry is live while its job's `ticket` still matches, and the owner
// gives every placement a new ticket, so a reused slot never revives an old entry.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <utility>

namespace anteroom::core {

class ReadyLine {
 public:
  using Index = uint32_t;

  void PushBack(Index i, int32_t priority, uint64_t ticket) {
    levels_[priority].push_back({i, ticket});
    ++size_;
  }
  void PushFront(Index i, int32_t priority, uint64_t ticket) {
    levels_[priority].push_front({i, ticket});
    ++size_;
  }
  // The caller has made the job's ticket stale; its entry is dropped when it is reached.
  void Forget() { --size_; }

  size_t size() const { return size_; }

  // Every entry, live or not, in delivery order: f(index, priority, ticket) (for snapshots).
  template <typename F>
  void ForEach(const F& f) const {
    for (const auto& [priority, line] : levels_) {
      for (const Entry& e : line) f(e.index, priority, e.ticket);
    }
  }
  bool empty() const { return size_ == 0; }

  // The first live entry, (index, priority), the stale ones before it dropped. Requires !empty().
  template <typename Live>
  std::pair<Index, int32_t> Front(const Live& live) {
    while (true) {
      auto level = levels_.begin();
      std::deque<Entry>& line = level->second;
      const Entry& e = line.front();
      if (live(e.index, e.ticket)) return {e.index, level->first};
      line.pop_front();
      if (line.empty()) levels_.erase(level);
    }
  }

  // Takes the first live job. `live(i, ticket)` tells whether an entry is still current.
  // Requires !empty().
  template <typename Live>
  Index TakeFirst(const Live& live) {
    while (true) {
      auto level = levels_.begin();
      std::deque<Entry>& line = level->second;
      Entry e = line.front();
      line.pop_front();
      if (line.empty()) levels_.erase(level);
      if (live(e.index, e.ticket)) {
        --size_;
        return e.index;
      }
    }
  }

 private:
  struct Entry {
    Index index;
    uint64_t ticket;
  };
  std::map<int32_t, std::deque<Entry>, std::greater<>> levels_;  // highest priority first
  size_t size_ = 0;                                              // live entries
};

}  // namespace anteroom::core
