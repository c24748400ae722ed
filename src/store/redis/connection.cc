#include "store/redis/connection.h"

#include <hiredis/hiredis.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "store/redis/redis_tls.h"

namespace anteroom::store::redis {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {
constexpr std::chrono::milliseconds kMaxBackoff{2000};
constexpr size_t kReadChunk = 64 * 1024;

}  // namespace

// One TLS session over the connection's socket, with the deadline of its handshake.
struct Connection::TlsStream {
  TlsStream(tcp::socket& socket, std::shared_ptr<asio::ssl::context> from)
      : context(std::move(from)), stream(socket, *context), deadline(socket.get_executor()) {}
  std::shared_ptr<asio::ssl::context> context;  // kept while the session lives: SIGHUP replaces
  asio::ssl::stream<tcp::socket&> stream;
  asio::steady_timer deadline;
};

int64_t Reply::AsInt() const {
  if (type == Type::kInteger) return integer;
  int64_t v = 0;
  if (type == Type::kString || type == Type::kStatus) {
    std::from_chars(str.data(), str.data() + str.size(), v);
  }
  return v;
}

const Reply& Reply::at(size_t i) const {
  static const Reply kNilReply;
  return i < elements.size() ? elements[i] : kNilReply;
}

std::string FormatCommand(const std::vector<std::string_view>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  long long len =
      redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), lens.data());
  if (len < 0) return {};
  std::string out(cmd, static_cast<size_t>(len));
  redisFreeCommand(cmd);
  return out;
}

Connection::Connection(asio::io_context& io, Endpoint endpoint, ConnectionOptions options)
    : io_(io),
      endpoint_(std::move(endpoint)),
      options_(std::move(options)),
      resolver_(io),
      socket_(io),
      retry_timer_(io),
      connect_deadline_(io),
      watchdog_(io),
      in_(kReadChunk) {}

Connection::~Connection() = default;

void Connection::Start() {
  if (state_ == State::kDown && !retry_pending_) Connect();
}

void Connection::Close() {
  Fail("the connection was closed");
  state_ = State::kClosed;
  retry_timer_.cancel();
  connect_deadline_.cancel();
  watchdog_.cancel();
}

void Connection::Connect() {
  state_ = State::kConnecting;
  uint64_t gen = generation_;
  auto self = shared_from_this();
  connect_deadline_.expires_after(std::chrono::milliseconds(options_.timeout_ms));
  connect_deadline_.async_wait([this, self, gen](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || state_ != State::kConnecting) return;
    Fail(fmt::format("no connection within {} ms", options_.timeout_ms));
  });
  resolver_.async_resolve(
      endpoint_.host, std::to_string(endpoint_.port),
      [this, self, gen](const boost::system::error_code& ec, tcp::resolver::results_type results) {
        if (gen != generation_ || state_ != State::kConnecting) return;
        if (ec) return Fail("cannot resolve " + endpoint_.host + ": " + ec.message());
        asio::async_connect(
            socket_, results,
            [this, self, gen](const boost::system::error_code& ec2, const tcp::endpoint&) {
              if (gen != generation_ || state_ != State::kConnecting) return;
              connect_deadline_.cancel();  // the TLS handshake has a deadline of its own
              if (ec2) return Fail(ec2.message());
              socket_.set_option(tcp::no_delay(true));
              if (options_.tls) return StartTls(gen);
              Up();
            });
      });
}

