#include "http/tls_stream.h"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/system/system_error.hpp>

#include <openssl/bio.h>
#include <openssl/err.h>

#include <sys/socket.h>
#include <sys/types.h>

#include <cerrno>

namespace anteroom::http {

namespace net = boost::asio;

namespace {

// The BIO between OpenSSL and the socket. SSL_set_fd's socket BIO would do the same but for two
// things that would change what the server does:
// - it writes with write(2): a write to a connection its peer reset raises SIGPIPE, which the
//   server does not ignore (Asio sends with MSG_NOSIGNAL); here send(2) with MSG_NOSIGNAL;
// - it tells OpenSSL 3 of an EOF (BIO_eof), which makes an EOF without close_notify a fatal
//   error, a decode_error alert sent and the session unusable. Asio's stream never showed OpenSSL
//   the EOF (its BIO pair just ran dry) and reported stream_truncated itself, after which the
//   connection could still write its answer: this BIO keeps the EOF to itself (BIO_CTRL_EOF is
//   0) and TlsStream::Result reports it the same way.
}  // namespace

struct TlsStream::BioState {
  int fd = -1;
  bool eof = false;    // a read of this call found the end of the stream
  int last_errno = 0;  // a failed recv or send of this call, for SSL_ERROR_SYSCALL
};

namespace {

using BioState = TlsStream::BioState;

BioState& StateOf(BIO* bio) { return *static_cast<BioState*>(BIO_get_data(bio)); }

int BioWrite(BIO* bio, const char* data, size_t size, size_t* written) {
  BioState& state = StateOf(bio);
  BIO_clear_retry_flags(bio);
  ssize_t n = ::send(state.fd, data, size, MSG_NOSIGNAL);
  if (n >= 0) {
    *written = static_cast<size_t>(n);
    return 1;
  }
  state.last_errno = errno;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(bio);
  return 0;
}

int BioRead(BIO* bio, char* data, size_t size, size_t* read) {
  BioState& state = StateOf(bio);
  BIO_clear_retry_flags(bio);
  ssize_t n = ::recv(state.fd, data, size, 0);
  if (n > 0) {
    *read = static_cast<size_t>(n);
    return 1;
  }
  if (n == 0) {
    state.eof = true;
    return 0;
  }
  state.last_errno = errno;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_read(bio);
  return 0;
}

long BioCtrl(BIO* bio, int cmd, long, void* ptr) {  // NOLINT(google-runtime-int): OpenSSL's type
  switch (cmd) {
    case BIO_CTRL_FLUSH:
    case BIO_CTRL_DUP:
      return 1;
    case BIO_C_GET_FD:
      if (ptr != nullptr) *static_cast<int*>(ptr) = StateOf(bio).fd;
      return StateOf(bio).fd;
    default:  // BIO_CTRL_EOF among them: see above
      return 0;
  }
}

int BioCreate(BIO* bio) {
  BIO_set_data(bio, new BioState);
  BIO_set_init(bio, 1);
  return 1;
}

int BioDestroy(BIO* bio) {
  delete static_cast<BioState*>(BIO_get_data(bio));
  BIO_set_data(bio, nullptr);
  return 1;
}

BIO_METHOD* SocketBioMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "anteroom socket");
    if (m == nullptr) return m;
    BIO_meth_set_write_ex(m, BioWrite);
    BIO_meth_set_read_ex(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    BIO_meth_set_create(m, BioCreate);
    BIO_meth_set_destroy(m, BioDestroy);
    return m;
  }();
  return method;
}

[[noreturn]] void ThrowSslError(const char* what) {
  boost::system::error_code ec(static_cast<int>(ERR_get_error()), net::error::get_ssl_category());
  ERR_clear_error();
  throw boost::system::system_error(ec, what);
}

}  // namespace

