// The waiting-room API over real TCP against a real `anteroom serve`: rooms, check-ins,
// positions, touch, leave, evictions and admission tokens.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "common/base64url.h"
#include "common/names.h"
#include "support/api_checks.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;

using RoomsHttpTest = ServerTest;

std::string Token(const HttpResult& r) { return StrField(r.json, "token").value_or(""); }

TEST_F(RoomsHttpTest, HealthzAnswersOk) {
  HttpResult r = client().Health();
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  EXPECT_EQ(StrField(r.json, "status"), "ok");
}

TEST_F(RoomsHttpTest, CreatingARoomRequiresCapacity) {
  EXPECT_TRUE(IsError(client().PutRoom("r", json::object{}), 400, "invalid_argument"));
  EXPECT_TRUE(IsError(client().PutRoom("r", {{"grace_ms", 100}}), 400, "invalid_argument"));
  EXPECT_TRUE(IsError(client().GetRoom("r"), 404, "unknown_room"));
  HttpResult list = client().ListRooms();
  ASSERT_EQ(list.status, 200);
  EXPECT_TRUE(list.json.at("rooms").as_array().empty()) << list.body;
}

TEST_F(RoomsHttpTest, CreateAnswersTheRoomObjectWithDefaults) {
  HttpResult r = client().PutRoom("demo", {{"capacity", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(StrField(r.json, "room"), "demo");
  EXPECT_EQ(IntField(r.json, "capacity"), 3);
  EXPECT_EQ(IntField(r.json, "active"), 0);
  EXPECT_EQ(IntField(r.json, "waiting"), 0);
  EXPECT_EQ(IntField(r.json, "grace_ms"), 30000);
  EXPECT_EQ(IntField(r.json, "checkin_timeout_ms"), 30000);
  EXPECT_EQ(IntField(r.json, "idle_timeout_ms"), 300000);
  ASSERT_TRUE(r.json.as_object().contains("admit_per_minute"));
  EXPECT_TRUE(r.json.at("admit_per_minute").is_null());
  ASSERT_TRUE(r.json.as_object().contains("paused"));
  EXPECT_EQ(r.json.at("paused"), json::value(false));
  ASSERT_TRUE(r.json.as_object().contains("target_url"));
  EXPECT_TRUE(r.json.at("target_url").is_null());
  EXPECT_EQ(IntField(r.json, "admitted_total"), 0);
  EXPECT_EQ(IntField(r.json, "dropped_total"), 0);
  EXPECT_EQ(IntField(r.json, "released_total"), 0);

  HttpResult get = client().GetRoom("demo");
  ASSERT_EQ(get.status, 200);
  EXPECT_EQ(get.json, r.json) << "PUT answers the room's object as in GET";
}

TEST_F(RoomsHttpTest, PutOnAnExistingRoomChangesOnlyTheFieldsGiven) {
  MustPut("r", {{"capacity", 2},
                {"grace_ms", 1000},
                {"checkin_timeout_ms", 2000},
                {"idle_timeout_ms", 3000},
                {"admit_per_minute", 40}});
  json::value before = client().GetRoom("r").json;

  HttpResult r = client().PutRoom("r", {{"grace_ms", 5}});
  ASSERT_EQ(r.status, 200) << r.body;
  json::value want = before;
  // Without an event the effective settings are the room's own: they change alike.
  auto set = [&](std::string_view key, json::value v) {
    want.as_object()[key] = v;
    json::object& effective = want.as_object()["effective"].as_object();
    if (effective.contains(key)) effective[key] = v;
  };
  set("grace_ms", 5);
  EXPECT_EQ(r.json, want);
  EXPECT_EQ(client().GetRoom("r").json, want);

  r = client().PutRoom("r", {{"idle_timeout_ms", nullptr}, {"capacity", 7}});
  ASSERT_EQ(r.status, 200) << r.body;
  set("idle_timeout_ms", nullptr);
  set("capacity", 7);
  EXPECT_EQ(client().GetRoom("r").json, want);

  r = client().PutRoom("r", {{"admit_per_minute", nullptr}});
  ASSERT_EQ(r.status, 200) << r.body;
  set("admit_per_minute", nullptr);
  EXPECT_EQ(client().GetRoom("r").json, want);

  r = client().PutRoom("r", json::object{});  // no fields: nothing changes
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(client().GetRoom("r").json, want);
}

TEST_F(RoomsHttpTest, BoundaryValuesAreAccepted) {
  HttpResult r = client().PutRoom("edge", {{"capacity", 1'000'000'000},
                                           {"grace_ms", 604'800'000},
                                           {"checkin_timeout_ms", 0},
                                           {"idle_timeout_ms", 604'800'000},
                                           {"admit_per_minute", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(IntField(r.json, "capacity"), 1'000'000'000);
  EXPECT_EQ(IntField(r.json, "grace_ms"), 604'800'000);
  EXPECT_EQ(IntField(r.json, "checkin_timeout_ms"), 0);
  EXPECT_EQ(IntField(r.json, "idle_timeout_ms"), 604'800'000);
  EXPECT_EQ(IntField(r.json, "admit_per_minute"), 1);
  r = client().PutRoom("edge", {{"capacity", 1}, {"grace_ms", 0}, {"idle_timeout_ms", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(IntField(r.json, "capacity"), 1);

  std::string longest(kMaxNameBytes, 'x');
  longest[0] = 'A';
  longest[1] = '.';
  longest[2] = '_';
  longest[3] = ':';
  longest[4] = '-';
  longest[5] = '9';
  r = client().PutRoom(longest, {{"capacity", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(StrField(r.json, "room"), longest);
  EXPECT_EQ(client().GetRoom(longest).status, 200);
}

TEST_F(RoomsHttpTest, PauseHoldsTheLineAndResumeAdmitsInOrder) {
  HttpResult r = client().PutRoom("r", {{"capacity", 1}, {"paused", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json.at("paused"), json::value(true));
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "waiting"));  // a free slot, but paused
  EXPECT_EQ(IntField(a.json, "position"), 1);
  EXPECT_TRUE(a.json.at("eta_ms").is_null()) << a.body;
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));

  r = client().PutRoom("r", {{"paused", false}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json.at("paused"), json::value(false));
  EXPECT_EQ(IntField(r.json, "active"), 1);
  EXPECT_EQ(IntField(r.json, "waiting"), 1);
  EXPECT_TRUE(IsSession(client().Check("r", "a"), "active"));  // first in line goes first
  ASSERT_TRUE(IsSession(client().Leave("r", "a", true), "gone"));
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "released_total"), 1) << room.body;
  EXPECT_EQ(IntField(room.json, "admitted_total"), 2) << room.body;
  EXPECT_TRUE(IsSession(client().Check("r", "b"), "active"));
}

TEST_F(RoomsHttpTest, TargetUrlIsSetAnsweredEverywhereAndCleared) {
  const std::string url = "https://shop.example:8443/checkout?from=wait&x=%20#top";
  HttpResult r = client().PutRoom("r", {{"capacity", 1}, {"target_url", url}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(StrField(r.json, "target_url"), url);
  EXPECT_EQ(StrField(client().GetRoom("r").json, "target_url"), url);
  HttpResult list = client().ListRooms();
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(StrField(list.json.at("rooms").at(0), "target_url"), url) << list.body;
  // Every accepted shape, up to 2048 bytes.
  for (const std::string& good :
       {std::string("/"), std::string("/shop?a=b#c"), std::string("/%E2%82%AC"),
        std::string("http://127.0.0.1:8080/"), std::string("HTTPS://Shop.Example/X"),
        "/" + std::string(2047, 'a')}) {
    r = client().PutRoom("r", {{"target_url", good}});
    ASSERT_EQ(r.status, 200) << good.substr(0, 100) << ": " << r.body.substr(0, 300);
    EXPECT_EQ(StrField(client().GetRoom("r").json, "target_url"), good);
  }
  r = client().PutRoom("r", {{"capacity", 2}});  // not named: kept
  EXPECT_EQ(StrField(r.json, "target_url"), "/" + std::string(2047, 'a'));
  r = client().PutRoom("r", {{"target_url", nullptr}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(r.json.at("target_url").is_null()) << r.body;
  EXPECT_TRUE(client().GetRoom("r").json.at("target_url").is_null());
}

TEST_F(RoomsHttpTest, ListAnswersEveryRoomSortedByName) {
  MustPut("b", {{"capacity", 2}});
  MustPut("a", {{"capacity", 1}});
  MustPut("c", {{"capacity", 3}});
  ASSERT_TRUE(IsSession(client().Check("a", "s"), "active"));

  HttpResult list = client().ListRooms();
  ASSERT_EQ(list.status, 200) << list.body;
  const json::array& rooms = list.json.at("rooms").as_array();
  ASSERT_EQ(rooms.size(), 3u) << list.body;
  std::vector<std::string> names;
  for (const auto& room : rooms) {
    names.push_back(std::string(room.at("room").as_string()));
    EXPECT_EQ(room, client().GetRoom(names.back()).json) << "same object as GET";
  }
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(IntField(rooms[0], "active"), 1);
}

TEST_F(RoomsHttpTest, DeleteRemovesTheRoomAndEveryoneInIt) {
  MustPut("gone", {{"capacity", 1}});
  MustPut("kept", {{"capacity", 1}});
  HttpResult a = client().Check("gone", "a");
  ASSERT_TRUE(IsSession(a, "active"));
  ASSERT_TRUE(IsSession(client().Check("gone", "b"), "waiting"));

  HttpResult del = client().DeleteRoom("gone");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(BoolField(del.json, "deleted"), true);
  EXPECT_EQ(StrField(del.json, "room"), "gone");
  EXPECT_EQ(IntField(del.json, "active"), 1);
  EXPECT_EQ(IntField(del.json, "waiting"), 1);

  EXPECT_TRUE(IsError(client().GetRoom("gone"), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().DeleteRoom("gone"), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().Check("gone", "a"), 404, "unknown_room"));
  HttpResult list = client().ListRooms();
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.json.at("rooms").as_array().size(), 1u) << list.body;
  EXPECT_EQ(StrField(list.json.at("rooms").as_array()[0], "room"), "kept");

  // A token of a deleted room no longer verifies.
  HttpResult v = client().VerifyToken(Token(a));
  ASSERT_EQ(v.status, 200) << v.body;
  EXPECT_EQ(BoolField(v.json, "valid"), false) << v.body;
  EXPECT_TRUE(StrField(v.json, "reason").has_value()) << v.body;

  // The name is free again, with fresh state.
  HttpResult again = client().PutRoom("gone", {{"capacity", 4}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(IntField(again.json, "active"), 0);
  EXPECT_EQ(IntField(again.json, "waiting"), 0);
}

TEST_F(RoomsHttpTest, UnknownRoomIs404OnEveryRoute) {
  EXPECT_TRUE(IsError(client().GetRoom("nope"), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().DeleteRoom("nope"), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().Check("nope"), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().Check("nope", "s"), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().Touch("nope", "s"), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().Leave("nope", "s", false), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().Leave("nope", "s", true), 404, "unknown_room"));
  EXPECT_TRUE(IsError(client().EndSession("nope", "s"), 404, "unknown_room"));
  HttpResult list = client().ListRooms();
  EXPECT_TRUE(list.json.at("rooms").as_array().empty()) << "nothing was created: " << list.body;
}

TEST_F(RoomsHttpTest, CheckWithoutSessionIssuesUnguessableIds) {
  MustPut("r", {{"capacity", 1}});
  HttpResult first = client().Check("r");
  HttpResult second = client().Request("POST", "/v1/rooms/r/check", "");  // empty body is {}
  ASSERT_TRUE(IsSession(first, "active"));
  ASSERT_TRUE(IsSession(second, "waiting"));
  std::string a = *StrField(first.json, "session");
  std::string b = *StrField(second.json, "session");
  EXPECT_GE(a.size(), 22u) << a;  // 128 random bits in base64url
  EXPECT_GE(b.size(), 22u) << b;
  EXPECT_TRUE(IsValidName(a)) << a;
  EXPECT_TRUE(IsValidName(b)) << b;
  EXPECT_NE(a, b);

  std::set<std::string> ids = {a, b};
  for (int i = 0; i < 31; ++i) {
    HttpResult r = client().Check("r");
    ASSERT_TRUE(IsSession(r, "waiting"));
    ids.insert(*StrField(r.json, "session"));
  }
  EXPECT_EQ(ids.size(), 33u) << "every issued id is new";

  // The issued id works as a chosen one: a check-in keeps the place, it does not join again.
  HttpResult again = client().Check("r", b);
  ASSERT_TRUE(IsSession(again, "waiting"));
  EXPECT_EQ(IntField(again.json, "position"), 1);
  EXPECT_EQ(IntField(again.json, "waiting"), 32);
}

TEST_F(RoomsHttpTest, CheckWithAChosenSessionAndItsToken) {
  MustPut("r", {{"capacity", 2}});
  int64_t before = NowSeconds();
  HttpResult r = client().Check("r", "alice");
  int64_t after = NowSeconds();
  ASSERT_TRUE(IsSession(r, "active"));
  EXPECT_EQ(StrField(r.json, "session"), "alice");
  EXPECT_EQ(IntField(r.json, "active"), 1);
  EXPECT_EQ(IntField(r.json, "waiting"), 0);
  EXPECT_EQ(IntField(r.json, "capacity"), 2);
  EXPECT_TRUE(NullOrAbsent(r.json, "position"));

  // A JWT, HS256, claims room/sub/inc/adm/iat/exp (10 minutes by default), verifiable offline.
  std::string token = Token(r);
  size_t dot2 = token.rfind('.');
  ASSERT_NE(dot2, std::string::npos);
  auto header = Base64UrlDecode(token.substr(0, token.find('.')));
  ASSERT_TRUE(header.has_value());
  json::value h = json::parse(*header);
  EXPECT_EQ(StrField(h, "alg"), "HS256");
  EXPECT_EQ(HmacSha256Base64Url(kTokenSecret, token.substr(0, dot2)), token.substr(dot2 + 1))
      << "signed with ANTEROOM_TOKEN_SECRET";
  json::value claims = JwtClaims(token);
  EXPECT_EQ(StrField(claims, "room"), "r");
  // sub: opaque per admission, never the session id (a bearer secret); inc: the room's
  // incarnation; kid: the key's RFC 7638 thumbprint.
  auto sub = StrField(claims, "sub");
  ASSERT_TRUE(sub.has_value());
  EXPECT_NE(*sub, "alice");
  EXPECT_EQ(sub->size(), 22u);
  EXPECT_TRUE(IntField(claims, "inc").has_value());
  EXPECT_TRUE(StrField(h, "kid").has_value());
  auto iat = IntField(claims, "iat");
  auto exp = IntField(claims, "exp");
  ASSERT_TRUE(iat && exp) << json::serialize(claims);
  EXPECT_GE(*iat, before - 1);
  EXPECT_LE(*iat, after + 1);
  EXPECT_NEAR(static_cast<double>(*exp - *iat), 600.0, 1.0);

  // Checking in again does not join twice.
  HttpResult again = client().Check("r", "alice");
  ASSERT_TRUE(IsSession(again, "active"));
  EXPECT_EQ(IntField(again.json, "active"), 1);
  EXPECT_EQ(IntField(client().GetRoom("r").json, "active"), 1);
}

TEST_F(RoomsHttpTest, PositionsAreExactAndFirstComeFirstServed) {
  MustPut("r", {{"capacity", 3}});
  const std::vector<std::string> s = {"s1", "s2", "s3", "s4", "s5"};
  for (int i = 0; i < 3; ++i) {
    HttpResult r = client().Check("r", s[i]);
    ASSERT_TRUE(IsSession(r, "active")) << s[i];
    EXPECT_EQ(IntField(r.json, "active"), i + 1);
  }
  HttpResult r4 = client().Check("r", "s4");
  ASSERT_TRUE(IsSession(r4, "waiting"));
  EXPECT_EQ(IntField(r4.json, "position"), 1);
  EXPECT_EQ(IntField(r4.json, "waiting"), 1);
  EXPECT_EQ(IntField(r4.json, "active"), 3);
  HttpResult r5 = client().Check("r", "s5");
  ASSERT_TRUE(IsSession(r5, "waiting"));
  EXPECT_EQ(IntField(r5.json, "position"), 2);
  EXPECT_EQ(IntField(r5.json, "waiting"), 2);

  // Check-ins keep the place.
  r5 = client().Check("r", "s5");
  EXPECT_EQ(IntField(r5.json, "position"), 2);
  r4 = client().Check("r", "s4");
  EXPECT_EQ(IntField(r4.json, "position"), 1);

  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "active"), 3);
  EXPECT_EQ(IntField(room.json, "waiting"), 2);

  // s2 leaves for good: s4 (first in line) gets the slot, not s5.
  HttpResult left = client().Leave("r", "s2", true);
  ASSERT_TRUE(IsSession(left, "gone"));
  EXPECT_EQ(IntField(left.json, "active"), 3);
  EXPECT_EQ(IntField(left.json, "waiting"), 1);
  r5 = client().Check("r", "s5");
  ASSERT_TRUE(IsSession(r5, "waiting"));
  EXPECT_EQ(IntField(r5.json, "position"), 1);
  r4 = client().Check("r", "s4");
  ASSERT_TRUE(IsSession(r4, "active"));
  EXPECT_EQ(IntField(r4.json, "active"), 3);

  // Then s5.
  ASSERT_TRUE(IsSession(client().Leave("r", "s1", true), "gone"));
  ASSERT_TRUE(IsSession(client().Check("r", "s5"), "active"));
  room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "active"), 3);
  EXPECT_EQ(IntField(room.json, "waiting"), 0);
  EXPECT_EQ(IntField(room.json, "admitted_total"), 5);
}

TEST_F(RoomsHttpTest, AGoneSessionThatChecksAgainJoinsAtTheBack) {
  MustPut("r", {{"capacity", 1}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  ASSERT_TRUE(IsSession(client().Check("r", "c"), "waiting"));
  ASSERT_TRUE(IsSession(client().Leave("r", "a", true), "gone"));  // b is in
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "waiting"));
  EXPECT_EQ(IntField(a.json, "position"), 2) << "behind c";
  EXPECT_EQ(IntField(a.json, "waiting"), 2);
}

TEST_F(RoomsHttpTest, TouchRefreshesAndAnswersTheSessionObject) {
  MustPut("r", {{"capacity", 1}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));

  EXPECT_TRUE(IsSession(client().Touch("r", "a"), "active"));
  HttpResult b = client().Touch("r", "b");
  ASSERT_TRUE(IsSession(b, "waiting"));
  EXPECT_EQ(IntField(b.json, "position"), 1);

  // A session in grace that touches is active again, and nobody was let in meanwhile.
  ASSERT_TRUE(IsSession(client().Leave("r", "a", false), "grace"));
  EXPECT_TRUE(IsSession(client().Touch("r", "a"), "active"));
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "active"), 1);
  EXPECT_EQ(IntField(room.json, "waiting"), 1);

  // A session the room does not know is answered as one that has left (no telling which ids
  // are in the room); the admin's eviction says it.
  EXPECT_TRUE(IsSession(client().Touch("r", "stranger"), "gone"));
  EXPECT_TRUE(IsSession(client().Leave("r", "stranger", false), "gone"));
  EXPECT_TRUE(IsSession(client().Leave("r", "stranger", true), "gone"));
  EXPECT_TRUE(IsError(client().EndSession("r", "stranger"), 404, "unknown_session"));
  // touch does not join.
  room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "waiting"), 1);
  EXPECT_EQ(IntField(room.json, "active"), 1);
}

TEST_F(RoomsHttpTest, NonFinalLeaveKeepsTheSlotForGrace) {
  MustPut("r", {{"capacity", 1}});
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));

  HttpResult left = client().Leave("r", "a", false);
  ASSERT_TRUE(IsSession(left, "grace"));
  EXPECT_EQ(IntField(left.json, "active"), 1) << "a slot holder in grace counts as active";
  EXPECT_TRUE(NullOrAbsent(left.json, "token"));
  HttpResult b = client().Check("r", "b");
  ASSERT_TRUE(IsSession(b, "waiting")) << "the slot is still a's";
  EXPECT_EQ(IntField(b.json, "position"), 1);

  // Its token stays valid while it holds the slot.
  HttpResult v = client().VerifyToken(Token(a));
  EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;

  // Back within grace: active again at once.
  HttpResult back = client().Check("r", "a");
  ASSERT_TRUE(IsSession(back, "active"));
  EXPECT_EQ(IntField(back.json, "active"), 1);
  EXPECT_EQ(IntField(client().GetRoom("r").json, "waiting"), 1);
}

TEST_F(RoomsHttpTest, FinalLeaveFreesTheSlotAtOnceAndRevokesTheToken) {
  MustPut("r", {{"capacity", 1}});
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "active"));
  std::string token = Token(a);
  HttpResult v = client().VerifyToken(token);
  ASSERT_EQ(v.status, 200);
  EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));

  HttpResult left = client().Leave("r", "a", true);
  ASSERT_TRUE(IsSession(left, "gone"));
  EXPECT_TRUE(NullOrAbsent(left.json, "token"));
  EXPECT_EQ(IntField(left.json, "waiting"), 0);
  EXPECT_EQ(IntField(left.json, "active"), 1) << "b was admitted at once";
  EXPECT_TRUE(IsSession(client().Check("r", "b"), "active"));

  v = client().VerifyToken(token);
  ASSERT_EQ(v.status, 200) << v.body;
  EXPECT_EQ(BoolField(v.json, "valid"), false) << v.body;
  EXPECT_EQ(StrField(v.json, "reason"), "revoked") << v.body;
  EXPECT_EQ(StrField(v.json, "room"), "r");
  EXPECT_TRUE(NullOrAbsent(v.json, "session")) << "nobody holds the admission";

  // Leaving again: the room no longer knows a.
  EXPECT_TRUE(IsSession(client().Leave("r", "a", true), "gone"));

  // A later admission of the same session gets a token that verifies; the old one stays revoked.
  ASSERT_TRUE(IsSession(client().Leave("r", "b", true), "gone"));
  HttpResult a2 = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a2, "active"));
  v = client().VerifyToken(Token(a2));
  EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;
  v = client().VerifyToken(token);
  EXPECT_EQ(BoolField(v.json, "valid"), false) << v.body;
}

