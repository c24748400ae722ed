#include "http/live_stream.h"

#include <boost/asio/write.hpp>
#include <boost/beast/websocket.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "http/websocket_options.h"

namespace anteroom::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;

namespace {
constexpr auto kWriteTimeout = std::chrono::seconds(30);  // a client that stopped reading
}  // namespace

void LiveStream::Deliver(std::string message) {
  if (ended_ || finishing_) return;
  if (filter_ != nullptr) filter_(message);
  pending_ = std::move(message);
  Pump();
}

void LiveStream::Enqueue(std::string frame) {
  if (ended_ || finishing_) return;
  queue_.push_back(std::move(frame));
  Pump();
}

void LiveStream::Finish() {
  if (ended_ || finishing_) return;
  finishing_ = true;
  Pump();
}

void LiveStream::BeginDrain() {
  net::post(executor(), [self = shared_from_this()] {
    self->drained_ = true;
    self->Finish();
  });
}

void LiveStream::Pump() {
  if (ended_ || writing_) return;
  if (!queue_.empty()) {
    in_flight_ = std::move(queue_.front());
    queue_.pop_front();
  } else if (pending_) {
    in_flight_ = std::move(*pending_);
    pending_.reset();
  } else if (heartbeat_due_) {
    heartbeat_due_ = false;
    auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    in_flight_ = fmt::format(R"({{"type":"heartbeat","time_ms":{}}})", now.count());
    if (frames_as_is_) in_flight_ = fmt::format("event: heartbeat\ndata: {}\n\n", in_flight_);
  } else {
    if (finishing_) CloseTransport(/*graceful=*/true);
    return;
  }
  writing_ = true;
  write_started_ = std::chrono::steady_clock::now();
  WriteMessage(in_flight_);
}

void LiveStream::Written(bool ok) {
  writing_ = false;
  in_flight_ = std::string();  // the next message brings its own buffer: none kept meanwhile
  if (!ok) return Ended();
  if (auto fn = std::exchange(on_first_written_, nullptr)) fn();
  bool drained = queue_.empty() && on_drained_ != nullptr;
  Pump();
  if (drained && !writing_) on_drained_();
}

void LiveStream::Ended() {
  if (ended_) return;
  ended_ = true;
  pending_.reset();
  on_first_written_ = nullptr;  // never written: whoever waited for the first message is told so
  CloseTransport(/*graceful=*/false);
  if (auto fn = std::exchange(on_closed_, nullptr)) fn();
}

void LiveStream::StartHeartbeats() {
  heartbeats_started_ = true;
  timer_.expires_after(heartbeat_);  // a wait already armed ends with operation_aborted
  timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->ended_) return;
    if (self->writing_ && std::chrono::steady_clock::now() - self->write_started_ > kWriteTimeout) {
      return self->Ended();
    }
    self->heartbeat_due_ = true;
    self->Pump();
    self->StartHeartbeats();
  });
}

