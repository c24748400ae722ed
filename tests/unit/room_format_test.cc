// The durable formats that carry a room's settings: the room snapshot (core/room_snapshot.cc)
// and the log records of a room's creation and change (store/memory/change_record.h): every
// setting round-trips, and what the writer never writes is refused as damage.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/clock.h"
#include "core/minute_window.h"
#include "core/outflow_estimate.h"
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

// Layout 2 (data format 5) is layout 3 with the freed slots' minute window after the admitted
// one and without the flow histories at the end; layout 1 (data format 4) is layout 2 without
// the page settings and the count of notices at its end. Both still load, with empty
// histories, and save as layout 3.
std::string EmptyMinuteWindow() {
  std::string out;
  ByteWriter w(out);
  core::MinuteWindow().Save(w);
  return out;
}
std::string EmptyFlowHistories() {
  std::string out;
  ByteWriter w(out);
  core::FlowHistory().Save(w);
  core::FlowHistory().Save(w);
  return out;
}
// After the flow histories, layout 3 ends with notify_at_position (off), the told prefix (0) and
// the count of sessions told (0).
std::string NoNearTail() { return std::string(1 + 8 + 8 + 8, '\0'); }
std::string AsLayoutTwo(const std::string& v3) {
  // A room that admitted nobody: its admitted window is empty; the freed one followed it.
  const std::string window = EmptyMinuteWindow(), flows = EmptyFlowHistories() + NoNearTail();
  size_t at = v3.find(window);
  EXPECT_NE(at, std::string::npos);
  EXPECT_EQ(v3.substr(v3.size() - flows.size()), flows);
  std::string v2 = v3.substr(0, at + window.size()) + window +
                   v3.substr(at + window.size(), v3.size() - flows.size() - at - window.size());
  v2[0] = 2;
  return v2;
}

TEST(RoomFormatTest, LayoutTwoStillLoadsWithEmptyFlowHistories) {
  core::Room room(WrittenConfig(), kTtl, kT0);
  std::string v3 = Save(room);
  ASSERT_EQ(v3[0], 3);
  std::string v2 = AsLayoutTwo(v3);
  core::Room old(core::RoomConfig{}, kTtl, 0);
  ByteReader in(v2);
  ASSERT_TRUE(old.Restore(in));
  EXPECT_TRUE(in.done());
  EXPECT_EQ(Save(old), v3);
}

TEST(RoomFormatTest, LayoutOneStillLoadsWithoutAPage) {
  core::Room room(WrittenConfig(), kTtl, kT0);
  std::string v3 = Save(room);
  std::string v2 = AsLayoutTwo(v3);
  constexpr size_t kNoPageAndNoticeCount = 1 + 8;  // no page; the count of notices
  ASSERT_EQ(v2[v2.size() - kNoPageAndNoticeCount], '\0');
  std::string v1 = v2.substr(0, v2.size() - kNoPageAndNoticeCount);
  v1[0] = 1;
  core::Room old(core::RoomConfig{}, kTtl, 0);
  ByteReader in(v1);
  ASSERT_TRUE(old.Restore(in));
  EXPECT_TRUE(in.done());
  EXPECT_FALSE(old.config().page.has_value());
  EXPECT_EQ(Save(old), v3);
}

