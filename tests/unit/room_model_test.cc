// Randomized model-based test: the same random operations and clock jumps go to core::Room and
// to ReferenceRoom, and every answer is compared. Seeded; the seed is printed on failure and
// can be replayed with ANTEROOM_MODEL_SEED=<seed>.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/room.h"
#include "room_reference_model.h"

namespace anteroom {
namespace {

using core::SessionView;

constexpr int64_t kTtl = 600'000;
constexpr int kRuns = 40;
constexpr int kOpsPerRun = 3'000;  // 40 x 3000 = 120k operations per CI run

struct Rng {
  std::mt19937_64 gen;
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
  bool Chance(int percent) { return Uniform(0, 99) < percent; }
};

core::RoomConfig RandomConfig(Rng& rng) {
  core::RoomConfig c;
  c.capacity = rng.Uniform(1, 5);
  c.grace_ms = rng.Chance(15) ? 0 : rng.Uniform(1, 5'000);
  c.checkin_timeout_ms = rng.Chance(5) ? 0 : rng.Uniform(1, 8'000);
  if (rng.Chance(30))
    c.idle_timeout_ms = std::nullopt;
  else
    c.idle_timeout_ms = rng.Uniform(0, 12'000);
  if (rng.Chance(35)) c.admit_per_minute = rng.Uniform(1, 6);
  c.paused = rng.Chance(10);
  return c;
}

void ExpectSame(const SessionView& got, const SessionView& want, const std::string& where) {
  EXPECT_EQ(got.session, want.session) << where;
  EXPECT_EQ(core::ToString(got.status), core::ToString(want.status)) << where;
  EXPECT_EQ(got.position, want.position) << where;
  EXPECT_EQ(got.waiting, want.waiting) << where;
  EXPECT_EQ(got.active, want.active) << where;
  EXPECT_EQ(got.capacity, want.capacity) << where;
  EXPECT_EQ(got.eta_ms, want.eta_ms) << where;
  EXPECT_EQ(got.admission, want.admission) << where;
}

struct Stats {
  int64_t max_waiting = 0;
  int64_t admitted = 0;
  int64_t dropped = 0;
  int64_t pauses = 0;
  int64_t paused_with_line = 0;  // operations that ended with the room paused and a line
};

// Runs one seeded sequence; returns false at the first disagreement.
bool RunOne(uint64_t seed, bool crowd, Stats& stats) {
  Rng rng{std::mt19937_64(seed)};
  int64_t now = 1'700'000'000'000 + rng.Uniform(0, 999);
  core::RoomConfig config = RandomConfig(rng);
  // Mostly small crowds; some runs with long lines (patient sessions) to exercise compaction.
  int pool = static_cast<int>(crowd ? rng.Uniform(60, 300) : rng.Uniform(3, 24));
  if (crowd) config.checkin_timeout_ms = rng.Uniform(2'000'000, 6'000'000);
  core::Room room(config, kTtl, now);
  testing::ReferenceRoom model(config, kTtl, now);

  for (int op = 0; op < kOpsPerRun; ++op) {
    // Time: mostly small steps, sometimes none, sometimes a jump past every deadline.
    int r = static_cast<int>(rng.Uniform(0, 99));
    if (r < 25)
      now += 0;
    else if (r < 90)
      now += rng.Uniform(1, 1'500);
    else if (r < 98)
      now += rng.Uniform(1'500, 20'000);
    else
      now += rng.Uniform(20'000, 150'000);

    std::string id = "s" + std::to_string(rng.Uniform(0, pool - 1));
    std::string where = "seed " + std::to_string(seed) + " op " + std::to_string(op);
    int kind = static_cast<int>(rng.Uniform(0, 99));
    if (kind < 40) {
      where += " check " + id;
      ExpectSame(room.Check(id, now), model.Check(id, now).view, where);
    } else if (kind < 52) {
      where += " touch " + id;
      auto got = room.Touch(id, now);
      auto want = model.Touch(id, now);
      EXPECT_EQ(got.status() == OpStatus::kUnknownSession, want.unknown_session) << where;
      if (got.ok() && !want.unknown_session) ExpectSame(*got, want.view, where);
    } else if (kind < 68) {
      bool final = rng.Chance(35);
      where += (final ? " leave(final) " : " leave ") + id;
      auto got = room.Leave(id, final, now);
      auto want = model.Leave(id, final, now);
      EXPECT_EQ(got.status() == OpStatus::kUnknownSession, want.unknown_session) << where;
      if (got.ok() && !want.unknown_session) ExpectSame(*got, want.view, where);
    } else if (kind < 73) {
      where += " evict " + id;
      auto got = room.Evict(id, now);
      auto want = model.Evict(id, now);
      EXPECT_EQ(got.status() == OpStatus::kUnknownSession, want.unknown_session) << where;
      if (got.ok() && !want.unknown_session) ExpectSame(*got, want.view, where);
    } else if (kind < 80) {
      uint64_t admission = static_cast<uint64_t>(rng.Uniform(0, model.admissions() + 1));
      where += " revoked? " + id;
      EXPECT_EQ(room.IsRevoked(id, admission, now), model.IsRevoked(id, admission, now)) << where;
    } else if (kind < 82) {
      core::RoomPatch patch;
      core::RoomConfig fresh = RandomConfig(rng);
      if (rng.Chance(60)) patch.capacity = fresh.capacity;
      if (rng.Chance(30)) patch.grace_ms = fresh.grace_ms;
      if (!crowd && rng.Chance(30)) patch.checkin_timeout_ms = fresh.checkin_timeout_ms;
      if (rng.Chance(30)) patch.idle_timeout_ms = fresh.idle_timeout_ms;
      if (rng.Chance(30)) patch.admit_per_minute = fresh.admit_per_minute;
      if (rng.Chance(10)) patch.paused = fresh.paused;
      where += " reconfigure";
      room.Reconfigure(patch, now);
      model.Reconfigure(patch, now);
    } else if (kind < 84) {
      // Pause or resume (resuming more often, so most of the walk admits).
      core::RoomPatch patch;
      patch.paused = rng.Chance(40);
      where += *patch.paused ? " pause" : " resume";
      room.Reconfigure(patch, now);
      model.Reconfigure(patch, now);
      stats.pauses += *patch.paused ? 1 : 0;
    } else {
      where += " advance";
      room.Advance(now);
      model.Advance(now);
    }
    // Room-level state after every operation.
    EXPECT_EQ(room.holders(), model.holders()) << where;
    EXPECT_EQ(room.waiting(), model.waiting()) << where;
    EXPECT_EQ(room.counters().admitted_total, model.counters().admitted_total) << where;
    EXPECT_EQ(room.counters().dropped_total, model.counters().dropped_total) << where;
    EXPECT_EQ(room.counters().released_total, model.counters().released_total) << where;
    EXPECT_EQ(room.config().paused, model.config().paused) << where;
    if (room.config().paused && room.waiting() > 0) ++stats.paused_with_line;
    if (::testing::Test::HasFailure()) return false;
    stats.max_waiting = std::max(stats.max_waiting, room.waiting());
  }
  stats.admitted += room.counters().admitted_total;
  stats.dropped += room.counters().dropped_total;
  return true;
}

TEST(RoomModelTest, EngineAgreesWithReferenceModel) {
  uint64_t base = std::random_device{}();
  if (const char* fixed = std::getenv("ANTEROOM_MODEL_SEED")) base = std::stoull(fixed);
  Stats stats;
  for (int run = 0; run < kRuns; ++run) {
    uint64_t seed = base + static_cast<uint64_t>(run);
    ASSERT_TRUE(RunOne(seed, run % 5 == 0, stats)) << "replay with ANTEROOM_MODEL_SEED=" << seed;
  }
  std::printf(
      "model test: %d operations from seed %llu; longest line %lld, admitted %lld, "
      "dropped %lld\n",
      kRuns * kOpsPerRun, static_cast<unsigned long long>(base),
      static_cast<long long>(stats.max_waiting), static_cast<long long>(stats.admitted),
      static_cast<long long>(stats.dropped));
  // The random walk must reach the interesting states, or agreement proves little.
  EXPECT_GT(stats.max_waiting, 64);
  EXPECT_GT(stats.admitted, 1000);
  EXPECT_GT(stats.dropped, 100);
  EXPECT_GT(stats.pauses, 100);
  EXPECT_GT(stats.paused_with_line, 1000);
}

}  // namespace
}  // namespace anteroom
