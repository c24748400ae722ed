// The launch-day conformance suite: scheduled events, the pre-queue and its draw, queueing
// methods and passes, through store::Backend with the backend's own timer driving the draw (the
// embedded backend's timer, the Redis backend's sweeper). Every backend runs all of it.

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "backend_fixture.h"
#include "common/wire_errors.h"
#include "store/backend.h"

namespace anteroom::store {
namespace {

using core::EventSpec;
using core::PassKind;
using core::QueueingMethod;
using core::RoomEvent;
using core::RoomPatch;
using core::SessionStatus;
using core::SessionView;

class LaunchConformanceTest : public conformance::BackendTest {
 protected:
  OpResult<core::RoomInfo> Put(const std::string& room, RoomPatch patch) {
    return Await<core::RoomInfo>([&](auto done) { b().PutRoom(room, patch, done); });
  }
  OpResult<SessionView> Check(const std::string& room, const std::string& session) {
    return Await<SessionView>([&](auto done) { b().Check(room, session, done); });
  }
  OpResult<RoomEvent> PutEvent(const std::string& room, const std::string& id, EventSpec spec) {
    return Await<RoomEvent>([&](auto done) { b().PutEvent(room, id, spec, done); });
  }
  OpResult<std::vector<RoomEvent>> Events(const std::string& room) {
    return Await<std::vector<RoomEvent>>([&](auto done) { b().ListEvents(room, done); });
  }
  OpResult<RoomEvent> DeleteEvent(const std::string& room, const std::string& id) {
    return Await<RoomEvent>([&](auto done) { b().DeleteEvent(room, id, done); });
  }
  std::vector<std::string> Line(const std::string& room) {
    auto v = Await<core::LineView>([&](auto done) { b().ReadLine(room, 0, done); });
    std::vector<std::string> ids;
    if (!v.ok()) return ids;
    for (size_t i = 0; i < v->line.size(); ++i) ids.emplace_back(v->line[i]);
    return ids;
  }
  EventSpec Drop(int64_t prequeue_in, int64_t starts_in, int64_t ends_in, bool shuffle) {
    EventSpec e;
    e.name = "drop";
    e.prequeue_at = NowMs() + prequeue_in;
    e.starts_at = NowMs() + starts_in;
    e.ends_at = NowMs() + ends_in;
    e.shuffle_at_start = shuffle;
    return e;
  }
  OpResult<core::RoomInfo> Get(const std::string& room) {
    return Await<core::RoomInfo>([&](auto done) { b().GetRoom(room, done); });
  }
  OpResult<SessionView> Leave(const std::string& room, const std::string& session, bool final) {
    return Await<SessionView>([&](auto done) { b().Leave(room, session, final, done); });
  }
  OpResult<SessionView> Touch(const std::string& room, const std::string& session) {
    return Await<SessionView>([&](auto done) { b().Touch(room, session, done); });
  }
  OpResult<std::vector<core::MintedPass>> MintPasses(const std::string& room, PassKind kind,
                                                     int64_t uses = 1, int64_t count = 1,
                                                     std::optional<int64_t> expires_at = {}) {
    core::PassMint mint{.kind = kind, .uses = uses, .expires_at = expires_at, .count = count};
    return Await<std::vector<core::MintedPass>>(
        [&](auto done) { b().MintPasses(room, mint, done); });
  }
  // One pass's code (a failure, and "", when it was not minted).
  std::string Mint(const std::string& room, PassKind kind, int64_t uses = 1,
                   std::optional<int64_t> expires_at = {}) {
    auto minted = MintPasses(room, kind, uses, 1, expires_at);
    EXPECT_TRUE(minted.ok() && minted->size() == 1) << minted.message();
    return minted.ok() && minted->size() == 1 ? (*minted)[0].code : std::string();
  }
  OpResult<SessionView> Redeem(const std::string& room, const std::string& session,
                               const std::string& code, int64_t proof_bits = 0) {
    core::Arrival arrival{.client = "", .proof_bits = proof_bits, .pass = code};
    return Await<SessionView>([&](auto done) { b().Check(room, session, arrival, done); });
  }
  OpResult<std::vector<core::RoomPass>> Passes(const std::string& room) {
    return Await<std::vector<core::RoomPass>>([&](auto done) { b().ListPasses(room, done); });
  }
  OpResult<int64_t> Revoke(const std::string& room, std::optional<std::string> id) {
    return Await<int64_t>([&](auto done) { b().RevokePasses(room, id, done); });
  }
  int64_t UsesLeft(const std::string& room) {
    auto passes = Passes(room);
    EXPECT_TRUE(passes.ok()) << passes.message();
    int64_t left = 0;
    if (passes.ok()) {
      for (const auto& p : *passes) left += p.uses_left;
    }
    return left;
  }
  // The room as a refused pass must leave it: its line, counts and passes.
  std::string State(const std::string& room) {
    auto info = Get(room);
    std::string out = info.ok()
                          ? fmt::format("active={} waiting={} admitted={} line=", info->active,
                                        info->waiting, info->counters.admitted_total)
                          : "no room";
    for (const std::string& id : Line(room)) out += id + ",";
    return out + " uses_left=" + std::to_string(UsesLeft(room));
  }
  bool Scheduled(const OpResult<RoomEvent>& put) {
    EXPECT_TRUE(put.ok()) << put.message();
    return put.ok();
  }
  // What the room object says is in force (core::RoomInfo beside the room's own settings), as
  // GetRoom answers it; the listing must answer the same ("no room" when either does not).
  static std::string InForce(const core::RoomInfo& i) {
    const core::RoomConfig& e = i.effective;
    return fmt::format(
        "phase={} event={} prequeued={} active={} waiting={} effective: cap={} grace={} cto={} "
        "apm={} method={}",
        core::ToString(i.phase), i.event.value_or("none"), i.prequeued, i.active, i.waiting,
        e.capacity, e.grace_ms, e.checkin_timeout_ms, e.admit_per_minute.value_or(-1),
        core::ToString(e.queueing_method));
  }
  std::string InForce(const std::string& room) {
    auto got = Get(room);
    if (!got.ok()) return "no room";
    auto listed = Await<std::vector<core::RoomInfo>>([&](auto done) { b().ListRooms(done); });
    std::string in_list = "not listed";
    if (listed.ok()) {
      for (const core::RoomInfo& i : *listed) {
        if (i.room == room) in_list = InForce(i);
      }
    }
    EXPECT_EQ(in_list, InForce(*got)) << "the listing answers the room object alike";
    return InForce(*got);
  }
  // The room's own settings as MakeRoom made them, in force (no event's overrides).
  static std::string Own(int64_t capacity, std::string_view rest) {
    return fmt::format("{} effective: cap={} grace=5000 cto=30000 apm=-1 method=fifo", rest,
                       capacity);
  }
};

TEST_P(LaunchConformanceTest, ScheduleIsKeptListedAndCancelled) {
  MakeRoom("r", 1);
  if (!Scheduled(PutEvent("r", "drop", Drop(10'000, 20'000, 30'000, true)))) return;
  auto conflict = PutEvent("r", "other", Drop(25'000, 26'000, 40'000, false));
  EXPECT_EQ(conflict.status(), OpStatus::kConflict);
  auto events = Events("r");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].id, "drop");
  EXPECT_EQ((*events)[0].stage, core::EventStage::kScheduled);
  EXPECT_EQ(DeleteEvent("r", "nope").status(), OpStatus::kNotFound);
  ASSERT_TRUE(DeleteEvent("r", "drop").ok());
  EXPECT_TRUE(Events("r")->empty());
  EXPECT_EQ(Events("nowhere").status(), OpStatus::kUnknownRoom);
}

TEST_P(LaunchConformanceTest, AShuffledDropLosesNobodyAndTheOrderSurvivesARestart) {
  MakeRoom("r", 2);
  if (!Scheduled(PutEvent("r", "drop", Drop(0, 5'000, 600'000, true)))) return;
  std::set<std::string> everyone;
  for (int i = 0; i < 200; ++i) {
    std::string id = "p" + std::to_string(i);
    auto v = Check("r", id);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->status, SessionStatus::kPrequeue);
    everyone.insert(id);
  }
  AdvanceTime(5'000);  // the start: the timer draws and publishes, a chunk a turn
  for (int turn = 0; turn < 50 && Line("r").size() < 198; ++turn) AdvanceTime(1);
  std::vector<std::string> line = Line("r");
  ASSERT_EQ(line.size(), 198u) << "two were admitted";
  auto events = Events("r");
  ASSERT_TRUE(events.ok());
  ASSERT_TRUE((*events)[0].shuffle.has_value());
  EXPECT_EQ((*events)[0].shuffle->count, 200);
  EXPECT_EQ((*events)[0].stage, core::EventStage::kRunning);
  std::set<std::string> seen(line.begin(), line.end());
  EXPECT_EQ(seen.size(), 198u) << "nobody twice";
  int active = 0;
  for (const std::string& id : everyone) {
    auto v = Check("r", id);
    ASSERT_TRUE(v.ok());
    if (v->status == SessionStatus::kActive) {
      ++active;
    } else {
      ASSERT_EQ(v->status, SessionStatus::kWaiting) << id;
      auto at = std::find(line.begin(), line.end(), id);
      ASSERT_NE(at, line.end()) << id;
      EXPECT_EQ(v->position, at - line.begin() + 1) << "an exact place";
    }
  }
  EXPECT_EQ(active, 2);
  std::vector<int64_t> arrival;  // the drawn order is not arrival order
  for (const std::string& id : line) arrival.push_back(std::stoi(id.substr(1)));
  EXPECT_FALSE(std::is_sorted(arrival.begin(), arrival.end()));
  if (harness_->Restart()) {
    EXPECT_EQ(Line("r"), line) << "the same order after a restart";
    auto again = Events("r");
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)[0].shuffle, (*events)[0].shuffle);
  }
}

TEST_P(LaunchConformanceTest, ARestartMidDrawGoesOnWithTheSameSeed) {
  MakeRoom("r", 1);
  if (!Scheduled(PutEvent("r", "drop", Drop(0, 1'000, 600'000, true)))) return;
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(Check("r", "p" + std::to_string(i)).ok());
  AdvanceTime(1'000);  // one chunk drawn (the harness's draw_chunk: 64)
  auto events = Events("r");
  ASSERT_TRUE(events.ok());
  ASSERT_TRUE((*events)[0].shuffle.has_value());
  size_t published = Line("r").size();
  if (!harness_->Restart()) return;
  auto after = Events("r");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[0].shuffle, (*events)[0].shuffle);
  std::vector<std::string> front = Line("r");
  EXPECT_EQ(front.size(), published);
  EXPECT_LT(front.size(), 299u) << "the restart came mid-draw";
  for (int turn = 0; turn < 20 && Line("r").size() < 299; ++turn) AdvanceTime(1);
  EXPECT_EQ(Line("r").size(), 299u);
}

TEST_P(LaunchConformanceTest, MethodSwitchesKeepEveryPlace) {
  MakeRoom("r", 1);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(Check("r", "s" + std::to_string(i)).ok());
  std::vector<std::string> before = Line("r");
  RoomPatch random;
  random.queueing_method = QueueingMethod::kRandom;
  auto put = Put("r", random);
  ASSERT_TRUE(put.ok()) << put.message();
  EXPECT_EQ(put->config.queueing_method, QueueingMethod::kRandom);
  auto v = Check("r", "s3");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->odds.has_value());
  RoomPatch fifo;
  fifo.queueing_method = QueueingMethod::kFifo;
  ASSERT_TRUE(Put("r", fifo).ok());
  EXPECT_EQ(Line("r"), before);
  RoomPatch reject;
  reject.queueing_method = QueueingMethod::kReject;
  ASSERT_TRUE(Put("r", reject).ok());
  EXPECT_EQ(Check("r", "new")->status, SessionStatus::kClosed);
  EXPECT_EQ(Line("r"), before);
  if (harness_->Restart()) {
    EXPECT_EQ(Line("r"), before);
    EXPECT_EQ(Check("r", "new2")->status, SessionStatus::kClosed);
  }
}

TEST_P(LaunchConformanceTest, PassesAreMintedRedeemedAndRevoked) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "holder").ok());
  ASSERT_TRUE(Check("r", "w1").ok());
  core::PassMint mint{
      .kind = core::PassKind::kFront, .uses = 2, .expires_at = std::nullopt, .count = 3};
  auto minted =
      Await<std::vector<core::MintedPass>>([&](auto done) { b().MintPasses("r", mint, done); });
  ASSERT_TRUE(minted.ok()) << minted.message();
  ASSERT_EQ(minted->size(), 3u);
  std::set<std::string> codes;
  for (const auto& m : *minted) {
    codes.insert(m.code);
    EXPECT_EQ(m.code.rfind(m.pass.id + ".", 0), 0u) << "a code starts with its pass's id";
    EXPECT_EQ(m.pass.digest, core::PassDigest(m.code));
    EXPECT_EQ(m.pass.kind, PassKind::kFront);
    EXPECT_EQ(m.pass.uses, 2);
    EXPECT_EQ(m.pass.uses_left, 2);
    EXPECT_EQ(m.pass.expires_at, std::nullopt);
    EXPECT_EQ(m.pass.created_at, NowMs());
  }
  EXPECT_EQ(codes.size(), 3u);
  core::Arrival with_pass{.client = "", .proof_bits = 0, .pass = (*minted)[0].code};
  auto vip = Await<SessionView>([&](auto done) { b().Check("r", "vip", with_pass, done); });
  ASSERT_TRUE(vip.ok()) << vip.message();
  EXPECT_EQ(vip->position, 1) << "first in line, ahead of w1";
  core::Arrival wrong{.client = "", .proof_bits = 0, .pass = (*minted)[0].pass.id + ".nope"};
  EXPECT_EQ(Await<SessionView>([&](auto done) { b().Check("r", "x", wrong, done); }).status(),
            OpStatus::kInvalidArgument);
  if (harness_->Restart()) {
    EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip", "w1"}));
  }
  auto passes = Await<std::vector<core::RoomPass>>([&](auto done) { b().ListPasses("r", done); });
  ASSERT_TRUE(passes.ok());
  ASSERT_EQ(passes->size(), 3u);
  int64_t left = 0;
  for (const auto& p : *passes) {
    left += p.uses_left;
    auto it = std::find_if(minted->begin(), minted->end(),
                           [&](const auto& m) { return m.pass.id == p.id; });
    ASSERT_NE(it, minted->end()) << p.id;
    EXPECT_EQ(p.digest, it->pass.digest) << "the digest kept, never the code";
    EXPECT_EQ(p.uses_left, p.id == (*minted)[0].pass.id ? 1 : 2);
  }
  EXPECT_EQ(left, 5);
  auto one = Await<int64_t>([&](auto done) { b().RevokePasses("r", (*minted)[1].pass.id, done); });
  EXPECT_EQ(one.ok() ? *one : -1, 1);
  auto rest = Await<int64_t>([&](auto done) { b().RevokePasses("r", std::nullopt, done); });
  EXPECT_EQ(rest.ok() ? *rest : -1, 2);
  EXPECT_EQ(Await<SessionView>([&](auto done) { b().Check("r", "y", with_pass, done); }).status(),
            OpStatus::kInvalidArgument)
      << "revoked";
}

