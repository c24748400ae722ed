// Hostile clients, protocol family: early answers a client still
// sending can read, trailers that crashed the process, heads the server must refuse, framing
// that could smuggle a request, and routes that must answer rather than hang up. Against the real
// server; a well-behaved client is answered throughout.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/hostile.h"
#include "support/server_fixture.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A client that writes its whole request before reading anything, with blocking sends, as
// most simple HTTP clients do. Answers what the server said, or "" with `error` set when the
// request could not even be sent (the server reset the connection under it).
std::string NaiveExchange(uint16_t port, const std::string& request, std::string& error) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    error = std::string("connect: ") + std::strerror(errno);
    close(fd);
    return {};
  }
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      error = "send after " + std::to_string(sent) + " bytes: " + std::strerror(errno);
      break;
    }
    sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[8192];
  while (true) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (n < 0 && answer.empty()) error += std::string(" recv: ") + std::strerror(errno);
      break;
    }
    answer.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return answer;
}

std::string HealthProbe(Client& c) {
  HttpResult r = c.Health();
  if (r.status != 200) return "healthz: " + std::to_string(r.status) + " " + r.error;
  return {};
}

class HostileProtocolTest : public ServerTest {};

// Early answers: the server answers 413 (or 400) and stops reading while the client is still
// sending the body. It must drain what follows (nginx's lingering close), or the kernel resets
// the connection and the client never reads the answer.
TEST_F(HostileProtocolTest, EarlyAnswersReachAClientStillSendingItsBody) {
  const std::string big(4 << 20, ' ');
  struct Case {
    std::string name;
    std::string request;
    int status;
  };
  std::vector<Case> cases = {
      {"Content-Length over the route's limit",
       "POST /v1/rooms/r/check HTTP/1.1\r\nHost: x\r\nContent-Length: " +
           std::to_string(big.size()) + "\r\n\r\n" + big,
       413},
      {"a chunked body that grows over the limit",
       "POST /v1/rooms/r/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
           [&] {
             std::string chunks;
             for (int i = 0; i < 64; ++i)
               chunks += "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
             return chunks + "0\r\n\r\n";
           }(),
       413},
      {"a Transfer-Encoding that does not end in chunked",
       "POST /v1/queues/q/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n" + big, 400},
      {"no Host",
       "POST /v1/queues/q/jobs HTTP/1.1\r\nContent-Length: " + std::to_string(big.size()) +
           "\r\n\r\n" + big,
       400},
  };
  GoodClient good([c = std::make_shared<Client>(server().url())] { return HealthProbe(*c); });
  for (const Case& c : cases) {
    for (int round = 0; round < 5; ++round) {
      std::string error;
      std::string answer = NaiveExchange(server().port(), c.request, error);
      ASSERT_EQ(RawStatus(answer), c.status)
          << c.name << ", round " << round << ": " << error << "\n"
          << answer.substr(0, 300);
      EXPECT_EQ(RawHeader(answer, "Connection"), "close") << c.name;
    }
  }
  // The public client reads an answer that comes while it is still writing, too.
  for (int round = 0; round < 5; ++round) {
    HttpResult r = client().Request("POST", "/v1/rooms/r/check", big);
    EXPECT_TRUE(IsError(r, 413, "payload_too_large")) << r.status << " " << r.error;
  }
  ProbeStats stats = good.Stop();
  EXPECT_EQ(stats.failed, 0u) << stats.first_failure;
  EXPECT_LT(stats.p99_ms, 100) << "the good client's p99 during the attack";
}

