// Unit tests of core::Queue: every rule of the reliable queue (its semantics and the details
// clients rely on; src/core/queue.h), with explicit millisecond times and a fixed seed for the
// backoff jitter.

#include "core/queue.h"

#include <gtest/gtest.h>

#include <malloc.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/hmac.h"

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr uint64_t kSeed = 7;
constexpr int64_t kLease = 30'000;

JobSpec Spec(std::string payload, int32_t priority = 0, int64_t delay_ms = 0,
             std::optional<std::string> dedupe_key = std::nullopt,
             int32_t max_attempts = kDefaultMaxAttempts) {
  JobSpec s;
  s.payload = std::move(payload);
  s.priority = priority;
  s.delay_ms = delay_ms;
  s.dedupe_key = std::move(dedupe_key);
  s.max_attempts = max_attempts;
  return s;
}

std::vector<JobId> Ids(const std::vector<Delivery>& ds) {
  std::vector<JobId> out;
  for (const Delivery& d : ds) out.push_back(d.id);
  return out;
}

std::vector<JobId> Ids(const std::vector<InflightJob>& js) {
  std::vector<JobId> out;
  for (const InflightJob& j : js) out.push_back(j.id);
  return out;
}

void ExpectIdentity(const QueueStats& s) {
  EXPECT_EQ(s.pushed, s.acked + s.ready + s.delayed + s.inflight + s.dead + s.cancelled)
      << "pushed=" << s.pushed << " acked=" << s.acked << " ready=" << s.ready
      << " delayed=" << s.delayed << " inflight=" << s.inflight << " dead=" << s.dead
      << " cancelled=" << s.cancelled;
}

class QueueTest : public ::testing::Test {
 protected:
  JobId Push(JobSpec spec, int64_t now = kT0) {
    std::vector<PushResult> r = q_.Push({std::move(spec)}, now);
    EXPECT_EQ(r.size(), 1u);
    EXPECT_TRUE(r[0].created);
    return r[0].id;
  }
  JobId Push(const std::string& payload, int32_t priority = 0, int64_t now = kT0) {
    return Push(Spec(payload, priority), now);
  }
  std::optional<Delivery> FetchOne(int64_t now, const std::string& worker = "w",
                                   int64_t lease_ms = kLease) {
    std::vector<Delivery> ds = q_.Fetch(worker, 1, lease_ms, now);
    if (ds.empty()) return std::nullopt;
    return ds[0];
  }
  // Fetches with `lease_ms` and lets the lease run out, `times` times in a row.
  int64_t ExpireRepeatedly(JobId id, int times, int64_t now, int64_t lease_ms = 1'000) {
    for (int i = 0; i < times; ++i) {
      std::optional<Delivery> d = FetchOne(now, "w", lease_ms);
      EXPECT_TRUE(d && d->id == id);
      now += lease_ms;
      q_.Advance(now);
    }
    return now;
  }

  Hmac key_{"test-secret"};
  Queue q_{"jobs", key_, kT0, kSeed};
};

TEST_F(QueueTest, PushFetchAck) {
  JobId id = Push(Spec("hello", 3));
  EXPECT_EQ(id, 1u);
  std::vector<Delivery> ds = q_.Fetch("w", 1, kLease, kT0 + 10);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].id, id);
  EXPECT_EQ(ds[0].payload, "hello");
  EXPECT_EQ(ds[0].attempt, 1);
  EXPECT_EQ(ds[0].priority, 3);
  EXPECT_EQ(ds[0].lease_expires_ms, kT0 + 10 + kLease);  // absolute
  EXPECT_FALSE(ds[0].lease.empty());
  QueueStats s = q_.Stats(kT0 + 20);
  EXPECT_EQ(s.pushed, 1);
  EXPECT_EQ(s.inflight, 1);
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(q_.Ack(ds[0].lease, kT0 + 30), LeaseOutcome::kOk);
  s = q_.Stats(kT0 + 40);
  EXPECT_EQ(s.acked, 1);
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.ready, 0);
  ExpectIdentity(s);
  // Gone for good: never delivered again, even long after the lease would have run out.
  EXPECT_TRUE(q_.Fetch("w", 10, kLease, kT0 + 10 * kLease).empty());
  EXPECT_EQ(q_.Stats(kT0 + 10 * kLease).expired, 0);
}

TEST_F(QueueTest, EmptyQueueAnswersEmptyFetchAndZeroStats) {
  EXPECT_TRUE(q_.Fetch("w", 5, kLease, kT0).empty());
  QueueStats s = q_.Stats(kT0);
  EXPECT_EQ(s.pushed, 0);
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(s.workers, 0);  // an empty fetch does not register the worker
  EXPECT_FALSE(s.paused);
  EXPECT_EQ(q_.NextDeadline(), INT64_MAX);
  EXPECT_FALSE(q_.CanDeliver());
}

TEST_F(QueueTest, PushAssignsIncreasingIdsAndBatchesInOrder) {
  std::vector<PushResult> r = q_.Push({Spec("a"), Spec("b"), Spec("c")}, kT0);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(r[0].created && r[1].created && r[2].created);
  EXPECT_LT(r[0].id, r[1].id);
  EXPECT_LT(r[1].id, r[2].id);
  EXPECT_EQ(q_.Stats(kT0).pushed, 3);
  EXPECT_EQ(q_.Stats(kT0).ready, 3);
}

