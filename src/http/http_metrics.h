#pragma once
// Latency of HTTP requests as Prometheus histograms, one series per (method, route), for
// GET /metrics. The router records every request (from Dispatch until the handler responds).
//
// Recording sits on the hot path (~100k requests/s on 2 I/O threads), so it takes no lock and
// allocates nothing: a series is fixed arrays of relaxed atomic counters (one per bucket, not
// cumulative, plus the sum in nanoseconds), and a record is one bucket search and two relaxed
// fetch_adds. The counters are sharded by thread: every I/O thread serves the same hot routes
// (check, fetch), and two cores bumping one counter trade its cache line at every request. See
// SHARDING in http_metrics.cc for the measurement. A scrape adds the shards up; it may see a
// request's bucket before its sum (relaxed), which monitoring tolerates, and `_count` is the
// sum of the buckets, so buckets and count always agree.
//
// Series are added at start-up only (Router::Add), before the first request; after that the
// set is fixed and shared by every thread.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom::http {

class HttpMetrics {
 public:
  // Upper bounds of the buckets, in seconds (the `le` label); +Inf comes after them.
  static constexpr std::array<double, 16> kBucketBounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
  static constexpr size_t kBuckets = kBucketBounds.size() + 1;  // with +Inf

  using SeriesId = uint32_t;

  HttpMetrics();
  ~HttpMetrics();
  HttpMetrics(const HttpMetrics&) = delete;
  HttpMetrics& operator=(const HttpMetrics&) = delete;

  // Start-up only: a new series labelled method and route. A series `hidden_until_used` is not
  // written while its count is zero (e.g. unmatched requests of each method).
  SeriesId AddSeries(std::string_view method, std::string_view route,
                     bool hidden_until_used = false);

  // One request of that series took `elapsed`. Any thread, no lock.
  void Record(SeriesId id, std::chrono::nanoseconds elapsed) const noexcept;

  // A series' totals now, for the exposition and tests.
  struct Totals {
    std::array<uint64_t, kBuckets> cumulative{};  // requests at or under each bound; last: all
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  Totals Read(SeriesId id) const;
  size_t size() const { return series_.size(); }
  std::string_view method(SeriesId id) const;
  std::string_view route(SeriesId id) const;

  // Appends the family anteroom_http_request_duration_seconds in text format 0.0.4: every
  // series, with zeros while it has seen nothing (so rates start from a known zero), except
  // the hidden ones.
  void AppendPrometheus(std::string& out) const;

  static constexpr std::string_view kFamily = "anteroom_http_request_duration_seconds";

  // The listener's TLS certificate: when it stops being valid (Unix seconds), set at start-up
  // and at each reload, so an alert fires before a renewal that never happened bites. Any
  // thread.
  void SetTlsCertificateExpiry(int64_t unix_seconds) const noexcept {
    tls_expiry_.store(unix_seconds, std::memory_order_relaxed);
  }
  // Appends anteroom_tls_certificate_expiry_timestamp_seconds, when TLS is on.
  void AppendTlsCertificate(std::string& out) const;

 private:
  struct Series;
  std::vector<std::unique_ptr<Series>> series_;
  mutable std::atomic<int64_t> tls_expiry_{0};
};

}  // namespace anteroom::http
