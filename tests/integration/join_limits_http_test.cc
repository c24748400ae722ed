// Per-client limits and the challenge over HTTP, against the real server:
// the room settings (validated, echoed, cleared), 429 with Retry-After for check and the live
// channel, who the client is (X-Forwarded-For behind --trusted-proxy, IPv6 per /64), and the
// proof-of-work flow with a C++ solver.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/api_checks.h"
#include "support/client_as.h"
#include "support/server_fixture.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;

std::string Code(const AnswerAs& a) {
  if (!a.json.is_object()) return {};
  const json::value* error = a.json.as_object().if_contains("error");
  if (error == nullptr || !error->is_object()) return {};
  const json::value* code = error->as_object().if_contains("code");
  return code && code->is_string() ? std::string(code->as_string()) : std::string();
}
std::string Message(const AnswerAs& a) {
  return a.json.is_object() && a.json.as_object().contains("error")
             ? std::string(a.json.at("error").at("message").as_string())
             : std::string();
}

class JoinLimitsHttpTest : public ServerTest {
 protected:
  std::vector<std::string> ServerArgs() const override {
    return {"--trusted-proxy", "127.0.0.1/32"};
  }
  ClientAs As(const std::string& address) { return ClientAs(server().port(), address); }
};

TEST_F(JoinLimitsHttpTest, SettingsAreValidatedEchoedAndCleared) {
  json::value created = MustPut("r", {{"capacity", 2}});
  EXPECT_TRUE(NullOrAbsent(created, "joins_per_minute_per_client")) << created;
  EXPECT_TRUE(created.as_object().contains("places_per_client"));
  EXPECT_TRUE(created.at("challenge").is_null());

  json::value set = MustPut("r", {{"joins_per_minute_per_client", 60},
                                  {"places_per_client", 5},
                                  {"challenge", {{"type", "pow"}, {"difficulty", 8}}}});
  EXPECT_EQ(IntField(set, "joins_per_minute_per_client"), 60);
  EXPECT_EQ(IntField(set, "places_per_client"), 5);
  EXPECT_EQ(json::serialize(set.at("challenge")), R"({"type":"pow","difficulty":8})");
  HttpResult got = client().GetRoom("r");
  EXPECT_EQ(json::serialize(got.json.at("challenge")), R"({"type":"pow","difficulty":8})");
  // Difficulty defaults to 16.
  json::value dflt = MustPut("r", {{"challenge", {{"type", "pow"}}}});
  EXPECT_EQ(json::serialize(dflt.at("challenge")), R"({"type":"pow","difficulty":16})");

  const std::string before = Snapshot("r");
  for (const char* bad : {
           R"({"joins_per_minute_per_client": 0})",
           R"({"joins_per_minute_per_client": -1})",
           R"({"joins_per_minute_per_client": 100001})",
           R"({"joins_per_minute_per_client": 1.5})",
           R"({"joins_per_minute_per_client": "60"})",
           R"({"places_per_client": 0})",
           R"({"places_per_client": 1000001})",
           R"({"places_per_client": true})",
           R"({"challenge": "pow"})",
           R"({"challenge": {"type": "captcha"}})",
           R"({"challenge": {"difficulty": 8}})",
           R"({"challenge": {"type": "pow", "difficulty": 0}})",
           R"({"challenge": {"type": "pow", "difficulty": 25}})",
           R"({"challenge": {"type": "pow", "difficulty": 8, "extra": 1}})",
           R"({"challenge": []})",
           R"({"capacity": 3, "places_per_client": 0})",
       }) {
    HttpResult r = client().Request("PUT", "/v1/rooms/r", bad);
    EXPECT_TRUE(IsError(r, 400, "invalid_argument")) << bad << " -> " << r.body;
  }
  EXPECT_EQ(Snapshot("r"), before);  // nothing changed

  json::value cleared = MustPut("r", {{"joins_per_minute_per_client", nullptr},
                                      {"places_per_client", nullptr},
                                      {"challenge", nullptr}});
  EXPECT_TRUE(cleared.at("joins_per_minute_per_client").is_null());
  EXPECT_TRUE(cleared.at("places_per_client").is_null());
  EXPECT_TRUE(cleared.at("challenge").is_null());
}