// Trailers: a trailer field of 64 KiB made Beast throw from inside the I/O loop, and nothing
// caught it: the process aborted. Trailers are now refused, and bounded before that.
TEST_F(HostileProtocolTest, TrailersCannotCrashOrGrowTheServer) {
  const std::string head =
      "POST /v1/rooms/r/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "2\r\n{}\r\n0\r\n";
  for (size_t size : {size_t{100}, size_t{40'000}, size_t{70'000}, size_t{300'000}}) {
    std::string error;
    std::string answer = NaiveExchange(
        server().port(), head + "X-Big: " + std::string(size, 'a') + "\r\n\r\n", error);
    int status = RawStatus(answer);
    EXPECT_TRUE(status == 400 || status == 431)
        << "a trailer field of " << size << " bytes: " << status << " " << error;
    ASSERT_TRUE(server().Alive()) << "a trailer of " << size << " bytes killed the server\n"
                                  << server().Errors();
  }
  // A small trailer would be merged into the head after the checks: refused too.
  std::string error;
  std::string answer =
      NaiveExchange(server().port(), head + "Authorization: Bearer smuggled\r\n\r\n", error);
  EXPECT_EQ(RawStatus(answer), 400) << answer;
  EXPECT_NE(RawBody(answer).find("trailer"), std::string::npos) << answer;

  // A trailer that never ends: the read buffer's bound stops it, not the machine's memory.
  size_t rss_before = RssKiB(server().pid());
  RawConnection conn(server().port());
  ASSERT_TRUE(conn.connected());
  conn.Send(head + "X-Endless: ");
  std::string chunk(64 * 1024, 'a');
  for (int i = 0; i < 64 && conn.Send(chunk); ++i) {
  }
  std::string response = conn.ReadResponse(seconds(5));
  EXPECT_EQ(RawStatus(response), 431) << response.substr(0, 200);
  size_t rss_after = RssKiB(server().pid());
  if (!kSanitized) {
    EXPECT_LT(rss_after, rss_before + 32 * 1024)
        << "RSS grew from " << rss_before << " KiB to " << rss_after << " KiB";
  }
  EXPECT_EQ(client().Health().status, 200);
}

// Heads: what RFC 9112 requires a server to refuse.
TEST_F(HostileProtocolTest, HeadsTheRfcSaysToRefuseAreRefused) {
  auto status_of = [&](const std::string& request) {
    return RawStatus(RawExchange(server().port(), request));
  };
  EXPECT_EQ(status_of("GET /healthz HTTP/1.1\r\n\r\n"), 400) << "no Host on HTTP/1.1";
  EXPECT_EQ(status_of("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400) << "two Hosts";
  EXPECT_EQ(status_of("GET /healthz HTTP/1.0\r\n\r\n"), 200) << "HTTP/1.0 needs no Host";
  EXPECT_EQ(status_of("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n"), 400)
      << "obs-fold";
  EXPECT_EQ(status_of("GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n"), 400)
      << "obs-fold with a tab";
  EXPECT_EQ(status_of("GET /healthz HTTP/1.1\r\n Host: x\r\n\r\n"), 400)
      << "whitespace before the first field";
  std::string answer = RawExchange(server().port(), "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " +
                                                        std::string(20 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(RawStatus(answer), 431) << answer.substr(0, 200);
  EXPECT_NE(RawBody(answer).find("header_too_large"), std::string::npos) << answer;
  // A head that never ends gets 431 too, once it passes the limit.
  answer = RawExchange(server().port(),
                       "GET /healthz HTTP/1.1\r\nHost: x\r\n" + std::string(20 * 1024, 'a'));
  EXPECT_EQ(RawStatus(answer), 431) << answer.substr(0, 200);
}

// Request smuggling (RFC 9112 6.1, 6.3, 2.2): a head or a body whose framing two parsers could
// read differently (a proxy in front, and this server) is refused 400 and the connection closed,
// so no byte after it is ever read as a request. Each case is followed on its connection by a
// request that would create a room: it must never run.
TEST_F(HostileProtocolTest, AmbiguousFramingIsRefusedAndNothingAfterItIsRead) {
  const std::string body = R"({"session":"0123456789abcdef0123456789abcdef"})";
  const std::string size = [&] {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%zx", body.size());
    return std::string(hex);
  }();
  const std::string post =
      "POST /v1/rooms/r/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
  const std::string length = "Content-Length: " + std::to_string(body.size()) + "\r\n";
  const std::string chunks = size + "\r\n" + body + "\r\n0\r\n\r\n";
  auto te = [&](const std::string& fields) { return post + fields + "\r\n" + chunks; };
  const std::string smuggled = RawRequest("PUT", "/v1/rooms/smuggled", R"({"capacity":1})");
  struct Case {
    std::string name;
    std::string request;
  };
  const std::vector<Case> cases = {
      {"Content-Length, then Transfer-Encoding", te(length + "Transfer-Encoding: chunked\r\n")},
      {"Transfer-Encoding, then Content-Length", te("Transfer-Encoding: chunked\r\n" + length)},
      {"Transfer-Encoding: chunked, identity", te("Transfer-Encoding: chunked, identity\r\n")},
      {"Transfer-Encoding: xchunked", te("Transfer-Encoding: xchunked\r\n")},
      {"Transfer-Encoding: chunked, chunked", te("Transfer-Encoding: chunked, chunked\r\n")},
      {"Transfer-Encoding: \"chunked\"", te("Transfer-Encoding: \"chunked\"\r\n")},
      {"Transfer-Encoding twice",
       te("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n")},
      {"Transfer-Encoding: chunked, then gzip",
       te("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n")},
      {"a space before the colon", te("Transfer-Encoding : chunked\r\n")},
      {"a vertical tab before chunked", te("Transfer-Encoding:\x0b"
                                           "chunked\r\n")},
      {"a bare LF hiding Transfer-Encoding in a field",
       te("X-Pad: a\nTransfer-Encoding: chunked\r\n")},
      {"a head ended by bare LFs", "POST /v1/rooms/r/check HTTP/1.1\nHost: x\nContent-Length: " +
                                       std::to_string(body.size()) + "\n\n" + body},
      {"a bare LF after the chunk size",
       post + "Transfer-Encoding: chunked\r\n\r\n" + size + "\n" + body + "\r\n0\r\n\r\n"},
      {"a bare LF after the chunk data",
       post + "Transfer-Encoding: chunked\r\n\r\n" + size + "\r\n" + body + "\n0\r\n\r\n"},
      {"a last chunk ended by bare LFs",
       post + "Transfer-Encoding: chunked\r\n\r\n" + size + "\r\n" + body + "\r\n0\n\n"},
      {"a last chunk of size 0x0",
       post + "Transfer-Encoding: chunked\r\n\r\n" + size + "\r\n" + body + "\r\n0x0\r\n\r\n"},
      {"a chunk size 0x..",
       post + "Transfer-Encoding: chunked\r\n\r\n0x" + size + "\r\n" + body + "\r\n0\r\n\r\n"},
      {"a chunk size +..",
       post + "Transfer-Encoding: chunked\r\n\r\n+" + size + "\r\n" + body + "\r\n0\r\n\r\n"},
      {"a chunk size with a space",
       post + "Transfer-Encoding: chunked\r\n\r\n" + size + " \r\n" + body + "\r\n0\r\n\r\n"},
  };
  // The control: well framed, the request after it is read and answered (on its own room).
  {
    RawConnection conn(server().port());
    ASSERT_TRUE(conn.Send(te("Transfer-Encoding: chunked\r\n") +
                          RawRequest("PUT", "/v1/rooms/control", R"({"capacity":1})")));
    EXPECT_EQ(RawStatus(conn.ReadResponse()), 404) << "no room r";
    EXPECT_EQ(RawStatus(conn.ReadResponse()), 200) << "the next request";
  }
  for (const Case& c : cases) {
    RawConnection conn(server().port());
    ASSERT_TRUE(conn.connected());
    conn.Send(c.request + smuggled);
    std::string answer;
    EXPECT_TRUE(conn.ReadUntilClosed(answer, seconds(5))) << c.name << ": not closed";
    EXPECT_EQ(RawStatus(answer), 400) << c.name << ":\n" << answer.substr(0, 300);
    EXPECT_EQ(RawHeader(answer, "Connection"), "close") << c.name;
    size_t answers = 0;
    for (size_t at = answer.find("HTTP/1.1 "); at != std::string::npos;
         at = answer.find("HTTP/1.1 ", at + 1)) {
      ++answers;
    }
    EXPECT_EQ(answers, 1u) << c.name << ":\n" << answer;
  }
  EXPECT_TRUE(IsError(client().GetRoom("smuggled"), 404, "unknown_room"))
      << "a request after a refused one ran";
  EXPECT_EQ(client().GetRoom("control").status, 200);

  // Bare LFs alone never end a head (only CRLF does): such a head is not read as a request, and
  // is refused at once (400), not left to the head timeout (30 s here).
  ServerProcess slow({"--head-timeout-ms", "30000"}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(slow.started()) << slow.error();
  RawConnection conn(slow.port());
  ASSERT_TRUE(conn.Send("PUT /v1/rooms/smuggled HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}"));
  std::string answer;
  EXPECT_TRUE(conn.ReadUntilClosed(answer, seconds(5)));
  EXPECT_EQ(RawStatus(answer), 400) << answer;
  EXPECT_NE(answer.find("bare LF"), std::string::npos) << answer;
  EXPECT_EQ(Client(slow.url()).GetRoom("smuggled").status, 404);
}

// Routes that must answer: a GET whose last segment is a stream route's (ws, events) on a route
// that is not one closed the connection instead of answering.
TEST_F(HostileProtocolTest, StreamLikeTargetsOnOtherRoutesAreAnsweredAndKeepTheConnection) {
  RawConnection conn(server().port());
  ASSERT_TRUE(conn.connected());
  for (const char* target :
       {"/v1/queues/q/ws", "/v1/queues/q/events", "/ws", "/v1/rooms/ws", "/v1/rooms/r/x/ws"}) {
    ASSERT_TRUE(conn.Send(RawRequest("GET", target)));
    std::string answer = conn.ReadResponse();
    EXPECT_EQ(RawStatus(answer), 404) << target << ": " << answer.substr(0, 200);
  }
  ASSERT_TRUE(conn.Send(RawRequest("GET", "/healthz")));
  EXPECT_EQ(RawStatus(conn.ReadResponse()), 200) << "the connection stays usable";
}

TEST_F(HostileProtocolTest, HealthAndReadinessWhenAllIsWell) {
  HttpResult health = client().Health();
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(StrField(health.json, "status"), "ok") << health.body;
  HttpResult ready = client().Request("GET", "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(StrField(ready.json, "status"), "ready") << ready.body;
}

}  // namespace
}  // namespace anteroom::testing
