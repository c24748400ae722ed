#include "core/outflow_estimate.h"

#include <algorithm>
#include <cmath>

namespace anteroom::core {

namespace {
// The windows tried, longest first, in buckets: 5, 3, 2 and 1 minutes.
constexpr std::array<int, 4> kWindows = {30, 18, 12, 6};
static_assert(kWindows[0] == FlowHistory::kBuckets);
// No rate is made from less than one bucket's time (one event just now is not a rate per ms).
constexpr int64_t kMinSpanMs = FlowHistory::kBucketMs;
// How far a recent window may stray from a longer one, in standard deviations.
constexpr double kAgreeSigmas = 3;
// Waits beyond this are shown as this (about 10 years: nobody reads further).
constexpr double kMaxWaitMs = 3.2e11;

int64_t WholeSecond(int64_t ms) {
  return ms >= 0 ? ms - ms % 1000 : ms - (1000 + ms % 1000) % 1000;
}
}  // namespace

void FlowHistory::Add(int64_t now_ms) {
  int64_t b = BucketOf(now_ms);
  if (newest == kNoBucket || b - newest >= kBuckets) {
    counts = {};
    newest = b;
    start_ms = now_ms;
  } else if (b > newest) {
    auto shift = static_cast<size_t>(b - newest);
    std::copy_backward(counts.begin(), counts.end() - static_cast<ptrdiff_t>(shift), counts.end());
    std::fill(counts.begin(), counts.begin() + static_cast<ptrdiff_t>(shift), 0);
    newest = b;
  }
  ++counts[0];
}

void FlowHistory::Save(ByteWriter& out) const {
  out.Put(start_ms);
  out.Put(newest);
  for (int64_t c : counts) out.Put(c);
}

void FlowHistory::Load(ByteReader& in) {
  start_ms = in.Get<int64_t>();
  newest = in.Get<int64_t>();
  for (int64_t& c : counts) {
    c = in.Get<int64_t>();
    if (c < 0) in.Fail();
  }
  if (newest == kNoBucket) {
    if (std::any_of(counts.begin(), counts.end(), [](int64_t c) { return c != 0; })) in.Fail();
  } else if (BucketOf(start_ms) > newest || counts[0] == 0) {
    in.Fail();  // the newest bucket holds the last event; the start is no later
  }
}

double EstimateRate(const FlowHistory& h, int64_t now_ms) {
  constexpr int64_t kB = FlowHistory::kBucketMs;
  if (h.newest == FlowHistory::kNoBucket) return 0;
  int64_t now = std::max(WholeSecond(now_ms), h.newest * kB);
  int64_t cur = FlowHistory::BucketOf(now);
  if (cur - h.newest >= FlowHistory::kBuckets) return 0;
  int64_t observed = std::max<int64_t>(0, now - h.start_ms);
  int64_t into = now - cur * kB;
  // c[j]: the count of bucket cur - j.
  std::array<int64_t, FlowHistory::kBuckets> c{};
  for (auto j = static_cast<size_t>(cur - h.newest); j < c.size(); ++j) {
    c[j] = h.counts[j - static_cast<size_t>(cur - h.newest)];
  }

  std::array<double, kWindows.size()> count{}, span{};
  int64_t sum = 0;
  int j = 0;
  for (size_t w = kWindows.size(); w-- > 0;) {  // shortest first: each window extends the last
    for (; j < kWindows[w]; ++j) sum += c[static_cast<size_t>(j)];
    count[w] = static_cast<double>(sum);
    int64_t s = std::min((kWindows[w] - 1) * kB + into, observed);
    span[w] = static_cast<double>(std::max(s, kMinSpanMs));
  }
  if (sum == 0) return 0;

  // Burstiness: the dispersion (variance over mean) of the whole buckets counted since the
  // start, the variance from differences of neighbours (half their mean square), which a change
  // of rate, one step between two levels, hardly moves: the band must not widen by the very
  // change it is there to catch.
  double n = 0, sum_counts = 0, pairs = 0, sum_sq = 0;
  for (int k = 1; k < FlowHistory::kBuckets && (cur - k) * kB >= h.start_ms; ++k) {
    double x = static_cast<double>(c[static_cast<size_t>(k)]);
    if (n > 0) {
      double d = x - static_cast<double>(c[static_cast<size_t>(k - 1)]);
      sum_sq += d * d;
      pairs += 1;
    }
    n += 1;
    sum_counts += x;
  }
  double dispersion = 1;
  if (pairs >= 2 && sum_counts > 0) {
    dispersion = std::max(1.0, sum_sq / pairs / 2 / (sum_counts / n));
  }

  for (size_t w = 0; w < kWindows.size(); ++w) {
    bool agree = true;
    for (size_t s = w + 1; s < kWindows.size() && agree; ++s) {
      // Given the long window's count, the recent part's is binomial (its share p of the span),
      // spread `dispersion` times as wide.
      double p = span[s] / span[w];
      double off = count[s] - count[w] * p;
      double variance = dispersion * std::max(count[w] * p * (1 - p), 1.0);
      agree = off * off <= kAgreeSigmas * kAgreeSigmas * variance;
    }
    if (agree) return count[w] / span[w];
  }
  return count.back() / span.back();  // unreachable: the shortest agrees with itself
}

Flow EstimateFlow(const FlowHistory& out, const FlowHistory& in, int64_t now_ms) {
  return Flow{EstimateRate(out, now_ms), EstimateRate(in, now_ms)};
}

std::optional<int64_t> RandomWaitMs(int64_t waiting, double out_per_ms, double in_per_ms,
                                    double share) {
  if (waiting <= 0 || !(out_per_ms > 0)) return std::nullopt;
  double w = static_cast<double>(waiting);
  double tail = -std::log1p(-share);  // -ln(1 - q)
  double net = in_per_ms - out_per_ms;
  double t = net == 0 ? w * tail / out_per_ms : w * std::expm1(net / out_per_ms * tail) / net;
  if (!(t < kMaxWaitMs)) t = kMaxWaitMs;
  return static_cast<int64_t>(std::ceil(std::max(t, 0.0)));
}

}  // namespace anteroom::core
