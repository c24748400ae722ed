#pragma once
// TLS on the listener, OpenSSL driven on the non-blocking socket itself.
//
// Why not boost::asio::ssl::stream: it runs OpenSSL over a BIO pair, so every record is copied
// once more each way between the pair and Asio's own buffers, and every read and write goes
// through its engine's layers of operations, and each connection keeps those buffers: 101 KiB
// of server memory per idle TLS connection against 65 KiB here (docs/benchmarks.md, "TLS on
// the listener"; CPU per request measures alike, within this machine's noise). Here
// SSL_read_ex and SSL_write_ex read and write the socket directly (a BIO of ours over
// recv/send, see tls_stream.cc for why not SSL_set_fd's), and the socket's readiness is waited
// for with async_wait when OpenSSL asks for it (SSL_ERROR_WANT_READ / SSL_ERROR_WANT_WRITE).
//
// A drop-in for what HttpConnection and LiveStream use of ssl::stream<Socket>: async_handshake,
// async_read_some, a non-blocking read_some, async_write_some, async_shutdown, native_handle(),
// next_layer() (so beast::get_lowest_layer finds the socket), and Beast's WebSocket teardown
// customization points (teardown / async_teardown, found by ADL). Errors are those Asio's stream
// gives: eof for a close_notify, ssl::error::stream_truncated for a connection that ends without
// one, the socket's system errors, and OpenSSL's errors in Asio's ssl category.
//
// Concurrency, as with any Asio stream: at most one read-side operation (read, handshake,
// shutdown) and one write operation at once, all on the socket's executor (one thread). Either
// may find OpenSSL wanting the other direction: SSL_read_ex may have to write (a TLS 1.3
// KeyUpdate answered, an alert) and SSL_write_ex may have to read. Each direction has at most one
// wait on the socket in flight: an operation that needs a direction already waited for by the
// other parks, and is resumed (posted) when that wait ends, to try again.
//
// Moving a stream with operations in flight is not supported (nor is it for ssl::stream).

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/beast/core/role.hpp>
#include <boost/beast/websocket/teardown.hpp>
#include <boost/system/error_code.hpp>

#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "http/tcp_socket.h"

namespace anteroom::http {

class TlsStream {
 public:
  using executor_type = Socket::executor_type;
  using next_layer_type = Socket;
  using lowest_layer_type = Socket::lowest_layer_type;
  using error_code = boost::system::error_code;
  struct BioState;  // tls_stream.cc: the socket BIO's own state

  // What an SSL call needs before it can go on: nothing (done, or failed: see the error code),
  // the socket readable, or the socket writable.
  enum class Want : uint8_t { kNothing, kRead, kWrite };

  // The socket is made non-blocking: OpenSSL reads and writes it directly.
  TlsStream(Socket socket, boost::asio::ssl::context& context);
  TlsStream(TlsStream&& other) noexcept = default;
  TlsStream& operator=(TlsStream&& other) noexcept = default;
  ~TlsStream() = default;

  executor_type get_executor() noexcept { return socket_.get_executor(); }
  SSL* native_handle() noexcept { return ssl_.get(); }
  Socket& next_layer() noexcept { return socket_; }
  const Socket& next_layer() const noexcept { return socket_; }
  lowest_layer_type& lowest_layer() noexcept { return socket_.lowest_layer(); }

