// Queues with keys of their own (PUT /v1/queues/{q}/key), against the real `anteroom serve`:
//
//  - AQueuesOwnKeySurvivesAKill: the embedded backend; a key set, then the server killed with
//    SIGKILL and started again on the same data directory: the key still opens the queue, the
//    server's queue key still does not.
//  - AKeySetThroughOneProcessHoldsOnAnother: two processes on one Redis; a key set (and then
//    removed) through one is obeyed by the other within a bound (its cache lasts 1 s).
//  - NoSpellingOfAPathOpensAnotherQueue: queue a's own key, sent as raw bytes on paths that
//    spell another queue oddly (escaped slashes, dot segments, case, escapes, trailing slash),
//    opens nothing but a; the fleet's key opens no spelling of a.
// Every process a test starts is stopped by PID (the helpers' destructors).
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <thread>

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/redis_process.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

constexpr char kAdmin[] = "queue-keys-admin-key-0123456789";
constexpr char kFleet[] = "queue-keys-fleet-key-0123456789";
constexpr char kOwn[] = "payments-team-key-0123456789ab";

EnvVars Keys() {
  return {{"ANTEROOM_TOKEN_SECRET", "queue-keys-secret"},
          {"ANTEROOM_ADMIN_KEY", kAdmin},
          {"ANTEROOM_QUEUE_KEY", kFleet}};
}

HttpResult SetKey(const std::string& url, const std::string& queue) {
  Client admin(url, kAdmin);
  return admin.Request("PUT", "/v1/queues/" + queue + "/key",
                       std::string(R"({"key":")") + kOwn + R"("})");
}

// Whether `status` comes for GET /v1/queues/{q} with `key` within `bound` (polled every 50 ms).
bool Eventually(const std::string& url, const std::string& key, const std::string& queue,
                int status, milliseconds bound) {
  Client c(url, key);
  auto deadline = SteadyClock::now() + bound;
  do {
    if (c.Request("GET", "/v1/queues/" + queue).status == status) return true;
    std::this_thread::sleep_for(milliseconds(50));
  } while (SteadyClock::now() < deadline);
  return false;
}

TEST(QueueKeysTest, AQueuesOwnKeySurvivesAKill) {
  TempDir data("anteroom-queue-keys");
  std::vector<std::string> args = {"--data", data.path().string()};
  auto server = std::make_unique<ServerProcess>(args, Keys());
  ASSERT_TRUE(server->started()) << server->error();
  HttpResult set = SetKey(server->url(), "payments");
  ASSERT_EQ(set.status, 200) << set.body;
  Client team(server->url(), kOwn);
  Client fleet(server->url(), kFleet);
  ASSERT_EQ(team.Push("payments", "charge-1").status, 201);
  EXPECT_TRUE(IsError(fleet.Fetch("payments", "w"), 401, "unauthorized"));
  EXPECT_EQ(fleet.Push("emails", "hello").status, 201) << "other queues: the fleet's key";

  ::kill(server->pid(), SIGKILL);
  server->Stop();
  server = std::make_unique<ServerProcess>(args, Keys());
  ASSERT_TRUE(server->started()) << server->error();
  Client team2(server->url(), kOwn);
  Client fleet2(server->url(), kFleet);
  EXPECT_TRUE(IsError(fleet2.Fetch("payments", "w"), 401, "unauthorized"));
  HttpResult f = team2.Fetch("payments", "w");
  ASSERT_EQ(f.status, 200) << f.body;
  EXPECT_EQ(f.json.at("jobs").as_array().size(), 1u);
  EXPECT_EQ(Client(server->url(), kAdmin).Request("DELETE", "/v1/queues/payments/key").status, 200);
  EXPECT_EQ(fleet2.QueueStats("payments").status, 200);
  EXPECT_TRUE(IsError(team2.QueueStats("payments"), 401, "unauthorized"));
}

// The status of `method target` with `key`, sent as raw bytes (no client tidies the path).
int RawStatusOf(uint16_t port, const std::string& method, const std::string& target,
                const std::string& key) {
  RawConnection conn(port);
  std::string body = method == "POST" ? R"({"payload":1})" : "";
  if (!conn.Send(RawRequest(method, target, body, {"Authorization: Bearer " + key}))) return 0;
  return RawStatus(conn.ReadResponse());
}

TEST(QueueKeysTest, NoSpellingOfAPathOpensAnotherQueue) {
  ServerProcess server({"--memory-only"}, Keys());
  ASSERT_TRUE(server.started()) << server.error();
  ASSERT_EQ(SetKey(server.url(), "a").status, 200);
  // The controls: a's key opens a, written plainly or escaped.
  for (const char* target : {"/v1/queues/a/jobs", "/v1/queues/%61/jobs"}) {
    EXPECT_EQ(RawStatusOf(server.port(), "POST", target, kOwn), 201) << target;
  }
  // a's key on other queues, however spelled: never 2xx.
  for (const char* target :
       {"/v1/queues/b/jobs", "/v1/queues/%62/jobs", "/v1/queues/A/jobs",
        "/v1/queues/a%2F..%2Fb/jobs", "/v1/queues/a%2F../jobs", "/v1/queues/a%2f..%2fb/jobs",
        "/v1/queues/a/../b/jobs", "/v1/queues/a/jobs/../../b/jobs", "/v1/queues/./b/jobs",
        "/v1/queues/b/jobs/", "/v1/queues//b/jobs", "/v1/queues/a%2Fb/jobs", "/v1/queues/a%00/jobs",
        "/v1/queues/..%2Fb/jobs", "/v1/queues/b%2F/jobs", "/v1/queues/a;/jobs"}) {
    int status = RawStatusOf(server.port(), "POST", target, kOwn);
    EXPECT_TRUE(status >= 400 && status < 500) << target << ": " << status;
  }
  for (const char* target : {"/v1/queues/b", "/v1/queues/%62", "/v1/queues/A", "/v1/queues"}) {
    EXPECT_EQ(RawStatusOf(server.port(), "GET", target, kOwn), 401) << target;
  }
  // The fleet's key on a, however spelled: never 2xx.
  for (const char* target :
       {"/v1/queues/a/jobs", "/v1/queues/%61/jobs", "/v1/queues/a/jobs/", "/v1/queues/a%2F/jobs",
        "/v1/queues/./a/jobs", "/v1/queues/b/../a/jobs", "/v1/queues/b%2F..%2Fa/jobs",
        "/v1/queues/a%20/jobs"}) {
    int status = RawStatusOf(server.port(), "POST", target, kFleet);
    EXPECT_TRUE(status >= 400 && status < 500) << target << ": " << status;
  }
  // What each queue holds: a the two jobs of its own key, and nothing reached b.
  Client admin(server.url(), kAdmin);
  HttpResult a = admin.QueueStats("a");
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json.at("pushed").to_number<int64_t>(), 2) << a.body;
  HttpResult b = admin.QueueStats("b");
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.json.at("pushed").to_number<int64_t>(), 0) << b.body;
}

