// Randomized model-based test: the same random operations and clock jumps go to core::Queue and
// to ReferenceQueue, and every answer is compared. Seeded; the seed is printed on failure and
// can be replayed with ANTEROOM_QUEUE_MODEL_SEED=<seed>.
//
// Leases: the model never computes one. Every lease string the engine hands out is recorded
// with the delivery the model says it names; acks, nacks and extends pick one of them (mostly a
// recent one, so mostly current) and give the string to the engine and the delivery to the
// model. A forged lease is a recorded one with one character changed, or one signed for another
// queue; the model is told it is forged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/hmac.h"
#include "core/queue.h"
#include "queue_reference_model.h"

namespace anteroom {
namespace {

using core::LeaseOutcome;
using testing::ReferenceQueue;

constexpr int kRuns = 80;
constexpr int kOpsPerRun = 1'300;  // 80 x 1300 = 104k operations per CI run
constexpr int kWorkers = 4;

struct Rng {
  std::mt19937_64 gen;
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
  bool Chance(int percent) { return Uniform(0, 99) < percent; }
};

// The current operation, for failure messages (a fixed buffer: nothing allocated per step).
struct Where {
  char text[256] = {};
  size_t len = 0;
  __attribute__((format(printf, 2, 3))) void Add(const char* format, ...) {
    va_list args;
    va_start(args, format);
    int n = std::vsnprintf(text + len, sizeof(text) - len, format, args);
    va_end(args);
    if (n > 0) len = std::min(sizeof(text) - 1, len + static_cast<size_t>(n));
  }
};
std::ostream& operator<<(std::ostream& os, const Where& w) { return os << w.text; }

struct Issued {
  std::string lease;
  ReferenceQueue::DeliveryRef ref;
};

struct Totals {
  ReferenceQueue::Seen seen;
  int64_t max_dead = 0;
  int64_t max_ready = 0;
  int64_t forged = 0;
  int64_t acked = 0;
  int64_t requeued = 0;
  int64_t cancelled = 0;
  int64_t looked_up = 0;
};

std::string Name(LeaseOutcome o) { return core::ToString(o); }

int CancelCode(core::CancelOutcome o) { return static_cast<int>(o); }

void ExpectSameStats(const core::QueueStats& got, const core::QueueStats& want, const char* where) {
  EXPECT_EQ(got.waiting, want.waiting) << where;
  EXPECT_EQ(got.ready, want.ready) << where;
  EXPECT_EQ(got.delayed, want.delayed) << where;
  EXPECT_EQ(got.inflight, want.inflight) << where;
  EXPECT_EQ(got.dead, want.dead) << where;
  EXPECT_EQ(got.pushed, want.pushed) << where;
  EXPECT_EQ(got.acked, want.acked) << where;
  EXPECT_EQ(got.nacked, want.nacked) << where;
  EXPECT_EQ(got.expired, want.expired) << where;
  EXPECT_EQ(got.cancelled, want.cancelled) << where;
  EXPECT_EQ(got.workers, want.workers) << where;
  EXPECT_EQ(got.paused, want.paused) << where;
  EXPECT_EQ(got.pushed, got.acked + got.waiting + got.ready + got.delayed + got.inflight +
                            got.dead + got.cancelled)
      << where << " (accounting identity)";
}

void ExpectSameInflight(const std::vector<core::InflightJob>& got,
                        const std::vector<core::InflightJob>& want, const char* where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << where << " #" << i;
    EXPECT_EQ(got[i].worker, want[i].worker) << where << " #" << i;
    EXPECT_EQ(got[i].attempt, want[i].attempt) << where << " #" << i;
    EXPECT_EQ(got[i].lease_expires_ms, want[i].lease_expires_ms) << where << " #" << i;
  }
}

void ExpectSameView(const std::optional<core::JobView>& got,
                    const std::optional<core::JobView>& want, const std::string& where) {
  ASSERT_EQ(got.has_value(), want.has_value()) << where;
  if (!got) return;
  EXPECT_EQ(core::ToString(got->state), core::ToString(want->state)) << where;
  EXPECT_EQ(got->payload, want->payload) << where;
  EXPECT_EQ(got->priority, want->priority) << where;
  EXPECT_EQ(got->attempts, want->attempts) << where;
  EXPECT_EQ(got->max_attempts, want->max_attempts) << where;
  EXPECT_EQ(got->due_ms, want->due_ms) << where;
  EXPECT_EQ(got->finished_ms, want->finished_ms) << where;
  EXPECT_EQ(got->progress, want->progress) << where;
  EXPECT_EQ(got->result, want->result) << where;
  EXPECT_EQ(got->log, want->log) << where;
  EXPECT_EQ(got->log_dropped, want->log_dropped) << where;
  EXPECT_EQ(got->depends_on, want->depends_on) << where;
  EXPECT_EQ(got->waiting_on, want->waiting_on) << where;
  ASSERT_EQ(got->history.size(), want->history.size()) << where;
  for (size_t k = 0; k < got->history.size(); ++k) {
    EXPECT_EQ(got->history[k].error, want->history[k].error) << where << " h" << k;
    EXPECT_EQ(got->history[k].at_ms, want->history[k].at_ms) << where << " h" << k;
  }
}

void ExpectSameDead(const std::vector<core::DeadJob>& got, const std::vector<core::DeadJob>& want,
                    const char* where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << where << " dead #" << i;
    EXPECT_EQ(got[i].payload, want[i].payload) << where << " dead #" << i;
    EXPECT_EQ(got[i].attempts, want[i].attempts) << where << " dead #" << i;
    EXPECT_EQ(got[i].error, want[i].error) << where << " dead #" << i;
    EXPECT_EQ(got[i].failed_at_ms, want[i].failed_at_ms) << where << " dead #" << i;
    ASSERT_EQ(got[i].history.size(), want[i].history.size()) << where << " dead #" << i;
    for (size_t k = 0; k < got[i].history.size(); ++k) {
      EXPECT_EQ(got[i].history[k].attempt, want[i].history[k].attempt)
          << where << " dead #" << i << " h" << k;
      EXPECT_EQ(got[i].history[k].error, want[i].history[k].error)
          << where << " dead #" << i << " h" << k;
      EXPECT_EQ(got[i].history[k].at_ms, want[i].history[k].at_ms)
          << where << " dead #" << i << " h" << k;
    }
  }
}