// A fresh session per connection (a failed one is not reused), its handshake bounded by the
// command timeout: a server that never answers it (a plain port, a hung Redis) fails like one
// that does not answer a command.
void Connection::StartTls(uint64_t gen) {
  tls_ = std::make_shared<TlsStream>(socket_, options_.tls->Current());
  if (!ExpectServer(tls_->stream.native_handle(), endpoint_.host)) {
    return Fail("TLS: cannot expect the server name " + endpoint_.host);
  }
  auto self = shared_from_this();
  auto tls = tls_;
  tls->deadline.expires_after(std::chrono::milliseconds(options_.timeout_ms));
  tls->deadline.async_wait([this, self, gen](const boost::system::error_code& ec) {
    if (ec || gen != generation_ || state_ != State::kConnecting) return;
    TlsFailed(fmt::format("no answer within {} ms", options_.timeout_ms));
  });
  tls->stream.async_handshake(
      asio::ssl::stream_base::client, [this, self, gen, tls](const boost::system::error_code& ec) {
        tls->deadline.cancel();
        if (gen != generation_ || state_ != State::kConnecting) return;
        if (ec == asio::ssl::error::stream_truncated ||
            (ec && ec.category() != asio::error::get_ssl_category())) {
          // The transport failed under the handshake (a Redis restarting): not TLS's doing.
          return Fail("TLS handshake cut: " + ec.message());
        }
        if (ec) return TlsFailed(HandshakeFailure(tls->stream.native_handle(), ec.message()));
        if (TlsProblemIsNews(fmt::format("{}:{}", endpoint_.host, endpoint_.port), "")) {
          spdlog::info("redis at {}:{}: TLS handshake succeeded", endpoint_.host, endpoint_.port);
        }
        Up();
      });
}

// Logged here, once while it lasts: callers only see "unavailable", and a wrong CA or name is
// an operator's mistake that retrying will not mend.
void Connection::TlsFailed(const std::string& why) {
  std::string what = "TLS handshake failed: " + why;
  if (TlsProblemIsNews(fmt::format("{}:{}", endpoint_.host, endpoint_.port), what)) {
    spdlog::error("redis at {}:{}: {}", endpoint_.host, endpoint_.port, what);
  }
  Fail(what);
}

void Connection::Up() {
  state_ = State::kUp;
  backoff_ = std::chrono::milliseconds(100);
  Handshake();
  Read();
  Flush();
}

// AUTH and SELECT go first; commands queued while connecting follow them in the pipeline.
void Connection::Handshake() {
  std::string queued = std::move(out_);
  out_.clear();
  std::deque<Pending> waiting = std::move(pending_);
  pending_.clear();
  auto now = std::chrono::steady_clock::now();
  auto check = [this](const char* what) {
    return [this, what](Reply r) {
      if (r.type == Reply::Type::kError) Fail(fmt::format("redis refused {}: {}", what, r.str));
    };
  };
  if (!options_.password.empty()) {
    if (options_.user.empty()) {
      out_ += FormatCommand({"AUTH", options_.password});
    } else {
      out_ += FormatCommand({"AUTH", options_.user, options_.password});
    }
    pending_.push_back({check("the password"), now});
  }
  if (options_.db != 0) {
    out_ += FormatCommand({"SELECT", std::to_string(options_.db)});
    pending_.push_back({check("SELECT"), now});
  }
  if (on_up_) on_up_();  // may queue commands of its own (SUBSCRIBE)
  out_ += queued;
  for (auto& p : waiting) pending_.push_back(std::move(p));
  ArmWatchdog();
}

void Connection::Send(std::string resp, Callback cb) {
  if (state_ == State::kClosed) return cb(Reply::Transport("the connection is closed"));
  if (state_ == State::kDown) {
    if (!retry_pending_) {
      Connect();
    } else {
      return cb(Reply::Transport(fmt::format("redis at {}:{} is unavailable ({}); reconnecting",
                                             endpoint_.host, endpoint_.port, problem_)));
    }
  }
  out_ += resp;
  pending_.push_back({std::move(cb), std::chrono::steady_clock::now()});
  if (state_ == State::kUp) {
    Flush();
    ArmWatchdog();
  }
}

void Connection::Flush() {
  if (write_busy_ || out_.empty() || state_ != State::kUp) return;
  write_busy_ = true;
  writing_.swap(out_);
  out_.clear();
  uint64_t gen = generation_;
  auto self = shared_from_this();
  if (tls_) {
    asio::async_write(tls_->stream, asio::buffer(writing_),
                      [this, self, gen, tls = tls_](const boost::system::error_code& ec, size_t) {
                        Written(gen, ec);
                      });
  } else {
    asio::async_write(
        socket_, asio::buffer(writing_),
        [this, self, gen](const boost::system::error_code& ec, size_t) { Written(gen, ec); });
  }
}

