// Randomized test of durability's central claim: replaying the change records, with their
// times, through the same core calls rebuilds exactly the state that made them, from the start
// or from any snapshot taken on the way (up to when sessions were last seen: check-ins that
// only refresh presence are not logged, so both sides are compared as a restart leaves them,
// everyone present seen at the same moment). Random room and queue operations (long polls, expiry
// by the timer, forged and stale leases, dedupe, dead letters, pauses, queue keys) go to a
// memory backend whose journal keeps the records in memory; at random moments its state is
// snapshotted. At the end, for the start and every snapshot, a fresh backend loads the
// snapshot, replays the records after it, and must write byte-for-byte the same state
// (SaveState is canonical).
//
// Seeded; the seed is printed on failure and can be replayed with ANTEROOM_REPLAY_MODEL_SEED.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "common/clock.h"
#include "keeping_journal.h"
#include "store/memory/change_record.h"
#include "store/memory/change_sink.h"
#include "store/memory/memory_backend.h"

namespace anteroom::store {
namespace {

constexpr int kRuns = 30;
constexpr int kOpsPerRun = 1'500;

struct Cut {
  std::string state;
  size_t records = 0;
};

std::string Save(const MemoryBackend& b) {
  std::string out;
  ByteWriter w(out);
  b.SaveState(w);
  return out;
}

// Processes every deadline up to the clock's time in every room and queue (reads advance).
void AdvanceAll(MemoryBackend& b, int rooms, int queues) {
  for (int r = 0; r < rooms; ++r) b.GetRoom("r" + std::to_string(r), [](auto) {});
  for (int q = 0; q < queues; ++q) b.GetQueue("q" + std::to_string(q), [](auto) {});
}

class Walk {
 public:
  explicit Walk(uint64_t seed)
      // A small client table, so joins are refused for it too (replay, with the default
      // table, must not refuse what was accepted: recorded checks are never refused again).
      : rng_(seed),
        backend_(clock_, {.token_ttl_ms = 5'000,
                          .run_timer = false,
                          .max_clients_per_room = 2,
                          .draw_chunk = 3}) {  // draws span several turns of the timer
    backend_.AttachJournal(&journal_);
  }
  ~Walk() { backend_.AttachJournal(nullptr); }

