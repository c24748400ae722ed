// Unit tests of notify when near in core::Room (room.h "Notify when near"): room.position_near is
// told once per session, the first time its position is <= notify_at_position, with that
// position; whatever moves the line (admissions, leaving, passes, the brake sending holders
// back, a draw), and across a snapshot.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "core/room.h"

namespace anteroom::core {
namespace {

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr int64_t kTokenTtlMs = 600'000;

RoomConfig Config(int64_t capacity, std::optional<int64_t> near) {
  RoomConfig c;
  c.capacity = capacity;
  c.grace_ms = 5'000;
  c.checkin_timeout_ms = 30'000;
  c.idle_timeout_ms = 300'000;
  c.notify_at_position = near;
  return c;
}

std::unique_ptr<Room> MakeRoom(RoomConfig config) {
  auto room = std::make_unique<Room>(config, kTokenTtlMs, kT0);
  DrawSeed seed{};
  seed[0] = 7;
  room->set_seed(seed);
  room->set_noting(true);
  return room;
}

using Near = std::pair<std::string, int64_t>;  // session, position

// The room.position_near notices since the last call, in order.
std::vector<Near> TakeNear(Room& room) {
  std::vector<Near> out;
  for (const RoomNotice& n : room.TakeNotices()) {
    if (n.kind == NoticeKind::kPositionNear) out.emplace_back(n.session, n.position);
  }
  return out;
}

void Must(const OpResult<SessionView>& r) { ASSERT_TRUE(r.ok()) << r.message(); }

TEST(RoomNearTest, EachIsToldOnceWhenItsPositionFirstReachesN) {
  auto room = MakeRoom(Config(1, 2));
  room->Check("a", kT0);  // in
  EXPECT_TRUE(TakeNear(*room).empty());
  room->Check("b", kT0 + 1);  // position 1: near at its join
  room->Check("c", kT0 + 2);  // 2
  room->Check("d", kT0 + 3);  // 3
  room->Check("e", kT0 + 4);  // 4
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"b", 1}, {"c", 2}}));
  Must(room->Leave("a", /*final=*/true, kT0 + 5));  // b in; c 1, d 2
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"d", 2}}));
  Must(room->Leave("c", /*final=*/false, kT0 + 6));  // out of the line: d 1, e 2
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"e", 2}}));
  // Checks, and positions moving without reaching anyone new, tell nothing more.
  room->Check("d", kT0 + 7);
  room->Check("e", kT0 + 7);
  Must(room->Leave("b", /*final=*/true, kT0 + 8));  // d in; e 1
  EXPECT_TRUE(TakeNear(*room).empty());
}

TEST(RoomNearTest, TheNoticeCarriesTheTimeTheRulesDecidedIt) {
  auto room = MakeRoom(Config(1, 1));
  room->Check("a", kT0);
  room->Check("b", kT0);  // 1
  room->Check("c", kT0);  // 2
  room->TakeNotices();
  room->Check("b", kT0 + 20'000);
  room->Check("c", kT0 + 20'000);
  Must(room->Leave("a", /*final=*/false, kT0 + 20'000));  // grace: 5 s
  room->Advance(kT0 + 60'000);  // a expires at +25 s: b in, c 1 (c keeps its place till +50 s)
  std::vector<RoomNotice> notices = room->TakeNotices();
  bool seen = false;
  for (const RoomNotice& n : notices) {
    if (n.kind != NoticeKind::kPositionNear) continue;
    EXPECT_EQ(n.session, "c");
    EXPECT_EQ(n.position, 1);
    EXPECT_EQ(n.at, kT0 + 25'000);
    seen = true;
  }
  EXPECT_TRUE(seen);
}

TEST(RoomNearTest, OffUntilSetThenTheWaitingWithinNAreToldAtOnce) {
  auto room = MakeRoom(Config(1, std::nullopt));
  for (const char* s : {"a", "b", "c", "d"}) room->Check(s, kT0);
  EXPECT_TRUE(TakeNear(*room).empty());
  RoomPatch on;
  on.notify_at_position = 2;
  room->Reconfigure(on, kT0 + 1);
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"b", 1}, {"c", 2}}));
  RoomPatch wider;
  wider.notify_at_position = 3;
  room->Reconfigure(wider, kT0 + 2);
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"d", 3}}));
  RoomPatch off;
  off.notify_at_position = std::optional<int64_t>();
  room->Reconfigure(off, kT0 + 3);
  room->Check("e", kT0 + 4);
  Must(room->Leave("a", true, kT0 + 5));
  EXPECT_TRUE(TakeNear(*room).empty());
  EXPECT_FALSE(room->config().notify_at_position.has_value());
}

