// Malformed HTTP over raw TCP: the server answers 4xx or hangs up, and stays up. Also
// pipelining, keep-alive and a clean stop on SIGTERM.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>
#include <thread>
#include <vector>

#include "support/api_checks.h"
#include "support/server_fixture.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

using RobustnessTest = ServerTest;

// A 4xx, or a connection closed with nothing said.
::testing::AssertionResult RejectedOrClosed(const std::string& answer) {
  if (answer.empty()) return ::testing::AssertionSuccess();
  int status = RawStatus(answer);
  if (status >= 400 && status < 500) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "answer was neither 4xx nor empty:\n"
                                       << answer.substr(0, 500);
}

TEST_F(RobustnessTest, MalformedRequestsGet4xxOrAClosedConnection) {
  MustPut("r", {{"capacity", 2}});
  ASSERT_TRUE(IsSession(client().Check("r", "s1"), "active"));
  std::string before = Snapshot("r");

  const std::vector<std::string> garbage = {
      "GARBAGE\r\n\r\n",
      "\r\n\r\n\r\n\r\n",
      std::string("\x00\x01\x02\xff\xfe\r\n\r\n", 10),
      "GET /healthz HTTP/9.9\r\n\r\n",
      "GET /healthz HTTX/1.1\r\n\r\n",
      "GET /healthz\r\n\r\n",
      "GET  /healthz  HTTP/1.1\r\n\r\n",
      "G\x01T /healthz HTTP/1.1\r\n\r\n",
      "GET /heal thz HTTP/1.1\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nBad Header Line\r\n\r\n",
      "GET /healthz HTTP/1.1\r\n: no-name\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nX-A\x01: b\r\n\r\n",
      "POST /v1/rooms/r/check HTTP/1.1\r\nContent-Length: abc\r\n\r\n{}",
      "POST /v1/rooms/r/check HTTP/1.1\r\nContent-Length: -1\r\n\r\n{}",
      "POST /v1/rooms/r/check HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
      "POST /v1/rooms/r/check HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n{}",
      "POST /v1/rooms/r/check HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
      "POST /v1/rooms/r/check HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "ffffffffffffffffffff\r\n{}\r\n",
      "POST /v1/rooms/r/check HTTP/1.1\r\nTransfer-Encoding: gzip, chunked, br\r\n\r\n0\r\n\r\n",
      "GET /healthz HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n",
      "GET /" + std::string(20000, 'p') + " HTTP/1.1\r\n\r\n",
      "GET /healthz HTTP/1.1\r\n" +
          [] {
            std::string many;
            for (int i = 0; i < 2000; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
            return many;
          }() +
          "\r\n",
  };
  for (const std::string& bytes : garbage) {
    std::string answer = RawExchange(server().port(), bytes, std::chrono::seconds(5));
    EXPECT_TRUE(RejectedOrClosed(answer)) << "request: " << bytes.substr(0, 80);
    ASSERT_TRUE(server().Alive()) << "the server died on: " << bytes.substr(0, 80);
    HttpResult health = client().Health();
    ASSERT_EQ(health.status, 200) << "after: " << bytes.substr(0, 80) << health.error;
  }
  EXPECT_EQ(Snapshot("r"), before);
}

TEST_F(RobustnessTest, TruncatedRequestsAndAbruptHangUpsDoNotHurt) {
  MustPut("r", {{"capacity", 2}});
  std::string before = Snapshot("r");
  const std::vector<std::string> partial = {
      "GET /heal",
      "POST /v1/rooms/r/check HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"session\":",
      "POST /v1/rooms/r/check HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"s",
      "PUT /v1/rooms/r HTTP/1.1\r\nContent-Length: 16\r\n\r\n{\"capacity\": 9",
  };
  for (const std::string& bytes : partial) {
    RawConnection conn(server().port());
    ASSERT_TRUE(conn.connected());
    ASSERT_TRUE(conn.Send(bytes));
    conn.ShutdownWrite();  // end of stream in the middle of a request
    std::string answer;
    EXPECT_TRUE(conn.ReadUntilClosed(answer, std::chrono::seconds(5)))
        << "the server keeps a half-closed connection open after: " << bytes;
    EXPECT_TRUE(RejectedOrClosed(answer)) << bytes;
  }
  // Many connections opened and dropped at once, some mid-request.
  for (int i = 0; i < 200; ++i) {
    RawConnection conn(server().port());
    ASSERT_TRUE(conn.connected()) << i;
    if (i % 2 == 0) conn.Send("POST /v1/rooms/r/check HTTP/1.1\r\nContent-Length: 100\r\n\r\n{");
  }
  ASSERT_TRUE(server().Alive());
  EXPECT_EQ(client().Health().status, 200);
  EXPECT_EQ(Snapshot("r"), before);
}

TEST_F(RobustnessTest, PipelinedRequestsAreAnsweredInOrder) {
  MustPut("r", {{"capacity", 1}});
  RawConnection conn(server().port());
  ASSERT_TRUE(conn.connected());
  std::string batch = RawRequest("POST", "/v1/rooms/r/check", R"({"session":"a"})") +
                      RawRequest("POST", "/v1/rooms/r/check", R"({"session":"b"})") +
                      RawRequest("GET", "/v1/rooms/r") + RawRequest("GET", "/nope") +
                      RawRequest("GET", "/healthz");
  ASSERT_TRUE(conn.Send(batch));
  std::vector<std::string> answers;
  for (int i = 0; i < 5; ++i) answers.push_back(conn.ReadResponse(std::chrono::seconds(5)));
  ASSERT_EQ(RawStatus(answers[0]), 200) << answers[0];
  EXPECT_NE(RawBody(answers[0]).find("\"active\""), std::string::npos);
  EXPECT_NE(RawBody(answers[0]).find("\"session\":\"a\""), std::string::npos) << answers[0];
  EXPECT_NE(RawBody(answers[1]).find("\"session\":\"b\""), std::string::npos) << answers[1];
  EXPECT_NE(RawBody(answers[1]).find("\"waiting\""), std::string::npos) << answers[1];
  EXPECT_EQ(RawStatus(answers[2]), 200) << answers[2];
  EXPECT_EQ(RawStatus(answers[3]), 404) << answers[3];
  EXPECT_EQ(RawStatus(answers[4]), 200) << answers[4];

  // The connection stays open for more (keep-alive).
  ASSERT_TRUE(conn.Send(RawRequest("GET", "/healthz")));
  EXPECT_EQ(RawStatus(conn.ReadResponse()), 200);
  // An error answer does not end a keep-alive connection either.
  ASSERT_TRUE(conn.Send(RawRequest("POST", "/v1/rooms/r/check", "{")));
  EXPECT_EQ(RawStatus(conn.ReadResponse()), 400);
  ASSERT_TRUE(conn.Send(RawRequest("GET", "/healthz")));
  EXPECT_EQ(RawStatus(conn.ReadResponse()), 200);
}

TEST_F(RobustnessTest, ConnectionCloseAndHttp10AreHonoured) {
  std::string answer =
      RawExchange(server().port(), RawRequest("GET", "/healthz", "", {"Connection: close"}));
  EXPECT_EQ(RawStatus(answer), 200) << answer;
  answer = RawExchange(server().port(), "GET /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(RawStatus(answer), 200) << answer;
  EXPECT_NE(RawBody(answer).find("ok"), std::string::npos);
}

TEST_F(RobustnessTest, ExpectContinueIsAnswered) {
  RawConnection conn(server().port());
  ASSERT_TRUE(conn.connected());
  std::string body = R"({"capacity": 2})";
  ASSERT_TRUE(
      conn.Send("PUT /v1/rooms/cont HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                "Content-Type: application/json\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n"));
  std::string interim = conn.ReadResponse(std::chrono::seconds(5));
  EXPECT_EQ(RawStatus(interim), 100) << interim;
  ASSERT_TRUE(conn.Send(body));
  std::string final_answer = conn.ReadResponse(std::chrono::seconds(5));
  EXPECT_EQ(RawStatus(final_answer), 200) << final_answer;
  EXPECT_EQ(client().GetRoom("cont").status, 200);
}

TEST(ServerProcessTest, StopsCleanlyOnSigterm) {
  ServerProcess server({}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server.started()) << server.error();
  Client client(server.url());
  ASSERT_EQ(client.Health().status, 200);
  int status = server.Stop(std::chrono::seconds(5));
  ASSERT_TRUE(WIFEXITED(status)) << "killed, not exited: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(server.Alive());
  HttpResult after = Client(server.url()).Health();
  EXPECT_EQ(after.status, 0) << "nobody answers after the stop";
}

// Regression: parked long polls used to outlive the I/O threads' contexts at shutdown and
// crash the server (SIGSEGV) when their wait ended after the contexts were gone.
TEST(ServerProcessTest, StopsCleanlyWithLongPollsParked) {
  ServerProcess server({"--threads", "2"}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server.started()) << server.error();
  std::vector<std::thread> pollers;
  for (int i = 0; i < 8; ++i) {
    pollers.emplace_back([&server, i] {
      Client client(server.url());
      // Short waits, so some end during the stop and some are still parked.
      client.Fetch("parked", "w" + std::to_string(i), 1, 30'000, 100 + 40 * i);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  int status = server.Stop(std::chrono::seconds(5));
  for (auto& t : pollers) t.join();
  ASSERT_TRUE(WIFEXITED(status)) << "killed, not exited: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ServerProcessTest, StdoutIsOnlyTheListeningLine) {
  ServerProcess server({"--demo-room", "demo:3"}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server.started()) << server.error();
  HttpResult room = Client(server.url()).GetRoom("demo");
  ASSERT_EQ(room.status, 200) << room.body;
  EXPECT_EQ(IntField(room.json, "capacity"), 3);
  int status = server.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(server.Output(), "anteroom listening on " + server.url() + "\n")
      << "logs belong on stderr; stderr was:\n"
      << server.Errors();
}

TEST(ServerProcessTest, AMissingTokenSecretIsLoggedAndARandomOneUsed) {
  // No ANTEROOM_TOKEN_SECRET and no data directory to keep one in.
  ServerProcess a({"--memory-only"});
  ServerProcess b({"--memory-only"});
  ASSERT_TRUE(a.started()) << a.error();
  ASSERT_TRUE(b.started()) << b.error();
  EXPECT_TRUE(WaitFor([&] { return a.Errors().find("ANTEROOM_TOKEN_SECRET") != std::string::npos; },
                      std::chrono::seconds(5)))
      << "no warning on stderr: " << a.Errors();
  // Each process made up its own secret: b does not accept a's tokens.
  Client ca(a.url());
  Client cb(b.url());
  ASSERT_EQ(ca.PutRoom("r", {{"capacity", 1}}).status, 200);
  ASSERT_EQ(cb.PutRoom("r", {{"capacity", 1}}).status, 200);
  HttpResult s = ca.Check("r", "s");
  ASSERT_TRUE(IsSession(s, "active"));
  std::string token = *StrField(s.json, "token");
  EXPECT_EQ(BoolField(ca.VerifyToken(token).json, "valid"), true);
  HttpResult v = cb.VerifyToken(token);
  EXPECT_EQ(BoolField(v.json, "valid"), false) << v.body;
}

TEST(ServerProcessTest, TwoServersGetDifferentPorts) {
  ServerProcess a;
  ServerProcess b;
  ASSERT_TRUE(a.started()) << a.error();
  ASSERT_TRUE(b.started()) << b.error();
  EXPECT_NE(a.port(), b.port());
  EXPECT_EQ(Client(a.url()).Health().status, 200);
  EXPECT_EQ(Client(b.url()).Health().status, 200);
}

TEST(ServerProcessTest, BadServeArgumentsFailFast) {
  ServerProcess bad({"--token-ttl-ms", "5"}, {}, std::chrono::seconds(10));
  EXPECT_FALSE(bad.started());
  EXPECT_FALSE(bad.Alive());
  CliResult r = RunCli({"serve", "--listen", "127.0.0.1:notaport"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  r = RunCli({"serve", "--listen", "127.0.0.1:0", "--demo-room", "bad name:3"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
}  // namespace anteroom::testing