TEST_F(JoinLimitsHttpTest, ExcessJoinsGet429WithRetryAfterPerClient) {
  MustPut("r", {{"capacity", 100}, {"joins_per_minute_per_client", 2}});
  ClientAs one = As("203.0.113.1");
  ASSERT_EQ(one.Check("r", "a").status, 200);
  ASSERT_EQ(one.Check("r", "b").status, 200);
  AnswerAs refused = one.Check("r", "c");
  EXPECT_EQ(refused.status, 429) << refused.raw;
  EXPECT_EQ(Code(refused), "rate_limited");
  EXPECT_EQ(refused.retry_after, "30") << refused.raw;  // a token every 30 s
  EXPECT_NE(Message(refused).find("joins_per_minute_per_client"), std::string::npos);
  // Check-ins of its places are answered; another client has a bucket of its own.
  EXPECT_EQ(one.Check("r", "a").status, 200);
  EXPECT_EQ(As("203.0.113.2").Check("r", "c").status, 200);
  // The room says nothing changed for the refused join.
  HttpResult room = client().GetRoom("r");
  EXPECT_EQ(IntField(room.json, "active"), 3);
}

TEST_F(JoinLimitsHttpTest, PlacesPerClientCountsLivePlaces) {
  MustPut("r", {{"capacity", 1}, {"places_per_client", 2}, {"checkin_timeout_ms", 9'000}});
  ClientAs one = As("203.0.113.1");
  ASSERT_EQ(one.Check("r", "a").status, 200);
  ASSERT_EQ(one.Check("r", "b").status, 200);
  AnswerAs refused = one.Check("r", "c");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.retry_after, "9");
  EXPECT_NE(Message(refused).find("places_per_client"), std::string::npos);
  ASSERT_EQ(one.Request("POST", "/v1/rooms/r/leave", R"({"session":"b"})").status, 200);
  EXPECT_EQ(one.Check("r", "c").status, 200);
  // A server-named session (no "session") is a new place like any other.
  EXPECT_EQ(one.Request("POST", "/v1/rooms/r/check", "").status, 429);
}

TEST_F(JoinLimitsHttpTest, Ipv6ClientsAreCountedPerSlash64) {
  MustPut("r", {{"capacity", 10}, {"places_per_client", 1}});
  EXPECT_EQ(As("2001:db8:1:2::1").Check("r", "a").status, 200);
  EXPECT_EQ(As("2001:db8:1:2:ffff::9").Check("r", "b").status, 429);  // the same /64
  EXPECT_EQ(As("[2001:db8:1:3::1]:4711").Check("r", "c").status, 200);
  // X-Forwarded-For is read from the right: what a client writes to the left is ignored.
  EXPECT_EQ(As("198.51.100.7, 2001:db8:1:2::5").Check("r", "d").status, 429);
  // Garbage from the trusted proxy: the proxy (127.0.0.1) is the client.
  EXPECT_EQ(As("unknown").Check("r", "e").status, 200);
  EXPECT_EQ(As("").Check("r", "f").status, 429);  // 127.0.0.1 again
}

// A proxy that adds an X-Forwarded-For line of its own (HAProxy's `option forwardfor`) rather
// than appending to the client's: the lines are one list, so the client's own line is to the
// left of the proxy's and never believed.
TEST_F(JoinLimitsHttpTest, SeveralForwardedForLinesAreOneList) {
  MustPut("r", {{"capacity", 10}, {"places_per_client", 1}});
  RawConnection conn(server().port());
  for (int i = 0; i < 3; ++i) {
    std::string spoofed = "X-Forwarded-For: 192.0.2." + std::to_string(i + 1);
    ASSERT_TRUE(conn.Send(RawRequest("POST", "/v1/rooms/r/check",
                                     R"({"session":"s)" + std::to_string(i) + R"("})",
                                     {spoofed, "X-Forwarded-For: 203.0.113.9"})));
    std::string answer = conn.ReadResponse();
    EXPECT_EQ(RawStatus(answer), i == 0 ? 200 : 429) << answer;
  }
}

class UntrustedForwardedForTest : public ServerTest {};

TEST_F(UntrustedForwardedForTest, WithoutTrustedProxyTheHeaderIsIgnored) {
  MustPut("r", {{"capacity", 10}, {"places_per_client", 1}});
  EXPECT_EQ(ClientAs(server().port(), "203.0.113.1").Check("r", "a").status, 200);
  AnswerAs second = ClientAs(server().port(), "203.0.113.2").Check("r", "b");
  EXPECT_EQ(second.status, 429) << "the peer (127.0.0.1) is the client for both";
}

TEST_F(JoinLimitsHttpTest, ChallengeFlowWithASolver) {
  MustPut("r", {{"capacity", 1}, {"challenge", {{"type", "pow"}, {"difficulty", 10}}}});
  ClientAs c = As("203.0.113.1");
  AnswerAs none = c.Check("r", "ann");
  EXPECT_EQ(none.status, 403) << none.raw;
  EXPECT_EQ(Code(none), "challenge_required");
  EXPECT_NE(Message(none).find("/v1/rooms/r/challenge?session=ann"), std::string::npos)
      << Message(none);

  AnswerAs puzzle = c.Request("GET", "/v1/rooms/r/challenge?session=ann");
  ASSERT_EQ(puzzle.status, 200) << puzzle.raw;
  EXPECT_EQ(StrField(puzzle.json, "type"), "pow");
  EXPECT_EQ(StrField(puzzle.json, "algorithm"), "sha256-leading-zero-bits");
  EXPECT_EQ(IntField(puzzle.json, "difficulty"), 10);
  EXPECT_EQ(StrField(puzzle.json, "session"), "ann");
  EXPECT_EQ(IntField(puzzle.json, "expires_in_ms"), 600'000);
  int64_t expires = IntField(puzzle.json, "expires_ms").value_or(0);
  EXPECT_NEAR(static_cast<double>(expires), NowSeconds() * 1000.0 + 600'000, 30'000);
  std::string nonce = *StrField(puzzle.json, "nonce");
  std::string solution = SolvePow(nonce, 10);
  std::string proof = R"("challenge":")" + nonce + R"(","solution":")" + solution + "\"";

  // Another session cannot use ann's proof; a wrong solution shows too few bits.
  AnswerAs replayed = c.Check("r", "bob", proof);
  EXPECT_EQ(replayed.status, 403);
  EXPECT_NE(Message(replayed).find("not issued for this room and session"), std::string::npos)
      << Message(replayed);
  std::string weak = solution == "0" ? "1" : "0";
  AnswerAs wrong =
      c.Check("r", "ann", R"("challenge":")" + nonce + R"(","solution":")" + weak + "\"");
  EXPECT_EQ(wrong.status, 403);
  EXPECT_NE(Message(wrong).find("bits"), std::string::npos) << Message(wrong);
  AnswerAs half = c.Check("r", "ann", R"("challenge":")" + nonce + "\"");
  EXPECT_EQ(half.status, 403);

  AnswerAs joined = c.Check("r", "ann", proof);
  ASSERT_EQ(joined.status, 200) << joined.raw;
  EXPECT_EQ(StrField(joined.json, "status"), "active");
  EXPECT_EQ(c.Check("r", "ann").status, 200);  // check-ins need no proof

  // Without a session the puzzle names one, to join with.
  AnswerAs named = c.Request("GET", "/v1/rooms/r/challenge");
  ASSERT_EQ(named.status, 200);
  std::string session = *StrField(named.json, "session");
  EXPECT_EQ(session.size(), 22u);
  std::string nonce2 = *StrField(named.json, "nonce");
  AnswerAs second =
      c.Check("r", session,
              R"("challenge":")" + nonce2 + R"(","solution":")" + SolvePow(nonce2, 10) + "\"");
  EXPECT_EQ(second.status, 200) << second.raw;
  EXPECT_EQ(StrField(second.json, "status"), "waiting");

  // A room without a challenge says so; unknown rooms and bad names are the usual errors.
  MustPut("open", {{"capacity", 1}});
  AnswerAs open = c.Request("GET", "/v1/rooms/open/challenge?session=x");
  EXPECT_EQ(open.status, 200);
  EXPECT_TRUE(open.json.at("type").is_null()) << open.body;
  EXPECT_EQ(c.Request("GET", "/v1/rooms/nope/challenge").status, 404);
  EXPECT_EQ(c.Request("GET", "/v1/rooms/r/challenge?session=a%20b").status, 400);
}

