#include "http/http_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "http/prometheus_text.h"

namespace anteroom::http {

namespace {

// SHARDING. Each thread that records takes a shard of its own, round robin, the first time it
// records; beyond kShards threads they share (still correct: the counters are atomic). The I/O
// threads, the durable log's thread and the Redis connections' threads are a handful.
//
// Measured on the 2-core development machine (a throwaway loop of records, -O2): one thread,
// 6-7 ns a record; two threads recording flat out into one shared series, ~87 ns each (the
// cache line ping-pongs); the same two threads on their own shards, ~10 ns. At 100k requests/s
// even the shared version costs under 1% of a core, but sharding keeps recording flat as
// threads are added, for 2 KiB per series.
constexpr size_t kShards = 8;

size_t ThisThreadsShard() {
  static std::atomic<size_t> next{0};
  thread_local size_t shard = next.fetch_add(1, std::memory_order_relaxed) % kShards;
  return shard;
}

constexpr std::array<uint64_t, HttpMetrics::kBucketBounds.size()> BoundsInNanoseconds() {
  std::array<uint64_t, HttpMetrics::kBucketBounds.size()> out{};
  for (size_t i = 0; i < out.size(); ++i) {
    // The bounds are whole multiples of 50 microseconds: rounding makes them exact.
    out[i] = static_cast<uint64_t>(HttpMetrics::kBucketBounds[i] * 1e9 + 0.5);
  }
  return out;
}
constexpr auto kBoundsNs = BoundsInNanoseconds();
static_assert(kBoundsNs[0] == 100'000 && kBoundsNs[15] == 10'000'000'000);

}  // namespace

struct HttpMetrics::Series {
  // One thread's counters, on cache lines of their own (128 bytes: x86 fetches lines in pairs).
  struct alignas(128) Shard {
    std::array<std::atomic<uint64_t>, kBuckets> buckets{};  // not cumulative
    std::atomic<uint64_t> sum_ns{0};
  };

  std::string method;
  std::string route;
  bool hidden_until_used = false;
  std::array<Shard, kShards> shards;
};

HttpMetrics::HttpMetrics() = default;
HttpMetrics::~HttpMetrics() = default;

HttpMetrics::SeriesId HttpMetrics::AddSeries(std::string_view method, std::string_view route,
                                             bool hidden_until_used) {
  auto series = std::make_unique<Series>();
  series->method = std::string(method);
  series->route = std::string(route);
  series->hidden_until_used = hidden_until_used;
  series_.push_back(std::move(series));
  return static_cast<SeriesId>(series_.size() - 1);
}

void HttpMetrics::Record(SeriesId id, std::chrono::nanoseconds elapsed) const noexcept {
  uint64_t ns = elapsed.count() > 0 ? static_cast<uint64_t>(elapsed.count()) : 0;
  // First bound >= ns: `le` is inclusive. Past the last bound: the +Inf bucket.
  size_t bucket = static_cast<size_t>(std::lower_bound(kBoundsNs.begin(), kBoundsNs.end(), ns) -
                                      kBoundsNs.begin());
  Series::Shard& shard = series_[id]->shards[ThisThreadsShard()];
  shard.buckets[bucket].fetch_add(1, std::memory_order_relaxed);
  shard.sum_ns.fetch_add(ns, std::memory_order_relaxed);
}

HttpMetrics::Totals HttpMetrics::Read(SeriesId id) const {
  Totals totals;
  uint64_t sum_ns = 0;
  for (const Series::Shard& shard : series_[id]->shards) {
    for (size_t b = 0; b < kBuckets; ++b) {
      totals.cumulative[b] += shard.buckets[b].load(std::memory_order_relaxed);
    }
    sum_ns += shard.sum_ns.load(std::memory_order_relaxed);
  }
  for (size_t b = 1; b < kBuckets; ++b) totals.cumulative[b] += totals.cumulative[b - 1];
  totals.count = totals.cumulative.back();
  totals.sum_seconds = static_cast<double>(sum_ns) / 1e9;
  return totals;
}

std::string_view HttpMetrics::method(SeriesId id) const { return series_[id]->method; }
std::string_view HttpMetrics::route(SeriesId id) const { return series_[id]->route; }

void HttpMetrics::AppendTlsCertificate(std::string& out) const {
  int64_t expiry = tls_expiry_.load(std::memory_order_relaxed);
  if (expiry <= 0) return;
  AppendFamilyHeader(out, "anteroom_tls_certificate_expiry_timestamp_seconds", "gauge",
                     "When the listener's TLS certificate stops being valid (its notAfter), in "
                     "seconds since the epoch; re-read on SIGHUP.");
  fmt::format_to(std::back_inserter(out), "anteroom_tls_certificate_expiry_timestamp_seconds {}\n",
                 expiry);
}

void HttpMetrics::AppendPrometheus(std::string& out) const {
  AppendFamilyHeader(out, kFamily, "histogram",
                     "Time from routing an HTTP request until its handler answered, by method "
                     "and route pattern (unmatched: no route).");
  auto it = std::back_inserter(out);
  for (SeriesId id = 0; id < series_.size(); ++id) {
    const Series& series = *series_[id];
    Totals totals = Read(id);
    if (series.hidden_until_used && totals.count == 0) continue;
    std::string labels = fmt::format(R"(method="{}",route="{}")", EscapeLabelValue(series.method),
                                     EscapeLabelValue(series.route));
    for (size_t b = 0; b < kBuckets; ++b) {
      std::string le = b < kBucketBounds.size() ? FormatSampleValue(kBucketBounds[b]) : "+Inf";
      fmt::format_to(it, "{}_bucket{{{},le=\"{}\"}} {}\n", kFamily, labels, le,
                     totals.cumulative[b]);
    }
    fmt::format_to(it, "{}_sum{{{}}} {}\n", kFamily, labels, FormatSampleValue(totals.sum_seconds));
    fmt::format_to(it, "{}_count{{{}}} {}\n", kFamily, labels, totals.count);
  }
}

}  // namespace anteroom::http
