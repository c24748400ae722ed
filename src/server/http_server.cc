#include "server/http_server.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>

#include "server/live_stream.h"
#include "server/socket.h"

namespace anteroom::server {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

namespace {

using SteadyClock = std::chrono::steady_clock;
using UpgradeRequest = http::request<http::string_body>;

constexpr auto kIdleTimeout = std::chrono::seconds(120);  // no request on a kept-alive connection
constexpr auto kWriteTimeout = std::chrono::seconds(30);  // a client that stops reading
constexpr auto kSweepEvery = std::chrono::seconds(10);
constexpr size_t kMaxBatch = 256 * 1024;  // answers queued for one write to pipelined requests
// Pipelined requests handled at once per connection. Their answers may complete out of order
// (a change waits for the log, a read does not) and are written in request order.
constexpr size_t kMaxInFlight = 64;
constexpr size_t kHeaderLimit = 16 * 1024;
constexpr size_t kHardBodyLimit = 64 * 1024 * 1024;

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `open` counts live connections for the overload limit; this session holds one of them.
  // `open` is this connection's place in the count of live connections (the overload limit):
  // released when the connection ends, or handed to the live stream it turns into.
  Session(Socket socket, const Router& router, std::shared_ptr<void> open, LiveStreamOptions live)
      : socket_(std::move(socket)),
        sweep_(socket_.get_executor()),
        router_(router),
        open_(std::move(open)),
        live_(live) {}

