// webhook::WebhookSender's deliveries verified by the Standard Webhooks reference library: a
// Node receiver (tests/interop/webhook_receiver.mjs, npm `standardwebhooks` installed by
// scripts/setup.sh) checks each with `new Webhook(secret).verify(body, headers)`. Signed with
// its secret, alone or beside a newer one (a rotation), a body of non-ASCII JSON byte for byte:
// verified and answered 204. Signed with another secret, or with a timestamp 10 minutes old:
// refused by the library (400), which the sender reports as kRetry. The receiver is a child
// process stopped by its PID; every read of it is bounded. Skipped when node is not installed.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/node_receiver.h"
#include "support/server_process.h"
#include "webhook/sender.h"
#include "webhook/signature.h"

namespace anteroom::webhook {
namespace {

namespace json = boost::json;
using testing::FindNode;
using testing::kInterop;
using testing::NodeReceiver;
using Kind = WebhookOutcome::Kind;
using SteadyClock = std::chrono::steady_clock;

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

WebhookOutcome Send(WebhookDelivery d) {
  boost::asio::io_context ioc;
  WebhookSenderOptions options;
  std::string error;
  options.allow = *WebhookAllowList::Parse({"127.0.0.1/32"}, error);
  WebhookOutcome out;
  out.error = "no callback";
  bool called = false;
  {
    WebhookSender sender(ioc, options);
    sender.Send(std::move(d), [&](WebhookOutcome o) {
      out = std::move(o);
      called = true;
    });
    // Until the callback: the sender keeps the connection (and a timer) while it lives.
    auto until = SteadyClock::now() + std::chrono::seconds(30);
    while (!called && SteadyClock::now() < until) ioc.run_one_until(until);
  }
  ioc.run_for(std::chrono::seconds(10));
  return out;
}

TEST(WebhookInterop, TheReferenceLibraryVerifiesOurDeliveries) {
  std::string node = FindNode();
  if (node.empty()) GTEST_SKIP() << "node is not installed";
  ASSERT_TRUE(std::filesystem::exists(kInterop / "node_modules/standardwebhooks/package.json"))
      << "npm `standardwebhooks` is missing from tests/interop/node_modules: run scripts/setup.sh";

  const std::string secret = NewWebhookSecret();
  NodeReceiver receiver(node, secret, 4);
  ASSERT_TRUE(receiver.error().empty()) << receiver.error();
  auto first = receiver.ReadLine(std::chrono::seconds(20));
  ASSERT_TRUE(first && first->starts_with("PORT ")) << first.value_or("(no line)");
  const std::string url = "http://127.0.0.1:" + first->substr(5) + "/hooks?from=anteroom";

  // Non-ASCII, escapes, a line separator: the body is verified byte for byte.
  const std::string body =
      R"({"type":"room.admitted","data":{"room":"drop-Zürich","note":"\u2028 ☕ \"quoted\""}})";
  struct Case {
    std::string id;
    std::vector<std::string> secrets;
    int64_t timestamp_s = 0;
    bool verified = false;
    std::string error;  // the library's message when refused
  };
  std::vector<Case> cases = {
      {"msg_alone", {secret}, NowSeconds(), true, ""},
      {"msg_rotation", {NewWebhookSecret(), secret}, 0, true, ""},
      {"msg_other_secret",
       {NewWebhookSecret()},
       NowSeconds(),
       false,
       "No matching signature found"},
      {"msg_stale", {secret}, NowSeconds() - 600, false, "Message timestamp too old"},
  };
  for (const Case& c : cases) {
    WebhookDelivery d;
    d.url = url;
    d.id = c.id;
    d.timestamp_s = c.timestamp_s;
    d.body = body;
    d.secrets = c.secrets;
    WebhookOutcome out = Send(d);
    auto line = receiver.ReadLine(std::chrono::seconds(20));
    ASSERT_TRUE(line) << c.id << ": the receiver said nothing; the sender: " << out.error;
    json::object verdict = json::parse(*line).as_object();
    EXPECT_EQ(verdict.at("id").as_string(), c.id);
    EXPECT_EQ(verdict.at("verified").as_bool(), c.verified) << *line;
    if (c.verified) {
      EXPECT_EQ(out.kind, Kind::kDelivered) << c.id << ": " << out.error;
      EXPECT_EQ(out.status, 204);
      EXPECT_EQ(verdict.at("method").as_string(), "POST");
      EXPECT_EQ(verdict.at("url").as_string(), "/hooks?from=anteroom");
      EXPECT_EQ(verdict.at("payload"), json::parse(body)) << *line;
    } else {
      EXPECT_EQ(verdict.at("error").as_string(), c.error) << *line;
      EXPECT_EQ(out.kind, Kind::kRetry);
      EXPECT_EQ(out.status, 400);
      EXPECT_EQ(out.error, "HTTP 400: " + c.error);
    }
  }
  EXPECT_EQ(receiver.WaitExit(std::chrono::seconds(20)), 0);
}

}  // namespace
}  // namespace anteroom::webhook
