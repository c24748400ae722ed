// Deadlines with real time against a real server: grace, check-in timeouts, unclaimed
// admissions, idle sessions and token expiry. Short timeouts, bounded polling.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/api_checks.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

using TimersHttpTest = ServerTest;

// How long after a deadline the freed slot may take to reach the head of the line (the target
// is within 1 s; the rest is slack for a loaded machine).
constexpr milliseconds kWithin(1500);

bool RoomIs(Client& client, const std::string& room, int64_t active, int64_t waiting) {
  HttpResult r = client.GetRoom(room);
  return IntField(r.json, "active") == active && IntField(r.json, "waiting") == waiting;
}

TEST_F(TimersHttpTest, AfterGraceTheSlotGoesToTheHeadOfTheLine) {
  // checkin_timeout_ms is longer than grace so that the waiting session, which does not call
  // in either, is still in line when the grace ends.
  MustPut("r", {{"capacity", 1}, {"grace_ms", 300}, {"checkin_timeout_ms", 1500}});
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  ASSERT_TRUE(IsSession(client().Leave("r", "a", false), "grace"));
  auto left_at = SteadyClock::now();
  ASSERT_TRUE(RoomIs(client(), "r", 1, 1)) << "during grace a keeps the slot";

  // Nobody calls anything but GET.
  ASSERT_TRUE(WaitFor(
      [&] {
        HttpResult r = client().GetRoom("r");
        return IntField(r.json, "active") == 1 && IntField(r.json, "waiting") == 0 &&
               IntField(r.json, "admitted_total") == 2;
      },
      milliseconds(300) + kWithin))
      << client().GetRoom("r").body;
  EXPECT_GE(SteadyClock::now() - left_at, milliseconds(250)) << "not before the grace ended";

  // b claims its slot; a's token was revoked when its grace ran out.
  EXPECT_TRUE(IsSession(client().Check("r", "b"), "active"));
  HttpResult v = client().VerifyToken(*StrField(a.json, "token"));
  EXPECT_EQ(BoolField(v.json, "valid"), false) << v.body;
  EXPECT_EQ(StrField(v.json, "reason"), "revoked") << v.body;
  // a comes back after grace: at the back of the line.
  HttpResult back = client().Check("r", "a");
  EXPECT_TRUE(IsSession(back, "waiting"));
}

