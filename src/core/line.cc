#include "core/line.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace anteroom::core {

namespace {
constexpr size_t kInitialCapacity = 64;

uint64_t MaskThrough(uint32_t bit) {  // bits 0..bit set
  return bit == 63 ? ~uint64_t{0} : (uint64_t{1} << (bit + 1)) - 1;
}
}  // namespace

Line::Line(MoveFn on_move) : on_move_(std::move(on_move)) {}

Line::Ticket Line::PushBack(Member member) {
  if (tail_ == member_.size()) {
    size_t cap = member_.empty() ? kInitialCapacity : member_.size();
    // Grow when more than half the array is live, otherwise squeeze out the holes.
    Compact(size_ * 2 >= cap ? cap * 2 : cap);
  }
  Ticket t = tail_++;
  member_[t] = member;
  live_[t / kBlockBits] |= uint64_t{1} << (t % kBlockBits);
  AddToBlock(t / kBlockBits, +1);
  ++size_;
  return t;
}

Line::Ticket Line::PushFront(Member member) {
  if (size_ == 0) return PushBack(member);
  if (head_ == 0) {
    // Room in front for a quarter of the line (at least a block), and the same at the back.
    size_t gap = (std::max(size_ / 4, kBlockBits) + kBlockBits - 1) / kBlockBits * kBlockBits;
    size_t cap = std::max(member_.size(), kInitialCapacity);
    while (cap < gap + size_ * 2) cap *= 2;
    Compact(cap, static_cast<Ticket>(gap));
  }
  Ticket t = --head_;
  member_[t] = member;
  live_[t / kBlockBits] |= uint64_t{1} << (t % kBlockBits);
  AddToBlock(t / kBlockBits, +1);
  ++size_;
  return t;
}

void Line::Remove(Ticket ticket) {
  live_[ticket / kBlockBits] &= ~(uint64_t{1} << (ticket % kBlockBits));
  AddToBlock(ticket / kBlockBits, -1);
  if (--size_ == 0) {
    head_ = tail_ = 0;  // every count is zero again: reuse from the start
    return;
  }
  // Skip to the next live ticket, a word at a time.
  while (true) {
    uint64_t word = live_[head_ / kBlockBits] >> (head_ % kBlockBits);
    if (word != 0) {
      head_ += static_cast<Ticket>(std::countr_zero(word));
      return;
    }
    head_ = (head_ / kBlockBits + 1) * kBlockBits;
  }
}

Line::Ticket Line::Append(std::span<const Member> members) {
  Reserve(members.size());
  const Ticket first = tail_;
  size_t k = 0;
  while (k < members.size()) {
    // The members that land in the tail's block, then its count added once.
    size_t block = tail_ / kBlockBits;
    size_t room = kBlockBits - tail_ % kBlockBits;
    size_t take = std::min(room, members.size() - k);
    for (size_t j = 0; j < take; ++j, ++k) {
      Ticket t = tail_++;
      member_[t] = members[k];
      live_[block] |= uint64_t{1} << (t % kBlockBits);
    }
    AddToBlock(block, static_cast<int32_t>(take));
    size_ += take;
  }
  return first;
}

void Line::Reserve(size_t more) {
  if (tail_ + more <= member_.size()) return;
  size_t cap = std::max(member_.size(), kInitialCapacity);
  while (cap < size_ + more) cap *= 2;
  Compact(cap);
}

int64_t Line::Position(Ticket ticket) const {
  // Everything before head_ is empty, so the count of live tickets up to this one is the
  // position: whole blocks from the tree, the rest of this block from its bitmap.
  size_t block = ticket / kBlockBits;
  int64_t sum = std::popcount(live_[block] & MaskThrough(ticket % kBlockBits));
  for (size_t i = block; i > 0; i &= i - 1) sum += tree_[i];
  return sum;
}

Line::Member Line::At(int64_t position) const {
  // The last block whose prefix count is below `position`: the member is in the next one.
  size_t block = 0;
  int64_t left = position;
  size_t step = std::bit_floor(tree_.size() - 1);
  for (; step > 0; step >>= 1) {
    if (block + step < tree_.size() && tree_[block + step] < left) {
      block += step;
      left -= tree_[block];
    }
  }
  uint64_t word = live_[block];
  for (int64_t k = 1; k < left; ++k) word &= word - 1;  // drop the first left-1 live bits
  return member_[block * kBlockBits + static_cast<size_t>(std::countr_zero(word))];
}

void Line::AddToBlock(size_t block, int32_t delta) {
  for (size_t i = block + 1; i < tree_.size(); i += i & (~i + 1)) tree_[i] += delta;
}

void Line::Compact(size_t new_capacity, Ticket first) {
  std::vector<Member> members(new_capacity, kNone);
  std::vector<uint64_t> live(new_capacity / kBlockBits, 0);
  Ticket next = first;
  for (Ticket t = head_; t < tail_; ++t) {
    if ((live_[t / kBlockBits] >> (t % kBlockBits) & 1) == 0) continue;
    members[next] = member_[t];
    live[next / kBlockBits] |= uint64_t{1} << (next % kBlockBits);
    on_move_(member_[t], next);
    ++next;
  }
  member_ = std::move(members);
  live_ = std::move(live);
  head_ = size_ == 0 ? 0 : first;
  tail_ = next;
  // Linear Fenwick construction: each node pushes its sum to its parent once.
  size_t blocks = live_.size();
  tree_.assign(blocks + 1, 0);
  for (size_t i = 1; i <= blocks; ++i) {
    tree_[i] += std::popcount(live_[i - 1]);
    size_t parent = i + (i & (~i + 1));
    if (parent <= blocks) tree_[parent] += tree_[i];
  }
}

size_t Line::MemoryBytes() const {
  return live_.capacity() * sizeof(uint64_t) + tree_.capacity() * sizeof(int32_t) +
         member_.capacity() * sizeof(Member);
}

}  // namespace anteroom::core