// An admit pass gets in at once while a slot is free, even in a pre-queue; with the room full
// it is first in line, as a front pass is, and the pre-queue's draw comes behind them.
TEST_P(LaunchConformanceTest, PassesDuringAPrequeueGoAheadOfItsDraw) {
  MakeRoom("r", 1);
  if (!Scheduled(PutEvent("r", "drop", Drop(0, 5'000, 600'000, false)))) return;
  ASSERT_EQ(Check("r", "fan1")->status, SessionStatus::kPrequeue);
  ASSERT_EQ(Check("r", "fan2")->status, SessionStatus::kPrequeue);
  std::string admit = Mint("r", PassKind::kAdmit, 2);
  std::string front = Mint("r", PassKind::kFront);
  auto staff = Redeem("r", "staff", admit);
  ASSERT_TRUE(staff.ok()) << staff.message();
  EXPECT_EQ(staff->status, SessionStatus::kActive) << "a free slot, whatever the pre-queue";
  auto vip = Redeem("r", "vip", admit);
  ASSERT_TRUE(vip.ok()) << vip.message();
  EXPECT_EQ(vip->status, SessionStatus::kWaiting) << "never past capacity";
  EXPECT_EQ(vip->position, 1);
  auto fan2 = Redeem("r", "fan2", front);  // pre-queued: out of the pre-queue, to the front
  ASSERT_TRUE(fan2.ok()) << fan2.message();
  EXPECT_EQ(fan2->status, SessionStatus::kWaiting);
  EXPECT_EQ(fan2->position, 2);
  EXPECT_EQ(fan2->waiting, 2);
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip", "fan2"}));
  EXPECT_EQ(Get("r")->active, 1);
  AdvanceTime(5'000);  // the start: the pre-queue (fan1 alone now) is drawn behind them
  for (int turn = 0; turn < 10 && Line("r").size() < 3; ++turn) AdvanceTime(1);
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip", "fan2", "fan1"}));
  ASSERT_TRUE(Leave("r", "staff", /*final=*/true).ok());
  EXPECT_EQ(Check("r", "vip")->status, SessionStatus::kActive);
  EXPECT_EQ(Check("r", "fan2")->position, 1);
  EXPECT_EQ(Check("r", "fan1")->position, 2);
}

// One the draw holds, not yet published, who redeems a pass goes to the front line at once,
// and the draw skips its place when it comes.
TEST_P(LaunchConformanceTest, APassMidDrawTakesOneOutOfTheDraw) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "h").ok());
  if (!Scheduled(PutEvent("r", "drop", Drop(0, 1'000, 600'000, false)))) return;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(Check("r", "p" + std::to_string(i)).ok());
  AdvanceTime(1'000);  // the start, and one chunk of the draw (the harness's draw_chunk: 64)
  std::vector<std::string> published = Line("r");
  ASSERT_LT(published.size(), 90u) << "the draw is not over yet";
  ASSERT_EQ(Check("r", "p90")->status, SessionStatus::kPrequeue);
  auto vip = Redeem("r", "p90", Mint("r", PassKind::kFront));
  ASSERT_TRUE(vip.ok()) << vip.message();
  EXPECT_EQ(vip->status, SessionStatus::kWaiting);
  EXPECT_EQ(vip->position, 1);
  for (int turn = 0; turn < 10 && Line("r").size() < 100; ++turn) AdvanceTime(1);
  std::vector<std::string> want{"p90"};
  for (int i = 0; i < 100; ++i) {
    if (i != 90) want.push_back("p" + std::to_string(i));
  }
  EXPECT_EQ(Line("r"), want) << "the drawn order (arrival here), p90 ahead and once";
  EXPECT_EQ(Get("r")->waiting, 100);
}

