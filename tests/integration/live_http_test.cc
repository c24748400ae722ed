// The live channel from a non-browser client, against the real server: WebSocket and
// Server-Sent Events frames, heartbeats, coalescing, admission with its token, and what closing
// a stream does to the session (drop-out clock or grace, from the moment of closing).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/api_checks.h"
#include "support/live_client.h"
#include "support/redis_process.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;
using Kind = LiveClient::Kind;

constexpr milliseconds kWait(3000);

// base64url without padding, as a subprotocol carries a credential.
std::string Base64Url(std::string_view text) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t bits = 0;
  int held = 0;
  for (unsigned char c : text) {
    bits = (bits << 8) | c;
    held += 8;
    while (held >= 6) {
      held -= 6;
      out += kAlphabet[(bits >> held) & 63];
    }
  }
  if (held > 0) out += kAlphabet[(bits << (6 - held)) & 63];
  return out;
}  // generous bound for a message on a loaded machine

class LiveHttpTest : public ServerTest, public ::testing::WithParamInterface<Kind> {
 protected:
  std::vector<std::string> ServerArgs() const override {
    return {"--live-heartbeat-ms", "400"};  // default tick: 250 ms, at most 4 messages/s
  }
  std::string Target(const std::string& room, const std::string& session = {}) const {
    std::string t = "/v1/rooms/" + room + (GetParam() == Kind::kWebSocket ? "/ws" : "/events");
    return session.empty() ? t : t + "?session=" + session;
  }
  std::unique_ptr<LiveClient> Open(const std::string& room, const std::string& session = {}) {
    auto c = std::make_unique<LiveClient>(server().port(), Target(room, session), GetParam());
    EXPECT_TRUE(c->ok()) << c->error() << " " << c->refused_body();
    return c;
  }
  int64_t Field(const LiveMessage& m, std::string_view key) {
    return IntField(m.json, key).value_or(-1);
  }
  // Calls act(client, i) for i in [0, n), one every `gap`, on another thread, and returns every
  // status message `c` gets within `span` of the start.
  template <typename Act>
  std::vector<LiveMessage> StatusesWhile(LiveClient& c, int n, milliseconds gap, milliseconds span,
                                         Act act) {
    auto start = SteadyClock::now();
    std::thread actor([&] {
      Client other(server().url());
      for (int i = 0; i < n; ++i) {
        act(other, i);
        std::this_thread::sleep_for(gap);
      }
    });
    std::vector<LiveMessage> seen;
    while (SteadyClock::now() - start < span) {
      if (auto m = c.NextOf("status", milliseconds(200))) seen.push_back(std::move(*m));
    }
    actor.join();
    return seen;
  }
  bool RoomIs(const std::string& room, int64_t active, int64_t waiting) {
    HttpResult r = client().GetRoom(room);
    return IntField(r.json, "active") == active && IntField(r.json, "waiting") == waiting;
  }
};