  int64_t U(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool Chance(int percent) { return U(0, 99) < percent; }
  std::string Pick(const char* prefix, int n) { return prefix + std::to_string(U(0, n - 1)); }

  void Run(int ops) {
    // Every queue exists through a push first: a long poll on a never-pushed name creates a
    // hidden, empty queue without a record (it holds nothing, so nothing needs replaying).
    for (int q = 0; q < kQueues; ++q) Push("q" + std::to_string(q));
    for (int i = 0; i < ops; ++i) {
      int op = static_cast<int>(U(0, 111));
      if (op >= 100) {
        LaunchOp(op - 100);
      } else if (op < 8) {
        PutRoom();
      } else if (op < 20) {
        backend_.Check(Pick("r", kRooms), Pick("s", 16), [](auto) {});
      } else if (op < 30) {
        core::Arrival arrival{.client = Chance(80) ? Pick("c", 4) : "", .proof_bits = U(0, 3)};
        backend_.Check(Pick("r", kRooms), Pick("s", 16), arrival, [](auto) {});
      } else if (op < 32) {
        backend_.Touch(Pick("r", kRooms), Pick("s", 16), [](auto) {});
      } else if (op < 34) {
        backend_.Present(Pick("r", kRooms), {Pick("s", 16), Pick("s", 16)}, [](auto) {});
      } else if (op < 38) {
        backend_.Leave(Pick("r", kRooms), Pick("s", 16), Chance(30), [](auto) {});
      } else if (op < 40) {
        backend_.EndSession(Pick("r", kRooms), Pick("s", 16), [](auto) {});
      } else if (op < 41) {
        backend_.DeleteRoom(Pick("r", kRooms), [](auto) {});
      } else if (op < 52) {
        Push(Pick("q", kQueues));
      } else if (op < 64) {
        Fetch();
      } else if (op < 72) {
        LeaseOp(0);
      } else if (op < 76) {
        LeaseOp(1);
      } else if (op < 77) {
        LeaseOp(2);
      } else if (op < 78) {
        LeaseOp(Chance(50) ? 3 : 4);
      } else if (op < 81) {
        backend_.Heartbeat(Pick("q", kQueues), Pick("w", 4), U(100, 2'000), [](auto) {});
      } else if (op < 82) {
        backend_.ReleaseWorker(Pick("q", kQueues), Pick("w", 4), [](auto) {});
      } else if (op < 84) {
        std::optional<std::vector<core::JobId>> ids;
        if (Chance(50)) ids = std::vector<core::JobId>{static_cast<core::JobId>(U(1, 60))};
        backend_.RequeueDead(Pick("q", kQueues), ids, [](auto) {});
      } else if (op < 85) {
        backend_.Cancel(Pick("q", kQueues), static_cast<core::JobId>(U(1, 60)), [](auto) {});
      } else if (op < 86) {
        if (Chance(80)) {
          backend_.SetPaused(Pick("q", kQueues), Chance(40), [](auto) {});
        } else {  // finished jobs kept: few, briefly, or none
          core::QueueSettings settings;
          settings.keep_acked = {.count = U(0, 8), .age_ms = U(1, 5'000)};
          backend_.SetQueueSettings(Pick("q", kQueues), settings, [](auto) {});
        }
      } else if (op < 87) {
        if (Chance(50)) {
          SetQueueKey();
        } else if (Chance(50)) {  // a batch with callbacks (its id may be taken: refused)
          core::BatchSpec spec;
          core::JobSpec callback;
          callback.payload = "\"cb\"";
          if (Chance(60)) spec.on_success = callback;
          if (Chance(60)) spec.on_complete = callback;
          if (Chance(60)) spec.on_dead = callback;
          backend_.CreateBatch(Pick("q", kQueues), Pick("b", 3), std::move(spec), [](auto) {});
        } else {
          backend_.SealBatch(Pick("q", kQueues), Pick("b", 3), [](auto) {});
        }
      } else if (op < 97) {
        clock_.Advance(U(0, 700));
        backend_.RunDue();
      } else {
        cuts_.push_back({Save(backend_), journal_.records.size()});
      }
    }
    clock_.Advance(U(0, 3'000));
    backend_.RunDue();
  }

  void Check(uint64_t seed) {
    AdvanceAll(backend_, kRooms, kQueues);
    // Check-in times are not logged: a restart counts everyone present as seen at restart
    // time. Compared after the same on the live side (which logs nothing).
    backend_.FinishRecovery();
    std::string expected = Save(backend_);
    cuts_.insert(cuts_.begin(), Cut{});  // from the very start: no snapshot
    for (size_t c = 0; c < cuts_.size(); ++c) {
      FakeClock clock(clock_.NowMs());
      MemoryBackend replayed(clock, {.token_ttl_ms = 5'000, .run_timer = false});
      replayed.StartReplay();
      if (!cuts_[c].state.empty()) {
        ByteReader in(cuts_[c].state);
        ASSERT_TRUE(replayed.LoadState(in)) << "seed " << seed << " cut " << c;
      }
      for (size_t i = cuts_[c].records; i < journal_.records.size(); ++i) {
        OpResult<Done> r = replayed.Replay(journal_.records[i]);
        ASSERT_TRUE(r.ok()) << "seed " << seed << " cut " << c << " record " << i << ": "
                            << r.message() << "\nthe records before it: " << Describe(i);
      }
      AdvanceAll(replayed, kRooms, kQueues);
      replayed.FinishRecovery();
      ASSERT_EQ(Save(replayed), expected)
          << "seed " << seed << ": state replayed from cut " << c << " (after record "
          << cuts_[c].records << " of " << journal_.records.size() << ") differs";
    }
    EXPECT_GT(journal_.records.size(), 500u) << "seed " << seed;
    size_t expiries = 0;
    for (const auto& record : journal_.records) {
      expiries += static_cast<ChangeKind>(record[0]) == ChangeKind::kSeenExpired;
    }
    EXPECT_GT(expiries, 5u) << "seed " << seed << ": presence expiries come from the log";
    size_t seeds = 0, steps = 0;
    for (const auto& record : journal_.records) {
      seeds += static_cast<ChangeKind>(record[0]) == ChangeKind::kDrawSeed;
      steps += static_cast<ChangeKind>(record[0]) == ChangeKind::kDrawStep;
    }
    draws_ += seeds;
    draw_steps_ += steps;
  }

  // The kinds, times and names of the records up to `i`, for a failure's message.
  std::string Describe(size_t i) const {
    std::string out;
    for (size_t k = i >= 25 ? i - 25 : 0; k <= i && k < journal_.records.size(); ++k) {
      ByteReader r(journal_.records[k]);
      ChangeHead head;
      if (!DecodeHead(r, head)) continue;
      out += "\n  #" + std::to_string(k) + " kind " + std::to_string(static_cast<int>(head.kind)) +
             " at " + std::to_string(head.now_ms) + " " + std::string(head.name);
    }
    return out;
  }

  size_t leases_issued() const { return issued_; }
  size_t draws() const { return draws_; }
  size_t draw_steps() const { return draw_steps_; }

 private:
  static constexpr int kRooms = 3;
  static constexpr int kQueues = 2;

  void PutRoom() {
    core::RoomPatch p;
    p.capacity = U(1, 4);
    if (Chance(50)) p.grace_ms = U(0, 2'000);
    if (Chance(50)) p.checkin_timeout_ms = U(100, 3'000);
    if (Chance(30))
      p.idle_timeout_ms = Chance(50) ? std::optional<int64_t>(U(200, 4'000)) : std::nullopt;
    if (Chance(30))
      p.admit_per_minute = Chance(50) ? std::optional<int64_t>(U(1, 5)) : std::nullopt;
    if (Chance(30)) p.paused = Chance(40);
    if (Chance(20)) {
      p.target_url.emplace();  // set, or (half the time) cleared
      if (Chance(50)) *p.target_url = "/shop/" + std::to_string(U(0, 99));
    }
    auto maybe = [&](int64_t lo, int64_t hi) {
      return Chance(60) ? std::optional<int64_t>(U(lo, hi)) : std::nullopt;
    };
    if (Chance(30)) p.joins_per_minute_per_client = maybe(1, 6);
    if (Chance(30)) p.places_per_client = maybe(1, 3);
    if (Chance(15)) p.challenge_difficulty = maybe(1, 2);
    if (Chance(40)) p.notify_at_position = maybe(1, 3);
    if (Chance(20)) {
      p.gate.emplace();  // set, or (a third of the time) cleared
      if (Chance(67)) *p.gate = R"({"cookie":"g)" + std::to_string(U(0, 9)) + "\"}";
    }
    backend_.PutRoom(Pick("r", kRooms), p, [](auto) {});
  }

  // Launch day: events (pre-queues drawn at their start, overrides), method switches (the brake
  // with include_active), passes minted, redeemed (or refused) and revoked.
  void LaunchOp(int kind) {
    std::string room = Pick("r", kRooms);
    int64_t now = clock_.NowMs();
    switch (kind) {
      case 0:
      case 1:
      case 2: {
        core::EventSpec e;
        e.name = "e";
        if (Chance(80)) e.prequeue_at = now + U(-500, 1'000);
        e.starts_at = e.prequeue_at.value_or(now) + U(0, 2'000);
        e.ends_at = e.starts_at + U(1, 5'000);
        e.shuffle_at_start = Chance(70);
        e.prequeue_scope = Chance(25) ? core::PrequeueScope::kAll : core::PrequeueScope::kNew;
        e.suspended = Chance(10);
        if (Chance(50)) e.overrides.capacity = U(1, 5);
        if (Chance(30)) e.overrides.queueing_method = static_cast<core::QueueingMethod>(U(0, 4));
        if (Chance(20)) e.overrides.checkin_timeout_ms = U(200, 3'000);
        backend_.PutEvent(room, Pick("e", 3), e, [](auto) {});
        break;
      }
      case 3:
        backend_.DeleteEvent(room, Pick("e", 3), [](auto) {});
        break;
      case 4:
      case 5: {
        core::RoomPatch p;
        p.queueing_method = static_cast<core::QueueingMethod>(U(0, 4));
        p.include_active = p.queueing_method == core::QueueingMethod::kQueueAll && Chance(50);
        backend_.PutRoom(room, p, [](auto) {});
        break;
      }
      case 6: {
        core::PassMint mint{
            .kind = Chance(50) ? core::PassKind::kAdmit : core::PassKind::kFront,
            .uses = U(1, 3),
            .expires_at = Chance(30) ? std::optional<int64_t>(now + U(0, 3'000)) : std::nullopt,
            .count = U(1, 2)};
        backend_.MintPasses(
            room, mint,
            [this](const OpResult<std::vector<core::MintedPass>>& minted) { KeepCodes(minted); });
        break;
      }
      case 7:
      case 8:
      case 9: {
        if (codes_.empty()) break;
        std::string code = codes_[static_cast<size_t>(U(0, codes_.size() - 1))];
        if (Chance(10)) code.back() = code.back() == 'A' ? 'B' : 'A';  // a wrong one
        core::Arrival arrival{.client = "", .proof_bits = 3, .pass = code};
        backend_.Check(room, Pick("s", 16), arrival, [](auto) {});
        break;
      }
      case 10:
        if (codes_.empty()) break;
        backend_.RevokePasses(room,
                              Chance(70)
                                  ? std::optional<std::string>(std::string(core::PassIdOfCode(
                                        codes_[static_cast<size_t>(U(0, codes_.size() - 1))])))
                                  : std::nullopt,
                              [](auto) {});
        break;
      default:
        clock_.Advance(U(0, 300));
        backend_.RunDue();
    }
  }

  void KeepCodes(const OpResult<std::vector<core::MintedPass>>& minted) {
    if (!minted.ok()) return;
    for (const core::MintedPass& m : minted.value()) codes_.push_back(m.code);
  }

  // A queue's own key set or removed, on a queue pushed to or on a name that holds only its
  // key (forgotten when it goes, live and on replay alike).
  void SetQueueKey() {
    std::string queue = Chance(30) ? "keyed" : Pick("q", kQueues);
    std::optional<std::string> digest;
    if (Chance(60)) digest = std::string(kQueueKeyDigestBytes, static_cast<char>(U(0, 255)));
    backend_.SetQueueKey(queue, std::move(digest), [](auto) {});
  }

  void Push(const std::string& queue) {
    std::vector<core::JobSpec> jobs(static_cast<size_t>(U(1, 3)));
    for (auto& job : jobs) {
      job.payload = "{\"n\":" + std::to_string(U(0, 1'000'000)) + "}";
      if (Chance(25)) job.delay_ms = U(1, 2'000);
      job.priority = static_cast<int32_t>(U(-1, 1));
      if (Chance(20)) job.dedupe_key = Pick("d", 5);
      job.max_attempts = static_cast<int32_t>(U(1, 3));
      if (Chance(20)) {  // waiting on jobs pushed, settled, or not yet
        for (int k = U(1, 3); k > 0; --k)
          job.depends_on.push_back(static_cast<core::JobId>(U(1, 60)));
        std::sort(job.depends_on.begin(), job.depends_on.end());
        job.depends_on.erase(std::unique(job.depends_on.begin(), job.depends_on.end()),
                             job.depends_on.end());
        job.ignore_failed_dependencies = Chance(30);
      }
      if (Chance(25)) job.batch = Pick("b", 3);  // refused whole when sealed or unknown
    }
    backend_.Push(queue, std::move(jobs), [](auto) {});
  }

  void Keep(const core::FetchAnswer& answer) {
    for (const auto& job : answer.jobs) {
      leases_.push_back(job.lease);
      ++issued_;
    }
  }

  void Fetch() {
    core::FetchRequest r;
    r.worker = Pick("w", 4);
    r.max = static_cast<size_t>(U(1, 3));
    r.lease_ms = U(100, 3'000);
    if (Chance(30)) r.wait_ms = U(100, 1'500);  // a long poll, served later by the timer
    if (Chance(30) && !leases_.empty()) r.ack.push_back(leases_[U(0, leases_.size() - 1)]);
    r.reclaim = Chance(10);  // a worker starting again under its name
    backend_.Fetch(Pick("q", kQueues), std::move(r), [this](const OpResult<core::FetchAnswer>& a) {
      if (a.ok()) Keep(a.value());
    });
  }

  // 0 ack (with results or not), 1 nack, 2 extend, 3 progress, 4 log; mostly recent (current)
  // leases, some stale or forged.
  void LeaseOp(int kind) {
    if (leases_.empty()) return;
    size_t n = leases_.size();
    std::vector<std::string> picked;
    for (int k = U(1, 2); k > 0; --k) {
      std::string lease = leases_[Chance(70) ? U(std::max<int64_t>(0, n - 4), n - 1) : U(0, n - 1)];
      if (Chance(5)) lease.back() = lease.back() == 'A' ? 'B' : 'A';  // forged
      picked.push_back(std::move(lease));
    }
    std::string queue = Pick("q", kQueues);
    switch (kind) {
      case 0: {
        std::vector<std::string> results;
        if (Chance(50)) {
          for (size_t k = 0; k < picked.size(); ++k) {
            results.push_back(Chance(30) ? "" : std::to_string(U(0, 99)));
          }
        }
        backend_.Ack(queue, picked, std::move(results), [](auto) {});
        break;
      }
      case 3:
        backend_.SetProgress(queue, picked[0], std::to_string(U(0, 100)), [](auto) {});
        break;
      case 4: {
        std::vector<std::string> lines(static_cast<size_t>(U(1, 60)), "line");
        backend_.AppendJobLog(queue, picked[0], std::move(lines), [](auto) {});
        break;
      }
      case 1: {
        std::optional<int64_t> delay;
        if (Chance(50)) delay = U(0, 1'500);
        backend_.Nack(queue, picked, delay, "failed " + std::to_string(U(0, 9)), [](auto) {});
        break;
      }
      default:
        backend_.Extend(queue, picked, U(100, 3'000), [](auto) {});
    }
  }

  std::mt19937_64 rng_;
  FakeClock clock_;
  KeepingJournal journal_;
  MemoryBackend backend_;
  std::vector<std::string> leases_;
  size_t issued_ = 0;
  std::vector<Cut> cuts_;
  std::vector<std::string> codes_;
  size_t draws_ = 0, draw_steps_ = 0;
};

TEST(ReplayModelTest, ReplayFromTheStartOrAnySnapshotRebuildsTheSameState) {
  uint64_t base = std::random_device{}();
  if (const char* s = std::getenv("ANTEROOM_REPLAY_MODEL_SEED"))
    base = std::strtoull(s, nullptr, 10);
  int runs = std::getenv("ANTEROOM_REPLAY_MODEL_SEED") ? 1 : kRuns;
  size_t leases = 0, draws = 0, draw_steps = 0;
  for (int run = 0; run < runs; ++run) {
    uint64_t seed = base + static_cast<uint64_t>(run);
    Walk walk(seed);
    walk.Run(kOpsPerRun);
    walk.Check(seed);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "replay with ANTEROOM_REPLAY_MODEL_SEED=" << seed;
      return;
    }
    leases += walk.leases_issued();
    draws += walk.draws();
    draw_steps += walk.draw_steps();
  }
  EXPECT_GT(draws, static_cast<size_t>(runs)) << "the walk hardly drew a pre-queue";
  EXPECT_GT(draw_steps, static_cast<size_t>(runs)) << "draws were hardly ever published in chunks";
  EXPECT_GT(leases, static_cast<size_t>(runs) * 50) << "the walk hardly delivered any job";
}

}  // namespace
}  // namespace anteroom::store