// Under the random method the front line still goes first, in the order it came.
TEST_P(LaunchConformanceTest, PassHoldersGoFirstUnderTheRandomMethod) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "holder").ok());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(Check("r", "w" + std::to_string(i)).ok());
  RoomPatch random;
  random.queueing_method = QueueingMethod::kRandom;
  ASSERT_TRUE(Put("r", random).ok());
  std::string front = Mint("r", PassKind::kFront, 2);
  auto vip1 = Redeem("r", "vip1", front);
  ASSERT_TRUE(vip1.ok()) << vip1.message();
  EXPECT_EQ(vip1->status, SessionStatus::kWaiting);
  EXPECT_TRUE(vip1->odds.has_value()) << "odds, as every waiting session under random";
  ASSERT_TRUE(Redeem("r", "vip2", front).ok());
  EXPECT_EQ(Line("r").at(0), "vip1");
  EXPECT_EQ(Line("r").at(1), "vip2");
  ASSERT_TRUE(Leave("r", "holder", /*final=*/true).ok());
  EXPECT_EQ(Check("r", "vip1")->status, SessionStatus::kActive);
  ASSERT_TRUE(Leave("r", "vip1", /*final=*/true).ok());
  EXPECT_EQ(Check("r", "vip2")->status, SessionStatus::kActive);
  ASSERT_TRUE(Leave("r", "vip2", /*final=*/true).ok());
  auto info = Get("r");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->active, 1) << "then the draw among the others";
  EXPECT_EQ(info->waiting, 7);
}