TEST_F(QueueTest, HigherPriorityFirstThenFifo) {
  JobId a = Push("a", 0);
  JobId b = Push("b", 5);
  JobId c = Push("c", -3);
  JobId d = Push("d", 5);
  JobId e = Push("e", 0);
  JobId f = Push("f", 2'000'000'000);
  JobId g = Push("g", -3);
  std::vector<JobId> got;
  for (int i = 0; i < 7; ++i) {
    std::optional<Delivery> del = FetchOne(kT0 + 1 + i);
    ASSERT_TRUE(del);
    got.push_back(del->id);
  }
  EXPECT_EQ(got, (std::vector<JobId>{f, b, d, a, e, c, g}));
  EXPECT_FALSE(FetchOne(kT0 + 100));
}

TEST_F(QueueTest, PriorityExtremesOrderCorrectly) {
  JobId lowest = Push("lowest", INT32_MIN);
  JobId zero = Push("zero", 0);
  JobId highest = Push("highest", INT32_MAX);
  JobId low2 = Push("low2", INT32_MIN + 1);
  std::vector<Delivery> ds = q_.Fetch("w", 10, kLease, kT0 + 1);
  EXPECT_EQ(Ids(ds), (std::vector<JobId>{highest, zero, low2, lowest}));
  ASSERT_EQ(ds.size(), 4u);
  EXPECT_EQ(ds[3].priority, INT32_MIN);
}

TEST_F(QueueTest, OneFetchAnswersInDeliveryOrder) {
  JobId a = Push("a", 1);
  JobId b = Push("b", 9);
  JobId c = Push("c", 1);
  JobId d = Push("d", 9);
  JobId e = Push("e", -1);
  std::vector<Delivery> ds = q_.Fetch("w", 4, kLease, kT0 + 1);
  EXPECT_EQ(Ids(ds), (std::vector<JobId>{b, d, a, c}));
  ASSERT_EQ(ds.size(), 4u);
  EXPECT_EQ(ds[0].priority, 9);
  EXPECT_EQ(ds[2].priority, 1);
  for (const Delivery& del : ds) {
    EXPECT_EQ(del.attempt, 1);
    EXPECT_EQ(del.lease_expires_ms, kT0 + 1 + kLease);
  }
  // Every lease names its own delivery.
  EXPECT_NE(ds[0].lease, ds[1].lease);
  std::vector<Delivery> rest = q_.Fetch("w", 1000, kLease, kT0 + 2);
  EXPECT_EQ(Ids(rest), (std::vector<JobId>{e}));
  EXPECT_EQ(q_.Stats(kT0 + 2).inflight, 5);
}

TEST_F(QueueTest, FetchTakesAtMostMax) {
  for (int i = 0; i < 5; ++i) Push("p" + std::to_string(i));
  EXPECT_EQ(q_.Fetch("w", 2, kLease, kT0).size(), 2u);
  EXPECT_TRUE(q_.Fetch("w", 0, kLease, kT0).empty());
  EXPECT_EQ(q_.Stats(kT0).ready, 3);
}

TEST_F(QueueTest, DelayedJobBecomesReadyAtItsTimeNotBefore) {
  JobId d = Push(Spec("later", 0, 5'000));
  QueueStats s = q_.Stats(kT0);
  EXPECT_EQ(s.delayed, 1);
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(q_.NextDeadline(), kT0 + 5'000);
  EXPECT_FALSE(FetchOne(kT0 + 4'999));
  EXPECT_FALSE(q_.CanDeliver());
  q_.Advance(kT0 + 5'000);
  EXPECT_TRUE(q_.CanDeliver());
  std::optional<Delivery> got = FetchOne(kT0 + 5'000);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, d);
  EXPECT_EQ(got->attempt, 1);
}

TEST_F(QueueTest, DelayedJobQueuesBehindJobsAlreadyReady) {
  JobId late = Push(Spec("late", 0, 1'000));
  JobId early = Push("early", 0, kT0 + 500);
  q_.Advance(kT0 + 1'000);
  JobId after = Push("after", 0, kT0 + 1'001);
  std::vector<Delivery> ds = q_.Fetch("w", 10, kLease, kT0 + 1'002);
  EXPECT_EQ(Ids(ds), (std::vector<JobId>{early, late, after}));
}

TEST_F(QueueTest, DelayedJobsDueTogetherKeepPushOrder) {
  Push(Spec("first", 0, 500));
  std::vector<JobId> same;
  for (int i = 0; i < 6; ++i) same.push_back(Push(Spec("s" + std::to_string(i), 0, 1'000)));
  q_.Advance(kT0 + 500);
  EXPECT_TRUE(FetchOne(kT0 + 500));
  std::vector<Delivery> ds = q_.Fetch("w", 10, kLease, kT0 + 1'000);
  EXPECT_EQ(Ids(ds), same);  // FIFO within the priority
}

TEST_F(QueueTest, ExpiredLeaseReturnsJobToHeadWithNextAttempt) {
  JobId a = Push("a");
  JobId b = Push("b");
  std::optional<Delivery> first = FetchOne(kT0, "w", 1'000);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->id, a);
  JobId c = Push("c", 0, kT0 + 10);
  q_.Advance(kT0 + 999);
  EXPECT_EQ(q_.Stats(kT0 + 999).inflight, 1);
  EXPECT_EQ(q_.Stats(kT0 + 999).expired, 0);
  q_.Advance(kT0 + 1'000);  // the lease deadline
  QueueStats s = q_.Stats(kT0 + 1'000);
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.ready, 3);
  EXPECT_EQ(s.expired, 1);
  EXPECT_EQ(s.nacked, 0);
  ExpectIdentity(s);
  std::vector<Delivery> ds = q_.Fetch("w2", 10, kLease, kT0 + 1'001);
  EXPECT_EQ(Ids(ds), (std::vector<JobId>{a, b, c}));
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[0].attempt, 2);
  EXPECT_EQ(ds[1].attempt, 1);
}

TEST_F(QueueTest, ExpiredJobLeadsOnlyItsOwnPriority) {
  JobId lo = Push("lo", 1);
  std::optional<Delivery> d = FetchOne(kT0, "w", 1'000);
  ASSERT_TRUE(d);
  JobId hi = Push("hi", 2, kT0 + 1);
  JobId lo2 = Push("lo2", 1, kT0 + 2);
  q_.Advance(kT0 + 1'000);
  EXPECT_EQ(Ids(q_.Fetch("w", 10, kLease, kT0 + 1'000)), (std::vector<JobId>{hi, lo, lo2}));
}

TEST_F(QueueTest, BatchWhoseLeasesExpireTogetherReturnsInItsOrder) {
  std::vector<JobId> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(Push("p" + std::to_string(i)));
  JobId other = Push("other");
  std::vector<Delivery> ds = q_.Fetch("w", 7, 1'000, kT0);
  ASSERT_EQ(Ids(ds), ids);
  q_.Advance(kT0 + 1'000);
  std::vector<JobId> want = ids;
  want.push_back(other);
  std::vector<Delivery> again = q_.Fetch("w", 10, kLease, kT0 + 1'000);
  EXPECT_EQ(Ids(again), want);
  EXPECT_EQ(q_.Stats(kT0 + 1'000).expired, 7);
}

TEST_F(QueueTest, ValidLeaseIsExclusive) {
  JobId a = Push("a");
  std::optional<Delivery> d = FetchOne(kT0, "w1", 10'000);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->id, a);
  for (int64_t t = kT0; t < kT0 + 10'000; t += 997) {
    EXPECT_TRUE(q_.Fetch("w2", 10, kLease, t).empty()) << t - kT0;
  }
  EXPECT_TRUE(q_.Fetch("w2", 10, kLease, kT0 + 9'999).empty());
  std::optional<Delivery> again = FetchOne(kT0 + 10'000, "w2");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, a);
  EXPECT_EQ(again->attempt, 2);
}

TEST_F(QueueTest, ExpiredLeaseIsLost) {
  Push("a");
  std::optional<Delivery> d = FetchOne(kT0, "w", 1'000);
  ASSERT_TRUE(d);
  // Expired but not yet redelivered: refused all the same.
  EXPECT_EQ(q_.Ack(d->lease, kT0 + 1'000), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q_.Nack(d->lease, 0, "x", kT0 + 1'001), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q_.Extend(d->lease, 5'000, kT0 + 1'002), LeaseOutcome::kLeaseLost);
  QueueStats s = q_.Stats(kT0 + 1'003);
  EXPECT_EQ(s.acked, 0);
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(s.ready, 1);
}

TEST_F(QueueTest, SupersededLeaseNeverTouchesTheLaterDelivery) {
  JobId a = Push("a");
  std::optional<Delivery> old = FetchOne(kT0, "stale", 1'000);
  ASSERT_TRUE(old);
  std::optional<Delivery> cur = FetchOne(kT0 + 1'000, "fresh");
  ASSERT_TRUE(cur);
  ASSERT_EQ(cur->id, a);
  EXPECT_NE(cur->lease, old->lease);
  EXPECT_EQ(q_.Ack(old->lease, kT0 + 1'001), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q_.Nack(old->lease, std::nullopt, "x", kT0 + 1'002), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q_.Extend(old->lease, 100, kT0 + 1'003), LeaseOutcome::kLeaseLost);
  std::vector<InflightJob> in = q_.Inflight(std::nullopt, kT0 + 1'004);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].worker, "fresh");
  EXPECT_EQ(in[0].lease_expires_ms, kT0 + 1'000 + kLease);  // the stale extend changed nothing
  EXPECT_EQ(q_.Ack(cur->lease, kT0 + 1'005), LeaseOutcome::kOk);
  // A lease superseded by a nack is lost too.
  Push("b", 0, kT0 + 2'000);
  std::optional<Delivery> b1 = FetchOne(kT0 + 2'000);
  ASSERT_TRUE(b1);
  EXPECT_EQ(q_.Nack(b1->lease, 0, "again", kT0 + 2'001), LeaseOutcome::kOk);
  std::optional<Delivery> b2 = FetchOne(kT0 + 2'002);
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->attempt, 2);
  EXPECT_EQ(q_.Ack(b1->lease, kT0 + 2'003), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q_.Nack(b1->lease, 0, "x", kT0 + 2'003), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q_.Ack(b2->lease, kT0 + 2'004), LeaseOutcome::kOk);
}

TEST_F(QueueTest, MalformedOrForgedLeaseIsInvalid) {
  JobId a = Push("a");
  std::optional<Delivery> d = FetchOne(kT0);
  ASSERT_TRUE(d);
  const std::string& lease = d->lease;
  // "<id>.<delivery>.<tag>"
  size_t dot1 = lease.find('.');
  size_t dot2 = lease.find('.', dot1 + 1);
  ASSERT_NE(dot2, std::string::npos);
  ASSERT_EQ(lease.substr(0, dot1), std::to_string(a));

  std::vector<std::string> bad;
  std::string other_id = lease;
  other_id[0] = other_id[0] == '9' ? '8' : static_cast<char>(other_id[0] + 1);
  bad.push_back(other_id);
  std::string other_delivery = lease;
  other_delivery[dot1 + 1] =
      other_delivery[dot1 + 1] == '9' ? '8' : static_cast<char>(other_delivery[dot1 + 1] + 1);
  bad.push_back(other_delivery);
  std::string other_tag = lease;
  other_tag.back() = other_tag.back() == 'A' ? 'B' : 'A';
  bad.push_back(other_tag);
  std::string first_tag_char = lease;
  first_tag_char[dot2 + 1] = first_tag_char[dot2 + 1] == 'x' ? 'y' : 'x';
  bad.push_back(first_tag_char);
  bad.push_back(lease.substr(0, lease.size() - 1));  // truncated tag
  bad.push_back(lease + "A");                        // extended tag
  bad.push_back("0" + lease);                        // same numbers, other spelling
  bad.push_back(lease.substr(0, dot2));              // no tag
  bad.push_back(lease.substr(0, dot2 + 1));          // empty tag
  bad.push_back("");
  bad.push_back(".");
  bad.push_back("..");
  bad.push_back("garbage");
  bad.push_back("a.b.c");
  bad.push_back("-1.1." + lease.substr(dot2 + 1));
  bad.push_back("99999999999999999999999.1." + lease.substr(dot2 + 1));
  bad.push_back(std::string(lease.size(), '\0'));
  bad.push_back(lease + ".extra");
  {  // the same delivery signed for another queue, and with another key
    Queue other_name("jobs2", key_, kT0, kSeed);
    bad.push_back(other_name.LeaseFor(a, 1));
    Hmac other_key("other-secret");
    Queue other_secret("jobs", other_key, kT0, kSeed);
    bad.push_back(other_secret.LeaseFor(a, 1));
  }
  EXPECT_EQ(q_.LeaseFor(a, 1), lease);  // so the two above differ only by name or key
  for (const std::string& b : bad) {
    EXPECT_EQ(q_.Ack(b, kT0 + 1), LeaseOutcome::kInvalidLease) << "'" << b << "'";
    EXPECT_EQ(q_.Nack(b, 0, "x", kT0 + 1), LeaseOutcome::kInvalidLease) << "'" << b << "'";
    EXPECT_EQ(q_.Extend(b, 1'000, kT0 + 1), LeaseOutcome::kInvalidLease) << "'" << b << "'";
  }
  // Nothing changed: the real lease still works.
  QueueStats s = q_.Stats(kT0 + 2);
  EXPECT_EQ(s.inflight, 1);
  EXPECT_EQ(s.acked + s.nacked, 0);
  EXPECT_EQ(q_.Inflight(std::nullopt, kT0 + 2).at(0).lease_expires_ms, kT0 + kLease);
  EXPECT_EQ(q_.Ack(lease, kT0 + 3), LeaseOutcome::kOk);
}

TEST_F(QueueTest, RepeatedAckIsOkAndCountedOnce) {
  Push("a");
  Push("b");
  std::optional<Delivery> d = FetchOne(kT0);
  ASSERT_TRUE(d);
  EXPECT_EQ(q_.Ack(d->lease, kT0 + 1), LeaseOutcome::kOk);
  EXPECT_EQ(q_.Ack(d->lease, kT0 + 2), LeaseOutcome::kOk);
  EXPECT_EQ(q_.Ack(d->lease, kT0 + 60'000), LeaseOutcome::kOk);  // past the lease, too
  QueueStats s = q_.Stats(kT0 + 60'001);
  EXPECT_EQ(s.acked, 1);
  EXPECT_EQ(s.ready, 1);
  ExpectIdentity(s);
  // The job is done: a late nack or extend cannot bring it back.
  EXPECT_EQ(q_.Nack(d->lease, 0, "x", kT0 + 60'002), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q_.Extend(d->lease, 1'000, kT0 + 60'003), LeaseOutcome::kLeaseLost);
  s = q_.Stats(kT0 + 60'004);
  EXPECT_EQ(s.acked, 1);
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(s.ready, 1);
  EXPECT_EQ(s.inflight, 0);
}

TEST_F(QueueTest, NackWithoutDelayBacksOffExponentiallyWithJitterUpToOneHour) {
  JobId id = Push(Spec("a", 0, 0, std::nullopt, /*max_attempts=*/20));
  int64_t now = kT0;
  std::vector<int64_t> delays;
  for (int attempt = 1; attempt <= 16; ++attempt) {
    std::optional<Delivery> d = FetchOne(now);
    ASSERT_TRUE(d) << attempt;
    ASSERT_EQ(d->id, id);
    ASSERT_EQ(d->attempt, attempt);
    ASSERT_EQ(q_.Nack(d->lease, std::nullopt, "boom", now + 1), LeaseOutcome::kOk);
    now += 1;
    const int64_t base = std::min<int64_t>(int64_t{1'000} << (attempt - 1), 3'600'000);
    QueueStats s = q_.Stats(now);
    EXPECT_EQ(s.delayed, 1);
    EXPECT_EQ(s.ready, 0);
    EXPECT_EQ(s.nacked, attempt);
    // The only deadline is the retry time.
    const int64_t delay = q_.NextDeadline() - now;
    EXPECT_GE(delay, base * 8 / 10) << "attempt " << attempt;
    EXPECT_LE(delay, base * 12 / 10) << "attempt " << attempt;
    delays.push_back(delay);
    // Not ready just before 0.8x (nor just before its own time); ready after 1.2x.
    EXPECT_FALSE(FetchOne(now + base * 8 / 10 - 1)) << attempt;
    EXPECT_FALSE(FetchOne(now + delay - 1)) << attempt;
    now += base * 12 / 10 + 1;
  }
  // The jitter is real: not every retry of the capped attempts waits exactly one hour.
  std::vector<int64_t> capped(delays.begin() + 12, delays.end());
  EXPECT_GT(std::count_if(capped.begin(), capped.end(), [](int64_t d) { return d != 3'600'000; }),
            0);
  std::sort(capped.begin(), capped.end());
  EXPECT_NE(capped.front(), capped.back());
}

TEST_F(QueueTest, BackoffJitterSpreadsRetries) {
  // Twenty jobs nacked at the same moment on their first attempt do not all retry together.
  std::vector<JobId> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(Push("p" + std::to_string(i)));
  std::vector<Delivery> ds = q_.Fetch("w", 20, kLease, kT0);
  ASSERT_EQ(ds.size(), 20u);
  for (const Delivery& d : ds) {
    ASSERT_EQ(q_.Nack(d.lease, std::nullopt, "e", kT0 + 1), LeaseOutcome::kOk);
  }
  EXPECT_TRUE(q_.Fetch("w", 20, kLease, kT0 + 800).empty());
  size_t early = q_.Fetch("w", 20, kLease, kT0 + 1'001).size();  // below the 1 s base
  size_t rest = q_.Fetch("w", 20, kLease, kT0 + 1'201).size();
  EXPECT_GT(early, 0u);
  EXPECT_LT(early, 20u);
  EXPECT_EQ(early + rest, 20u);
}

TEST_F(QueueTest, NackWithDelay) {
  JobId a = Push("a");
  JobId b = Push("b");
  std::optional<Delivery> d = FetchOne(kT0);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->id, a);
  EXPECT_EQ(q_.Nack(d->lease, 2'500, "later", kT0 + 100), LeaseOutcome::kOk);
  EXPECT_EQ(q_.Stats(kT0 + 100).delayed, 1);
  EXPECT_EQ(q_.NextDeadline(), kT0 + 2'600);
  std::optional<Delivery> next = FetchOne(kT0 + 101);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->id, b);
  EXPECT_FALSE(FetchOne(kT0 + 2'599));
  std::optional<Delivery> again = FetchOne(kT0 + 2'600);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, a);
  EXPECT_EQ(again->attempt, 2);
  // delay 0: ready at once.
  EXPECT_EQ(q_.Nack(again->lease, 0, "now", kT0 + 2'700), LeaseOutcome::kOk);
  QueueStats s = q_.Stats(kT0 + 2'700);
  EXPECT_EQ(s.ready, 1);
  EXPECT_EQ(s.delayed, 0);
  EXPECT_EQ(s.nacked, 2);
  EXPECT_EQ(s.expired, 0);
  std::optional<Delivery> third = FetchOne(kT0 + 2'700);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->attempt, 3);
}

TEST_F(QueueTest, NackAfterMaxAttemptsBuriesWithErrorAndHistory) {
  JobId a = Push(Spec("payload-a", 0, 0, std::nullopt, /*max_attempts=*/3));
  int64_t now = kT0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::optional<Delivery> d = FetchOne(now);
    ASSERT_TRUE(d);
    ASSERT_EQ(d->attempt, attempt);
    EXPECT_EQ(q_.Nack(d->lease, 0, "error " + std::to_string(attempt), now + 5), LeaseOutcome::kOk);
    now += 10;
  }
  QueueStats s = q_.Stats(now);
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.ready + s.delayed + s.inflight, 0);
  EXPECT_EQ(s.nacked, 3);
  ExpectIdentity(s);
  EXPECT_FALSE(FetchOne(now + 10 * 3'600'000));
  std::vector<DeadJob> dead = q_.Dead(10, now);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].id, a);
  EXPECT_EQ(dead[0].payload, "payload-a");
  EXPECT_EQ(dead[0].attempts, 3);
  EXPECT_EQ(dead[0].error, "error 3");
  EXPECT_EQ(dead[0].failed_at_ms, kT0 + 25);
  ASSERT_EQ(dead[0].history.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(dead[0].history[i].attempt, i + 1);
    EXPECT_EQ(dead[0].history[i].error, "error " + std::to_string(i + 1));
    EXPECT_EQ(dead[0].history[i].at_ms, kT0 + 5 + 10 * i);
  }
}

TEST_F(QueueTest, NackWithDelayOnLastAttemptStillBuries) {
  Push(Spec("a", 0, 0, std::nullopt, /*max_attempts=*/1));
  std::optional<Delivery> d = FetchOne(kT0);
  ASSERT_TRUE(d);
  EXPECT_EQ(q_.Nack(d->lease, 5'000, "no", kT0 + 1), LeaseOutcome::kOk);
  QueueStats s = q_.Stats(kT0 + 1);
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.delayed, 0);
}

TEST_F(QueueTest, DefaultMaxAttemptsIsFiveAndExpiryCountsAsFailure) {
  JobId a = Push("a");
  int64_t now = ExpireRepeatedly(a, 4, kT0);
  EXPECT_EQ(q_.Stats(now).dead, 0);
  std::optional<Delivery> d = FetchOne(now, "w", 1'000);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->attempt, 5);
  q_.Advance(now + 999);
  EXPECT_EQ(q_.Stats(now + 999).dead, 0);
  q_.Advance(now + 1'000);
  QueueStats s = q_.Stats(now + 1'000);
  EXPECT_EQ(s.dead, 1);
  EXPECT_EQ(s.expired, 5);
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(s.ready, 0);
  ExpectIdentity(s);
  std::vector<DeadJob> dead = q_.Dead(10, now + 1'000);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].attempts, 5);
  EXPECT_EQ(dead[0].error, "lease expired");
  EXPECT_EQ(dead[0].failed_at_ms, now + 1'000);
  ASSERT_EQ(dead[0].history.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(dead[0].history[i].attempt, i + 1);
    EXPECT_EQ(dead[0].history[i].at_ms, kT0 + 1'000 * (i + 1));
  }
  EXPECT_EQ(q_.Ack(d->lease, now + 1'001), LeaseOutcome::kLeaseLost);
}

TEST_F(QueueTest, DeadListIsOldestFirstAndLimited) {
  JobId a = Push(Spec("a", 0, 0, std::nullopt, 1));
  JobId b = Push(Spec("b", 0, 0, std::nullopt, 1));
  JobId c = Push(Spec("c", 0, 0, std::nullopt, 1));
  std::vector<Delivery> ds = q_.Fetch("w", 3, kLease, kT0);
  ASSERT_EQ(ds.size(), 3u);
  q_.Nack(ds[2].lease, 0, "c", kT0 + 1);
  q_.Nack(ds[0].lease, 0, "a", kT0 + 2);
  q_.Nack(ds[1].lease, 0, "b", kT0 + 3);
  EXPECT_EQ(Ids(q_.Fetch("w", 1, kLease, kT0 + 4)), std::vector<JobId>{});
  std::vector<DeadJob> dead = q_.Dead(10, kT0 + 4);
  ASSERT_EQ(dead.size(), 3u);
  EXPECT_EQ(dead[0].id, c);
  EXPECT_EQ(dead[1].id, a);
  EXPECT_EQ(dead[2].id, b);
  EXPECT_EQ(q_.Dead(2, kT0 + 4).size(), 2u);
  EXPECT_TRUE(q_.Dead(0, kT0 + 4).empty());
}

TEST_F(QueueTest, RequeueAllDeadStartsAttemptsOver) {
  JobId a = Push(Spec("a", 0, 0, std::nullopt, 2));
  JobId b = Push(Spec("b", 0, 0, std::nullopt, 2));
  int64_t now = kT0;
  for (int i = 0; i < 2; ++i) {
    std::vector<Delivery> ds = q_.Fetch("w", 2, kLease, now);
    ASSERT_EQ(ds.size(), 2u);
    for (const Delivery& d : ds) q_.Nack(d.lease, 0, "e", now + 1);
    now += 10;
  }
  ASSERT_EQ(q_.Stats(now).dead, 2);
  EXPECT_EQ(q_.RequeueDead(std::nullopt, now), 2u);
  QueueStats s = q_.Stats(now);
  EXPECT_EQ(s.dead, 0);
  EXPECT_EQ(s.ready, 2);
  ExpectIdentity(s);
  EXPECT_TRUE(q_.Dead(10, now).empty());
  std::vector<Delivery> ds = q_.Fetch("w", 2, kLease, now + 1);
  EXPECT_EQ(Ids(ds), (std::vector<JobId>{a, b}));
  for (const Delivery& d : ds) EXPECT_EQ(d.attempt, 1);
  // A fresh budget of attempts, and a fresh history.
  for (const Delivery& d : ds) q_.Nack(d.lease, 0, "f", now + 2);
  EXPECT_EQ(q_.Stats(now + 2).dead, 0);
  std::vector<Delivery> ds2 = q_.Fetch("w", 2, kLease, now + 3);
  for (const Delivery& d : ds2) q_.Nack(d.lease, 0, "g", now + 4);
  std::vector<DeadJob> dead = q_.Dead(10, now + 5);
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0].history.size(), 2u);
  EXPECT_EQ(dead[0].history[0].error, "f");
  EXPECT_EQ(q_.RequeueDead(std::nullopt, now + 6), 2u);
  EXPECT_EQ(q_.RequeueDead(std::nullopt, now + 6), 0u);
}

TEST_F(QueueTest, RequeueDeadByIds) {
  std::vector<JobId> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(Push(Spec("d" + std::to_string(i), 0, 0, {}, 1)));
  JobId alive = Push("alive");
  std::vector<Delivery> ds = q_.Fetch("w", 3, kLease, kT0);
  for (const Delivery& d : ds) q_.Nack(d.lease, 0, "e", kT0 + 1);
  ASSERT_EQ(q_.Stats(kT0 + 1).dead, 3);
  // Unknown, not dead and repeated ids are skipped.
  EXPECT_EQ(q_.RequeueDead(std::vector<JobId>{ids[1], 999, alive, ids[1]}, kT0 + 2), 1u);
  QueueStats s = q_.Stats(kT0 + 2);
  EXPECT_EQ(s.dead, 2);
  EXPECT_EQ(s.ready, 2);
  std::vector<DeadJob> dead = q_.Dead(10, kT0 + 2);
  ASSERT_EQ(dead.size(), 2u);
  EXPECT_EQ(dead[0].id, ids[0]);
  EXPECT_EQ(dead[1].id, ids[2]);
  std::vector<Delivery> again = q_.Fetch("w", 10, kLease, kT0 + 3);
  EXPECT_EQ(Ids(again), (std::vector<JobId>{alive, ids[1]}));
  EXPECT_EQ(again.at(1).attempt, 1);
  EXPECT_EQ(q_.RequeueDead(std::vector<JobId>{}, kT0 + 4), 0u);
}

TEST_F(QueueTest, DedupeAnswersTheExistingJobUntilAcked) {
  std::vector<PushResult> r = q_.Push({Spec("a", 0, 0, "k1")}, kT0);
  ASSERT_TRUE(r[0].created);
  JobId a = r[0].id;
  std::vector<PushResult> again =
      q_.Push({Spec("other", 7, 0, "k1"), Spec("b", 0, 0, "k2"), Spec("c", 0, 0, "k2")}, kT0 + 1);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].id, a);
  EXPECT_FALSE(again[0].created);
  EXPECT_TRUE(again[1].created);
  EXPECT_EQ(again[2].id, again[1].id);  // within one batch, too
  EXPECT_FALSE(again[2].created);
  QueueStats s = q_.Stats(kT0 + 1);
  EXPECT_EQ(s.pushed, 2);
  EXPECT_EQ(s.ready, 2);
  // Still a hit while in flight and while dead.
  std::optional<Delivery> d = FetchOne(kT0 + 2);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->id, a);
  EXPECT_EQ(d->payload, "a");  // the first push's payload
  r = q_.Push({Spec("x", 0, 0, "k1")}, kT0 + 3);
  EXPECT_EQ(r[0].id, a);
  EXPECT_FALSE(r[0].created);
  // Acked: the key is free again.
  ASSERT_EQ(q_.Ack(d->lease, kT0 + 4), LeaseOutcome::kOk);
  r = q_.Push({Spec("a2", 0, 0, "k1")}, kT0 + 5);
  EXPECT_TRUE(r[0].created);
  EXPECT_NE(r[0].id, a);
  EXPECT_EQ(q_.Stats(kT0 + 5).pushed, 3);
  ExpectIdentity(q_.Stats(kT0 + 5));
}

TEST_F(QueueTest, DedupeHitsADeadJob) {
  JobId a = Push(Spec("a", 0, 0, "k", 1));
  std::optional<Delivery> d = FetchOne(kT0);
  ASSERT_TRUE(d);
  q_.Nack(d->lease, 0, "e", kT0 + 1);
  ASSERT_EQ(q_.Stats(kT0 + 1).dead, 1);
  std::vector<PushResult> r = q_.Push({Spec("a", 0, 0, "k")}, kT0 + 2);
  EXPECT_EQ(r[0].id, a);
  EXPECT_FALSE(r[0].created);
  EXPECT_EQ(q_.Stats(kT0 + 2).pushed, 1);
}

TEST_F(QueueTest, CancelReadyDelayedDeadButNotInFlight) {
  JobId ready = Push("ready");
  JobId delayed = Push(Spec("delayed", 0, 60'000));
  JobId dead = Push(Spec("dead", 5, 0, std::nullopt, 1));
  JobId flying = Push("flying", 1);
  std::vector<Delivery> ds = q_.Fetch("w", 2, kLease, kT0);
  ASSERT_EQ(Ids(ds), (std::vector<JobId>{dead, flying}));
  q_.Nack(ds[0].lease, 0, "e", kT0 + 1);
  EXPECT_EQ(q_.Cancel(ready, kT0 + 2), CancelOutcome::kCancelled);
  EXPECT_EQ(q_.Cancel(delayed, kT0 + 3), CancelOutcome::kCancelled);
  EXPECT_EQ(q_.Cancel(dead, kT0 + 4), CancelOutcome::kCancelled);
  EXPECT_EQ(q_.Cancel(flying, kT0 + 5), CancelOutcome::kInFlight);
  EXPECT_EQ(q_.Cancel(ready, kT0 + 6), CancelOutcome::kUnknown);  // already gone
  EXPECT_EQ(q_.Cancel(12345, kT0 + 7), CancelOutcome::kUnknown);
  QueueStats s = q_.Stats(kT0 + 8);
  EXPECT_EQ(s.cancelled, 3);
  EXPECT_EQ(s.ready + s.delayed + s.dead, 0);
  EXPECT_EQ(s.inflight, 1);
  ExpectIdentity(s);
  EXPECT_TRUE(q_.Dead(10, kT0 + 8).empty());
  EXPECT_EQ(q_.NextDeadline(), kT0 + kLease);  // the delayed job's deadline went with it
  // Only `flying` is ever delivered again.
  EXPECT_EQ(Ids(q_.Fetch("w", 10, kLease, kT0 + 120'000)), (std::vector<JobId>{flying}));
}

TEST_F(QueueTest, CancelOfAckedJobIsUnknown) {
  JobId a = Push("a");
  std::optional<Delivery> d = FetchOne(kT0);
  ASSERT_TRUE(d);
  ASSERT_EQ(q_.Ack(d->lease, kT0 + 1), LeaseOutcome::kOk);
  EXPECT_EQ(q_.Cancel(a, kT0 + 2), CancelOutcome::kUnknown);
  EXPECT_EQ(q_.Stats(kT0 + 2).cancelled, 0);
}

TEST_F(QueueTest, PausedQueueAcceptsPushesAndDeliversNothing) {
  JobId a = Push("a");
  q_.SetPaused(true, kT0 + 1);
  EXPECT_TRUE(q_.Stats(kT0 + 1).paused);
  JobId b = Push("b", 0, kT0 + 2);
  EXPECT_EQ(q_.Stats(kT0 + 2).ready, 2);
  EXPECT_FALSE(q_.CanDeliver());
  EXPECT_TRUE(q_.Fetch("w", 10, kLease, kT0 + 3).empty());
  EXPECT_EQ(q_.Stats(kT0 + 3).workers, 0);
  q_.SetPaused(false, kT0 + 4);
  EXPECT_FALSE(q_.Stats(kT0 + 4).paused);
  EXPECT_TRUE(q_.CanDeliver());
  EXPECT_EQ(Ids(q_.Fetch("w", 10, kLease, kT0 + 5)), (std::vector<JobId>{a, b}));
}

TEST_F(QueueTest, PausedQueueStillExpiresLeases) {
  Push("a");
  std::optional<Delivery> d = FetchOne(kT0, "w", 1'000);
  ASSERT_TRUE(d);
  q_.SetPaused(true, kT0 + 1);
  q_.Advance(kT0 + 1'000);
  QueueStats s = q_.Stats(kT0 + 1'000);
  EXPECT_EQ(s.expired, 1);
  EXPECT_EQ(s.ready, 1);
  EXPECT_TRUE(q_.Fetch("w", 1, kLease, kT0 + 1'001).empty());
}

TEST_F(QueueTest, SilentWorkerLosesAllLeasesAtItsTtl) {
  JobId a = Push("a");
  JobId b = Push("b");
  JobId c = Push("c");
  JobId other = Push("other");
  q_.Heartbeat("dies", 5'000, kT0);
  q_.Heartbeat("lives", 5'000, kT0);
  std::vector<Delivery> ds = q_.Fetch("dies", 3, kLease, kT0 + 100);
  ASSERT_EQ(Ids(ds), (std::vector<JobId>{a, b, c}));
  std::optional<Delivery> o = FetchOne(kT0 + 100, "lives");
  ASSERT_TRUE(o);
  EXPECT_EQ(q_.NextDeadline(), kT0 + 5'000);
  // "lives" keeps heartbeating; "dies" says nothing more.
  q_.Heartbeat("lives", 5'000, kT0 + 4'000);
  EXPECT_EQ(q_.Stats(kT0 + 4'999).inflight, 4);
  EXPECT_EQ(q_.Stats(kT0 + 4'999).workers, 2);
  q_.Advance(kT0 + 5'000);  // long before the 30 s leases
  QueueStats s = q_.Stats(kT0 + 5'000);
  EXPECT_EQ(s.inflight, 1);
  EXPECT_EQ(s.ready, 3);
  EXPECT_EQ(s.expired, 3);
  EXPECT_EQ(s.workers, 1);
  ExpectIdentity(s);
  EXPECT_TRUE(q_.Inflight("dies", kT0 + 5'000).empty());
  JobId d = Push("d", 0, kT0 + 5'001);
  std::vector<Delivery> again = q_.Fetch("new", 10, kLease, kT0 + 5'002);
  EXPECT_EQ(Ids(again), (std::vector<JobId>{a, b, c, d}));  // back at the head, in order
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(again[i].attempt, 2);
  EXPECT_EQ(q_.Ack(ds[0].lease, kT0 + 5'003), LeaseOutcome::kLeaseLost);
  // The live worker kept its job.
  EXPECT_EQ(q_.Ack(o->lease, kT0 + 5'004), LeaseOutcome::kOk);
  (void)other;
}

TEST_F(QueueTest, HeartbeatsKeepAWorkerAlive) {
  Push("a");
  q_.Heartbeat("w", 1'000, kT0);
  std::optional<Delivery> d = FetchOne(kT0, "w", 60'000);
  ASSERT_TRUE(d);
  for (int64_t t = kT0 + 900; t < kT0 + 50'000; t += 900) q_.Heartbeat("w", 1'000, t);
  EXPECT_EQ(q_.Stats(kT0 + 50'000).inflight, 1);
  EXPECT_EQ(q_.Stats(kT0 + 50'000).expired, 0);
  EXPECT_EQ(q_.Ack(d->lease, kT0 + 50'000), LeaseOutcome::kOk);
  // Idle but alive, until the ttl runs out.
  EXPECT_EQ(q_.Stats(kT0 + 50'000).workers, 1);
  EXPECT_EQ(q_.Stats(kT0 + 50'499).workers, 1);  // last heartbeat at kT0 + 49'500
  EXPECT_EQ(q_.Stats(kT0 + 50'500).workers, 0);
}

// Anyone who may heartbeat may name any worker: a short ttl in another's name must not fail
// that worker's leases.
TEST_F(QueueTest, AHeartbeatNeverShortensAWorkersDeadline) {
  Push("a");
  q_.Heartbeat("victim", 600'000, kT0);
  std::optional<Delivery> d = FetchOne(kT0, "victim", 600'000);
  ASSERT_TRUE(d);
  q_.Heartbeat("victim", 1, kT0 + 10);
  EXPECT_EQ(q_.Stats(kT0 + 60'000).inflight, 1);
  EXPECT_EQ(q_.Stats(kT0 + 60'000).expired, 0);
  EXPECT_EQ(q_.Ack(d->lease, kT0 + 60'000), LeaseOutcome::kOk);
  // A longer one still extends it.
  q_.Heartbeat("victim", 1'200'000, kT0 + 60'000);
  EXPECT_EQ(q_.Stats(kT0 + 1'000'000).workers, 1);
  EXPECT_EQ(q_.Stats(kT0 + 1'260'000).workers, 0);
}

// Errors are bounded in size, and only the last attempts' are kept.
TEST_F(QueueTest, AJobKeepsItsLastAttemptsErrorsBounded) {
  Push(Spec("a", 0, 0, std::nullopt, 12));
  const std::string huge(1 << 20, 'e');
  int64_t now = kT0;
  for (int attempt = 1; attempt <= 12; ++attempt) {
    std::optional<Delivery> d = FetchOne(now);
    ASSERT_TRUE(d) << attempt;
    std::string error = std::to_string(attempt) + ":" + (attempt % 2 ? huge : "short");
    EXPECT_EQ(q_.Nack(d->lease, 0, error, now), LeaseOutcome::kOk);
    now += 1;
  }
  std::vector<DeadJob> dead = q_.Dead(10, now);
  ASSERT_EQ(dead.size(), 1u);
  ASSERT_EQ(dead[0].history.size(), kKeptAttempts);
  EXPECT_EQ(dead[0].history.front().attempt, 3);
  EXPECT_EQ(dead[0].history.back().attempt, 12);
  EXPECT_EQ(dead[0].error, "12:short");
  const std::string& cut = dead[0].history.front().error;
  EXPECT_LE(cut.size(), kMaxErrorBytes);
  EXPECT_TRUE(cut.starts_with("3:eee")) << cut.substr(0, 20);
  EXPECT_TRUE(cut.ends_with(" [truncated: " + std::to_string(huge.size() + 2) + " bytes]"));
}

TEST(BoundedErrorTest, CutsAtACharactersStart) {
  EXPECT_EQ(BoundedError("boom"), "boom");
  EXPECT_EQ(BoundedError(std::string(kMaxErrorBytes, 'x')), std::string(kMaxErrorBytes, 'x'));
  // Two-byte characters across the cut: never half of one.
  std::string accents;
  while (accents.size() < 3 * kMaxErrorBytes) accents += "\xC3\xA9";
  std::string cut = BoundedError(accents);
  EXPECT_LE(cut.size(), kMaxErrorBytes);
  std::string kept = cut.substr(0, cut.find(" [truncated"));
  EXPECT_EQ(kept.size() % 2, 0u);
  EXPECT_EQ(kept, accents.substr(0, kept.size()));
  EXPECT_EQ(BoundedError(cut), cut) << "bounding twice changes nothing";
}

TEST_F(QueueTest, LeaseShorterThanTtlStillExpires) {
  Push("a");
  q_.Heartbeat("w", 60'000, kT0);
  std::optional<Delivery> d = FetchOne(kT0, "w", 1'000);
  ASSERT_TRUE(d);
  q_.Advance(kT0 + 1'000);
  EXPECT_EQ(q_.Stats(kT0 + 1'000).expired, 1);
  EXPECT_EQ(q_.Stats(kT0 + 1'000).workers, 1);  // the worker itself is alive
}

TEST_F(QueueTest, ReleaseWorkerRequeuesAtOnceAtTheHead) {
  JobId a = Push("a");
  JobId b = Push("b", 3);
  JobId c = Push("c");
  JobId x = Push("x");
  std::vector<Delivery> ds = q_.Fetch("gone", 3, kLease, kT0);
  ASSERT_EQ(Ids(ds), (std::vector<JobId>{b, a, c}));
  std::optional<Delivery> kept = FetchOne(kT0, "stays");
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->id, x);
  JobId y = Push("y", 0, kT0 + 1);
  EXPECT_EQ(q_.ReleaseWorker("gone", kT0 + 10), 3u);
  QueueStats s = q_.Stats(kT0 + 10);
  EXPECT_EQ(s.inflight, 1);
  EXPECT_EQ(s.ready, 4);
  EXPECT_EQ(s.workers, 1);
  ExpectIdentity(s);
  EXPECT_TRUE(q_.Inflight("gone", kT0 + 10).empty());
  EXPECT_EQ(q_.ReleaseWorker("gone", kT0 + 11), 0u);
  EXPECT_EQ(q_.ReleaseWorker("nobody", kT0 + 11), 0u);
  std::vector<Delivery> again = q_.Fetch("new", 10, kLease, kT0 + 12);
  EXPECT_EQ(Ids(again), (std::vector<JobId>{b, a, c, y}));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(again[i].attempt, 2);
  EXPECT_EQ(q_.Ack(ds[1].lease, kT0 + 13), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q_.Ack(kept->lease, kT0 + 14), LeaseOutcome::kOk);
}

TEST_F(QueueTest, ReleaseOnLastAttemptBuries) {
  JobId a = Push(Spec("a", 0, 0, std::nullopt, 1));
  ASSERT_TRUE(FetchOne(kT0, "w"));
  EXPECT_EQ(q_.ReleaseWorker("w", kT0 + 1), 1u);
  std::vector<DeadJob> dead = q_.Dead(10, kT0 + 1);
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].id, a);
  EXPECT_EQ(dead[0].history.size(), 1u);
}

TEST_F(QueueTest, ReleaseForgetsTheHeartbeat) {
  q_.Heartbeat("w", 60'000, kT0);
  EXPECT_EQ(q_.Stats(kT0).workers, 1);
  EXPECT_EQ(q_.ReleaseWorker("w", kT0 + 1), 0u);
  EXPECT_EQ(q_.Stats(kT0 + 1).workers, 0);
  EXPECT_EQ(q_.NextDeadline(), INT64_MAX);
}

TEST_F(QueueTest, InflightListsPerWorkerAndAll) {
  JobId a = Push("a");
  JobId b = Push("b");
  JobId c = Push("c");
  JobId d = Push("d");
  ASSERT_EQ(q_.Fetch("w1", 2, 10'000, kT0).size(), 2u);     // a, b
  ASSERT_EQ(q_.Fetch("w2", 1, 5'000, kT0 + 1).size(), 1u);  // c
  std::vector<InflightJob> w1 = q_.Inflight("w1", kT0 + 2);
  EXPECT_EQ(Ids(w1), (std::vector<JobId>{a, b}));
  for (const InflightJob& j : w1) {
    EXPECT_EQ(j.worker, "w1");
    EXPECT_EQ(j.attempt, 1);
    EXPECT_EQ(j.lease_expires_ms, kT0 + 10'000);
  }
  std::vector<InflightJob> w2 = q_.Inflight("w2", kT0 + 2);
  ASSERT_EQ(w2.size(), 1u);
  EXPECT_EQ(w2[0].id, c);
  EXPECT_EQ(w2[0].worker, "w2");
  EXPECT_EQ(w2[0].lease_expires_ms, kT0 + 5'001);
  std::vector<InflightJob> all = q_.Inflight(std::nullopt, kT0 + 2);
  EXPECT_EQ(Ids(all), (std::vector<JobId>{c, a, b}));  // by lease deadline
  EXPECT_TRUE(q_.Inflight("w3", kT0 + 2).empty());
  // After w2's lease ran out it lists nothing; d is still ready, so not listed.
  EXPECT_TRUE(q_.Inflight("w2", kT0 + 5'001).empty());
  EXPECT_EQ(Ids(q_.Inflight(std::nullopt, kT0 + 5'001)), (std::vector<JobId>{a, b}));
  (void)d;
}

TEST_F(QueueTest, WorkersCountsInFlightOrLiveHeartbeat) {
  EXPECT_EQ(q_.Stats(kT0).workers, 0);
  q_.Heartbeat("hb", 2'000, kT0);
  EXPECT_EQ(q_.Stats(kT0).workers, 1);
  Push("a");
  Push("b");
  std::optional<Delivery> da = FetchOne(kT0, "fetcher");
  ASSERT_TRUE(da);
  std::optional<Delivery> db = FetchOne(kT0, "hb");
  ASSERT_TRUE(db);
  EXPECT_EQ(q_.Stats(kT0 + 1).workers, 2);
  EXPECT_TRUE(q_.Fetch("idle", 1, kLease, kT0 + 1).empty());
  EXPECT_EQ(q_.Stats(kT0 + 1).workers, 2);  // an empty fetch registers nobody
  ASSERT_EQ(q_.Ack(da->lease, kT0 + 2), LeaseOutcome::kOk);
  EXPECT_EQ(q_.Stats(kT0 + 2).workers, 1);
  ASSERT_EQ(q_.Ack(db->lease, kT0 + 3), LeaseOutcome::kOk);
  EXPECT_EQ(q_.Stats(kT0 + 3).workers, 1);  // heartbeat still live
  EXPECT_EQ(q_.Stats(kT0 + 1'999).workers, 1);
  EXPECT_EQ(q_.Stats(kT0 + 2'000).workers, 0);
}

TEST_F(QueueTest, ExtendMovesTheLeaseDeadline) {
  JobId a = Push("a");
  std::optional<Delivery> d = FetchOne(kT0, "w", 1'000);
  ASSERT_TRUE(d);
  EXPECT_EQ(q_.Extend(d->lease, 10'000, kT0 + 500), LeaseOutcome::kOk);
  EXPECT_EQ(q_.NextDeadline(), kT0 + 10'500);
  std::vector<InflightJob> in = q_.Inflight("w", kT0 + 1'000);
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].lease_expires_ms, kT0 + 10'500);
  EXPECT_EQ(q_.Stats(kT0 + 10'499).expired, 0);
  EXPECT_TRUE(q_.Fetch("w2", 1, kLease, kT0 + 10'499).empty());
  // Shortening is allowed too: the deadline is now + lease_ms.
  EXPECT_EQ(q_.Extend(d->lease, 200, kT0 + 10'499), LeaseOutcome::kOk);
  EXPECT_EQ(q_.NextDeadline(), kT0 + 10'699);
  EXPECT_EQ(q_.Stats(kT0 + 10'698).inflight, 1);
  q_.Advance(kT0 + 10'699);
  EXPECT_EQ(q_.Stats(kT0 + 10'699).expired, 1);
  EXPECT_EQ(q_.Extend(d->lease, 10'000, kT0 + 10'700), LeaseOutcome::kLeaseLost);
  std::optional<Delivery> again = FetchOne(kT0 + 10'701);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->id, a);
}

TEST_F(QueueTest, NextDeadlineIsTheEarliestDelayLeaseOrHeartbeat) {
  EXPECT_EQ(q_.NextDeadline(), INT64_MAX);
  Push(Spec("d", 0, 9'000));
  EXPECT_EQ(q_.NextDeadline(), kT0 + 9'000);
  Push("r");
  ASSERT_TRUE(FetchOne(kT0 + 1, "w", 7'000));
  EXPECT_EQ(q_.NextDeadline(), kT0 + 7'001);
  q_.Heartbeat("w", 3'000, kT0 + 2);
  EXPECT_EQ(q_.NextDeadline(), kT0 + 3'002);
  q_.Advance(kT0 + 3'002);  // the worker dies, its job is ready again
  EXPECT_EQ(q_.NextDeadline(), kT0 + 9'000);
  ASSERT_TRUE(FetchOne(kT0 + 3'003, "v", 100'000));
  EXPECT_EQ(q_.NextDeadline(), kT0 + 9'000);
  q_.Advance(kT0 + 9'000);
  EXPECT_EQ(q_.NextDeadline(), kT0 + 103'003);
}

TEST_F(QueueTest, AdvanceDoesNotGoBackInTime) {
  Push("a");
  std::optional<Delivery> d = FetchOne(kT0 + 1'000, "w", 1'000);
  ASSERT_TRUE(d);
  q_.Advance(kT0);  // an earlier time is ignored
  EXPECT_EQ(q_.Stats(kT0).inflight, 1);
  EXPECT_EQ(q_.Ack(d->lease, kT0 + 500), LeaseOutcome::kOk);
}

TEST_F(QueueTest, AccountingIdentityHoldsUnderRandomOperations) {
  std::mt19937_64 rng(kSeed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int64_t now = kT0;
  std::vector<std::string> leases;
  std::vector<JobId> ids;
  int64_t max_dead = 0;
  // Mostly one of the latest leases (likely current), sometimes any (likely stale).
  auto pick = [&]() -> const std::string& {
    size_t n = leases.size();
    if (uniform(0, 3) == 0) return leases[uniform(0, n - 1)];
    return leases[n - 1 - uniform(0, std::min<int64_t>(n, 6) - 1)];
  };
  for (int step = 0; step < 6'000; ++step) {
    now += uniform(0, 400);
    std::string worker = "w" + std::to_string(uniform(0, 4));
    int op = static_cast<int>(uniform(0, 99));
    if (op < 25) {
      std::vector<JobSpec> batch;
      for (int64_t n = uniform(1, 3); n > 0; --n) {
        JobSpec s = Spec("p", static_cast<int32_t>(uniform(-1, 1)),
                         uniform(0, 3) == 0 ? uniform(1, 3'000) : 0);
        if (uniform(0, 4) == 0) s.dedupe_key = "k" + std::to_string(uniform(0, 9));
        s.max_attempts = static_cast<int32_t>(uniform(1, 4));
        batch.push_back(s);
      }
      for (const PushResult& r : q_.Push(batch, now)) ids.push_back(r.id);
    } else if (op < 45) {
      for (const Delivery& d : q_.Fetch(worker, uniform(1, 4), uniform(100, 3'000), now)) {
        leases.push_back(d.lease);
      }
    } else if (op < 58 && !leases.empty()) {
      q_.Ack(pick(), now);
    } else if (op < 70 && !leases.empty()) {
      std::optional<int64_t> delay;
      if (uniform(0, 1) == 0) delay = uniform(0, 2'000);
      q_.Nack(pick(), delay, "e", now);
    } else if (op < 75 && !leases.empty()) {
      q_.Extend(pick(), uniform(100, 3'000), now);
    } else if (op < 80) {
      q_.Heartbeat(worker, uniform(100, 2'000), now);
    } else if (op < 83) {
      q_.ReleaseWorker(worker, now);
    } else if (op < 87 && !ids.empty()) {
      q_.Cancel(ids[uniform(0, ids.size() - 1)], now);
    } else if (op < 89) {
      if (uniform(0, 1) == 0) {
        q_.RequeueDead(std::nullopt, now);
      } else if (!ids.empty()) {
        q_.RequeueDead(std::vector<JobId>{ids[uniform(0, ids.size() - 1)]}, now);
      }
    } else if (op < 91) {
      q_.SetPaused(uniform(0, 2) == 0, now);
    } else {
      q_.Advance(now);
    }
    QueueStats s = q_.Stats(now);
    ExpectIdentity(s);
    ASSERT_EQ(s.inflight, static_cast<int64_t>(q_.Inflight(std::nullopt, now).size()));
    ASSERT_EQ(s.dead, static_cast<int64_t>(q_.Dead(SIZE_MAX, now).size()));
    ASSERT_FALSE(::testing::Test::HasFailure()) << "step " << step;
    max_dead = std::max(max_dead, s.dead);
  }
  QueueStats s = q_.Stats(now);
  // The walk went through every kind of transition.
  EXPECT_GT(s.acked, 100);
  EXPECT_GT(s.nacked, 100);
  EXPECT_GT(s.expired, 100);
  EXPECT_GT(s.cancelled, 10);
  EXPECT_GT(max_dead, 3);
}

}  // namespace
}  // namespace anteroom::core

namespace anteroom::core {
namespace {

// The slab grows in chunks of 1024 jobs and the id index holds slab slots hashed by their
// job's id: thousands of jobs, freed out of order and their slots reused, must each still be
// found by id (ack, cancel) and survive a snapshot.
// Bytes malloc has handed out, arenas and mmap'd blocks both.
size_t HeapInUse() {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// A backlog that drains gives its memory back: freed slots are reused lowest first, so jobs
// stay packed at the slab's front and its emptied end is cut off (with the indexes by slot).
// The newest jobs of a drained backlog hold the end until they are done too.
TEST_F(QueueTest, ADrainedBacklogGivesItsMemoryBack) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer's allocator does not report through mallinfo2";
#endif
  constexpr int kJobs = 100'000;
  size_t before = HeapInUse();
  std::vector<JobId> ids;
  for (int i = 0; i < kJobs; ++i) ids.push_back(Push("job " + std::to_string(i)));
  size_t full = HeapInUse();
  ASSERT_GT(full - before, size_t{kJobs} * 100) << "the backlog's own memory";
  // All but the newest 10 are done.
  std::vector<Delivery> ds = q_.Fetch("w", kJobs, kLease, kT0 + 1);
  ASSERT_EQ(ds.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs - 10; ++i) ASSERT_EQ(q_.Ack(ds[i].lease, kT0 + 2), LeaseOutcome::kOk);
  EXPECT_GT(HeapInUse() - before, (full - before) / 2) << "the newest jobs hold the end";
  // New work takes the lowest slots; once the old newest are done, the end is free.
  std::vector<JobId> fresh;
  for (int i = 0; i < 10; ++i) fresh.push_back(Push("fresh " + std::to_string(i), 0, kT0 + 3));
  for (int i = kJobs - 10; i < kJobs; ++i) {
    ASSERT_EQ(q_.Ack(ds[i].lease, kT0 + 4), LeaseOutcome::kOk);
  }
  // Repeated acks are answered for an hour; then what remembers them is given back too.
  q_.Stats(kT0 + 3'600'000 + 10);
  ds = std::vector<Delivery>();  // the test's own copies of the leases
  ids = std::vector<JobId>();
  size_t after = HeapInUse();
  EXPECT_LT(after - before, size_t{256} * 1024)
      << "10 jobs left of 100,000: " << (after - before) << " bytes kept of " << (full - before);
  std::printf("[ note     ] a backlog of 100,000 jobs took %zu bytes; drained to 10, %zu\n",
              full - before, after - before);
  // The queue goes on as before.
  std::vector<Delivery> rest = q_.Fetch("w", 100, kLease, kT0 + 3'600'000 + 20);
  ASSERT_EQ(rest.size(), 10u);
  for (size_t i = 0; i < rest.size(); ++i) EXPECT_EQ(rest[i].id, fresh[i]) << "FIFO kept";
  for (const Delivery& d : rest) {
    ASSERT_EQ(q_.Ack(d.lease, kT0 + 3'600'000 + 30), LeaseOutcome::kOk);
  }
  ExpectIdentity(q_.Stats(kT0 + 3'600'000 + 40));
  for (int i = 0; i < 3; ++i) Push("again " + std::to_string(i), 0, kT0 + 3'600'000 + 50);
  EXPECT_EQ(q_.Fetch("w", 10, kLease, kT0 + 3'600'000 + 60).size(), 3u);
}

TEST_F(QueueTest, JobsAcrossManySlabChunksAreFoundByIdAndSurviveASnapshot) {
  constexpr int kJobs = 5'000;
  std::vector<JobId> ids;
  for (int i = 0; i < kJobs; ++i) ids.push_back(Push("p" + std::to_string(i)));
  // Cancel every third job, from the end, so free slots are scattered over every chunk.
  int cancelled = 0;
  for (int i = kJobs - 1; i >= 0; i -= 3) {
    EXPECT_EQ(q_.Cancel(ids[static_cast<size_t>(i)], kT0), CancelOutcome::kCancelled);
    ++cancelled;
  }
  EXPECT_EQ(q_.Cancel(ids[kJobs - 1], kT0), CancelOutcome::kUnknown);  // gone: not found
  // New jobs reuse the freed slots under new ids.
  for (int i = 0; i < cancelled; ++i) ids.push_back(Push("n" + std::to_string(i)));

  std::string bytes;
  ByteWriter out(bytes);
  q_.Save(out);
  Queue restored{"jobs", key_, kT0, kSeed};
  ByteReader in(bytes);
  ASSERT_TRUE(restored.Restore(in));

  for (Queue* q : {&q_, &restored}) {
    std::vector<Delivery> ds = q->Fetch("w", kJobs + 1, kLease, kT0 + 1);
    ASSERT_EQ(ds.size(), static_cast<size_t>(kJobs)) << (q == &q_ ? "live" : "restored");
    // Ack in reverse: each lease's id is looked up in the index.
    for (auto d = ds.rbegin(); d != ds.rend(); ++d) {
      ASSERT_EQ(q->Ack(d->lease, kT0 + 2), LeaseOutcome::kOk) << d->id;
    }
    QueueStats s = q->Stats(kT0 + 3);
    EXPECT_EQ(s.acked, kJobs);
    EXPECT_EQ(s.ready + s.inflight + s.delayed, 0);
    ExpectIdentity(s);
  }
}

}  // namespace
}  // namespace anteroom::core