TEST_P(LiveHttpTest, TheFirstMessageIsTheStatusThenHeartbeats) {
  MustPut("r", {{"capacity", 1}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  auto b = Open("r", "b");
  if (GetParam() == Kind::kEvents) {
    EXPECT_EQ(b->content_type(), "text/event-stream");
  }
  auto first = b->Next(kWait);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->type(), "status");
  EXPECT_EQ(StrField(first->json, "session"), "b");
  EXPECT_EQ(StatusOf(*first), "waiting");
  EXPECT_EQ(PositionOf(*first), 1);
  EXPECT_EQ(Field(*first, "waiting"), 1);
  EXPECT_EQ(Field(*first, "active"), 1);
  EXPECT_EQ(Field(*first, "capacity"), 1);
  // Every field of a check answer is there.
  for (const char* key : {"eta_ms", "token", "position"}) {
    EXPECT_TRUE(first->json.as_object().contains(key)) << key;
  }
  auto beat = b->NextOf("heartbeat", kWait);
  ASSERT_TRUE(beat);
  EXPECT_GT(Field(*beat, "time_ms"), 1'600'000'000'000);
  auto second = b->NextOf("heartbeat", kWait);
  ASSERT_TRUE(second);
  auto gap = std::chrono::duration_cast<milliseconds>(second->at - beat->at).count();
  EXPECT_GE(gap, 250) << "one heartbeat per interval (400 ms)";
}

TEST_P(LiveHttpTest, WithoutASessionANewOneJoinsAndItsIdComesFirst) {
  MustPut("r", {{"capacity", 1}});
  auto a = Open("r");
  auto first = a->Next(kWait);
  ASSERT_TRUE(first);
  auto id = StrField(first->json, "session");
  ASSERT_TRUE(id && id->size() >= 16) << "an unguessable id";
  EXPECT_EQ(StatusOf(*first), "active");
  EXPECT_TRUE(StrField(first->json, "token")) << "admitted at once: the token is in the message";
  EXPECT_TRUE(RoomIs("r", 1, 0));
}

TEST_P(LiveHttpTest, PositionsFollowTheLineAndTheTokenArrivesOnAdmission) {
  MustPut("r", {{"capacity", 1}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  auto b = Open("r", "b");
  auto c = Open("r", "c");
  auto d = Open("r", "d");
  ASSERT_EQ(PositionOf(*b->Next(kWait)), 1);
  ASSERT_EQ(PositionOf(*c->Next(kWait)), 2);
  ASSERT_EQ(PositionOf(*d->Next(kWait)), 3);

  auto left = SteadyClock::now();
  ASSERT_TRUE(IsSession(client().Leave("r", "a", true), "gone"));
  auto admitted =
      b->NextStatus([](const auto& j) { return StrField(j, "status") == "active"; }, kWait);
  ASSERT_TRUE(admitted) << "b is admitted and told so";
  EXPECT_LT(admitted->at - left, milliseconds(2000));
  auto token = StrField(admitted->json, "token");
  ASSERT_TRUE(token);
  HttpResult v = client().VerifyToken(*token);
  EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;
  auto c1 = c->NextStatus([](const auto& j) { return IntField(j, "position") == 1; }, kWait);
  ASSERT_TRUE(c1);
  EXPECT_EQ(Field(*c1, "waiting"), 2);
  ASSERT_TRUE(d->NextStatus([](const auto& j) { return IntField(j, "position") == 2; }, kWait));
  // b holds the slot through its stream: nobody else gets in.
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_TRUE(RoomIs("r", 1, 2));
}

TEST_P(LiveHttpTest, AnOpenStreamKeepsAWaitingSessionAndClosingStartsItsDropOutClock) {
  MustPut("r", {{"capacity", 1}, {"checkin_timeout_ms", 800}, {"grace_ms", 100}});
  auto a = Open("r", "a");  // holds the slot the same way
  ASSERT_EQ(StatusOf(*a->Next(kWait)), "active");
  auto b = Open("r", "b");
  ASSERT_EQ(PositionOf(*b->Next(kWait)), 1);
  std::this_thread::sleep_for(milliseconds(2500));  // three check-in timeouts
  ASSERT_TRUE(RoomIs("r", 1, 1)) << client().GetRoom("r").body;

  b->Close();
  auto closed_at = SteadyClock::now();
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_TRUE(RoomIs("r", 1, 1)) << "the clock starts when the stream closes";
  ASSERT_TRUE(WaitFor([&] { return RoomIs("r", 1, 0); }, milliseconds(3000)));
  EXPECT_GE(SteadyClock::now() - closed_at, milliseconds(700));
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "dropped_total"), 1) << room.body;
}

TEST_P(LiveHttpTest, ClosingAnAdmittedStreamStartsGraceAndThenTheSlotMovesOn) {
  MustPut("r", {{"capacity", 1}, {"checkin_timeout_ms", 5000}, {"grace_ms", 800}});
  auto a = Open("r", "a");
  ASSERT_EQ(StatusOf(*a->Next(kWait)), "active");
  auto b = Open("r", "b");
  ASSERT_EQ(PositionOf(*b->Next(kWait)), 1);
  a->Close();
  auto closed_at = SteadyClock::now();
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_TRUE(RoomIs("r", 1, 1)) << "a keeps its slot through grace";
  auto admitted =
      b->NextStatus([](const auto& j) { return StrField(j, "status") == "active"; }, kWait);
  ASSERT_TRUE(admitted);
  EXPECT_GE(admitted->at - closed_at, milliseconds(700)) << "not before grace ended";
  EXPECT_LT(admitted->at - closed_at, milliseconds(800 + 2000));
}

TEST_P(LiveHttpTest, ReopeningWithinGraceKeepsTheSlot) {
  MustPut("r", {{"capacity", 1}, {"checkin_timeout_ms", 5000}, {"grace_ms", 1000}});
  auto a = Open("r", "a");
  auto first = a->Next(kWait);
  ASSERT_EQ(StatusOf(*first), "active");
  auto b = Open("r", "b");
  ASSERT_EQ(PositionOf(*b->Next(kWait)), 1);
  a->Close();
  std::this_thread::sleep_for(milliseconds(300));  // a page reload
  auto again = Open("r", "a");
  auto back = again->Next(kWait);
  ASSERT_TRUE(back);
  EXPECT_EQ(StatusOf(*back), "active");
  EXPECT_EQ(StrField(back->json, "session"), "a");
  std::this_thread::sleep_for(milliseconds(1500));  // past the old grace
  EXPECT_TRUE(RoomIs("r", 1, 1));
  HttpResult bs = client().Check("r", "b");
  EXPECT_TRUE(IsSession(bs, "waiting")) << bs.body;
}

TEST_P(LiveHttpTest, ChangesAreCoalescedToAtMostFourMessagesASecond) {
  MustPut("r", {{"capacity", 1}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  auto b = Open("r", "b");
  ASSERT_EQ(PositionOf(*b->Next(kWait)), 1);
  // 60 arrivals within about a second: the waiting count changes 60 times.
  auto seen = StatusesWhile(*b, 60, milliseconds(16), milliseconds(2500), [](Client& other, int i) {
    other.Check("r", "x" + std::to_string(i));
  });
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(Field(seen.back(), "waiting"), 61) << "the last message is exact";
  // In any window of 1 s, at most 4 messages (+1 for a window's edge at tick boundaries).
  for (size_t i = 0; i < seen.size(); ++i) {
    size_t in_window = 0;
    for (size_t j = i; j < seen.size() && seen[j].at - seen[i].at < milliseconds(1000); ++j) {
      ++in_window;
    }
    EXPECT_LE(in_window, 5u) << "messages " << i << ".." << i + in_window;
  }
  EXPECT_LT(seen.size(), 15u);
}

// People joining behind change only the counts a client sees (waiting, eta): those go out at most
// once a second, while a change of position goes out on the next tick.
TEST_P(LiveHttpTest, CountsAloneGoOutOnceASecondAndPositionsAtEveryTick) {
  MustPut("r", {{"capacity", 1}});
  ASSERT_TRUE(IsSession(client().Check("r", "a"), "active"));
  for (int i = 0; i < 12; ++i)
    ASSERT_TRUE(IsSession(client().Check("r", "f" + std::to_string(i)), "waiting"));
  auto b = Open("r", "b");
  ASSERT_EQ(PositionOf(*b->Next(kWait)), 13);

  // 30 arrivals behind b over about 1.5 s.
  auto seen = StatusesWhile(*b, 30, milliseconds(50), milliseconds(3000), [](Client& other, int i) {
    other.Check("r", "x" + std::to_string(i));
  });
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(Field(seen.back(), "waiting"), 43) << "the last message is exact";
  for (size_t i = 0; i + 1 < seen.size(); ++i) {
    EXPECT_EQ(PositionOf(seen[i]), 13);
    auto gap = std::chrono::duration_cast<milliseconds>(seen[i + 1].at - seen[i].at).count();
    EXPECT_GE(gap, 900) << "counts alone, at most once a second (messages " << i << ", " << i + 1
                        << ")";
  }

  // Now the people ahead leave, one every 100 ms: each move goes out at the next tick.
  seen = StatusesWhile(*b, 12, milliseconds(100), milliseconds(2500), [](Client& other, int i) {
    other.EndSession("r", "f" + std::to_string(i));
  });
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(PositionOf(seen.back()), 1);
  EXPECT_GE(seen.size(), 4u) << "positions are not held back to once a second";
  for (size_t i = 0; i + 1 < seen.size(); ++i) {
    EXPECT_GT(PositionOf(seen[i]), PositionOf(seen[i + 1])) << "every message moves forward";
  }
}

TEST_P(LiveHttpTest, AnEvictedSessionIsToldItIsGoneAndTheStreamCloses) {
  MustPut("r", {{"capacity", 1}});
  auto a = Open("r", "a");
  ASSERT_EQ(StatusOf(*a->Next(kWait)), "active");
  ASSERT_TRUE(client().EndSession("r", "a").ok());
  auto gone = a->NextStatus([](const auto& j) { return StrField(j, "status") == "gone"; }, kWait);
  ASSERT_TRUE(gone);
  EXPECT_FALSE(a->Next(kWait)) << "nothing after gone";
  EXPECT_TRUE(a->closed_by_server());
}

TEST_P(LiveHttpTest, DeletingTheRoomEndsEveryStream) {
  MustPut("r", {{"capacity", 1}});
  auto a = Open("r", "a");
  auto b = Open("r", "b");
  ASSERT_TRUE(a->Next(kWait));
  ASSERT_TRUE(b->Next(kWait));
  ASSERT_TRUE(client().DeleteRoom("r").ok());
  for (auto* c : {a.get(), b.get()}) {
    ASSERT_TRUE(
        c->NextStatus([](const auto& j) { return StrField(j, "status") == "gone"; }, kWait));
    EXPECT_FALSE(c->Next(kWait));
    EXPECT_TRUE(c->closed_by_server());
  }
}

TEST_P(LiveHttpTest, BadRequestsGetJsonErrorsAndChangeNothing) {
  MustPut("r", {{"capacity", 1}});
  LiveClient unknown(server().port(), Target("nope", "a"), GetParam());
  EXPECT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.refused_status(), 404);
  EXPECT_NE(unknown.refused_body().find("unknown_room"), std::string::npos)
      << unknown.refused_body();
  LiveClient bad(server().port(), Target("r", "no%20spaces"), GetParam());
  EXPECT_EQ(bad.refused_status(), 400);
  EXPECT_NE(bad.refused_body().find("invalid_argument"), std::string::npos);
  EXPECT_TRUE(RoomIs("r", 0, 0));
}

// The session id and the token are bearer secrets: a client can name them where no access log
// keeps them. A header on either transport; on a WebSocket (a browser's cannot send headers)
// an offered subprotocol beside `anteroom`, which the server answers so the browser accepts it.
TEST_P(LiveHttpTest, TheCredentialTravelsOutsideTheUrl) {
  MustPut("r", {{"capacity", 1}});
  const std::string session = "header-Qm9vYmFyYmF6cXV4";
  auto by_header =
      std::make_unique<LiveClient>(server().port(), Target("r"), GetParam(), kWait,
                                   std::vector<std::string>{"Anteroom-Session: " + session});
  ASSERT_TRUE(by_header->ok()) << by_header->error() << by_header->refused_body();
  auto first = by_header->NextOf("status", kWait);
  ASSERT_TRUE(first);
  EXPECT_EQ(StrField(first->json, "session"), session) << "the header named the session";
  std::optional<std::string> token = StrField(first->json, "token");
  ASSERT_TRUE(token) << "admitted at once";
  by_header.reset();

  // The token, by header or subprotocol, names its holder without telling who it is.
  std::vector<std::string> by_token = {"Anteroom-Token: " + *token};
  if (GetParam() == Kind::kWebSocket) {
    by_token = {"Sec-WebSocket-Protocol: anteroom, anteroom.token." + Base64Url(*token)};
  }
  LiveClient holder(server().port(), Target("r"), GetParam(), kWait, by_token);
  ASSERT_TRUE(holder.ok()) << holder.error() << holder.refused_body();
  auto held = holder.NextOf("status", kWait);
  ASSERT_TRUE(held);
  EXPECT_EQ(StatusOf(*held), "active");
  EXPECT_TRUE(held->json.at("session").is_null());
  if (GetParam() == Kind::kWebSocket) {
    EXPECT_EQ(holder.subprotocol(), "anteroom");
  }
  EXPECT_TRUE(RoomIs("r", 1, 0)) << "the token's stream joined nobody new";

  if (GetParam() == Kind::kWebSocket) {
    const std::string other = "subprotocol-Qm9vYmFyYmF6";
    LiveClient offered(server().port(), Target("r"), GetParam(), kWait,
                       {"Sec-WebSocket-Protocol: anteroom, anteroom.session." + Base64Url(other)});
    ASSERT_TRUE(offered.ok()) << offered.error() << offered.refused_body();
    EXPECT_EQ(offered.subprotocol(), "anteroom");
    auto m = offered.NextOf("status", kWait);
    ASSERT_TRUE(m);
    EXPECT_EQ(StrField(m->json, "session"), other);
    EXPECT_EQ(StatusOf(*m), "waiting");
    LiveClient garbled(server().port(), Target("r"), GetParam(), kWait,
                       {"Sec-WebSocket-Protocol: anteroom, anteroom.session.@@"});
    EXPECT_EQ(garbled.refused_status(), 400);
  }
  // A header beats the query, and a session with a token is refused.
  LiveClient both(server().port(), Target("r"), GetParam(), kWait,
                  {"Anteroom-Session: " + session, "Anteroom-Token: " + *token});
  EXPECT_EQ(both.refused_status(), 400);
  EXPECT_NE(both.refused_body().find("not both"), std::string::npos) << both.refused_body();
  LiveClient bad_name(server().port(), Target("r"), GetParam(), kWait,
                      {"Anteroom-Session: no/such*name"});
  EXPECT_EQ(bad_name.refused_status(), 400) << "the header keeps the query's naming rule";
}

INSTANTIATE_TEST_SUITE_P(Transports, LiveHttpTest,
                         ::testing::Values(Kind::kWebSocket, Kind::kEvents), [](const auto& info) {
                           return info.param == Kind::kWebSocket ? "websocket" : "events";
                         });

using LiveRoutesTest = ServerTest;

TEST_F(LiveRoutesTest, TheWebSocketRouteWantsAnUpgrade) {
  MustPut("r", {{"capacity", 1}});
  std::string answer = RawExchange(server().port(), RawRequest("GET", "/v1/rooms/r/ws"));
  EXPECT_EQ(RawStatus(answer), 426) << answer;
  EXPECT_EQ(RawHeader(answer, "Upgrade"), "websocket");
  EXPECT_NE(RawBody(answer).find("upgrade_required"), std::string::npos);
  RawConnection conn(server().port());
  ASSERT_TRUE(conn.Send(RawRequest("POST", "/v1/rooms/r/events", "{}")));
  std::string post = conn.ReadResponse();
  EXPECT_EQ(RawStatus(post), 405) << post;
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "waiting"), 0);
  EXPECT_EQ(IntField(room.json, "active"), 0) << "a refused stream joins nobody";
}