void LiveStream::BoundSilence(std::chrono::milliseconds bound) {
  if (ended_) return;
  bound = std::max(bound, kMinSilenceBound);
  // Heartbeats keep data in flight, so the user timeout below always has something to time:
  // the stream ends at most bound/3 + bound/2 after the client's last acknowledgement.
  auto heartbeat = std::min(options_.heartbeat, bound / 3);
  unsigned user_timeout = static_cast<unsigned>((bound / 2).count());
  // Best effort: without the option a vanished client is still noticed, only later.
  (void)::setsockopt(TcpSocket().native_handle(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout,
                     sizeof user_timeout);
  if (heartbeat == heartbeat_) return;
  heartbeat_ = heartbeat;
  if (heartbeats_started_) StartHeartbeats();  // the wait armed with the old interval is replaced
}

// ---- WebSocket -----------------------------------------------------------------------------

namespace {

template <class Stream>
class WebSocketStream final : public LiveStream {
 public:
  WebSocketStream(Stream stream, LiveStreamOptions options)
      : LiveStream(options, stream.get_executor()), ws_(std::move(stream)) {
    ApplyWebSocketOptions(ws_);
  }

  // The HTTP connection's buffer is let go before (a client message, rare, allocates its own).
  // Frames sent before the 101 arrived would be in it: clients wait for the 101 (RFC 6455,
  // 4.1), and Beast has no way to take them after a parsed request, so they are not supported.
  void Accept(beast::http::request<beast::http::string_body> request,
              std::function<void(std::shared_ptr<LiveStream>)> ready) {
    // A client that offers the live subprotocol (to carry other offers beside it, such as a
    // credential) is answered with it, or a browser would fail the handshake.
    bool answer_subprotocol = false;
    for (std::string_view offered : OfferedSubprotocols(request)) {
      answer_subprotocol = answer_subprotocol || offered == kLiveSubprotocol;
    }
    ws_.set_option(
        websocket::stream_base::decorator([answer_subprotocol](websocket::response_type& res) {
          res.set(beast::http::field::server, "anteroom");
          if (answer_subprotocol)
            res.set(beast::http::field::sec_websocket_protocol, kLiveSubprotocol);
        }));
    auto self = std::static_pointer_cast<WebSocketStream<Stream>>(shared_from_this());
    auto req = std::make_shared<beast::http::request<beast::http::string_body>>(std::move(request));
    ws_.async_accept(*req, [self, req, ready = std::move(ready)](beast::error_code ec) {
      if (ec) return;  // the handshake failed: the socket closes with the stream
      ready(self);
      self->StartHeartbeats();
      self->Read();
    });
  }

  Executor executor() override { return ws_.get_executor(); }
  size_t BufferBytes() const override { return read_buffer_.capacity(); }

 private:
  // Reading keeps control frames (ping, pong, close) flowing; client messages are ignored.
  void Read() {
    read_buffer_.clear();
    auto self = std::static_pointer_cast<WebSocketStream<Stream>>(shared_from_this());
    ws_.async_read(read_buffer_, [self](beast::error_code ec, size_t) {
      if (ec) return self->Ended();
      self->Read();
    });
  }

  void WriteMessage(const std::string& message) override {
    auto self = std::static_pointer_cast<WebSocketStream<Stream>>(shared_from_this());
    ws_.async_write(net::buffer(message),
                    [self](beast::error_code ec, size_t) { self->Written(!ec); });
  }

  Socket& TcpSocket() override { return beast::get_lowest_layer(ws_); }

  void CloseTransport(bool graceful) override {
    StopHeartbeats();
    if (!graceful) {
      beast::error_code ignored;
      beast::get_lowest_layer(ws_).close(ignored);
      return;
    }
    if (closing_) return;
    closing_ = true;
    if (!ws_.is_open()) {
      beast::error_code ignored;
      beast::get_lowest_layer(ws_).close(ignored);
      return;
    }
    auto self = std::static_pointer_cast<WebSocketStream<Stream>>(shared_from_this());
    auto code = drained() ? websocket::close_code::service_restart : websocket::close_code::normal;
    ws_.async_close(code, [self](beast::error_code) {
      beast::error_code ignored;
      beast::get_lowest_layer(self->ws_).close(ignored);
    });
  }

  websocket::stream<Stream> ws_;
  beast::flat_buffer read_buffer_;
  bool closing_ = false;
};

// ---- Server-Sent Events --------------------------------------------------------------------

template <class Stream>
class EventStream final : public LiveStream {
 public:
  EventStream(Stream stream, unsigned http_version, LiveStreamOptions options)
      : LiveStream(options, stream.get_executor()),
        socket_(std::move(stream)),
        chunked_(http_version >= 11) {}

  void Start(std::string headers, std::function<void(std::shared_ptr<LiveStream>)> ready) {
    header_ = fmt::format(
        "HTTP/1.{} 200 OK\r\nServer: anteroom\r\nContent-Type: text/event-stream\r\n"
        "Cache-Control: no-cache, no-store\r\nX-Accel-Buffering: no\r\n{}{}\r\n",
        chunked_ ? 1 : 0, headers,
        chunked_ ? "Transfer-Encoding: chunked\r\n" : "Connection: close\r\n");
    header_ += Frame("retry: 1000\n\n");
    auto self = std::static_pointer_cast<EventStream<Stream>>(shared_from_this());
    net::async_write(socket_, net::buffer(header_),
                     [self, ready = std::move(ready)](beast::error_code ec, size_t) {
                       self->header_ = std::string();
                       if (ec) return self->Ended();
                       ready(self);
                       self->StartHeartbeats();
                       self->Read();
                     });
  }

  Executor executor() override { return socket_.get_executor(); }
  size_t BufferBytes() const override { return out_.capacity(); }

 private:
  std::string Frame(std::string_view event) const {
    if (!chunked_) return std::string(event);
    return fmt::format("{:x}\r\n{}\r\n", event.size(), event);
  }

  // Clients send nothing on an event stream; a read completes when they hang up.
  void Read() {
    auto self = std::static_pointer_cast<EventStream<Stream>>(shared_from_this());
    socket_.async_read_some(net::buffer(scratch_), [self](beast::error_code ec, size_t) {
      if (ec) return self->Ended();
      self->Read();
    });
  }

  void WriteMessage(const std::string& message) override {
    out_ = Frame(frames_as_is() ? message : fmt::format("data: {}\n\n", message));
    auto self = std::static_pointer_cast<EventStream<Stream>>(shared_from_this());
    net::async_write(socket_, net::buffer(out_),
                     [self](beast::error_code ec, size_t) { self->Written(!ec); });
  }

  Socket& TcpSocket() override { return beast::get_lowest_layer(socket_); }

  void CloseTransport(bool graceful) override {
    StopHeartbeats();
    if (!graceful) return Shut();
    if (closing_) return;
    closing_ = true;
    if (!chunked_ || !TcpSocket().is_open()) return Shut();
    // The last chunk ends the response cleanly, then the connection.
    auto self = std::static_pointer_cast<EventStream<Stream>>(shared_from_this());
    static constexpr std::string_view kLast = "0\r\n\r\n";
    net::async_write(socket_, net::buffer(kLast.data(), kLast.size()),
                     [self](beast::error_code, size_t) { self->Shut(); });
  }

  void Shut() {
    beast::error_code ignored;
    TcpSocket().shutdown(Socket::shutdown_both, ignored);
    TcpSocket().close(ignored);
  }

  Stream socket_;
  bool chunked_;
  bool closing_ = false;
  std::string header_;
  std::string out_;
  char scratch_[64];
};

template <class Stream>
void AcceptWebSocketOn(Stream stream, beast::http::request<beast::http::string_body> request,
                       LiveStreamOptions options,
                       std::function<void(std::shared_ptr<LiveStream>)> ready) {
  auto ws = std::make_shared<WebSocketStream<Stream>>(std::move(stream), options);
  ws->Accept(std::move(request), std::move(ready));
}

template <class Stream>
void StartEventStreamOn(Stream stream, unsigned http_version, LiveStreamOptions options,
                        std::string headers,
                        std::function<void(std::shared_ptr<LiveStream>)> ready) {
  auto events = std::make_shared<EventStream<Stream>>(std::move(stream), http_version, options);
  events->Start(std::move(headers), std::move(ready));
}

}  // namespace

void LiveStream::AcceptWebSocket(Socket socket, beast::flat_buffer,
                                 beast::http::request<beast::http::string_body> request,
                                 LiveStreamOptions options,
                                 std::function<void(std::shared_ptr<LiveStream>)> ready) {
  AcceptWebSocketOn(std::move(socket), std::move(request), options, std::move(ready));
}

void LiveStream::AcceptWebSocket(TlsSocket socket, beast::flat_buffer,
                                 beast::http::request<beast::http::string_body> request,
                                 LiveStreamOptions options,
                                 std::function<void(std::shared_ptr<LiveStream>)> ready) {
  AcceptWebSocketOn(std::move(socket), std::move(request), options, std::move(ready));
}

void LiveStream::StartEventStream(Socket socket, unsigned http_version, LiveStreamOptions options,
                                  std::string headers,
                                  std::function<void(std::shared_ptr<LiveStream>)> ready) {
  StartEventStreamOn(std::move(socket), http_version, options, std::move(headers),
                     std::move(ready));
}

void LiveStream::StartEventStream(TlsSocket socket, unsigned http_version,
                                  LiveStreamOptions options, std::string headers,
                                  std::function<void(std::shared_ptr<LiveStream>)> ready) {
  StartEventStreamOn(std::move(socket), http_version, options, std::move(headers),
                     std::move(ready));
}

}  // namespace anteroom::http
