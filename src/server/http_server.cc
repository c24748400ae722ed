#include "server/http_server.h"

#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <optional>

namespace anteroom::server {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(120);
constexpr auto kWriteTimeout = std::chrono::seconds(30);
constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kHardBodyLimit = 64 * 1024 * 1024;

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `open` counts live connections for the overload limit; this session holds one of them.
  Session(tcp::socket socket, const Router& router, std::shared_ptr<std::atomic<size_t>> open)
      : stream_(std::move(socket)), router_(router), open_(std::move(open)) {}
  ~Session() { open_->fetch_sub(1, std::memory_order_relaxed); }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

 private:
  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(kHardBodyLimit);
    stream_.expires_after(kIdleTimeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
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
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                     header.version());
      http::async_write(stream_, *cont,
                        [self = shared_from_this(), cont](beast::error_code wec, size_t) {
                          if (wec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRequest(ec);
                     });
  }

  void ReadFailed(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == beast::error::timeout || ec == net::error::operation_aborted ||
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
    // The handler may answer from another thread: come back to this connection's strand.
    router_.Dispatch(request_, [self = shared_from_this()](Response response) {
      net::dispatch(self->stream_.get_executor(),
                    [self, r = std::move(response)]() mutable { self->Send(std::move(r), false); });
    });
  }

  void Send(Response response, bool close) {
    res_ = {};
    auto* res = &res_;
    res->result(static_cast<http::status>(response.status));
    res->version(version_ ? version_ : 11);
    res->set(http::field::server, "anteroom");
    res->set(http::field::content_type, response.content_type);
    for (auto& [name, value] : response.headers) res->set(name, value);
    res->body() = std::move(response.body);
    close = close || response.close || !keep_alive_;
    res->keep_alive(!close);
    res->prepare_payload();
    stream_.expires_after(kWriteTimeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), close](beast::error_code ec, size_t) {
                        if (ec || close) return self->Close();
                        self->ReadHeader();
                      });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  const Router& router_;
  std::shared_ptr<std::atomic<size_t>> open_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Request request_;
  http::response<http::string_body> res_;  // reused: one answer in flight per connection
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
    acceptor_.async_accept(pool_.Next(), [self = shared_from_this()](
                                                       beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;
      if (!ec) {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        if (self->open_->fetch_add(1, std::memory_order_relaxed) >= self->max_connections_) {
          self->open_->fetch_sub(1, std::memory_order_relaxed);
          RefuseOverloaded(std::move(socket));
        } else {
          std::make_shared<Session>(std::move(socket), self->router_, self->open_)->Start();
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
  static void RefuseOverloaded(tcp::socket socket) {
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    auto res = std::make_shared<http::response<http::string_body>>(
        http::status::service_unavailable, 11);
    res->set(http::field::server, "anteroom");
    res->set(http::field::content_type, "application/json");
    res->set(http::field::retry_after, "1");
    res->body() = ErrorReply(OpStatus::kUnavailable, "too many connections; retry shortly").body;
    res->keep_alive(false);
    res->prepare_payload();
    stream->expires_after(std::chrono::seconds(5));
    http::async_write(*stream, *res, [stream, res](beast::error_code, size_t) {
      beast::error_code ignored;
      stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
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
