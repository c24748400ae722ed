// The batches conformance suite (core::BatchSpec through store::Backend): jobs join an open
// batch at push; sealed with none pending it settles, and its callbacks are pushed each once
// (on_complete always, on_success when none died or was cancelled, on_dead at the first death).
// The same tests against every backend.

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend_fixture.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::BatchSpec;
using core::BatchView;
using core::Delivery;
using core::JobId;
using core::JobSpec;
using Outcomes = std::vector<core::LeaseOutcome>;

JobSpec In(std::string batch, std::string payload, int32_t max_attempts = 5) {
  JobSpec spec;
  spec.payload = std::move(payload);
  spec.batch = std::move(batch);
  spec.max_attempts = max_attempts;
  return spec;
}

JobSpec Callback(std::string payload) {
  JobSpec spec;
  spec.payload = std::move(payload);
  return spec;
}

BatchSpec AllCallbacks() {
  BatchSpec spec;
  spec.on_success = Callback("success");
  spec.on_complete = Callback("complete");
  spec.on_dead = Callback("dead");
  return spec;
}

class BatchesConformanceTest : public conformance::BackendTest {
 protected:
  OpResult<BatchView> Create(const std::string& id, BatchSpec spec) {
    return Await<BatchView>([&](auto done) { b().CreateBatch("q", id, std::move(spec), done); });
  }
  OpResult<BatchView> Seal(const std::string& id) {
    return Await<BatchView>([&](auto done) { b().SealBatch("q", id, done); });
  }
  BatchView Get(const std::string& id) {
    auto r = Await<BatchView>([&](auto done) { b().GetBatch("q", id, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : BatchView{};
  }
  OpResult<std::vector<core::PushResult>> Push(std::vector<JobSpec> jobs) {
    return Await<std::vector<core::PushResult>>(
        [&](auto done) { b().Push("q", std::move(jobs), done); });
  }
  std::vector<Delivery> Fetch(size_t max = 20) {
    core::FetchRequest request;
    request.worker = "w";
    request.max = max;
    auto r = Await<core::FetchAnswer>([&](auto done) { b().Fetch("q", std::move(request), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? r->jobs : std::vector<Delivery>{};
  }
  void Ack(const Delivery& d) {
    auto r = Await<Outcomes>([&](auto done) { b().Ack("q", {d.lease}, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  void Nack(const Delivery& d) {
    auto r =
        Await<Outcomes>([&](auto done) { b().Nack("q", {d.lease}, std::nullopt, "broken", done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  std::vector<std::string> Payloads(const std::vector<Delivery>& ds) {
    std::vector<std::string> out;
    for (const Delivery& d : ds) out.push_back(d.payload);
    return out;
  }
};

TEST_P(BatchesConformanceTest, AllAckedPushesSuccessAndCompleteOnce) {
  auto made = Create("b1", AllCallbacks());
  ASSERT_TRUE(made.ok()) << made.message();
  EXPECT_FALSE(made->sealed);
  ASSERT_TRUE(Push({In("b1", "1"), In("b1", "2")}).ok());
  ASSERT_TRUE(Push({In("b1", "3")}).ok());
  std::vector<Delivery> jobs = Fetch();
  ASSERT_EQ(jobs.size(), 3u);
  Ack(jobs[0]);
  Ack(jobs[1]);
  Ack(jobs[2]);  // all done, but not sealed: more may join
  BatchView open = Get("b1");
  EXPECT_EQ(open.acked, 3);
  EXPECT_FALSE(open.settled);
  EXPECT_TRUE(Fetch().empty());
  auto sealed = Seal("b1");
  ASSERT_TRUE(sealed.ok()) << sealed.message();
  EXPECT_TRUE(sealed->settled);
  EXPECT_NE(sealed->on_success_job, 0u);
  EXPECT_NE(sealed->on_complete_job, 0u);
  EXPECT_EQ(sealed->on_dead_job, 0u);
  std::vector<Delivery> callbacks = Fetch();
  EXPECT_EQ(Payloads(callbacks), (std::vector<std::string>{"complete", "success"}));
  // Sealing again changes nothing and pushes nothing.
  ASSERT_TRUE(Seal("b1").ok());
  EXPECT_TRUE(Fetch().empty());
}

TEST_P(BatchesConformanceTest, ADeathPushesOnDeadOnceAndNoSuccess) {
  ASSERT_TRUE(Create("b", AllCallbacks()).ok());
  ASSERT_TRUE(Push({In("b", "1", 1), In("b", "2", 1), In("b", "3")}).ok());
  ASSERT_TRUE(Seal("b").ok());
  std::vector<Delivery> jobs = Fetch();
  ASSERT_EQ(jobs.size(), 3u);
  Nack(jobs[0]);
  BatchView v = Get("b");
  EXPECT_EQ(v.dead, 1);
  EXPECT_NE(v.on_dead_job, 0u);
  Nack(jobs[1]);  // a second death: on_dead is not pushed again
  Ack(jobs[2]);
  v = Get("b");
  EXPECT_TRUE(v.settled);
  EXPECT_EQ(v.pending, 0);
  EXPECT_EQ(v.dead, 2);
  EXPECT_EQ(v.on_success_job, 0u);
  EXPECT_EQ(Payloads(Fetch()), (std::vector<std::string>{"dead", "complete"}));
}

TEST_P(BatchesConformanceTest, ACancelledJobMeansNoSuccessAndAnEmptyBatchSettlesAtSeal) {
  ASSERT_TRUE(Create("c", AllCallbacks()).ok());
  auto pushed = Push({In("c", "1")});
  ASSERT_TRUE(pushed.ok());
  ASSERT_TRUE(Seal("c").ok());
  auto cancelled =
      Await<core::CancelOutcome>([&](auto done) { b().Cancel("q", (*pushed)[0].id, done); });
  ASSERT_TRUE(cancelled.ok());
  BatchView v = Get("c");
  EXPECT_TRUE(v.settled);
  EXPECT_EQ(v.cancelled, 1);
  EXPECT_EQ(Payloads(Fetch()), (std::vector<std::string>{"complete"}));

  BatchSpec only_success;
  only_success.on_success = Callback("empty ok");
  ASSERT_TRUE(Create("empty", only_success).ok());
  auto sealed = Seal("empty");
  ASSERT_TRUE(sealed.ok());
  EXPECT_TRUE(sealed->settled);
  EXPECT_EQ(Payloads(Fetch()), (std::vector<std::string>{"empty ok"}));
}

TEST_P(BatchesConformanceTest, PushesToAnUnknownOrSealedBatchAreRefusedWhole) {
  EXPECT_EQ(Push({Callback("x"), In("nope", "y")}).status(), OpStatus::kUnknownBatch);
  ASSERT_TRUE(Create("s", {}).ok());
  EXPECT_EQ(Create("s", {}).status(), OpStatus::kConflict);
  ASSERT_TRUE(Push({In("s", "1")}).ok());
  ASSERT_TRUE(Seal("s").ok());
  EXPECT_EQ(Push({Callback("x"), In("s", "2")}).status(), OpStatus::kConflict);
  auto stats = Await<core::QueueStats>([&](auto done) { b().GetQueue("q", done); });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->pushed, 1);  // neither refused push pushed anything
  EXPECT_EQ(Seal("nope").status(), OpStatus::kUnknownBatch);
  auto missing = Await<BatchView>([&](auto done) { b().GetBatch("q", "nope", done); });
  EXPECT_EQ(missing.status(), OpStatus::kUnknownBatch);
}

// A job looked up names its batch, while it is pending and once it is finished (acked, with a
// result; dead; cancelled); a job of no batch names none.
TEST_P(BatchesConformanceTest, AJobLookedUpNamesItsBatch) {
  ASSERT_TRUE(Create("named", {}).ok());
  auto pushed = Push(
      {In("named", "acked"), In("named", "dead", 1), In("named", "cancelled"), Callback("alone")});
  ASSERT_TRUE(pushed.ok());
  auto view = [&](core::JobId id) {
    auto r = Await<core::JobView>([&](auto done) { b().GetJob("q", id, done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : core::JobView{};
  };
  EXPECT_EQ(view((*pushed)[0].id).batch, "named");
  ASSERT_TRUE(
      Await<core::CancelOutcome>([&](auto done) { b().Cancel("q", (*pushed)[2].id, done); }).ok());
  std::vector<Delivery> jobs = Fetch(2);
  ASSERT_EQ(jobs.size(), 2u);
  auto acked = Await<Outcomes>([&](auto done) { b().Ack("q", {jobs[0].lease}, {"7"}, done); });
  ASSERT_TRUE(acked.ok());
  Nack(jobs[1]);
  for (size_t k : {0, 1, 2}) {
    core::JobView v = view((*pushed)[k].id);
    EXPECT_EQ(v.batch, "named") << k;
    EXPECT_EQ(core::ToString(v.state), std::vector<std::string>({"acked", "dead", "cancelled"})[k]);
  }
  EXPECT_EQ(view((*pushed)[0].id).result, "7");
  EXPECT_EQ(view((*pushed)[3].id).batch, "");
}

TEST_P(BatchesConformanceTest, ASettledBatchIsKeptForTheQueuesAge) {
  core::QueueSettings settings;
  settings.keep_acked = {.count = 10, .age_ms = 5'000};
  ASSERT_TRUE(Await<Done>([&](auto done) { b().SetQueueSettings("q", settings, done); }).ok());
  ASSERT_TRUE(Create("old", {}).ok());
  ASSERT_TRUE(Seal("old").ok());
  AdvanceTime(4'999);
  EXPECT_TRUE(Get("old").settled);
  AdvanceTime(1);
  auto gone = Await<BatchView>([&](auto done) { b().GetBatch("q", "old", done); });
  EXPECT_EQ(gone.status(), OpStatus::kUnknownBatch);
  EXPECT_TRUE(Create("old", {}).ok());  // the id may be used again
}

// A settled batch with a dead job is kept past its age for as long as the job is left: its id
// cannot be taken by a new batch in which the old job, requeued, would then count.
TEST_P(BatchesConformanceTest, ABatchWithADeadJobIsKeptUntilTheJobGoes) {
  core::QueueSettings settings;
  settings.keep_acked = {.count = 10, .age_ms = 5'000};
  ASSERT_TRUE(Await<Done>([&](auto done) { b().SetQueueSettings("q", settings, done); }).ok());
  for (const char* way : {"requeued", "cancelled"}) {
    SCOPED_TRACE(way);
    auto made = Create("d", {});
    ASSERT_TRUE(made.ok()) << made.message();
    ASSERT_TRUE(Push({In("d", "ok"), In("d", "bad", /*max_attempts=*/1)}).ok());
    ASSERT_TRUE(Seal("d").ok());
    std::vector<Delivery> jobs = Fetch();
    ASSERT_EQ(jobs.size(), 2u);
    Ack(jobs[0]);
    Nack(jobs[1]);  // dead: the batch settles
    ASSERT_TRUE(Get("d").settled);
    AdvanceTime(60'000);  // far past its age
    BatchView kept = Get("d");
    EXPECT_EQ(kept.dead, 1);
    EXPECT_EQ(kept.acked, 1);
    EXPECT_EQ(Create("d", {}).status(), OpStatus::kConflict);
    if (std::string(way) == "requeued") {
      auto requeued = Await<size_t>([&](auto done) { b().RequeueDead("q", std::nullopt, done); });
      ASSERT_TRUE(requeued.ok());
      ASSERT_EQ(*requeued, 1u);
      BatchView back = Get("d");  // kept: the job is pending again
      EXPECT_EQ(back.pending, 1);
      EXPECT_EQ(back.dead, 0);
      std::vector<Delivery> again = Fetch();
      ASSERT_EQ(again.size(), 1u);
      EXPECT_EQ(again[0].payload, "bad");
      Ack(again[0]);
    } else {
      auto cancelled =
          Await<core::CancelOutcome>([&](auto done) { b().Cancel("q", jobs[1].id, done); });
      ASSERT_TRUE(cancelled.ok());
      EXPECT_EQ(*cancelled, core::CancelOutcome::kCancelled);
    }
    // Its last job gone and its age long past: forgotten, and the id free again.
    auto gone = Await<BatchView>([&](auto done) { b().GetBatch("q", "d", done); });
    EXPECT_EQ(gone.status(), OpStatus::kUnknownBatch);
    auto fresh = Create("d", {});
    ASSERT_TRUE(fresh.ok()) << fresh.message();
    EXPECT_EQ(fresh->pending, 0);
    EXPECT_EQ(fresh->dead, 0);
    EXPECT_EQ(fresh->acked, 0);
    ASSERT_TRUE(Seal("d").ok());  // settles empty; goes after its age
    AdvanceTime(5'000);
  }
}

// At most core::kMaxOpenBatches open batches a queue; one settling makes room for another.
TEST_P(BatchesConformanceTest, OpenBatchesAreCapped) {
  // 10,000 creates, each fsynced there: log_everysec logs the same records.
  if (GetParam().name == "log_always") GTEST_SKIP() << "the same records as log_everysec";
  for (size_t k = 0; k < core::kMaxOpenBatches; ++k) {
    auto made = Create("b" + std::to_string(k), {});
    ASSERT_TRUE(made.ok()) << k << ": " << made.message();
  }
  EXPECT_EQ(Create("over", {}).status(), OpStatus::kLimitReached);
  ASSERT_TRUE(Seal("b7").ok());  // empty: settles at once
  EXPECT_TRUE(Create("over", {}).ok());
  EXPECT_EQ(Create("over2", {}).status(), OpStatus::kLimitReached);
}

TEST_P(BatchesConformanceTest, AnOpenBatchSettlesAfterARestart) {
  ASSERT_TRUE(Create("r", AllCallbacks()).ok());
  ASSERT_TRUE(Push({In("r", "1"), In("r", "2")}).ok());
  std::vector<Delivery> jobs = Fetch();
  ASSERT_EQ(jobs.size(), 2u);
  Ack(jobs[0]);
  if (!harness_->Restart()) GTEST_SKIP() << "this backend keeps nothing across a restart";
  BatchView v = Get("r");
  EXPECT_EQ(v.acked, 1);
  EXPECT_EQ(v.pending, 1);
  ASSERT_TRUE(Seal("r").ok());
  Ack(jobs[1]);
  EXPECT_TRUE(Get("r").settled);
  EXPECT_EQ(Payloads(Fetch()), (std::vector<std::string>{"complete", "success"}));
}

INSTANTIATE_TEST_SUITE_P(Backends, BatchesConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
