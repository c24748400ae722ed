// What /metrics' job histograms are made of: when core::Queue says a delivered job became ready
// (Delivery::ready_ms) and how long an ack says its delivery ran; and Histogram's buckets.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/histogram.h"
#include "core/hmac.h"
#include "core/queue.h"

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr int64_t kLease = 30'000;

class JobTimingsTest : public ::testing::Test {
 protected:
  JobId Push(int64_t now, int64_t delay_ms = 0) {
    JobSpec spec;
    spec.payload = "{}";
    spec.delay_ms = delay_ms;
    return q_.Push({spec}, now).at(0).id;
  }
  Delivery FetchOne(int64_t now, int64_t lease_ms = kLease) {
    std::vector<Delivery> ds = q_.Fetch("w", 1, lease_ms, now);
    EXPECT_EQ(ds.size(), 1u);
    return ds.empty() ? Delivery{} : ds[0];
  }
  int64_t AckRan(const Delivery& d, int64_t now) {
    int64_t ran = -1;
    std::optional<LeaseRef> ref = q_.ParseLease(d.lease);
    EXPECT_TRUE(ref.has_value());
    EXPECT_EQ(q_.Ack(*ref, now, {}, &ran), LeaseOutcome::kOk);
    return ran;
  }

  Hmac key_{"test-secret"};
  Queue q_{"jobs", key_, kT0, 7};
};

TEST_F(JobTimingsTest, APushedJobIsReadyFromItsPush) {
  Push(kT0 + 5);
  Delivery d = FetchOne(kT0 + 250);
  EXPECT_EQ(d.ready_ms, kT0 + 5);
  EXPECT_EQ(AckRan(d, kT0 + 1'250), 1'000);
}

TEST_F(JobTimingsTest, ADelayedJobIsReadyFromItsDueTimeNotFromWhenItWasNoticed) {
  Push(kT0, /*delay_ms=*/1'000);
  Delivery d = FetchOne(kT0 + 5'000);  // promoted lazily, at this fetch
  EXPECT_EQ(d.ready_ms, kT0 + 1'000);
}

TEST_F(JobTimingsTest, AnExpiredLeaseMakesItReadyFromTheExpiry) {
  Push(kT0);
  Delivery first = FetchOne(kT0, /*lease_ms=*/1'000);
  Delivery again = FetchOne(kT0 + 3'000);
  EXPECT_EQ(again.attempt, 2);
  EXPECT_EQ(again.ready_ms, kT0 + 1'000);
  EXPECT_EQ(AckRan(again, kT0 + 3'400), 400) << "from the second lease's start";
  (void)first;
}

TEST_F(JobTimingsTest, ANackWithoutDelayMakesItReadyFromTheNack) {
  Push(kT0);
  Delivery d = FetchOne(kT0 + 10);
  ASSERT_EQ(q_.Nack(d.lease, 0, "boom", kT0 + 500), LeaseOutcome::kOk);
  EXPECT_EQ(FetchOne(kT0 + 800).ready_ms, kT0 + 500);
}

TEST_F(JobTimingsTest, ARequeuedDeadJobIsReadyFromTheRequeue) {
  JobSpec spec;
  spec.payload = "{}";
  spec.max_attempts = 1;
  JobId id = q_.Push({spec}, kT0).at(0).id;
  Delivery d = FetchOne(kT0);
  ASSERT_EQ(q_.Nack(d.lease, 0, "boom", kT0 + 100), LeaseOutcome::kOk);  // dead
  ASSERT_EQ(q_.RequeueDead(std::vector<JobId>{id}, kT0 + 9'000), 1u);
  EXPECT_EQ(FetchOne(kT0 + 9'100).ready_ms, kT0 + 9'000);
}

TEST_F(JobTimingsTest, ARepeatedAckReportsNoRunTime) {
  Push(kT0);
  Delivery d = FetchOne(kT0);
  EXPECT_EQ(AckRan(d, kT0 + 10), 10);
  int64_t ran = -1;
  EXPECT_EQ(q_.Ack(*q_.ParseLease(d.lease), kT0 + 20, {}, &ran), LeaseOutcome::kOk);
  EXPECT_EQ(ran, -1);
}

TEST(HistogramTest, BucketsAreInclusiveCumulativeAndSummedAcrossThreads) {
  Histogram h{0.001, 0.01, 1};
  h.ObserveMs(1);      // le 0.001 (inclusive)
  h.ObserveNs(1'001);  // 1 us: le 0.001 too
  h.ObserveMs(10);     // le 0.01
  h.ObserveMs(5'000);  // +Inf
  h.ObserveMs(-3);     // counts as 0
  std::thread other([&h] {
    for (int i = 0; i < 1000; ++i) h.ObserveMs(500);  // le 1
  });
  other.join();
  Histogram::Totals t = h.Read();
  ASSERT_EQ(t.cumulative.size(), 4u);
  EXPECT_EQ(t.cumulative[0], 3u);
  EXPECT_EQ(t.cumulative[1], 4u);
  EXPECT_EQ(t.cumulative[2], 1004u);
  EXPECT_EQ(t.cumulative[3], 1005u);
  EXPECT_EQ(t.count, 1005u);
  EXPECT_NEAR(t.sum_seconds, 0.001 + 0.000001001 + 0.01 + 5 + 500, 1e-9);
}

}  // namespace
}  // namespace anteroom::core
