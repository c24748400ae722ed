// Room state that an older Redis backend wrote must still load. A room's scalar state is one
// msgpack array (FIELDS in lua/room.lua); fields are only ever added at its end, and a value
// that ends before a field reads as that field's default. Here a room's value is cut back to
// the 16 fields written before `paused` and `target_url` existed, and the room must answer as
// an unpaused room without a target URL, keeping everything else.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>

#include "await_answer.h"
#include "backend_fixture.h"

namespace anteroom::store::conformance {
namespace {

constexpr int kFieldsBeforeSettings = 16;

// Runs a Lua script on the standalone test server with redis-cli, with `key` as KEYS[1];
// answers its printed output (an integer reply prints as its digits).
std::string EvalOnSingle(const std::string& script, const std::string& key) {
  const std::string& url = RedisServers::Get().Single();
  std::string port = url.substr(url.rfind(':') + 1);
  std::string cmd = "redis-cli -p " + port + " EVAL \"" + script + "\" 1 '" + key + "' 2>&1";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

int FieldCount(const std::string& key) {
  std::string out = EvalOnSingle("return #cmsgpack.unpack(redis.call('GET', KEYS[1]))", key);
  return std::atoi(out.c_str());
}

TEST(RedisRoomStateTest, RoomWrittenBeforePausedAndTargetUrlStillLoads) {
  FakeClock clock;
  std::string prefix = "legacy" + std::to_string(getpid()) + ":";
  redis::RedisBackend backend(clock, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                                                .key_prefix = prefix,
                                                                .redis_time = false,
                                                                .run_timer = false});
  auto put = [&](const core::RoomPatch& patch) {
    return AwaitAnswer<core::RoomInfo>([&](auto done) { backend.PutRoom("old", patch, done); });
  };
  auto get = [&] {
    return AwaitAnswer<core::RoomInfo>([&](auto done) { backend.GetRoom("old", done); });
  };
  auto check = [&](const std::string& session) {
    return AwaitAnswer<core::SessionView>([&](auto done) { backend.Check("old", session, done); });
  };

  core::RoomPatch create;
  create.capacity = 1;
  create.admit_per_minute = std::optional<int64_t>(30);
  ASSERT_TRUE(put(create).ok());
  auto a = check("a");
  auto b = check("b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->status, core::SessionStatus::kActive);
  ASSERT_EQ(b->status, core::SessionStatus::kWaiting);
  core::RoomPatch settings;
  settings.paused = true;
  settings.target_url = std::optional<std::string>("/in");
  ASSERT_TRUE(put(settings).ok());

  const std::string meta = prefix + "{r:old}:m";
  ASSERT_GE(FieldCount(meta), kFieldsBeforeSettings + 2);
  std::string cut = EvalOnSingle(
      "local t = cmsgpack.unpack(redis.call('GET', KEYS[1])) local old = {} "
      "for i = 1, " +
          std::to_string(kFieldsBeforeSettings) +
          " do old[i] = t[i] end "
          "redis.call('SET', KEYS[1], cmsgpack.pack(old)) return #old",
      meta);
  ASSERT_EQ(cut, std::to_string(kFieldsBeforeSettings));

  auto info = get();
  ASSERT_TRUE(info.ok()) << info.message();
  EXPECT_FALSE(info->config.paused);
  EXPECT_EQ(info->config.target_url, std::nullopt);
  EXPECT_EQ(info->config.capacity, 1);
  EXPECT_EQ(info->config.admit_per_minute, std::optional<int64_t>(30));
  EXPECT_EQ(info->active, 1);
  EXPECT_EQ(info->waiting, 1);
  EXPECT_EQ(info->counters.admitted_total, 1);
  b = check("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->position, 1);
  // Unpaused, as the old room was: a freed slot goes to the head of the line at once.
  auto left = AwaitAnswer<core::SessionView>(
      [&](auto done) { backend.Leave("old", "a", /*final=*/true, done); });
  ASSERT_TRUE(left.ok()) << left.message();
  EXPECT_EQ(left->active, 1);
  EXPECT_EQ(left->waiting, 0);
  // Written back whole: the next change stores every field again.
  core::RoomPatch pause;
  pause.paused = true;
  auto paused = put(pause);
  ASSERT_TRUE(paused.ok());
  EXPECT_TRUE(paused->config.paused);
  EXPECT_GE(FieldCount(meta), kFieldsBeforeSettings + 2);
}

// Rooms written before the per-client limits and the challenge (19 fields: up to `ver`) load
// with all three off, and a session stored without a client counts for none.
TEST(RedisRoomStateTest, RoomWrittenBeforePerClientLimitsStillLoads) {
  constexpr int kFieldsBeforeLimits = 19;
  FakeClock clock;
  std::string prefix = "legacy-limits" + std::to_string(getpid()) + ":";
  redis::RedisBackend backend(clock, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                                                .key_prefix = prefix,
                                                                .redis_time = false,
                                                                .run_timer = false});
  auto put = [&](const core::RoomPatch& patch) {
    return AwaitAnswer<core::RoomInfo>([&](auto done) { backend.PutRoom("old", patch, done); });
  };
  auto join = [&](const std::string& session, const std::string& client) {
    core::Arrival arrival{.client = client, .proof_bits = 0};
    return AwaitAnswer<core::SessionView>(
        [&](auto done) { backend.Check("old", session, arrival, done); });
  };
  core::RoomPatch create;
  create.capacity = 5;
  ASSERT_TRUE(put(create).ok());
  ASSERT_TRUE(join("a", "192.0.2.1").ok());  // limits off: counted for nobody
  core::RoomPatch limits;
  limits.places_per_client = std::optional<int64_t>(1);
  limits.joins_per_minute_per_client = std::optional<int64_t>(10);
  limits.challenge_difficulty = std::optional<int64_t>(3);
  ASSERT_TRUE(put(limits).ok());

  const std::string meta = prefix + "{r:old}:m";
  ASSERT_GE(FieldCount(meta), kFieldsBeforeLimits + 4);  // + jpm ppc pow inc, and later ones
  std::string cut = EvalOnSingle(
      "local t = cmsgpack.unpack(redis.call('GET', KEYS[1])) local old = {} "
      "for i = 1, " +
          std::to_string(kFieldsBeforeLimits) +
          " do old[i] = t[i] end "
          "redis.call('SET', KEYS[1], cmsgpack.pack(old)) return #old",
      meta);
  ASSERT_EQ(cut, std::to_string(kFieldsBeforeLimits));

  auto info = AwaitAnswer<core::RoomInfo>([&](auto done) { backend.GetRoom("old", done); });
  ASSERT_TRUE(info.ok()) << info.message();
  EXPECT_EQ(info->config.joins_per_minute_per_client, std::nullopt);
  EXPECT_EQ(info->config.places_per_client, std::nullopt);
  EXPECT_EQ(info->config.challenge_difficulty, std::nullopt);
  EXPECT_EQ(info->active, 1);
  // Turned on again: "a" (stored without a client) holds no place of 192.0.2.1.
  core::RoomPatch one;
  one.places_per_client = std::optional<int64_t>(1);
  ASSERT_TRUE(put(one).ok());
  EXPECT_TRUE(join("b", "192.0.2.1").ok());
  EXPECT_EQ(join("c", "192.0.2.1").status(), OpStatus::kRateLimited);
}

// Rooms written before launch day (23 fields: up to `inc`) load as fifo rooms with no
// schedule, no pre-queue and no draw, and take a schedule and a method from then on.
TEST(RedisRoomStateTest, RoomWrittenBeforeLaunchDayStillLoads) {
  constexpr int kFieldsBeforeLaunchDay = 23;
  FakeClock clock;
  std::string prefix = "legacy-launch" + std::to_string(getpid()) + ":";
  redis::RedisBackend backend(clock, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                                                .key_prefix = prefix,
                                                                .redis_time = false,
                                                                .run_timer = false});
  auto put = [&](const core::RoomPatch& patch) {
    return AwaitAnswer<core::RoomInfo>([&](auto done) { backend.PutRoom("old", patch, done); });
  };
  auto check = [&](const std::string& session) {
    return AwaitAnswer<core::SessionView>([&](auto done) { backend.Check("old", session, done); });
  };
  core::RoomPatch create;
  create.capacity = 1;
  ASSERT_TRUE(put(create).ok());
  ASSERT_EQ(check("a")->status, core::SessionStatus::kActive);
  ASSERT_EQ(check("b")->status, core::SessionStatus::kWaiting);
  const std::string meta = prefix + "{r:old}:m";
  ASSERT_GT(FieldCount(meta), kFieldsBeforeLaunchDay);
  std::string cut = EvalOnSingle(
      "local t = cmsgpack.unpack(redis.call('GET', KEYS[1])) local old = {} "
      "for i = 1, " +
          std::to_string(kFieldsBeforeLaunchDay) +
          " do old[i] = t[i] end "
          "redis.call('SET', KEYS[1], cmsgpack.pack(old)) return #old",
      meta);
  ASSERT_EQ(cut, std::to_string(kFieldsBeforeLaunchDay));

  auto info = AwaitAnswer<core::RoomInfo>([&](auto done) { backend.GetRoom("old", done); });
  ASSERT_TRUE(info.ok()) << info.message();
  EXPECT_EQ(info->config.queueing_method, core::QueueingMethod::kFifo);
  auto b = check("b");
  EXPECT_EQ(b->position, 1);
  EXPECT_EQ(b->phase, core::RoomPhase::kQueue);
  EXPECT_FALSE(b->starts_in_ms.has_value());
  auto events = AwaitAnswer<std::vector<core::RoomEvent>>(
      [&](auto done) { backend.ListEvents("old", done); });
  ASSERT_TRUE(events.ok()) << events.message();
  EXPECT_TRUE(events->empty());
  core::EventSpec drop;
  drop.prequeue_at = clock.NowMs();
  drop.starts_at = clock.NowMs() + 1'000;
  drop.ends_at = clock.NowMs() + 2'000;
  ASSERT_TRUE(AwaitAnswer<core::RoomEvent>([&](auto done) {
                backend.PutEvent("old", "drop", drop, done);
              }).ok());
  EXPECT_EQ(check("c")->status, core::SessionStatus::kPrequeue);
  EXPECT_EQ(FieldCount(meta), 35) << "written back whole (through ns, the flow histories, nap, nf)";
}

// Rooms written before the ETA's flow histories (30 fields: up to `dr`; the freed slots' minute
// window `fw` was the ETA's basis) load with empty histories: no ETA until a slot is freed,
// then the same as a new room's from there on.
TEST(RedisRoomStateTest, RoomWrittenBeforeTheFlowHistoriesStillLoads) {
  constexpr int kFieldsBeforeFlows = 30;
  FakeClock clock;
  std::string prefix = "legacy-flow" + std::to_string(getpid()) + ":";
  redis::RedisBackend backend(clock, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                                                .key_prefix = prefix,
                                                                .redis_time = false,
                                                                .run_timer = false});
  auto check = [&](const std::string& session) {
    return AwaitAnswer<core::SessionView>([&](auto done) { backend.Check("old", session, done); });
  };
  core::RoomPatch create;
  create.capacity = 1;
  create.grace_ms = 0;
  ASSERT_TRUE(
      AwaitAnswer<core::RoomInfo>([&](auto done) { backend.PutRoom("old", create, done); }).ok());
  ASSERT_EQ(check("a")->status, core::SessionStatus::kActive);
  ASSERT_EQ(check("b")->status, core::SessionStatus::kWaiting);
  ASSERT_EQ(check("c")->status, core::SessionStatus::kWaiting);
  const std::string meta = prefix + "{r:old}:m";
  ASSERT_EQ(FieldCount(meta), 35);
  std::string cut = EvalOnSingle(
      "local t = cmsgpack.unpack(redis.call('GET', KEYS[1])) local old = {} "
      "for i = 1, " +
          std::to_string(kFieldsBeforeFlows) +
          " do old[i] = t[i] end "
          "redis.call('SET', KEYS[1], cmsgpack.pack(old)) return #old",
      meta);
  ASSERT_EQ(cut, std::to_string(kFieldsBeforeFlows));

