#pragma once
// A growing array of records in fixed chunks of 2^kShift. A std::vector doubles: after a
// growth up to half of it is unused (a queue of 100k ready jobs paid ~60 B per job for that)
// and every record is moved. Here growth adds one chunk, never moves a record (references stay
// valid), and the slack is at most one chunk. Records are only added, never removed: freed
// slots are reused by the owner.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace anteroom::core {

template <typename T, unsigned kShift = 10>
class ChunkedSlab {
 public:
  static constexpr size_t kChunk = size_t{1} << kShift;

  T& operator[](size_t i) { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  const T& operator[](size_t i) const { return chunks_[i >> kShift][i & (kChunk - 1)]; }
  size_t size() const { return size_; }
  size_t capacity() const { return chunks_.size() * kChunk; }

  // A new default record at the end.
  T& emplace_back() {
    if (size_ == capacity()) chunks_.push_back(std::make_unique<T[]>(kChunk));
    return (*this)[size_++];
  }
  // Grows to n default records (a fresh slab being filled from a snapshot).
  void resize(size_t n) {
    while (size_ < n) emplace_back();
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  size_t size_ = 0;
};

}  // namespace anteroom::core