  void Start() {
    net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
      self->ArmSweep();
      self->ReadHeader();
    });
  }

 private:
  enum class Phase : uint8_t { kReading, kHandling, kWriting };
  // One request handled or answered, not yet written out.
  struct Slot {
    unsigned version;
    bool keep_alive;
    std::optional<Response> response;
    bool close;
    std::shared_ptr<UpgradeRequest> upgrade;  // kept for a WebSocket handshake
  };
  // A stream route answered: the connection becomes a live stream once the answers before it
  // are written.
  struct Handover {
    std::function<void(std::shared_ptr<LiveStream>)> ready;
    unsigned version;
    std::shared_ptr<UpgradeRequest> upgrade;
  };

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
    reading_ = true;
    UpdatePhase();
    http::async_read_header(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return ReadFailed(ec);
    reading_ = false;
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
    // The interim answer only when nothing else is on its way out (it must not overtake earlier
    // answers); otherwise the client sends the body after its own short wait, as RFC 9110 lets.
    if (beast::iequals(header[http::field::expect], "100-continue") && !writing_ &&
        slots_.empty() && out_.empty()) {
      writing_ = true;
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = shared_from_this()](beast::error_code wec, size_t) {
                         self->writing_ = false;
                         if (wec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    reading_ = true;
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRequest(ec); });
  }

  void ReadFailed(beast::error_code ec) {
    reading_ = false;
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
    reading_ = false;
    auto message = parser_->release();
    // Each request lives until its answer: the next may be handled before this one answers.
    auto request = std::make_shared<Request>();
    request->method = message.method();
    request->target = std::string(message.target());
    request->body = std::move(message.body());
    request->authorization = std::string(message[http::field::authorization]);
    uint64_t seq = first_seq_ + slots_.size();
    slots_.push_back({message.version(), message.keep_alive(), std::nullopt, false, nullptr});
    if (!message.keep_alive()) stop_reading_ = true;  // its answer closes the connection
    if (message.method() == http::verb::get && router_.MayStream(request->target)) {
      stop_reading_ = true;  // nothing is read after a request that may become a stream
      request->websocket = beast::websocket::is_upgrade(message);
      if (request->websocket) slots_.back().upgrade = std::make_shared<UpgradeRequest>(message);
    }
    UpdatePhase();
    // The handler may answer from another thread: come back to this connection's thread.
    router_.Dispatch(*request, [self = shared_from_this(), request, seq](Response response) {
      net::dispatch(self->socket_.get_executor(), [self, seq, r = std::move(response)]() mutable {
        self->Answered(seq, std::move(r), false);
      });
    });
    Continue();
  }

  // An answer that needs no handler (malformed request, over a limit): after the others.
  void Send(Response response, bool close) {
    stop_reading_ = true;
    slots_.push_back({version_of_last(), false, std::nullopt, false, nullptr});
    Answered(first_seq_ + slots_.size() - 1, std::move(response), close);
  }

  unsigned version_of_last() const {
    return slots_.empty() ? last_version_ : slots_.back().version;
  }

  // Files an answer; the answers now complete at the head go into out_, in request order.
  void Answered(uint64_t seq, Response response, bool close) {
    if (closed_ || seq < first_seq_ || seq - first_seq_ >= slots_.size()) return;
    Slot& slot = slots_[seq - first_seq_];
    slot.response = std::move(response);
    slot.close = close || slot.response->close || !slot.keep_alive;
    while (!slots_.empty() && slots_.front().response && !closing_) {
      if (slots_.front().response->stream) {
        Slot& head = slots_.front();
        handover_ = Handover{std::move(head.response->stream), head.version, head.upgrade};
        closing_ = true;
        slots_.pop_front();
        ++first_seq_;
        break;
      }
      Format(slots_.front());
      if (slots_.front().close) closing_ = true;  // later answers are dropped with the line
      last_version_ = slots_.front().version;
      slots_.pop_front();
      ++first_seq_;
    }
    if (closing_) slots_.clear();
    // While handlers run inline (the memory backend), more buffered requests are parsed before
    // anything is written; the write happens when the buffer runs dry.
    if (!in_continue_) Continue();
  }

  void Format(const Slot& slot) {
    const Response& response = *slot.response;
    auto it = std::back_inserter(out_);
    fmt::format_to(it, "HTTP/1.{} {} {}\r\nServer: anteroom\r\nContent-Type: {}\r\n",
                   slot.version == 10 ? 0 : 1, response.status,
                   http::obsolete_reason(static_cast<http::status>(response.status)),
                   response.content_type);
    for (const auto& [name, value] : response.headers)
      fmt::format_to(it, "{}: {}\r\n", name, value);
    if (slot.close) {
      out_ += "Connection: close\r\n";
    } else if (slot.version == 10) {
      out_ += "Connection: keep-alive\r\n";
    }
    fmt::format_to(it, "Content-Length: {}\r\n\r\n", response.body.size());
    out_ += response.body;
  }

  // What next: parse a request already buffered, write the queued answers, or read more.
  //
  // Pipelined requests already in the read buffer are handled together, their answers queued,
  // and one write carries those ready when the buffer runs dry (or kMaxBatch bytes are
  // queued). The socket is read again once every answer has been written, as before pipelining.
  void Continue() {
    if (closed_ || in_continue_) return;
    in_continue_ = true;
    while (true) {
      if (!closing_ && !stop_reading_ && !reading_ && slots_.size() < kMaxInFlight &&
          out_.size() < kMaxBatch && NextRequestBuffered()) {
        ReadHeader();  // completes at once from the buffer (or reads the rest of a body)
        break;
      }
      // Not while a buffered request is being parsed: its answer may join this write.
      if (!writing_ && !out_.empty() && !reading_) {
        StartWrite();
        break;
      }
      if (!writing_ && out_.empty() && slots_.empty()) {
        if (handover_) {
          HandOver();
        } else if (closing_ || stop_reading_) {
          Close();
        } else if (!reading_) {
          ReadHeader();
        }
      }
      break;
    }
    in_continue_ = false;
    UpdatePhase();
  }

  void StartWrite() {
    writing_ = true;
    writing_buffer_.swap(out_);
    UpdatePhase();
    net::async_write(socket_, net::buffer(writing_buffer_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       self->writing_buffer_.clear();
                       if (ec) return self->Close();
                       self->Continue();
                     });
  }

  void UpdatePhase() {
    EnterPhase(writing_ ? Phase::kWriting : !slots_.empty() ? Phase::kHandling : Phase::kReading);
  }

  // True when a whole request header already waits in the read buffer: parsing it needs no
  // read from the socket, so holding the queued answers back cannot stall the client.
  bool NextRequestBuffered() const {
    auto data = buffer_.cdata();
    std::string_view pending(static_cast<const char*>(data.data()), data.size());
    return pending.find("\r\n\r\n") != std::string_view::npos;
  }

  // The socket leaves this session for a live stream, with the connection's place in the count.
  void HandOver() {
    Handover h = std::move(*handover_);
    handover_.reset();
    closed_ = true;
    sweep_.cancel();
    auto ready = [h = std::move(h.ready), open = open_](std::shared_ptr<LiveStream> stream) {
      stream->Hold(open);
      h(std::move(stream));
    };
    if (h.upgrade) {
      LiveStream::AcceptWebSocket(std::move(socket_), std::move(buffer_), std::move(*h.upgrade),
                                  live_, std::move(ready));
    } else {
      LiveStream::StartEventStream(std::move(socket_), h.version, live_, std::move(ready));
    }
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    socket_.close(ignored);
    sweep_.cancel();
  }

  Socket socket_;
  net::steady_timer sweep_;
  beast::flat_buffer buffer_;
  const Router& router_;
  std::shared_ptr<void> open_;
  LiveStreamOptions live_;
  std::optional<Handover> handover_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<Slot> slots_;  // requests in order, from first_seq_ on
  uint64_t first_seq_ = 0;
  unsigned last_version_ = 11;
  std::string out_;             // answers queued for the next write
  std::string writing_buffer_;  // the write in flight (one per connection)
  Phase phase_ = Phase::kReading;
  SteadyClock::time_point phase_since_ = SteadyClock::now();
  bool reading_ = false;
  bool writing_ = false;
  bool stop_reading_ = false;  // a request that closes the connection, or a broken stream
  bool closing_ = false;       // an answer that closes the connection is queued
  bool closed_ = false;
  bool in_continue_ = false;
};

}  // namespace