TEST(RoomNearTest, TheRandomMethodHasNoPositionsToTell) {
  auto config = Config(1, 3);
  config.queueing_method = QueueingMethod::kRandom;
  auto room = MakeRoom(config);
  for (const char* s : {"a", "b", "c"}) room->Check(s, kT0);
  EXPECT_TRUE(TakeNear(*room).empty());
  // Back to fifo: the waiting within 3 are told then.
  RoomPatch fifo;
  fifo.queueing_method = QueueingMethod::kFifo;
  room->Reconfigure(fifo, kT0 + 1);
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"b", 1}, {"c", 2}}));
}

TEST(RoomNearTest, APassMovesOneUpAndItIsToldAtItsNewPosition) {
  auto room = MakeRoom(Config(1, 2));
  for (const char* s : {"a", "b", "c", "d", "e"}) room->Check(s, kT0);
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"b", 1}, {"c", 2}}));
  std::string code = "f.secret-f";
  RoomPass p{.id = "f",
             .digest = PassDigest(code),
             .kind = PassKind::kFront,
             .uses = 2,
             .uses_left = 2,
             .expires_at = std::nullopt,
             .created_at = kT0};
  ASSERT_TRUE(room->AddPasses({p}, kT0).ok());
  // e goes to the front line: position 1, told there; b and c were told already.
  Must(room->Check("e", Arrival{.client = "", .proof_bits = 0, .pass = code}, kT0 + 1));
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"e", 1}}));
  // c, told before, uses it too: behind e, nobody new.
  Must(room->Check("c", Arrival{.client = "", .proof_bits = 0, .pass = code}, kT0 + 2));
  EXPECT_TRUE(TakeNear(*room).empty());
  // The line is e, c, b, d: d is told when b goes.
  Must(room->Leave("b", false, kT0 + 3));
  EXPECT_TRUE(TakeNear(*room).empty()) << "d is at 3";
  Must(room->Leave("a", true, kT0 + 4));  // e in: c 1, d 2
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"d", 2}}));
}

TEST(RoomNearTest, HoldersSentBackToTheHeadAreToldOnceIfNeverBefore) {
  auto room = MakeRoom(Config(2, 1));
  for (const char* s : {"a", "b", "c", "d"}) room->Check(s, kT0);  // a, b in; c 1, d 2
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"c", 1}}));
  RoomPatch brake;
  brake.queueing_method = QueueingMethod::kQueueAll;
  brake.include_active = true;
  room->Reconfigure(brake, kT0 + 1);  // a, b, c, d: a and b never waited
  EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"a", 1}}));
  RoomPatch go;
  go.queueing_method = QueueingMethod::kFifo;
  room->Reconfigure(go, kT0 + 2);  // a, b in; c 1 again: told once only
  EXPECT_TRUE(TakeNear(*room).empty());
}

TEST(RoomNearTest, ARestoredRoomKnowsWhoWasToldAndGoesOnAlike) {
  auto live = MakeRoom(Config(1, 2));
  for (const char* s : {"a", "b", "c", "d", "e"}) live->Check(s, kT0);
  Must(live->Leave("c", false, kT0 + 1));
  live->TakeNotices();
  std::string bytes;
  ByteWriter w(bytes);
  live->Save(w);
  Room restored(Config(1, std::nullopt), kTokenTtlMs, kT0);
  ByteReader r(bytes);
  ASSERT_TRUE(restored.Restore(r));
  restored.set_noting(true);
  EXPECT_EQ(restored.config().notify_at_position, std::optional<int64_t>(2));
  std::string again;
  ByteWriter w2(again);
  restored.Save(w2);
  EXPECT_EQ(bytes, again);
  for (Room* room : {live.get(), &restored}) {
    Must(room->Leave("a", true, kT0 + 2));  // b in; d 1, e 2
    EXPECT_EQ(TakeNear(*room), (std::vector<Near>{{"e", 2}}));
  }
}

TEST(RoomNearTest, TheSettingIsBounded) {
  RoomPatch p;
  p.notify_at_position = kMaxNotifyAtPosition;
  EXPECT_TRUE(InRange(p));
  p.notify_at_position = kMaxNotifyAtPosition + 1;
  EXPECT_FALSE(InRange(p));
  p.notify_at_position = 0;
  EXPECT_FALSE(InRange(p));
  p.notify_at_position = std::optional<int64_t>();
  EXPECT_TRUE(InRange(p));
}

}  // namespace
}  // namespace anteroom::core