TEST_F(JoinLimitsHttpTest, TheLiveChannelJoinsUnderTheSameRules) {
  MustPut("r", {{"capacity", 1},
                {"places_per_client", 1},
                {"challenge", {{"type", "pow"}, {"difficulty", 6}}}});
  ClientAs c = As("203.0.113.1");
  // No proof: refused before the stream starts, as JSON.
  AnswerAs refused = c.Request("GET", "/v1/rooms/r/events?session=ann");
  EXPECT_EQ(refused.status, 403) << refused.raw;
  EXPECT_EQ(Code(refused), "challenge_required");

  AnswerAs puzzle = c.Request("GET", "/v1/rooms/r/challenge?session=ann");
  std::string nonce = *StrField(puzzle.json, "nonce");
  std::string query = "?session=ann&challenge=" + nonce + "&solution=" + SolvePow(nonce, 6);
  {
    RawConnection stream(server().port());
    ASSERT_TRUE(stream.Send(
        RawRequest("GET", "/v1/rooms/r/events" + query, {}, {"X-Forwarded-For: 203.0.113.1"})));
    std::string head = stream.ReadResponse();
    EXPECT_EQ(RawStatus(head), 200) << head;
    EXPECT_NE(head.find("text/event-stream"), std::string::npos) << head;
  }
  // ann holds the client's one place (in grace after the stream closed): a second session of
  // the same client is refused on the live channel too, with Retry-After.
  AnswerAs puzzle2 = c.Request("GET", "/v1/rooms/r/challenge?session=bob");
  std::string nonce2 = *StrField(puzzle2.json, "nonce");
  AnswerAs limited = c.Request("GET", "/v1/rooms/r/events?session=bob&challenge=" + nonce2 +
                                          "&solution=" + SolvePow(nonce2, 6));
  EXPECT_EQ(limited.status, 429) << limited.raw;
  EXPECT_TRUE(limited.retry_after.has_value());
  AnswerAs ws = c.Request(
      "GET", "/v1/rooms/r/ws?session=bob&challenge=" + nonce2 + "&solution=" + SolvePow(nonce2, 6));
  EXPECT_EQ(ws.status, 426);  // not an upgrade: refused before the rules are asked
}

