#pragma once
// One pipelined connection to one Redis server, driven by an Asio io_context: commands are
// written as they come and their replies matched in order (RESP parsed by hiredis's reader).
// All calls must be made on the io_context's thread.
//
// Failures never hang a caller: when the connection drops, when it is not made within
// `timeout_ms` (a host that drops SYNs would leave the kernel retrying for two minutes), or the
// oldest command has waited longer than `timeout_ms`, every command in flight is answered with a
// transport failure, and
// the connection comes back by itself with exponential backoff (100 ms up to 2 s). While it
// is down, commands fail at once rather than queue behind an outage.
//
// With a TLS context (rediss://) each connection is an asio::ssl::stream over the same socket,
// made afresh per connection: the handshake (bounded by `timeout_ms`) comes before AUTH, and a
// failed one is a failure like any other, retried with the same backoff. Without one, the
// socket is read and written directly: a plain connection pays nothing for TLS.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/redis_url.h"
#include "store/redis/reply_reader.h"
#include "store/redis/resp_reply.h"

namespace anteroom::store::redis {

class RedisTlsContext;  // redis_tls.h

struct ConnectionOptions {
  std::string user;
  std::string password;
  int db = 0;
  int64_t timeout_ms = 3000;
  // Set: TLS to the server, verified against the endpoint's host (redis_tls.h), with the context
  // current when each handshake starts. Shared by every connection of a store; null: plain TCP.
  std::shared_ptr<RedisTlsContext> tls = nullptr;
};

// RESP encoding of one command (hiredis's formatter).
std::string FormatCommand(const std::vector<std::string_view>& args);

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Callback = std::function<void(Reply)>;
  // Pub/Sub messages ("message", channel, payload) go here instead of to a command.
  using MessageHandler = std::function<void(const std::string& channel, const std::string& msg)>;
  // Called after every (re)connection, before queued commands are written: to resubscribe.
  using UpHandler = std::function<void()>;

  Connection(boost::asio::io_context& io, Endpoint endpoint, ConnectionOptions options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  void Start();  // connects now (later commands would also start it)
  void Send(std::string resp, Callback cb);
  void Command(const std::vector<std::string_view>& args, Callback cb) {
    Send(FormatCommand(args), std::move(cb));
  }
  void Close();  // fails what is in flight; no reconnection

  void OnMessage(MessageHandler handler) { on_message_ = std::move(handler); }
  void OnUp(UpHandler handler) { on_up_ = std::move(handler); }
  bool up() const { return state_ == State::kUp; }
  const Endpoint& endpoint() const { return endpoint_; }
  const std::string& problem() const { return problem_; }

 private:
  enum class State { kDown, kConnecting, kUp, kClosed };
  struct Pending {
    Callback cb;
    std::chrono::steady_clock::time_point sent;
  };

  struct TlsStream;

  void Connect();
  void StartTls(uint64_t gen);
  void TlsFailed(const std::string& why);
  void Up();
  void Handshake();
  void Fail(const std::string& why);
  void Flush();
  void Read();
  void Written(uint64_t gen, const boost::system::error_code& ec);
  void Received(uint64_t gen, const boost::system::error_code& ec, size_t n);
  void Dispatch(Reply reply);
  void ArmWatchdog();

  boost::asio::io_context& io_;
  Endpoint endpoint_;
  ConnectionOptions options_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::ip::tcp::socket socket_;
  // This connection's TLS session over socket_, when options_.tls is set. Every operation on it
  // holds it (a shared_ptr in its handler), so a failure may drop it while they finish.
  std::shared_ptr<TlsStream> tls_;
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer connect_deadline_;  // the resolve and TCP connect, together
  boost::asio::steady_timer watchdog_;
  bool watchdog_armed_ = false;
  State state_ = State::kDown;
  bool retry_pending_ = false;
  std::chrono::milliseconds backoff_{100};
  uint64_t generation_ = 0;  // bumped on every failure: stale handlers see it changed
  std::string problem_ = "not connected yet";

  std::deque<Pending> pending_;
  std::string out_;      // queued, not yet being written
  std::string writing_;  // being written
  bool write_busy_ = false;
  std::vector<char> in_;
  ReplyReader reader_;

  MessageHandler on_message_;
  UpHandler on_up_;
};

}  // namespace anteroom::store::redis
