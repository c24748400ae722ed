// core::Queue with groups, limits and fairness: a snapshot taken at any moment restores a queue
// that goes on exactly as the original (the log's replay depends on it: records after a
// snapshot are applied to the restored state).
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/hmac.h"
#include "core/queue.h"

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr uint64_t kSeed = 7;

std::string Saved(const Queue& q) {
  std::string bytes;
  ByteWriter out(bytes);
  q.Save(out);
  return bytes;
}

QueueLimits RandomLimits(std::mt19937_64& rng) {
  QueueLimits l;
  l.fairness = rng() % 2 ? Fairness::kRoundRobin : Fairness::kFifo;
  if (rng() % 2) {
    l.per_group.rate = RateLimit{.limit = 1 + static_cast<int64_t>(rng() % 4),
                                 .period_ms = 50 + static_cast<int64_t>(rng() % 500),
                                 .burst = 1 + static_cast<int64_t>(rng() % 3)};
  }
  if (rng() % 2) l.per_group.concurrency = 1 + static_cast<int64_t>(rng() % 3);
  if (rng() % 3 == 0) l.queue.concurrency = 2 + static_cast<int64_t>(rng() % 6);
  if (rng() % 4 == 0) {
    l.queue.rate = RateLimit{.limit = 5, .period_ms = 100, .burst = 2};
  }
  return l;
}

// Applies one random operation to every queue in `qs` (all at the same state), and checks they
// answer alike.
class Driver {
 public:
  explicit Driver(uint64_t seed) : rng_(seed) {}

  void Step(std::vector<Queue*> qs) {
    now_ += static_cast<int64_t>(rng_() % 4 == 0 ? rng_() % 400 : rng_() % 20);
    uint64_t op = rng_() % 12;
    std::vector<std::string> answers;
    for (Queue* q : qs) answers.push_back(Apply(*q, op));
    for (size_t k = 1; k < answers.size(); ++k) {
      ASSERT_EQ(answers[k], answers[0]) << "op " << op << " at step " << step_;
    }
    Remember(answers[0]);
    ++step_;
  }

 private:
  std::string Apply(Queue& q, uint64_t op) {
    static const std::vector<std::string> kGroups{"", "a", "b", "c", "d", "e"};
    std::mt19937_64 rng = rng_;  // every queue draws the same choices
    std::string out;
    switch (op) {
      case 0:
      case 1:
      case 2: {
        std::vector<JobSpec> jobs(1 + rng() % 3);
        for (JobSpec& j : jobs) {
          j.payload = "p";
          j.group = kGroups[rng() % kGroups.size()];
          j.priority = static_cast<int32_t>(rng() % 2);
          if (rng() % 5 == 0) j.delay_ms = static_cast<int64_t>(rng() % 300);
        }
        for (const PushResult& r : q.Push(jobs, now_)) out += std::to_string(r.id) + ",";
        break;
      }
      case 3:
      case 4:
      case 5: {
        std::string worker = rng() % 2 ? "w1" : "w2";
        for (const Delivery& d : q.Fetch(worker, 1 + rng() % 4, 200 + rng() % 500, now_)) {
          out += std::to_string(d.id) + "/" + std::to_string(d.attempt) + "/" + d.group + "/" +
                 d.lease + ",";
        }
        break;
      }
      case 6:
      case 7:
        if (!leases_.empty()) {
          std::string lease = leases_[rng() % leases_.size()];
          out = ToString(q.Ack(lease, now_));
        }
        break;
      case 8:
        if (!leases_.empty()) {
          std::string lease = leases_[rng() % leases_.size()];
          out = ToString(q.Snooze(*q.ParseLease(lease), static_cast<int64_t>(rng() % 300), now_));
        }
        break;
      case 9:
        if (!leases_.empty()) {
          std::string lease = leases_[rng() % leases_.size()];
          out = ToString(q.Nack(lease, static_cast<int64_t>(rng() % 200), "no", now_));
        }
        break;
      case 10: {
        size_t taken_back = 0;
        for (const Delivery& d : q.Reclaim("w1", 2, 300, now_, taken_back)) {
          out += std::to_string(d.id) + "/" + d.lease + ",";
        }
        out += "#" + std::to_string(taken_back);
        break;
      }
      default:
        if (rng() % 4 == 0) {
          q.Configure(QueueSettings{RandomLimits(rng), {}}, now_);
        } else {
          q.Advance(now_);
        }
    }
    QueueStats s = q.Stats(now_);
    out += fmt_stats(s) + (q.CanDeliver() ? " can" : " cannot") + " next " +
           std::to_string(q.NextAllowedAt());
    return out;
  }
  static std::string fmt_stats(const QueueStats& s) {
    return " r" + std::to_string(s.ready) + " d" + std::to_string(s.delayed) + " i" +
           std::to_string(s.inflight) + " x" + std::to_string(s.dead) + " a" +
           std::to_string(s.acked);
  }
  // The leases handed out so far (ack, nack and snooze pick among them, stale or not).
  void Remember(const std::string& answer) {
    size_t at = 0;
    while ((at = answer.find('/', at)) != std::string::npos) {
      size_t end = answer.find(',', at);
      if (end == std::string::npos) break;
      std::string item = answer.substr(at + 1, end - at - 1);
      size_t slash = item.rfind('/');
      if (slash != std::string::npos) leases_.push_back(item.substr(slash + 1));
      at = end;
    }
    // The driver's own draws move on once per step, whatever the queues did.
    rng_.discard(17);
    if (leases_.size() > 64) leases_.erase(leases_.begin(), leases_.begin() + 32);
  }

  std::mt19937_64 rng_;
  int64_t now_ = kT0;
  int step_ = 0;
  std::vector<std::string> leases_;
};

TEST(QueueGroupsTest, ASnapshotAtAnyMomentGoesOnExactlyAsTheOriginal) {
  Hmac key("queue-groups-test-key-32-bytes!!");
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed * 7919);
    Queue original("q", key, kT0, kSeed);
    original.Configure(QueueSettings{RandomLimits(rng), {}}, kT0);
    Driver driver(seed);
    for (int round = 0; round < 6; ++round) {
      for (int k = 0; k < 40; ++k) {
        driver.Step({&original});
        if (HasFatalFailure()) return;
      }
      Queue restored("q", key, kT0, kSeed);
      std::string bytes = Saved(original);
      ByteReader in(bytes);
      ASSERT_TRUE(restored.Restore(in)) << "round " << round;
      ASSERT_EQ(Saved(restored), bytes) << "a restored queue saves the same bytes";
      // Both go on through the same operations and must answer alike.
      for (int k = 0; k < 40; ++k) {
        driver.Step({&original, &restored});
        if (HasFatalFailure()) return;
      }
      ASSERT_EQ(Saved(restored), Saved(original));
    }
  }
}

}  // namespace
}  // namespace anteroom::core
