// A Redis connection whose TCP connect never completes (the host drops SYNs: here, a loopback
// listener whose accept queue is full) fails its commands within the store's timeout, as one
// that connects and never answers does, instead of waiting out the kernel's SYN retries.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/redis/connection.h"

namespace anteroom::store::redis {
namespace {

// A listener that never accepts, its queue filled, so a further SYN is dropped. Loopback only.
class Blackhole {
 public:
  Blackhole() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(listener_, 0);
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    // Fillers until one's connect stays pending: the queue is full from then on.
    for (int i = 0; i < 16 && !full_; ++i) {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      fillers_.push_back(fd);
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      pollfd p{fd, POLLOUT, 0};
      full_ = poll(&p, 1, 200) == 0;
    }
  }
  ~Blackhole() {
    for (int fd : fillers_) close(fd);
    close(listener_);
  }
  uint16_t port() const { return port_; }
  bool full() const { return full_; }

 private:
  int listener_ = -1;
  uint16_t port_ = 0;
  bool full_ = false;
  std::vector<int> fillers_;
};

TEST(RedisConnection, AConnectThatNeverCompletesFailsWithinTheTimeout) {
  Blackhole hole;
  ASSERT_TRUE(hole.full()) << "the accept queue could not be filled";
  boost::asio::io_context io;
  ConnectionOptions options;
  options.timeout_ms = 300;
  auto connection =
      std::make_shared<Connection>(io, Endpoint{.host = "127.0.0.1", .port = hole.port()}, options);
  std::optional<Reply> reply;
  auto sent = std::chrono::steady_clock::now();
  connection->Command({"PING"}, [&](Reply r) { reply = std::move(r); });
  while (!reply && std::chrono::steady_clock::now() - sent < std::chrono::seconds(5)) {
    io.run_for(std::chrono::milliseconds(50));
  }
  auto took = std::chrono::steady_clock::now() - sent;
  ASSERT_TRUE(reply.has_value()) << "no answer within 5 s";
  EXPECT_EQ(reply->type, Reply::Type::kTransport);
  EXPECT_NE(reply->str.find("no connection within 300 ms"), std::string::npos) << reply->str;
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  connection->Close();
  io.run_for(std::chrono::milliseconds(50));
}

}  // namespace
}  // namespace anteroom::store::redis