class HttpServer::Listener : public std::enable_shared_from_this<HttpServer::Listener> {
 public:
  Listener(IoPool& pool, const Router& router, size_t max_connections, LiveStreamOptions live)
      : pool_(pool),
        acceptor_(pool.Main()),
        router_(router),
        max_connections_(max_connections),
        live_(live) {}

  tcp::endpoint Open(const tcp::endpoint& endpoint) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen(net::socket_base::max_listen_connections);
    acceptor_.non_blocking(true);  // for the synchronous accepts after a completion
    return acceptor_.local_endpoint();
  }

  void Accept() {
    auto socket = std::make_shared<Socket>(pool_.Next().get_executor());
    acceptor_.async_accept(*socket, [self = shared_from_this(), socket](beast::error_code ec) {
      if (ec == net::error::operation_aborted) return;
      if (!ec) {
        self->Admit(std::move(*socket));
        // Take what else waits in the backlog now: under load (live streams pushing) the next
        // completion waits behind every handler queued on the main context, which held
        // accepts to a few per second while thousands of clients connected.
        for (int i = 0; i < kAcceptBurst; ++i) {
          Socket next(self->pool_.Next().get_executor());
          beast::error_code again;
          self->acceptor_.accept(next, again);  // non-blocking: would_block when none waits
          if (again) break;
          self->Admit(std::move(next));
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
  static constexpr int kAcceptBurst = 256;

  void Admit(Socket socket) {
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    if (open_->fetch_add(1, std::memory_order_relaxed) >= max_connections_) {
      open_->fetch_sub(1, std::memory_order_relaxed);
      RefuseOverloaded(std::move(socket));
    } else {
      // Its place in the count, given back when the last holder lets go.
      std::shared_ptr<void> place(nullptr, [open = open_](std::nullptr_t) {
        open->fetch_sub(1, std::memory_order_relaxed);
      });
      std::make_shared<Session>(std::move(socket), router_, std::move(place), live_)->Start();
    }
  }

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
  LiveStreamOptions live_;
  std::shared_ptr<std::atomic<size_t>> open_ = std::make_shared<std::atomic<size_t>>(0);
};

HttpServer::HttpServer(IoPool& pool, const Router& router, size_t max_connections,
                       LiveStreamOptions live)
    : pool_(pool), router_(router), max_connections_(max_connections), live_(live) {}

HttpServer::~HttpServer() { Close(); }

tcp::endpoint HttpServer::Listen(const std::string& host, uint16_t port) {
  listener_ = std::make_shared<Listener>(pool_, router_, max_connections_, live_);
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
