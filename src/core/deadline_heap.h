#pragma once
// A binary min-heap of one deadline key per member, indexed so that a member's key can be
// raised, lowered or removed in O(log n). Members are small dense integers (slab indices).
//
// Entries are ordered by (key, member), a total order: the top is the same whatever the order
// of the calls that built the heap, so a room or queue restored from a snapshot expires its
// sessions and jobs in exactly the order the original would have (log replay depends on it).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace anteroom::core {

class DeadlineHeap {
 public:
  using Member = uint32_t;
  struct Entry {
    uint64_t key;
    Member member;
  };

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Entry& Top() const { return heap_.front(); }
  bool Contains(Member m) const { return m < pos_.size() && pos_[m] != kAbsent; }
  uint64_t KeyOf(Member m) const { return heap_[pos_[m]].key; }
  // Every entry, in heap order (for snapshots).
  const std::vector<Entry>& entries() const { return heap_; }

  // Inserts, or moves an existing member to `key`.
  void Set(Member m, uint64_t key);
  void Remove(Member m);
  // No member is n or above any more (their slab was cut): the index of members shrinks to n,
  // and storage far beyond what is held is given back.
  void ForgetMembersFrom(Member n);
  size_t MemoryBytes() const {
    return heap_.capacity() * sizeof(Entry) + pos_.capacity() * sizeof(uint32_t);
  }

 private:
  static constexpr uint32_t kAbsent = UINT32_MAX;
  static bool Before(const Entry& a, const Entry& b) {
    return a.key < b.key || (a.key == b.key && a.member < b.member);
  }
  void SiftUp(size_t i);
  void SiftDown(size_t i);
  void Place(size_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.member] = static_cast<uint32_t>(i);
  }

  std::vector<Entry> heap_;
  std::vector<uint32_t> pos_;  // member -> index in heap_, kAbsent when not queued
};

}  // namespace anteroom::core