// A stream opened without `session` makes one; when the stream never starts (here the WebSocket
// handshake fails: no key), nobody can know that session, so it leaves for good at once instead
// of holding the slot through its grace.
TEST_F(LiveRoutesTest, AFailedHandshakeLeavesNoSessionBehind) {
  MustPut("r", {{"capacity", 1}, {"grace_ms", 60'000}, {"checkin_timeout_ms", 60'000}});
  std::string answer = RawExchange(
      server().port(),
      RawRequest("GET", "/v1/rooms/r/ws", {}, {"Connection: Upgrade", "Upgrade: websocket"}));
  EXPECT_EQ(RawStatus(answer), 400) << answer;
  auto deadline = SteadyClock::now() + kWait;
  int64_t active = -1;
  while (SteadyClock::now() < deadline) {
    active = IntField(client().GetRoom("r").json, "active").value_or(-1);
    if (active == 0) break;
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(active, 0) << "the session made for the failed stream left";
  // A session the client named is its own: the same failure leaves it in place.
  answer = RawExchange(server().port(), RawRequest("GET", "/v1/rooms/r/ws?session=named", {},
                                                   {"Connection: Upgrade", "Upgrade: websocket"}));
  EXPECT_EQ(RawStatus(answer), 400) << answer;
  std::this_thread::sleep_for(milliseconds(300));
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "active"), 1) << room.body;
}

