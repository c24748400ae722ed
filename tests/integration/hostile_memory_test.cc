// Hostile clients, memory family: 40 connections each sending all but the
// last byte of a 16 MiB push held ~640 MB, and a head or body could take 120 s. Unfinished
// bodies are now held against a server-wide budget (--max-buffered-mb: beyond it 503 +
// Retry-After, the senders stalled longest cut first), and heads and bodies have timeouts of
// their own (408). Against the real server; a well-behaved client is answered throughout.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/hostile.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

std::string PushHead(size_t length) {
  return "POST /v1/queues/big/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(length) + "\r\n\r\n";
}

// A push body of exactly `length` bytes: {"payload":"xxx..."}.
std::string PushBody(size_t length) {
  std::string body = R"({"payload":")";
  body += std::string(length - body.size() - 2, 'x');
  return body + "\"}";
}

// Room checks: small bodies, never held against the budget.
GoodClient CheckingClient(const std::string& url) {
  auto c = std::make_shared<Client>(url);
  return GoodClient([c] {
    HttpResult r = c->Check("room", "good-session");
    if (r.status != 200) return "check: " + std::to_string(r.status) + " " + r.error;
    return std::string();
  });
}

TEST(HostileMemoryTest, PartialBodiesAreHeldToTheBudgetAndTheStalledAreCutFirst) {
  ServerProcess server({"--memory-only", "--body-stall-ms", "3000"});
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  ASSERT_EQ(c.PutRoom("room", {{"capacity", 10}}).status, 200);
  size_t rss_before = RssKiB(server.pid());
  GoodClient good = CheckingClient(server.url());

  // The attack: 40 pushes of 16 MiB, each sent but for its last byte, then silence.
  constexpr size_t kBody = 16 << 20;
  const std::string body = PushBody(kBody);
  std::vector<std::unique_ptr<RawConnection>> attackers;
  size_t refused = 0;
  for (int i = 0; i < 40; ++i) {
    auto conn = std::make_unique<RawConnection>(server.port());
    ASSERT_TRUE(conn->connected());
    conn->Send(PushHead(kBody));
    conn->Send(std::string_view(body).substr(0, kBody - 1));
    attackers.push_back(std::move(conn));
  }
  std::this_thread::sleep_for(milliseconds(300));
  size_t rss_attack = RssKiB(server.pid());
  size_t cut = 0;  // closed without an answer: a stalled body cut to make room for a newer one
  for (auto& conn : attackers) {
    std::string answer = conn->ReadResponse(milliseconds(50));
    if (RawStatus(answer) == 503) {
      ++refused;
      EXPECT_EQ(RawHeader(answer, "Retry-After"), "1");
    } else if (std::string rest; answer.empty() && conn->ReadUntilClosed(rest, milliseconds(50))) {
      ++cut;
    }
  }
  // 256 MiB of budget: 16 bodies held at most, the rest refused; when sending the attack took
  // over a second (a busy machine), early stalled ones were cut to make room for later ones
  // instead, and fewer were refused: the budget holds either way.
  EXPECT_GE(refused + cut, 24u) << refused << " refused, " << cut << " cut";
  if (!kSanitized) {
    EXPECT_LT(rss_attack, rss_before + 300 * 1024)
        << "RSS " << rss_before << " -> " << rss_attack << " KiB with 40 stalled 16 MiB bodies";
  }

  // A real producer's big push: refused while the budget is full, and the senders stalled
  // longest (over a second here) are cut for it, so its retry goes through.
  std::this_thread::sleep_for(milliseconds(1100));
  Client producer(server.url());
  std::string real = R"({"jobs":[)";
  for (int i = 0; i < 8; ++i) {
    real += std::string(i ? "," : "") + R"({"payload":")" + std::string(1000 * 1000, 'r') + "\"}";
  }
  real += "]}";
  auto asked = SteadyClock::now();
  HttpResult r = producer.Request("POST", "/v1/queues/big/jobs", real);
  int tries = 1;
  while (r.status == 503 && tries < 10) {
    std::this_thread::sleep_for(seconds(1));  // its Retry-After
    r = producer.Request("POST", "/v1/queues/big/jobs", real);
    ++tries;
  }
  EXPECT_EQ(r.status, 201) << r.body << r.error;
  EXPECT_LE(tries, 3) << "the stalled senders were not cut for it";
  double pushed_after_s = std::chrono::duration<double>(SteadyClock::now() - asked).count();

  // The stalled bodies end at --body-stall-ms with 408, and their memory goes back.
  std::this_thread::sleep_for(seconds(4));
  size_t timed_out = 0;
  for (auto& conn : attackers) {
    std::string answer = conn->ReadResponse(milliseconds(50));
    if (RawStatus(answer) == 408) ++timed_out;
  }
  size_t rss_end = RssKiB(server.pid());
  ProbeStats stats = good.Stop();
  EXPECT_GT(timed_out, 0u) << "no stalled body was answered 408";
  // What stays: the real push's 8 MB of jobs, and what the allocator keeps.
  if (!kSanitized) {
    EXPECT_LT(rss_end, rss_before + 128 * 1024) << "RSS after the attack: " << rss_end << " KiB";
  }
  EXPECT_EQ(stats.failed, 0u) << stats.first_failure;
  EXPECT_LT(stats.p99_ms, 100) << "the good client's p99 during the attack";
  std::printf(
      "[ note     ] 40 x 16 MiB stalled bodies: %zu refused (503), %zu cut; RSS %zu -> %zu KiB "
      "(after: "
      "%zu KiB); a real 8 MiB push went through after %d tries (%.1f s); good client p50 %.2f "
      "ms p99 %.2f ms max %.2f ms over %zu checks\n",
      refused, cut, rss_before, rss_attack, rss_end, tries, pushed_after_s, stats.p50_ms,
      stats.p99_ms, stats.max_ms, stats.answered);
}

