#pragma once
// A hash set of uint32_t handles (indices into a slab the owner keeps) that grows without a
// pause. A boost::unordered_flat_set rehashes every element at once when it outgrows its max
// load: at 10M sessions one insert paid 754 ms for that while the room answered nobody. Here,
// as Redis's dict does, the growth is spread over the operations that follow it:
//
//  - An insert that would take the table (`cur_`) past its max load makes it the old table
//    (`old_`) instead, and a new `cur_` is reserved for about 1.5 times its size (the same
//    doubling of buckets boost makes). Only this allocation is paid at once.
//  - While `old_` holds elements, every insert and every erase first moves up to kStep of them
//    into `cur_` (at the drain iterator `drain_`), so no operation moves more than kStep.
//    Inserts go to `cur_` only; finds and erases look in both tables.
//  - When `old_` is empty, its memory is given back and the move is over.
//
// The move always ends before `cur_` itself must grow: at the start `old_` holds s elements
// and `cur_` has room for at least s + max(s / 2, s / kStep + 2) (`reserve`). During the move
// `cur_`'s room left (max_load - size) shrinks only by inserts (one each) and moved elements
// (s in all; erases from `old_` only make that fewer); erases never shrink it (boost's
// anti-drift lowers max_load by at most one per erase, and the size drops by one). Each insert
// moves kStep, so at most ceil(s / kStep) inserts come before the end, and
// s + ceil(s / kStep) < s + s / kStep + 2. (Were it ever wrong, boost would grow `cur_` by
// itself, at once: still correct, as `drain_` points into `old_`, but the old pause;
// tests/unit/incremental_index_test.cc checks that it does not happen.)
//
// What the boost 1.81 flat tables guarantee that this relies on (boost/unordered/detail/foa.hpp):
//  - erase(iterator) destroys that element and resets its slot's metadata, nothing else: every
//    other iterator stays valid, so `drain_` survives erases elsewhere in `old_`; an erase of
//    the element at `drain_` steps `drain_` past it first.
//  - Nothing is inserted into `old_` during a move, so every element not yet moved lies at or
//    after `drain_`, and iterating from `drain_` visits each of them once.
//  - begin() scans the metadata for the first element: it is called once per move, never per
//    step. A step's ++ scans empty slots too; erases ahead of `drain_` leave holes it skips,
//    16 slots of metadata per SIMD compare (all of a 10M table's metadata is ~16 MB).
//
// Hash and Eq are those the flat set takes; with `is_transparent` in both, find and erase take
// any key they accept (the room looks sessions up by id, as a string_view). They must stay
// valid for every element while it is in the index: a move hashes the elements it moves.
// Not thread-safe; not copyable nor movable (`drain_` points into `old_`).

#include <boost/unordered/unordered_flat_set.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace anteroom::core {

template <typename Hash, typename Eq, size_t kStep = 32>
class IncrementalIndex {
  static_assert(kStep >= 4, "s / 2 must be the larger term but for tiny tables (see StartMove)");

 public:
  using Table = boost::unordered_flat_set<uint32_t, Hash, Eq>;
  static constexpr size_t kMaxMovesPerOp = kStep;

  IncrementalIndex(const Hash& hash, const Eq& eq) : cur_(0, hash, eq), old_(0, hash, eq) {}
  IncrementalIndex(const IncrementalIndex&) = delete;
  IncrementalIndex& operator=(const IncrementalIndex&) = delete;

  size_t size() const { return cur_.size() + old_.size(); }
  bool empty() const { return size() == 0; }
  // Slots of both tables: what the memory accounting counts (each a uint32_t and a metadata
  // byte, as in one flat set).
  size_t bucket_count() const { return cur_.bucket_count() + old_.bucket_count(); }
  // A growth is being spread: some elements are still in the old table.
  bool moving() const { return !old_.empty(); }
  // Elements moved from an old table into a new one since construction (tests, diagnostics).
  uint64_t moved() const { return moved_; }
  // During a move, the element the next step moves first (tests: erasing it must be safe).
  std::optional<uint32_t> next_to_move() const {
    if (!moving()) return std::nullopt;
    return *drain_;
  }