  EXPECT_EQ(check("c")->eta_ms, std::nullopt);  // nothing freed, as far as it knows
  clock.Advance(3'000);
  ASSERT_TRUE(AwaitAnswer<core::SessionView>([&](auto done) {
                backend.Leave("old", "a", /*final=*/true, done);
              }).ok());
  auto c = check("c");
  EXPECT_EQ(c->position, 1);
  EXPECT_EQ(c->eta_ms, 10'000);  // one slot freed, over the 10 s an estimate takes at least
  EXPECT_EQ(FieldCount(meta), 35) << "written back with them (and those after)";
}

// The gate is a key of its own ({r:NAME}:g, KEYS[9] of room.lua: "INC:TEXT"), so rooms written
// before it read as having none. Scripts from before it neither read nor delete it: a room
// deleted by such a process leaves its gate behind, which must not come back, whether the room
// is made again by a script that knows the key (it removes it) or by one that does not (the
// leftover is of another incarnation).
TEST(RedisRoomStateTest, GateLeftBehindByAnOlderProcessDoesNotComeBack) {
  FakeClock clock;
  std::string prefix = "legacy-gate" + std::to_string(getpid()) + ":";
  redis::RedisBackend backend(clock, redis::RedisBackendOptions{.url = RedisServers::Get().Single(),
                                                                .key_prefix = prefix,
                                                                .redis_time = false,
                                                                .run_timer = false});
  auto put = [&](const core::RoomPatch& patch) {
    return AwaitAnswer<core::RoomInfo>([&](auto done) { backend.PutRoom("lobby", patch, done); });
  };
  auto gate_now = [&] {
    auto info = AwaitAnswer<core::RoomInfo>([&](auto done) { backend.GetRoom("lobby", done); });
    EXPECT_TRUE(info.ok()) << info.message();
    return info.ok() ? info->config.gate : std::optional<std::string>("(failed)");
  };
  const std::string gate_key = prefix + "{r:lobby}:g";
  auto set_raw = [&](const std::string& value) {
    return EvalOnSingle("return redis.call('SET', KEYS[1], '" + value + "')", gate_key);
  };
  auto raw = [&] { return EvalOnSingle("return redis.call('GET', KEYS[1])", gate_key); };
  auto exists = [&] { return EvalOnSingle("return redis.call('EXISTS', KEYS[1])", gate_key); };
  ASSERT_EQ(set_raw("1:left behind"), "OK");

  core::RoomPatch create;
  create.capacity = 1;
  auto created = put(create);
  ASSERT_TRUE(created.ok()) << created.message();
  EXPECT_EQ(created->config.gate, std::nullopt);
  EXPECT_EQ(exists(), "0") << "removed when the room is made";
  EXPECT_EQ(gate_now(), std::nullopt);

  // As if an older process had deleted the room and made it again: a gate of another
  // incarnation reads as none, the room's own as its gate.
  std::string inc =
      EvalOnSingle("return string.format('%d', cmsgpack.unpack(redis.call('GET', KEYS[1]))[23])",
                   prefix + "{r:lobby}:m");
  ASSERT_FALSE(inc.empty());
  ASSERT_EQ(set_raw((inc == "1" ? "2" : "1") + std::string(":left behind")), "OK");
  EXPECT_EQ(gate_now(), std::nullopt);
  ASSERT_EQ(set_raw(inc + ":ours"), "OK");
  EXPECT_EQ(gate_now(), std::optional<std::string>("ours"));

  core::RoomPatch gate;
  gate.gate = std::optional<std::string>(R"({"cookie":"pass"})");
  ASSERT_TRUE(put(gate).ok());
  EXPECT_EQ(raw(), inc + R"(:{"cookie":"pass"})");
  EXPECT_EQ(gate_now(), gate.gate);
  auto deleted = AwaitAnswer<core::RoomInfo>([&](auto done) { backend.DeleteRoom("lobby", done); });
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->config.gate, gate.gate);
  EXPECT_EQ(exists(), "0") << "deleted with the room";
}

}  // namespace
}  // namespace anteroom::store::conformance