TEST(QueueKeysTest, AKeySetThroughOneProcessHoldsOnAnother) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::vector<std::string> args = {"--store", redis.url()};
  ServerProcess a(args, Keys(), seconds(20));
  ASSERT_TRUE(a.started()) << a.error();
  ServerProcess b(args, Keys(), seconds(20));
  ASSERT_TRUE(b.started()) << b.error();
  ASSERT_EQ(Client(b.url(), kFleet).QueueStats("payments").status, 200);  // b caches "no key"

  ASSERT_EQ(SetKey(a.url(), "payments").status, 200);
  EXPECT_TRUE(Eventually(a.url(), kFleet, "payments", 401, milliseconds(0))) << "a: at once";
  EXPECT_TRUE(Eventually(b.url(), kFleet, "payments", 401, seconds(3))) << "b: within its cache";
  EXPECT_TRUE(Eventually(b.url(), kOwn, "payments", 200, milliseconds(0)));
  ASSERT_EQ(Client(b.url(), kOwn).Push("payments", "charge-1").status, 201);
  HttpResult f = Client(a.url(), kOwn).Fetch("payments", "w");
  ASSERT_EQ(f.status, 200) << f.body;
  EXPECT_EQ(f.json.at("jobs").as_array().size(), 1u);

  ASSERT_EQ(Client(a.url(), kAdmin).Request("DELETE", "/v1/queues/payments/key").status, 200);
  EXPECT_TRUE(Eventually(b.url(), kFleet, "payments", 200, seconds(3)));
  EXPECT_TRUE(Eventually(b.url(), kOwn, "payments", 401, seconds(3)));
}

}  // namespace
}  // namespace anteroom::testing
