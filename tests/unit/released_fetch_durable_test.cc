// A long poll released by a draining server (Hangup::Release) answers its acks, made before it
// parked, only once the journal says they are durable: the rule every answer of the embedded
// backend keeps (store/memory/durable_answer.h), here on a journal the test makes durable by
// hand.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/hangup.h"
#include "store/memory/change_sink.h"
#include "store/memory/memory_backend.h"

namespace anteroom::store {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

// Keeps nothing; a record is durable only when the test says so.
class HoldingJournal final : public ChangeSink {
 public:
  uint64_t Append(std::string_view) override { return ++appended_; }
  uint64_t DurableLsn() const override { return durable_; }
  void WhenDurable(uint64_t lsn, std::function<void(bool)> fn) override {
    if (lsn <= durable_) return fn(true);
    pending_.emplace_back(lsn, std::move(fn));
  }
  bool Writable() const override { return true; }
  std::string Problem() const override { return {}; }

  void MakeDurable() {
    durable_ = appended_;
    auto due = std::exchange(pending_, {});
    for (auto& [lsn, fn] : due) fn(true);
  }
  uint64_t appended() const { return appended_; }

 private:
  uint64_t appended_ = 0;
  uint64_t durable_ = 0;
  std::vector<std::pair<uint64_t, std::function<void(bool)>>> pending_;
};

TEST(ReleasedFetchDurableTest, AReleasedLongPollAnswersItsAcksOnlyOnceTheyAreDurable) {
  FakeClock clock{kT0};
  MemoryBackend backend(clock, {.run_timer = false});
  HoldingJournal journal;
  backend.AttachJournal(&journal);

  bool pushed = false;
  core::JobSpec job;
  job.payload = "1";
  backend.Push("q", {job}, [&](auto r) { pushed = r.ok(); });
  journal.MakeDurable();
  ASSERT_TRUE(pushed);
  std::string lease;
  core::FetchRequest first;
  first.worker = "w";
  backend.Fetch("q", first, [&](auto r) {
    ASSERT_TRUE(r.ok()) << r.message();
    ASSERT_EQ(r->jobs.size(), 1u);
    lease = r->jobs[0].lease;
  });
  journal.MakeDurable();
  ASSERT_FALSE(lease.empty());

  // The worker acks its job and waits for the next: the ack is logged, then the fetch parks.
  auto hangup = std::make_shared<Hangup>();
  std::optional<OpResult<core::FetchAnswer>> answer;
  uint64_t before = journal.appended();
  core::FetchRequest next;
  next.worker = "w";
  next.wait_ms = 60'000;
  next.ack = {lease};
  next.hangup = hangup;
  backend.Fetch("q", next, [&](OpResult<core::FetchAnswer> r) { answer = std::move(r); });
  EXPECT_GT(journal.appended(), before) << "the ack was logged";
  EXPECT_FALSE(answer.has_value()) << "parked";

  // The server drains: the wait is released, and answered only once the ack is safe.
  hangup->Release();
  EXPECT_FALSE(answer.has_value()) << "answered before its ack was durable";
  journal.MakeDurable();
  ASSERT_TRUE(answer.has_value());
  ASSERT_TRUE(answer->ok()) << answer->message();
  EXPECT_TRUE((*answer)->jobs.empty());
  ASSERT_EQ((*answer)->acked.size(), 1u);
  EXPECT_EQ((*answer)->acked_leases, std::vector<std::string>{lease});
  backend.AttachJournal(nullptr);
}

}  // namespace
}  // namespace anteroom::store
