// The durable formats that carry a room's settings: the room snapshot (core/room_snapshot.cc)
// and the log record of a room change (store/memory/change_record.h). Each test of an old
// format decodes bytes that an earlier anteroom wrote (kept here verbatim), so a data directory
// from before `paused` and `target_url` still opens, with the room unpaused and no target URL,
// one from before the per-client limits and the challenge opens with all of them off, and one
// from before the gate (room format 5, kPutRoom4, kCreateRoom2) opens with no gate.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/clock.h"
#include "core/room.h"
#include "store/memory/change_record.h"
#include "store/memory/memory_backend.h"

namespace anteroom {
namespace {

using std::string_view_literals::operator""sv;

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr int64_t kTtl = 600'000;

std::string Unhex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// A minute window's unused bucket (second INT64_MIN, count 0), of which snapshots hold many.
std::string EmptyBuckets(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += Unhex("00000000000000800000000000000000");
  return out;
}

// Room format 1, as written by anteroom before paused/target_url (commit c7e42c2) for the room
// that WrittenRoom() below builds.
const std::string kRoomFormat1 =
    Unhex(
        "0100000002000000000000008813000000000000307500000000000001e09304"
        "0000000000010a00000000000000c027090000000000e86be5cf8b0100000400"
        "000000000000000000000068e5cf8b0100000068e5cf8b010000010000000000"
        "0000030101000000620168e5cf8b0100000168e5cf8b01000002000000000000"
        "0001010100000063e86be5cf8b010000e86be5cf8b0100000300000000000000"
        "010001000000640368e5cf8b0100000000000000000000000000000000000000"
        "0001000000000000000000000003000000000000000100000063bacb9f170300"
        "000200000031c2cb9f170300000300000066bacb9f1703000001000000000000"
        "000300000002000000000000000300000000000000") +
    EmptyBuckets(20) + Unhex("00f1536500000000020000000000000001f15365000000000100000000000000") +
    EmptyBuckets(59) + Unhex("01f15365000000000100000000000000") + EmptyBuckets(38) +
    Unhex(
        "0300000000000000000000000000000001000000000000000100000000000000"
        "01000000610100000000000000a893eecf8b0100000100000000000000a893ee"
        "cf8b0100000100000061");

// A room with holders, a line, both minute windows and a revocation.
void BuildRoom(core::Room& room) {
  room.Check("a", kT0);
  room.Check("b", kT0 + 1);
  room.Check("c", kT0 + 2);
  room.Check("d", kT0 + 3);
  ASSERT_TRUE(room.Leave("a", /*final=*/true, kT0 + 1'000).ok());  // c admitted
}

core::RoomConfig WrittenConfig() {
  core::RoomConfig c;
  c.capacity = 2;
  c.grace_ms = 5'000;
  c.checkin_timeout_ms = 30'000;
  c.idle_timeout_ms = 300'000;
  c.admit_per_minute = 10;
  return c;
}

std::string Save(const core::Room& room) {
  std::string out;
  ByteWriter w(out);
  room.Save(w);
  return out;
}

TEST(RoomFormatTest, Format1SnapshotStillRestoresUnpausedWithoutTargetUrl) {
  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(kRoomFormat1);
  ASSERT_TRUE(restored.Restore(in));
  EXPECT_TRUE(in.done());
  EXPECT_EQ(restored.config().capacity, 2);
  EXPECT_EQ(restored.config().admit_per_minute, std::optional<int64_t>(10));
  EXPECT_FALSE(restored.config().paused);
  EXPECT_FALSE(restored.config().target_url.has_value());
  EXPECT_EQ(restored.holders(), 2);
  EXPECT_EQ(restored.waiting(), 1);

  // The same room built today: restoring the old bytes gave exactly its state.
  core::Room live(WrittenConfig(), kTtl, kT0);
  BuildRoom(live);
  EXPECT_EQ(Save(restored), Save(live));
  // And it behaves the same: d is next, and goes in when b leaves.
  ASSERT_TRUE(restored.Leave("b", true, kT0 + 2'000).ok());
  EXPECT_EQ(restored.Check("d", kT0 + 2'001).status, core::SessionStatus::kActive);
}

TEST(RoomFormatTest, SnapshotKeepsPausedAndTargetUrl) {
  core::RoomConfig config = WrittenConfig();
  config.paused = true;
  config.target_url = "https://shop.example/checkout?from=anteroom";
  core::Room room(config, kTtl, kT0);
  BuildRoom(room);
  std::string bytes = Save(room);

  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(bytes);
  ASSERT_TRUE(restored.Restore(in));
  EXPECT_TRUE(in.done());
  EXPECT_TRUE(restored.config().paused);
  EXPECT_EQ(restored.config().target_url, config.target_url);
  EXPECT_EQ(Save(restored), bytes);
  // Still paused after the restore: a freed slot stays free.
  ASSERT_TRUE(restored.Leave("b", true, kT0 + 2'000).ok());
  EXPECT_EQ(restored.Check("d", kT0 + 2'001).status, core::SessionStatus::kWaiting);
}

TEST(RoomFormatTest, UnknownSnapshotFormatIsRefused) {
  core::Room room(WrittenConfig(), kTtl, kT0);
  std::string bytes = Save(room);
  for (uint32_t format : {0u, 6u}) {
    std::string changed = bytes;
    changed[0] = static_cast<char>(format);
    core::Room restored(core::RoomConfig{}, kTtl, 0);
    ByteReader in(changed);
    EXPECT_FALSE(restored.Restore(in)) << format;
  }
}

// Found by fuzz/log_records: a snapshot whose admission counter is behind a holder's number
// loaded, and the next admission then shared that number (a saved state that did not load).
TEST(RoomFormatTest, HolderNumberedPastTheAdmissionCounterIsRefused) {
  core::Room room(WrittenConfig(), kTtl, kT0);
  BuildRoom(room);  // holders b (2) and c (3); admissions counter 3
  std::string bytes = Save(room);
  const std::string counters = Unhex("0200000000000000" "0300000000000000");
  size_t at = bytes.find(counters);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find(counters, at + 1), std::string::npos);
  {
    core::Room restored(core::RoomConfig{}, kTtl, 0);
    ByteReader in(bytes);
    ASSERT_TRUE(restored.Restore(in));
  }
  std::string behind = bytes;
  behind[at + 8] = 2;  // the counter now says 2 admissions; c holds number 3
  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(behind);
  EXPECT_FALSE(restored.Restore(in));
}

// ---- log records ---------------------------------------------------------------------------

std::optional<core::RoomInfo> GetRoom(store::MemoryBackend& backend, const std::string& room) {
  std::optional<core::RoomInfo> info;
  backend.GetRoom(room, [&](OpResult<core::RoomInfo> r) {
    if (r.ok()) info = *r;
  });
  return info;
}

// A kPutRoom record as written before kPutRoom2: room "lobby" at kT0 + 2000 with capacity 3,
// grace 4000, idle timeout off (null), admit_per_minute 7.
const std::string kPutRoomFormat1 = Unhex(
    "01d06fe5cf8b010000050000006c6f62627901030000000000000001a00f0000"
    "0000000000010001010700000000000000");

TEST(RoomFormatTest, Format1PutRoomRecordStillReplays) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  auto replayed = backend.Replay(kPutRoomFormat1);
  ASSERT_TRUE(replayed.ok()) << replayed.message();
  auto info = GetRoom(backend, "lobby");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.capacity, 3);
  EXPECT_EQ(info->config.grace_ms, 4'000);
  EXPECT_EQ(info->config.checkin_timeout_ms, 30'000);  // not named: the default
  EXPECT_EQ(info->config.idle_timeout_ms, std::nullopt);
  EXPECT_EQ(info->config.admit_per_minute, std::optional<int64_t>(7));
  EXPECT_FALSE(info->config.paused);
  EXPECT_FALSE(info->config.target_url.has_value());

  // A later change of the same room, as written today, applies on top.
  core::RoomPatch pause;
  pause.paused = true;
  pause.target_url = std::optional<std::string>("/welcome");
  std::string record;
  ByteWriter w = store::BeginChange(record, store::ChangeKind::kPutRoom4, kT0 + 3'000, "lobby");
  store::PutRoomPatch(w, pause, store::ChangeKind::kPutRoom4);
  ASSERT_TRUE(backend.Replay(record).ok());
  info = GetRoom(backend, "lobby");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.capacity, 3);
  EXPECT_TRUE(info->config.paused);
  EXPECT_EQ(info->config.target_url, std::optional<std::string>("/welcome"));
}

TEST(RoomFormatTest, PutRoomRecordRoundTripsEveryShapeOfTheNewFields) {
  std::vector<core::RoomPatch> patches(6);
  patches[1].paused = true;
  patches[2].paused = false;
  patches[3].target_url = std::optional<std::string>("https://example.com/a?b=c#d");
  patches[4].target_url = std::optional<std::string>();  // clear
  patches[5].capacity = 4;
  patches[5].idle_timeout_ms = std::optional<int64_t>();
  patches[5].admit_per_minute = std::optional<int64_t>(9);
  patches[5].paused = true;
  patches[5].target_url = std::optional<std::string>("/");
  for (size_t i = 0; i < patches.size(); ++i) {
    const core::RoomPatch& p = patches[i];
    std::string body;
    ByteWriter w(body);
    store::PutRoomPatch(w, p, store::ChangeKind::kPutRoom4);
    ByteReader r(body);
    core::RoomPatch got = store::GetRoomPatch(r, store::ChangeKind::kPutRoom4);
    EXPECT_TRUE(r.done()) << i;
    EXPECT_EQ(got.capacity, p.capacity) << i;
    EXPECT_EQ(got.grace_ms, p.grace_ms) << i;
    EXPECT_EQ(got.checkin_timeout_ms, p.checkin_timeout_ms) << i;
    EXPECT_EQ(got.idle_timeout_ms, p.idle_timeout_ms) << i;
    EXPECT_EQ(got.admit_per_minute, p.admit_per_minute) << i;
    EXPECT_EQ(got.paused, p.paused) << i;
    EXPECT_EQ(got.target_url, p.target_url) << i;
    EXPECT_EQ(got.joins_per_minute_per_client, p.joins_per_minute_per_client) << i;
    EXPECT_EQ(got.places_per_client, p.places_per_client) << i;
    EXPECT_EQ(got.challenge_difficulty, p.challenge_difficulty) << i;
  }
}

TEST(RoomFormatTest, PutRoomRecordRoundTripsTheLimitsAndTheChallenge) {
  std::vector<core::RoomPatch> patches(5);
  patches[1].joins_per_minute_per_client = std::optional<int64_t>(60);
  patches[2].places_per_client = std::optional<int64_t>(5);
  patches[2].challenge_difficulty = std::optional<int64_t>(16);
  patches[3].joins_per_minute_per_client = std::optional<int64_t>();  // off
  patches[3].places_per_client = std::optional<int64_t>();
  patches[3].challenge_difficulty = std::optional<int64_t>();
  patches[4].capacity = 9;
  patches[4].target_url = std::optional<std::string>("/x");
  patches[4].joins_per_minute_per_client = std::optional<int64_t>(100'000);
  for (size_t i = 0; i < patches.size(); ++i) {
    const core::RoomPatch& p = patches[i];
    std::string body;
    ByteWriter w(body);
    store::PutRoomPatch(w, p, store::ChangeKind::kPutRoom4);
    ByteReader r(body);
    core::RoomPatch got = store::GetRoomPatch(r, store::ChangeKind::kPutRoom4);
    EXPECT_TRUE(r.done()) << i;
    EXPECT_EQ(got.capacity, p.capacity) << i;
    EXPECT_EQ(got.target_url, p.target_url) << i;
    EXPECT_EQ(got.joins_per_minute_per_client, p.joins_per_minute_per_client) << i;
    EXPECT_EQ(got.places_per_client, p.places_per_client) << i;
    EXPECT_EQ(got.challenge_difficulty, p.challenge_difficulty) << i;
  }
}

// ---- format 2: before per-client limits and the challenge ------------------------------------

// Room format 2, as written by anteroom before the per-client limits (commit 08f795f), for the
// room FormatTwoRoom() builds.
const std::string kRoomFormat2 =
    Unhex(
        "0200000002000000000000008813000000000000307500000000000001e09304"
        "0000000000010a000000000000000000c027090000000000e86be5cf8b010000"
        "040000000000000000000000f469e5cf8b010000f469e5cf8b01000001000000"
        "0000000003000100000062f469e5cf8b010000f469e5cf8b0100000200000000"
        "00000001000100000063e86be5cf8b010000e86be5cf8b010000030000000000"
        "0000010001000000640368e5cf8b010000000000000000000000000000000000"
        "00000001000000000000000000000003000000000000000100000049becb9f17"
        "0300000200000031c2cb9f170300000300000066bacb9f170300000100000000"
        "0000000300000002000000000000000300000000000000") +
    EmptyBuckets(20) + Unhex("00f1536500000000020000000000000001f15365000000000100000000000000") +
    EmptyBuckets(59) + Unhex("01f15365000000000100000000000000") + EmptyBuckets(38) +
    Unhex(
        "0300000000000000000000000000000001000000000000000100000000000000"
        "01000000610100000000000000a893eecf8b0100000100000000000000a893ee"
        "cf8b0100000100000061");

// Created paused with a target URL, four arrivals, resumed with the URL cleared, one final leave.
void FormatTwoRoom(core::Room& room) {
  room.Check("a", kT0);
  room.Check("b", kT0 + 1);
  room.Check("c", kT0 + 2);
  room.Check("d", kT0 + 3);
  core::RoomPatch resume;
  resume.paused = false;
  resume.target_url = std::optional<std::string>();
  room.Reconfigure(resume, kT0 + 500);
  ASSERT_TRUE(room.Leave("a", /*final=*/true, kT0 + 1'000).ok());
}

TEST(RoomFormatTest, Format2SnapshotStillRestoresWithLimitsAndChallengeOff) {
  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(kRoomFormat2);
  ASSERT_TRUE(restored.Restore(in));
  EXPECT_TRUE(in.done());
  EXPECT_EQ(restored.config().joins_per_minute_per_client, std::nullopt);
  EXPECT_EQ(restored.config().places_per_client, std::nullopt);
  EXPECT_EQ(restored.config().challenge_difficulty, std::nullopt);
  EXPECT_EQ(restored.clients(), 0u);

  core::RoomConfig config = WrittenConfig();
  config.paused = true;
  config.target_url = "/welcome";
  core::Room live(config, kTtl, kT0);
  FormatTwoRoom(live);
  EXPECT_EQ(Save(restored), Save(live));
  // Limits turned on after the restore count only joins made from then on.
  core::RoomPatch limits;
  limits.places_per_client = std::optional<int64_t>(1);
  restored.Reconfigure(limits, kT0 + 2'000);
  core::Arrival client{.client = "192.0.2.1"};
  EXPECT_TRUE(restored.Check("e", client, kT0 + 2'001).ok());
  auto second = restored.Check("f", client, kT0 + 2'002);
  EXPECT_EQ(second.status(), OpStatus::kRateLimited);
  EXPECT_EQ(restored.PlacesOf("192.0.2.1"), 1);
}

// A kPutRoom2 record as written before kPutRoom3: room "lobby" at kT0 + 2000, capacity 3, grace
// 4000, idle timeout off, admit_per_minute 7, paused, target URL "/welcome".
const std::string kPutRoomFormat2 = Unhex(
    "07d06fe5cf8b010000050000006c6f62627901030000000000000001a00f0000"
    "000000000001000101070000000000000001010101080000002f77656c636f6d"
    "65");
// A kCheck record of session "ann" in "lobby" at kT0 + 2500 (still written for checks that
// count for no client).
const std::string kCheckFormat1 = Unhex("03c471e5cf8b010000050000006c6f62627903000000616e6e");

TEST(RoomFormatTest, Format2PutRoomAndFormat1CheckStillReplay) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  ASSERT_TRUE(backend.Replay(kPutRoomFormat2).ok());
  ASSERT_TRUE(backend.Replay(kCheckFormat1).ok());
  auto info = GetRoom(backend, "lobby");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.capacity, 3);
  EXPECT_TRUE(info->config.paused);
  EXPECT_EQ(info->config.target_url, std::optional<std::string>("/welcome"));
  EXPECT_EQ(info->config.joins_per_minute_per_client, std::nullopt);
  EXPECT_EQ(info->config.places_per_client, std::nullopt);
  EXPECT_EQ(info->config.challenge_difficulty, std::nullopt);
  EXPECT_EQ(info->waiting, 1);  // ann, in line: the room is paused
}

// ---- format 3: per-client state --------------------------------------------------------------

TEST(RoomFormatTest, SnapshotKeepsTheClientTable) {
  core::RoomConfig config = WrittenConfig();
  config.joins_per_minute_per_client = 3;
  config.places_per_client = 2;
  config.challenge_difficulty = 4;
  core::Room room(config, kTtl, kT0);
  core::Arrival one{.client = "192.0.2.1", .proof_bits = 4};
  core::Arrival two{.client = "2001:db8::/64", .proof_bits = 9};
  ASSERT_TRUE(room.Check("a", one, kT0).ok());
  ASSERT_TRUE(room.Check("b", one, kT0 + 1).ok());
  ASSERT_TRUE(room.Check("c", two, kT0 + 2).ok());
  ASSERT_TRUE(room.Leave("c", /*final=*/true, kT0 + 3).ok());  // "two": no place, bucket not full
  room.Check("untracked", kT0 + 4);
  EXPECT_EQ(room.clients(), 2u);
  std::string bytes = Save(room);

  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(bytes);
  ASSERT_TRUE(restored.Restore(in));
  EXPECT_TRUE(in.done());
  EXPECT_EQ(Save(restored), bytes);
  EXPECT_EQ(restored.config().joins_per_minute_per_client, std::optional<int64_t>(3));
  EXPECT_EQ(restored.config().places_per_client, std::optional<int64_t>(2));
  EXPECT_EQ(restored.config().challenge_difficulty, std::optional<int64_t>(4));
  EXPECT_EQ(restored.PlacesOf("192.0.2.1"), 2);
  // The same answers as the original from here on: places full for one, the bucket for two.
  for (core::Room* r : {&room, &restored}) {
    auto full = r->Check("d", one, kT0 + 10);
    EXPECT_EQ(full.status(), OpStatus::kRateLimited);
    EXPECT_EQ(full.retry_after_ms(), 30'000);  // the check-in timeout
    EXPECT_TRUE(r->Check("e", two, kT0 + 11).ok());
    EXPECT_TRUE(r->Leave("e", /*final=*/true, kT0 + 11).ok());
    EXPECT_TRUE(r->Check("f", two, kT0 + 12).ok());
    auto empty = r->Check("g", two, kT0 + 13);  // 3 joins a minute: c, e, f
    EXPECT_EQ(empty.status(), OpStatus::kRateLimited);
    EXPECT_EQ(empty.retry_after_ms(), 20'000 - 11);  // c's token comes back 20 s after c
  }
  EXPECT_EQ(Save(restored), Save(room));
  // The departed client is forgotten once its bucket is full again: 3 tokens taken, the last
  // at +12, refilled 3 units a ms.
  ASSERT_TRUE(restored.Leave("f", true, kT0 + 21).ok());
  restored.Advance(kT0 + 60'001);
  EXPECT_EQ(restored.clients(), 2u);
  restored.Advance(kT0 + 60'002);
  EXPECT_EQ(restored.clients(), 1u);
}

// Damage that would hand the rules a rate of 0 (a division by zero in the bucket), a negative
// place count or a difficulty no proof can show: refused on reading, as the wire would refuse it.
TEST(RoomFormatTest, LimitsOutOfTheWireRangesAreDamage) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  std::vector<core::RoomPatch> bad(5);
  for (auto& p : bad) p.capacity = 2;
  bad[0].joins_per_minute_per_client = std::optional<int64_t>(0);
  bad[1].joins_per_minute_per_client =
      std::optional<int64_t>(core::kMaxJoinsPerMinutePerClient + 1);
  bad[2].places_per_client = std::optional<int64_t>(-1);
  bad[3].challenge_difficulty = std::optional<int64_t>(0);
  bad[4].challenge_difficulty = std::optional<int64_t>(core::kMaxChallengeDifficulty + 1);
  for (size_t i = 0; i < bad.size(); ++i) {
    std::string record;
    ByteWriter w = store::BeginChange(record, store::ChangeKind::kPutRoom3, kT0, "r");
    store::PutRoomPatch(w, bad[i], store::ChangeKind::kPutRoom3);
    EXPECT_FALSE(backend.Replay(record).ok()) << i;
  }
  EXPECT_EQ(backend.Summarize().rooms, 0u);

  core::RoomConfig config = WrittenConfig();
  config.joins_per_minute_per_client = 0;
  core::Room room(config, kTtl, kT0);
  std::string bytes = Save(room);
  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(bytes);
  EXPECT_FALSE(restored.Restore(in));
}

TEST(RoomFormatTest, Check2RecordsCountForTheirClientOnReplay) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch create;
  create.capacity = 1;
  create.places_per_client = std::optional<int64_t>(2);
  std::string record;
  ByteWriter w = store::BeginChange(record, store::ChangeKind::kPutRoom3, kT0, "lobby");
  store::PutRoomPatch(w, create, store::ChangeKind::kPutRoom3);
  ASSERT_TRUE(backend.Replay(record).ok());
  for (const char* session : {"a", "b"}) {
    ByteWriter c = store::BeginChange(record, store::ChangeKind::kCheck2, kT0 + 1, "lobby");
    c.PutString(session);
    c.PutString("192.0.2.1");
    ASSERT_TRUE(backend.Replay(record).ok());
  }
  // Two places replayed for 192.0.2.1: a third join of it is refused, another client's is not.
  std::optional<OpResult<core::SessionView>> third, other;
  backend.Check("lobby", "c", core::Arrival{.client = "192.0.2.1"},
                [&](OpResult<core::SessionView> r) { third.emplace(std::move(r)); });
  backend.Check("lobby", "d", core::Arrival{.client = "192.0.2.2"},
                [&](OpResult<core::SessionView> r) { other.emplace(std::move(r)); });
  ASSERT_TRUE(third && other);
  EXPECT_EQ(third->status(), OpStatus::kRateLimited);
  EXPECT_TRUE(other->ok());
}

// Format 4 keeps the incarnation; older snapshots load with incarnation 0.
TEST(RoomFormatTest, SnapshotKeepsTheIncarnation) {
  core::Room room(WrittenConfig(), kTtl, kT0);
  room.set_incarnation(0x1f2e3d4c5b6a7);
  BuildRoom(room);
  std::string bytes = Save(room);
  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(bytes);
  ASSERT_TRUE(restored.Restore(in));
  EXPECT_EQ(restored.incarnation(), 0x1f2e3d4c5b6a7u);
  EXPECT_EQ(Save(restored), bytes);
  // The holders' admissions are found again (derived, not saved).
  auto c = restored.Check("c", kT0 + 1'001);
  EXPECT_EQ(restored.AdmissionHolder(c.admission, kT0 + 1'001), std::optional<std::string>("c"));

  core::Room old(core::RoomConfig{}, kTtl, 0);
  ByteReader old_in(kRoomFormat1);
  ASSERT_TRUE(old.Restore(old_in));
  EXPECT_EQ(old.incarnation(), 0u);
}

// kCreateRoom carries the incarnation; a kPutRoom3 that creates (older logs) makes incarnation 0.
TEST(RoomFormatTest, CreateRoomRecordReplaysTheIncarnation) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch create;
  create.capacity = 1;
  std::string record;
  ByteWriter w = store::BeginChange(record, store::ChangeKind::kCreateRoom, kT0, "new");
  w.Put<uint64_t>(777);
  store::PutRoomPatch(w, create, store::ChangeKind::kPutRoom3);
  ASSERT_TRUE(backend.Replay(record).ok());
  EXPECT_FALSE(backend.Replay(record).ok());  // created twice: the log diverged
  ByteWriter o = store::BeginChange(record, store::ChangeKind::kPutRoom3, kT0, "old");
  store::PutRoomPatch(o, create, store::ChangeKind::kPutRoom3);
  ASSERT_TRUE(backend.Replay(record).ok());
  clock.Set(kT0 + 1);
  std::optional<core::SessionView> a, b;
  backend.Check("new", "a", [&](OpResult<core::SessionView> r) { a = *r; });
  backend.Check("old", "b", [&](OpResult<core::SessionView> r) { b = *r; });
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->incarnation, 777u);
  EXPECT_EQ(b->incarnation, 0u);
}

// ---- room format 5, kPutRoom4 and kCreateRoom2: the gate --------------------------------------

// A gate's JSON text as the HTTP layer stores it: any UTF-8, quotes and escapes kept byte for
// byte (a NUL too: the engine does not read it).
const std::string kGate(
    R"({"cookie":"anteroom_pass","bypass":{"paths":["/static/*","/caf\u00e9/*"]},)"
    "\"hosts\":[\"shop.example\",\"b\xc3\xbc"
    "cher.example\"],\"note\":\"\xf0\x9f\x9a\xaa\\n\",\"z\":\"\0\"}"sv);

// Room format 4, as written by anteroom before the gate (commit 5af0a5b), for the room
// FormatFourRoom() builds.
const std::string kRoomFormat4 =
    Unhex(
        "0400000002000000000000008813000000000000307500000000000001e09304"
        "0000000000010a000000000000000001080000002f77656c636f6d6500000000"
        "0000000000000000000000000000010400000000000000c027090000000000e8"
        "6be5cf8b0100000400000000000000000000000068e5cf8b0100000068e5cf8b"
        "01000001000000000000000301ffffffff01000000620168e5cf8b0100000168"
        "e5cf8b01000002000000000000000101ffffffff0100000063e86be5cf8b0100"
        "00e86be5cf8b01000003000000000000000100ffffffff01000000640368e5cf"
        "8b010000000000000000000000000000000000000000ffffffff010000000000"
        "00000000000003000000000000000100000063bacb9f170300000200000031c2"
        "cb9f170300000300000066bacb9f170300000100000000000000030000000200"
        "0000000000000300000000000000") +
    EmptyBuckets(20) + Unhex("00f1536500000000020000000000000001f15365000000000100000000000000") +
    EmptyBuckets(59) + Unhex("01f15365000000000100000000000000") + EmptyBuckets(38) +
    Unhex(
        "0300000000000000000000000000000001000000000000000100000000000000"
        "01000000610100000000000000a893eecf8b0100000100000000000000a893ee"
        "cf8b010000010000006100000000000000000000000000000000000000000000"
        "0000a7b6c5d4e3f20100");

// A target URL, a challenge and an incarnation; the room of BuildRoom().
core::RoomConfig FormatFourConfig() {
  core::RoomConfig c = WrittenConfig();
  c.target_url = "/welcome";
  c.challenge_difficulty = 4;
  return c;
}
void FormatFourRoom(core::Room& room) {
  room.set_incarnation(0x1f2e3d4c5b6a7);
  BuildRoom(room);
}

TEST(RoomFormatTest, Format4SnapshotStillRestoresWithoutAGate) {
  core::RoomConfig before;
  before.gate = "{}";  // a gate before the restore does not survive it
  core::Room restored(before, kTtl, 0);
  ByteReader in(kRoomFormat4);
  ASSERT_TRUE(restored.Restore(in));
  EXPECT_TRUE(in.done());
  EXPECT_EQ(restored.config().gate, std::nullopt);
  EXPECT_EQ(restored.config().target_url, std::optional<std::string>("/welcome"));
  EXPECT_EQ(restored.config().challenge_difficulty, std::optional<int64_t>(4));
  EXPECT_EQ(restored.incarnation(), 0x1f2e3d4c5b6a7u);

  core::Room live(FormatFourConfig(), kTtl, kT0);
  FormatFourRoom(live);
  EXPECT_EQ(Save(restored), Save(live));
}

// A whole state as the anteroom before the gate wrote it (state format 2, whose own layout the
// gate did not change, holding a room of format 4) loads with no gate, and saves as today's.
TEST(RoomFormatTest, StateWithAFormat4RoomStillLoads) {
  std::string state;
  ByteWriter w(state);
  w.Put<uint32_t>(2);  // u32 format | u64 rooms | (str name, room) | u64 queues
  w.Put<uint64_t>(1);
  w.PutString("lobby");
  w.PutBytes(kRoomFormat4);
  w.Put<uint64_t>(0);
  FakeClock clock(kT0 + 1'000);
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  ByteReader in(state);
  ASSERT_TRUE(backend.LoadState(in));
  auto info = GetRoom(backend, "lobby");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.gate, std::nullopt);
  EXPECT_EQ(info->config.target_url, std::optional<std::string>("/welcome"));
  EXPECT_EQ(info->active, 2);

  core::Room live(FormatFourConfig(), kTtl, kT0);
  FormatFourRoom(live);
  std::string saved;
  ByteWriter sw(saved);
  backend.SaveState(sw);
  std::string room_now = Save(live);
  EXPECT_NE(saved.find(room_now), std::string::npos) << "the room saved in today's format";
}

TEST(RoomFormatTest, SnapshotKeepsTheGate) {
  for (const std::string& gate : {kGate, std::string(), std::string(core::kMaxGateBytes, 'g')}) {
    core::RoomConfig config = FormatFourConfig();
    config.gate = gate;
    core::Room room(config, kTtl, kT0);
    FormatFourRoom(room);
    std::string bytes = Save(room);

    core::Room restored(core::RoomConfig{}, kTtl, 0);
    ByteReader in(bytes);
    ASSERT_TRUE(restored.Restore(in)) << gate.size();
    EXPECT_TRUE(in.done());
    EXPECT_EQ(restored.config().gate, std::optional<std::string>(gate));
    EXPECT_EQ(Save(restored), bytes);
    // The gate is the only difference from the same room without one: the rules never read it.
    core::Room plain(FormatFourConfig(), kTtl, kT0);
    FormatFourRoom(plain);
    core::RoomPatch clear;
    clear.gate = std::optional<std::string>();
    restored.Reconfigure(clear, kT0 + 1'000);
    plain.Reconfigure(clear, kT0 + 1'000);
    EXPECT_EQ(Save(restored), Save(plain));
  }
}

// A gate over kMaxGateBytes was never passed by the HTTP layer: in a snapshot it is damage, and
// so is a snapshot cut inside the gate's text.
TEST(RoomFormatTest, SnapshotWithAGateTooLongOrCutIsRefused) {
  core::RoomConfig config = FormatFourConfig();
  config.gate = std::string(core::kMaxGateBytes + 1, 'g');
  core::Room big(config, kTtl, kT0);
  std::string bytes = Save(big);
  core::Room refused(core::RoomConfig{}, kTtl, 0);
  ByteReader in(bytes);
  EXPECT_FALSE(refused.Restore(in));

  config.gate = kGate;
  core::Room room(config, kTtl, kT0);
  bytes = Save(room);
  size_t gate_at = bytes.find(kGate);
  ASSERT_NE(gate_at, std::string::npos);
  for (size_t cut : {gate_at - 5, gate_at - 1, gate_at, gate_at + kGate.size() / 2}) {
    core::Room restored(core::RoomConfig{}, kTtl, 0);
    ByteReader cut_in(std::string_view(bytes).substr(0, cut));
    EXPECT_FALSE(restored.Restore(cut_in)) << cut;
  }
  // A damaged length: more bytes than there are, or a gate that swallows the fields after it.
  for (uint32_t length : {0xffffffffu, static_cast<uint32_t>(bytes.size() - gate_at)}) {
    std::string damaged = bytes;
    std::memcpy(damaged.data() + gate_at - 4, &length, 4);
    core::Room restored(core::RoomConfig{}, kTtl, 0);
    ByteReader damaged_in(damaged);
    EXPECT_FALSE(restored.Restore(damaged_in)) << length;
  }
}

TEST(RoomFormatTest, PutRoomRecordRoundTripsTheGate) {
  std::vector<core::RoomPatch> patches(6);
  patches[1].gate = std::optional<std::string>(kGate);
  patches[2].gate = std::optional<std::string>();  // clear
  patches[3].gate = std::optional<std::string>("");
  patches[4].gate = std::optional<std::string>(std::string(core::kMaxGateBytes, '{'));
  patches[5].capacity = 4;
  patches[5].target_url = std::optional<std::string>("/in");
  patches[5].challenge_difficulty = std::optional<int64_t>(12);
  patches[5].gate = std::optional<std::string>(kGate);
  for (size_t i = 0; i < patches.size(); ++i) {
    const core::RoomPatch& p = patches[i];
    std::string body;
    ByteWriter w(body);
    store::PutRoomPatch(w, p, store::ChangeKind::kPutRoom4);
    ByteReader r(body);
    core::RoomPatch got = store::GetRoomPatch(r, store::ChangeKind::kPutRoom4);
    EXPECT_TRUE(r.done()) << i;
    EXPECT_EQ(got.gate, p.gate) << i;
    EXPECT_EQ(got.capacity, p.capacity) << i;
    EXPECT_EQ(got.target_url, p.target_url) << i;
    EXPECT_EQ(got.challenge_difficulty, p.challenge_difficulty) << i;
    EXPECT_TRUE(core::InRange(got)) << i;
  }
  // Format 3 has no gate: its writer leaves it out, and its reader stops before one.
  std::string body;
  ByteWriter w(body);
  store::PutRoomPatch(w, patches[5], store::ChangeKind::kPutRoom3);
  ByteReader r(body);
  core::RoomPatch got = store::GetRoomPatch(r, store::ChangeKind::kPutRoom3);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(got.gate, std::nullopt);
  EXPECT_EQ(got.challenge_difficulty, std::optional<int64_t>(12));
}

// A kCreateRoom record as written before kCreateRoom2: room "lobby" at kT0, incarnation 777,
// capacity 3, target URL "/welcome", places_per_client 2.
const std::string kCreateRoomFormat3 = Unhex(
    "0a0068e5cf8b010000050000006c6f6262790903000000000000010300000000"
    "00000000000000000101080000002f77656c636f6d6500010102000000000000"
    "0000");
// A kPutRoom3 record as written before kPutRoom4: "lobby" at kT0 + 1000, paused, target URL
// cleared, challenge difficulty 8.
const std::string kPutRoomFormat3 = Unhex(
    "08e86be5cf8b010000050000006c6f6262790000000000010101000000010108"
    "00000000000000");

std::string CreateRecord(const std::string& room, int64_t now, uint64_t incarnation,
                         const core::RoomPatch& patch) {
  std::string record;
  ByteWriter w = store::BeginChange(record, store::ChangeKind::kCreateRoom2, now, room);
  w.Put(incarnation);
  store::PutRoomPatch(w, patch, store::ChangeKind::kPutRoom4);
  return record;
}
std::string ChangeRecord(const std::string& room, int64_t now, const core::RoomPatch& patch) {
  std::string record;
  ByteWriter w = store::BeginChange(record, store::ChangeKind::kPutRoom4, now, room);
  store::PutRoomPatch(w, patch, store::ChangeKind::kPutRoom4);
  return record;
}

TEST(RoomFormatTest, Format3CreateAndPutRoomRecordsStillReplayWithoutAGate) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  auto created = backend.Replay(kCreateRoomFormat3);
  ASSERT_TRUE(created.ok()) << created.message();
  auto info = GetRoom(backend, "lobby");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.capacity, 3);
  EXPECT_EQ(info->config.target_url, std::optional<std::string>("/welcome"));
  EXPECT_EQ(info->config.places_per_client, std::optional<int64_t>(2));
  EXPECT_EQ(info->config.gate, std::nullopt);

  // A gate set today, then an old-format change: it keeps the gate (format 3 cannot name it).
  core::RoomPatch gate;
  gate.gate = std::optional<std::string>(kGate);
  ASSERT_TRUE(backend.Replay(ChangeRecord("lobby", kT0 + 500, gate)).ok());
  auto changed = backend.Replay(kPutRoomFormat3);
  ASSERT_TRUE(changed.ok()) << changed.message();
  info = GetRoom(backend, "lobby");
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(info->config.paused);
  EXPECT_EQ(info->config.target_url, std::nullopt);
  EXPECT_EQ(info->config.challenge_difficulty, std::optional<int64_t>(8));
  EXPECT_EQ(info->config.gate, std::optional<std::string>(kGate));

  // The incarnation of the kCreateRoom record, on the admission of the first to join.
  core::RoomPatch resume;
  resume.paused = false;
  ASSERT_TRUE(backend.Replay(ChangeRecord("lobby", kT0 + 1'500, resume)).ok());
  std::optional<core::SessionView> joined;
  clock.Set(kT0 + 2'000);
  backend.Check("lobby", "a", core::Arrival{.client = "", .proof_bits = 8},
                [&](OpResult<core::SessionView> r) {
                  if (r.ok()) joined = *r;
                });
  ASSERT_TRUE(joined.has_value());
  EXPECT_EQ(joined->incarnation, 777u);
}

TEST(RoomFormatTest, CreateRoom2AndPutRoom4RecordsCarryTheGate) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch create;
  create.capacity = 2;
  create.gate = std::optional<std::string>(kGate);
  ASSERT_TRUE(backend.Replay(CreateRecord("g", kT0, 4242, create)).ok());
  auto info = GetRoom(backend, "g");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.gate, std::optional<std::string>(kGate));

  core::RoomPatch other;  // a change without the gate keeps it
  other.capacity = 5;
  ASSERT_TRUE(backend.Replay(ChangeRecord("g", kT0 + 1, other)).ok());
  info = GetRoom(backend, "g");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.capacity, 5);
  EXPECT_EQ(info->config.gate, std::optional<std::string>(kGate));

  core::RoomPatch replace;
  replace.gate = std::optional<std::string>(R"({"cookie":"other"})");
  ASSERT_TRUE(backend.Replay(ChangeRecord("g", kT0 + 2, replace)).ok());
  info = GetRoom(backend, "g");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.gate, replace.gate);

  core::RoomPatch clear;
  clear.gate = std::optional<std::string>();
  ASSERT_TRUE(backend.Replay(ChangeRecord("g", kT0 + 3, clear)).ok());
  info = GetRoom(backend, "g");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.gate, std::nullopt);

  std::optional<core::SessionView> joined;
  clock.Set(kT0 + 4);
  backend.Check("g", "a", [&](OpResult<core::SessionView> r) {
    if (r.ok()) joined = *r;
  });
  ASSERT_TRUE(joined.has_value());
  EXPECT_EQ(joined->incarnation, 4242u);
}

// What the writer never writes is damage, and changes nothing: a gate over kMaxGateBytes, a
// record cut anywhere, bytes after the patch, a kPutRoom4 for a room that was never created.
TEST(RoomFormatTest, GateRecordsOutOfRangeOrDamagedAreRefused) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch create;
  create.capacity = 1;
  create.gate = std::optional<std::string>(std::string(core::kMaxGateBytes + 1, 'g'));
  EXPECT_FALSE(backend.Replay(CreateRecord("big", kT0, 1, create)).ok());
  core::RoomPatch change;
  change.gate = create.gate;
  EXPECT_FALSE(backend.Replay(ChangeRecord("big", kT0, change)).ok());
  EXPECT_EQ(backend.Summarize().rooms, 0u);

  create.gate = std::optional<std::string>(std::string(core::kMaxGateBytes, 'g'));
  ASSERT_TRUE(backend.Replay(CreateRecord("max", kT0, 1, create)).ok());
  change.gate = std::optional<std::string>(kGate);
  EXPECT_FALSE(backend.Replay(ChangeRecord("never-created", kT0, change)).ok());
  EXPECT_EQ(backend.Summarize().rooms, 1u);

  std::string record = ChangeRecord("max", kT0 + 1, change);
  for (size_t cut = 1; cut < record.size(); ++cut) {
    EXPECT_FALSE(backend.Replay(std::string_view(record).substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(backend.Replay(record + '\0').ok());
  create.capacity = 2;
  std::string created = CreateRecord("cut", kT0 + 1, 2, create);
  EXPECT_FALSE(backend.Replay(created.substr(0, created.size() - 1)).ok());
  auto info = GetRoom(backend, "max");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.gate, std::optional<std::string>(std::string(core::kMaxGateBytes, 'g')));
  EXPECT_EQ(backend.Summarize().rooms, 1u);
  ASSERT_TRUE(backend.Replay(record).ok());
  info = GetRoom(backend, "max");
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->config.gate, std::optional<std::string>(kGate));
}

}  // namespace
}  // namespace anteroom
