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

#include "support/server_process.h"
#include "webhook/sender.h"
#include "webhook/signature.h"

namespace anteroom::webhook {
namespace {

namespace json = boost::json;
using Kind = WebhookOutcome::Kind;
using SteadyClock = std::chrono::steady_clock;

// `node` from PATH, or empty.
std::string FindNode() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir =
        dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    if (!dir.empty()) {
      std::filesystem::path candidate = std::filesystem::path(dir) / "node";
      if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return {};
}

const std::filesystem::path kInterop = std::filesystem::path(ANTEROOM_SOURCE_DIR) / "tests/interop";

// `node webhook_receiver.mjs SECRET COUNT`, its stdout read line by line with a deadline.
class NodeReceiver {
 public:
  NodeReceiver(const std::string& node, const std::string& secret, int count) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
      error_ = "pipe failed";
      return;
    }
    std::vector<std::string> args = {(kInterop / "webhook_receiver.mjs").string(), secret,
                                     std::to_string(count)};
    pid_ = testing::SpawnBinary(args, {}, out[1], -1, &error_, node.c_str());
    close(out[1]);
    out_ = out[0];
  }
  ~NodeReceiver() {
    Stop();
    if (out_ >= 0) close(out_);
  }

  const std::string& error() const { return error_; }

  // The next line, or nullopt when the child closed stdout or `timeout` passed.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout) {
    auto deadline = SteadyClock::now() + timeout;
    while (true) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
      if (left.count() <= 0 || out_ < 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[4096];
      ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // The exit status once it has exited by itself within `timeout`, else SIGKILL and nullopt.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout) {
    auto deadline = SteadyClock::now() + timeout;
    while (pid_ > 0 && SteadyClock::now() < deadline) {
      int status = 0;
      pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Stop();
    return std::nullopt;
  }

 private:
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::string error_;
};

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
  WebhookSender sender(ioc, options);
  WebhookOutcome out;
  out.error = "no callback";
  sender.Send(std::move(d), [&out](WebhookOutcome o) { out = std::move(o); });
  ioc.run_for(std::chrono::seconds(30));
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