// A wrong, used-up, expired or revoked code is refused with the core's words and changes
// nothing; so is a pass whose join the room's challenge refuses.
TEST_P(LaunchConformanceTest, RefusedPassesChangeNothing) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "holder").ok());
  ASSERT_TRUE(Check("r", "w1").ok());
  std::string once = Mint("r", PassKind::kFront, 1);
  std::string soon = Mint("r", PassKind::kAdmit, 3, NowMs() + 1'000);
  std::string revoked = Mint("r", PassKind::kAdmit, 3);
  ASSERT_TRUE(Redeem("r", "a", once).ok());
  ASSERT_TRUE(Revoke("r", revoked.substr(0, revoked.find('.'))).ok());
  AdvanceTime(1'000);  // `soon` expires now
  const std::string before = State("r");
  auto refused = [&](const std::string& session, const std::string& code, std::string_view why) {
    auto r = Redeem("r", session, code);
    EXPECT_EQ(r.status(), OpStatus::kInvalidArgument) << session << " with " << code;
    EXPECT_EQ(r.message(), why) << session << " with " << code;
  };
  std::string id = once.substr(0, once.find('.'));
  refused("x", once, wire::kPassUsedUp);
  refused("x", soon, wire::kPassExpired);
  refused("x", revoked, wire::kPassNotValid);
  refused("x", id + ".not-the-secret", wire::kPassNotValid);
  refused("x", once + "x", wire::kPassNotValid);
  refused("x", "no-dot-at-all", wire::kPassNotValid);
  refused("x", ".", wire::kPassNotValid);
  refused("x", once + std::string(200, 'z'), wire::kPassNotValid);  // longer than a code
  refused("w1", soon, wire::kPassExpired);                          // known and waiting
  EXPECT_EQ(Touch("r", "x").status(), OpStatus::kUnknownSession) << "nobody joined";
  EXPECT_EQ(State("r"), before);
  // A join with a pass is a join: the challenge refuses it, and the pass is not used.
  std::string good = Mint("r", PassKind::kFront, 1);
  RoomPatch hard;
  hard.challenge_difficulty = std::optional<int64_t>(4);
  ASSERT_TRUE(Put("r", hard).ok());
  EXPECT_EQ(Redeem("r", "y", good).status(), OpStatus::kChallengeRequired);
  EXPECT_EQ(Touch("r", "y").status(), OpStatus::kUnknownSession);
  EXPECT_EQ(UsesLeft("r"), 3 + 1) << "the revoked pass is gone, `good` kept its use";
  auto in = Redeem("r", "y", good, /*proof_bits=*/4);
  ASSERT_TRUE(in.ok()) << in.message();
  EXPECT_EQ(in->position, 2) << "behind a, who came first with a pass";
  EXPECT_EQ(Get("r")->active, 1) << "never past capacity";
}

// A session holding a slot keeps its pass unused: active, or in grace (it comes back).
TEST_P(LaunchConformanceTest, AHoldersPassIsNotUsed) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "holder").ok());
  std::string code = Mint("r", PassKind::kAdmit, 2);
  auto v = Redeem("r", "holder", code);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->status, SessionStatus::kActive);
  ASSERT_EQ(Leave("r", "holder", /*final=*/false)->status, SessionStatus::kGrace);
  v = Redeem("r", "holder", code);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->status, SessionStatus::kActive) << "back from grace, by its check-in";
  EXPECT_EQ(UsesLeft("r"), 2);
  // Even a pass that would be refused is not looked at.
  EXPECT_TRUE(Redeem("r", "holder", "not-a-pass").ok());
}