// With a data directory, places and buckets are rebuilt from the log on restart (kill -9
// included): a client that held its limit before still holds it after. A snapshot (SIGUSR1)
// between the joins carries the client table across too.
TEST(JoinLimitsRestartTest, LimitsHoldAcrossARestart) {
  TempDir dir("anteroom-limits");
  ASSERT_FALSE(dir.path().empty());
  std::vector<std::string> args = {"--data", dir.path().string(), "--trusted-proxy",
                                   "127.0.0.1/32"};
  EnvVars env = {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}};
  {
    ServerProcess server(args, env);
    ASSERT_TRUE(server.started()) << server.error();
    ClientAs c(server.port(), "203.0.113.1");
    ASSERT_EQ(c.Request("PUT", "/v1/rooms/r",
                        R"({"capacity": 10, "places_per_client": 2,)"
                        R"( "joins_per_minute_per_client": 3})")
                  .status,
              200);
    ASSERT_EQ(c.Check("r", "a").status, 200);
    kill(server.pid(), SIGUSR1);  // a snapshot with the client table in it
    auto snapshotted = [&] {
      for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
        if (e.path().extension() == ".snap") return true;
      }
      return false;
    };
    ASSERT_TRUE(WaitFor(snapshotted, std::chrono::seconds(10)));
    ASSERT_EQ(c.Check("r", "b").status, 200);
    ASSERT_EQ(c.Check("r", "c").status, 429);
    ASSERT_EQ(c.Request("POST", "/v1/rooms/r/leave", R"({"session":"a","final":true})").status,
              200);
    kill(server.pid(), SIGKILL);
    server.Stop();
  }
  ServerProcess again(args, env);
  ASSERT_TRUE(again.started()) << again.error();
  ClientAs c(again.port(), "203.0.113.1");
  // One place left (b), and a bucket of 3 with 2 taken within the last seconds: one more join,
  // then the bucket is empty even though a place is free.
  EXPECT_EQ(c.Check("r", "b").status, 200);
  EXPECT_EQ(c.Check("r", "d").status, 200);
  AnswerAs empty = c.Check("r", "e");
  EXPECT_EQ(empty.status, 429) << empty.raw;
  EXPECT_NE(Message(empty).find("places_per_client"), std::string::npos) << Message(empty);
  ASSERT_EQ(c.Request("POST", "/v1/rooms/r/leave", R"({"session":"d","final":true})").status, 200);
  AnswerAs bucket = c.Check("r", "e");
  EXPECT_EQ(bucket.status, 429) << bucket.raw;
  EXPECT_NE(Message(bucket).find("joins_per_minute_per_client"), std::string::npos);
  EXPECT_EQ(ClientAs(again.port(), "203.0.113.2").Check("r", "x").status, 200);
}

}  // namespace
}  // namespace anteroom::testing
