// The queues conformance suite: the same tests against every backend, only through
// store::Backend plus a way to move time forward (backend_fixture.h). Long polls are started
// without waiting for their answer, so a test can see that one has not answered yet.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend_fixture.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::CancelOutcome;
using core::DeadJob;
using core::Delivery;
using core::InflightJob;
using core::JobId;
using core::JobSpec;
using core::LeaseOutcome;
using core::PushResult;
using core::QueueStats;
using Outcomes = std::vector<LeaseOutcome>;
using Deliveries = std::vector<Delivery>;

JobSpec Grouped(std::string payload, std::string group, int32_t priority = 0) {
  JobSpec spec;
  spec.payload = std::move(payload);
  spec.group = std::move(group);
  spec.priority = priority;
  return spec;
}

core::RateLimit Rate(int64_t limit, int64_t period_ms, int64_t burst) {
  return core::RateLimit{.limit = limit, .period_ms = period_ms, .burst = burst};
}

core::JobLimits Limit(std::optional<core::RateLimit> rate, int64_t concurrency = 0) {
  core::JobLimits l;
  l.rate = rate;
  l.concurrency = concurrency;
  return l;
}

core::QueueLimits Limits(core::Fairness fairness, core::JobLimits per_group = {},
                         core::JobLimits queue = {}) {
  core::QueueLimits l;
  l.fairness = fairness;
  l.per_group = per_group;
  l.queue = queue;
  return l;
}
const core::Fairness kFifo = core::Fairness::kFifo;
const core::Fairness kRoundRobin = core::Fairness::kRoundRobin;

JobSpec Job(std::string payload, int32_t priority = 0, int64_t delay_ms = 0,
            std::optional<std::string> dedupe_key = std::nullopt,
            int32_t max_attempts = core::kDefaultMaxAttempts) {
  JobSpec spec;
  spec.payload = std::move(payload);
  spec.priority = priority;
  spec.delay_ms = delay_ms;
  spec.dedupe_key = std::move(dedupe_key);
  spec.max_attempts = max_attempts;
  return spec;
}

std::vector<std::string> Payloads(const Deliveries& jobs) {
  std::vector<std::string> out;
  for (const Delivery& d : jobs) out.push_back(d.payload);
  return out;
}

// A fetch whose answer may come later (a long poll).
class PendingFetch {
 public:
  explicit PendingFetch(std::future<OpResult<Deliveries>> future) : future_(std::move(future)) {}

  // True when no answer arrives within `ms` (an answer would be a failure of the test).
  bool StillWaiting(int ms = 50) {
    return future_.wait_for(std::chrono::milliseconds(ms)) != std::future_status::ready;
  }
  // The answer, waiting up to 10 s for it.
  OpResult<Deliveries> Get() {
    if (future_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "the long poll did not answer";
      return OpResult<Deliveries>(OpStatus::kInternal, "timeout");
    }
    return future_.get();
  }

 private:
  std::future<OpResult<Deliveries>> future_;
};

