// Hostile clients, line-flooding family: one client tries to make thousands
// of places fast; an IPv6 client tries it from thousands of /64s. Against the real server, on
// the embedded backend and on Redis (two processes sharing it: the limits hold across them).
// Each simulated client has its own address through X-Forwarded-For (the servers trust
// 127.0.0.1 as their proxy). Throughout, a well-behaved client joins and checks in and must be
// answered within 100 ms; RSS is read from /proc. On main before this work, every one of the
// 5,000 joins was a place.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/client_as.h"
#include "support/hostile.h"
#include "support/redis_process.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

constexpr int kFloodJoins = 5'000;
constexpr int kJoinsPerMinute = 60;
constexpr int kPlacesPerClient = 5;
const char kAttacker[] = "203.0.113.66";
const char kRoom[] = "launch";

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// A well-behaved client on its own address: joins, then checks in; once a second it joins
// with a new session and then gives the old place up (1 join a second, within any sane
// per-client limit; it always holds a place, so the room keeps knowing it).
std::function<std::string()> GoodVisitor(uint16_t port) {
  auto state = std::make_shared<std::pair<ClientAs, int>>(ClientAs(port, "198.51.100.10"), 0);
  return [state] {
    auto& [client, calls] = *state;
    int n = calls++;
    AnswerAs a = client.Check(kRoom, "good-" + std::to_string(n / 100));
    if (a.status != 200) return "check: " + std::to_string(a.status) + " " + a.body;
    if (n % 100 == 0 && n > 0) {
      std::string old = "good-" + std::to_string(n / 100 - 1);
      AnswerAs left = client.Request("POST", std::string("/v1/rooms/") + kRoom + "/leave",
                                     "{\"session\":\"" + old + "\",\"final\":true}");
      if (left.status != 200) return "leave: " + std::to_string(left.status) + " " + left.body;
    }
    return std::string();
  };
}

struct FloodResult {
  int accepted = 0;
  int refused = 0;  // 429 with a Retry-After of at least 1 s
  int wrong = 0;    // anything else
  std::string first_wrong;
  std::vector<std::string> held;  // sessions that got a place
  double seconds = 0;
};

