#include "core/outflow_estimate.h"

#include <algorithm>
#include <cmath>

namespace anteroom::core {

namespace {
// The windows tried, longest first, in buckets: 5 minutes down to 1.
constexpr int kShortestWindow = 6;
// The shortest recent part tested against a window, in buckets (20 s and the current part).
constexpr int kShortestPart = 3;
// No rate is made from less than one bucket's time (one event just now is not a rate per ms).
constexpr int64_t kMinSpanMs = FlowHistory::kBucketMs;
// How far a recent part may stray from its window, in standard deviations.
constexpr double kAgreeSigmas = 2.5;
// The random method's allowance for the rates' noise: waits times exp(-kNoiseAllowance v), and
// never less than kLeastShare of the formula's (v is a linear approximation: a handful of counts
// where the line grows fast would otherwise show no wait at all).
constexpr double kNoiseAllowance = 3;
constexpr double kLeastShare = 0.5;
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

Measured MeasureRate(const FlowHistory& h, int64_t now_ms) {
  constexpr int64_t kB = FlowHistory::kBucketMs;
  constexpr int kN = FlowHistory::kBuckets;
  if (h.newest == FlowHistory::kNoBucket) return {};
  int64_t now = std::max(WholeSecond(now_ms), h.newest * kB);
  int64_t cur = FlowHistory::BucketOf(now);
  if (cur - h.newest >= kN) return {};
  int64_t observed = std::max<int64_t>(0, now - h.start_ms);
  int64_t into = now - cur * kB;
  // c[j]: the count of bucket cur - j.
  std::array<int64_t, kN> c{};
  for (auto j = static_cast<size_t>(cur - h.newest); j < c.size(); ++j) {
    c[j] = h.counts[j - static_cast<size_t>(cur - h.newest)];
  }

  // count[k], span[k]: the last k buckets' count and time (the current bucket's part and k - 1
  // whole ones, no more than observed, no less than a bucket).
  std::array<double, kN + 1> count{}, span{};
  for (int k = 1; k <= kN; ++k) {
    count[static_cast<size_t>(k)] =
        count[static_cast<size_t>(k - 1)] + static_cast<double>(c[static_cast<size_t>(k - 1)]);
    int64_t s = std::min((k - 1) * kB + into, observed);
    span[static_cast<size_t>(k)] = static_cast<double>(std::max(s, kMinSpanMs));
  }
  if (count[kN] == 0) return {};

  // Burstiness: the dispersion (variance over mean) of the whole buckets counted since the
  // start, the variance from differences of neighbours (half their mean square), which a change
  // of rate, one step between two levels, hardly moves: the band must not widen by the very
  // change it is there to catch.
  double n = 0, sum_counts = 0, pairs = 0, sum_sq = 0;
  for (int k = 1; k < kN && (cur - k) * kB >= h.start_ms; ++k) {
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

  int w = kN;
  for (; w > kShortestWindow; --w) {
    auto uw = static_cast<size_t>(w);
    bool agree = true;
    for (int s = kShortestPart; s < w && agree; ++s) {
      // Given the window's count, the recent part's is binomial (its share p of the span),
      // spread `dispersion` times as wide.
      auto us = static_cast<size_t>(s);
      double p = span[us] / span[uw];
      double off = count[us] - count[uw] * p;
      double variance = dispersion * std::max(count[uw] * p * (1 - p), 1.0);
      agree = off * off <= kAgreeSigmas * kAgreeSigmas * variance;
    }
    if (agree) break;
  }
  // The shortest window is taken whatever its parts say: a minute is the least measured.
  auto uw = static_cast<size_t>(w);
  return {count[uw] / span[uw], count[uw]};
}

Flow EstimateFlow(const FlowHistory& out, const FlowHistory& in, int64_t now_ms) {
  Measured o = MeasureRate(out, now_ms), i = MeasureRate(in, now_ms);
  return Flow{o.per_ms, i.per_ms, o.events, i.events};
}

namespace {
// RandomWaitMs's formula, unrounded and unbounded.
double RandomWait(double w, double out_per_ms, double in_per_ms, double share) {
  double tail = -std::log1p(-share);  // -ln(1 - q)
  double net = in_per_ms - out_per_ms;
  return net == 0 ? w * tail / out_per_ms : w * std::expm1(net / out_per_ms * tail) / net;
}
std::optional<int64_t> Rounded(double t) {
  if (!(t < kMaxWaitMs)) t = kMaxWaitMs;
  return static_cast<int64_t>(std::ceil(std::max(t, 0.0)));
}
}  // namespace

std::optional<int64_t> RandomWaitMs(int64_t waiting, double out_per_ms, double in_per_ms,
                                    double share) {
  if (waiting <= 0 || !(out_per_ms > 0)) return std::nullopt;
  return Rounded(RandomWait(static_cast<double>(waiting), out_per_ms, in_per_ms, share));
}

std::optional<int64_t> RandomWaitMs(int64_t waiting, const Flow& flow, double share) {
  double r = flow.out_per_ms, l = flow.in_per_ms;
  if (waiting <= 0 || !(r > 0)) return std::nullopt;
  double w = static_cast<double>(waiting);
  double t = RandomWait(w, r, l, share);
  if (t > 0 && t < kMaxWaitMs) {
    // The wait's logarithmic sensitivity to each rate, by central differences.
    constexpr double kStep = 0.01;
    auto sensitivity = [&](double r_lo, double r_hi, double l_lo, double l_hi) {
      double lo = RandomWait(w, r_lo, l_lo, share), hi = RandomWait(w, r_hi, l_hi, share);
      if (!(lo > 0 && hi > 0 && std::isfinite(lo) && std::isfinite(hi))) return 0.0;
      return (std::log(hi) - std::log(lo)) / (2 * kStep);
    };
    double v = 0;
    if (flow.out_events > 0) {
      double s = sensitivity(r * (1 - kStep), r * (1 + kStep), l, l);
      v += s * s / flow.out_events;
    }
    if (flow.in_events > 0 && l > 0) {
      double s = sensitivity(r, r, l * (1 - kStep), l * (1 + kStep));
      v += s * s / flow.in_events;
    }
    t *= std::max(kLeastShare, std::exp(-kNoiseAllowance * v));
  }
  return Rounded(t);
}

}  // namespace anteroom::core
