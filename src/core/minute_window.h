#pragma once
// Counts events over the last 60 whole seconds (the current second and the 59 before it), in
// 60 one-second buckets: bounded memory whatever the rate. Used for the admission-rate cap
// (at most N admissions in any such window) and for the rate at which slots free up (ETA).
// Times must not go backwards.

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/bytes.h"

namespace anteroom::core {

class MinuteWindow {
 public:
  static constexpr int64_t kSeconds = 60;
  static constexpr int64_t kWindowMs = kSeconds * 1000;

  void Add(int64_t now_ms);
  int64_t Count(int64_t now_ms) const;
  // The earliest time >= now_ms at which Count() < limit (limit >= 1).
  int64_t NextBelow(int64_t now_ms, int64_t limit) const;

  // Snapshots: the buckets as they are.
  void Save(ByteWriter& out) const;
  void Load(ByteReader& in);

 private:
  struct Bucket {
    int64_t second = INT64_MIN;
    int64_t count = 0;
  };
  static int64_t SecondOf(int64_t ms) { return ms >= 0 ? ms / 1000 : (ms - 999) / 1000; }
  std::array<Bucket, kSeconds> buckets_{};
  // Count() is asked on every waiting check: remember the answer for the current second.
  mutable int64_t cached_second_ = INT64_MIN;
  mutable int64_t cached_count_ = 0;
};

}  // namespace anteroom::core