// The front line stays ahead of holders the brake sends back, and out of a pre-queue that
// takes everyone; a method that turns joins away still lets a pass in.
TEST_P(LaunchConformanceTest, TheFrontLineStaysAheadOfTheBrakeAndThePrequeue) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "h").ok());
  ASSERT_TRUE(Check("r", "w1").ok());
  std::string front = Mint("r", PassKind::kFront, 3);
  ASSERT_TRUE(Redeem("r", "vip", front).ok());
  RoomPatch brake;
  brake.queueing_method = QueueingMethod::kQueueAll;
  brake.include_active = true;
  ASSERT_TRUE(Put("r", brake).ok());
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip", "h", "w1"}));
  // Paused from here: nobody is admitted when the brake is let go of or the slots are freed.
  RoomPatch reject;
  reject.queueing_method = QueueingMethod::kReject;
  reject.paused = true;
  ASSERT_TRUE(Put("r", reject).ok());
  EXPECT_EQ(Check("r", "nobody")->status, SessionStatus::kClosed);
  auto vip2 = Redeem("r", "vip2", front);
  ASSERT_TRUE(vip2.ok()) << vip2.message();
  EXPECT_EQ(vip2->status, SessionStatus::kWaiting);
  EXPECT_EQ(vip2->position, 2);
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip", "vip2", "h", "w1"}));
  RoomPatch fifo;
  fifo.queueing_method = QueueingMethod::kFifo;
  ASSERT_TRUE(Put("r", fifo).ok());
  EventSpec all = Drop(0, 60'000, 600'000, false);
  all.prequeue_scope = core::PrequeueScope::kAll;
  if (!Scheduled(PutEvent("r", "drop", all))) return;
  AdvanceTime(1);
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip", "vip2"}));
  EXPECT_EQ(Check("r", "h")->status, SessionStatus::kPrequeue);
  EXPECT_EQ(Check("r", "w1")->status, SessionStatus::kPrequeue);
  EXPECT_EQ(Check("r", "vip2")->position, 2);
  if (harness_->Restart()) {
    EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip", "vip2"}));
    EXPECT_EQ(Check("r", "vip")->position, 1);
  }
}

