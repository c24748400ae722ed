// The HTTP latency histograms and the Prometheus text helpers: buckets, totals, escaping, and
// recording from several threads at once.
#include "http/http_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http/prometheus_text.h"

namespace anteroom::http {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST(PrometheusTextTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("plain-name_1.2:3"), "plain-name_1.2:3");
  EXPECT_EQ(EscapeLabelValue(R"(a\b)"), R"(a\\b)");
  EXPECT_EQ(EscapeLabelValue(R"(say "hi")"), R"(say \"hi\")");
  EXPECT_EQ(EscapeLabelValue("two\nlines"), R"(two\nlines)");
  EXPECT_EQ(EscapeLabelValue(""), "");
}

TEST(PrometheusTextTest, FamilyHeaderAndSamples) {
  std::string out;
  AppendFamilyHeader(out, "x_total", "counter", "Help with a \\ and\na newline, \"quoted\".");
  AppendSample(out, "x_total", "room", "a\"b", 7);
  AppendSample(out, "x_total", "", "", -3);
  EXPECT_EQ(out,
            "# HELP x_total Help with a \\\\ and\\na newline, \"quoted\".\n"
            "# TYPE x_total counter\n"
            "x_total{room=\"a\\\"b\"} 7\n"
            "x_total -3\n");
}

TEST(PrometheusTextTest, SampleValues) {
  EXPECT_EQ(FormatSampleValue(0.00025), "0.00025");
  EXPECT_EQ(FormatSampleValue(1), "1");
  EXPECT_EQ(FormatSampleValue(2.5), "2.5");
  EXPECT_EQ(FormatSampleValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatSampleValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatSampleValue(0.0 / 0.0), "NaN");
}

TEST(HttpMetricsTest, BoundsAreInclusiveAndCountsCumulative) {
  HttpMetrics m;
  auto id = m.AddSeries("GET", "/a");
  m.Record(id, microseconds(100));  // exactly 0.0001: the first bucket
  m.Record(id, microseconds(101));  // just over: the second
  m.Record(id, milliseconds(3));    // 0.005
  m.Record(id, seconds(10));        // the last bound
  m.Record(id, seconds(11));        // +Inf only
  m.Record(id, nanoseconds(-5));    // a clock that went backwards counts as zero
  HttpMetrics::Totals t = m.Read(id);
  EXPECT_EQ(t.count, 6u);
  EXPECT_EQ(t.cumulative[0], 2u);   // <= 0.0001: 100us and the zero
  EXPECT_EQ(t.cumulative[1], 3u);   // <= 0.00025
  EXPECT_EQ(t.cumulative[4], 3u);   // <= 0.0025
  EXPECT_EQ(t.cumulative[5], 4u);   // <= 0.005
  EXPECT_EQ(t.cumulative[14], 4u);  // <= 5
  EXPECT_EQ(t.cumulative[15], 5u);  // <= 10
  EXPECT_EQ(t.cumulative[16], 6u);  // +Inf
  EXPECT_NEAR(t.sum_seconds, 0.0001 + 0.000101 + 0.003 + 10 + 11, 1e-9);
  for (size_t b = 1; b < HttpMetrics::kBuckets; ++b) {
    EXPECT_LE(t.cumulative[b - 1], t.cumulative[b]);
  }
}

TEST(HttpMetricsTest, ExpositionWritesEveryBucketSumAndCount) {
  HttpMetrics m;
  auto a = m.AddSeries("POST", "/v1/rooms/{room}/check");
  m.AddSeries("GET", "unmatched", /*hidden_until_used=*/true);
  m.Record(a, microseconds(300));
  std::string out;
  m.AppendPrometheus(out);
  EXPECT_EQ(out.find("# HELP anteroom_http_request_duration_seconds "), 0u) << out;
  EXPECT_NE(out.find("# TYPE anteroom_http_request_duration_seconds histogram\n"),
            std::string::npos);
  const std::string labels = R"(method="POST",route="/v1/rooms/{room}/check")";
  EXPECT_NE(
      out.find("anteroom_http_request_duration_seconds_bucket{" + labels + ",le=\"0.00025\"} 0\n"),
      std::string::npos)
      << out;
  EXPECT_NE(
      out.find("anteroom_http_request_duration_seconds_bucket{" + labels + ",le=\"0.0005\"} 1\n"),
      std::string::npos);
  EXPECT_NE(out.find("anteroom_http_request_duration_seconds_bucket{" + labels + ",le=\"10\"} 1\n"),
            std::string::npos);
  EXPECT_NE(
      out.find("anteroom_http_request_duration_seconds_bucket{" + labels + ",le=\"+Inf\"} 1\n"),
      std::string::npos);
  EXPECT_NE(out.find("anteroom_http_request_duration_seconds_sum{" + labels + "} 0.0003\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("anteroom_http_request_duration_seconds_count{" + labels + "} 1\n"),
            std::string::npos);
  // The hidden series stays out while unused.
  EXPECT_EQ(out.find(R"(route="unmatched")"), std::string::npos);
  // 16 bounds + Inf, sum, count.
  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  EXPECT_EQ(lines, 2u + 19u);
}

TEST(HttpMetricsTest, ThreadsRecordingAtOnceLoseNothing) {
  HttpMetrics m;
  auto id = m.AddSeries("GET", "/hot");
  constexpr int kThreads = 4;
  constexpr int kEach = 50'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) m.Record(id, microseconds(1 + i % 2000));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(m.Read(id).count, uint64_t{kThreads} * kEach);
}

}  // namespace
}  // namespace anteroom::http
