#pragma once
// A growing array of records in chunks. A std::vector doubles: after a growth up to half of it
// is unused (a queue of 100k ready jobs paid ~60 B per job for that) and every record is moved.
// Here growth adds one chunk, never moves a record (references stay valid), and the slack is at
// most one chunk. The first chunks are small and double (2^kFirstShift records, then twice
// that, ... up to 2^kShift), so a slab of a few records costs a few records, not a whole chunk
// (every queue has one: thousands of one-job queues must not cost 127 KB each); past 2^kShift
// records every chunk holds 2^kShift. Records are added at the end and cut from the end
// (Truncate), which gives back the chunks past the end but one: the owner reuses freed slots in
// the middle, and keeps its records packed at the front so that the end empties.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace anteroom::core {

template <typename T, unsigned kShift = 10, unsigned kFirstShift = 4>
class ChunkedSlab {
  static_assert(kFirstShift <= kShift);

 public:
  static constexpr size_t kChunk = size_t{1} << kShift;
  static constexpr size_t kFirst = size_t{1} << kFirstShift;

  T& operator[](size_t i) {
    auto [chunk, offset] = Locate(i);
    return chunks_[chunk][offset];
  }
  const T& operator[](size_t i) const {
    auto [chunk, offset] = Locate(i);
    return chunks_[chunk][offset];
  }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

  // Range-for over the records, in index order.
  template <typename Slab, typename Ref>
  class Iterator {
   public:
    Iterator(Slab* slab, size_t i) : slab_(slab), i_(i) {}
    Ref operator*() const { return (*slab_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iterator& other) const { return i_ == other.i_; }

   private:
    Slab* slab_;
    size_t i_;
  };
  auto begin() { return Iterator<ChunkedSlab, T&>(this, 0); }
  auto end() { return Iterator<ChunkedSlab, T&>(this, size_); }
  auto begin() const { return Iterator<const ChunkedSlab, const T&>(this, 0); }
  auto end() const { return Iterator<const ChunkedSlab, const T&>(this, size_); }

  // A new default record at the end.
  T& emplace_back() {
    if (size_ == capacity_) {
      size_t n = ChunkSize(chunks_.size());
      chunks_.push_back(std::make_unique<T[]>(n));
      capacity_ += n;
    }
    return (*this)[size_++];
  }
  // Grows to n default records (a fresh slab being filled from a snapshot).
  void resize(size_t n) {
    while (size_ < n) emplace_back();
  }
  // Keeps the first n records (n <= size()). Chunks wholly past the end are given back, except
  // the first of them: a size that goes back and forth across a chunk's edge must not allocate
  // and free that chunk each time.
  void Truncate(size_t n) {
    size_ = n;
    size_t keep = n == 0 ? 0 : Locate(n - 1).first + 1;  // chunks holding records
    keep += 1;                                           // and one spare
    while (chunks_.size() > keep) {
      capacity_ -= ChunkSize(chunks_.size() - 1);
      chunks_.pop_back();
    }
  }

 private:
  // The growing chunks cover [0, kChunk): kFirst records, then kFirst, 2 kFirst, ..., kChunk / 2.
  static constexpr size_t kGrowing = kShift - kFirstShift + 1;

  static size_t ChunkSize(size_t chunk) {
    if (chunk == 0) return kFirst;
    if (chunk < kGrowing) return kFirst << (chunk - 1);
    return kChunk;
  }
  // The chunk of record i and its place there.
  static std::pair<size_t, size_t> Locate(size_t i) {
    if (i >= kChunk) return {kGrowing + ((i - kChunk) >> kShift), (i - kChunk) & (kChunk - 1)};
    if (i < kFirst) return {0, i};
    const unsigned top = static_cast<unsigned>(std::bit_width(i)) - 1;  // 2^top <= i < 2^(top+1)
    return {top - kFirstShift + 1, i - (size_t{1} << top)};
  }

  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace anteroom::core
