// What the server tells systemd (Type=notify): READY=1 once it listens, WATCHDOG=1 keep-alives
// while every event loop turns, STOPPING=1 when a SIGTERM stops it, in that order, received on
// a notify socket of the test's own, as systemd would receive them. And the keep-alives stop
// while one event loop is stuck, so that systemd restarts such a server.
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/post.hpp>

#include "cmd/service_notify.h"
#include "http/io_pool.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// An AF_UNIX datagram socket bound in a temp dir: systemd's end of $NOTIFY_SOCKET.
class NotifySocket {
 public:
  NotifySocket() : dir_("anteroom-notify") {
    path_ = (dir_.path() / "notify").string();
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{.tv_sec = 0, .tv_usec = 50'000};
    if (ok_) ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  // Every message received within `for_ms`.
  std::vector<std::string> Receive(milliseconds within) {
    std::vector<std::string> out;
    auto end = Clock::now() + within;
    char buf[4096];
    while (Clock::now() < end) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) out.emplace_back(buf, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  TempDir dir_;
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
};

size_t Count(const std::vector<std::string>& messages, const std::string& m) {
  size_t n = 0;
  for (const auto& x : messages) n += x == m;
  return n;
}

TEST(ServiceNotifyTest, ReadyThenKeepAlivesThenStoppingOnSigterm) {
  NotifySocket systemd;
  ASSERT_TRUE(systemd.ok());
  ServerProcess server({"--memory-only"},
                       {{"NOTIFY_SOCKET", systemd.path()}, {"WATCHDOG_USEC", "200000"}});
  ASSERT_TRUE(server.started()) << server.error();
  std::vector<std::string> got = systemd.Receive(milliseconds(700));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].rfind("READY=1\nSTATUS=serving on 127.0.0.1:", 0), 0u) << got[0];
  // Keep-alives every 100 ms (half of WATCHDOG_USEC): about 6 in 700 ms.
  size_t keepalives = Count(got, "WATCHDOG=1");
  EXPECT_GE(keepalives, 3u);
  EXPECT_EQ(keepalives, got.size() - 1) << "nothing but keep-alives after READY";
  ASSERT_EQ(::kill(server.pid(), SIGTERM), 0);
  std::vector<std::string> after = systemd.Receive(milliseconds(500));
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.back(), "STOPPING=1\nSTATUS=draining");
  EXPECT_EQ(Count(after, "STOPPING=1\nSTATUS=draining"), 1u);
  int status = server.Stop();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ServiceNotifyTest, WithoutANotifySocketNothingIsSentAndTheServerRuns) {
  ServerProcess server({"--memory-only"}, {{"WATCHDOG_USEC", "200000"}});
  ASSERT_TRUE(server.started()) << server.error();
  int status = server.Stop();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// In this process: two event loops, one of them stuck in a handler for a while. No keep-alive
// goes out while it is stuck; they resume when it turns again.
TEST(ServiceNotifyTest, AStuckEventLoopStopsTheKeepAlives) {
  NotifySocket systemd;
  ASSERT_TRUE(systemd.ok());
  ::setenv("NOTIFY_SOCKET", systemd.path().c_str(), 1);
  ::setenv("WATCHDOG_USEC", "100000", 1);
  ::unsetenv("WATCHDOG_PID");
  http::IoPool pool(2);
  cmd::ServiceNotifier notifier(pool);
  ASSERT_EQ(notifier.keepalive_period(), std::chrono::microseconds(50'000));
  notifier.Ready("test");
  std::thread runner([&] { pool.Run(); });
  std::vector<std::string> before = systemd.Receive(milliseconds(400));
  EXPECT_GE(Count(before, "WATCHDOG=1"), 4u);
  // The second loop blocks for 1.2 s: after at most one keep-alive in flight, none (a check-in
  // made just before it blocked lets one more out, within 100 ms; 300 ms for a loaded machine).
  std::vector<boost::asio::io_context*> loops = pool.Contexts();
  boost::asio::post(*loops[1], [] { std::this_thread::sleep_for(milliseconds(1200)); });
  systemd.Receive(milliseconds(300));
  std::vector<std::string> stuck = systemd.Receive(milliseconds(600));
  EXPECT_EQ(Count(stuck, "WATCHDOG=1"), 0u);
  systemd.Receive(milliseconds(300));
  std::vector<std::string> again = systemd.Receive(milliseconds(400));
  EXPECT_GE(Count(again, "WATCHDOG=1"), 2u) << "keep-alives resume once the loop turns";
  boost::asio::post(pool.Main(), [&] {
    notifier.Stopping("done");
    pool.Stop();
  });
  runner.join();
  ::unsetenv("NOTIFY_SOCKET");  // sd_notify reads it at each call
  ::unsetenv("WATCHDOG_USEC");
  std::vector<std::string> last = systemd.Receive(milliseconds(100));
  ASSERT_FALSE(last.empty());
  EXPECT_EQ(last.back(), "STOPPING=1\nSTATUS=done");
}

}  // namespace
}  // namespace anteroom::testing