// Pushing to many clients goes in chunks (here 4 messages each), with the line read again
// between them: every client still ends up shown its exact position.
class LiveChunkTest : public ServerTest {
 protected:
  std::vector<std::string> ServerArgs() const override { return {"--live-chunk", "4"}; }
};

TEST_F(LiveChunkTest, EveryClientIsShownItsExactPositionAcrossChunks) {
  MustPut("r", {{"capacity", 1}});
  ASSERT_TRUE(IsSession(client().Check("r", "holder"), "active"));
  constexpr int kClients = 30;
  std::vector<std::unique_ptr<LiveClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<LiveClient>(
        server().port(), "/v1/rooms/r/ws?session=c" + std::to_string(i), Kind::kWebSocket));
    ASSERT_TRUE(clients.back()->ok()) << clients.back()->error();
    ASSERT_EQ(PositionOf(*clients.back()->Next(kWait)), i + 1);
  }
  // Three admissions: the holder leaves, then c0 and c1 in turn.
  ASSERT_TRUE(IsSession(client().Leave("r", "holder", true), "gone"));
  ASSERT_TRUE(clients[0]->NextStatus(
      [](const auto& j) { return StrField(j, "status") == "active"; }, kWait));
  ASSERT_TRUE(IsSession(client().Leave("r", "c0", true), "gone"));
  ASSERT_TRUE(clients[1]->NextStatus(
      [](const auto& j) { return StrField(j, "status") == "active"; }, kWait));
  ASSERT_TRUE(IsSession(client().Leave("r", "c1", true), "gone"));
  for (int i = 2; i < kClients; ++i) {
    int64_t want = i - 2;  // c2 is admitted; the others move up three places
    auto m = clients[i]->NextStatus(
        [want](const auto& j) {
          return want == 0 ? StrField(j, "status") == "active" : IntField(j, "position") == want;
        },
        kWait);
    EXPECT_TRUE(m) << "c" << i << " shown " << (want == 0 ? "active" : std::to_string(want));
  }
}