  // The element equal to `key`, if any.
  template <typename K>
  std::optional<uint32_t> find(const K& key) const {
    if (auto it = cur_.find(key); it != cur_.end()) return *it;
    if (moving()) {
      if (auto it = old_.find(key); it != old_.end()) return *it;
    }
    return std::nullopt;
  }
  template <typename K>
  bool contains(const K& key) const {
    return find(key).has_value();
  }

  // Adds `v` unless an equal element is there; answers whether it was added. Moves at most
  // kStep elements; the only other cost beyond one flat-set insert is, once per growth, the
  // new table's allocation.
  bool insert(uint32_t v) {
    if (!moving() && cur_.size() >= cur_.max_load()) {  // boost would rehash all of cur_ now
      if (cur_.contains(v)) return false;
      StartMove();
    }
    if (moving()) {
      Step();
      if (moving() && old_.contains(v)) return false;
    }
    return cur_.insert(v).second;
  }

  // Removes the element equal to `key`, if any; answers whether there was one. Moves at most
  // kStep elements.
  template <typename K>
  bool erase(const K& key) {
    bool erased = false;
    if (auto it = cur_.find(key); it != cur_.end()) {
      cur_.erase(it);
      erased = true;
    } else if (moving()) {
      if (auto it = old_.find(key); it != old_.end()) {
        EraseOld(it);
        erased = true;
      }
    }
    if (moving()) Step();
    return erased;
  }

  // Room for `n` elements with no growth: any move in progress is finished first, at once
  // (for bulk loads such as a snapshot's restore, not for request paths).
  void reserve(size_t n) {
    FinishMove();
    cur_.reserve(n);
  }

  // Calls f(v) for every element, each once, in no particular order. f must not change the
  // index.
  template <typename F>
  void ForEach(F&& f) const {
    for (uint32_t v : cur_) f(v);
    if (moving()) {
      for (auto it = drain_; it != old_.end(); ++it) f(*it);
    }
  }

 private:
  using Iterator = typename Table::iterator;

  // cur_ becomes old_; a new, empty cur_ with room for the move and the inserts during it.
  void StartMove() {
    old_.swap(cur_);  // old_ was empty and held no memory (Release)
    size_t s = old_.size();
    // s / 2: the doubling boost would make; s / kStep + 2 only matters for tiny tables, which
    // then grow as boost's do (14 slots, 29, 59, ...).
    cur_.reserve(s + std::max(s / 2, s / kStep + 2));
    drain_ = old_.begin();  // the one scan for the first element, per growth
    if (!moving()) Release();
  }

  // Moves up to kStep elements from old_ into cur_.
  void Step() {
    for (size_t k = 0; k < kStep && moving(); ++k) MoveOne();
  }

  void FinishMove() {
    while (moving()) MoveOne();
  }

  void MoveOne() {
    uint32_t v = *drain_;
    cur_.insert(v);  // before the erase: should it throw, v is still in old_
    EraseOld(drain_);
    ++moved_;
  }

  // Erases an element of old_, stepping drain_ past it if it is the one there; the end of the
  // move when old_ is left empty.
  void EraseOld(Iterator it) {
    if (it == drain_) ++drain_;
    old_.erase(it);
    if (old_.empty()) Release();
  }

  // Gives old_'s memory back: a table with no buckets allocates nothing.
  void Release() {
    old_ = Table(0, cur_.hash_function(), cur_.key_eq());
    drain_ = Iterator();
  }

  Table cur_;       // takes every insert
  Table old_;       // during a move: the elements not moved yet; else empty, with no buckets
  Iterator drain_;  // during a move: the next element of old_ to move
  uint64_t moved_ = 0;
};

}  // namespace anteroom::core