// The flow histories are kept: a restored room shows the same ETA.
TEST(RoomFormatTest, SnapshotKeepsTheFlowHistories) {
  core::Room room(WrittenConfig(), kTtl, kT0);
  BuildRoom(room);
  std::string bytes = Save(room);
  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(bytes);
  ASSERT_TRUE(restored.Restore(in));
  EXPECT_EQ(Save(restored), bytes);
  auto before = room.ReadLine(0, kT0 + 5'000);
  auto after = restored.ReadLine(0, kT0 + 5'000);
  EXPECT_GT(before.flow.out_per_ms, 0);
  EXPECT_GT(before.flow.in_per_ms, 0);
  EXPECT_EQ(after.flow, before.flow);
  EXPECT_EQ(restored.Check("d", kT0 + 5'000).eta_ms, room.Check("d", kT0 + 5'000).eta_ms);
}

TEST(RoomFormatTest, UnknownSnapshotFormatIsRefused) {
  core::Room room(WrittenConfig(), kTtl, kT0);
  std::string bytes = Save(room);
  for (uint32_t format : {0u, 4u}) {
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
  const std::string counters = Unhex(
      "0200000000000000"
      "0300000000000000");
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
    store::PutRoomPatch(w, p);
    ByteReader r(body);
    core::RoomPatch got = store::GetRoomPatch(r);
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
    store::PutRoomPatch(w, p);
    ByteReader r(body);
    core::RoomPatch got = store::GetRoomPatch(r);
    EXPECT_TRUE(r.done()) << i;
    EXPECT_EQ(got.capacity, p.capacity) << i;
    EXPECT_EQ(got.target_url, p.target_url) << i;
    EXPECT_EQ(got.joins_per_minute_per_client, p.joins_per_minute_per_client) << i;
    EXPECT_EQ(got.places_per_client, p.places_per_client) << i;
    EXPECT_EQ(got.challenge_difficulty, p.challenge_difficulty) << i;
  }
}

// ---- per-client state ---------------------------------------------------------------------

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
    store::EncodeChange(record, kT0, "r", store::PutRoomRecord{.patch = bad[i]});
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

TEST(RoomFormatTest, CheckRecordsCountForTheirClientOnReplay) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch create;
  create.capacity = 1;
  create.places_per_client = std::optional<int64_t>(2);
  std::string record;
  store::EncodeChange(record, kT0, "lobby", store::CreateRoomRecord{.patch = create});
  ASSERT_TRUE(backend.Replay(record).ok());
  for (const char* session : {"a", "b"}) {
    store::EncodeChange(record, kT0 + 1, "lobby",
                        store::CheckRecord{.session = session, .client = "192.0.2.1"});
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
}

// A creation carries the incarnation; a change never creates a room.
TEST(RoomFormatTest, CreateRoomRecordReplaysTheIncarnation) {
  FakeClock clock;
  store::MemoryBackend backend(clock, store::MemoryBackendOptions{.run_timer = false});
  core::RoomPatch create;
  create.capacity = 1;
  std::string record;
  store::EncodeChange(record, kT0, "new",
                      store::CreateRoomRecord{.incarnation = 777, .patch = create});
  ASSERT_TRUE(backend.Replay(record).ok());
  EXPECT_FALSE(backend.Replay(record).ok());  // created twice: the log diverged
  store::EncodeChange(record, kT0, "old", store::PutRoomRecord{.patch = create});
  EXPECT_FALSE(backend.Replay(record).ok());  // changed before it was created
  clock.Set(kT0 + 1);
  std::optional<core::SessionView> a;
  backend.Check("new", "a", [&](OpResult<core::SessionView> r) { a = *r; });
  ASSERT_TRUE(a);
  EXPECT_EQ(a->incarnation, 777u);
  EXPECT_EQ(backend.Summarize().rooms, 1u);
}

// ---- the gate -------------------------------------------------------------------------------

// A gate's JSON text as the HTTP layer stores it: any UTF-8, quotes and escapes kept byte for
// byte (a NUL too: the engine does not read it).
const std::string kGate(
    R"({"cookie":"anteroom_pass","bypass":{"paths":["/static/*","/caf\u00e9/*"]},)"
    "\"hosts\":[\"shop.example\",\"b\xc3\xbc"
    "cher.example\"],\"note\":\"\xf0\x9f\x9a\xaa\\n\",\"z\":\"\0\"}"sv);

// A target URL, a challenge and an incarnation; the room of BuildRoom().
core::RoomConfig GateRoomConfig() {
  core::RoomConfig c = WrittenConfig();
  c.target_url = "/welcome";
  c.challenge_difficulty = 4;
  return c;
}
void GateRoom(core::Room& room) {
  room.set_incarnation(0x1f2e3d4c5b6a7);
  BuildRoom(room);
}

TEST(RoomFormatTest, SnapshotKeepsTheGate) {
  for (const std::string& gate : {kGate, std::string(), std::string(core::kMaxGateBytes, 'g')}) {
    core::RoomConfig config = GateRoomConfig();
    config.gate = gate;
    core::Room room(config, kTtl, kT0);
    GateRoom(room);
    std::string bytes = Save(room);

    core::Room restored(core::RoomConfig{}, kTtl, 0);
    ByteReader in(bytes);
    ASSERT_TRUE(restored.Restore(in)) << gate.size();
    EXPECT_TRUE(in.done());
    EXPECT_EQ(restored.config().gate, std::optional<std::string>(gate));
    EXPECT_EQ(Save(restored), bytes);
    // The gate is the only difference from the same room without one: the rules never read it.
    core::Room plain(GateRoomConfig(), kTtl, kT0);
    GateRoom(plain);
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
  core::RoomConfig config = GateRoomConfig();
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
    store::PutRoomPatch(w, p);
    ByteReader r(body);
    core::RoomPatch got = store::GetRoomPatch(r);
    EXPECT_TRUE(r.done()) << i;
    EXPECT_EQ(got.gate, p.gate) << i;
    EXPECT_EQ(got.capacity, p.capacity) << i;
    EXPECT_EQ(got.target_url, p.target_url) << i;
    EXPECT_EQ(got.challenge_difficulty, p.challenge_difficulty) << i;
    EXPECT_TRUE(core::InRange(got)) << i;
  }
}

std::string CreateRecord(const std::string& room, int64_t now, uint64_t incarnation,
                         const core::RoomPatch& patch) {
  std::string record;
  store::EncodeChange(record, now, room,
                      store::CreateRoomRecord{.incarnation = incarnation, .patch = patch});
  return record;
}
std::string ChangeRecord(const std::string& room, int64_t now, const core::RoomPatch& patch) {
  std::string record;
  store::EncodeChange(record, now, room, store::PutRoomRecord{.patch = patch});
  return record;
}

TEST(RoomFormatTest, CreateAndPutRoomRecordsCarryTheGate) {
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
  // Cut by its last byte it is format 5's layout of the same change (a patch ended after the
  // page), by two format 4's (ended after include_active: AFormat4PatchReadsWithoutAPage); the
  // log's framing catches such a cut.
  for (size_t cut = 1; cut + 2 < record.size(); ++cut) {
    EXPECT_FALSE(backend.Replay(std::string_view(record).substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(backend.Replay(record + '\0').ok());
  create.capacity = 2;
  std::string created = CreateRecord("cut", kT0 + 1, 2, create);
  EXPECT_FALSE(backend.Replay(created.substr(0, created.size() - 3)).ok());
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
// ---- the page settings ----------------------------------------------------------------------

TEST(RoomFormatTest, SnapshotAndRecordsKeepThePage) {
  const std::string page = R"({"title":"Drop \u00e9","colors":{"accent":"#2f6fde"}})";
  for (const std::string& text : {page, std::string(), std::string(core::kMaxPageBytes, 'p')}) {
    core::RoomConfig config = GateRoomConfig();
    config.gate = kGate;
    config.page = text;
    core::Room room(config, kTtl, kT0);
    GateRoom(room);
    std::string bytes = Save(room);
    core::Room restored(core::RoomConfig{}, kTtl, 0);
    ByteReader in(bytes);
    ASSERT_TRUE(restored.Restore(in)) << text.size();
    EXPECT_TRUE(in.done());
    EXPECT_EQ(restored.config().page, std::optional<std::string>(text));
    EXPECT_EQ(restored.config().gate, std::optional<std::string>(kGate));
    EXPECT_EQ(Save(restored), bytes);
  }
  // Over kMaxPageBytes it was never written: damage.
  core::RoomConfig config = GateRoomConfig();
  config.page = std::string(core::kMaxPageBytes + 1, 'p');
  core::Room room(config, kTtl, kT0);
  GateRoom(room);
  std::string bytes = Save(room);
  core::Room restored(core::RoomConfig{}, kTtl, 0);
  ByteReader in(bytes);
  EXPECT_FALSE(restored.Restore(in));

  std::vector<core::RoomPatch> patches(4);
  patches[1].page = std::optional<std::string>(page);
  patches[2].page = std::optional<std::string>();  // clear
  patches[3].gate = std::optional<std::string>(kGate);
  patches[3].page = std::optional<std::string>("");
  for (size_t i = 0; i < patches.size(); ++i) {
    std::string body;
    ByteWriter w(body);
    store::PutRoomPatch(w, patches[i]);
    ByteReader r(body);
    core::RoomPatch got = store::GetRoomPatch(r);
    EXPECT_TRUE(r.done()) << i;
    EXPECT_EQ(got.page, patches[i].page) << i;
    EXPECT_EQ(got.gate, patches[i].gate) << i;
  }
  core::RoomPatch too_long;
  too_long.page = std::optional<std::string>(std::string(core::kMaxPageBytes + 1, 'p'));
  EXPECT_FALSE(core::InRange(too_long));
}

// Data format 4 wrote a patch without the page: it ended after include_active. Such a record
// still reads, as a patch that leaves the page alone.
TEST(RoomFormatTest, AFormat4PatchReadsWithoutAPage) {
  core::RoomPatch patch;
  patch.capacity = 7;
  patch.gate = std::optional<std::string>(kGate);
  patch.include_active = true;
  std::string body;
  ByteWriter w(body);
  store::PutRoomPatch(w, patch);
  ASSERT_EQ(body.back(), '\0');  // notify_at_position: not named
  body.pop_back();               // as format 5 wrote it
  ASSERT_EQ(body.back(), '\0');  // page: not named
  body.pop_back();               // as format 4 wrote it
  ByteReader r(body);
  core::RoomPatch got = store::GetRoomPatch(r);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(got.capacity, patch.capacity);
  EXPECT_EQ(got.gate, patch.gate);
  EXPECT_TRUE(got.include_active);
  EXPECT_FALSE(got.page.has_value());
}

// notify_at_position goes at the end of a patch (format 6) and is cleared by a named null.
TEST(RoomFormatTest, APatchKeepsNotifyAtPosition) {
  for (std::optional<int64_t> n : {std::optional<int64_t>(5), std::optional<int64_t>()}) {
    core::RoomPatch patch;
    patch.notify_at_position = n;
    std::string body;
    ByteWriter w(body);
    store::PutRoomPatch(w, patch);
    ByteReader r(body);
    core::RoomPatch got = store::GetRoomPatch(r);
    EXPECT_TRUE(r.done());
    ASSERT_TRUE(got.notify_at_position.has_value());
    EXPECT_EQ(*got.notify_at_position, n);
  }
}

}  // namespace anteroom