TEST_F(TimersHttpTest, AWaitingSessionThatStopsCheckingInIsDropped) {
  MustPut("r", {{"capacity", 1}, {"grace_ms", 300}, {"checkin_timeout_ms", 300}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  ASSERT_TRUE(IsSession(client().Check("r", "c"), "waiting"));

  // While b and c check in every 100 ms they keep their places, for longer than the timeout.
  auto until = SteadyClock::now() + milliseconds(1000);
  while (SteadyClock::now() < until) {
    ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
    HttpResult b = client().Check("r", "b");
    ASSERT_TRUE(IsSession(b, "waiting"));
    ASSERT_EQ(IntField(b.json, "position"), 1);
    HttpResult c = client().Check("r", "c");
    ASSERT_TRUE(IsSession(c, "waiting"));
    ASSERT_EQ(IntField(c.json, "position"), 2);
    std::this_thread::sleep_for(milliseconds(100));
  }

  // b stops; c and a go on.
  bool dropped = false;
  until = SteadyClock::now() + milliseconds(300) + kWithin;
  while (!dropped && SteadyClock::now() < until) {
    ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
    HttpResult c = client().Check("r", "c");
    ASSERT_TRUE(IsSession(c, "waiting"));
    dropped = IntField(c.json, "position") == 1 && IntField(c.json, "waiting") == 1;
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(dropped) << "b still in line: " << client().GetRoom("r").body;
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "dropped_total"), 1) << room.body;
  EXPECT_TRUE(IsSession(client().Touch("r", "b"), "gone"));

  // b checks again: a new arrival, behind c.
  HttpResult b = client().Check("r", "b");
  ASSERT_TRUE(IsSession(b, "waiting"));
  EXPECT_EQ(IntField(b.json, "position"), 2);
}

TEST_F(TimersHttpTest, AWaitingSessionAloneIsDroppedWithoutAnyCalls) {
  MustPut("r", {{"capacity", 1}, {"grace_ms", 300}, {"checkin_timeout_ms", 300}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  std::this_thread::sleep_for(milliseconds(300) + kWithin);  // no requests at all
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "waiting"), 0) << room.body;
  EXPECT_EQ(IntField(room.json, "active"), 1) << "a is not idle yet: " << room.body;
  EXPECT_EQ(IntField(room.json, "dropped_total"), 1) << room.body;
}

TEST_F(TimersHttpTest, AnUnclaimedAdmissionIsDroppedAndTheSlotMovesOn) {
  MustPut("r", {{"capacity", 1}, {"grace_ms", 0}, {"checkin_timeout_ms", 400}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  ASSERT_TRUE(IsSession(client().Check("r", "c"), "waiting"));
  // a leaves (grace 0): b is admitted but never claims; c keeps checking in and gets the slot.
  ASSERT_TRUE(IsSession(client().Leave("r", "a", false), "grace"));
  bool c_in = false;
  auto until = SteadyClock::now() + milliseconds(800) + kWithin;
  while (!c_in && SteadyClock::now() < until) {
    HttpResult c = client().Check("r", "c");
    ASSERT_EQ(c.status, 200) << c.body;
    c_in = StrField(c.json, "status") == "active";
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(c_in) << client().GetRoom("r").body;
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "active"), 1) << room.body;
  EXPECT_EQ(IntField(room.json, "waiting"), 0) << room.body;
  EXPECT_EQ(IntField(room.json, "admitted_total"), 3) << room.body;
  EXPECT_EQ(IntField(room.json, "dropped_total"), 1) << room.body;
  EXPECT_TRUE(IsSession(client().Touch("r", "b"), "gone"));
}

TEST_F(TimersHttpTest, AnIdleActiveSessionIsTreatedAsHavingLeft) {
  MustPut(
      "r",
      {{"capacity", 1}, {"idle_timeout_ms", 300}, {"grace_ms", 300}, {"checkin_timeout_ms", 5000}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  auto start = SteadyClock::now();
  bool b_in = WaitFor([&] { return StrField(client().Check("r", "b").json, "status") == "active"; },
                      milliseconds(600) + kWithin, milliseconds(50));
  EXPECT_TRUE(b_in) << client().GetRoom("r").body;
  EXPECT_GE(SteadyClock::now() - start, milliseconds(550)) << "idle 300 ms + grace 300 ms";
  EXPECT_TRUE(RoomIs(client(), "r", 1, 0));
}

TEST_F(TimersHttpTest, TouchKeepsAnActiveSessionFromIdlingOut) {
  MustPut("r", {{"capacity", 1}, {"idle_timeout_ms", 300}, {"grace_ms", 0}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  auto until = SteadyClock::now() + milliseconds(1200);
  while (SteadyClock::now() < until) {
    ASSERT_TRUE(IsSession(client().Touch("r", "a"), "active"));
    HttpResult b = client().Check("r", "b");
    ASSERT_TRUE(IsSession(b, "waiting")) << "a touched every 100 ms and never idled out";
    std::this_thread::sleep_for(milliseconds(100));
  }
}

class ShortTokenTest : public ServerTest {
 protected:
  std::vector<std::string> ServerArgs() const override { return {"--token-ttl-ms", "1000"}; }
};

TEST_F(ShortTokenTest, AnExpiredTokenIsInvalidWithReasonExpired) {
  MustPut("r", {{"capacity", 1}});
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "active"));
  std::string token = *StrField(a.json, "token");
  auto claims = JwtClaims(token);
  auto exp = IntField(claims, "exp");
  auto iat = IntField(claims, "iat");
  ASSERT_TRUE(exp && iat);
  EXPECT_LE(*exp - *iat, 2);
  EXPECT_GE(*exp - *iat, 1);

  HttpResult v = client().VerifyToken(token);
  ASSERT_EQ(v.status, 200) << v.body;
  if (NowSeconds() < *exp) {
    EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;
  }

  std::this_thread::sleep_for(milliseconds(2100));
  v = client().VerifyToken(token);
  ASSERT_EQ(v.status, 200) << v.body;
  EXPECT_EQ(BoolField(v.json, "valid"), false) << v.body;
  EXPECT_EQ(StrField(v.json, "reason"), "expired") << v.body;
  EXPECT_EQ(IntField(v.json, "exp"), exp) << "seconds since the epoch, as in the JWT";
  EXPECT_LE(*IntField(v.json, "exp"), NowSeconds());
  EXPECT_EQ(StrField(v.json, "room"), "r");
  EXPECT_EQ(StrField(v.json, "session"), std::nullopt) << "an expired token names nobody";

  // A fresh check mints a fresh token.
  HttpResult again = client().Check("r", "a");
  ASSERT_TRUE(IsSession(again, "active"));
  v = client().VerifyToken(*StrField(again.json, "token"));
  EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;
}

}  // namespace
}  // namespace anteroom::testing
