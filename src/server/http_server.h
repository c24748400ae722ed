#pragma once
// HTTP/1.1 with keep-alive (and pipelining) on Boost.Beast. Sessions only read requests, ask
// the router and write answers; they know nothing of rooms or queues.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <string>

#include "server/io_pool.h"
#include "server/live_stream.h"
#include "server/router.h"

namespace anteroom::server {

class HttpServer {
 public:
  // Connections beyond max_connections are answered 503 and closed.
  // Live streams (stream routes) count as connections too.
  HttpServer(IoPool& pool, const Router& router, size_t max_connections = 100'000,
             LiveStreamOptions live = {});
  ~HttpServer();

  // Binds and starts accepting. Port 0 picks a free port. Throws at start-up on failure.
  boost::asio::ip::tcp::endpoint Listen(const std::string& host, uint16_t port);
  void Close();

 private:
  class Listener;
  IoPool& pool_;
  const Router& router_;
  size_t max_connections_;
  LiveStreamOptions live_;
  std::shared_ptr<Listener> listener_;
};

}  // namespace anteroom::server
