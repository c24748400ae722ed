// Live channels' line reads on Redis (ReadLine): each process keeps the last line it read per
// room and asks for the changes since (room.lua's delta log, KEYS[11]) instead of the whole
// line. Two backends on one Redis stand for two processes; after every random step each one's
// line must be exactly the line zset's ZRANGE, read mostly as deltas, and whole when a process
// fell further behind than the log holds, or the room was made again under the same name.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "await_answer.h"
#include "backend_fixture.h"

namespace anteroom::store::conformance {
namespace {

// redis-cli against the standalone test server; its output, one line per element.
std::vector<std::string> Cli(const std::string& args) {
  const std::string& url = RedisServers::Get().Single();
  std::string cmd = "redis-cli -p " + url.substr(url.rfind(':') + 1) + " " + args + " 2>&1";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
  }
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

std::vector<std::string> Ids(const core::IdList& line) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < line.size(); ++i) ids.emplace_back(line[i]);
  return ids;
}

// One process: its backend, and what its live hub last read (the version it passes as
// `since`, and the line of that version).
struct Process {
  std::unique_ptr<redis::RedisBackend> backend;
  uint64_t since = 0;
  std::vector<std::string> line;
};

class RedisLineDeltaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A prefix of its own per run (--gtest_repeat runs a test again in the same process).
    static int runs = 0;
    prefix_ = "deltas" + std::to_string(getpid()) + "-" + std::to_string(++runs) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ":";
    for (auto& p : procs_) {
      p.backend = std::make_unique<redis::RedisBackend>(
          clock_, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                             .key_prefix = prefix_,
                                             .redis_time = false,
                                             .run_timer = false});
    }
  }
  redis::RedisBackend& b(int i) { return *procs_[i].backend; }
  std::string Key(const std::string& suffix) const {
    return "'" + prefix_ + "{r:" + kRoom + "}:" + suffix + "'";
  }
  std::vector<std::string> Zrange() { return Cli("ZRANGE " + Key("l") + " 0 -1"); }
  void Put(core::RoomPatch patch) {
    auto r = AwaitAnswer<core::RoomInfo>([&](auto done) { b(0).PutRoom(kRoom, patch, done); });
    ASSERT_TRUE(r.ok()) << r.message();
  }
  OpResult<core::SessionView> Check(int p, const std::string& id) {
    return AwaitAnswer<core::SessionView>([&](auto done) { b(p).Check(kRoom, id, done); });
  }
  OpResult<core::SessionView> Leave(int p, const std::string& id, bool final) {
    return AwaitAnswer<core::SessionView>([&](auto done) { b(p).Leave(kRoom, id, final, done); });
  }
  // Process p's hub reads the line; it must be the line zset's, in order.
  void Read(int p, const std::string& why) {
    Process& proc = procs_[p];
    auto r =
        AwaitAnswer<core::LineView>([&](auto done) { b(p).ReadLine(kRoom, proc.since, done); });
    ASSERT_TRUE(r.ok()) << r.message();
    if (r->changed) {
      proc.line = Ids(r->line);
    } else {
      ASSERT_EQ(r->version, proc.since);
    }
    proc.since = r->version;
    std::vector<std::string> want = Zrange();
    ASSERT_EQ(proc.line, want) << why << " (process " << p << ")";
    ASSERT_EQ(static_cast<size_t>(r->waiting), want.size()) << why;
  }

  static constexpr const char* kRoom = "deltas";
  FakeClock clock_;
  std::string prefix_;
  Process procs_[2];
};

