#include "core/deadline_heap.h"

namespace anteroom::core {

void DeadlineHeap::Set(Member m, uint64_t key) {
  if (m >= pos_.size()) pos_.resize(static_cast<size_t>(m) + 1, kAbsent);
  if (pos_[m] == kAbsent) {
    heap_.push_back({key, m});
    pos_[m] = static_cast<uint32_t>(heap_.size() - 1);
    SiftUp(heap_.size() - 1);
    return;
  }
  size_t i = pos_[m];
  uint64_t old = heap_[i].key;
  heap_[i].key = key;
  if (key < old)
    SiftUp(i);
  else if (key > old)
    SiftDown(i);
}

void DeadlineHeap::ForgetMembersFrom(Member n) {
  if (pos_.size() > n) pos_.resize(n);
  if (pos_.capacity() > 2 * pos_.size() + 1024) pos_.shrink_to_fit();
  if (heap_.capacity() > 2 * heap_.size() + 1024) heap_.shrink_to_fit();
}

void DeadlineHeap::Remove(Member m) {
  size_t i = pos_[m];
  pos_[m] = kAbsent;
  Entry last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;
  Entry old = heap_[i];
  Place(i, last);
  if (Before(last, old))
    SiftUp(i);
  else
    SiftDown(i);
}

void DeadlineHeap::SiftUp(size_t i) {
  Entry e = heap_[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!Before(e, heap_[parent])) break;
    Place(i, heap_[parent]);
    i = parent;
  }
  Place(i, e);
}

void DeadlineHeap::SiftDown(size_t i) {
  Entry e = heap_[i];
  size_t n = heap_.size();
  while (true) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
    if (!Before(heap_[child], e)) break;
    Place(i, heap_[child]);
    i = child;
  }
  Place(i, e);
}

}  // namespace anteroom::core