  template <class Token>
  auto async_handshake(boost::asio::ssl::stream_base::handshake_type type, Token&& token) {
    if (type == boost::asio::ssl::stream_base::server) {
      SSL_set_accept_state(ssl_.get());
    } else {
      SSL_set_connect_state(ssl_.get());
    }
    return boost::asio::async_compose<Token, void(error_code)>(Op<HandshakeStep>(*this, {}), token,
                                                               socket_);
  }

  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    return boost::asio::async_compose<Token, void(error_code, size_t)>(
        Op<ReadStep>(*this, ReadStep{FirstBuffer(buffers)}), token, socket_);
  }

  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    return boost::asio::async_compose<Token, void(error_code, size_t)>(
        Op<WriteStep>(*this, PrepareWrite(buffers)), token, socket_);
  }

  // Sends close_notify, then waits for the peer's (as ssl::stream's async_shutdown).
  template <class Token>
  auto async_shutdown(Token&& token) {
    return boost::asio::async_compose<Token, void(error_code)>(Op<ShutdownStep>(*this, {}), token,
                                                               socket_);
  }

  // Non-blocking: what is already decrypted or readable now, or would_block.
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, error_code& ec) {
    boost::asio::mutable_buffer b = FirstBuffer(buffers);
    ec = {};
    if (b.size() == 0) return 0;
    size_t n = 0;
    if (write_blocked_) {  // see Op::Attempt
      ec = boost::asio::error::would_block;
      return 0;
    }
    if (TryRead(b.data(), b.size(), n, ec) != Want::kNothing) {
      ec = boost::asio::error::would_block;
      return 0;
    }
    return n;
  }

  // Non-blocking: sends close_notify if the socket takes it now; does not wait for the peer's.
  void shutdown(error_code& ec);

 private:
  // One attempt of each SSL call, with the error queue cleared before and read on failure.
  Want TryHandshake(error_code& ec);
  Want TryRead(void* data, size_t size, size_t& n, error_code& ec);
  Want TryWrite(const void* data, size_t size, size_t& n, error_code& ec);
  Want TryShutdown(error_code& ec);
  Want Result(int ret, error_code& ec);
  void ClearBio();

  // The socket's readiness. Arm: true when the caller is to wait on the socket (no one else
  // does); false when it parks behind the wait in flight. Disarm: that wait ended; whoever
  // parked behind it tries again.
  bool Arm(Want want) {
    bool& waiting = waiting_[want == Want::kRead ? 0 : 1];
    if (waiting) return false;
    waiting = true;
    return true;
  }
  void Disarm(Want want, error_code ec);
  template <class Self>
  void Park(Want want, Self&& self) {
    parked_[want == Want::kRead ? 0 : 1].emplace_back(std::forward<Self>(self));
  }

  template <class MutableBuffers>
  static boost::asio::mutable_buffer FirstBuffer(const MutableBuffers& buffers) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      boost::asio::mutable_buffer b(*it);
      if (b.size() > 0) return b;
    }
    return {};
  }

  // One TLS record per write where it can: a sequence of buffers (Beast's serializer, a
  // WebSocket frame's header and payload) is copied into one buffer of up to a record's worth
  // and written with one SSL_write_ex, rather than a record (and a send) per buffer. A first
  // buffer of a record or more is written as it is.
  struct WriteStep;
  template <class ConstBuffers>
  WriteStep PrepareWrite(const ConstBuffers& buffers);

  // The steps of the four operations, driven by Op: `Try` attempts once, `Complete` calls the
  // handler. A completion found at the first attempt is posted first (an operation never calls
  // its handler inside its initiation).
  struct HandshakeStep {
    bool Empty() const { return false; }
    Want Try(TlsStream& s, error_code& ec) { return s.TryHandshake(ec); }
    void Complete(auto& self, error_code ec) { self.complete(ec); }
  };
  struct ShutdownStep {
    bool Empty() const { return false; }
    Want Try(TlsStream& s, error_code& ec) { return s.TryShutdown(ec); }
    void Complete(auto& self, error_code ec) { self.complete(ec); }
  };
  struct ReadStep {
    boost::asio::mutable_buffer buffer;
    size_t n = 0;
    bool Empty() const { return buffer.size() == 0; }
    Want Try(TlsStream& s, error_code& ec) {
      return s.TryRead(buffer.data(), buffer.size(), n, ec);
    }
    void Complete(auto& self, error_code ec) { self.complete(ec, ec ? 0 : n); }
  };
  struct WriteStep {
    const char* data = nullptr;
    size_t size = 0;
    size_t done = 0;
    bool Empty() const { return size == 0; }
    // Loops over records until the buffer is written: a record OpenSSL could not send whole
    // must be retried with the same bytes, so the operation ends only when none is pending.
    Want Try(TlsStream& s, error_code& ec) {
      while (done < size) {
        size_t n = 0;
        Want want = s.TryWrite(data + done, size - done, n, ec);
        if (want != Want::kNothing || ec) return want;
        done += n;
      }
      return Want::kNothing;
    }
    void Complete(auto& self, error_code ec) { self.complete(ec, done); }
  };

  template <class Step>
  struct Op {
    Op(TlsStream& stream, Step first) : s(stream), step(std::move(first)) {}

    TlsStream& s;
    Step step;
    enum class State : uint8_t { kStart, kWaiting, kPosted } state = State::kStart;
    Want waited = Want::kNothing;
    bool armed = false;  // this operation's wait is the one on the socket (not parked)
    error_code result;

    template <class Self>
    void operator()(Self& self, error_code ec = {}) {
      if (state == State::kPosted) return step.Complete(self, result);
      if (state == State::kWaiting) {
        if (armed) s.Disarm(waited, ec);
        if constexpr (std::is_same_v<Step, WriteStep>) s.write_blocked_ = false;
        if (ec) return step.Complete(self, ec);  // cancelled or closed
      }
      // An empty buffer completes at once, as on Asio's streams.
      Want want = step.Empty() ? Want::kNothing : Attempt();
      if (want == Want::kNothing) {
        if (state == State::kStart) {
          state = State::kPosted;
          return boost::asio::post(std::move(self));
        }
        return step.Complete(self, result);
      }
      // A write that wants the socket writable has a record half sent (see Attempt).
      if constexpr (std::is_same_v<Step, WriteStep>) s.write_blocked_ = want == Want::kWrite;
      state = State::kWaiting;
      waited = want;
      armed = s.Arm(want);
      if (armed) {
        s.socket_.async_wait(want == Want::kRead ? Socket::wait_read : Socket::wait_write,
                             std::move(self));
      } else {
        s.Park(want, std::move(self));
      }
    }

    Want Attempt() {
      // While a write waits with a record half sent, OpenSSL must not be asked to read: a read
      // that has to write (a KeyUpdate answered) would find that record in its way and fail the
      // connection (SSL_R_BAD_WRITE_RETRY). It waits behind the write's wait instead.
      if constexpr (!std::is_same_v<Step, WriteStep>) {
        if (s.write_blocked_) return Want::kWrite;
      }
      // A read at the start, when OpenSSL holds no unread bytes, waits for the socket first
      // instead of trying recv: on a kept-alive connection the next request is rarely there
      // yet, and the wait (an epoll_ctl that reports data already there too) replaces the
      // recv that would fail, as Asio's own speculative read does for plain sockets.
      if constexpr (std::is_same_v<Step, ReadStep>) {
        if (state == State::kStart && SSL_has_pending(s.ssl_.get()) == 0 &&
            SSL_is_init_finished(s.ssl_.get())) {
          return Want::kRead;
        }
      }
      return step.Try(s, result);
    }
  };

  struct SslFree {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
  };

  Socket socket_;
  std::unique_ptr<SSL, SslFree> ssl_;
  BioState* bio_ = nullptr;           // owned by the BIO, which ssl_ owns
  std::unique_ptr<char[]> coalesce_;  // WriteStep's copy of a buffer sequence, made on first use
  bool waiting_[2] = {false, false};  // a wait on the socket in flight: readable, writable
  bool write_blocked_ = false;        // a write waits, its record in OpenSSL half sent
  std::vector<boost::asio::any_completion_handler<void(error_code)>> parked_[2];
};

