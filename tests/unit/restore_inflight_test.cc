// The in-flight rule of `anteroom restore` (cmd/restore_cmd.cc), with a fake clock: `requeue`
// (core::Queue::ReturnInflight, through MemoryBackend::ReturnAllInflight) puts jobs leased at
// the backup back at the head of their line, in their order, without using up an attempt or
// counting an expiry, and leaves their old leases lost; `keep` leaves them leased, to come back
// when their leases run out as any lease does.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/clock.h"
#include "core/hmac.h"
#include "core/queue.h"
#include "store/memory/memory_backend.h"

namespace anteroom {
namespace {

using namespace std::chrono_literals;

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr int64_t kLease = 30'000;

core::JobSpec Job(std::string payload) {
  core::JobSpec spec;
  spec.payload = std::move(payload);
  return spec;
}

TEST(ReturnInflightTest, LeasedJobsGoBackToTheHeadInOrderWithTheirAttempt) {
  core::Hmac key("test-secret");
  core::Queue q("jobs", key, kT0, 7);
  for (const char* p : {"a", "b", "c", "d"}) q.Push({Job(p)}, kT0);
  std::vector<core::Delivery> first = q.Fetch("w1", 2, kLease, kT0 + 10);   // a, b
  std::vector<core::Delivery> second = q.Fetch("w2", 1, kLease, kT0 + 20);  // c
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 1u);

  EXPECT_EQ(q.ReturnInflight(), 3u);
  core::QueueStats s = q.Stats(kT0 + 30);
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.ready, 4);
  EXPECT_EQ(s.expired, 0);
  EXPECT_EQ(s.nacked, 0);
  EXPECT_EQ(s.workers, 0);

  std::vector<core::Delivery> again = q.Fetch("w3", 4, kLease, kT0 + 40);
  ASSERT_EQ(again.size(), 4u);
  std::vector<std::string> order;
  for (const core::Delivery& d : again) {
    order.push_back(d.payload);
    EXPECT_EQ(d.attempt, 1) << d.payload;  // the delivery at the backup was never tried
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b", "c", "d"}));
  // The leases of before name deliveries that no longer are.
  EXPECT_EQ(q.Ack(first[0].lease, kT0 + 50), core::LeaseOutcome::kLeaseLost);
  EXPECT_EQ(q.Ack(again[0].lease, kT0 + 50), core::LeaseOutcome::kOk);
}

TEST(ReturnInflightTest, ALeaseThatRanOutBeforeIsReturnedNotCountedExpired) {
  core::Hmac key("test-secret");
  core::Queue q("jobs", key, kT0, 7);
  q.Push({Job("a")}, kT0);
  ASSERT_EQ(q.Fetch("w", 1, 1'000, kT0).size(), 1u);
  // The restore runs long after the lease's end: the queue's own time has not moved.
  EXPECT_EQ(q.ReturnInflight(), 1u);
  core::QueueStats s = q.Stats(kT0 + 60'000);
  EXPECT_EQ(s.expired, 0);
  EXPECT_EQ(s.ready, 1);
  std::vector<core::Delivery> d = q.Fetch("w", 1, kLease, kT0 + 60'000);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].attempt, 1);
}

template <typename T, typename Call>
OpResult<T> Await(Call&& call) {
  auto promise = std::make_shared<std::promise<OpResult<T>>>();
  auto future = promise->get_future();
  call([promise](OpResult<T> r) { promise->set_value(std::move(r)); });
  if (future.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "the backend did not answer";
    return OpResult<T>(OpStatus::kInternal, "timeout");
  }
  return future.get();
}

class RestoreRuleTest : public ::testing::Test {
 protected:
  // A backend holding one job leased with kLease, as a backup holds it; `restored` loads that
  // state as the restore does (a snapshot's bytes).
  void SetUp() override {
    auto pushed = Await<std::vector<core::PushResult>>([&](auto done) {
      live_.Push("q", {Job("a"), Job("b")}, done);
    });
    ASSERT_TRUE(pushed.ok()) << pushed.message();
    leased_ = Fetch(live_, "w", 1);
    ASSERT_EQ(leased_.size(), 1u);
    std::string bytes;
    ByteWriter out(bytes);
    live_.SaveState(out);
    restored_.StartReplay();
    ByteReader in(bytes);
    ASSERT_TRUE(restored_.LoadState(in));
    restored_.FinishRecovery();
  }

  static std::vector<core::Delivery> Fetch(store::MemoryBackend& b, const std::string& worker,
                                           size_t max) {
    core::FetchRequest request{.worker = worker,
                               .max = max,
                               .lease_ms = kLease,
                               .wait_ms = 0,
                               .ack = {},
                               .ack_results = {},
                               .hangup = {}};
    auto r = Await<core::FetchAnswer>([&](auto done) { b.Fetch("q", std::move(request), done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? r->jobs : std::vector<core::Delivery>{};
  }
  core::QueueStats Stats(store::MemoryBackend& b) {
    auto r = Await<core::QueueStats>([&](auto done) { b.GetQueue("q", done); });
    EXPECT_TRUE(r.ok()) << r.message();
    return r.ok() ? *r : core::QueueStats{};
  }

  FakeClock clock_{kT0};
  store::MemoryBackend live_{clock_, {.run_timer = false}};
  store::MemoryBackend restored_{clock_, {.run_timer = false}};
  std::vector<core::Delivery> leased_;
};

TEST_F(RestoreRuleTest, RequeueMakesTheLeasedJobReadyFirstWithItsAttempt) {
  EXPECT_EQ(restored_.ReturnAllInflight(), 1u);
  core::QueueStats s = Stats(restored_);
  EXPECT_EQ(s.inflight, 0);
  EXPECT_EQ(s.ready, 2);
  std::vector<core::Delivery> d = Fetch(restored_, "w2", 2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].id, leased_[0].id);
  EXPECT_EQ(d[0].attempt, 1);
  EXPECT_EQ(Stats(restored_).expired, 0);
}

TEST_F(RestoreRuleTest, KeepLeavesTheLeaseToRunOut) {
  core::QueueStats s = Stats(restored_);
  EXPECT_EQ(s.inflight, 1);
  EXPECT_EQ(s.ready, 1);
  // Only the job that was ready is handed out while the lease runs.
  std::vector<core::Delivery> d = Fetch(restored_, "w2", 2);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].id, leased_[0].id);
  auto acked = Await<std::vector<core::LeaseOutcome>>(
      [&](auto done) { restored_.Ack("q", {d[0].lease}, done); });
  ASSERT_TRUE(acked.ok()) << acked.message();
  // Past its lease's end the job is ready again, the attempt used up, as any expiry.
  clock_.Advance(kLease + 1);
  restored_.RunDue();
  std::vector<core::Delivery> back = Fetch(restored_, "w3", 1);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].id, leased_[0].id);
  EXPECT_EQ(back[0].attempt, 2);
  EXPECT_EQ(Stats(restored_).expired, 1);
}

TEST_F(RestoreRuleTest, KeepHonoursTheLeaseOfBefore) {
  auto acked = Await<std::vector<core::LeaseOutcome>>(
      [&](auto done) { restored_.Ack("q", {leased_[0].lease}, done); });
  ASSERT_TRUE(acked.ok()) << acked.message();
  ASSERT_EQ(acked->size(), 1u);
  EXPECT_EQ((*acked)[0], core::LeaseOutcome::kOk);
  EXPECT_EQ(Stats(restored_).acked, 1);
}

}  // namespace
}  // namespace anteroom