// Live channels read the line as changes since their last read: a redemption that puts someone
// ahead of others reads right, as does one that only lengthens the line.
TEST_P(LaunchConformanceTest, TheLineReadAfterARedemptionHasTheFrontFirst) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "h").ok());
  std::string front = Mint("r", PassKind::kFront, 3);
  EXPECT_TRUE(Line("r").empty());
  ASSERT_TRUE(Redeem("r", "vip1", front).ok());  // nobody behind it: the end of the line
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip1"}));
  ASSERT_TRUE(Check("r", "w1").ok());
  ASSERT_TRUE(Check("r", "w2").ok());
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip1", "w1", "w2"}));
  ASSERT_TRUE(Redeem("r", "w2", front).ok());  // ahead of w1
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip1", "w2", "w1"}));
  ASSERT_TRUE(Redeem("r", "vip1", front).ok());  // again: to the end of the front line
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"w2", "vip1", "w1"}));
  EXPECT_EQ(Check("r", "w1")->position, 3);
  ASSERT_TRUE(Leave("r", "h", /*final=*/true).ok());
  EXPECT_EQ(Line("r"), (std::vector<std::string>{"vip1", "w1"}));
  EXPECT_EQ(Check("r", "w2")->status, SessionStatus::kActive);
}

// Revoking one pass or all; the list by creation, then id; a room made again has none.
TEST_P(LaunchConformanceTest, PassesAreListedInOrderAndRevokedOneOrAll) {
  MakeRoom("r", 1);
  auto first = MintPasses("r", PassKind::kAdmit, 1, 3);
  ASSERT_TRUE(first.ok()) << first.message();
  AdvanceTime(10);
  auto second = MintPasses("r", PassKind::kFront, 4, 2, NowMs() + 60'000);
  ASSERT_TRUE(second.ok()) << second.message();
  auto ids = [](const std::vector<core::MintedPass>& minted) {
    std::vector<std::string> out;
    for (const auto& m : minted) out.push_back(m.pass.id);
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<std::string> want = ids(*first);
  for (const std::string& id : ids(*second)) want.push_back(id);
  auto listed = Passes("r");
  ASSERT_TRUE(listed.ok()) << listed.message();
  std::vector<std::string> got;
  for (const auto& p : *listed) got.push_back(p.id);
  EXPECT_EQ(got, want);
  ASSERT_EQ(listed->size(), 5u);
  EXPECT_EQ((*listed)[0].kind, PassKind::kAdmit);
  EXPECT_EQ((*listed)[0].created_at, NowMs() - 10);
  EXPECT_EQ((*listed)[4].kind, PassKind::kFront);
  EXPECT_EQ((*listed)[4].uses, 4);
  EXPECT_EQ((*listed)[4].expires_at, NowMs() + 60'000);
  EXPECT_EQ((*listed)[4].created_at, NowMs());
  auto unknown = Revoke("r", std::string("nope"));
  EXPECT_EQ(unknown.status(), OpStatus::kNotFound);
  EXPECT_EQ(unknown.message(), wire::UnknownPass("nope"));
  auto one = Revoke("r", want[1]);
  EXPECT_EQ(one.ok() ? *one : -1, 1);
  EXPECT_EQ(Revoke("r", want[1]).status(), OpStatus::kNotFound);
  if (harness_->Restart()) {
    EXPECT_EQ(Passes("r")->size(), 4u);
  }
  auto all = Revoke("r", std::nullopt);
  EXPECT_EQ(all.ok() ? *all : -1, 4);
  EXPECT_TRUE(Passes("r")->empty());
  EXPECT_EQ(*Revoke("r", std::nullopt), 0);
  EXPECT_EQ(MintPasses("nowhere", PassKind::kAdmit).status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Passes("nowhere").status(), OpStatus::kUnknownRoom);
  EXPECT_EQ(Revoke("nowhere", std::nullopt).status(), OpStatus::kUnknownRoom);
  std::string code = Mint("r", PassKind::kAdmit);
  ASSERT_TRUE(Await<core::RoomInfo>([&](auto done) { b().DeleteRoom("r", done); }).ok());
  MakeRoom("r", 1);
  EXPECT_TRUE(Passes("r")->empty()) << "a room made again has no passes";
  EXPECT_EQ(Redeem("r", "x", code).status(), OpStatus::kInvalidArgument);
}

// The room object shows what is in force: a running event's overrides (the room's own settings
// unchanged), its id, and the phase of the settings in force; after the end, the room's own.
TEST_P(LaunchConformanceTest, TheRoomObjectShowsARunningEventsOverrides) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "a").ok());
  EXPECT_EQ(InForce("r"), Own(1, "phase=queue event=none prequeued=0 active=1 waiting=0"))
      << "full: queue";
  EventSpec e = Drop(0, 1'000, 10'000, false);
  e.prequeue_at.reset();
  e.overrides.capacity = 3;
  e.overrides.admit_per_minute = 10;
  e.overrides.grace_ms = 2'000;
  e.overrides.checkin_timeout_ms = 4'000;
  e.overrides.queueing_method = QueueingMethod::kRandom;
  if (!Scheduled(PutEvent("r", "drop", e))) return;
  EXPECT_EQ(InForce("r"), Own(1, "phase=queue event=none prequeued=0 active=1 waiting=0"))
      << "scheduled: nothing in force yet";
  AdvanceTime(1'000);  // the start
  ASSERT_TRUE(Check("r", "b").ok());
  const std::string running =
      "phase=open event=drop prequeued=0 active=2 waiting=0 effective: cap=3 grace=2000 "
      "cto=4000 apm=10 method=random";
  EXPECT_EQ(InForce("r"), running) << "2 of 3: open, where the room's own capacity is full";
  auto info = Get("r");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->config.capacity, 1) << "the room's own settings stay its own";
  EXPECT_EQ(info->config.grace_ms, 5'000);
  EXPECT_EQ(info->config.queueing_method, QueueingMethod::kFifo);
  if (harness_->Restart()) {
    EXPECT_EQ(InForce("r"), running);
  }
  for (int second = 0; second < 9; ++second) {  // to the end, a and b kept present
    AdvanceTime(1'000);
    ASSERT_EQ(Check("r", "a")->status, SessionStatus::kActive);
    ASSERT_EQ(Check("r", "b")->status, SessionStatus::kActive);
  }
  EXPECT_EQ(InForce("r"), Own(1, "phase=queue event=none prequeued=0 active=2 waiting=0"))
      << "ended: the room's own again";
  ASSERT_TRUE(DeleteEvent("r", "drop").ok());
  EXPECT_EQ(InForce("r"), Own(1, "phase=queue event=none prequeued=0 active=2 waiting=0"));
}

// The brake is the operator's: the room's own queue_all wins over an event's method, and
// letting go of it brings the event's method into force.
TEST_P(LaunchConformanceTest, TheRoomObjectShowsTheBrakeOverAnEventsMethod) {
  MakeRoom("r", 1);
  RoomPatch brake;
  brake.queueing_method = QueueingMethod::kQueueAll;
  ASSERT_TRUE(Put("r", brake).ok());
  EventSpec e = Drop(0, 0, 60'000, false);
  e.prequeue_at.reset();
  e.overrides.capacity = 5;
  e.overrides.queueing_method = QueueingMethod::kPassthrough;
  if (!Scheduled(PutEvent("r", "drop", e))) return;
  AdvanceTime(1);
  ASSERT_TRUE(Check("r", "a").ok());
  EXPECT_EQ(InForce("r"),
            "phase=queue event=drop prequeued=0 active=0 waiting=1 effective: cap=5 grace=5000 "
            "cto=30000 apm=-1 method=queue_all")
      << "braked: everyone waits, whatever the event's method";
  EXPECT_EQ(Get("r")->config.queueing_method, QueueingMethod::kQueueAll);
  RoomPatch fifo;
  fifo.queueing_method = QueueingMethod::kFifo;
  ASSERT_TRUE(Put("r", fifo).ok());
  EXPECT_EQ(InForce("r"),
            "phase=open event=drop prequeued=0 active=1 waiting=0 effective: cap=5 grace=5000 "
            "cto=30000 apm=-1 method=passthrough")
      << "the brake let go of: the event's method";
  RoomPatch reject;
  reject.queueing_method = QueueingMethod::kReject;
  ASSERT_TRUE(Put("r", reject).ok());
  EXPECT_EQ(InForce("r"),
            "phase=open event=drop prequeued=0 active=1 waiting=0 effective: cap=5 grace=5000 "
            "cto=30000 apm=-1 method=passthrough")
      << "only the brake wins over an event's method";
}

// An open pre-queue: the room object names its event and counts those in it; the phase is
// prequeue, the event's overrides not yet in force. Suspended, it lets them into the line.
TEST_P(LaunchConformanceTest, TheRoomObjectCountsAnOpenPrequeue) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "h").ok());
  EventSpec e = Drop(0, 60'000, 600'000, false);
  e.overrides.capacity = 4;
  if (!Scheduled(PutEvent("r", "drop", e))) return;
  AdvanceTime(1);
  EXPECT_EQ(InForce("r"), Own(1, "phase=prequeue event=drop prequeued=0 active=1 waiting=0"));
  for (const char* id : {"p1", "p2", "p3"}) {
    ASSERT_EQ(Check("r", id)->status, SessionStatus::kPrequeue) << id;
  }
  EXPECT_EQ(InForce("r"), Own(1, "phase=prequeue event=drop prequeued=3 active=1 waiting=0"));
  ASSERT_TRUE(Leave("r", "p2", /*final=*/true).ok());
  EXPECT_EQ(InForce("r"), Own(1, "phase=prequeue event=drop prequeued=2 active=1 waiting=0"));
  if (harness_->Restart()) {
    EXPECT_EQ(InForce("r"), Own(1, "phase=prequeue event=drop prequeued=2 active=1 waiting=0"));
  }
  e.suspended = true;
  if (!Scheduled(PutEvent("r", "drop", e))) return;
  EXPECT_EQ(InForce("r"), Own(1, "phase=queue event=none prequeued=0 active=1 waiting=2"))
      << "suspended: the pre-queue went to the line";
}