TEST_F(RoomsHttpTest, LeaveOfAWaitingSessionTakesItOutOfTheLine) {
  MustPut("r", {{"capacity", 1}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  for (const char* s : {"w1", "w2", "w3", "w4"}) {
    ASSERT_TRUE(IsSession(client().Check("r", s), "waiting"));
  }
  HttpResult l1 = client().Leave("r", "w1", false);  // not final: still gone at once
  ASSERT_TRUE(IsSession(l1, "gone"));
  EXPECT_EQ(IntField(l1.json, "waiting"), 3);
  HttpResult l3 = client().Leave("r", "w3", true);
  ASSERT_TRUE(IsSession(l3, "gone"));
  EXPECT_EQ(IntField(l3.json, "waiting"), 2);

  HttpResult w2 = client().Check("r", "w2");
  EXPECT_EQ(IntField(w2.json, "position"), 1);
  HttpResult w4 = client().Check("r", "w4");
  EXPECT_EQ(IntField(w4.json, "position"), 2);
  EXPECT_EQ(IntField(client().GetRoom("r").json, "active"), 1);
  EXPECT_TRUE(IsSession(client().Touch("r", "w1"), "gone"));
}

TEST_F(RoomsHttpTest, DeleteSessionEvictsAndRevokes) {
  MustPut("r", {{"capacity", 1}});
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "waiting"));
  ASSERT_TRUE(IsSession(client().Check("r", "c"), "waiting"));

  HttpResult ended = client().EndSession("r", "a");
  ASSERT_TRUE(IsSession(ended, "gone"));
  EXPECT_EQ(StrField(ended.json, "session"), "a");
  EXPECT_EQ(IntField(ended.json, "active"), 1);
  EXPECT_EQ(IntField(ended.json, "waiting"), 1);
  EXPECT_TRUE(IsSession(client().Check("r", "b"), "active"));
  HttpResult v = client().VerifyToken(Token(a));
  EXPECT_EQ(BoolField(v.json, "valid"), false) << v.body;
  EXPECT_EQ(StrField(v.json, "reason"), "revoked") << v.body;

  // A waiting session can be ended too.
  ASSERT_TRUE(IsSession(client().EndSession("r", "c"), "gone"));
  EXPECT_EQ(IntField(client().GetRoom("r").json, "waiting"), 0);
  EXPECT_TRUE(IsError(client().EndSession("r", "c"), 404, "unknown_session"));
}