// Heartbeat ttls are chosen so that each worker's deadline falls on its own residue mod
// kWorkers: two workers never go silent at the same ms (the engine does not order those).
int64_t TtlFor(Rng& rng, int worker, int64_t now) {
  int64_t ttl = rng.Uniform(150, 4'000);
  int64_t r = ((worker - (now + ttl)) % kWorkers + kWorkers) % kWorkers;
  return ttl + r;
}

// A delay or lease from a coarse grid half of the time, so that deadlines often coincide.
int64_t Duration(Rng& rng, int64_t lo, int64_t hi) {
  if (rng.Chance(50)) return lo + 100 * rng.Uniform(0, (hi - lo) / 100);
  return rng.Uniform(lo, hi);
}

// Runs one seeded sequence; returns false at the first disagreement.
bool RunOne(uint64_t seed, Totals& totals) {
  Rng rng{std::mt19937_64(seed)};
  int64_t now = 1'700'000'000'000 + rng.Uniform(0, 999);
  core::Hmac key("test-secret");
  const uint64_t jitter_seed = seed * 7 + 1;
  core::Queue queue("q", key, now, jitter_seed);
  core::Queue other_queue("other", key, now, jitter_seed);
  ReferenceQueue model(now, jitter_seed);

  std::vector<Issued> issued;  // every lease handed out (the latest few hundred)
  std::vector<Issued> open;    // those the test has not acked or nacked yet
  bool paused = false;
  core::JobId max_id = 0;
  // Some runs keep few priorities and no delays (long FIFO chains), some are busy with workers.
  const bool flat = rng.Chance(30);
  const int32_t max_attempts_hi = static_cast<int32_t>(rng.Uniform(1, 6));
  // Finished jobs kept: none, a few (trimmed by count), or many (trimmed by age).
  core::KeepFinished keep;
  keep.count = rng.Chance(15) ? 0 : rng.Chance(50) ? rng.Uniform(1, 30) : 1'000;
  keep.age_ms = rng.Chance(50) ? Duration(rng, 100, 20'000) : 86'400'000;
  queue.Configure(core::QueueSettings{{}, keep}, now);
  model.Keep(keep, now);

  for (int op = 0; op < kOpsPerRun; ++op) {
    int r = static_cast<int>(rng.Uniform(0, 999));
    // Time: mostly small steps, sometimes none, sometimes a jump past every deadline.
    if (r < 300) {
      now += 0;
    } else if (r < 900) {
      now += rng.Uniform(1, 200);
    } else if (r < 980) {
      now += rng.Uniform(200, 3'000);
    } else if (r < 998) {
      now += rng.Uniform(5'000, 60'000);
    } else {
      now += rng.Uniform(3'600'000, 4'000'000);  // past the memory of acks
    }
    int w = static_cast<int>(rng.Uniform(0, kWorkers - 1));
    std::string worker = "w" + std::to_string(w);
    Where where;
    where.Add("seed %llu op %d", static_cast<unsigned long long>(seed), op);
    // Mostly a lease not yet acked or nacked (current unless it ran out), else any (likely
    // stale or already acked).
    auto pick = [&](bool consume) -> Issued {
      if (open.empty() || rng.Chance(25)) return issued[rng.Uniform(0, issued.size() - 1)];
      size_t i = open.size() - 1 - rng.Uniform(0, std::min<int64_t>(open.size(), 8) - 1);
      Issued l = open[i];
      if (consume) open.erase(open.begin() + static_cast<ptrdiff_t>(i));
      return l;
    };
    int kind = static_cast<int>(rng.Uniform(0, 99));
    if (paused && rng.Chance(10)) kind = 88;  // pauses are short
    if (kind < 15) {
      std::vector<core::JobSpec> batch(rng.Chance(70) ? 1 : rng.Uniform(2, 4));
      const int64_t batch_delay = Duration(rng, 1, 3'000);  // jobs due at the same ms
      for (size_t i = 0; i < batch.size(); ++i) {
        core::JobSpec& s = batch[i];
        s.payload = "p" + std::to_string(op) + "." + std::to_string(i);
        s.priority = flat ? 0 : static_cast<int32_t>(rng.Uniform(-1, 2));
        if (!flat && rng.Chance(30))
          s.delay_ms = rng.Chance(50) ? batch_delay : Duration(rng, 1, 3'000);
        if (rng.Chance(20)) s.dedupe_key = "k" + std::to_string(rng.Uniform(0, 7));
        s.max_attempts = rng.Chance(20) ? core::kDefaultMaxAttempts
                                        : static_cast<int32_t>(rng.Uniform(1, max_attempts_hi));
        // Waiting on recent jobs (some settled, some not pushed yet: missing).
        if (rng.Chance(20)) {
          int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(max_id) - 12);
          for (int64_t n = rng.Uniform(1, 3); n > 0; --n) {
            s.depends_on.push_back(
                static_cast<core::JobId>(rng.Uniform(lo, static_cast<int64_t>(max_id) + 2)));
          }
          s.ignore_failed_dependencies = rng.Chance(30);
        }
      }
      where.Add(" push x%zu", batch.size());
      std::vector<core::PushResult> got = queue.Push(batch, now);
      std::vector<core::PushResult> want = model.Push(batch, now);
      EXPECT_EQ(got.size(), want.size()) << where;
      for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        EXPECT_EQ(got[i].id, want[i].id) << where << " #" << i;
        EXPECT_EQ(got[i].created, want[i].created) << where << " #" << i;
        max_id = std::max(max_id, got[i].id);
      }
    } else if (kind < 34) {
      size_t max = static_cast<size_t>(rng.Chance(10) ? 0 : rng.Chance(60) ? 1 : rng.Uniform(2, 4));
      int64_t lease_ms = rng.Chance(25) ? Duration(rng, 100, 1'000) : Duration(rng, 1'000, 15'000);
      // Now and then a worker starting again under its name (FetchRequest::reclaim).
      bool reclaim = rng.Chance(8);
      where.Add(" fetch %s max %zu%s", worker.c_str(), max, reclaim ? " reclaim" : "");
      std::vector<core::Delivery> got;
      std::vector<ReferenceQueue::Fetched> want;
      if (reclaim) {
        size_t got_back = 0;
        size_t want_back = 0;
        got = queue.Reclaim(worker, max, lease_ms, now, got_back);
        want = model.Reclaim(worker, max, lease_ms, now, want_back);
        EXPECT_EQ(got_back, want_back) << where;
      } else {
        got = queue.Fetch(worker, max, lease_ms, now);
        want = model.Fetch(worker, max, lease_ms, now);
      }
      EXPECT_EQ(got.size(), want.size()) << where;
      for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
        const core::Delivery& w2 = want[i].delivery;
        EXPECT_EQ(got[i].id, w2.id) << where << " #" << i;
        EXPECT_EQ(got[i].payload, w2.payload) << where << " #" << i;
        EXPECT_EQ(got[i].attempt, w2.attempt) << where << " #" << i;
        EXPECT_EQ(got[i].priority, w2.priority) << where << " #" << i;
        EXPECT_EQ(got[i].lease_expires_ms, w2.lease_expires_ms) << where << " #" << i;
        issued.push_back({got[i].lease, want[i].ref});
        open.push_back(issued.back());
      }
    } else if (kind < 58 && !issued.empty()) {
      Issued l = pick(true);
      std::string result = rng.Chance(50) ? "{\"r\":" + std::to_string(op) + "}" : "";
      where.Add(" ack %s %s", l.lease.c_str(), result.c_str());
      EXPECT_EQ(Name(queue.Ack(l.lease, now, result)), Name(model.Ack(l.ref, now, result)))
          << where;
    } else if (kind < 67 && !issued.empty()) {
      Issued l = pick(true);
      std::optional<int64_t> delay;
      if (rng.Chance(60)) delay = rng.Chance(40) ? 0 : Duration(rng, 1, 3'000);
      std::string error = "e" + std::to_string(op);
      where.Add(" nack %s", l.lease.c_str());
      EXPECT_EQ(Name(queue.Nack(l.lease, delay, error, now)),
                Name(model.Nack(l.ref, delay, error, now)))
          << where;
    } else if (kind < 70 && !issued.empty()) {
      Issued l = pick(false);
      std::string progress = std::to_string(op);
      where.Add(" progress %s", l.lease.c_str());
      std::optional<core::LeaseRef> ref = queue.ParseLease(l.lease);
      if (!ref) return false;  // the test issued it: it parses
      EXPECT_EQ(Name(queue.SetProgress(*ref, progress, now)),
                Name(model.SetProgress(l.ref, progress, now)))
          << where;
    } else if (kind < 71 && !issued.empty()) {
      Issued l = pick(false);
      std::vector<std::string> lines(static_cast<size_t>(rng.Uniform(1, 40)),
                                     "l" + std::to_string(op));
      if (rng.Chance(10)) lines.back() = std::string(2'000, 'x');
      where.Add(" log %s x%zu", l.lease.c_str(), lines.size());
      std::optional<core::LeaseRef> ref = queue.ParseLease(l.lease);
      if (!ref) return false;  // the test issued it: it parses
      EXPECT_EQ(Name(queue.AppendLog(*ref, lines, now)), Name(model.AppendLog(l.ref, lines, now)))
          << where;
    } else if (kind < 72 && !issued.empty()) {
      Issued l = pick(false);
      int64_t lease_ms = rng.Chance(25) ? Duration(rng, 100, 1'000) : Duration(rng, 1'000, 15'000);
      where.Add(" extend %s", l.lease.c_str());
      EXPECT_EQ(Name(queue.Extend(l.lease, lease_ms, now)),
                Name(model.Extend(l.ref, lease_ms, now)))
          << where;
    } else if (kind < 74 && !issued.empty()) {
      // A forged lease: one character of a recorded one changed, or signed for another queue.
      Issued l = pick(false);
      std::string forged = l.lease;
      if (rng.Chance(20)) {
        forged = other_queue.LeaseFor(l.ref.id, l.ref.delivery);
      } else {
        size_t pos = static_cast<size_t>(rng.Uniform(0, forged.size() - 1));
        char c = forged[pos];
        const std::string alphabet = "0123456789.ABCxyz-_";
        while (forged[pos] == c) forged[pos] = alphabet[rng.Uniform(0, alphabet.size() - 1)];
      }
      ++totals.forged;
      where.Add(" forged %s", forged.c_str());
      int which = static_cast<int>(rng.Uniform(0, 2));
      LeaseOutcome got = which == 0   ? queue.Ack(forged, now)
                         : which == 1 ? queue.Nack(forged, std::nullopt, "x", now)
                                      : queue.Extend(forged, 1'000, now);
      LeaseOutcome want = which == 0   ? model.Ack(std::nullopt, now)
                          : which == 1 ? model.Nack(std::nullopt, std::nullopt, "x", now)
                                       : model.Extend(std::nullopt, 1'000, now);
      EXPECT_EQ(Name(got), Name(want)) << where;
    } else if (kind < 80) {
      int64_t ttl = TtlFor(rng, w, now);
      where.Add(" heartbeat %s", worker.c_str());
      queue.Heartbeat(worker, ttl, now);
      model.Heartbeat(worker, ttl, now);
    } else if (kind < 82) {
      where.Add(" release %s", worker.c_str());
      EXPECT_EQ(queue.ReleaseWorker(worker, now), model.ReleaseWorker(worker, now)) << where;
    } else if (kind < 86) {
      core::JobId id = static_cast<core::JobId>(rng.Uniform(1, static_cast<int64_t>(max_id) + 1));
      where.Add(" cancel %llu", static_cast<unsigned long long>(id));
      core::CancelOutcome got = queue.Cancel(id, now);
      EXPECT_EQ(CancelCode(got), CancelCode(model.Cancel(id, now))) << where;
      if (got == core::CancelOutcome::kCancelled) ++totals.cancelled;
    } else if (kind < 88) {
      std::optional<std::vector<core::JobId>> ids;
      if (rng.Chance(50)) {
        ids.emplace();
        for (int64_t n = rng.Uniform(0, 4); n > 0; --n) {
          ids->push_back(
              static_cast<core::JobId>(rng.Uniform(1, static_cast<int64_t>(max_id) + 1)));
        }
      }
      where.Add(ids ? " requeue ids" : " requeue all");
      size_t got = queue.RequeueDead(ids, now);
      EXPECT_EQ(got, model.RequeueDead(ids, now)) << where;
      totals.requeued += static_cast<int64_t>(got);
    } else if (kind < 90) {
      paused = !paused && rng.Chance(60);
      where.Add(paused ? " pause" : " resume");
      queue.SetPaused(paused, now);
      model.SetPaused(paused, now);
    } else if (kind < 92) {
      std::optional<std::string> who;
      if (rng.Chance(70)) who = worker;
      where.Add(" inflight %s", who ? who->c_str() : "(all)");
      ExpectSameInflight(queue.Inflight(who, now), model.Inflight(who, now), where.text);
    } else if (kind < 94) {
      size_t limit = static_cast<size_t>(rng.Uniform(0, 50));
      where.Add(" dead %zu", limit);
      ExpectSameDead(queue.Dead(limit, now), model.Dead(limit, now), where.text);
    } else {
      where.Add(" advance");
      queue.Advance(now);
      model.Advance(now);
    }
    // Queue-level state after every operation.
    core::QueueStats s = queue.Stats(now);
    ExpectSameStats(s, model.Stats(now), where.text);
    EXPECT_EQ(queue.NextDeadline(), model.NextDeadline()) << where;
    EXPECT_EQ(queue.CanDeliver(), model.CanDeliver()) << where;
    {
      core::JobId id = static_cast<core::JobId>(rng.Uniform(1, static_cast<int64_t>(max_id) + 1));
      std::optional<core::JobView> got = queue.Lookup(id, now);
      std::optional<core::JobView> want = model.Lookup(id, now);
      ExpectSameView(got, want, std::string(where.text) + " lookup " + std::to_string(id));
      if (got) ++totals.looked_up;
      EXPECT_EQ(queue.Dependencies(id, now), model.Dependencies(id, now))
          << where << " deps " << id;
    }
    if (op % 256 == 255) {
      // A snapshot restores the same queue: it saves the same bytes and shows every job alike.
      std::string saved;
      ByteWriter out(saved);
      queue.Save(out);
      core::Queue copy("q", key, now, jitter_seed);
      ByteReader in(saved);
      EXPECT_TRUE(copy.Restore(in)) << where;
      if (::testing::Test::HasFailure()) return false;
      std::string again;
      ByteWriter out2(again);
      copy.Save(out2);
      EXPECT_TRUE(saved == again) << where << ": a restored queue saves other bytes";
      for (core::JobId id = 1; id <= max_id; ++id) {
        ExpectSameView(copy.Lookup(id, now), queue.Lookup(id, now),
                       std::string(where.text) + " restored " + std::to_string(id));
      }
    }
    if (op % 32 == 0) {
      where.Add(" (then all in flight and all dead)");
      ExpectSameInflight(queue.Inflight(std::nullopt, now), model.Inflight(std::nullopt, now),
                         where.text);
      ExpectSameDead(queue.Dead(SIZE_MAX, now), model.Dead(SIZE_MAX, now), where.text);
    }
    if (::testing::Test::HasFailure()) return false;
    totals.max_dead = std::max(totals.max_dead, s.dead);
    totals.max_ready = std::max(totals.max_ready, s.ready);
    // Keep the record of leases short: old ones are long stale, a sample is enough.
    if (issued.size() > 512) issued.erase(issued.begin(), issued.begin() + 256);
    if (open.size() > 64) open.erase(open.begin(), open.begin() + 32);
  }
  totals.acked += queue.Stats(now).acked;
  const ReferenceQueue::Seen& seen = model.seen();
  totals.seen.redeliveries += seen.redeliveries;
  totals.seen.buried += seen.buried;
  totals.seen.expiries += seen.expiries;
  totals.seen.heartbeat_deaths += seen.heartbeat_deaths;
  totals.seen.same_ms_groups += seen.same_ms_groups;
  totals.seen.repeated_acks += seen.repeated_acks;
  totals.seen.lease_lost += seen.lease_lost;
  totals.seen.dedupe_hits += seen.dedupe_hits;
  totals.seen.forgotten_acks += seen.forgotten_acks;
  totals.seen.finished += seen.finished;
  totals.seen.released += seen.released;
  totals.seen.failed_by_dependency += seen.failed_by_dependency;
  totals.seen.forgotten_finished += seen.forgotten_finished;
  return true;
}

TEST(QueueModelTest, EngineAgreesWithReferenceModel) {
  uint64_t base = std::random_device{}();
  if (const char* fixed = std::getenv("ANTEROOM_QUEUE_MODEL_SEED")) base = std::stoull(fixed);
  Totals t;
  for (int run = 0; run < kRuns; ++run) {
    uint64_t seed = base + static_cast<uint64_t>(run);
    ASSERT_TRUE(RunOne(seed, t)) << "replay with ANTEROOM_QUEUE_MODEL_SEED=" << seed;
  }
  const ReferenceQueue::Seen& s = t.seen;
  auto L = [](int64_t v) { return static_cast<long long>(v); };
  std::printf(
      "queue model test: %d operations from seed %llu; acked %lld, redelivered %lld, expired "
      "%lld (%lld by heartbeat), buried %lld (max dead %lld), requeued %lld, cancelled %lld, "
      "same-ms groups %lld, repeated acks %lld, lease_lost %lld, forged %lld, dedupe hits %lld, "
      "forgotten acks %lld; longest ready list %lld\n",
      kRuns * kOpsPerRun, static_cast<unsigned long long>(base), L(t.acked), L(s.redeliveries),
      L(s.expiries), L(s.heartbeat_deaths), L(s.buried), L(t.max_dead), L(t.requeued),
      L(t.cancelled), L(s.same_ms_groups), L(s.repeated_acks), L(s.lease_lost), L(t.forged),
      L(s.dedupe_hits), L(s.forgotten_acks), L(t.max_ready));
  // The random walk must reach the interesting states, or agreement proves little.
  EXPECT_GT(t.acked, 4'000);
  EXPECT_GT(s.redeliveries, 2'000);
  EXPECT_GT(s.expiries, 2'000);
  EXPECT_GT(s.heartbeat_deaths, 100);
  EXPECT_GT(s.buried, 500);
  EXPECT_GT(t.max_dead, 10);
  EXPECT_GT(t.requeued, 100);
  EXPECT_GT(t.cancelled, 100);
  EXPECT_GT(s.same_ms_groups, 500);
  EXPECT_GT(s.repeated_acks, 100);
  EXPECT_GT(s.lease_lost, 1'000);
  EXPECT_GT(s.dedupe_hits, 100);
  EXPECT_GT(s.forgotten_acks, 10);
  std::printf("finished jobs kept %lld, forgotten %lld; lookups that found a job %lld\n",
              L(s.finished), L(s.forgotten_finished), L(t.looked_up));
  EXPECT_GT(s.finished, 1'000);
  EXPECT_GT(s.forgotten_finished, 500);
  EXPECT_GT(t.looked_up, 10'000);
  std::printf("jobs that waited and were released %lld, failed by a dependency %lld\n",
              L(s.released), L(s.failed_by_dependency));
  EXPECT_GT(s.released, 500);
  EXPECT_GT(s.failed_by_dependency, 200);
}

}  // namespace
}  // namespace anteroom
