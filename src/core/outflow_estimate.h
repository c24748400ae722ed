#pragma once
// The measured flow of a room's line, and the waits it predicts (eta_ms, the random method's
// odds). No I/O, no clock: times are handed in.
//
// A FlowHistory counts events (slots freed: the outflow; joins to the line: the inflow) in
// 10 s buckets over the last 5 minutes, and remembers since when it has been counting without
// a quiet gap of a whole window (start_ms): bounded memory whatever the rate. The Redis backend
// keeps the same buckets in room.lua and hands them back with each answer, so every backend and
// the live channel run EstimateRate on equal counts and give equal numbers.
//
// EstimateRate: count / span over the longest window of whole buckets, 5 minutes down to 1
// (30 to 6 buckets), every recent part of which (its last 3 buckets or more: 20 s and the
// current bucket's part) agrees with it within 2.5 standard deviations. Given the window's
// count, a recent part's is binomial (its share of the span); its variance is widened by the
// buckets' measured dispersion (half the mean square of neighbouring differences over the mean,
// at least 1 as for arrivals at random: neighbours, so that a change of rate, one step, does not
// widen the band meant to catch it). Steady but bursty outflow (batches every 25 s) is averaged
// over the long window; a genuine change of rate falls outside the band and the window shrinks
// to about the time since the change. Every part is tested, not only the last 1, 2 and 3
// minutes: a change is caught from its first 30-40 s, and a window that straddles it (keeps
// some of the old pace) is refused sooner. The span never exceeds how long the history has been
// counting (the first 20 s of outflow are not divided by a minute; never less than 10 s). Time
// is taken in whole seconds, so an estimate changes at most once a second. MeasureRate also
// gives the window's count: the rate's sampling noise.
//
// The random method's waits (RandomWaitMs of a Flow) allow for that noise: when more join than
// are admitted the formula magnifies an error in the rates several times (a rate 10% low makes
// the 75th percentile wait some 25% long), and an over-estimate can grow without bound where an
// under-estimate stops at 100%. The wait is lowered by exp(-3 v), v the variance of its
// logarithm from the counts (Poisson: 1 / count for each rate, through the formula's
// sensitivity to it): 1 would minimize the mean relative error of a log-normal spread; 3 is
// what keeps the 90th percentile lowest on eta_bench (docs/benchmarks.md, "ETA accuracy"). With
// 5 minutes of steady flow it is a few percent; with one minute after a change, up to a third;
// never more than half (v is a linear approximation, which a handful of counts where the line
// grows fast would take to a wait of nothing).
// The fifo ETA (position / rate) is hardly sensitive and is left as measured.

#include <array>
#include <cstdint>
#include <optional>

#include "common/bytes.h"

namespace anteroom::core {

struct FlowHistory {
  static constexpr int64_t kBucketMs = 10'000;
  static constexpr int kBuckets = 30;  // 5 minutes
  static constexpr int64_t kNoBucket = INT64_MIN;

  int64_t start_ms = 0;                    // counting since (the first event after a quiet window)
  int64_t newest = kNoBucket;              // the newest bucket's number (ms / kBucketMs, floored)
  std::array<int64_t, kBuckets> counts{};  // counts[j]: bucket newest - j

  static int64_t BucketOf(int64_t ms) {
    return ms >= 0 ? ms / kBucketMs : -((-ms + kBucketMs - 1) / kBucketMs);
  }
  // One event at now_ms (times must not go backwards; an earlier one counts in the newest).
  void Add(int64_t now_ms);
  // The count of bucket `bucket`, 0 outside the history.
  int64_t CountOf(int64_t bucket) const {
    if (newest == kNoBucket || bucket > newest || newest - bucket >= kBuckets) return 0;
    return counts[static_cast<size_t>(newest - bucket)];
  }

  void Save(ByteWriter& out) const;
  void Load(ByteReader& in);  // fails `in` on a history no Add could make
  bool operator==(const FlowHistory&) const = default;
};

// A measured rate: events per ms as of a time (0: none in the last 5 minutes), and the events
// it was measured from (the chosen window's count).
struct Measured {
  double per_ms = 0;
  double events = 0;
  bool operator==(const Measured&) const = default;
};
Measured MeasureRate(const FlowHistory& history, int64_t now_ms);
inline double EstimateRate(const FlowHistory& history, int64_t now_ms) {
  return MeasureRate(history, now_ms).per_ms;
}

// A room's flow, per ms: what eta_ms and the odds are made from (core::EtaMs, core::RandomOdds).
struct Flow {
  double out_per_ms = 0;  // slots freed; 0: nothing freed in the window, no ETA
  double in_per_ms = 0;   // joins to the line
  // The events each rate was measured from: its sampling noise, which the random method's
  // waits allow for. 0: exact (a rate cap, a test) or unknown: no allowance.
  double out_events = 0;
  double in_events = 0;
  bool operator==(const Flow&) const = default;
};
Flow EstimateFlow(const FlowHistory& out, const FlowHistory& in, int64_t now_ms);

// The random method: with `waiting` in line, each admission a uniform draw from it, admissions
// at rate r and joins at rate l (per ms), the line is W(t) = W + (l - r) t and one waiting now
// is still waiting after t with chance (W(t) / W)^(-r / (l - r)). The wait by which a share q
// of those waiting now are in: W ((1 - q)^(-(l - r) / r) - 1) / (l - r); W (-ln(1 - q)) / r
// when l = r; W q / r when l = 0. nullopt when r is 0. In ms, rounded up.
std::optional<int64_t> RandomWaitMs(int64_t waiting, double out_per_ms, double in_per_ms,
                                    double share);
// The same of a measured flow, allowing for the rates' sampling noise (flow.out_events,
// in_events; see the header comment): lowered by exp(-3 v), v = s_r^2 / out_events +
// s_l^2 / in_events, s the wait's logarithmic sensitivity to each rate; at most halved.
std::optional<int64_t> RandomWaitMs(int64_t waiting, const Flow& flow, double share);

}  // namespace anteroom::core