TEST_F(RoomsHttpTest, VerifyAnswersTheClaimsOfAValidToken) {
  MustPut("r", {{"capacity", 1}});
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "active"));
  HttpResult v = client().VerifyToken(Token(a));
  ASSERT_EQ(v.status, 200) << v.body;
  EXPECT_EQ(BoolField(v.json, "valid"), true);
  EXPECT_EQ(StrField(v.json, "room"), "r");
  EXPECT_EQ(StrField(v.json, "session"), "a");
  auto exp = IntField(v.json, "exp");
  ASSERT_TRUE(exp.has_value()) << v.body;
  EXPECT_NEAR(static_cast<double>(*exp), static_cast<double>(NowSeconds() + 600), 5.0)
      << "seconds since the epoch";
  EXPECT_EQ(exp, IntField(JwtClaims(Token(a)), "exp"));
}

TEST_F(RoomsHttpTest, TamperedOrMalformedTokensAreInvalid) {
  MustPut("r", {{"capacity", 2}});
  HttpResult a = client().Check("r", "a");
  ASSERT_TRUE(IsSession(a, "active"));
  ASSERT_TRUE(IsSession(client().Check("r", "b"), "active"));
  std::string token = Token(a);
  size_t dot1 = token.find('.');
  size_t dot2 = token.rfind('.');

  auto expect_invalid = [&](const std::string& t, const char* what) {
    HttpResult v = client().VerifyToken(t);
    ASSERT_EQ(v.status, 200) << what << ": " << v.body;
    EXPECT_EQ(BoolField(v.json, "valid"), false) << what << ": " << v.body;
    auto reason = StrField(v.json, "reason");
    EXPECT_TRUE(reason.has_value() && !reason->empty()) << what << ": " << v.body;
  };

  // The payload claims another session, with the old signature.
  json::object claims = JwtClaims(token).as_object();
  claims["sub"] = "b";
  std::string forged =
      token.substr(0, dot1) + "." + Base64UrlEncode(json::serialize(claims)) + token.substr(dot2);
  expect_invalid(forged, "payload changed");
  // The same payload signed with another secret.
  std::string input = forged.substr(0, forged.rfind('.'));
  expect_invalid(input + "." + HmacSha256Base64Url("not-the-secret", input), "other secret");
  // A changed character in the signature, the payload and the header. (Not the last
  // character of a part: its low bits are padding that base64url decoding ignores.)
  for (size_t at : {dot2 + 10, dot1 + 5, size_t{3}}) {
    std::string flipped = token;
    flipped[at] = flipped[at] == 'A' ? 'B' : 'A';
    expect_invalid(flipped, "character changed");
  }
  expect_invalid(token.substr(0, dot2), "no signature");
  expect_invalid("", "empty");
  expect_invalid("garbage", "garbage");
  expect_invalid("a.b.c", "not base64 JSON");
  expect_invalid(token + ".x", "four parts");

  // The untouched token still verifies; one signed with the shared secret is accepted too
  // (the app can verify offline and the server agrees).
  HttpResult v = client().VerifyToken(token);
  EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;
  v = client().VerifyToken(input + "." + HmacSha256Base64Url(kTokenSecret, input));
  EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;
  // The token names an admission, not a session (its sub is opaque): whatever `sub` a holder of
  // the secret writes, the answer is the session that holds the admission.
  EXPECT_EQ(StrField(v.json, "session"), "a");
}

TEST_F(RoomsHttpTest, KeepAliveServesManyRequestsOnOneConnection) {
  MustPut("r", {{"capacity", 1000}});
  for (int i = 0; i < 200; ++i) {
    HttpResult r = client().Check("r", "s" + std::to_string(i));
    ASSERT_TRUE(IsSession(r, "active")) << i;
  }
  EXPECT_EQ(IntField(client().GetRoom("r").json, "active"), 200);
}

}  // namespace
}  // namespace anteroom::testing