// While a draw is published the phase is prequeue and the room object counts those whose
// places are not published yet, and those who came during it; then the line, in force.
TEST_P(LaunchConformanceTest, TheRoomObjectCountsADrawBeingPublished) {
  MakeRoom("r", 1);
  ASSERT_TRUE(Check("r", "h").ok());  // holds the one slot: nobody of the draw is admitted
  EventSpec e = Drop(0, 1'000, 600'000, true);
  e.overrides.grace_ms = 3'000;
  if (!Scheduled(PutEvent("r", "drop", e))) return;
  for (int i = 0; i < 150; ++i) ASSERT_TRUE(Check("r", "p" + std::to_string(i)).ok());
  EXPECT_EQ(InForce("r"), Own(1, "phase=prequeue event=drop prequeued=150 active=1 waiting=0"));
  AdvanceTime(1'000);  // the start, and one chunk of the draw (the harness's draw_chunk: 64)
  int64_t published = static_cast<int64_t>(Line("r").size());
  ASSERT_GT(published, 0);
  ASSERT_LT(published, 150) << "the draw is not over yet";
  ASSERT_EQ(Check("r", "late")->status, SessionStatus::kPrequeue) << "behind the draw";
  auto mid = [&] {
    return fmt::format(
        "phase=prequeue event=drop prequeued={} active=1 waiting={} effective: cap=1 grace=3000 "
        "cto=30000 apm=-1 method=fifo",
        150 - published + 1, published);
  };
  EXPECT_EQ(InForce("r"), mid());
  if (harness_->Restart()) {
    EXPECT_EQ(InForce("r"), mid());
  }
  for (int turn = 0; turn < 10 && Line("r").size() < 151; ++turn) AdvanceTime(1);
  EXPECT_EQ(Line("r").back(), "late") << "after the drawn";
  EXPECT_EQ(InForce("r"),
            "phase=queue event=drop prequeued=0 active=1 waiting=151 effective: cap=1 grace=3000 "
            "cto=30000 apm=-1 method=fifo");
}

INSTANTIATE_TEST_SUITE_P(Backends, LaunchConformanceTest,
                         ::testing::ValuesIn(conformance::Backends()), conformance::BackendName);

}  // namespace
}  // namespace anteroom::store
