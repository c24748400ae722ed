#pragma once
// HTTP/1.1 with keep-alive (and pipelining) on Boost.Beast. Connections only read requests, ask
// the router and write answers; they know nothing of rooms or queues.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include <chrono>
#include <memory>
#include <string>

#include "http/drain_list.h"
#include "http/io_pool.h"
#include "http/live_stream.h"
#include "http/router.h"

namespace anteroom::http {

// What one client may hold, and for how long: the defaults are sized against slowloris (a head
// sent a byte at a time) and bodies that stop short of their end.
struct ConnectionLimits {
  // Connections beyond this are answered 503 and closed. Live streams count too.
  size_t max_connections = 100'000;
  // Connections refused over the cap whose 503 is being written (and their request drained) at
  // once; beyond it a refused connection is closed at once. Each holds a descriptor: keep it
  // within the descriptors left beyond max_connections.
  size_t max_refusing = 256;
  // A request's head must arrive whole within this from its first byte (a new connection's
  // first request: from the accept): else 408.
  std::chrono::milliseconds head_timeout{10'000};
  // A kept-alive connection with no request for this long is closed.
  std::chrono::milliseconds idle_timeout{120'000};
  // A body with no new byte for this long is cut (408); after that long, a body must also have
  // come at min_body_rate bytes/s on average.
  std::chrono::milliseconds body_stall{10'000};
  size_t min_body_rate = 1024;
  // Bytes of unfinished request bodies held across the server (BodyBudget).
  size_t max_buffered_bytes = size_t{256} << 20;
  // After an answer that closes the connection while the client may still be sending (413,
  // 400, 431, 503, 408), what it sends is read and dropped for up to this long and this many
  // bytes, so it sees the answer instead of a reset (nginx's lingering_close).
  std::chrono::milliseconds linger{5'000};
  size_t linger_bytes = size_t{64} << 20;
};

class HttpServer {
 public:
  HttpServer(IoPool& pool, const Router& router, ConnectionLimits limits = {},
             LiveStreamOptions live = {});
  ~HttpServer();

  // Binds and starts accepting. Port 0 picks a free port. Throws at start-up on failure.
  boost::asio::ip::tcp::endpoint Listen(const std::string& host, uint16_t port);
  // Connections accepted from now on speak TLS with `tls` (nullptr: plain HTTP); those already
  // open keep what they started with. One thread at a time; before Listen, the first
  // connection has it.
  void UseTls(std::shared_ptr<boost::asio::ssl::context> tls);
  void Close();
  // SIGTERM: stops accepting, and tells every connection and live stream to end (drain_list.h).
  // Returns at once; OpenConnections() falls to 0 as they do.
  void Drain();
  // Connections and live streams open (those refused over the limit aside).
  size_t OpenConnections() const;

 private:
  class Listener;
  IoPool& pool_;
  const Router& router_;
  ConnectionLimits limits_;
  LiveStreamOptions live_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::shared_ptr<DrainList> drains_ = std::make_shared<DrainList>();
  std::shared_ptr<Listener> listener_;
};

}  // namespace anteroom::http