uint64_t Seed() {
  if (const char* s = std::getenv("ANTEROOM_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

TEST_F(RedisLineDeltaTest, RandomStepsMatchTheLineZset) {
  const uint64_t seed = Seed();
  SCOPED_TRACE("ANTEROOM_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  core::RoomPatch create;
  create.capacity = 3;
  create.checkin_timeout_ms = 30'000;
  create.grace_ms = 5'000;
  Put(create);
  // Who the test believes waits or holds a slot (the room may have dropped them since).
  std::vector<std::string> known;
  int next_id = 0;
  for (int step = 0; step < 600; ++step) {
    std::string why = "step " + std::to_string(step);
    int p = pick(2);
    int what = pick(100);
    if (what < 45 || known.empty()) {  // a newcomer (or one checking in again)
      std::string id = known.empty() || pick(4) > 0
                           ? "s" + std::to_string(next_id++)
                           : known[static_cast<size_t>(pick(static_cast<int>(known.size())))];
      ASSERT_TRUE(Check(p, id).ok());
      known.push_back(id);
    } else if (what < 65) {  // someone leaves for good: a waiting session, or a holder
      size_t i = static_cast<size_t>(pick(static_cast<int>(known.size())));
      auto r = Leave(p, known[i], true);
      ASSERT_TRUE(r.ok() || r.status() == OpStatus::kUnknownSession) << r.message();
      known.erase(known.begin() + static_cast<long>(i));
    } else if (what < 75) {  // a holder steps out (grace) or comes back: the version only
      std::vector<std::string> line = Zrange();
      for (const std::string& id : known) {
        if (std::find(line.begin(), line.end(), id) == line.end()) {
          if (pick(2)) {
            (void)Leave(p, id, false);
          } else {
            (void)AwaitAnswer<core::SessionView>([&](auto done) { b(p).Touch(kRoom, id, done); });
          }
          break;
        }
      }
    } else if (what < 85) {  // time passes: those not seen for 30 s drop out, slots time out
      clock_.Advance(3'000 + pick(12'000));
    } else if (what < 90) {  // the capacity changes: a fill admits several at once
      core::RoomPatch cap;
      cap.capacity = pick(10) == 0 ? 100 : 1 + pick(6);
      Put(cap);
    } else if (what < 93) {  // a burst of joins, larger than the delta floor now and then
      int n = pick(4) == 0 ? 80 : 10;
      for (int i = 0; i < n; ++i) {
        std::string id = "s" + std::to_string(next_id++);
        ASSERT_TRUE(Check(p, id).ok());
        known.push_back(id);
      }
    }
    // Each process reads most steps; now and then one skips a few (it is behind).
    for (int q = 0; q < 2; ++q) {
      if (pick(5) > 0) {
        Read(q, why);
        if (HasFatalFailure()) return;
      }
    }
    // The hub starts over now and then (a new hub, a restart): since 0, the kept line stays.
    if (pick(50) == 0) procs_[pick(2)].since = 0;
  }
  for (int q = 0; q < 2; ++q) {
    auto reads = b(q).line_reads();
    SCOPED_TRACE("process " + std::to_string(q) + ": full " + std::to_string(reads.full) +
                 ", delta " + std::to_string(reads.delta) + ", fallback " +
                 std::to_string(reads.fallback));
    EXPECT_GT(reads.delta, 3 * reads.full) << "most reads are deltas";
    EXPECT_GE(reads.full, 1u);
    EXPECT_EQ(reads.fallback, 0u) << "deltas the script answers always apply";
  }
}

// A process that did not read while more calls changed the room than the log keeps (1024)
// reads the line whole; one that kept up reads deltas throughout.
TEST_F(RedisLineDeltaTest, BehindMoreThanTheLogHoldsReadsWhole) {
  core::RoomPatch create;
  create.capacity = 1;
  Put(create);
  ASSERT_TRUE(Check(0, "holder").ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Check(0, "w" + std::to_string(i)).ok());
  Read(0, "first");
  Read(1, "first");
  auto before0 = b(0).line_reads();
  auto before1 = b(1).line_reads();
  // 1200 calls that each move the version on (the holder steps out, then back): the line stays.
  for (int i = 0; i < 600; ++i) {
    ASSERT_TRUE(Leave(0, "holder", false).ok());
    ASSERT_TRUE(
        AwaitAnswer<core::SessionView>([&](auto done) { b(0).Touch(kRoom, "holder", done); }).ok());
    if (i % 50 == 49) Read(0, "keeping up");
  }
  ASSERT_TRUE(Check(0, "late").ok());
  Read(0, "keeping up");
  Read(1, "behind");
  auto after0 = b(0).line_reads();
  auto after1 = b(1).line_reads();
  EXPECT_EQ(after0.full, before0.full);
  EXPECT_EQ(after0.delta, before0.delta + 13);
  EXPECT_EQ(after1.full, before1.full + 1);
  EXPECT_EQ(after1.delta, before1.delta);
  // And back on deltas from there.
  ASSERT_TRUE(Leave(1, "w3", true).ok());
  Read(1, "after catching up");
  EXPECT_EQ(b(1).line_reads().delta, after1.delta + 1);
}

// One call that changes much of the line (a capacity raised: a fill admits 100 of 120) leaves
// no delta worth reading: the next read is whole, and the one after a delta again.
TEST_F(RedisLineDeltaTest, AChangeOfMuchOfTheLineIsReadWhole) {
  core::RoomPatch create;
  create.capacity = 1;
  Put(create);
  for (int i = 0; i < 121; ++i) ASSERT_TRUE(Check(0, "w" + std::to_string(i)).ok());
  Read(0, "first");
  auto before = b(0).line_reads();
  core::RoomPatch raise;
  raise.capacity = 101;
  Put(raise);
  std::vector<std::string> last = Cli("LINDEX " + Key("ld") + " -1");
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].substr(last[0].size() - 2), " -") << "no delta kept";
  Read(0, "after the raise");
  auto after = b(0).line_reads();
  EXPECT_EQ(after.full, before.full + 1);
  EXPECT_EQ(after.delta, before.delta);
  EXPECT_EQ(procs_[0].line.size(), 20u);
  ASSERT_TRUE(Leave(0, "w110", true).ok());
  Read(0, "one more change");
  EXPECT_EQ(b(0).line_reads().delta, after.delta + 1);
}

// A room deleted and made again under the same name, at the same moment (so its versions
// repeat the old room's): the line kept from the old room is not the base of the new one's.
TEST_F(RedisLineDeltaTest, RoomMadeAgainIsNotBuiltOnTheOldLine) {
  core::RoomPatch create;
  create.capacity = 1;
  Put(create);
  for (const char* id : {"a", "b", "c", "d"}) ASSERT_TRUE(Check(0, id).ok());
  Read(0, "old room");
  ASSERT_EQ(procs_[0].line, (std::vector<std::string>{"b", "c", "d"}));
  ASSERT_TRUE(AwaitAnswer<core::RoomInfo>([&](auto done) { b(0).DeleteRoom(kRoom, done); }).ok());
  EXPECT_EQ(Cli("EXISTS " + Key("ld")), std::vector<std::string>{"0"}) << "deleted with the room";
  Put(create);
  for (const char* id : {"x", "y", "z", "w", "v"}) ASSERT_TRUE(Check(0, id).ok());
  auto before = b(0).line_reads();
  procs_[0].since = 0;
  Read(0, "new room");
  EXPECT_EQ(procs_[0].line, (std::vector<std::string>{"y", "z", "w", "v"}));
  auto after = b(0).line_reads();
  EXPECT_EQ(after.full, before.full + 1);
  EXPECT_EQ(after.delta, before.delta);
  ASSERT_TRUE(Check(0, "u").ok());
  Read(0, "new room, one more");
  EXPECT_EQ(b(0).line_reads().delta, after.delta + 1);
}

// Deltas that do not fit the kept line (here a log entry changed by hand to remove a session
// the line does not hold) are not applied: the line is read whole again.
TEST_F(RedisLineDeltaTest, DeltasThatDoNotFitAreReadWholeAgain) {
  core::RoomPatch create;
  create.capacity = 1;
  Put(create);
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(Check(0, id).ok());
  Read(0, "first");
  ASSERT_TRUE(Check(0, "d").ok());
  // The last entry is "INC OLD NEW 1\n+d": its one change becomes "-nobody".
  std::vector<std::string> head =
      Cli("EVAL \"local e = redis.call('LINDEX', KEYS[1], -1) "
          "local nl = string.find(e, string.char(10), 1, true) "
          "redis.call('LSET', KEYS[1], -1, string.sub(e, 1, nl) .. '-nobody') "
          "return string.sub(e, nl + 1)\" 1 " +
          Key("ld"));
  ASSERT_EQ(head, std::vector<std::string>{"+d"});
  auto before = b(0).line_reads();
  Read(0, "after a bad entry");
  auto after = b(0).line_reads();
  EXPECT_EQ(after.fallback, before.fallback + 1);
  EXPECT_EQ(after.full, before.full + 1);
  EXPECT_EQ(procs_[0].line, (std::vector<std::string>{"b", "c", "d"}));
}

}  // namespace
}  // namespace anteroom::store::conformance
