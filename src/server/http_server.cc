#include "server/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <optional>

namespace anteroom::server {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

using SteadyClock = std::chrono::steady_clock;
// Sockets bound to one io_context's executor: no type erasure on every operation.
using Socket = net::basic_stream_socket<tcp, net::io_context::executor_type>;

constexpr auto kIdleTimeout = std::chrono::seconds(120);  // no request on a kept-alive connection
constexpr auto kWriteTimeout = std::chrono::seconds(30);  // a client that stops reading
constexpr auto kSweepEvery = std::chrono::seconds(10);
constexpr size_t kMaxBatch = 256 * 1024;  // answers queued for one write to pipelined requests
constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kHardBodyLimit = 64 * 1024 * 1024;

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `open` counts live connections for the overload limit; this session holds one of them.
  Session(Socket socket, const Router& router, std::shared_ptr<std::atomic<size_t>> open)
      : socket_(std::move(socket)),
        sweep_(socket_.get_executor()),
        router_(router),
        open_(std::move(open)) {}
  ~Session() { open_->fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->ArmSweep();
      self->ReadHeader();
    });
  }

 private:
  enum class Phase : uint8_t { kReading, kHandling, kWriting };

  // Timeouts by a coarse sweep rather than a timer reset per request: a request then costs
  // no timer work at all. A request being handled is never timed out here.
  void ArmSweep() {
    sweep_.expires_after(kSweepEvery);
    sweep_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || !self->socket_.is_open()) return;
      auto idle = SteadyClock::now() - self->phase_since_;
      if ((self->phase_ == Phase::kReading && idle > kIdleTimeout) ||
          (self->phase_ == Phase::kWriting && idle > kWriteTimeout)) {
        return self->Close();
      }
      self->ArmSweep();
    });
  }

  void EnterPhase(Phase phase) {
    phase_ = phase;
    phase_since_ = SteadyClock::now();
  }

  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(kHardBodyLimit);
    EnterPhase(Phase::kReading);
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return ReadFailed(ec);
    auto& header = parser_->get();
    size_t limit = router_.BodyLimitFor(header.target());
    parser_->body_limit(limit);
    // RFC 9112 6.3: a request whose Transfer-Encoding does not end in chunked has no
    // determinable length; answering it would read its body as the next request.
    if (header.count(http::field::transfer_encoding) != 0 && !parser_->chunked()) {
      return Send(ErrorReply(OpStatus::kInvalidArgument,
                             "unsupported Transfer-Encoding: chunked must be the last coding"),
                  /*close=*/true);
    }
    auto length = parser_->content_length();
    if (length && *length > limit) {
      return Send(ErrorReply(OpStatus::kPayloadTooLarge,
                             "the body is larger than " + std::to_string(limit) + " bytes"),
                  /*close=*/true);
    }
    if (beast::iequals(header[http::field::expect], "100-continue")) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = shared_from_this()](beast::error_code wec, size_t) {
                         if (wec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRequest(ec); });
  }

  void ReadFailed(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::operation_aborted || ec == net::error::bad_descriptor ||
        ec == net::error::connection_reset) {
      return Close();
    }
    if (ec == http::error::body_limit) {
      return Send(ErrorReply(OpStatus::kPayloadTooLarge, "the body is too large"), true);
    }
    if (ec == http::error::header_limit) {
      return Send(ErrorReply(OpStatus::kInvalidArgument, "the request header is too large"), true);
    }
    // Anything else is a malformed request: answer it, then hang up.
    Send(ErrorReply(OpStatus::kInvalidArgument, "malformed HTTP request: " + ec.message()), true);
  }

  void OnRequest(beast::error_code ec) {
    if (ec) return ReadFailed(ec);
    auto message = parser_->release();
    keep_alive_ = message.keep_alive();
    version_ = message.version();
    request_ = Request{};
    request_.method = message.method();
    request_.target = std::string(message.target());
    request_.body = std::move(message.body());
    request_.authorization = std::string(message[http::field::authorization]);
    // The handler may answer from another thread: come back to this connection's thread.
    EnterPhase(Phase::kHandling);
    router_.Dispatch(request_, [self = shared_from_this()](Response response) {
      net::dispatch(self->socket_.get_executor(),
                    [self, r = std::move(response)]() mutable { self->Send(std::move(r), false); });
    });
  }

  // One preformatted buffer per answer: cheaper than a header container and serializer.
  //
  // Pipelined requests already in the read buffer are answered together: the answer is queued
  // and the next request parsed at once, and one write carries them all when the buffer runs
  // dry (or kMaxBatch bytes are queued).
  void Send(Response response, bool close) {
    close = close || response.close || !keep_alive_;
    auto it = std::back_inserter(out_);
    fmt::format_to(it, "HTTP/1.{} {} {}\r\nServer: anteroom\r\nContent-Type: {}\r\n",
                   version_ == 10 ? 0 : 1, response.status,
                   http::obsolete_reason(static_cast<http::status>(response.status)),
                   response.content_type);
    for (const auto& [name, value] : response.headers)
      fmt::format_to(it, "{}: {}\r\n", name, value);
    if (close) {
      out_ += "Connection: close\r\n";
    } else if (version_ == 10) {
      out_ += "Connection: keep-alive\r\n";
    }
    fmt::format_to(it, "Content-Length: {}\r\n\r\n", response.body.size());
    out_ += response.body;
    if (!close && out_.size() < kMaxBatch && NextRequestBuffered()) return ReadHeader();
    EnterPhase(Phase::kWriting);
    net::async_write(socket_, net::buffer(out_),
                     [self = shared_from_this(), close](beast::error_code ec, size_t) {
                       self->out_.clear();
                       if (ec || close) return self->Close();
                       self->ReadHeader();
                     });
  }

  // True when a whole request header already waits in the read buffer: parsing it needs no
  // read from the socket, so holding the queued answers back cannot stall the client.
  bool NextRequestBuffered() const {
    auto data = buffer_.cdata();
    std::string_view pending(static_cast<const char*>(data.data()), data.size());
    return pending.find("\r\n\r\n") != std::string_view::npos;
  }

  void Close() {
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    socket_.close(ignored);
    sweep_.cancel();
  }

  Socket socket_;
  net::steady_timer sweep_;
  beast::flat_buffer buffer_;
  const Router& router_;
  std::shared_ptr<std::atomic<size_t>> open_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_;
  std::string out_;  // answers queued or being written; one write in flight per connection
  Phase phase_ = Phase::kReading;
  SteadyClock::time_point phase_since_ = SteadyClock::now();
  bool keep_alive_ = true;
  unsigned version_ = 11;
};

}  // namespace