inline constexpr size_t kTlsRecordPayload = 16 * 1024;  // TLS's largest record plaintext

template <class ConstBuffers>
TlsStream::WriteStep TlsStream::PrepareWrite(const ConstBuffers& buffers) {
  auto begin = boost::asio::buffer_sequence_begin(buffers);
  auto end = boost::asio::buffer_sequence_end(buffers);
  boost::asio::const_buffer first;
  size_t pieces = 0;
  for (auto it = begin; it != end && pieces < 2; ++it) {
    boost::asio::const_buffer b(*it);
    if (b.size() == 0) continue;
    if (pieces++ == 0) first = b;
  }
  if (pieces < 2 || first.size() >= kTlsRecordPayload) {
    return {static_cast<const char*>(first.data()), first.size()};
  }
  if (!coalesce_) coalesce_ = std::make_unique<char[]>(kTlsRecordPayload);
  size_t copied = boost::asio::buffer_copy(
      boost::asio::mutable_buffer(coalesce_.get(), kTlsRecordPayload), buffers);
  return {coalesce_.get(), copied};
}

// Beast's WebSocket teardown, as for ssl::stream (boost/beast/websocket/ssl.hpp): close_notify
// both ways, then the TCP teardown of the socket.
void teardown(boost::beast::role_type role, TlsStream& stream, boost::system::error_code& ec);

namespace detail {
struct TlsTeardownOp {
  TlsStream& s;
  boost::beast::role_type role;
  int step = 0;
  boost::system::error_code shutdown_ec = {};
  template <class Self>
  void operator()(Self& self, boost::system::error_code ec = {}) {
    switch (step) {
      case 0:
        step = 1;
        return s.async_shutdown(std::move(self));
      case 1:
        step = 2;
        shutdown_ec = ec;
        return boost::beast::websocket::async_teardown(role, s.next_layer(), std::move(self));
      default:
        self.complete(shutdown_ec ? shutdown_ec : ec);
    }
  }
};
}  // namespace detail

template <class TeardownHandler>
void async_teardown(boost::beast::role_type role, TlsStream& stream, TeardownHandler&& handler) {
  boost::asio::async_compose<TeardownHandler, void(boost::system::error_code)>(
      detail::TlsTeardownOp{stream, role}, handler, stream.next_layer());
}

}  // namespace anteroom::http