TEST(HostileMemoryTest, SlowHeadsAndBodiesTimeOut) {
  ServerProcess server({"--memory-only", "--head-timeout-ms", "1000", "--body-stall-ms", "1000",
                        "--min-body-rate", "1000"});
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  ASSERT_EQ(c.PutRoom("room", {{"capacity", 10}}).status, 200);
  GoodClient good = CheckingClient(server.url());

  // Slowloris: 200 heads sent a few bytes at a time, never finished.
  std::vector<std::unique_ptr<RawConnection>> heads;
  for (int i = 0; i < 200; ++i) {
    heads.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(heads.back()->connected());
    heads.back()->Send("GET /healthz HTTP/1.1\r\n");
  }
  // A connection that never says anything.
  RawConnection silent(server.port());
  // A body trickling at ~100 bytes/s (the floor is 1000).
  RawConnection trickle(server.port());
  ASSERT_TRUE(trickle.Send(PushHead(100'000)));
  auto started = SteadyClock::now();
  bool trickle_cut = false;
  for (int step = 0; step < 40; ++step) {  // 4 s at most
    for (auto& h : heads) h->Send("X: y\r\n");
    if (!trickle_cut && !trickle.Send(std::string(10, 'x'))) trickle_cut = true;
    std::this_thread::sleep_for(milliseconds(100));
  }
  size_t timed_out = 0;
  for (auto& h : heads) {
    std::string answer = h->ReadResponse(milliseconds(100));
    if (RawStatus(answer) == 408) {
      ++timed_out;
    } else {
      ADD_FAILURE() << "not 408: [" << answer.substr(0, 300) << "]";
    }
  }
  EXPECT_EQ(timed_out, heads.size()) << "heads not cut by the 1 s head timeout";
  std::string silent_data;
  EXPECT_TRUE(silent.ReadUntilClosed(silent_data, milliseconds(500)))
      << "a connection that sent nothing is closed after the head timeout";
  std::string trickled = trickle.ReadResponse(milliseconds(500));
  EXPECT_EQ(RawStatus(trickled), 408) << trickled.substr(0, 200);
  ProbeStats stats = good.Stop();
  EXPECT_EQ(stats.failed, 0u) << stats.first_failure;
  EXPECT_LT(stats.p99_ms, 100) << "the good client's p99 during the attack";
  std::printf(
      "[ note     ] slowloris: %zu of %zu heads answered 408 within %.1f s; good client "
      "p99 %.2f ms\n",
      timed_out, heads.size(), std::chrono::duration<double>(SteadyClock::now() - started).count(),
      stats.p99_ms);
}

}  // namespace
}  // namespace anteroom::testing