class HttpServer::Listener : public std::enable_shared_from_this<HttpServer::Listener> {
 public:
  Listener(IoPool& pool, const Router& router, size_t max_connections)
      : pool_(pool), acceptor_(pool.Main()), router_(router), max_connections_(max_connections) {}

  tcp::endpoint Open(const tcp::endpoint& endpoint) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(net::socket_base::max_listen_connections);
    return acceptor_.local_endpoint();
  }

  void Accept() {
    auto socket = std::make_shared<Socket>(pool_.Next().get_executor());
    acceptor_.async_accept(*socket, [self = shared_from_this(), socket](beast::error_code ec) {
      if (ec == net::error::operation_aborted) return;
      if (!ec) {
        beast::error_code ignored;
        socket->set_option(tcp::no_delay(true), ignored);
        if (self->open_->fetch_add(1, std::memory_order_relaxed) >= self->max_connections_) {
          self->open_->fetch_sub(1, std::memory_order_relaxed);
          RefuseOverloaded(std::move(*socket));
        } else {
          std::make_shared<Session>(std::move(*socket), self->router_, self->open_)->Start();
        }
      } else {
        spdlog::warn("accept failed: {}", ec.message());  // e.g. out of file descriptors
      }
      self->Accept();
    });
  }

  void Close() {
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

 private:
  // Over the connection limit: one short 503 and hang up, so clients back off and retry
  // instead of the server running out of file descriptors.
  static void RefuseOverloaded(Socket socket) {
    auto sock = std::make_shared<Socket>(std::move(socket));
    auto text = std::make_shared<std::string>();
    std::string body =
        ErrorReply(OpStatus::kUnavailable, "too many connections; retry shortly").body;
    *text = fmt::format(
        "HTTP/1.1 503 Service Unavailable\r\nServer: anteroom\r\nContent-Type: "
        "application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{}",
        body.size(), body);
    net::async_write(*sock, net::buffer(*text), [sock, text](beast::error_code, size_t) {
      beast::error_code ignored;
      sock->shutdown(tcp::socket::shutdown_both, ignored);
    });
  }

  IoPool& pool_;
  tcp::acceptor acceptor_;
  const Router& router_;
  size_t max_connections_;
  std::shared_ptr<std::atomic<size_t>> open_ = std::make_shared<std::atomic<size_t>>(0);
};

HttpServer::HttpServer(IoPool& pool, const Router& router, size_t max_connections)
    : pool_(pool), router_(router), max_connections_(max_connections) {}

HttpServer::~HttpServer() { Close(); }

tcp::endpoint HttpServer::Listen(const std::string& host, uint16_t port) {
  listener_ = std::make_shared<Listener>(pool_, router_, max_connections_);
  tcp::endpoint bound = listener_->Open({net::ip::make_address(host), port});
  listener_->Accept();
  return bound;
}

void HttpServer::Close() {
  if (listener_) {
    net::post(pool_.Main(), [l = listener_] { l->Close(); });
  }
}

}  // namespace anteroom::server
