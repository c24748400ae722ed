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

// `grid`: rates whose token time (60,000 / rate ms) is a multiple of 500 ms, for runs whose
// clock moves in 500 ms steps, so buckets fill up exactly at the moment of an operation.
core::RoomConfig RandomConfig(Rng& rng, bool grid) {
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
  static constexpr int64_t kGridRates[] = {1, 2, 3, 4, 5, 6, 8, 10, 12};
  if (rng.Chance(40)) {
    c.joins_per_minute_per_client = grid ? kGridRates[rng.Uniform(0, 8)] : rng.Uniform(1, 8);
  }
  if (rng.Chance(40)) c.places_per_client = rng.Uniform(1, 4);
  if (rng.Chance(20)) c.challenge_difficulty = rng.Uniform(1, 3);
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
  int64_t rate_limited = 0;      // joins refused by a per-client limit
  int64_t tracked_joins = 0;
  int64_t table_full = 0;  // refusals with the client table full (retry 60 s)
  int64_t challenged = 0;
};

// Runs one seeded sequence; returns false at the first disagreement.
bool RunOne(uint64_t seed, bool crowd, bool grid, Stats& stats) {
  Rng rng{std::mt19937_64(seed)};
  int64_t now = 1'700'000'000'000 + rng.Uniform(0, 999);
  core::RoomConfig config = RandomConfig(rng, grid);
  // Mostly small crowds; some runs with long lines (patient sessions) to exercise compaction.
  int pool = static_cast<int>(crowd ? rng.Uniform(60, 300) : rng.Uniform(3, 24));
  if (crowd) config.checkin_timeout_ms = rng.Uniform(2'000'000, 6'000'000);
  core::Room room(config, kTtl, now);
  testing::ReferenceRoom model(config, kTtl, now);
  size_t max_clients = static_cast<size_t>(rng.Chance(50) ? rng.Uniform(1, 3) : 1'000);
  room.set_max_clients(max_clients);
  model.set_max_clients(max_clients);

  for (int op = 0; op < kOpsPerRun; ++op) {
    // Time: mostly small steps, sometimes none, sometimes a jump past every deadline.
    int r = static_cast<int>(rng.Uniform(0, 99));
    if (grid)
      now += 500 * rng.Uniform(0, r < 90 ? 3 : 200);
    else if (r < 25)
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
    if (kind < 20) {
      where += " check " + id;
      ExpectSame(room.Check(id, now), model.Check(id, now).view, where);
    } else if (kind < 40) {
      core::Arrival arrival;
      int64_t c = rng.Uniform(0, 5);
      if (c > 0) arrival.client = "c" + std::to_string(c);
      arrival.proof_bits = rng.Uniform(0, 4);
      where += " check " + id + " as '" + arrival.client + "' with " +
               std::to_string(arrival.proof_bits) + " bits";
      auto got = room.Check(id, arrival, now);
      auto want = model.Check(id, arrival, now);
      EXPECT_EQ(static_cast<int>(got.status()), static_cast<int>(want.status)) << where;
      EXPECT_EQ(got.retry_after_ms(), want.retry_after_ms) << where;
      if (got.ok() && want.status == OpStatus::kOk) ExpectSame(*got, want.view, where);
      if (got.status() == OpStatus::kRateLimited) ++stats.rate_limited;
      if (got.message().find("as many clients") != std::string::npos) ++stats.table_full;
      if (got.status() == OpStatus::kChallengeRequired) ++stats.challenged;
      if (got.ok() && !arrival.client.empty() && model.Places(arrival.client) > 0) {
        ++stats.tracked_joins;
      }
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
      core::RoomConfig fresh = RandomConfig(rng, grid);
      if (rng.Chance(60)) patch.capacity = fresh.capacity;
      if (rng.Chance(30)) patch.grace_ms = fresh.grace_ms;
      if (!crowd && rng.Chance(30)) patch.checkin_timeout_ms = fresh.checkin_timeout_ms;
      if (rng.Chance(30)) patch.idle_timeout_ms = fresh.idle_timeout_ms;
      if (rng.Chance(30)) patch.admit_per_minute = fresh.admit_per_minute;
      if (rng.Chance(10)) patch.paused = fresh.paused;
      if (rng.Chance(20)) patch.joins_per_minute_per_client = fresh.joins_per_minute_per_client;
      if (rng.Chance(20)) patch.places_per_client = fresh.places_per_client;
      if (rng.Chance(10)) patch.challenge_difficulty = fresh.challenge_difficulty;
      if (rng.Chance(10)) {  // plain data: set, replaced or cleared, no rule reads it
        patch.gate.emplace();
        if (rng.Chance(70))
          *patch.gate = R"({"cookie":"c)" + std::to_string(rng.Uniform(0, 3)) + "\"}";
      }
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
    EXPECT_EQ(room.config().gate, model.config().gate) << where;
    EXPECT_EQ(room.clients(), model.KnownClients()) << where;
    for (int c = 1; c <= 5; ++c) {
      std::string client = "c" + std::to_string(c);
      EXPECT_EQ(room.PlacesOf(client), model.Places(client)) << where << " " << client;
    }
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
    ASSERT_TRUE(RunOne(seed, run % 5 == 0, run % 3 == 1, stats))
        << "replay with ANTEROOM_MODEL_SEED=" << seed;
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
  std::printf(
      "model test: %lld joins counted per client, %lld refused by a limit (%lld with the "
      "client table full), %lld by the challenge\n",
      static_cast<long long>(stats.tracked_joins), static_cast<long long>(stats.rate_limited),
      static_cast<long long>(stats.table_full), static_cast<long long>(stats.challenged));
  EXPECT_GT(stats.tracked_joins, 1000);
  EXPECT_GT(stats.rate_limited, 1000);
  EXPECT_GT(stats.table_full, 50);
  EXPECT_GT(stats.challenged, 100);
}

}  // namespace
}  // namespace anteroom
