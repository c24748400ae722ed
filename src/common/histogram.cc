#include "common/histogram.h"

#include <algorithm>

namespace anteroom {

namespace {

size_t ThisThreadsShard(size_t shards) {
  static std::atomic<size_t> next{0};
  thread_local size_t shard = next.fetch_add(1, std::memory_order_relaxed);
  return shard % shards;
}

}  // namespace

Histogram::Histogram(std::initializer_list<double> bounds_seconds) : bounds_(bounds_seconds) {
  bounds_.resize(std::min(bounds_.size(), kMaxBuckets - 1));
  for (double b : bounds_) bounds_ns_.push_back(static_cast<uint64_t>(b * 1e9 + 0.5));
}

void Histogram::ObserveNs(int64_t ns) noexcept {
  uint64_t v = ns > 0 ? static_cast<uint64_t>(ns) : 0;
  // First bound >= v: `le` is inclusive. Past the last bound: the +Inf bucket.
  size_t bucket = static_cast<size_t>(std::lower_bound(bounds_ns_.begin(), bounds_ns_.end(), v) -
                                      bounds_ns_.begin());
  Shard& shard = shards_[ThisThreadsShard(kShards)];
  shard.buckets[bucket].fetch_add(1, std::memory_order_relaxed);
  shard.sum_ns.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Totals Histogram::Read() const {
  Totals totals;
  size_t n = bounds_.size() + 1;
  totals.cumulative.assign(n, 0);
  uint64_t sum_ns = 0;
  for (const Shard& shard : shards_) {
    for (size_t b = 0; b < n; ++b) {
      totals.cumulative[b] += shard.buckets[b].load(std::memory_order_relaxed);
    }
    sum_ns += shard.sum_ns.load(std::memory_order_relaxed);
  }
  for (size_t b = 1; b < n; ++b) totals.cumulative[b] += totals.cumulative[b - 1];
  totals.count = totals.cumulative.back();
  totals.sum_seconds = static_cast<double>(sum_ns) / 1e9;
  return totals;
}

EngineMetrics& ProcessEngineMetrics() {
  static EngineMetrics metrics;
  return metrics;
}

}  // namespace anteroom
