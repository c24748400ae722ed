#pragma once
// The waiting line of one room: first come, first served, with exact positions in O(log n).
//
// Each arrival takes the next ticket; a Fenwick tree over tickets counts who is still in line,
// so a position is one prefix sum. Leaving clears a ticket in O(log n). Tickets are array
// indices: when the tail reaches the end of the array, the line is compacted (live members
// renumbered in order, tree rebuilt in O(capacity)) and grown if it is more than half full,
// which keeps memory proportional to the number waiting and costs O(1) amortised per arrival.
//
// Invariants: every ticket below head_ is empty; member_[head_] is live whenever size_ > 0;
// tree_ sums exactly the live tickets.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace anteroom::core {

class Line {
 public:
  using Ticket = uint32_t;
  using Member = uint32_t;
  static constexpr Member kNone = UINT32_MAX;

  // Compaction renumbers tickets; the owner learns each member's new ticket through this.
  using MoveFn = std::function<void(Member, Ticket)>;
  explicit Line(MoveFn on_move);

  Ticket PushBack(Member member);
  void Remove(Ticket ticket);
  // 1 = next in. Requires a live ticket.
  int64_t Position(Ticket ticket) const;
  // Requires !empty().
  Member Front() const { return member_[head_]; }
  Ticket FrontTicket() const { return head_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Bytes held by the arrays (for the memory benchmark).
  size_t MemoryBytes() const;

 private:
  void Add(Ticket ticket, int32_t delta);
  void Compact(size_t new_capacity);

  MoveFn on_move_;
  std::vector<int32_t> tree_;    // Fenwick tree, 1-based: tree_[i] covers (i - lowbit(i), i]
  std::vector<Member> member_;   // member holding each ticket, kNone when empty
  Ticket head_ = 0;
  Ticket tail_ = 0;              // next ticket to hand out
  size_t size_ = 0;
};

}  // namespace anteroom::core
