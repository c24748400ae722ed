#include "core/line.h"

#include <utility>

namespace anteroom::core {

namespace {
constexpr size_t kInitialCapacity = 16;
}

Line::Line(MoveFn on_move) : on_move_(std::move(on_move)) {}

Line::Ticket Line::PushBack(Member member) {
  if (tail_ == member_.size()) {
    size_t cap = member_.empty() ? kInitialCapacity : member_.size();
    // Grow when more than half the array is live, otherwise squeeze out the holes.
    Compact(size_ * 2 >= cap ? cap * 2 : cap);
  }
  Ticket t = tail_++;
  member_[t] = member;
  Add(t, +1);
  ++size_;
  return t;
}

void Line::Remove(Ticket ticket) {
  member_[ticket] = kNone;
  Add(ticket, -1);
  if (--size_ == 0) {
    head_ = tail_ = 0;  // every count is zero again: reuse from the start
    return;
  }
  while (member_[head_] == kNone) ++head_;
}

int64_t Line::Position(Ticket ticket) const {
  // Everything before head_ is empty, so the prefix sum up to the ticket is the position.
  int64_t sum = 0;
  for (size_t i = static_cast<size_t>(ticket) + 1; i > 0; i &= i - 1) sum += tree_[i];
  return sum;
}

void Line::Add(Ticket ticket, int32_t delta) {
  for (size_t i = static_cast<size_t>(ticket) + 1; i < tree_.size(); i += i & (~i + 1)) {
    tree_[i] += delta;
  }
}

void Line::Compact(size_t new_capacity) {
  std::vector<Member> members(new_capacity, kNone);
  Ticket next = 0;
  for (Ticket t = head_; t < tail_; ++t) {
    if (member_[t] == kNone) continue;
    members[next] = member_[t];
    on_move_(member_[t], next);
    ++next;
  }
  member_ = std::move(members);
  head_ = 0;
  tail_ = next;
  // Linear Fenwick construction: each node pushes its sum to its parent once.
  tree_.assign(new_capacity + 1, 0);
  for (size_t i = 1; i <= new_capacity; ++i) {
    tree_[i] += (i - 1 < next) ? 1 : 0;
    size_t parent = i + (i & (~i + 1));
    if (parent <= new_capacity) tree_[parent] += tree_[i];
  }
}

size_t Line::MemoryBytes() const {
  return tree_.capacity() * sizeof(int32_t) + member_.capacity() * sizeof(Member);
}

}  // namespace anteroom::core
