// The ETA's estimator (core/outflow_estimate.h) on a fake clock: steady, bursty and changing
// outflow, the first minute, a quiet room, the random method's formula at its limits and its
// allowance for the rates' noise, the history's bytes, and room.lua's text of it
// (script_replies.h ParseFlowHistory).

#include "core/outflow_estimate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "common/bytes.h"
#include "core/room_types.h"
#include "store/redis/script_replies.h"

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;  // a whole bucket
constexpr double kPerSecond = 1.0 / 1'000;  // one event a second, per ms

// `every` ms from `from` (inclusive) to `to` (exclusive), `batch` events each time.
void Feed(FlowHistory& h, int64_t from, int64_t to, int64_t every, int batch = 1) {
  for (int64_t t = from; t < to; t += every) {
    for (int i = 0; i < batch; ++i) h.Add(t);
  }
}

TEST(OutflowEstimateTest, AnEmptyHistoryHasNoRate) {
  FlowHistory h;
  EXPECT_EQ(EstimateRate(h, kT0), 0);
  EXPECT_EQ(EtaMs(5, Flow{}, std::nullopt), std::nullopt);
}

TEST(OutflowEstimateTest, SteadyOutflowIsMeasuredOverTheLongWindow) {
  FlowHistory h;
  int64_t fed = 0;
  for (int64_t at : {300'000, 450'000, 599'999}) {
    Feed(h, kT0 + fed, kT0 + at + 1, 1'000);
    fed = at + 1'000 - at % 1'000;
    EXPECT_NEAR(EstimateRate(h, kT0 + at), kPerSecond, 0.02 * kPerSecond) << at;
  }
  // Position 120 at one a second: two minutes.
  Flow f{EstimateRate(h, kT0 + 599'999), 0};
  EXPECT_NEAR(static_cast<double>(*EtaMs(120, f, std::nullopt)), 120'000, 2'400);
}

// Batches of 25 every 25 s: a minute holds two or three of them (+-25%), five minutes twelve
// (+-8%). The dispersion of the buckets tells the long window is still right.
TEST(OutflowEstimateTest, BurstyButSteadyOutflowKeepsTheLongWindow) {
  FlowHistory h;
  double worst = 0;
  for (int64_t t = kT0; t < kT0 + 900'000; t += 1'000) {
    if ((t - kT0) % 25'000 == 0) Feed(h, t, t + 1, 1, 25);
    if (t - kT0 >= 300'000) {
      worst = std::max(worst, std::abs(EstimateRate(h, t) / kPerSecond - 1));
    }
  }
  EXPECT_LT(worst, 0.1);
}

// The rate halves: within a minute the estimate has left the old pace, within two it is at the
// new one; and back.
TEST(OutflowEstimateTest, ARateChangeSwitchesToTheShortWindow) {
  FlowHistory h;
  Feed(h, kT0, kT0 + 600'000, 1'000);
  Feed(h, kT0 + 600'000, kT0 + 660'001, 2'000);
  EXPECT_LT(EstimateRate(h, kT0 + 660'000), 0.85 * kPerSecond);
  Feed(h, kT0 + 662'000, kT0 + 718'001, 2'000);
  EXPECT_NEAR(EstimateRate(h, kT0 + 718'000), kPerSecond / 2, 0.1 * kPerSecond / 2);
  Feed(h, kT0 + 720'000, kT0 + 830'001, 1'000);
  EXPECT_NEAR(EstimateRate(h, kT0 + 830'000), kPerSecond, 0.1 * kPerSecond);
}

// Every recent part is tested, not only the last 1, 2 and 3 minutes: 40 s after a halving the
// estimate has left the old pace (1, 2 and 3 minute windows alone would still hold the old one:
// 40 s of the new pace in the last minute are within their 3 sigmas), and the window it then
// takes holds little of the old pace: at 90 s it is within 15% of the new rate.
TEST(OutflowEstimateTest, AChangeIsCaughtFromAnyRecentPart) {
  FlowHistory h;
  Feed(h, kT0, kT0 + 600'000, 1'000);
  Feed(h, kT0 + 600'000, kT0 + 640'001, 2'000);
  Measured early = MeasureRate(h, kT0 + 640'000);
  EXPECT_LT(early.per_ms, 0.85 * kPerSecond);
  EXPECT_LT(early.events, 100);  // the window has shrunk: no longer the 5 minutes' 280
  Feed(h, kT0 + 642'000, kT0 + 690'001, 2'000);
  EXPECT_NEAR(EstimateRate(h, kT0 + 690'000), kPerSecond / 2, 0.15 * kPerSecond / 2);
}

// MeasureRate gives the count the rate was made from: the 5 minutes' when steady, and so does
// EstimateFlow for both directions.
TEST(OutflowEstimateTest, TheRateComesWithTheEventsItWasMeasuredFrom) {
  FlowHistory out, in;
  Feed(out, kT0, kT0 + 600'000, 1'000);
  Feed(in, kT0, kT0 + 600'000, 2'000);
  Measured m = MeasureRate(out, kT0 + 599'000);
  EXPECT_NEAR(m.events, 300, 10);
  EXPECT_DOUBLE_EQ(m.per_ms, EstimateRate(out, kT0 + 599'000));
  Flow f = EstimateFlow(out, in, kT0 + 599'000);
  EXPECT_EQ(f.out_events, m.events);
  EXPECT_NEAR(f.in_events, 150, 5);
  EXPECT_EQ(MeasureRate(FlowHistory{}, kT0), Measured{});
}

// The first minute of outflow is not divided by a minute: by the time observed, never less
// than one bucket (10 s).
TEST(OutflowEstimateTest, TheFirstMinuteIsDividedByTheTimeObserved) {
  FlowHistory h;
  Feed(h, kT0 + 3'000, kT0 + 23'001, 1'000);  // 21 events over 20 s
  EXPECT_DOUBLE_EQ(EstimateRate(h, kT0 + 23'000), 21.0 / 20'000);
  FlowHistory one;
  one.Add(kT0 + 4'500);
  EXPECT_DOUBLE_EQ(EstimateRate(one, kT0 + 4'700), 1.0 / 10'000);
  // Whole seconds: the estimate moves at most once a second.
  EXPECT_EQ(EstimateRate(h, kT0 + 23'000), EstimateRate(h, kT0 + 23'999));
}

TEST(OutflowEstimateTest, AQuietRoomLosesItsRateAndStartsAgain) {
  FlowHistory h;
  Feed(h, kT0, kT0 + 120'000, 1'000);
  // Outflow stops: 20 s of nothing are within the band, a silent minute is not (no ETA, as
  // before issue 30), and five minutes without any leave nothing counted.
  EXPECT_GT(EstimateRate(h, kT0 + 119'000 + 20'000), 0.5 * kPerSecond);
  EXPECT_EQ(EstimateRate(h, kT0 + 119'000 + 70'000), 0);
  EXPECT_EQ(EstimateRate(h, kT0 + 119'000 + 300'000), 0);
  // The next event starts a new history: its first seconds are not divided by five minutes.
  h.Add(kT0 + 500'000);
  EXPECT_EQ(h.start_ms, kT0 + 500'000);
  Feed(h, kT0 + 501'000, kT0 + 520'001, 1'000);
  EXPECT_DOUBLE_EQ(EstimateRate(h, kT0 + 520'000), 21.0 / 20'000);
}

TEST(OutflowEstimateTest, TheHistoryIsBoundedToFiveMinutesOfBuckets) {
  FlowHistory h;
  Feed(h, kT0, kT0 + 3'600'000, 100);  // an hour at 10/s
  EXPECT_EQ(h.newest, FlowHistory::BucketOf(kT0 + 3'599'900));
  int64_t total = 0;
  for (int64_t c : h.counts) total += c;
  EXPECT_EQ(total, 3'000);  // 30 buckets of 100
  EXPECT_NEAR(EstimateRate(h, kT0 + 3'599'900), 10 * kPerSecond, 0.2 * kPerSecond);
}

TEST(OutflowEstimateTest, FifoEtaIsPositionOverRateNoSoonerThanTheCap) {
  Flow f{2 * kPerSecond, 0};
  EXPECT_EQ(EtaMs(10, f, std::nullopt), 5'000);
  EXPECT_EQ(EtaMs(10, f, 60), 10'000);  // 60 a minute: one a second
  EXPECT_EQ(EtaMs(10, f, 600), 5'000);  // the cap is no bound here
  EXPECT_EQ(EtaMs(3, Flow{1.0 / 1'024, 0}, std::nullopt), 3'072);
  EXPECT_EQ(EtaMs(1, Flow{3.0 / 1'024, 0}, std::nullopt), 342);  // 341.3, rounded up
}

// t_q = W ((1 - q)^(-(l - r) / r) - 1) / (l - r), and its limits.
TEST(OutflowEstimateTest, RandomWaitsMatchTheFormulaAndItsLimits) {
  const double r = kPerSecond;
  // Nobody joining: a share q of W is in after q W admissions.
  EXPECT_NEAR(static_cast<double>(*RandomWaitMs(400, r, 0, 0.5)), 200'000, 1);
  EXPECT_NEAR(static_cast<double>(*RandomWaitMs(400, r, 0, 0.25)), 100'000, 1);
  // As many joining as admitted: the line stays W, each admission takes 1 / W of those left.
  EXPECT_NEAR(static_cast<double>(*RandomWaitMs(400, r, r, 0.5)), 400'000 * std::log(2.0), 1);
  EXPECT_NEAR(static_cast<double>(*RandomWaitMs(400, r, r, 0.75)), 400'000 * std::log(4.0), 1);
  // Continuous on both sides of l = r.
  for (double l : {r * (1 - 1e-9), r * (1 + 1e-9)}) {
    EXPECT_NEAR(static_cast<double>(*RandomWaitMs(400, r, l, 0.5)), 400'000 * std::log(2.0), 2);
  }
  // The general case, against the formula written out.
  double l = 0.5 * r, w = 400, q = 0.75;
  double t = w * (std::pow(1 - q, -(l - r) / r) - 1) / (l - r);
  EXPECT_NEAR(static_cast<double>(*RandomWaitMs(400, r, l, q)), t, 1);
  // More joining than admitted: the line grows, waits are longer.
  EXPECT_GT(*RandomWaitMs(400, r, 2 * r, 0.5), *RandomWaitMs(400, r, r, 0.5));
  // Nobody admitted: no wait to tell. A huge inflow: capped, not overflowing.
  EXPECT_EQ(RandomWaitMs(400, 0, r, 0.5), std::nullopt);
  EXPECT_EQ(RandomWaitMs(0, r, 0, 0.5), std::nullopt);
  EXPECT_GT(*RandomWaitMs(1'000'000, 1e-9, 1.0, 0.75), 0);
}

// A measured flow's waits allow for the rates' noise: lowered by exp(-3 v), v the log-variance
// the counts leave (1 / count through the formula's sensitivity), at most halved; exact rates
// are left alone.
TEST(OutflowEstimateTest, RandomWaitsAllowForTheRatesNoise) {
  const double r = kPerSecond;
  // Exact rates (no events given): the plain formula.
  for (double l : {0.0, 0.5 * r, r, 1.6 * r}) {
    EXPECT_EQ(RandomWaitMs(400, Flow{r, l}, 0.75), RandomWaitMs(400, r, l, 0.75));
  }
  // Nobody joining: W q / r, of sensitivity -1 to r: v = 1 / out_events; the inflow's count does
  // not matter.
  EXPECT_NEAR(static_cast<double>(*RandomWaitMs(400, Flow{r, 0, 300, 50}, 0.5)),
              200'000 * std::exp(-3.0 / 300), 2);
  // l = r: W (-ln(1 - q)) / r, but the line's growth l - r moves with r too: the sensitivity to
  // r is -(1 + ln(2) / 2) at the median.
  double s = 1 + std::log(2.0) / 2;
  EXPECT_NEAR(static_cast<double>(*RandomWaitMs(400, Flow{r, r, 100, 0}, 0.5)),
              400'000 * std::log(2.0) * std::exp(-3 * s * s / 100), 20);
  // The fewer the events, the larger the allowance; and much larger where the line grows (the
  // formula magnifies the noise there).
  Flow grows{0.5 * r, 0.83 * r, 150, 250};
  auto shown = *RandomWaitMs(400, grows, 0.75), exact = *RandomWaitMs(400, 0.5 * r, 0.83 * r, 0.75);
  EXPECT_LT(shown, exact);
  EXPECT_GT(shown, exact * 0.8);
  Flow little = grows;
  little.out_events = 30;
  EXPECT_LT(*RandomWaitMs(400, little, 0.75), shown);
  // A handful of counts where the line grows fast: at most halved (the approximation would
  // otherwise take the wait to nothing).
  EXPECT_NEAR(static_cast<double>(*RandomWaitMs(8, Flow{r / 10, r, 1, 10}, 0.5)),
              static_cast<double>(*RandomWaitMs(8, r / 10, r, 0.5)) / 2, 1);
  EXPECT_EQ(RandomWaitMs(400, Flow{0, r, 0, 100}, 0.5), std::nullopt);
}

TEST(OutflowEstimateTest, RandomOddsUseTheFlowAndTheCap) {
  auto odds = RandomOdds(100, Flow{kPerSecond, 0}, std::nullopt, true);
  ASSERT_TRUE(odds.has_value());
  EXPECT_DOUBLE_EQ(odds->chance_next, 0.01);
  EXPECT_NEAR(static_cast<double>(odds->p25_ms.value_or(0)), 25'000, 1);
  EXPECT_NEAR(static_cast<double>(odds->p50_ms.value_or(0)), 50'000, 1);
  EXPECT_NEAR(static_cast<double>(odds->p75_ms.value_or(0)), 75'000, 1);
  // 30 a minute caps one a second at one every two seconds.
  auto capped = RandomOdds(100, Flow{kPerSecond, 0}, 30, true);
  EXPECT_NEAR(static_cast<double>(capped->p50_ms.value_or(0)), 100'000, 1);
  // A measured flow's noise is allowed for; the cap's rate is exact, so not once it binds.
  auto noisy = RandomOdds(100, Flow{kPerSecond, 0, 100, 0}, std::nullopt, true);
  EXPECT_NEAR(static_cast<double>(noisy->p50_ms.value_or(0)), 50'000 * std::exp(-3.0 / 100), 2);
  auto noisy_capped = RandomOdds(100, Flow{kPerSecond, 0, 100, 0}, 30, true);
  EXPECT_NEAR(static_cast<double>(noisy_capped->p50_ms.value_or(0)), 100'000, 1);
  auto still = RandomOdds(100, Flow{kPerSecond, 0}, std::nullopt, false);
  EXPECT_EQ(still->p50_ms, std::nullopt);
  EXPECT_DOUBLE_EQ(still->chance_next, 0.01);
}

TEST(OutflowEstimateTest, HistoryBytesRoundTripAndDamageIsRefused) {
  FlowHistory h;
  Feed(h, kT0 + 1'234, kT0 + 100'000, 3'000, 2);
  std::string bytes;
  ByteWriter w(bytes);
  h.Save(w);
  FlowHistory back;
  ByteReader in(bytes);
  back.Load(in);
  EXPECT_TRUE(in.done());
  EXPECT_EQ(back, h);

  FlowHistory empty;
  std::string eb;
  ByteWriter ew(eb);
  empty.Save(ew);
  {
    std::string bad = eb;
    bad[16] = 1;  // a count in a history with no bucket
    FlowHistory x;
    ByteReader r(bad);
    x.Load(r);
    EXPECT_TRUE(r.failed());
  }
  {
    std::string bad = bytes;
    bad[23] = static_cast<char>(0x80);  // the newest bucket's count negative
    FlowHistory x;
    ByteReader r(bad);
    x.Load(r);
    EXPECT_TRUE(r.failed());
  }
}

// room.lua's text: "START|BUCKET:COUNT,..." ascending, only buckets counted.
TEST(OutflowEstimateTest, TheScriptsTextReadsAsTheSameHistory) {
  FlowHistory h;
  h.Add(kT0 + 5'000);
  h.Add(kT0 + 5'001);
  h.Add(kT0 + 32'000);
  std::string b0 = std::to_string(FlowHistory::BucketOf(kT0));
  std::string b3 = std::to_string(FlowHistory::BucketOf(kT0) + 3);
  std::string text = std::to_string(kT0 + 5'000) + "|" + b0 + ":2," + b3 + ":1";
  EXPECT_EQ(store::redis::ParseFlowHistory(text), h);
  EXPECT_EQ(store::redis::ParseFlowHistory(""), FlowHistory{});
  EXPECT_EQ(store::redis::ParseFlowHistory("12|x"), FlowHistory{});
  EXPECT_EQ(store::redis::ParseFlowHistory("12|5:1,4:1"), FlowHistory{});  // not ascending
  // Buckets older than the newest's window are not the history's.
  FlowHistory far = store::redis::ParseFlowHistory("1|1:7,100:2");
  EXPECT_EQ(far.newest, 100);
  EXPECT_EQ(far.CountOf(1), 0);
  EXPECT_EQ(far.CountOf(100), 2);
}

}  // namespace
}  // namespace anteroom::core
