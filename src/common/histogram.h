#pragma once
// A process-wide Prometheus histogram over fixed bucket bounds, for measurements taken on hot
// paths (a fetch, an ack, an fsync): an observation is a bucket search and two relaxed atomic
// adds, no lock, no allocation. The counters are sharded by thread as HttpMetrics' are (see
// SHARDING in http/http_metrics.cc): the I/O threads observe the same histograms at once.
//
// Values are kept as integer nanoseconds (sums of milliseconds or nanoseconds stay exact); the
// bounds are given in seconds, Prometheus's base unit. Rendering is the caller's (the server's
// /metrics): this layer knows no exposition format.

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace anteroom {

class Histogram {
 public:
  // `bounds_seconds`: the buckets' upper bounds (inclusive), ascending; +Inf comes after them.
  explicit Histogram(std::initializer_list<double> bounds_seconds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void ObserveNs(int64_t ns) noexcept;  // negative values count as 0
  void ObserveMs(int64_t ms) noexcept { ObserveNs(ms > 0 ? ms * 1'000'000 : 0); }

  struct Totals {
    std::vector<uint64_t> cumulative;  // at or under each bound, then all (+Inf)
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  // Every shard added up. A concurrent observation may show in its bucket before its sum.
  Totals Read() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  static constexpr size_t kShards = 8;
  static constexpr size_t kMaxBuckets = 24;  // with +Inf
  struct alignas(128) Shard {
    std::array<std::atomic<uint64_t>, kMaxBuckets> buckets{};  // not cumulative
    std::atomic<uint64_t> sum_ns{0};
  };
  std::vector<double> bounds_;
  std::vector<uint64_t> bounds_ns_;
  std::array<Shard, kShards> shards_;
};

// What the engine measures about itself, one set per process: the backends observe, GET
// /metrics reads. Process-wide rather than per backend because a process serves one backend,
// and the measuring points (the log's fsync, a Redis reply's parse) sit far from where a
// backend is put together.
struct EngineMetrics {
  // Job wait (ready -> fetched) and run (fetched -> acked), in the engine's milliseconds.
  Histogram job_wait{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,    2.5,
                     5,     10,   30,    60,   120, 300,  600, 1800, 3600};
  Histogram job_run{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,    2.5,
                    5,     10,   30,    60,   120, 300,  600, 1800, 3600};
  // A room's wait (joined the line -> admitted), in the engine's milliseconds: a fast door lets
  // people in within seconds, a launch-day line keeps them for hours.
  Histogram room_wait{0.1, 0.5, 1,    2.5,  5,    10,   30,    60,   120,
                      300, 600, 1200, 1800, 3600, 7200, 14400, 28800};
  // One fdatasync of the data directory's files (log segments, snapshots).
  Histogram log_fsync{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  std::atomic<uint64_t> log_fsync_errors{0};
};
EngineMetrics& ProcessEngineMetrics();

}  // namespace anteroom
