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
// EstimateRate: count / span over the longest of the 5, 3, 2 and 1 minute windows whose recent
// parts (each shorter window) agree with it within 3 standard deviations. Given the long
// window's count, a recent part's is binomial (its share of the span); its variance is widened
// by the buckets' measured dispersion (half the mean square of neighbouring differences over
// the mean, at least 1 as for arrivals at random: neighbours, so that a change of rate, one step,
// does not widen the band meant to catch it). Steady but bursty outflow (batches every 25 s) is
// averaged over the long window; a genuine change of rate falls outside the band and the short
// window wins. The span never exceeds how long the history has been counting (the first 20 s
// of outflow are not divided by a minute; never less than 10 s). Time is taken in whole
// seconds, so an estimate changes at most once a second. docs/benchmarks.md, "ETA accuracy",
// measures it (bench/eta_bench.cc).

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

// Events per ms as of now_ms (0: none in the last 5 minutes).
double EstimateRate(const FlowHistory& history, int64_t now_ms);

// A room's flow, per ms: what eta_ms and the odds are made from (core::EtaMs, core::RandomOdds).
struct Flow {
  double out_per_ms = 0;  // slots freed; 0: nothing freed in the window, no ETA
  double in_per_ms = 0;   // joins to the line
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

}  // namespace anteroom::core