TlsStream::TlsStream(Socket socket, net::ssl::context& context)
    : socket_(std::move(socket)), ssl_(SSL_new(context.native_handle())) {
  if (!ssl_) ThrowSslError("SSL_new");
  // As ssl::stream sets them, but for SSL_MODE_RELEASE_BUFFERS: with its BIO pair and engine
  // buffers (some 68 KiB a connection, kept) gone, the two record buffers kept here (some 34 KiB)
  // are less memory than before, and are not freed and allocated again for every record.
  // Partial writes: SSL_write_ex returns after each record. Moving buffer: a record retried
  // after SSL_ERROR_WANT_WRITE may come from a buffer at another address, with the same bytes.
  SSL_set_mode(ssl_.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Read what the socket has (up to a record's buffer) in one recv, not a record's header and
  // then its body in two: SSL_has_pending tells what is left in the buffer.
  SSL_set_read_ahead(ssl_.get(), 1);
  BIO* bio = SocketBioMethod() != nullptr ? BIO_new(SocketBioMethod()) : nullptr;
  if (bio == nullptr) ThrowSslError("BIO_new");
  bio_ = &StateOf(bio);
  bio_->fd = socket_.native_handle();
  SSL_set_bio(ssl_.get(), bio, bio);
  error_code ignored;  // a socket already closed fails at its handshake
  socket_.non_blocking(true, ignored);
}

void TlsStream::shutdown(error_code& ec) {
  if (TryShutdown(ec) != Want::kNothing) ec = net::error::would_block;
}

TlsStream::Want TlsStream::TryHandshake(error_code& ec) {
  ERR_clear_error();
  ClearBio();
  int ret = SSL_do_handshake(ssl_.get());
  if (ret == 1) {
    ec = {};
    return Want::kNothing;
  }
  return Result(ret, ec);
}

TlsStream::Want TlsStream::TryRead(void* data, size_t size, size_t& n, error_code& ec) {
  ERR_clear_error();
  ClearBio();
  n = 0;
  if (SSL_read_ex(ssl_.get(), data, size, &n) == 1) {
    ec = {};
    return Want::kNothing;
  }
  n = 0;
  return Result(0, ec);
}

TlsStream::Want TlsStream::TryWrite(const void* data, size_t size, size_t& n, error_code& ec) {
  ERR_clear_error();
  ClearBio();
  n = 0;
  if (SSL_write_ex(ssl_.get(), data, size, &n) == 1) {
    ec = {};
    return Want::kNothing;
  }
  n = 0;
  return Result(0, ec);
}

// As ssl::stream's: close_notify sent, then the peer's waited for (a second SSL_shutdown).
TlsStream::Want TlsStream::TryShutdown(error_code& ec) {
  ERR_clear_error();
  ClearBio();
  int ret = SSL_shutdown(ssl_.get());
  if (ret == 0) ret = SSL_shutdown(ssl_.get());
  if (ret == 1) {
    ec = {};
    return Want::kNothing;
  }
  return Result(ret, ec);
}

// A failed call: what it waits for, or its error as ssl::stream reports it.
void TlsStream::ClearBio() {
  bio_->eof = false;
  bio_->last_errno = 0;
}

TlsStream::Want TlsStream::Result(int ret, error_code& ec) {
  const BioState& bio = *bio_;
  int error = SSL_get_error(ssl_.get(), ret);
  ec = {};
  switch (error) {
    case SSL_ERROR_WANT_READ:
      return Want::kRead;
    case SSL_ERROR_WANT_WRITE:
      return Want::kWrite;
    case SSL_ERROR_ZERO_RETURN:  // close_notify
      ec = net::error::eof;
      break;
    case SSL_ERROR_SYSCALL: {
      unsigned long code = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
      if (code != 0) {
        ec = error_code(static_cast<int>(code), net::error::get_ssl_category());
      } else if (bio.eof) {
        // The connection ended: cleanly only after the peer's close_notify.
        ec = (SSL_get_shutdown(ssl_.get()) & SSL_RECEIVED_SHUTDOWN) != 0
                 ? error_code(net::error::eof)
                 : error_code(net::ssl::error::stream_truncated);
      } else if (bio.last_errno != 0) {
        ec = error_code(bio.last_errno, net::error::get_system_category());
      } else {
        ec = net::ssl::error::unspecified_system_error;
      }
      break;
    }
    case SSL_ERROR_SSL: {
      unsigned long code = ERR_get_error();  // NOLINT(google-runtime-int): OpenSSL's type
      ec = ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING
               ? error_code(net::ssl::error::stream_truncated)
               : error_code(static_cast<int>(code), net::error::get_ssl_category());
      break;
    }
    default:
      ec = net::ssl::error::unexpected_result;
      break;
  }
  ERR_clear_error();  // the error read, the rest of the queue goes with it
  return Want::kNothing;
}

void TlsStream::Disarm(Want want, error_code ec) {
  size_t direction = want == Want::kRead ? 0 : 1;
  waiting_[direction] = false;
  if (parked_[direction].empty()) return;
  auto parked = std::move(parked_[direction]);
  parked_[direction].clear();
  for (auto& handler : parked) {
    net::post(get_executor(),
              [handler = std::move(handler), ec]() mutable { std::move(handler)(ec); });
  }
}

void teardown(boost::beast::role_type role, TlsStream& stream, boost::system::error_code& ec) {
  stream.shutdown(ec);
  boost::system::error_code ec2;
  boost::beast::websocket::teardown(role, stream.next_layer(), ec ? ec2 : ec);
}

}  // namespace anteroom::http