class QueuesConformanceTest : public conformance::BackendTest {
 protected:
  OpResult<std::vector<PushResult>> Push(const std::string& q, std::vector<JobSpec> jobs) {
    return Await<std::vector<PushResult>>([&](auto done) { b().Push(q, std::move(jobs), done); });
  }
  // One job that must be accepted as new; answers its id (0 on failure).
  JobId PushOne(const std::string& q, JobSpec job) {
    auto r = Push(q, {std::move(job)});
    EXPECT_TRUE(r.ok()) << r.message();
    if (!r.ok() || r->size() != 1) {
      ADD_FAILURE() << "push did not answer one result";
      return 0;
    }
    EXPECT_TRUE((*r)[0].created);
    return (*r)[0].id;
  }
  JobId PushOne(const std::string& q, std::string payload, int32_t priority = 0) {
    return PushOne(q, Job(std::move(payload), priority));
  }
  OpResult<Deliveries> Fetch(const std::string& q, const std::string& worker, size_t max = 1,
                             int64_t lease_ms = 30'000, int64_t wait_ms = 0) {
    return Await<Deliveries>([&](auto done) {
      b().Fetch(q,
                {.worker = worker,
                 .max = max,
                 .lease_ms = lease_ms,
                 .wait_ms = wait_ms,
                 .ack = {},
                 .ack_results = {},
                 .hangup = {}},
                [done](OpResult<core::FetchAnswer> r) {
                  if (!r.ok()) return done(OpResult<Deliveries>(r.status(), r.message()));
                  done(std::move(r->jobs));
                });
    });
  }
  // A fetch that first takes back the jobs `worker` holds (FetchRequest::reclaim).
  core::FetchAnswer Reclaim(const std::string& q, const std::string& worker, size_t max,
                            int64_t lease_ms = 30'000) {
    auto r = Await<core::FetchAnswer>([&](auto done) {
      b().Fetch(q,
                {.worker = worker,
                 .max = max,
                 .lease_ms = lease_ms,
                 .wait_ms = 0,
                 .ack = {},
                 .ack_results = {},
                 .reclaim = true,
                 .hangup = {}},
                done);
    });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? std::move(*r) : core::FetchAnswer{};
  }
  // A fetch that must succeed; its deliveries.
  Deliveries Take(const std::string& q, const std::string& worker, size_t max = 1,
                  int64_t lease_ms = 30'000) {
    auto r = Fetch(q, worker, max, lease_ms);
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Deliveries{};
  }
  // Exactly one job, which must come.
  Delivery TakeOne(const std::string& q, const std::string& worker, int64_t lease_ms = 30'000) {
    Deliveries d = Take(q, worker, 1, lease_ms);
    if (d.size() != 1) {
      ADD_FAILURE() << "wanted one job, got " << d.size();
      return Delivery{};
    }
    return d[0];
  }
  PendingFetch StartFetch(const std::string& q, const std::string& worker, size_t max,
                          int64_t lease_ms, int64_t wait_ms,
                          std::shared_ptr<Hangup> hangup = nullptr) {
    auto promise = std::make_shared<std::promise<OpResult<Deliveries>>>();
    PendingFetch pending(promise->get_future());
    b().Fetch(q,
              {.worker = worker,
               .max = max,
               .lease_ms = lease_ms,
               .wait_ms = wait_ms,
               .ack = {},
               .ack_results = {},
               .hangup = std::move(hangup)},
              [promise](OpResult<core::FetchAnswer> r) {
                if (!r.ok())
                  return promise->set_value(OpResult<Deliveries>(r.status(), r.message()));
                promise->set_value(std::move(r->jobs));
              });
    return pending;
  }
  Outcomes Ack(const std::string& q, std::vector<std::string> leases) {
    auto r = Await<Outcomes>([&](auto done) { b().Ack(q, std::move(leases), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Outcomes{};
  }
  Outcomes Nack(const std::string& q, std::vector<std::string> leases,
                std::optional<int64_t> delay_ms = std::nullopt, std::string error = "failed") {
    auto r = Await<Outcomes>(
        [&](auto done) { b().Nack(q, std::move(leases), delay_ms, std::move(error), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Outcomes{};
  }
  Outcomes Extend(const std::string& q, std::vector<std::string> leases, int64_t lease_ms) {
    auto r = Await<Outcomes>([&](auto done) { b().Extend(q, std::move(leases), lease_ms, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Outcomes{};
  }
  void Heartbeat(const std::string& q, const std::string& worker, int64_t ttl_ms) {
    auto r = Await<Done>([&](auto done) { b().Heartbeat(q, worker, ttl_ms, done); });
    EXPECT_TRUE(r.ok()) << r.message();
  }
  size_t Release(const std::string& q, const std::string& worker) {
    auto r = Await<size_t>([&](auto done) { b().ReleaseWorker(q, worker, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : SIZE_MAX;
  }
  QueueStats Stats(const std::string& q) {
    auto r = Await<QueueStats>([&](auto done) { b().GetQueue(q, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : QueueStats{.pushed = -1};
  }
  std::vector<std::pair<std::string, QueueStats>> List() {
    auto r = Await<std::vector<std::pair<std::string, QueueStats>>>(
        [&](auto done) { b().ListQueues(done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<std::pair<std::string, QueueStats>>{};
  }
  std::vector<InflightJob> Inflight(const std::string& q,
                                    std::optional<std::string> worker = std::nullopt) {
    auto r = Await<std::vector<InflightJob>>(
        [&](auto done) { b().Inflight(q, std::move(worker), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<InflightJob>{};
  }
  std::vector<DeadJob> Dead(const std::string& q, size_t limit = 100) {
    auto r = Await<std::vector<DeadJob>>([&](auto done) { b().Dead(q, limit, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<DeadJob>{};
  }
  size_t Requeue(const std::string& q, std::optional<std::vector<JobId>> ids = std::nullopt) {
    auto r = Await<size_t>([&](auto done) { b().RequeueDead(q, std::move(ids), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : SIZE_MAX;
  }
  OpResult<CancelOutcome> Cancel(const std::string& q, JobId id) {
    return Await<CancelOutcome>([&](auto done) { b().Cancel(q, id, done); });
  }
  void SetPaused(const std::string& q, bool paused) {
    auto r = Await<Done>([&](auto done) { b().SetPaused(q, paused, done); });
    EXPECT_TRUE(r.ok()) << r.message();
  }
  OpResult<Done> SetKey(const std::string& q, std::optional<std::string> digest) {
    return Await<Done>([&](auto done) { b().SetQueueKey(q, std::move(digest), done); });
  }
  std::optional<std::string> GetKey(const std::string& q) {
    auto r = Await<std::optional<std::string>>([&](auto done) { b().GetQueueKey(q, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::optional<std::string>("(failed)");
  }
  Outcomes Snooze(const std::string& q, std::vector<std::string> leases, int64_t delay_ms) {
    auto r = Await<Outcomes>([&](auto done) { b().Snooze(q, std::move(leases), delay_ms, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Outcomes{};
  }
  OpResult<Done> SetSettings(const std::string& q, core::QueueSettings settings) {
    return Await<Done>([&](auto done) { b().SetQueueSettings(q, settings, done); });
  }
  core::QueueSettings GetSettings(const std::string& q) {
    auto r = Await<core::QueueSettings>([&](auto done) { b().GetQueueSettings(q, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : core::QueueSettings{};
  }
  void Configure(const std::string& q, core::QueueLimits limits) {
    auto r = SetSettings(q, core::QueueSettings{limits, {}});
    ASSERT_TRUE(r.ok()) << r.message();
  }
  std::set<std::string> ListedNames() {
    std::set<std::string> names;
    for (const auto& [name, stats] : List()) names.insert(name);
    return names;
  }

  // ready, delayed, inflight, dead, and the identity pushed = acked + every state + cancelled.
  void ExpectCounts(const std::string& q, int64_t ready, int64_t delayed, int64_t inflight,
                    int64_t dead) {
    QueueStats s = Stats(q);
    EXPECT_EQ(s.ready, ready) << q;
    EXPECT_EQ(s.delayed, delayed) << q;
    EXPECT_EQ(s.inflight, inflight) << q;
    EXPECT_EQ(s.dead, dead) << q;
    ExpectIdentity(s);
  }
  static void ExpectIdentity(const QueueStats& s) {
    EXPECT_EQ(s.pushed, s.acked + s.ready + s.delayed + s.inflight + s.dead + s.cancelled)
        << "pushed " << s.pushed << " acked " << s.acked << " ready " << s.ready << " delayed "
        << s.delayed << " inflight " << s.inflight << " dead " << s.dead << " cancelled "
        << s.cancelled;
  }
};

const LeaseOutcome kOk = LeaseOutcome::kOk;
const LeaseOutcome kLost = LeaseOutcome::kLeaseLost;
const LeaseOutcome kInvalid = LeaseOutcome::kInvalidLease;

// ---- push ----------------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, PushOneThenFetchIt) {
  JobId id = PushOne("q", Job(R"({"n":1})", 7));
  ASSERT_NE(id, 0u);
  QueueStats s = Stats("q");
  EXPECT_EQ(s.pushed, 1);
  EXPECT_EQ(s.ready, 1);
  int64_t now = NowMs();
  Delivery d = TakeOne("q", "w", 5'000);
  EXPECT_EQ(d.id, id);
  EXPECT_EQ(d.payload, R"({"n":1})");
  EXPECT_EQ(d.attempt, 1);
  EXPECT_EQ(d.priority, 7);
  EXPECT_EQ(d.lease_expires_ms, now + 5'000);
  EXPECT_FALSE(d.lease.empty());
  ExpectCounts("q", 0, 0, 1, 0);
  EXPECT_TRUE(Take("q", "w").empty()) << "a leased job is not delivered twice";
}

TEST_P(QueuesConformanceTest, BatchPushAnswersDistinctIdsInOrder) {
  auto r = Push("q", {Job("a"), Job("b"), Job("c")});
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->size(), 3u);
  std::set<JobId> ids;
  for (const PushResult& p : *r) {
    EXPECT_TRUE(p.created);
    EXPECT_NE(p.id, 0u);
    ids.insert(p.id);
  }
  EXPECT_EQ(ids.size(), 3u);
  Deliveries d = Take("q", "w", 10);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(Payloads(d), (std::vector<std::string>{"a", "b", "c"}));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(d[i].id, (*r)[i].id);
  EXPECT_EQ(Stats("q").pushed, 3);
}

TEST_P(QueuesConformanceTest, DedupeHitAnswersTheExistingIdAndEnqueuesNothing) {
  JobId first = PushOne("q", Job("one", 0, 0, "k"));
  auto again = Push("q", {Job("two", 0, 0, "k")});
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_FALSE((*again)[0].created);
  EXPECT_EQ((*again)[0].id, first);
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_EQ(Stats("q").pushed, 1);

  // A batch mixing new jobs and hits (also a hit on a key earlier in the same batch).
  auto batch = Push("q", {Job("x", 0, 0, "new"), Job("y", 0, 0, "k"), Job("z", 0, 0, "new")});
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(batch->size(), 3u);
  EXPECT_TRUE((*batch)[0].created);
  EXPECT_FALSE((*batch)[1].created);
  EXPECT_EQ((*batch)[1].id, first);
  EXPECT_FALSE((*batch)[2].created);
  EXPECT_EQ((*batch)[2].id, (*batch)[0].id);
  ExpectCounts("q", 2, 0, 0, 0);

  // Still a hit while in flight; once acked the key is free again.
  Deliveries d = Take("q", "w", 2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(Payloads(d), (std::vector<std::string>{"one", "x"}));
  auto inflight_hit = Push("q", {Job("three", 0, 0, "k")});
  ASSERT_TRUE(inflight_hit.ok());
  EXPECT_FALSE((*inflight_hit)[0].created);
  EXPECT_EQ((*inflight_hit)[0].id, first);
  EXPECT_EQ(Ack("q", {d[0].lease}), Outcomes{kOk});
  JobId fresh = PushOne("q", Job("four", 0, 0, "k"));
  EXPECT_NE(fresh, first);
  ExpectCounts("q", 1, 0, 1, 0);
  EXPECT_EQ(Stats("q").pushed, 3);
}

TEST_P(QueuesConformanceTest, DedupeKeysArePerQueue) {
  JobId a = PushOne("a", Job("1", 0, 0, "k"));
  auto r = Push("b", {Job("2", 0, 0, "k")});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE((*r)[0].created);
  EXPECT_EQ(Stats("b").pushed, 1);
  EXPECT_EQ(Stats("a").pushed, 1);
  EXPECT_EQ(TakeOne("a", "w").id, a);
}

// ---- order ---------------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, FetchOrderIsPriorityThenFifo) {
  auto r = Push(
      "q", {Job("a0", 0), Job("b5", 5), Job("c0", 0), Job("d5", 5), Job("e-1", -1), Job("f9", 9)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Payloads(Take("q", "w", 2)), (std::vector<std::string>{"f9", "b5"}));
  EXPECT_EQ(Payloads(Take("q", "w", 1)), (std::vector<std::string>{"d5"}));
  EXPECT_EQ(Payloads(Take("q", "w", 10)), (std::vector<std::string>{"a0", "c0", "e-1"}));
  ExpectCounts("q", 0, 0, 6, 0);
}

TEST_P(QueuesConformanceTest, ExtremePrioritiesOrder) {
  ASSERT_TRUE(Push("q", {Job("min", INT32_MIN), Job("zero", 0), Job("max", INT32_MAX)}).ok());
  Deliveries d = Take("q", "w", 3);
  EXPECT_EQ(Payloads(d), (std::vector<std::string>{"max", "zero", "min"}));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].priority, INT32_MAX);
  EXPECT_EQ(d[2].priority, INT32_MIN);
}

TEST_P(QueuesConformanceTest, DelayedJobsBecomeReadyAtTheirTime) {
  ASSERT_TRUE(Push("q", {Job("late", 10, 1'000), Job("now", 0)}).ok());
  ExpectCounts("q", 1, 1, 0, 0);
  EXPECT_EQ(Payloads(Take("q", "w", 10)), (std::vector<std::string>{"now"}));
  AdvanceTime(999);
  EXPECT_TRUE(Take("q", "w").empty());
  ExpectCounts("q", 0, 1, 1, 0);
  AdvanceTime(1);
  ExpectCounts("q", 1, 0, 1, 0);
  Delivery d = TakeOne("q", "w");
  EXPECT_EQ(d.payload, "late");
  EXPECT_EQ(d.attempt, 1);
}

// ---- a queue nobody pushed to --------------------------------------------------------------

TEST_P(QueuesConformanceTest, ReadsOfAQueueNobodyPushedToAnswerEmpty) {
  auto f = Fetch("nobody", "w");
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_TRUE(f->empty());
  QueueStats s = Stats("nobody");
  EXPECT_EQ(s.ready, 0);
  EXPECT_EQ(s.delayed, 0);
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.dead, 0);
  EXPECT_EQ(s.pushed, 0);
  EXPECT_EQ(s.acked, 0);
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(s.expired, 0);
  EXPECT_EQ(s.cancelled, 0);
  EXPECT_EQ(s.workers, 0);
  EXPECT_FALSE(s.paused);
  EXPECT_TRUE(Inflight("nobody").empty());
  EXPECT_TRUE(Inflight("nobody", "w").empty());
  EXPECT_TRUE(Dead("nobody").empty());
  EXPECT_EQ(Requeue("nobody"), 0u);
  EXPECT_EQ(Release("nobody", "w"), 0u);
  auto c = Cancel("nobody", 1);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, CancelOutcome::kUnknown);
  EXPECT_EQ(Ack("nobody", {"1.1.AAAAAAAAAAAAAAAA"}), Outcomes{kInvalid});
  EXPECT_TRUE(List().empty()) << "reads create no queue";
}

TEST_P(QueuesConformanceTest, ListQueuesShowsOnlyQueuesPushedTo) {
  PushOne("b", "1");
  PushOne("a", "2");
  PushOne("a", "3");
  ASSERT_TRUE(Fetch("fetched", "w").ok());
  auto waited = StartFetch("waited", "w", 1, 1'000, 100);
  Heartbeat("beat", "w", 10'000);
  SetPaused("paused", true);
  Stats("read");
  AdvanceTime(100);
  auto w = waited.Get();
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->empty());

  auto list = List();
  std::set<std::string> names;
  for (const auto& [name, stats] : list) {
    names.insert(name);
    ExpectIdentity(stats);
    if (name == "a") {
      EXPECT_EQ(stats.pushed, 2);
    }
    if (name == "b") {
      EXPECT_EQ(stats.ready, 1);
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(list.size(), 2u);
}

// ---- leases --------------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, LeaseExpiresByTimeAloneAndTheJobComesBackWithAttempt2) {
  JobId id = PushOne("q", "job");
  Delivery first = TakeOne("q", "w1", 1'000);
  AdvanceTime(999);
  EXPECT_TRUE(Take("q", "w2").empty());
  ExpectCounts("q", 0, 0, 1, 0);
  AdvanceTime(1);
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_EQ(Stats("q").expired, 1);
  Delivery second = TakeOne("q", "w2");
  EXPECT_EQ(second.id, id);
  EXPECT_EQ(second.attempt, 2);
  EXPECT_EQ(second.payload, "job");
  EXPECT_NE(second.lease, first.lease);
  // The stale worker cannot touch the new delivery.
  EXPECT_EQ(Ack("q", {first.lease}), Outcomes{kLost});
  EXPECT_EQ(Nack("q", {first.lease}), Outcomes{kLost});
  EXPECT_EQ(Extend("q", {first.lease}, 10'000), Outcomes{kLost});
  QueueStats s = Stats("q");
  EXPECT_EQ(s.inflight, 1);
  EXPECT_EQ(s.acked, 0);
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(Ack("q", {second.lease}), Outcomes{kOk});
  ExpectCounts("q", 0, 0, 0, 0);
  EXPECT_EQ(Stats("q").acked, 1);
}

TEST_P(QueuesConformanceTest, ExpiredLeaseIsLostEvenBeforeRedelivery) {
  PushOne("q", "job");
  Delivery d = TakeOne("q", "w", 500);
  AdvanceTime(500);
  EXPECT_EQ(Extend("q", {d.lease}, 1'000), Outcomes{kLost});
  EXPECT_EQ(Ack("q", {d.lease}), Outcomes{kLost});
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_EQ(Stats("q").acked, 0);
}

TEST_P(QueuesConformanceTest, ExpiredJobLeadsItsPriority) {
  ASSERT_TRUE(Push("q", {Job("a"), Job("b"), Job("hi", 1)}).ok());
  EXPECT_EQ(TakeOne("q", "w", 30'000).payload, "hi");
  EXPECT_EQ(TakeOne("q", "w", 1'000).payload, "a");
  AdvanceTime(1'000);
  ASSERT_TRUE(Push("q", {Job("c")}).ok());
  Deliveries d = Take("q", "w", 10);
  EXPECT_EQ(Payloads(d), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0].attempt, 2);
}

TEST_P(QueuesConformanceTest, ExpiryWakesALongPollWithoutAnyCall) {
  PushOne("q", "job");
  Delivery first = TakeOne("q", "w1", 1'000);
  PendingFetch waiting = StartFetch("q", "w2", 1, 30'000, 5'000);
  EXPECT_TRUE(waiting.StillWaiting());
  AdvanceTime(1'000);  // only time moves
  auto r = waiting.Get();
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, first.id);
  EXPECT_EQ((*r)[0].attempt, 2);
  ASSERT_EQ(Inflight("q", "w2").size(), 1u);
  EXPECT_TRUE(Inflight("q", "w1").empty());
}

TEST_P(QueuesConformanceTest, AckOutcomes) {
  ASSERT_TRUE(Push("q", {Job("a"), Job("b")}).ok());
  Deliveries d = Take("q", "w", 2);
  ASSERT_EQ(d.size(), 2u);
  std::string forged = d[0].lease;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  std::string other_delivery =
      std::to_string(d[0].id) + ".999." + d[0].lease.substr(d[0].lease.rfind('.') + 1);
  EXPECT_EQ(Ack("q", {d[0].lease, forged, "garbage", "", other_delivery, "1.2", d[0].lease}),
            (Outcomes{kOk, kInvalid, kInvalid, kInvalid, kInvalid, kInvalid, kOk}));
  QueueStats s = Stats("q");
  EXPECT_EQ(s.acked, 1) << "a repeated ack counts once";
  EXPECT_EQ(s.inflight, 1);
  ExpectIdentity(s);
  EXPECT_EQ(Ack("q", {d[0].lease}), Outcomes{kOk});
  EXPECT_EQ(Stats("q").acked, 1);
  // After the ack, nack and extend of that delivery change nothing.
  EXPECT_NE(Nack("q", {d[0].lease}), Outcomes{kOk});
  EXPECT_NE(Extend("q", {d[0].lease}, 1'000), Outcomes{kOk});
  s = Stats("q");
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(s.acked, 1);
  EXPECT_EQ(Ack("q", {d[1].lease}), Outcomes{kOk});
  ExpectCounts("q", 0, 0, 0, 0);
  EXPECT_EQ(Stats("q").acked, 2);
}

TEST_P(QueuesConformanceTest, FetchAcksItsLeasesFirstWithPerItemOutcomes) {
  ASSERT_TRUE(Push("q", {Job("a"), Job("b"), Job("c")}).ok());
  Delivery a = TakeOne("q", "w");
  std::string forged = a.lease;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  auto r = Await<core::FetchAnswer>([&](auto done) {
    b().Fetch("q",
              {.worker = "w",
               .max = 1,
               .lease_ms = 30'000,
               .wait_ms = 0,
               .ack = {a.lease, forged, a.lease},
               .ack_results = {},
               .hangup = {}},
              done);
  });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->acked, (Outcomes{kOk, kInvalid, kOk})) << "a repeated ack is ok, once";
  EXPECT_EQ(Payloads(r->jobs), (std::vector<std::string>{"b"}));
  QueueStats s = Stats("q");
  EXPECT_EQ(s.acked, 1);
  ExpectCounts("q", 1, 0, 1, 0);
  // Acking the last job while taking nothing more: the fetch still answers its outcomes.
  ASSERT_EQ(r->jobs.size(), 1u);
  auto last = Await<core::FetchAnswer>([&](auto done) {
    b().Fetch("q",
              {.worker = "w",
               .max = 5,
               .lease_ms = 30'000,
               .wait_ms = 0,
               .ack = {r->jobs[0].lease},
               .ack_results = {},
               .hangup = {}},
              done);
  });
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->acked, Outcomes{kOk});
  EXPECT_EQ(Payloads(last->jobs), (std::vector<std::string>{"c"}));
  EXPECT_EQ(Stats("q").acked, 2);
}

TEST_P(QueuesConformanceTest, AFetchThatWaitsHasAckedBeforeItWaits) {
  PushOne("q", "a");
  Delivery a = TakeOne("q", "w");
  auto promise = std::make_shared<std::promise<OpResult<core::FetchAnswer>>>();
  auto future = promise->get_future();
  b().Fetch("q",
            {.worker = "w",
             .max = 1,
             .lease_ms = 30'000,
             .wait_ms = 10'000,
             .ack = {a.lease},
             .ack_results = {},
             .hangup = {}},
            [promise](OpResult<core::FetchAnswer> r) { promise->set_value(std::move(r)); });
  EXPECT_EQ(future.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  QueueStats s = Stats("q");
  EXPECT_EQ(s.acked, 1) << "the ack does not wait for the long poll";
  ExpectCounts("q", 0, 0, 0, 0);
  PushOne("q", "b");
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = future.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->acked, Outcomes{kOk});
  EXPECT_EQ(Payloads(r->jobs), (std::vector<std::string>{"b"}));
}

TEST_P(QueuesConformanceTest, FetchAckOnAQueueNobodyPushedToIsInvalid) {
  auto r = Await<core::FetchAnswer>([&](auto done) {
    b().Fetch("nobody",
              {.worker = "w",
               .max = 1,
               .lease_ms = 30'000,
               .wait_ms = 0,
               .ack = {"1.1.AAAA"},
               .ack_results = {},
               .hangup = {}},
              done);
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->acked, Outcomes{kInvalid});
  EXPECT_TRUE(r->jobs.empty());
}

TEST_P(QueuesConformanceTest, ALeaseOfAnotherQueueIsRefused) {
  PushOne("a", "from-a");
  PushOne("b", "from-b");
  Delivery da = TakeOne("a", "w");
  Delivery db = TakeOne("b", "w");
  ASSERT_EQ(da.id, db.id) << "this test wants the same job id in both queues";
  EXPECT_NE(Ack("b", {da.lease}), Outcomes{kOk});
  EXPECT_NE(Nack("b", {da.lease}), Outcomes{kOk});
  EXPECT_NE(Extend("b", {da.lease}, 1'000), Outcomes{kOk});
  QueueStats s = Stats("b");
  EXPECT_EQ(s.inflight, 1);
  EXPECT_EQ(s.acked, 0);
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(Ack("b", {db.lease}), Outcomes{kOk});
  EXPECT_EQ(Ack("a", {da.lease}), Outcomes{kOk});
}

TEST_P(QueuesConformanceTest, ExtendMovesTheDeadline) {
  PushOne("q", "job");
  int64_t start = NowMs();
  Delivery d = TakeOne("q", "w", 1'000);
  AdvanceTime(800);
  EXPECT_EQ(Extend("q", {d.lease, "bad"}, 1'000), (Outcomes{kOk, kInvalid}));
  auto inflight = Inflight("q", "w");
  ASSERT_EQ(inflight.size(), 1u);
  EXPECT_EQ(inflight[0].lease_expires_ms, start + 1'800);
  AdvanceTime(999);  // past the first deadline
  ExpectCounts("q", 0, 0, 1, 0);
  EXPECT_EQ(Stats("q").expired, 0);
  AdvanceTime(1);
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_EQ(Stats("q").expired, 1);
  EXPECT_EQ(Ack("q", {d.lease}), Outcomes{kLost});
}

TEST_P(QueuesConformanceTest, ExtendCanShortenTheLease) {
  PushOne("q", "job");
  Delivery d = TakeOne("q", "w", 60'000);
  EXPECT_EQ(Extend("q", {d.lease}, 100), Outcomes{kOk});
  AdvanceTime(100);
  ExpectCounts("q", 1, 0, 0, 0);
}

TEST_P(QueuesConformanceTest, NackWithDelayAndWithBackoff) {
  PushOne("q", Job("job", 0, 0, std::nullopt, 10));
  Delivery d1 = TakeOne("q", "w");
  EXPECT_EQ(Nack("q", {d1.lease}, 5'000, "try later"), Outcomes{kOk});
  ExpectCounts("q", 0, 1, 0, 0);
  EXPECT_EQ(Stats("q").nacked, 1);
  EXPECT_EQ(Nack("q", {d1.lease}), Outcomes{kLost}) << "a nacked delivery is over";
  AdvanceTime(4'999);
  EXPECT_TRUE(Take("q", "w").empty());
  AdvanceTime(1);
  Delivery d2 = TakeOne("q", "w");
  EXPECT_EQ(d2.attempt, 2);

  // Without delay_ms: backoff 1 s x 2^(attempt-1) with +-20% jitter.
  EXPECT_EQ(Nack("q", {d2.lease}), Outcomes{kOk});  // attempt 2: 2 s -> 1.6..2.4 s
  AdvanceTime(1'599);
  ExpectCounts("q", 0, 1, 0, 0);
  AdvanceTime(801);
  ExpectCounts("q", 1, 0, 0, 0);
  Delivery d3 = TakeOne("q", "w");
  EXPECT_EQ(d3.attempt, 3);

  // delay_ms 0: ready at once.
  EXPECT_EQ(Nack("q", {d3.lease}, 0), Outcomes{kOk});
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_EQ(TakeOne("q", "w").attempt, 4);
  EXPECT_EQ(Stats("q").nacked, 3);
}

TEST_P(QueuesConformanceTest, FirstBackoffIsAboutOneSecond) {
  PushOne("q", "job");
  Delivery d = TakeOne("q", "w");
  EXPECT_EQ(Nack("q", {d.lease}), Outcomes{kOk});
  AdvanceTime(799);
  ExpectCounts("q", 0, 1, 0, 0);
  AdvanceTime(401);
  ExpectCounts("q", 1, 0, 0, 0);
}

// ---- dead letters --------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, NackedPastMaxAttemptsGoesDeadWithItsLastError) {
  JobId id = PushOne("q", Job(R"(["p"])", 0, 0, std::nullopt, 2));
  Delivery d1 = TakeOne("q", "w");
  EXPECT_EQ(Nack("q", {d1.lease}, 0, "first"), Outcomes{kOk});
  Delivery d2 = TakeOne("q", "w");
  EXPECT_EQ(d2.attempt, 2);
  int64_t failed_at = NowMs();
  EXPECT_EQ(Nack("q", {d2.lease}, 0, "second"), Outcomes{kOk});
  ExpectCounts("q", 0, 0, 0, 1);
  EXPECT_TRUE(Take("q", "w").empty());
  auto dead = Dead("q");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].id, id);
  EXPECT_EQ(dead[0].payload, R"(["p"])");
  EXPECT_EQ(dead[0].attempts, 2);
  EXPECT_EQ(dead[0].error, "second");
  EXPECT_EQ(dead[0].failed_at_ms, failed_at);
  ASSERT_EQ(dead[0].history.size(), 2u);
  EXPECT_EQ(dead[0].history[0].attempt, 1);
  EXPECT_EQ(dead[0].history[0].error, "first");
  EXPECT_EQ(dead[0].history[1].attempt, 2);
  EXPECT_EQ(dead[0].history[1].error, "second");
  QueueStats s = Stats("q");
  EXPECT_EQ(s.nacked, 2);
  EXPECT_EQ(s.dead, 1);
}

TEST_P(QueuesConformanceTest, ExpiredLeasesCountAsFailedAttempts) {
  PushOne("q", Job("job", 0, 0, std::nullopt, 2));
  TakeOne("q", "w", 100);
  AdvanceTime(100);
  EXPECT_EQ(TakeOne("q", "w", 100).attempt, 2);
  AdvanceTime(100);
  ExpectCounts("q", 0, 0, 0, 1);
  QueueStats s = Stats("q");
  EXPECT_EQ(s.expired, 2);
  EXPECT_EQ(s.nacked, 0);
  auto dead = Dead("q");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].attempts, 2);
  EXPECT_FALSE(dead[0].error.empty());
}

TEST_P(QueuesConformanceTest, DefaultMaxAttemptsIsFive) {
  PushOne("q", "job");
  for (int attempt = 1; attempt <= 5; ++attempt) {
    Delivery d = TakeOne("q", "w");
    EXPECT_EQ(d.attempt, attempt);
    EXPECT_EQ(Nack("q", {d.lease}, 0), Outcomes{kOk});
  }
  ExpectCounts("q", 0, 0, 0, 1);
}

TEST_P(QueuesConformanceTest, DeadListHonoursLimitOldestFirst) {
  for (const char* p : {"a", "b", "c"}) {
    PushOne("q", Job(p, 0, 0, std::nullopt, 1));
    Delivery d = TakeOne("q", "w");
    EXPECT_EQ(Nack("q", {d.lease}, 0, p), Outcomes{kOk});
    AdvanceTime(10);
  }
  auto two = Dead("q", 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].payload, "a");
  EXPECT_EQ(two[1].payload, "b");
  EXPECT_LT(two[0].failed_at_ms, two[1].failed_at_ms);
  EXPECT_EQ(Dead("q").size(), 3u);
}

TEST_P(QueuesConformanceTest, RequeueStartsAttemptsOver) {
  std::vector<JobId> ids;
  for (const char* p : {"a", "b", "c"}) {
    ids.push_back(PushOne("q", Job(p, 0, 0, std::nullopt, 1)));
    Delivery d = TakeOne("q", "w");
    EXPECT_EQ(Nack("q", {d.lease}, 0), Outcomes{kOk});
  }
  ExpectCounts("q", 0, 0, 0, 3);
  // Only dead jobs named count; unknown ids and repeats are skipped.
  EXPECT_EQ(Requeue("q", std::vector<JobId>{ids[1], 999, ids[1]}), 1u);
  ExpectCounts("q", 1, 0, 0, 2);
  Delivery again = TakeOne("q", "w");
  EXPECT_EQ(again.id, ids[1]);
  EXPECT_EQ(again.attempt, 1);
  EXPECT_EQ(Requeue("q", std::vector<JobId>{ids[1]}), 0u) << "in flight, not dead";
  EXPECT_EQ(Requeue("q"), 2u);
  ExpectCounts("q", 2, 0, 1, 0);
  EXPECT_EQ(Requeue("q"), 0u);
  Deliveries rest = Take("q", "w", 10);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].attempt, 1);
  EXPECT_EQ(rest[1].attempt, 1);
  EXPECT_TRUE(Dead("q").empty());
}

// ---- cancel --------------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, CancelOutcomes) {
  JobId leased = PushOne("q", "leased");
  JobId delayed = PushOne("q", Job("delayed", 0, 60'000));
  JobId ready = PushOne("q", "ready");
  ASSERT_EQ(TakeOne("q", "w", 120'000).id, leased);
  auto c = Cancel("q", leased);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, CancelOutcome::kInFlight);
  c = Cancel("q", ready);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, CancelOutcome::kCancelled);
  c = Cancel("q", delayed);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, CancelOutcome::kCancelled);
  c = Cancel("q", delayed);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, CancelOutcome::kUnknown);
  c = Cancel("q", 424242);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, CancelOutcome::kUnknown);
  ExpectCounts("q", 0, 0, 1, 0);
  EXPECT_EQ(Stats("q").cancelled, 2);
  AdvanceTime(60'000);
  ExpectCounts("q", 0, 0, 1, 0);  // the cancelled delayed job never comes back
  EXPECT_TRUE(Take("q", "w").empty());
}

TEST_P(QueuesConformanceTest, CancelFreesTheDedupeKey) {
  JobId id = PushOne("q", Job("a", 0, 0, "k"));
  auto c = Cancel("q", id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, CancelOutcome::kCancelled);
  JobId again = PushOne("q", Job("b", 0, 0, "k"));
  EXPECT_NE(again, id);
}

// ---- pause ---------------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, PausedQueueAcceptsPushesAndHandsOutNothing) {
  PushOne("q", "before");
  SetPaused("q", true);
  EXPECT_TRUE(Stats("q").paused);
  PushOne("q", "during");
  EXPECT_TRUE(Take("q", "w", 10).empty());
  ExpectCounts("q", 2, 0, 0, 0);
  PendingFetch waiting = StartFetch("q", "w", 10, 30'000, 10'000);
  EXPECT_TRUE(waiting.StillWaiting());
  SetPaused("q", false);
  EXPECT_FALSE(Stats("q").paused);
  auto r = waiting.Get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Payloads(*r), (std::vector<std::string>{"before", "during"}));
}

TEST_P(QueuesConformanceTest, PauseKeepsLeasesAndTheirExpiry) {
  PushOne("q", "job");
  Delivery d = TakeOne("q", "w", 1'000);
  SetPaused("q", true);
  EXPECT_EQ(Extend("q", {d.lease}, 1'000), Outcomes{kOk});
  AdvanceTime(1'000);
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_TRUE(Take("q", "w").empty());
  SetPaused("q", false);
  EXPECT_EQ(TakeOne("q", "w").attempt, 2);
}

// ---- workers -------------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, InflightByWorker) {
  ASSERT_TRUE(Push("q", {Job("a"), Job("b"), Job("c")}).ok());
  int64_t now = NowMs();
  Deliveries w1 = Take("q", "w1", 2, 10'000);
  Deliveries w2 = Take("q", "w2", 1, 20'000);
  ASSERT_EQ(w1.size(), 2u);
  ASSERT_EQ(w2.size(), 1u);
  auto mine = Inflight("q", "w1");
  ASSERT_EQ(mine.size(), 2u);
  std::set<JobId> ids;
  for (const InflightJob& j : mine) {
    EXPECT_EQ(j.worker, "w1");
    EXPECT_EQ(j.attempt, 1);
    EXPECT_EQ(j.lease_expires_ms, now + 10'000);
    ids.insert(j.id);
  }
  EXPECT_EQ(ids, (std::set<JobId>{w1[0].id, w1[1].id}));
  auto theirs = Inflight("q", "w2");
  ASSERT_EQ(theirs.size(), 1u);
  EXPECT_EQ(theirs[0].id, w2[0].id);
  EXPECT_EQ(theirs[0].worker, "w2");
  EXPECT_EQ(theirs[0].lease_expires_ms, now + 20'000);
  EXPECT_EQ(Inflight("q").size(), 3u);
  EXPECT_TRUE(Inflight("q", "w3").empty());
  EXPECT_EQ(Stats("q").workers, 2);
  EXPECT_EQ(Ack("q", {w1[0].lease}), Outcomes{kOk});
  EXPECT_EQ(Inflight("q", "w1").size(), 1u);
  EXPECT_EQ(Inflight("q").size(), 2u);
  EXPECT_EQ(Ack("q", {w1[1].lease}), Outcomes{kOk});
  EXPECT_TRUE(Inflight("q", "w1").empty());
  EXPECT_EQ(Stats("q").workers, 1);
}

TEST_P(QueuesConformanceTest, ReleaseWorkerReturnsItsJobsAtOnce) {
  ASSERT_TRUE(Push("q", {Job("a"), Job("b"), Job("c"), Job("d")}).ok());
  Deliveries mine = Take("q", "w1", 2);
  Deliveries theirs = Take("q", "w2", 1);
  ASSERT_EQ(mine.size(), 2u);
  ASSERT_EQ(theirs.size(), 1u);
  EXPECT_EQ(Release("q", "w1"), 2u);
  ExpectCounts("q", 3, 0, 1, 0);
  EXPECT_TRUE(Inflight("q", "w1").empty());
  EXPECT_EQ(Inflight("q", "w2").size(), 1u);
  EXPECT_EQ(Ack("q", {mine[0].lease}), Outcomes{kLost});
  // Back at the head of their priority, in their order, each a failed attempt.
  Deliveries again = Take("q", "w3", 10);
  EXPECT_EQ(Payloads(again), (std::vector<std::string>{"a", "b", "d"}));
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].attempt, 2);
  EXPECT_EQ(again[1].attempt, 2);
  EXPECT_EQ(again[2].attempt, 1);
  EXPECT_EQ(Release("q", "w1"), 0u);
  EXPECT_EQ(Release("q", "nobody"), 0u);
  EXPECT_EQ(Ack("q", {theirs[0].lease}), Outcomes{kOk});
}

// A worker that starts again under its name takes back what it held, before any other job:
// each a new attempt, the old leases void, what does not fit `max` back at the head of the line.
TEST_P(QueuesConformanceTest, ReclaimTakesBackTheWorkersOwnJobsFirst) {
  ASSERT_TRUE(Push("q", {Job("a"), Job("b"), Job("c"), Job("d"), Job("e")}).ok());
  Deliveries before = Take("q", "w1", 3);
  ASSERT_EQ(Payloads(before), (std::vector<std::string>{"a", "b", "c"}));
  Delivery theirs = TakeOne("q", "w2");
  ASSERT_TRUE(Push("q", {Job("urgent", 9)}).ok());  // would come first to any other fetch

  core::FetchAnswer back = Reclaim("q", "w1", 2);
  EXPECT_EQ(back.reclaimed, 2u);
  EXPECT_EQ(Payloads(back.jobs), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(back.jobs.size(), 2u);
  EXPECT_EQ(back.jobs[0].attempt, 2);
  EXPECT_EQ(back.jobs[1].attempt, 2);
  EXPECT_EQ(Ack("q", {before[0].lease, before[2].lease}), (Outcomes{kLost, kLost}));
  ExpectCounts("q", 3, 0, 3, 0);
  EXPECT_EQ(Stats("q").expired, 3);
  EXPECT_EQ(Inflight("q", "w1").size(), 2u);
  // The one that did not fit leads its priority; the other worker's job is untouched.
  EXPECT_EQ(Payloads(Take("q", "w3", 10)), (std::vector<std::string>{"urgent", "c", "e"}));
  EXPECT_EQ(Ack("q", {theirs.lease, back.jobs[0].lease}), (Outcomes{kOk, kOk}));

  // Nothing held: an ordinary fetch. Room left after the worker's own: filled from the line.
  ASSERT_TRUE(Push("q", {Job("f"), Job("g")}).ok());
  core::FetchAnswer none = Reclaim("q", "fresh", 1);
  EXPECT_EQ(none.reclaimed, 0u);
  EXPECT_EQ(Payloads(none.jobs), (std::vector<std::string>{"f"}));
  core::FetchAnswer mixed = Reclaim("q", "fresh", 5);
  EXPECT_EQ(mixed.reclaimed, 1u);
  EXPECT_EQ(Payloads(mixed.jobs), (std::vector<std::string>{"f", "g"}));
  EXPECT_EQ(mixed.jobs[0].attempt, 2);
  EXPECT_EQ(mixed.jobs[1].attempt, 1);
}

TEST_P(QueuesConformanceTest, ReclaimOnTheLastAttemptBuriesAndPausedHandsNothing) {
  ASSERT_TRUE(Push("q", {Job("once", 0, 0, std::nullopt, 1), Job("more")}).ok());
  Deliveries held = Take("q", "w", 2);
  ASSERT_EQ(held.size(), 2u);
  SetPaused("q", true);
  core::FetchAnswer back = Reclaim("q", "w", 10);
  EXPECT_EQ(back.reclaimed, 0u);
  EXPECT_TRUE(back.jobs.empty());
  ExpectCounts("q", 1, 0, 0, 1);  // released all the same: a paused queue hands out nothing
  std::vector<DeadJob> dead = Dead("q");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].payload, "once");
}

TEST_P(QueuesConformanceTest, SilentWorkerIsDeadBeforeItsLeaseRunsOut) {
  PushOne("q", "job");
  Heartbeat("q", "w", 2'000);
  Delivery d = TakeOne("q", "w", 60'000);
  EXPECT_EQ(Stats("q").workers, 1);
  AdvanceTime(1'999);
  ExpectCounts("q", 0, 0, 1, 0);
  AdvanceTime(1);  // silent past its ttl, 58 s before the lease deadline
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_EQ(Ack("q", {d.lease}), Outcomes{kLost});
  Delivery again = TakeOne("q", "other");
  EXPECT_EQ(again.id, d.id);
  EXPECT_EQ(again.attempt, 2);
}

// Workers silent since the same ms die in name order, each returning its jobs to the head, on
// every backend (RedisDifferentialTest, seed 5: the embedded backend went by slot order).
TEST_P(QueuesConformanceTest, WorkersSilentAtTheSameMsDieInNameOrder) {
  JobId first = PushOne("q", "first");
  JobId second = PushOne("q", "second");
  Heartbeat("q", "b", 2'000);  // registered first, named last
  Heartbeat("q", "a", 2'000);
  Delivery of_b = TakeOne("q", "b", 60'000);
  Delivery of_a = TakeOne("q", "a", 60'000);
  ASSERT_EQ(of_b.id, first);
  ASSERT_EQ(of_a.id, second);
  AdvanceTime(2'000);
  ExpectCounts("q", 2, 0, 0, 0);
  Deliveries again = Take("q", "c", 2);
  ASSERT_EQ(again.size(), 2u);
  // "a" died first, then "b" put its job ahead of it.
  EXPECT_EQ(again[0].id, first);
  EXPECT_EQ(again[1].id, second);
}

TEST_P(QueuesConformanceTest, HeartbeatsKeepAWorkerAlive) {
  PushOne("q", "job");
  Heartbeat("q", "w", 2'000);
  Delivery d = TakeOne("q", "w", 60'000);
  for (int i = 0; i < 5; ++i) {
    AdvanceTime(1'500);
    Heartbeat("q", "w", 2'000);
  }
  ExpectCounts("q", 0, 0, 1, 0);
  EXPECT_EQ(Stats("q").workers, 1);
  AdvanceTime(2'000);
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_EQ(Ack("q", {d.lease}), Outcomes{kLost});
}

// Anyone with the queue key may heartbeat in any worker's name: a short ttl must not end
// that worker's leases.
TEST_P(QueuesConformanceTest, AHeartbeatNeverShortensAWorkersDeadline) {
  PushOne("q", Job("job", 0, 0, std::nullopt, 1));
  Heartbeat("q", "victim", 600'000);
  Delivery d = TakeOne("q", "victim", 600'000);
  Heartbeat("q", "victim", 1);
  AdvanceTime(5'000);
  ExpectCounts("q", 0, 0, 1, 0);
  EXPECT_EQ(Stats("q").workers, 1);
  EXPECT_EQ(Ack("q", {d.lease}), Outcomes{kOk});
  EXPECT_TRUE(Dead("q").empty());
}

// A worker's nacks must not grow a job's record without bound, on any backend.
TEST_P(QueuesConformanceTest, NackErrorsAreBoundedAndOnlyTheLastAttemptsKept) {
  PushOne("q", Job("job", 0, 0, std::nullopt, 12));
  const std::string huge(256 * 1024, 'e');
  for (int attempt = 1; attempt <= 12; ++attempt) {
    Delivery d = TakeOne("q", "w");
    ASSERT_EQ(d.attempt, attempt);
    EXPECT_EQ(Nack("q", {d.lease}, 0, std::to_string(attempt) + ":" + huge), Outcomes{kOk});
  }
  std::vector<DeadJob> dead = Dead("q");
  ASSERT_EQ(dead.size(), 1u);
  ASSERT_EQ(dead[0].history.size(), core::kKeptAttempts);
  EXPECT_EQ(dead[0].history.front().attempt, 3);
  EXPECT_EQ(dead[0].history.back().attempt, 12);
  for (const core::FailedAttempt& f : dead[0].history) {
    EXPECT_LE(f.error.size(), core::kMaxErrorBytes);
    EXPECT_TRUE(f.error.starts_with(std::to_string(f.attempt) + ":eee"));
    EXPECT_TRUE(f.error.ends_with(" bytes]")) << f.error.substr(f.error.size() - 40);
  }
  EXPECT_EQ(dead[0].error, dead[0].history.back().error);
}

TEST_P(QueuesConformanceTest, HeartbeatDeathWakesALongPoll) {
  PushOne("q", "job");
  Heartbeat("q", "dying", 1'000);
  Delivery d = TakeOne("q", "dying", 60'000);
  PendingFetch waiting = StartFetch("q", "alive", 1, 30'000, 30'000);
  EXPECT_TRUE(waiting.StillWaiting());
  AdvanceTime(1'000);
  auto r = waiting.Get();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].id, d.id);
  EXPECT_EQ((*r)[0].attempt, 2);
}

TEST_P(QueuesConformanceTest, WorkersCountsLiveHeartbeats) {
  PushOne("q", "job");
  Heartbeat("q", "a", 1'000);
  Heartbeat("q", "b", 5'000);
  EXPECT_EQ(Stats("q").workers, 2);
  AdvanceTime(1'000);
  EXPECT_EQ(Stats("q").workers, 1);
  AdvanceTime(4'000);
  EXPECT_EQ(Stats("q").workers, 0);
}

// Names as an attack: heartbeats and long polls on names nobody pushed to made a queue each
// (logged, back after a restart). A name that holds nothing is not kept.
TEST_P(QueuesConformanceTest, NamesNobodyPushedToKeepNothing) {
  for (int i = 0; i < 50; ++i) Heartbeat("junk" + std::to_string(i), "w", 60'000);
  EXPECT_EQ(Stats("junk7").workers, 0);
  PendingFetch poll = StartFetch("polled", "w", 1, 30'000, 1'000);
  EXPECT_TRUE(poll.StillWaiting());
  Heartbeat("polled", "w", 60'000);  // a long poll alone does not make the name hold anything
  AdvanceTime(1'000);
  auto r = poll.Get();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->empty());
  EXPECT_TRUE(List().empty()) << "listed: " << List().size();
  EXPECT_EQ(Stats("polled").workers, 0);
  // A long poll on a fresh name still gets the first push there.
  PendingFetch first = StartFetch("fresh", "w", 1, 30'000, 10'000);
  PushOne("fresh", "hello");
  auto got = first.Get();
  ASSERT_TRUE(got.ok()) << got.message();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ(Stats("fresh").workers, 1) << "its fetch registered the worker";
  Heartbeat("fresh", "w2", 60'000);
  EXPECT_EQ(Stats("fresh").workers, 2) << "heartbeats count once the queue holds something";
}

// A paused name holds something (the pause); once resumed, with no worker left, it holds
// nothing again and is forgotten: later heartbeats there keep nothing (found by
// RedisDifferentialTest, seed 4271496043: Redis kept the resumed name and its heartbeats).
TEST_P(QueuesConformanceTest, ANameResumedAndLeftByItsWorkersKeepsNothing) {
  SetPaused("p", true);
  SetPaused("p", false);
  Heartbeat("p", "w", 60'000);
  EXPECT_EQ(Stats("p").workers, 0);
  EXPECT_TRUE(List().empty()) << "listed: " << List().size();

  SetPaused("held", true);
  Heartbeat("held", "w", 2'000);
  EXPECT_EQ(Stats("held").workers, 1) << "a paused queue holds something: its heartbeats count";
  SetPaused("held", false);
  EXPECT_EQ(Stats("held").workers, 1) << "the live worker keeps the name";
  AdvanceTime(2'000);
  EXPECT_EQ(Stats("held").workers, 0);
  Heartbeat("held", "w", 60'000);
  EXPECT_EQ(Stats("held").workers, 0) << "silent, then nothing held: the name was forgotten";
}

// ---- a queue's own key (Backend::SetQueueKey) ------------------------------------------------

// A SHA-256 digest as the server keeps it: 32 raw bytes, NULs and high bytes included.
std::string Digest(uint8_t seed) {
  std::string d(kQueueKeyDigestBytes, '\0');
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<char>(seed * 37 + i * 101);
  return d;
}

TEST_P(QueuesConformanceTest, QueueKeySetReplacedAndRemoved) {
  EXPECT_EQ(GetKey("q"), std::nullopt);
  ASSERT_TRUE(SetKey("q", Digest(1)).ok());
  EXPECT_EQ(GetKey("q"), Digest(1));
  EXPECT_EQ(GetKey("other"), std::nullopt) << "keys are per queue";
  ASSERT_TRUE(SetKey("q", Digest(1)).ok()) << "the same key again";
  EXPECT_EQ(GetKey("q"), Digest(1));
  ASSERT_TRUE(SetKey("q", Digest(2)).ok());
  EXPECT_EQ(GetKey("q"), Digest(2)) << "replaced";
  ASSERT_TRUE(SetKey("q", std::nullopt).ok());
  EXPECT_EQ(GetKey("q"), std::nullopt) << "removed";
  EXPECT_TRUE(SetKey("q", std::nullopt).ok()) << "removing no key";
  EXPECT_TRUE(SetKey("never", std::nullopt).ok()) << "removing the key of no queue";
  EXPECT_EQ(GetKey("never"), std::nullopt);
  EXPECT_TRUE(List().empty()) << "removing keys creates no queue";
  // Only a SHA-256 digest is kept: anything else is a caller's mistake, refused unkept.
  for (std::string wrong : {std::string(), std::string(31, 'x'), std::string(64, 'a')}) {
    EXPECT_EQ(SetKey("q", wrong).status(), OpStatus::kInvalidArgument) << wrong.size();
  }
  EXPECT_EQ(GetKey("q"), std::nullopt);
}

TEST_P(QueuesConformanceTest, QueueKeyMakesAQueueThatIsListedAndNeverForgottenWhileEmpty) {
  ASSERT_TRUE(SetKey("k", Digest(3)).ok());
  auto list = List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].first, "k");
  EXPECT_EQ(list[0].second.pushed, 0);
  ExpectCounts("k", 0, 0, 0, 0);
  // What forgets a name that holds nothing: heartbeats, a worker gone silent, a long poll
  // ending, time passing. The key keeps the queue through all of them.
  Heartbeat("k", "w", 2'000);
  EXPECT_EQ(Stats("k").workers, 1) << "a queue with a key holds something: heartbeats count";
  AdvanceTime(2'000);
  EXPECT_EQ(Stats("k").workers, 0);
  PendingFetch poll = StartFetch("k", "w", 1, 30'000, 1'000);
  EXPECT_TRUE(poll.StillWaiting());
  AdvanceTime(1'000);
  auto r = poll.Get();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->empty());
  SetPaused("k", true);
  SetPaused("k", false);
  AdvanceTime(60'000);
  EXPECT_EQ(GetKey("k"), Digest(3));
  EXPECT_EQ(ListedNames(), (std::set<std::string>{"k"}));
  // Jobs come and go; the key stays.
  PushOne("k", "job");
  ASSERT_EQ(Ack("k", {TakeOne("k", "w").lease}), Outcomes{kOk});
  EXPECT_EQ(GetKey("k"), Digest(3));

  // A key on a queue that held nothing else: removed, the name holds nothing and is forgotten.
  ASSERT_TRUE(SetKey("bare", Digest(4)).ok());
  EXPECT_EQ(ListedNames(), (std::set<std::string>{"bare", "k"}));
  ASSERT_TRUE(SetKey("bare", std::nullopt).ok());
  EXPECT_EQ(ListedNames(), (std::set<std::string>{"k"}));
  Heartbeat("bare", "w", 60'000);
  EXPECT_EQ(Stats("bare").workers, 0) << "forgotten with its key: heartbeats keep nothing";
  // A queue pushed to stays listed without its key.
  ASSERT_TRUE(SetKey("k", std::nullopt).ok());
  EXPECT_EQ(ListedNames(), (std::set<std::string>{"k"}));
  EXPECT_EQ(Stats("k").pushed, 1);
}

TEST_P(QueuesConformanceTest, QueueKeyCreatesQueuesWithinMaxQueues) {
  Remake({.max_queues = 2});
  PushOne("a", "1");
  ASSERT_TRUE(SetKey("b", Digest(1)).ok()) << "the second queue";
  EXPECT_EQ(SetKey("c", Digest(1)).status(), OpStatus::kLimitReached);
  EXPECT_EQ(Push("c", {Job("x")}).status(), OpStatus::kLimitReached);
  EXPECT_EQ(GetKey("c"), std::nullopt) << "a refused key is not kept";
  EXPECT_EQ(ListedNames(), (std::set<std::string>{"a", "b"}));
  EXPECT_TRUE(SetKey("a", Digest(2)).ok()) << "a key for an existing queue";
  EXPECT_TRUE(SetKey("b", Digest(3)).ok()) << "a key replaced";
  EXPECT_TRUE(SetKey("a", std::nullopt).ok());
  EXPECT_EQ(SetKey("c", Digest(1)).status(), OpStatus::kLimitReached)
      << "a queue pushed to still counts without its key";
  // b held only its key: without it, b no longer counts, and c fits.
  ASSERT_TRUE(SetKey("b", std::nullopt).ok());
  ASSERT_TRUE(SetKey("c", Digest(4)).ok());
  EXPECT_TRUE(Push("c", {Job("x")}).ok()) << "a queue with a key counts once";
  EXPECT_EQ(Push("b", {Job("x")}).status(), OpStatus::kLimitReached);
  EXPECT_EQ(ListedNames(), (std::set<std::string>{"a", "c"}));
}

// Kept across a restart: from the log alone, and (log backends) from a snapshot plus the log.
TEST_P(QueuesConformanceTest, QueueKeySurvivesARestart) {
  ASSERT_TRUE(SetKey("kept", Digest(1)).ok());
  ASSERT_TRUE(SetKey("replaced", Digest(2)).ok());
  ASSERT_TRUE(SetKey("removed", Digest(3)).ok());
  PushOne("pushed", "x");
  ASSERT_TRUE(SetKey("pushed", Digest(4)).ok());
  auto* durable = dynamic_cast<conformance::DurableHarness*>(harness_.get());
  if (durable) durable->Compact();  // the keys so far come back from the snapshot
  ASSERT_TRUE(SetKey("replaced", Digest(5)).ok());
  ASSERT_TRUE(SetKey("removed", std::nullopt).ok());
  ASSERT_TRUE(SetKey("pushed", std::nullopt).ok());
  ASSERT_TRUE(SetKey("late", Digest(6)).ok());
  if (!harness_->Restart()) GTEST_SKIP() << GetParam().name << " keeps nothing across restarts";
  auto expect_kept = [&] {
    EXPECT_EQ(GetKey("kept"), Digest(1));
    EXPECT_EQ(GetKey("replaced"), Digest(5));
    EXPECT_EQ(GetKey("removed"), std::nullopt);
    EXPECT_EQ(GetKey("pushed"), std::nullopt);
    EXPECT_EQ(GetKey("late"), Digest(6));
    EXPECT_EQ(ListedNames(), (std::set<std::string>{"kept", "late", "pushed", "replaced"}));
  };
  expect_kept();
  AdvanceTime(1'000);
  ASSERT_TRUE(harness_->Restart());  // after a restart that replayed them
  expect_kept();
}

// ---- long polls ----------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, LongPollAnswersWhenAJobIsPushed) {
  PendingFetch waiting = StartFetch("q", "w", 5, 30'000, 10'000);
  EXPECT_TRUE(waiting.StillWaiting());
  PushOne("other", "elsewhere");
  EXPECT_TRUE(waiting.StillWaiting()) << "a push to another queue wakes nobody here";
  AdvanceTime(5'000);
  EXPECT_TRUE(waiting.StillWaiting());
  ASSERT_TRUE(Push("q", {Job("a"), Job("b")}).ok());
  auto r = waiting.Get();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(Payloads(*r), (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].attempt, 1);
  EXPECT_EQ((*r)[0].lease_expires_ms, NowMs() + 30'000);
  ExpectCounts("q", 0, 0, 2, 0);
  EXPECT_EQ(Inflight("q", "w").size(), 2u);
  EXPECT_EQ(Ack("q", {(*r)[0].lease, (*r)[1].lease}), (Outcomes{kOk, kOk}));
}

TEST_P(QueuesConformanceTest, LongPollAnswersEmptyAtItsDeadline) {
  PendingFetch waiting = StartFetch("q", "w", 1, 30'000, 300);
  EXPECT_TRUE(waiting.StillWaiting());
  AdvanceTime(299);
  EXPECT_TRUE(waiting.StillWaiting());
  AdvanceTime(1);
  auto r = waiting.Get();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->empty());
  // A job pushed afterwards is not taken by the finished poll.
  PushOne("q", "later");
  ExpectCounts("q", 1, 0, 0, 0);
}

TEST_P(QueuesConformanceTest, LongPollTakesADelayedJobWhenItIsDue) {
  PushOne("q", Job("soon", 0, 500));
  PendingFetch waiting = StartFetch("q", "w", 1, 30'000, 2'000);
  EXPECT_TRUE(waiting.StillWaiting());
  AdvanceTime(500);
  auto r = waiting.Get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Payloads(*r), (std::vector<std::string>{"soon"}));
}

TEST_P(QueuesConformanceTest, LongPollsAreServedInTheOrderTheyStarted) {
  PendingFetch first = StartFetch("q", "first", 1, 30'000, 10'000);
  AdvanceTime(10);
  PendingFetch second = StartFetch("q", "second", 1, 30'000, 10'000);
  AdvanceTime(10);
  PendingFetch third = StartFetch("q", "third", 1, 30'000, 10'000);
  EXPECT_TRUE(first.StillWaiting());
  PushOne("q", "1");
  auto r1 = first.Get();
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(Payloads(*r1), (std::vector<std::string>{"1"}));
  EXPECT_TRUE(second.StillWaiting());
  EXPECT_TRUE(third.StillWaiting());
  PushOne("q", "2");
  auto r2 = second.Get();
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(Payloads(*r2), (std::vector<std::string>{"2"}));
  EXPECT_TRUE(third.StillWaiting());
  PushOne("q", "3");
  auto r3 = third.Get();
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(Payloads(*r3), (std::vector<std::string>{"3"}));
  EXPECT_EQ(Inflight("q", "first").size(), 1u);
  EXPECT_EQ(Inflight("q", "second").size(), 1u);
  EXPECT_EQ(Inflight("q", "third").size(), 1u);
}

TEST_P(QueuesConformanceTest, ExpiredLongPollGivesWayToTheNext) {
  PendingFetch short_poll = StartFetch("q", "short", 1, 30'000, 100);
  PendingFetch long_poll = StartFetch("q", "long", 1, 30'000, 10'000);
  AdvanceTime(100);
  auto r = short_poll.Get();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  EXPECT_TRUE(long_poll.StillWaiting());
  PushOne("q", "job");
  auto l = long_poll.Get();
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(Payloads(*l), (std::vector<std::string>{"job"}));
  EXPECT_TRUE(Inflight("q", "short").empty());
}

// ---- long polls whose client hung up -------------------------------------------------------

// No job for a long poll whose client is gone: it leaves the line at once, answered with no job,
// and the next waiter takes the job as a first attempt.
TEST_P(QueuesConformanceTest, HungUpLongPollLeavesTheLineAndTheNextWaiterTakesTheJob) {
  auto hangup = std::make_shared<Hangup>();
  PendingFetch gone = StartFetch("q", "gone", 1, 30'000, 10'000, hangup);
  EXPECT_TRUE(gone.StillWaiting());
  PendingFetch live = StartFetch("q", "live", 1, 30'000, 10'000);
  EXPECT_TRUE(live.StillWaiting());
  hangup->Signal();
  auto g = gone.Get();
  EXPECT_TRUE(!g.ok() || g->empty()) << "a job for a client that hung up";
  EXPECT_TRUE(live.StillWaiting());
  PushOne("q", "job");
  auto l = live.Get();
  ASSERT_TRUE(l.ok()) << l.message();
  ASSERT_EQ(Payloads(*l), (std::vector<std::string>{"job"}));
  EXPECT_EQ((*l)[0].attempt, 1);
  EXPECT_TRUE(Inflight("q", "gone").empty());
  EXPECT_EQ(Inflight("q", "live").size(), 1u);
  ExpectCounts("q", 0, 0, 1, 0);
  EXPECT_EQ(Ack("q", {(*l)[0].lease}), Outcomes{kOk});
}

TEST_P(QueuesConformanceTest, AJobPushedAfterAHangUpGoesToTheNextFetch) {
  auto hangup = std::make_shared<Hangup>();
  PendingFetch gone = StartFetch("q", "gone", 5, 30'000, 10'000, hangup);
  EXPECT_TRUE(gone.StillWaiting());
  hangup->Signal();
  PushOne("q", "job");  // perhaps before the drop is done: the waiter is skipped all the same
  auto g = gone.Get();
  EXPECT_TRUE(!g.ok() || g->empty()) << "a job for a client that hung up";
  Delivery d = TakeOne("q", "live");
  EXPECT_EQ(d.payload, "job");
  EXPECT_EQ(d.attempt, 1);
  EXPECT_EQ(Stats("q").expired, 0);
  EXPECT_TRUE(Inflight("q", "gone").empty());
}

TEST_P(QueuesConformanceTest, AFetchWhoseClientHungUpBeforeItParksIsAnsweredWithNoJob) {
  auto hangup = std::make_shared<Hangup>();
  hangup->Signal();
  PendingFetch gone = StartFetch("q", "gone", 1, 30'000, 10'000, hangup);
  auto g = gone.Get();
  EXPECT_TRUE(!g.ok() || g->empty()) << "a job for a client that hung up";
  PushOne("q", "job");
  Delivery d = TakeOne("q", "live");
  EXPECT_EQ(d.payload, "job");
  EXPECT_EQ(d.attempt, 1);
  EXPECT_TRUE(Inflight("q", "gone").empty());
  // Not even a ready job goes to it.
  auto again = StartFetch("q", "gone", 1, 30'000, 10'000, hangup).Get();
  EXPECT_TRUE(!again.ok() || again->empty());
  PushOne("q", "second");
  EXPECT_EQ(TakeOne("q", "live").attempt, 1);
}

// Hang-ups at random moments around pushes and parks (on Redis, also while fetch scripts are
// out): whatever a hung-up waiter's completion did not receive is back in the queue at once,
// not leased until its lease ends, and every job taken is a first attempt.
TEST_P(QueuesConformanceTest, HangUpsAtRandomMomentsLeaseNothingThatNobodyReceived) {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    std::string q = "q" + std::to_string(round);
    std::vector<std::shared_ptr<Hangup>> hangups;
    std::vector<PendingFetch> polls;
    for (int i = 0; i < 3; ++i) {
      hangups.push_back(std::make_shared<Hangup>());
      polls.push_back(StartFetch(q, "w" + std::to_string(i), 1, 30'000, 10'000, hangups.back()));
    }
    if (round % 2 == 0) PushOne(q, "early");
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2'000));
    std::thread signaller([&hangups, delay = rng() % 1'500] {
      std::this_thread::sleep_for(std::chrono::microseconds(delay));
      for (auto& h : hangups) h->Signal();
    });
    PushOne(q, "a");
    PushOne(q, "b");
    signaller.join();
    int64_t received = 0;
    for (auto& p : polls) {
      // Every client hung up: no poll may wait for its deadline.
      if (p.StillWaiting(2'000)) return ADD_FAILURE() << "round " << round << ": still parked";
      auto r = p.Get();
      if (!r.ok()) continue;
      for (const Delivery& d : *r) {
        EXPECT_EQ(d.attempt, 1) << "round " << round;
        ++received;
      }
    }
    QueueStats s = Stats(q);
    EXPECT_EQ(s.inflight, received) << "round " << round << ": leased, and received by nobody";
    EXPECT_EQ(s.ready, s.pushed - received) << "round " << round;
    Deliveries rest = Take(q, "live", 10);
    EXPECT_EQ(static_cast<int64_t>(rest.size()), s.ready) << "round " << round;
    for (const Delivery& d : rest) EXPECT_EQ(d.attempt, 1) << "round " << round;
  }
}

// ---- accounting ----------------------------------------------------------------------------

TEST_P(QueuesConformanceTest, AccountingIdentityHoldsThroughEveryTransition) {
  auto pushed = Push("q", {Job("ack"), Job("nack", 0, 0, std::nullopt, 1), Job("expire"),
                           Job("cancel"), Job("delayed", 0, 10'000), Job("ready", -5)});
  ASSERT_TRUE(pushed.ok());
  ExpectCounts("q", 5, 1, 0, 0);
  Deliveries d = Take("q", "w", 3, 1'000);
  ASSERT_EQ(Payloads(d), (std::vector<std::string>{"ack", "nack", "expire"}));
  ExpectCounts("q", 2, 1, 3, 0);
  EXPECT_EQ(Ack("q", {d[0].lease, d[0].lease}), (Outcomes{kOk, kOk}));
  ExpectCounts("q", 2, 1, 2, 0);
  EXPECT_EQ(Nack("q", {d[1].lease}, 0, "bad"), Outcomes{kOk});
  ExpectCounts("q", 2, 1, 1, 1);
  auto c = Cancel("q", (*pushed)[3].id);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, CancelOutcome::kCancelled);
  ExpectCounts("q", 1, 1, 1, 1);
  AdvanceTime(1'000);
  ExpectCounts("q", 2, 1, 0, 1);
  AdvanceTime(9'000);
  ExpectCounts("q", 3, 0, 0, 1);
  EXPECT_EQ(Requeue("q"), 1u);
  ExpectCounts("q", 4, 0, 0, 0);
  Deliveries rest = Take("q", "w", 10);
  ASSERT_EQ(rest.size(), 4u);
  ExpectCounts("q", 0, 0, 4, 0);
  std::vector<std::string> leases;
  for (const Delivery& r : rest) leases.push_back(r.lease);
  EXPECT_EQ(Ack("q", leases), Outcomes(4, kOk));
  ExpectCounts("q", 0, 0, 0, 0);
  QueueStats s = Stats("q");
  EXPECT_EQ(s.pushed, 6);
  EXPECT_EQ(s.acked, 5);
  EXPECT_EQ(s.cancelled, 1);
  EXPECT_EQ(s.nacked, 1);
  EXPECT_EQ(s.expired, 1);
  EXPECT_EQ(s.workers, 0);
}

TEST_P(QueuesConformanceTest, QueuesAreIndependent) {
  PushOne("one", "1");
  PushOne("two", "2");
  Delivery d = TakeOne("one", "w", 1'000);
  SetPaused("two", true);
  AdvanceTime(1'000);
  ExpectCounts("one", 1, 0, 0, 0);
  ExpectCounts("two", 1, 0, 0, 0);
  EXPECT_TRUE(Stats("two").paused);
  EXPECT_FALSE(Stats("one").paused);
  EXPECT_TRUE(Take("two", "w").empty());
  EXPECT_EQ(TakeOne("one", "w").attempt, 2);
  EXPECT_EQ(Stats("two").expired, 0);
  EXPECT_NE(Ack("two", {d.lease}), Outcomes{kOk}) << "one's lease on two";
}

// ---- groups, limits and fairness -------------------------------------------------------------

TEST_P(QueuesConformanceTest, SettingsAreTheDefaultsUntilSetAndReadBackAsSet) {
  EXPECT_EQ(GetSettings("q"), core::QueueSettings{});
  EXPECT_TRUE(ListedNames().empty());
  core::QueueLimits limits =
      Limits(kRoundRobin, Limit(Rate(10, 1'000, 3), 2), Limit(std::nullopt, 7));
  Configure("q", limits);
  EXPECT_EQ(GetSettings("q").limits, limits);
  EXPECT_EQ(ListedNames(), std::set<std::string>{"q"}) << "settings make the queue";
  Configure("q", {});
  EXPECT_EQ(GetSettings("q"), core::QueueSettings{});
  EXPECT_EQ(GetSettings("other"), core::QueueSettings{});
}

TEST_P(QueuesConformanceTest, SettingsCreateQueuesWithinMaxQueues) {
  Remake({.max_queues = 1});
  PushOne("a", "1");
  auto r = SetSettings("b", core::QueueSettings{Limits(kFifo, Limit(std::nullopt, 1)), {}});
  EXPECT_EQ(r.status(), OpStatus::kLimitReached);
  EXPECT_EQ(GetSettings("b"), core::QueueSettings{});
  EXPECT_TRUE(
      SetSettings("a", core::QueueSettings{Limits(kFifo, Limit(std::nullopt, 1)), {}}).ok());
}

TEST_P(QueuesConformanceTest, AJobsGroupTravelsWithItsDelivery) {
  PushOne("q", Grouped("1", "acme"));
  PushOne("q", "2");
  Deliveries d = Take("q", "w", 2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].group, "acme");
  EXPECT_EQ(d[1].group, "");
}

TEST_P(QueuesConformanceTest, FifoAcrossGroupsIsPriorityThenPushOrder) {
  Configure("q", Limits(kFifo, Limit(std::nullopt, 10)));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("b1", "b"));
  PushOne("q", Grouped("a2", "a"));
  PushOne("q", "u1");
  PushOne("q", Grouped("b2", "b", 5));
  EXPECT_EQ(Payloads(Take("q", "w", 10)), (std::vector<std::string>{"b2", "a1", "b1", "a2", "u1"}));
}

TEST_P(QueuesConformanceTest, PerGroupConcurrencyHoldsAGroupBackWithoutUsingAnAttempt) {
  Configure("q", Limits(kFifo, Limit(std::nullopt, 1)));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a"));
  PushOne("q", Grouped("b1", "b"));
  PushOne("q", "u1");
  PushOne("q", "u2");
  Deliveries first = Take("q", "w", 10);
  EXPECT_EQ(Payloads(first), (std::vector<std::string>{"a1", "b1", "u1", "u2"}))
      << "ungrouped jobs are exempt from per-group limits";
  ExpectCounts("q", 1, 0, 4, 0);
  EXPECT_TRUE(Take("q", "w", 10).empty());
  EXPECT_EQ(Ack("q", {first[0].lease}), Outcomes{kOk});
  Delivery a2 = TakeOne("q", "w");
  EXPECT_EQ(a2.payload, "a2");
  EXPECT_EQ(a2.attempt, 1) << "being held back is no attempt";
}

TEST_P(QueuesConformanceTest, ConcurrencyIsKeptWhenAWorkerDies) {
  Configure("q", Limits(kFifo, Limit(std::nullopt, 1)));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a"));
  Delivery a1 = TakeOne("q", "w", 1'000);
  EXPECT_TRUE(Take("q", "v", 5).empty());
  AdvanceTime(1'000);  // w's lease runs out: a1 goes back to the head of its group
  Deliveries again = Take("q", "v", 5);
  ASSERT_EQ(again.size(), 1u) << "one at a time, even after a death";
  EXPECT_EQ(again[0].payload, "a1");
  EXPECT_EQ(again[0].attempt, 2);
  EXPECT_EQ(Ack("q", {a1.lease}), Outcomes{kLost});
  EXPECT_TRUE(Take("q", "v", 5).empty());
}

TEST_P(QueuesConformanceTest, QueueWideConcurrencyHoldsEveryJob) {
  Configure("q", Limits(kFifo, {}, Limit(std::nullopt, 2)));
  for (int i = 0; i < 3; ++i) PushOne("q", "j" + std::to_string(i));
  PushOne("q", Grouped("g", "a"));
  Deliveries d = Take("q", "w", 10);
  EXPECT_EQ(d.size(), 2u);
  EXPECT_EQ(Ack("q", {d[0].lease}), Outcomes{kOk});
  EXPECT_EQ(Payloads(Take("q", "w", 10)), (std::vector<std::string>{"j2"}));
}

TEST_P(QueuesConformanceTest, RoundRobinServesGroupsInTurn) {
  Configure("q", Limits(kRoundRobin));
  for (int i = 1; i <= 5; ++i) PushOne("q", Grouped("a" + std::to_string(i), "a"));
  PushOne("q", Grouped("b1", "b"));
  PushOne("q", Grouped("b2", "b"));
  PushOne("q", Grouped("c1", "c"));
  EXPECT_EQ(Payloads(Take("q", "w", 3)), (std::vector<std::string>{"a1", "b1", "c1"}));
  EXPECT_EQ(Payloads(Take("q", "w", 10)), (std::vector<std::string>{"a2", "b2", "a3", "a4", "a5"}));
}

TEST_P(QueuesConformanceTest, RoundRobinWithinAGroupIsPriorityThenFifo) {
  Configure("q", Limits(kRoundRobin));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a", 9));
  PushOne("q", Grouped("b1", "b"));
  EXPECT_EQ(Payloads(Take("q", "w", 3)), (std::vector<std::string>{"a2", "b1", "a1"}));
}

TEST_P(QueuesConformanceTest, AFetchThatFindsOnlyRateLimitedWorkParksUntilItIsAllowed) {
  Configure("q", Limits(kFifo, Limit(Rate(1, 1'000, 1))));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a"));
  EXPECT_EQ(TakeOne("q", "w").payload, "a1");
  EXPECT_TRUE(Take("q", "w").empty()) << "a2 is held by its rate";
  PendingFetch pending = StartFetch("q", "w", 5, 30'000, 20'000);
  EXPECT_TRUE(pending.StillWaiting());
  AdvanceTime(999);
  EXPECT_TRUE(pending.StillWaiting());
  AdvanceTime(1);
  auto got = pending.Get();
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(Payloads(*got), (std::vector<std::string>{"a2"}));
  EXPECT_EQ((*got)[0].attempt, 1);
}

TEST_P(QueuesConformanceTest, AFinishedJobWakesALongPollHeldByConcurrency) {
  Configure("q", Limits(kFifo, Limit(std::nullopt, 1)));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a"));
  Delivery a1 = TakeOne("q", "w");
  PendingFetch pending = StartFetch("q", "v", 1, 30'000, 20'000);
  EXPECT_TRUE(pending.StillWaiting());
  EXPECT_EQ(Ack("q", {a1.lease}), Outcomes{kOk});
  auto got = pending.Get();
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(Payloads(*got), (std::vector<std::string>{"a2"}));
}

TEST_P(QueuesConformanceTest, ASnoozeHoldsTheGroupAndKeepsTheAttempt) {
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a"));
  PushOne("q", Grouped("b1", "b"));
  Delivery a1 = TakeOne("q", "w");
  EXPECT_EQ(Snooze("q", {a1.lease}, 1'000), Outcomes{kOk});
  EXPECT_EQ(Snooze("q", {a1.lease}, 1'000), Outcomes{kLost}) << "that delivery is over";
  EXPECT_EQ(Snooze("q", {"forged"}, 1'000), Outcomes{kInvalid});
  ExpectCounts("q", 2, 1, 0, 0);
  EXPECT_EQ(Payloads(Take("q", "w", 5)), (std::vector<std::string>{"b1"})) << "a is held";
  AdvanceTime(999);
  EXPECT_TRUE(Take("q", "w", 5).empty());
  AdvanceTime(1);
  Deliveries a = Take("q", "w", 5);
  EXPECT_EQ(Payloads(a), (std::vector<std::string>{"a2", "a1"}));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].attempt, 1) << "a snooze uses up no attempt";
  QueueStats s = Stats("q");
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(s.expired, 0);
}

TEST_P(QueuesConformanceTest, AnUngroupedSnoozeHoldsTheWholeQueue) {
  PushOne("q", "j1");
  PushOne("q", "j2");
  PushOne("q", Grouped("g1", "g"));
  Delivery j1 = TakeOne("q", "w");
  EXPECT_EQ(Snooze("q", {j1.lease}, 500), Outcomes{kOk});
  EXPECT_TRUE(Take("q", "w", 5).empty());
  PendingFetch pending = StartFetch("q", "w", 5, 30'000, 20'000);
  AdvanceTime(499);
  EXPECT_TRUE(pending.StillWaiting());
  AdvanceTime(1);
  auto got = pending.Get();
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(Payloads(*got), (std::vector<std::string>{"j2", "g1", "j1"}));
}

TEST_P(QueuesConformanceTest, ASnoozeWithNoDelayPutsTheJobBackAtTheHead) {
  PushOne("q", "j1");
  PushOne("q", "j2");
  Delivery j1 = TakeOne("q", "w");
  EXPECT_EQ(Snooze("q", {j1.lease}, 0), Outcomes{kOk});
  Delivery again = TakeOne("q", "w");
  EXPECT_EQ(again.payload, "j1");
  EXPECT_EQ(again.attempt, 1);
}

TEST_P(QueuesConformanceTest, AReclaimTakesBackOnlyWhatTheLimitsAllow) {
  Configure("q", Limits(kFifo, Limit(Rate(1, 10'000, 2))));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a"));
  PushOne("q", Grouped("a3", "a"));
  EXPECT_EQ(Take("q", "w", 5).size(), 2u) << "a burst of 2";
  core::FetchAnswer back = Reclaim("q", "w", 5);
  EXPECT_TRUE(back.jobs.empty()) << "the rate allows none of them yet";
  ExpectCounts("q", 3, 0, 0, 0);
  AdvanceTime(9'999);
  EXPECT_TRUE(Take("q", "w", 5).empty());
  AdvanceTime(1);  // one interval after the burst of 2
  EXPECT_EQ(Payloads(Take("q", "w", 5)), (std::vector<std::string>{"a1"}));
}

TEST_P(QueuesConformanceTest, ChangingTheLimitsFreesWhatTheyHeld) {
  Configure("q", Limits(kFifo, Limit(std::nullopt, 1)));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a"));
  EXPECT_EQ(Take("q", "w", 5).size(), 1u);
  PendingFetch pending = StartFetch("q", "v", 1, 30'000, 20'000);
  EXPECT_TRUE(pending.StillWaiting());
  Configure("q", Limits(kFifo, Limit(std::nullopt, 2)));
  auto got = pending.Get();
  ASSERT_TRUE(got.ok()) << got.message();
  EXPECT_EQ(Payloads(*got), (std::vector<std::string>{"a2"}));
}

TEST_P(QueuesConformanceTest, LimitsAndHeldGroupsSurviveARestart) {
  Configure("q", Limits(kFifo, Limit(Rate(1, 60'000, 1), 1)));
  PushOne("q", Grouped("a1", "a"));
  PushOne("q", Grouped("a2", "a"));
  PushOne("q", Grouped("b1", "b"));
  PushOne("q", Grouped("b2", "b"));
  Deliveries d = Take("q", "w", 5);
  EXPECT_EQ(Payloads(d), (std::vector<std::string>{"a1", "b1"}));
  if (!harness_->Restart()) GTEST_SKIP() << GetParam().name << " keeps nothing across restarts";
  EXPECT_EQ(GetSettings("q").limits.per_group.concurrency, 1);
  EXPECT_EQ(Ack("q", {d[0].lease, d[1].lease}), (Outcomes{kOk, kOk}));
  EXPECT_TRUE(Take("q", "w", 5).empty()) << "the rates still owe";
  AdvanceTime(60'000);
  Deliveries after = Take("q", "w", 5);
  EXPECT_EQ(Payloads(after), (std::vector<std::string>{"a2", "b2"}));
  for (const Delivery& x : after) EXPECT_FALSE(x.group.empty());
}

// Random pushes, fetches, acks, deaths and time against per-group rates and concurrency (and a
// queue-wide one): in every window [t_i, t_j] of one group's takes, j - i + 1 <= burst +
// limit * (t_j - t_i) / period; a group never has more than its concurrency in flight; no job is
// lost (the accounting identity) and every job is eventually delivered once the limits allow.
TEST_P(QueuesConformanceTest, RandomDemandNeverExceedsAGroupsRateOrConcurrency) {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 4; ++round) {
    std::string q = "r" + std::to_string(round);
    core::RateLimit rate = Rate(1 + static_cast<int64_t>(rng() % 5),
                                100 + static_cast<int64_t>(rng() % 900), 1 + rng() % 3);
    int64_t concurrency = 1 + static_cast<int64_t>(rng() % 3);
    Configure(q, Limits(round % 2 ? kRoundRobin : kFifo, Limit(rate, concurrency),
                        Limit(std::nullopt, 6)));
    std::map<std::string, std::vector<int64_t>> taken;
    std::map<std::string, int64_t> inflight;
    std::vector<Delivery> held;
    const std::vector<std::string> groups{"a", "b", "c", "d"};
    int64_t pushed = 0;
    for (int step = 0; step < 150; ++step) {
      switch (rng() % 5) {
        case 0:
        case 1: {
          std::string g = groups[rng() % groups.size()];
          PushOne(q, Grouped(std::to_string(pushed++), g, static_cast<int32_t>(rng() % 2)));
          break;
        }
        case 2: {
          Deliveries d = Take(q, "w", 1 + rng() % 4, 2'000);
          int64_t total = static_cast<int64_t>(held.size());
          for (const Delivery& x : d) {
            taken[x.group].push_back(NowMs());
            ASSERT_LE(++inflight[x.group], concurrency) << "group " << x.group;
            ASSERT_LE(++total, 6) << "the queue's concurrency";
            held.push_back(x);
          }
          break;
        }
        case 3:
          if (!held.empty()) {
            size_t k = rng() % held.size();
            EXPECT_EQ(Ack(q, {held[k].lease}), Outcomes{kOk});
            --inflight[held[k].group];
            held.erase(held.begin() + static_cast<ptrdiff_t>(k));
          }
          break;
        default:
          AdvanceTime(static_cast<int64_t>(rng() % 700));
          // Leases of 2 s run out: those jobs are no longer in flight.
          std::erase_if(held, [&](const Delivery& x) {
            if (x.lease_expires_ms > NowMs()) return false;
            --inflight[x.group];
            return true;
          });
      }
    }
    ExpectIdentity(Stats(q));
    for (const auto& [g, times] : taken) {
      for (size_t i = 0; i < times.size(); ++i) {
        for (size_t j = i; j < times.size(); ++j) {
          int64_t n = static_cast<int64_t>(j - i + 1);
          ASSERT_LE(n * rate.period_ms,
                    rate.burst * rate.period_ms + rate.limit * (times[j] - times[i]))
              << "group " << g << ": " << n << " takes in " << times[j] - times[i] << " ms";
        }
      }
    }
  }
}

// Round robin across 100 groups of very different sizes: while every group still has work, each
// takes its turn, so the shares of a stretch of fetches are equal within 10%.
TEST_P(QueuesConformanceTest, RoundRobinSharesAreEqualAcrossGroupsOfVeryDifferentSizes) {
  Configure("q", Limits(kRoundRobin));
  std::vector<JobSpec> jobs;
  for (int g = 0; g < 100; ++g) {
    int size = g == 0 ? 2'000 : g < 10 ? 200 : 20;
    for (int k = 0; k < size; ++k) jobs.push_back(Grouped("x", "g" + std::to_string(g)));
  }
  for (size_t at = 0; at < jobs.size(); at += core::kMaxBatch) {
    std::vector<JobSpec> batch(
        jobs.begin() + static_cast<ptrdiff_t>(at),
        jobs.begin() + static_cast<ptrdiff_t>(std::min(at + core::kMaxBatch, jobs.size())));
    ASSERT_TRUE(Push("q", std::move(batch)).ok());
  }
  std::map<std::string, int> share;
  for (int k = 0; k < 10; ++k) {
    for (const Delivery& d : Take("q", "w", 200)) ++share[d.group];
  }
  ASSERT_EQ(share.size(), 100u);
  for (const auto& [g, n] : share) {
    EXPECT_GE(n, 18) << g;
    EXPECT_LE(n, 22) << g;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, QueuesConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