// Two processes on one Redis: streams on one, changes made through the other. The hub reads the
// line from Redis each tick, so every process's clients see every change.
TEST(LiveRedisTest, StreamsOnOneProcessFollowChangesMadeThroughAnother) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  EnvVars env{{"ANTEROOM_TOKEN_SECRET", kTokenSecret}};
  ServerProcess one({"--store", redis.url()}, env);
  ServerProcess two({"--store", redis.url()}, env);
  ASSERT_TRUE(one.started()) << one.error();
  ASSERT_TRUE(two.started()) << two.error();
  Client via_two(two.url());
  ASSERT_EQ(via_two.PutRoom("r", {{"capacity", 1}, {"grace_ms", 500}}).status, 200);
  ASSERT_TRUE(IsSession(via_two.Check("r", "a"), "active"));

  LiveClient b(one.port(), "/v1/rooms/r/ws?session=b", Kind::kWebSocket);
  LiveClient c(one.port(), "/v1/rooms/r/events?session=c", Kind::kEvents);
  ASSERT_TRUE(b.ok()) << b.error();
  ASSERT_TRUE(c.ok()) << c.error();
  ASSERT_EQ(PositionOf(*b.Next(kWait)), 1);
  ASSERT_EQ(PositionOf(*c.Next(kWait)), 2);

  ASSERT_TRUE(IsSession(via_two.Leave("r", "a", true), "gone"));
  auto admitted =
      b.NextStatus([](const auto& j) { return StrField(j, "status") == "active"; }, kWait);
  ASSERT_TRUE(admitted);
  HttpResult v = via_two.VerifyToken(*StrField(admitted->json, "token"));
  EXPECT_EQ(BoolField(v.json, "valid"), true) << v.body;
  ASSERT_TRUE(c.NextStatus([](const auto& j) { return IntField(j, "position") == 1; }, kWait));

  // b's stream keeps it present; closing it starts grace, after which c is admitted.
  std::this_thread::sleep_for(milliseconds(800));
  EXPECT_EQ(IntField(via_two.GetRoom("r").json, "active"), 1);
  b.Close();
  ASSERT_TRUE(c.NextStatus([](const auto& j) { return StrField(j, "status") == "active"; },
                           milliseconds(4000)));
  EXPECT_TRUE(one.Alive());
  EXPECT_TRUE(two.Alive());
}

}  // namespace
}  // namespace anteroom::testing