// `joins` joins of fresh sessions by one client, spread over `threads` connections (to
// `ports`, round robin: several processes sharing one Redis).
FloodResult Flood(const std::vector<uint16_t>& ports, const std::string& address,
                  const std::string& prefix, int joins, int threads) {
  FloodResult out;
  std::mutex mu;
  std::atomic<int> next{0};
  auto start = SteadyClock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      ClientAs c(ports[static_cast<size_t>(t) % ports.size()], address);
      for (int i = next++; i < joins; i = next++) {
        std::string session = prefix + std::to_string(i);
        AnswerAs a = c.Check(kRoom, session);
        std::lock_guard lock(mu);
        if (a.status == 200) {
          ++out.accepted;
          out.held.push_back(session);
        } else if (a.status == 429 && a.retry_after && std::stoi(*a.retry_after) >= 1) {
          ++out.refused;
        } else if (out.wrong++ == 0) {
          out.first_wrong = a.raw.substr(0, 300);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  out.seconds = SecondsSince(start);
  return out;
}

// Churn: join a fresh session and give it up at once, for `duration`, so places never bind
// and only the bucket does. Answers the joins that got a place.
FloodResult Churn(const std::vector<uint16_t>& ports, const std::string& address,
                  milliseconds duration) {
  FloodResult out;
  ClientAs c(ports[0], address);
  ClientAs other(ports.back(), address);
  auto start = SteadyClock::now();
  for (int i = 0; SteadyClock::now() - start < duration; ++i) {
    ClientAs& via = i % 2 == 0 ? c : other;
    std::string session = "churn-" + std::to_string(i);
    AnswerAs a = via.Check(kRoom, session);
    if (a.status == 200) {
      ++out.accepted;
      via.Request("POST", std::string("/v1/rooms/") + kRoom + "/leave",
                  "{\"session\":\"" + session + "\",\"final\":true}");
    } else if (a.status == 429 && a.retry_after) {
      ++out.refused;
    } else if (out.wrong++ == 0) {
      out.first_wrong = a.raw.substr(0, 300);
    }
  }
  out.seconds = SecondsSince(start);
  return out;
}

void PutRoom(uint16_t port) {
  ClientAs admin(port, "");
  AnswerAs put = admin.Request("PUT", std::string("/v1/rooms/") + kRoom,
                               R"({"capacity": 100000, "checkin_timeout_ms": 120000,)"
                               R"( "joins_per_minute_per_client": 60, "places_per_client": 5})");
  ASSERT_EQ(put.status, 200) << put.raw;
}

// The one-client flood, then the churn, on any set of processes (all sharing one state).
void OneClientFloods(std::vector<ServerProcess*> servers, const char* backend) {
  std::vector<uint16_t> ports;
  for (ServerProcess* s : servers) ports.push_back(s->port());
  ASSERT_NO_FATAL_FAILURE(PutRoom(ports[0]));
  size_t rss_before = RssKiB(servers[0]->pid());
  GoodClient good(GoodVisitor(ports.back()));

  // 5,000 places asked for as fast as 4 connections go: the places limit binds first.
  FloodResult flood = Flood(ports, kAttacker, "bot-", kFloodJoins, 4);
  EXPECT_EQ(flood.wrong, 0) << flood.first_wrong;
  EXPECT_EQ(flood.accepted, kPlacesPerClient) << "places held by one client";
  EXPECT_EQ(flood.accepted + flood.refused, kFloodJoins);
  EXPECT_LT(flood.seconds, 60) << "the flood is bounded in time";
  // The places it got are real and still held; none beyond them.
  ClientAs attacker(ports[0], kAttacker);
  for (const std::string& s : flood.held) {
    EXPECT_EQ(attacker.Check(kRoom, s).status, 200) << s;
  }
  // It gives them up and churns: now only the bucket binds (60 a minute, 5 of them spent).
  for (const std::string& s : flood.held) {
    attacker.Request("POST", std::string("/v1/rooms/") + kRoom + "/leave",
                     "{\"session\":\"" + s + "\",\"final\":true}");
  }
  auto churn_start = SteadyClock::now();
  FloodResult churn = Churn(ports, kAttacker, milliseconds(3'000));
  double minutes = (flood.seconds + SecondsSince(churn_start)) / 60.0;
  EXPECT_EQ(churn.wrong, 0) << churn.first_wrong;
  EXPECT_LE(flood.accepted + churn.accepted,
            kJoinsPerMinute + static_cast<int>(kJoinsPerMinute * minutes) + 1)
      << "joins beyond the bucket's worth";
  EXPECT_GE(churn.accepted, kJoinsPerMinute - kPlacesPerClient - 1);
  EXPECT_GT(churn.refused, 0);

  ProbeStats stats = good.Stop();
  size_t rss_after = RssKiB(servers[0]->pid());
  std::printf(
      "[ note     ] %s: flood of %d joins in %.2f s: %d places, %d refused (429); churn %d joins "
      "in %.2f s, "
      "%d refused; good client %zu answers, p50 %.2f ms, p99 %.2f ms, max %.2f ms; RSS %zu -> "
      "%zu KiB\n",
      backend, kFloodJoins, flood.seconds, flood.accepted, flood.refused, churn.accepted,
      churn.seconds, churn.refused, stats.answered, stats.p50_ms, stats.p99_ms, stats.max_ms,
      rss_before, rss_after);
  EXPECT_EQ(stats.failed, 0u) << stats.first_failure;
  EXPECT_GT(stats.answered, 50u);
  EXPECT_LT(stats.p99_ms, 100) << "the good client's p99 during the attack";
  if (!kSanitized) {  // ASan's quarantine and shadow memory make RSS say little
    EXPECT_LT(rss_after, rss_before + 64 * 1024) << "RSS grew by more than 64 MiB";
  }
}

// Many /64s, each a client of its own: the per-room client table is capped, so memory is
// bounded however many prefixes the attacker has. Clients the room already knows (the good
// one) go on being served.
void Ipv6ClientsFlood(ServerProcess& server, size_t table, const char* backend) {
  uint16_t port = server.port();
  ASSERT_NO_FATAL_FAILURE(PutRoom(port));
  GoodClient good(GoodVisitor(port));
  std::this_thread::sleep_for(milliseconds(50));  // the good client is known before the flood
  size_t rss_before = RssKiB(server.pid());
  constexpr int kPrefixes = 12'000;
  FloodResult out;
  std::mutex mu;
  std::atomic<int> next{0};
  auto start = SteadyClock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&] {
      ClientAs c(port, "");
      for (int i = next++; i < kPrefixes; i = next++) {
        char address[64];
        std::snprintf(address, sizeof address, "2001:db8:%x:%x::1", i / 65536, i % 65536);
        c.set_address(address);
        AnswerAs a = c.Check(kRoom, "v6-" + std::to_string(i));
        std::lock_guard lock(mu);
        if (a.status == 200) {
          ++out.accepted;
        } else if (a.status == 429 && a.retry_after) {
          ++out.refused;
        } else if (out.wrong++ == 0) {
          out.first_wrong = a.raw.substr(0, 300);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  out.seconds = SecondsSince(start);
  ProbeStats stats = good.Stop();
  size_t rss_after = RssKiB(server.pid());
  std::printf(
      "[ note     ] %s: %d IPv6 /64s in %.2f s: %d places, %d refused (client table of %zu full); "
      "good client "
      "p99 %.2f ms, max %.2f ms; RSS %zu -> %zu KiB\n",
      backend, kPrefixes, out.seconds, out.accepted, out.refused, table, stats.p99_ms, stats.max_ms,
      rss_before, rss_after);
  EXPECT_EQ(out.wrong, 0) << out.first_wrong;
  EXPECT_EQ(static_cast<size_t>(out.accepted), table - 1) << "one entry is the good client's";
  EXPECT_EQ(out.accepted + out.refused, kPrefixes);
  EXPECT_EQ(stats.failed, 0u) << stats.first_failure;
  EXPECT_LT(stats.p99_ms, 100) << "the good client's p99 during the attack";
}

TEST(HostileFloodTest, OneClientCannotFloodTheLineEmbedded) {
  ServerProcess server({"--trusted-proxy", "127.0.0.1/32"});
  ASSERT_TRUE(server.started()) << server.error();
  OneClientFloods({&server}, "embedded");
  EXPECT_TRUE(server.Alive());
}

TEST(HostileFloodTest, ManyIpv6PrefixesAreBoundedByTheClientTableEmbedded) {
  ServerProcess server({"--trusted-proxy", "127.0.0.1/32", "--max-clients-per-room", "2000"});
  ASSERT_TRUE(server.started()) << server.error();
  Ipv6ClientsFlood(server, 2'000, "embedded");
  EXPECT_TRUE(server.Alive());
}

// The limits live in Redis: two processes answer for one bucket and one count per client.
TEST(HostileFloodTest, OneClientCannotFloodTheLineAcrossRedisProcesses) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(std::make_unique<ServerProcess>(
        std::vector<std::string>{"--store", redis.url(), "--trusted-proxy", "127.0.0.1/32"},
        EnvVars{}, seconds(20)));
    ASSERT_TRUE(servers.back()->started()) << servers.back()->error();
  }
  OneClientFloods({servers[0].get(), servers[1].get()}, "redis, 2 processes");
  for (auto& s : servers) EXPECT_TRUE(s->Alive());
}

TEST(HostileFloodTest, ManyIpv6PrefixesAreBoundedByTheClientTableRedis) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ServerProcess server(
      {"--store", redis.url(), "--trusted-proxy", "127.0.0.1/32", "--max-clients-per-room", "2000"},
      EnvVars{}, seconds(20));
  ASSERT_TRUE(server.started()) << server.error();
  Ipv6ClientsFlood(server, 2'000, "redis");
  // The table lives in Redis: one hash entry per client, at most the cap.
  std::string clients = redis.Command({"HLEN", "anteroom:{r:launch}:c"});
  EXPECT_EQ(clients.substr(0, clients.find_last_not_of("\r\n") + 1), "2000");
  EXPECT_TRUE(server.Alive());
}

}  // namespace
}  // namespace anteroom::testing
