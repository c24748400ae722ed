// Webhooks and the event stream on Redis, through three real processes sharing one redis-server:
// admissions made on every process reach the receiver once each (one process dispatches, as the
// dispatcher role says), signed and verified by the Standard Webhooks reference library; then
// the process dispatching is killed with SIGKILL and another takes the role over from the saved
// position: admissions made after it are delivered too. Skipped without redis-server or node.
#include <signal.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "support/node_receiver.h"
#include "support/redis_process.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<std::unique_ptr<ServerProcess>> Start(int n, const std::string& store) {
  std::vector<std::unique_ptr<ServerProcess>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<ServerProcess>(
        std::vector<std::string>{"--store", store, "--webhook-allow", "127.0.0.1/32"}, EnvVars{},
        seconds(20)));
  }
  return out;
}

// Reads `n` deliveries: each verified, each a room.admitted; answers their sessions (a repeat
// is a failure).
std::set<std::string> Deliveries(NodeReceiver& receiver, int n, std::set<std::string>& ids) {
  std::set<std::string> sessions;
  for (int k = 0; k < n; ++k) {
    auto line = receiver.ReadLine(milliseconds(20'000));
    if (!line) {
      ADD_FAILURE() << "delivery " << k << " of " << n << " never came";
      break;
    }
    json::object v = json::parse(*line).as_object();
    EXPECT_TRUE(v.at("verified").as_bool()) << *line;
    if (!v.at("verified").as_bool()) continue;
    const json::object& event = v.at("payload").as_object();
    EXPECT_TRUE(ids.insert(std::string(v.at("id").as_string())).second)
        << "delivered twice: " << *line;
    sessions.insert(std::string(event.at("data").as_object().at("session").as_string()));
  }
  return sessions;
}

TEST(WebhooksRedisTest, EveryProcesssAdmissionsAreDeliveredOnceAndTheRoleMovesOnAfterAKill) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  std::string node = FindNode();
  if (node.empty()) GTEST_SKIP() << "node is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto servers = Start(3, redis.url());
  for (auto& s : servers) ASSERT_TRUE(s->started()) << s->error();
  Client admin(servers[0]->url());
  HttpResult made = admin.Request("PUT", "/v1/webhooks/all",
                                  R"({"url": "http://127.0.0.1:9/", "types": ["room.admitted"]})");
  ASSERT_EQ(made.status, 201) << made.body;
  std::string secret(made.json.as_object().at("secret").as_string());
  constexpr int kFirst = 30, kSecond = 12;
  NodeReceiver receiver(node, secret, kFirst + kSecond + 1);  // one more: a repeat would show
  auto port = receiver.ReadLine(milliseconds(10'000));
  ASSERT_TRUE(port && port->starts_with("PORT ")) << receiver.error();
  std::string url = "http://127.0.0.1:" + port->substr(5) + "/";
  ASSERT_EQ(admin
                .Request("PUT", "/v1/webhooks/all",
                         R"({"url": ")" + url + R"(", "types": ["room.admitted"]})")
                .status,
            200);
  ASSERT_EQ(admin.PutRoom("shop", {{"capacity", 1000}}).status, 200);
  std::this_thread::sleep_for(milliseconds(2'500));  // every process reads the webhook again

  std::set<std::string> want;
  for (int k = 0; k < kFirst; ++k) {
    std::string s = "early-" + std::to_string(k) + "-00000000000000000";
    Client c(servers[k % 3]->url());
    ASSERT_EQ(c.Check("shop", s).status, 200);
    want.insert(s);
  }
  std::set<std::string> ids;
  EXPECT_EQ(Deliveries(receiver, kFirst, ids), want);

  // Whichever process holds the role, one of them dies mid-run: the others go on.
  for (int victim : {0, 1}) {
    kill(servers[victim]->pid(), SIGKILL);
    servers[victim]->Stop();
  }
  std::set<std::string> later;
  for (int k = 0; k < kSecond; ++k) {
    std::string s = "late-" + std::to_string(k) + "-000000000000000000";
    Client c(servers[2]->url());
    ASSERT_EQ(c.Check("shop", s).status, 200);
    later.insert(s);
  }
  // The role's lease (10 s) runs out, then the survivor takes it from the saved position.
  std::set<std::string> got;
  for (int k = 0; k < kSecond; ++k) {
    auto line = receiver.ReadLine(milliseconds(30'000));
    ASSERT_TRUE(line) << "after the kill, delivery " << k << " never came";
    json::object v = json::parse(*line).as_object();
    ASSERT_TRUE(v.at("verified").as_bool()) << *line;
    std::string id(v.at("id").as_string());
    std::string session(
        v.at("payload").as_object().at("data").as_object().at("session").as_string());
    // A repeat of one delivered before the kill is allowed (at least once), a new one must be
    // one of the later admissions.
    if (!ids.insert(id).second) {
      --k;
      continue;
    }
    got.insert(session);
  }
  EXPECT_EQ(got, later);
}

}  // namespace
}  // namespace anteroom::testing
