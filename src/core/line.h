#pragma once
// The waiting line of one room: first come, first served, with exact positions in O(log n).
//
// Each arrival takes the next ticket. A bitmap marks the tickets still in line, and a Fenwick
// tree counts them per block of 64 tickets, so a position is a prefix sum over blocks (a small
// tree that stays in cache: 1M waiting -> 16k blocks) plus one popcount: about one cache miss
// per lookup. When the tail reaches the end of the arrays, the line is compacted (live members
// renumbered in order, tree rebuilt in O(capacity)) and grown if more than half full, which
// keeps memory proportional to the number waiting and costs O(1) amortised per arrival.
//
// Invariants: every ticket below head_ is empty; the ticket head_ is live whenever size_ > 0;
// tree_ counts exactly the live tickets of each block.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
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
  // PushBack of each of `members` in order, the tree updated once per block rather than once
  // per member (a draw publishing 10M places: ~1 s less). The k-th gets ticket first + k.
  Ticket Append(std::span<const Member> members);
  // Goes ahead of everyone in line (people sent back from their slots keep their head start).
  Ticket PushFront(Member member);
  void Remove(Ticket ticket);
  // Room for `more` arrivals without a compaction: one now (cheap while the line is short,
  // as when a draw is about to publish its order), not one per doubling as they come (a
  // compaction renumbers everyone: ~250 ms at 8M).
  void Reserve(size_t more);
  // 1 = next in. Requires a live ticket.
  int64_t Position(Ticket ticket) const;
  // Requires !empty().
  Member Front() const { return member_[head_]; }
  // The member at `position` (1 = next in), 1 <= position <= size(): a descent of the tree,
  // then a select in one word.
  Member At(int64_t position) const;
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Calls fn(member) for everyone in line, first in line first: one pass over the bitmap.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (size_t word = head_ / kBlockBits; size_ > 0 && word * kBlockBits < tail_; ++word) {
      for (uint64_t bits = live_[word]; bits != 0; bits &= bits - 1) {
        fn(member_[word * kBlockBits + static_cast<size_t>(std::countr_zero(bits))]);
      }
    }
  }
  // Bytes held by the arrays (for the memory benchmark).
  size_t MemoryBytes() const;

 private:
  static constexpr size_t kBlockBits = 64;
  void AddToBlock(size_t block, int32_t delta);
  // Renumbers the live tickets from `first` on (tickets below it stay free for PushFront).
  void Compact(size_t new_capacity, Ticket first = 0);

  MoveFn on_move_;
  std::vector<uint64_t> live_;  // bit t%64 of word t/64: ticket t is in line
  std::vector<int32_t> tree_;   // Fenwick tree over blocks, 1-based
  std::vector<Member> member_;  // member holding each ticket (stale once the bit is clear)
  Ticket head_ = 0;
  Ticket tail_ = 0;  // next ticket to hand out
  size_t size_ = 0;
};

}  // namespace anteroom::core
