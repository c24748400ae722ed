// The job-state conformance suite (Backend::GetJob, results at ack, progress, per-job logs, the
// queue's keep_acked retention): the same tests against every backend, time moved by the
// harness's clock.

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
using core::JobId;
using core::JobSpec;
using core::JobState;
using core::JobView;
using core::LeaseOutcome;
using Outcomes = std::vector<LeaseOutcome>;

JobSpec Job(std::string payload, int64_t delay_ms = 0, int32_t max_attempts = 5) {
  JobSpec spec;
  spec.payload = std::move(payload);
  spec.delay_ms = delay_ms;
  spec.max_attempts = max_attempts;
  return spec;
}

class JobStateConformanceTest : public conformance::BackendTest {
 protected:
  JobId PushOne(const std::string& q, JobSpec job) {
    auto r = Await<std::vector<core::PushResult>>(
        [&](auto done) { b().Push(q, {std::move(job)}, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() && r->size() == 1 ? (*r)[0].id : 0;
  }
  std::optional<Delivery> FetchOne(const std::string& q, const std::string& worker = "w",
                                   int64_t lease_ms = 30'000) {
    auto r = Await<core::FetchAnswer>([&](auto done) {
      core::FetchRequest request;
      request.worker = worker;
      request.lease_ms = lease_ms;
      b().Fetch(q, std::move(request), done);
    });
    EXPECT_TRUE(r.ok()) << r.message();
    if (!r.ok() || r->jobs.empty()) return std::nullopt;
    return r->jobs[0];
  }
  Outcomes Ack(const std::string& q, std::vector<std::string> leases,
               std::vector<std::string> results = {}) {
    auto r = Await<Outcomes>(
        [&](auto done) { b().Ack(q, std::move(leases), std::move(results), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Outcomes{};
  }
  Outcomes Nack(const std::string& q, const std::string& lease, std::string error,
                std::optional<int64_t> delay_ms = std::nullopt) {
    auto r =
        Await<Outcomes>([&](auto done) { b().Nack(q, {lease}, delay_ms, std::move(error), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : Outcomes{};
  }
  OpResult<JobView> Get(const std::string& q, JobId id) {
    return Await<JobView>([&](auto done) { b().GetJob(q, id, done); });
  }
  JobView GetOk(const std::string& q, JobId id) {
    auto r = Get(q, id);
    EXPECT_TRUE(r.ok()) << "job " << id << ": " << r.message();
    return r.ok() ? *r : JobView{};
  }
  LeaseOutcome Progress(const std::string& q, const std::string& lease, std::string progress) {
    auto r = Await<LeaseOutcome>(
        [&](auto done) { b().SetProgress(q, lease, std::move(progress), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : LeaseOutcome::kInvalidLease;
  }
  LeaseOutcome Log(const std::string& q, const std::string& lease, std::vector<std::string> lines) {
    auto r =
        Await<LeaseOutcome>([&](auto done) { b().AppendJobLog(q, lease, std::move(lines), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : LeaseOutcome::kInvalidLease;
  }
  void Keep(const std::string& q, int64_t count, int64_t age_ms) {
    core::QueueSettings settings;
    settings.keep_acked = {.count = count, .age_ms = age_ms};
    auto r = Await<Done>([&](auto done) { b().SetQueueSettings(q, settings, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  // Restarts the backend when it keeps anything across a restart; false when it does not.
  bool Restart() { return harness_->Restart(); }
};

TEST_P(JobStateConformanceTest, AnUnknownJobOrQueueIsUnknown) {
  EXPECT_EQ(Get("nobody", 1).status(), OpStatus::kUnknownJob);
  JobId id = PushOne("q", Job("a"));
  EXPECT_EQ(Get("q", id + 1000).status(), OpStatus::kUnknownJob);
  EXPECT_EQ(Get("q", 0).status(), OpStatus::kUnknownJob);
}

TEST_P(JobStateConformanceTest, EachStateIsShownWithItsTimes) {
  int64_t t0 = NowMs();
  JobId ready = PushOne("q", Job("r"));
  JobId delayed = PushOne("q", Job("d", 5'000));
  JobView r = GetOk("q", ready);
  EXPECT_EQ(r.id, ready);
  EXPECT_EQ(r.state, JobState::kReady);
  EXPECT_EQ(r.payload, "r");
  EXPECT_EQ(r.attempts, 0);
  EXPECT_EQ(r.max_attempts, 5);
  EXPECT_EQ(r.due_ms, 0);
  JobView d = GetOk("q", delayed);
  EXPECT_EQ(d.state, JobState::kDelayed);
  EXPECT_EQ(d.due_ms, t0 + 5'000);

  auto got = FetchOne("q", "w", 10'000);
  ASSERT_TRUE(got);
  JobView f = GetOk("q", ready);
  EXPECT_EQ(f.state, JobState::kInflight);
  EXPECT_EQ(f.attempts, 1);
  EXPECT_EQ(f.due_ms, t0 + 10'000);

  AdvanceTime(1'000);
  EXPECT_EQ(Ack("q", {got->lease}), Outcomes{LeaseOutcome::kOk});
  JobView a = GetOk("q", ready);
  EXPECT_EQ(a.state, JobState::kAcked);
  EXPECT_EQ(a.finished_ms, t0 + 1'000);
  EXPECT_EQ(a.payload, "r");
  EXPECT_EQ(a.attempts, 1);
  EXPECT_FALSE(a.result.has_value());

  auto c = Await<core::CancelOutcome>([&](auto done) { b().Cancel("q", delayed, done); });
  ASSERT_TRUE(c.ok());
  JobView x = GetOk("q", delayed);
  EXPECT_EQ(x.state, JobState::kCancelled);
  EXPECT_EQ(x.finished_ms, t0 + 1'000);
  EXPECT_EQ(x.payload, "d");
}

TEST_P(JobStateConformanceTest, FailuresShowInHistoryAndADeadJobIsDead) {
  int64_t t0 = NowMs();
  JobId id = PushOne("q", Job("x", 0, 2));
  auto first = FetchOne("q");
  ASSERT_TRUE(first);
  EXPECT_EQ(Nack("q", first->lease, "boom 1", 2'000), Outcomes{LeaseOutcome::kOk});
  JobView v = GetOk("q", id);
  EXPECT_EQ(v.state, JobState::kDelayed);
  EXPECT_EQ(v.due_ms, t0 + 2'000);
  ASSERT_EQ(v.history.size(), 1u);
  EXPECT_EQ(v.history[0].error, "boom 1");
  EXPECT_EQ(v.history[0].attempt, 1);

  AdvanceTime(2'000);
  auto second = FetchOne("q");
  ASSERT_TRUE(second);
  EXPECT_EQ(Nack("q", second->lease, "boom 2"), Outcomes{LeaseOutcome::kOk});
  JobView dead = GetOk("q", id);
  EXPECT_EQ(dead.state, JobState::kDead);
  EXPECT_EQ(dead.attempts, 2);
  EXPECT_EQ(dead.finished_ms, t0 + 2'000);
  ASSERT_EQ(dead.history.size(), 2u);
  EXPECT_EQ(dead.history[1].error, "boom 2");

  auto requeued = Await<size_t>([&](auto done) { b().RequeueDead("q", std::nullopt, done); });
  ASSERT_TRUE(requeued.ok());
  JobView again = GetOk("q", id);
  EXPECT_EQ(again.state, JobState::kReady);
  EXPECT_EQ(again.attempts, 0);
}

TEST_P(JobStateConformanceTest, AResultGivenAtAckIsKept) {
  JobId a = PushOne("q", Job("a"));
  JobId b2 = PushOne("q", Job("b"));
  JobId c = PushOne("q", Job("c"));
  auto da = FetchOne("q");
  auto db = FetchOne("q");
  ASSERT_TRUE(da && db);
  EXPECT_EQ(Ack("q", {da->lease, db->lease}, {R"({"ok":true})", ""}),
            (Outcomes{LeaseOutcome::kOk, LeaseOutcome::kOk}));
  EXPECT_EQ(GetOk("q", a).result, std::optional<std::string>(R"({"ok":true})"));
  EXPECT_FALSE(GetOk("q", b2).result.has_value());

  // A worker loop acks with its next fetch.
  auto dc = FetchOne("q");
  ASSERT_TRUE(dc);
  auto r = Await<core::FetchAnswer>([&](auto done) {
    core::FetchRequest request;
    request.worker = "w";
    request.ack = {dc->lease};
    request.ack_results = {"42"};
    b().Fetch("q", std::move(request), done);
  });
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->acked, Outcomes{LeaseOutcome::kOk});
  EXPECT_EQ(GetOk("q", c).result, std::optional<std::string>("42"));

  // A repeated ack changes nothing, the result included.
  EXPECT_EQ(Ack("q", {da->lease}, {"\"other\""}), Outcomes{LeaseOutcome::kOk});
  EXPECT_EQ(GetOk("q", a).result, std::optional<std::string>(R"({"ok":true})"));
}

TEST_P(JobStateConformanceTest, ProgressAndLogBelongToTheCurrentLease) {
  JobId id = PushOne("q", Job("p"));
  auto d = FetchOne("q", "w", 1'000);
  ASSERT_TRUE(d);
  EXPECT_EQ(Progress("q", d->lease, "10"), LeaseOutcome::kOk);
  EXPECT_EQ(Progress("q", d->lease, R"({"done":50})"), LeaseOutcome::kOk);
  EXPECT_EQ(Log("q", d->lease, {"step one", "step two"}), LeaseOutcome::kOk);
  JobView v = GetOk("q", id);
  EXPECT_EQ(v.progress, std::optional<std::string>(R"({"done":50})"));
  ASSERT_EQ(v.log.size(), 2u);
  EXPECT_EQ(v.log[0].text, "step one");
  EXPECT_EQ(v.log[1].text, "step two");
  EXPECT_EQ(v.log[0].at_ms, NowMs());

  EXPECT_EQ(Progress("q", "not a lease", "1"), LeaseOutcome::kInvalidLease);
  EXPECT_EQ(Log("q", "not a lease", {"x"}), LeaseOutcome::kInvalidLease);

  // The lease runs out; the next delivery's lease is the only one that may report.
  AdvanceTime(1'500);
  auto again = FetchOne("q");
  ASSERT_TRUE(again);
  EXPECT_EQ(Progress("q", d->lease, "99"), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(Log("q", d->lease, {"late"}), LeaseOutcome::kLeaseLost);
  EXPECT_EQ(Log("q", again->lease, {"retry"}), LeaseOutcome::kOk);
  EXPECT_EQ(Progress("q", again->lease, "75"), LeaseOutcome::kOk);

  // Both stay with the job once it is acked.
  EXPECT_EQ(Ack("q", {again->lease}, {"\"done\""}), Outcomes{LeaseOutcome::kOk});
  JobView done = GetOk("q", id);
  EXPECT_EQ(done.state, JobState::kAcked);
  EXPECT_EQ(done.progress, std::optional<std::string>("75"));
  ASSERT_EQ(done.log.size(), 3u);
  EXPECT_EQ(done.log[2].text, "retry");
  EXPECT_EQ(done.result, std::optional<std::string>("\"done\""));
  EXPECT_EQ(Progress("q", again->lease, "100"), LeaseOutcome::kLeaseLost);
}

TEST_P(JobStateConformanceTest, TheLogKeepsItsLastLinesEachBounded) {
  JobId id = PushOne("q", Job("l"));
  auto d = FetchOne("q");
  ASSERT_TRUE(d);
  std::vector<std::string> lines;
  for (int k = 0; k < 130; ++k) lines.push_back("line " + std::to_string(k));
  EXPECT_EQ(Log("q", d->lease, lines), LeaseOutcome::kOk);
  EXPECT_EQ(Log("q", d->lease, {std::string(5'000, 'z')}), LeaseOutcome::kOk);
  JobView v = GetOk("q", id);
  ASSERT_EQ(v.log.size(), core::kKeptLogLines);
  EXPECT_EQ(v.log_dropped, 31);
  EXPECT_EQ(v.log.front().text, "line 31");
  EXPECT_EQ(v.log[98].text, "line 129");
  EXPECT_LE(v.log.back().text.size(), core::kMaxLogLineBytes);
  EXPECT_EQ(v.log.back().text.substr(0, 10), std::string(10, 'z'));
}

TEST_P(JobStateConformanceTest, KeepAckedBoundsHowManyAndHowLong) {
  Keep("q", 2, 60'000);
  std::vector<JobId> ids;
  for (int k = 0; k < 3; ++k) ids.push_back(PushOne("q", Job("j" + std::to_string(k))));
  for (int k = 0; k < 3; ++k) {
    auto d = FetchOne("q");
    ASSERT_TRUE(d);
    EXPECT_EQ(Ack("q", {d->lease}, {std::to_string(k)}), Outcomes{LeaseOutcome::kOk});
    AdvanceTime(10);
  }
  EXPECT_EQ(Get("q", ids[0]).status(), OpStatus::kUnknownJob);  // one over the count
  EXPECT_EQ(GetOk("q", ids[1]).result, std::optional<std::string>("1"));
  EXPECT_EQ(GetOk("q", ids[2]).result, std::optional<std::string>("2"));
  AdvanceTime(60'000);
  EXPECT_EQ(Get("q", ids[1]).status(), OpStatus::kUnknownJob);  // past the age
  EXPECT_EQ(Get("q", ids[2]).status(), OpStatus::kUnknownJob);

  auto settings = Await<core::QueueSettings>([&](auto done) { b().GetQueueSettings("q", done); });
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(settings->keep_acked, (core::KeepFinished{.count = 2, .age_ms = 60'000}));
}

TEST_P(JobStateConformanceTest, KeepingNoneForgetsAFinishedJobAtOnce) {
  Keep("q", 0, 60'000);
  JobId id = PushOne("q", Job("gone"));
  auto d = FetchOne("q");
  ASSERT_TRUE(d);
  EXPECT_EQ(Ack("q", {d->lease}, {"1"}), Outcomes{LeaseOutcome::kOk});
  EXPECT_EQ(Get("q", id).status(), OpStatus::kUnknownJob);
  // The repeated ack still answers ok (that memory is not the retention).
  EXPECT_EQ(Ack("q", {d->lease}), Outcomes{LeaseOutcome::kOk});
}

TEST_P(JobStateConformanceTest, ADefaultQueueKeepsItsLastThousand) {
  for (int k = 0; k < 1'005; ++k) PushOne("q", Job("j"));
  for (int k = 0; k < 1'005; ++k) {
    auto d = FetchOne("q");
    ASSERT_TRUE(d);
    Ack("q", {d->lease});
  }
  EXPECT_EQ(Get("q", 5).status(), OpStatus::kUnknownJob);
  EXPECT_EQ(GetOk("q", 6).state, JobState::kAcked);
  EXPECT_EQ(GetOk("q", 1'005).state, JobState::kAcked);
}

TEST_P(JobStateConformanceTest, EverythingSurvivesARestart) {
  Keep("q", 10, 60'000);
  JobId acked = PushOne("q", Job("a"));
  JobId running = PushOne("q", Job("b"));
  auto da = FetchOne("q", "w", 20'000);
  auto db = FetchOne("q", "w", 20'000);
  ASSERT_TRUE(da && db);
  EXPECT_EQ(Log("q", da->lease, {"a1"}), LeaseOutcome::kOk);
  EXPECT_EQ(Progress("q", da->lease, "[1,2]"), LeaseOutcome::kOk);
  EXPECT_EQ(Ack("q", {da->lease}, {R"({"n":1})"}), Outcomes{LeaseOutcome::kOk});
  EXPECT_EQ(Log("q", db->lease, {"b1", "b2"}), LeaseOutcome::kOk);
  EXPECT_EQ(Progress("q", db->lease, "0.5"), LeaseOutcome::kOk);
  if (!Restart()) GTEST_SKIP() << "this backend keeps nothing across a restart";

  JobView a = GetOk("q", acked);
  EXPECT_EQ(a.state, JobState::kAcked);
  EXPECT_EQ(a.result, std::optional<std::string>(R"({"n":1})"));
  EXPECT_EQ(a.progress, std::optional<std::string>("[1,2]"));
  ASSERT_EQ(a.log.size(), 1u);
  EXPECT_EQ(a.log[0].text, "a1");
  JobView r = GetOk("q", running);
  EXPECT_EQ(r.state, JobState::kInflight);
  EXPECT_EQ(r.progress, std::optional<std::string>("0.5"));
  ASSERT_EQ(r.log.size(), 2u);
  EXPECT_EQ(Log("q", db->lease, {"b3"}), LeaseOutcome::kOk);
  EXPECT_EQ(GetOk("q", running).log.size(), 3u);
  auto settings = Await<core::QueueSettings>([&](auto done) { b().GetQueueSettings("q", done); });
  ASSERT_TRUE(settings.ok());
  EXPECT_EQ(settings->keep_acked.count, 10);

  // Retention goes on by the same clock after the restart.
  AdvanceTime(60'000);
  EXPECT_EQ(Get("q", acked).status(), OpStatus::kUnknownJob);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobStateConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
