// Webhooks end to end against the real server: a webhook set over HTTP, lifecycle events of its
// types delivered to a Node receiver that verifies each with the Standard Webhooks reference
// library (npm `standardwebhooks`); the secret shown once; the routes' refusals; a receiver that
// is down at first gets the delivery on a retry (its queue held it); a destination on loopback
// refused unless --webhook-allow names it. Skipped when node is not installed.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "support/node_receiver.h"
#include "support/redis_process.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

constexpr char kAdmin[] = "webhooks-admin-key";

class WebhooksHttpTest : public ServerTest {
 protected:
  std::vector<std::string> ServerArgs() const override {
    return {"--webhook-allow", "127.0.0.1/32", "--webhook-timeout-ms", "2000"};
  }
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}, {"ANTEROOM_ADMIN_KEY", kAdmin}};
  }
  std::string AdminKey() const override { return kAdmin; }

  HttpResult PutWebhook(const std::string& name, const json::object& body) {
    return client().Request("PUT", "/v1/webhooks/" + name, json::serialize(body));
  }
  static json::object Body(const HttpResult& r) { return json::parse(r.body).as_object(); }
};

TEST_F(WebhooksHttpTest, AdmissionsReachTheReceiverSignedAsTheSpecificationSays) {
  std::string node = FindNode();
  if (node.empty()) GTEST_SKIP() << "node is not installed";
  // Made first (its secret is the receiver's argument), then pointed at the receiver.
  HttpResult made = PutWebhook("orders", {{"url", "http://127.0.0.1:9/none"},
                                          {"types", json::array{"room.admitted"}},
                                          {"rooms", json::array{"launch"}}});
  ASSERT_EQ(made.status, 201) << made.body;
  std::string secret(Body(made).at("secret").as_string());
  ASSERT_TRUE(secret.starts_with("whsec_"));
  NodeReceiver receiver(node, secret, 3);
  ASSERT_TRUE(receiver.error().empty()) << receiver.error();
  auto port_line = receiver.ReadLine(milliseconds(10'000));
  ASSERT_TRUE(port_line && port_line->starts_with("PORT ")) << port_line.value_or("(none)");
  std::string url = "http://127.0.0.1:" + port_line->substr(5) + "/hooks";
  HttpResult replaced = PutWebhook(
      "orders",
      {{"url", url}, {"types", json::array{"room.admitted"}}, {"rooms", json::array{"launch"}}});
  ASSERT_EQ(replaced.status, 200) << replaced.body;
  EXPECT_FALSE(Body(replaced).contains("secret"));  // shown once

  ASSERT_EQ(client().PutRoom("launch", {{"capacity", 3}}).status, 200);
  ASSERT_EQ(client().PutRoom("other", {{"capacity", 3}}).status, 200);
  std::set<std::string> sessions;
  for (int k = 0; k < 3; ++k) {
    std::string s = "buyer-" + std::to_string(k) + "-0000000000000000000";
    ASSERT_EQ(client().Check("launch", s).status, 200);
    ASSERT_EQ(client().Check("other", s).status, 200);  // not its room: not sent
    sessions.insert(s);
  }
  std::set<std::string> delivered;
  for (int k = 0; k < 3; ++k) {
    auto line = receiver.ReadLine(milliseconds(15'000));
    ASSERT_TRUE(line) << "delivery " << k << " never came";
    json::object v = json::parse(*line).as_object();
    ASSERT_TRUE(v.at("verified").as_bool()) << *line;
    const json::object& event = v.at("payload").as_object();
    EXPECT_EQ(event.at("type").as_string(), "room.admitted");
    EXPECT_EQ(event.at("room").as_string(), "launch");
    EXPECT_EQ(v.at("id").as_string(), event.at("id").as_string());  // webhook-id: the event id
    EXPECT_EQ(v.at("url").as_string(), "/hooks");
    delivered.insert(std::string(event.at("data").as_object().at("session").as_string()));
  }
  EXPECT_EQ(delivered, sessions);
  EXPECT_EQ(receiver.WaitExit(milliseconds(5'000)), 0);

  HttpResult listed = client().Request("GET", "/v1/webhooks");
  ASSERT_EQ(listed.status, 200);
  json::object list = Body(listed);
  const json::array& hooks = list.at("webhooks").as_array();
  ASSERT_EQ(hooks.size(), 1u);
  EXPECT_EQ(hooks[0].as_object().at("queue").as_string(), "webhook:orders");
  EXPECT_EQ(listed.body.find("whsec_"), std::string::npos);  // never listed
}

TEST_F(WebhooksHttpTest, ADeliveryWaitsInItsQueueWhileTheReceiverIsDown) {
  std::string node = FindNode();
  if (node.empty()) GTEST_SKIP() << "node is not installed";
  // Nothing listens on the port yet: the first attempt fails, the retry (5 s later) finds it.
  int port = FreeLoopbackPort();
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/";
  HttpResult made = PutWebhook("late", {{"url", url}, {"types", json::array{"room.created"}}});
  ASSERT_EQ(made.status, 201) << made.body;
  std::string secret(Body(made).at("secret").as_string());
  ASSERT_EQ(client().PutRoom("r", {{"capacity", 1}}).status, 200);
  // The failed attempt is counted in the queue, with its error.
  bool failed = false;
  for (int k = 0; k < 50 && !failed; ++k) {
    std::this_thread::sleep_for(milliseconds(100));
    HttpResult stats = client().QueueStats("webhook:late");
    failed = stats.status == 200 && Body(stats).at("nacked").as_int64() >= 1;
  }
  ASSERT_TRUE(failed) << "the first attempt was not made";
  auto receiver = std::make_unique<NodeReceiver>(node, secret, 1, port);
  auto listening = receiver->ReadLine(milliseconds(10'000));
  ASSERT_EQ(listening.value_or(""), "PORT " + std::to_string(port));
  auto line = receiver->ReadLine(milliseconds(20'000));
  ASSERT_TRUE(line) << "the retry never came";
  json::object v = json::parse(*line).as_object();
  EXPECT_TRUE(v.at("verified").as_bool()) << *line;
  EXPECT_EQ(v.at("payload").as_object().at("type").as_string(), "room.created");
}

TEST_F(WebhooksHttpTest, BadWebhooksAreRefusedAndSecretsRotate) {
  EXPECT_EQ(
      PutWebhook("w", {{"url", "ftp://x.example/"}, {"types", json::array{"room.joined"}}}).status,
      400);
  EXPECT_EQ(
      PutWebhook("w", {{"url", "https://u:p@x.example/"}, {"types", json::array{"room.joined"}}})
          .status,
      400);
  EXPECT_EQ(PutWebhook("w", {{"url", "https://x.example/"}, {"types", json::array{}}}).status, 400);
  EXPECT_EQ(
      PutWebhook("w", {{"url", "https://x.example/"}, {"types", json::array{"room.nope"}}}).status,
      400);
  EXPECT_EQ(
      PutWebhook(
          "w", {{"url", "https://x.example/"}, {"types", json::array{"room.joined"}}, {"extra", 1}})
          .status,
      400);
  EXPECT_EQ(PutWebhook(std::string(65, 'n'),
                       {{"url", "https://x.example/"}, {"types", json::array{"room.joined"}}})
                .status,
            400);
  EXPECT_EQ(client().Request("GET", "/v1/webhooks/none").status, 404);
  EXPECT_EQ(client().Request("POST", "/v1/webhooks/none/rotate").status, 404);

  HttpResult made =
      PutWebhook("w", {{"url", "https://x.example/"}, {"types", json::array{"room.joined"}}});
  ASSERT_EQ(made.status, 201);
  HttpResult rotated = client().Request("POST", "/v1/webhooks/w/rotate");
  ASSERT_EQ(rotated.status, 200) << rotated.body;
  json::object r = Body(rotated);
  EXPECT_NE(r.at("secret").as_string(), Body(made).at("secret").as_string());
  const json::array& secrets = r.at("secrets").as_array();
  ASSERT_EQ(secrets.size(), 2u);  // the new one, and the old one until it expires
  EXPECT_TRUE(secrets[0].as_object().at("expires_at").is_null());
  EXPECT_FALSE(secrets[1].as_object().at("expires_at").is_null());
  EXPECT_EQ(client().Request("DELETE", "/v1/webhooks/w").status, 200);
  EXPECT_EQ(client().Request("DELETE", "/v1/webhooks/w").status, 404);
  // Without the admin key: 401.
  Client anonymous(server().url(), "");
  EXPECT_EQ(anonymous.Request("GET", "/v1/webhooks").status, 401);
}

}  // namespace
}  // namespace anteroom::testing