void Connection::Written(uint64_t gen, const boost::system::error_code& ec) {
  if (gen != generation_) return;
  write_busy_ = false;
  writing_.clear();
  if (ec) return Fail("write failed: " + ec.message());
  Flush();
}

void Connection::Read() {
  uint64_t gen = generation_;
  auto self = shared_from_this();
  if (tls_) {
    tls_->stream.async_read_some(
        asio::buffer(in_),
        [this, self, gen, tls = tls_](const boost::system::error_code& ec, size_t n) {
          // asio hands over one TLS record a read, and Redis sends one record per batch of answers:
          // the records already here are read too, so that the callbacks they answer send their
          // next commands together, as one record, rather than one record each (7x the cost).
          if (!ec && gen == generation_) {
            n += ReadBuffered(tls->stream.native_handle(), in_.data() + n, in_.size() - n);
          }
          Received(gen, ec, n);
        });
  } else {
    socket_.async_read_some(
        asio::buffer(in_),
        [this, self, gen](const boost::system::error_code& ec, size_t n) { Received(gen, ec, n); });
  }
}

void Connection::Received(uint64_t gen, const boost::system::error_code& ec, size_t n) {
  if (gen != generation_) return;
  if (ec) {
    // A TLS peer that hangs up without close_notify (Redis does) reads as stream_truncated.
    return Fail(ec == asio::error::eof || ec == asio::ssl::error::stream_truncated
                    ? "redis closed the connection"
                    : "read failed: " + ec.message());
  }
  if (!reader_.Feed(std::string_view(in_.data(), n))) return Fail("bad reply from redis");
  while (gen == generation_) {
    Reply reply;
    auto next = reader_.Next(reply);
    if (next == ReplyReader::Result::kError) {
      return Fail("bad reply from redis: " + reader_.error());
    }
    if (next == ReplyReader::Result::kNeedMore) break;
    Dispatch(std::move(reply));
  }
  if (gen == generation_) Read();
}

void Connection::Dispatch(Reply reply) {
  if (on_message_ && reply.type == Reply::Type::kArray && reply.elements.size() == 3 &&
      (reply.elements[0].str == "message" || reply.elements[0].str == "smessage")) {
    on_message_(reply.elements[1].str, reply.elements[2].str);
    return;
  }
  if (pending_.empty()) return;  // an unsolicited reply: nothing waits for it
  Callback cb = std::move(pending_.front().cb);
  pending_.pop_front();
  cb(std::move(reply));
}

void Connection::ArmWatchdog() {
  if (watchdog_armed_ || pending_.empty() || on_message_) return;  // subscribers idle by design
  watchdog_armed_ = true;
  auto self = shared_from_this();
  watchdog_.expires_after(
      std::chrono::milliseconds(std::max<int64_t>(options_.timeout_ms / 4, 10)));
  watchdog_.async_wait([this, self](const boost::system::error_code& ec) {
    watchdog_armed_ = false;
    if (ec || state_ != State::kUp) return;
    if (!pending_.empty() && std::chrono::steady_clock::now() - pending_.front().sent >
                                 std::chrono::milliseconds(options_.timeout_ms)) {
      return Fail(fmt::format("redis did not answer within {} ms", options_.timeout_ms));
    }
    ArmWatchdog();
  });
}

void Connection::Fail(const std::string& why) {
  if (state_ == State::kClosed) return;
  ++generation_;
  problem_ = why;
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  // Its operations still pending hold it until they finish (aborted by the close).
  tls_.reset();
  resolver_.cancel();
  reader_.Reset();
  out_.clear();
  writing_.clear();
  write_busy_ = false;
  state_ = State::kDown;
  std::deque<Pending> failed = std::move(pending_);
  pending_.clear();
  std::string what = fmt::format("redis at {}:{}: {}", endpoint_.host, endpoint_.port, why);
  // Reconnect after a backoff; until then commands fail at once.
  retry_pending_ = true;
  auto self = shared_from_this();
  retry_timer_.expires_after(backoff_);
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  retry_timer_.async_wait([this, self](const boost::system::error_code& ec) {
    retry_pending_ = false;
    if (ec || state_ != State::kDown) return;
    Connect();
  });
  for (auto& p : failed) p.cb(Reply::Transport(what));
}

}  // namespace anteroom::store::redis
