// The dependencies conformance suite (JobSpec::depends_on through store::Backend): a job waits
// for older jobs of its queue until each is acked, fails (or, told to, goes on) when one dies,
// is cancelled or is not known, and never waits forever. The same tests against every backend.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend_fixture.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::Delivery;
using core::DependencyState;
using core::DependencyView;
using core::JobId;
using core::JobSpec;
using core::JobState;
using core::LeaseOutcome;
using Outcomes = std::vector<LeaseOutcome>;

JobSpec After(std::string payload, std::vector<JobId> deps, bool ignore = false,
              int64_t delay_ms = 0) {
  JobSpec spec;
  spec.payload = std::move(payload);
  spec.depends_on = std::move(deps);
  spec.ignore_failed_dependencies = ignore;
  spec.delay_ms = delay_ms;
  return spec;
}

JobSpec Plain(std::string payload, int32_t max_attempts = 5) {
  JobSpec spec;
  spec.payload = std::move(payload);
  spec.max_attempts = max_attempts;
  return spec;
}

class DependenciesConformanceTest : public conformance::BackendTest {
 protected:
  std::vector<JobId> Push(std::vector<JobSpec> jobs) {
    auto r = Await<std::vector<core::PushResult>>(
        [&](auto done) { b().Push("q", std::move(jobs), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    std::vector<JobId> ids;
    if (r.ok()) {
      for (const auto& p : *r) ids.push_back(p.id);
    }
    return ids;
  }
  JobId PushOne(JobSpec job) {
    std::vector<JobId> ids = Push({std::move(job)});
    return ids.empty() ? 0 : ids[0];
  }
  std::vector<Delivery> Fetch(size_t max = 10) {
    core::FetchRequest request;
    request.worker = "w";
    request.max = max;
    auto r = Await<core::FetchAnswer>([&](auto done) { b().Fetch("q", std::move(request), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? r->jobs : std::vector<Delivery>{};
  }
  void Ack(const Delivery& d, std::string result = "") {
    auto r = Await<Outcomes>([&](auto done) { b().Ack("q", {d.lease}, {result}, done); });
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_EQ(*r, Outcomes{LeaseOutcome::kOk});
  }
  void Nack(const Delivery& d) {
    auto r =
        Await<Outcomes>([&](auto done) { b().Nack("q", {d.lease}, std::nullopt, "broken", done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  // Fetches the one job ready, which must be `id`.
  Delivery TakeOnly(JobId id) {
    std::vector<Delivery> got = Fetch();
    EXPECT_EQ(got.size(), 1u);
    if (got.empty()) return {};
    EXPECT_EQ(got[0].id, id);
    return got[0];
  }
  JobState StateOf(JobId id) {
    auto r = Await<core::JobView>([&](auto done) { b().GetJob("q", id, done); });
    EXPECT_TRUE(r.ok()) << "job " << id << ": " << r.message();
    return r.ok() ? r->state : JobState::kReady;
  }
  core::JobView View(JobId id) {
    auto r = Await<core::JobView>([&](auto done) { b().GetJob("q", id, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : core::JobView{};
  }
  std::vector<DependencyView> Deps(JobId id) {
    auto r = Await<std::vector<DependencyView>>(
        [&](auto done) { b().GetJobDependencies("q", id, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : std::vector<DependencyView>{};
  }
  core::QueueStats Stats() {
    auto r = Await<core::QueueStats>([&](auto done) { b().GetQueue("q", done); });
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : core::QueueStats{};
  }
  void Cancel(JobId id) {
    auto r = Await<core::CancelOutcome>([&](auto done) { b().Cancel("q", id, done); });
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, core::CancelOutcome::kCancelled);
  }
};

TEST_P(DependenciesConformanceTest, AJobWaitsForEveryDependencyThenRunsWithTheirResults) {
  JobId a = PushOne(Plain("a"));
  JobId b2 = PushOne(Plain("b"));
  JobId c = PushOne(After("c", {a, b2}));
  EXPECT_EQ(StateOf(c), JobState::kWaitingDeps);
  core::QueueStats s = Stats();
  EXPECT_EQ(s.waiting, 1);
  EXPECT_EQ(s.ready, 2);
  core::JobView v = View(c);
  EXPECT_EQ(v.depends_on, (std::vector<JobId>{a, b2}));
  EXPECT_EQ(v.waiting_on, 2);

  std::vector<Delivery> first = Fetch();
  ASSERT_EQ(first.size(), 2u);  // c is not fetchable
  Ack(first[0], R"({"from":"a"})");
  EXPECT_EQ(StateOf(c), JobState::kWaitingDeps);
  EXPECT_EQ(View(c).waiting_on, 1);
  Ack(first[1]);
  EXPECT_EQ(StateOf(c), JobState::kReady);
  EXPECT_EQ(Stats().waiting, 0);
  Delivery dc = TakeOnly(c);
  EXPECT_EQ(dc.payload, "c");
  std::vector<DependencyView> deps = Deps(c);
  ASSERT_EQ(deps.size(), 2u);
  EXPECT_EQ(deps[0], (DependencyView{a, DependencyState::kAcked, R"({"from":"a"})"}));
  EXPECT_EQ(deps[1], (DependencyView{b2, DependencyState::kAcked, std::nullopt}));
}

TEST_P(DependenciesConformanceTest, ADeadDependencyFailsItsDependentsAndTheirsAtOnce) {
  JobId a = PushOne(Plain("a", 1));
  JobId b2 = PushOne(After("b", {a}));
  JobId c = PushOne(After("c", {b2}));
  JobId d = PushOne(After("d", {b2}, /*ignore=*/true));
  Nack(TakeOnly(a));
  EXPECT_EQ(StateOf(a), JobState::kDead);
  core::JobView vb = View(b2);
  EXPECT_EQ(vb.state, JobState::kDead);
  ASSERT_FALSE(vb.history.empty());
  EXPECT_EQ(vb.history.back().error, "dependency " + std::to_string(a) + " is dead");
  EXPECT_EQ(StateOf(c), JobState::kDead);   // through b
  EXPECT_EQ(StateOf(d), JobState::kReady);  // told to go on
  EXPECT_EQ(Deps(d)[0].state, DependencyState::kDead);
  core::QueueStats s = Stats();
  EXPECT_EQ(s.dead, 3);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.pushed,
            s.acked + s.waiting + s.ready + s.delayed + s.inflight + s.dead + s.cancelled);
}

TEST_P(DependenciesConformanceTest, CancelledMissingAndNewerDependenciesFail) {
  JobId a = PushOne(Plain("a"));
  JobId b2 = PushOne(After("b", {a}));
  Cancel(a);
  EXPECT_EQ(StateOf(b2), JobState::kDead);
  EXPECT_EQ(Deps(b2)[0].state, DependencyState::kCancelled);

  JobId missing = PushOne(After("m", {9'999}));
  EXPECT_EQ(StateOf(missing), JobState::kDead);
  EXPECT_EQ(Deps(missing)[0].state, DependencyState::kMissing);
  // Its own id, or one not yet pushed, is never waited on (no cycle can form).
  JobId next = missing + 1;
  JobId self = PushOne(After("s", {next, next + 1}, /*ignore=*/true));
  EXPECT_EQ(self, next);
  EXPECT_EQ(StateOf(self), JobState::kReady);
  std::vector<DependencyView> deps = Deps(self);
  ASSERT_EQ(deps.size(), 2u);
  EXPECT_EQ(deps[0].state, DependencyState::kMissing);
  EXPECT_EQ(deps[1].state, DependencyState::kMissing);
}

TEST_P(DependenciesConformanceTest, AnAckedDependencyCountsAtPushWithItsResult) {
  JobId a = PushOne(Plain("a"));
  Ack(TakeOnly(a), "7");
  JobId b2 = PushOne(After("b", {a}));
  EXPECT_EQ(StateOf(b2), JobState::kReady);
  EXPECT_EQ(Deps(b2)[0], (DependencyView{a, DependencyState::kAcked, "7"}));
  // A dependency and its dependent in one push: the older one counts.
  std::vector<JobId> ids = Push({Plain("x"), After("y", {b2 + 1})});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(StateOf(ids[1]), JobState::kWaitingDeps);
}

TEST_P(DependenciesConformanceTest, ADelayCountsFromThePushAndAWaitingJobMayBeCancelled) {
  JobId a = PushOne(Plain("a"));
  JobId late = PushOne(After("late", {a}, false, 5'000));
  JobId gone = PushOne(After("gone", {a}));
  Cancel(gone);
  EXPECT_EQ(StateOf(gone), JobState::kCancelled);
  Delivery da = TakeOnly(a);
  AdvanceTime(1'000);
  Ack(da);
  core::JobView v = View(late);
  EXPECT_EQ(v.state, JobState::kDelayed);
  AdvanceTime(4'000);
  TakeOnly(late);
  core::QueueStats s = Stats();
  EXPECT_EQ(s.cancelled, 1);
  EXPECT_EQ(s.waiting, 0);
}

TEST_P(DependenciesConformanceTest, JobsFreedByOneAckBecomeReadyInPushOrder) {
  JobId a = PushOne(Plain("a"));
  JobId x = PushOne(After("x", {a}));
  JobId y = PushOne(After("y", {a}));
  JobId z = PushOne(After("z", {a}));
  Ack(TakeOnly(a));
  std::vector<Delivery> got = Fetch();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].id, x);
  EXPECT_EQ(got[1].id, y);
  EXPECT_EQ(got[2].id, z);
}

TEST_P(DependenciesConformanceTest, WaitingSurvivesARestart) {
  JobId a = PushOne(Plain("a"));
  JobId b2 = PushOne(Plain("b", 1));
  JobId c = PushOne(After("c", {a}));
  JobId d = PushOne(After("d", {b2}));
  std::vector<Delivery> got = Fetch();
  ASSERT_EQ(got.size(), 2u);
  if (!harness_->Restart()) GTEST_SKIP() << "this backend keeps nothing across a restart";
  EXPECT_EQ(StateOf(c), JobState::kWaitingDeps);
  EXPECT_EQ(Stats().waiting, 2);
  Ack(got[0], "\"ok\"");
  Nack(got[1]);
  EXPECT_EQ(StateOf(c), JobState::kReady);
  EXPECT_EQ(StateOf(d), JobState::kDead);
  EXPECT_EQ(Deps(c)[0].result, std::optional<std::string>("\"ok\""));
}

INSTANTIATE_TEST_SUITE_P(Backends, DependenciesConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
