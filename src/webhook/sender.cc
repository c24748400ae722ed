#include "webhook/sender.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <date/date.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "webhook/signature.h"
#include "webhook/webhook_url.h"

namespace anteroom::webhook {

namespace net = boost::asio;
namespace ssl = net::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Kind = WebhookOutcome::Kind;

struct WebhookSender::Shared {
  WebhookSenderOptions options;
  // Mutable: a TLS stream takes the context by reference; SSL_new only reads it (OpenSSL's
  // SSL_CTX is safe to share across threads once set up).
  mutable ssl::context tls{ssl::context::tls_client};
};

std::string_view OutcomeKindName(Kind kind) {
  switch (kind) {
    case Kind::kDelivered:
      return "delivered";
    case Kind::kRetry:
      return "retry";
    case Kind::kGone:
      return "gone";
    case Kind::kRefused:
      return "refused";
  }
  return "retry";
}

Kind KindOfStatus(int status) {
  if (status >= 200 && status <= 299) return Kind::kDelivered;
  if (status == 410) return Kind::kGone;
  return Kind::kRetry;
}

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "06" or " 6" style fields: `n` characters, digits after optional leading spaces.
std::optional<int> Number(std::string_view s, bool leading_space = false) {
  int v = 0;
  bool any = false;
  for (char c : s) {
    if (c == ' ' && leading_space && !any) continue;
    if (!IsDigit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
    any = true;
  }
  if (!any) return std::nullopt;
  return v;
}

std::optional<unsigned> Month(std::string_view s) {
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (unsigned i = 0; i < kMonths.size(); ++i) {
    if (s == kMonths[i]) return i + 1;
  }
  return std::nullopt;
}

// "hh:mm:ss" to seconds of the day.
std::optional<int64_t> TimeOfDay(std::string_view s) {
  if (s.size() != 8 || s[2] != ':' || s[5] != ':') return std::nullopt;
  auto h = Number(s.substr(0, 2)), m = Number(s.substr(3, 2)), sec = Number(s.substr(6, 2));
  if (!h || !m || !sec || *h > 23 || *m > 59 || *sec > 60) return std::nullopt;
  return int64_t{*h} * 3600 + *m * 60 + *sec;
}

std::optional<int64_t> UnixMs(int year, unsigned month, int day, int64_t seconds_of_day) {
  date::year_month_day ymd{date::year{year}, date::month{month},
                           date::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return std::nullopt;
  int64_t days = date::sys_days{ymd}.time_since_epoch().count();
  return (days * 86400 + seconds_of_day) * 1000;
}

// The three forms of RFC 9110 section 5.6.7, as Unix ms.
std::optional<int64_t> ParseHttpDate(std::string_view s) {
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
  if (s.size() == 29 && s[3] == ',' && s[4] == ' ' && s[7] == ' ' && s[11] == ' ' && s[16] == ' ' &&
      s.substr(25) == " GMT") {
    auto day = Number(s.substr(5, 2));
    auto month = Month(s.substr(8, 3));
    auto year = Number(s.substr(12, 4));
    auto tod = TimeOfDay(s.substr(17, 8));
    if (day && month && year && tod) return UnixMs(*year, *month, *day, *tod);
    return std::nullopt;
  }
  // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
  size_t comma = s.find(", ");
  if (comma != std::string_view::npos && s.size() == comma + 24 &&
      s.substr(s.size() - 4) == " GMT") {
    std::string_view rest = s.substr(comma + 2);
    if (rest[2] != '-' || rest[6] != '-' || rest[9] != ' ') return std::nullopt;
    auto day = Number(rest.substr(0, 2));
    auto month = Month(rest.substr(3, 3));
    auto yy = Number(rest.substr(7, 2));
    auto tod = TimeOfDay(rest.substr(10, 8));
    if (!day || !month || !yy || !tod) return std::nullopt;
    // Two-digit years: 70-99 the 1900s, 00-69 the 2000s.
    return UnixMs(*yy >= 70 ? 1900 + *yy : 2000 + *yy, *month, *day, *tod);
  }
  // asctime: "Sun Nov  6 08:49:37 1994"
  if (s.size() == 24 && s[3] == ' ' && s[7] == ' ' && s[10] == ' ' && s[19] == ' ') {
    auto month = Month(s.substr(4, 3));
    auto day = Number(s.substr(8, 2), true);
    auto tod = TimeOfDay(s.substr(11, 8));
    auto year = Number(s.substr(20, 4));
    if (day && month && year && tod) return UnixMs(*year, *month, *day, *tod);
  }
  return std::nullopt;
}

// Printable ASCII only, at most `max` bytes: what a receiver wrote, safe in a log line.
std::string Printable(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max)) {
    auto u = static_cast<unsigned char>(c);
    out.push_back(u >= 0x20 && u < 0x7f ? c : ' ');
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (s.size() > max) out += "...";
  return out;
}

// A webhook-id as the specification wants a signed id: no '.', nothing a header could not hold.
bool IsDeliveryId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigit(c) || c == '_' || c == '-' ||
           c == ':';
  });
}

constexpr size_t kSnippetBytes = 120;  // of a failed answer's body, in its error
constexpr int kMaxInterimResponses = 8;

using Strand = net::strand<net::io_context::executor_type>;
using SteadyClock = std::chrono::steady_clock;

// One connection to a destination: its stream and the strand every handler of its operations
// runs on (a delivery that reuses it runs on that strand too: the stream's executor is fixed).
struct Connection {
  explicit Connection(Strand s) : strand(std::move(s)) {}

  beast::tcp_stream& Tcp() { return tls ? tls->next_layer() : *plain; }

  // No TLS close_notify: the answer is in (or never will be), nothing more is sent.
  void Close() {
    if (!tls && !plain) return;
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Tcp().close();
  }

  // Idle and still as it was left: the server has not closed it (EOF, a reset) nor written on
  // it (a close_notify, a 408, anything unasked for: then it is not reused either).
  bool Quiet() {
    if (!tls && !plain) return false;
    if (tls && SSL_pending(tls->native_handle()) > 0) return false;
    char byte = 0;
    ssize_t n = ::recv(Tcp().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  Strand strand;
  std::optional<beast::tcp_stream> plain;
  std::optional<ssl::stream<beast::tcp_stream>> tls;
  SteadyClock::time_point opened{};
  SteadyClock::time_point idle_since{};
};

// What a kept-alive connection breaks with when the server closed it as the request went.
bool ClosedByTheServer(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::broken_pipe ||
         ec == net::error::connection_aborted || ec == ssl::error::stream_truncated;
}

std::string DestinationKey(const WebhookUrl& url) {
  return (url.https ? "https://" : "http://") + url.host + ":" + std::to_string(url.port);
}

}  // namespace

// Idle connections, least recently used first. Any thread: one mutex; the limits are small
// (tens), so scans are linear. An idle connection has no operation pending: closing it from
// any thread is safe.
class WebhookSender::Pool : public std::enable_shared_from_this<Pool> {
 public:
  Pool(net::io_context& ioc, const WebhookSenderOptions& o)
      : per_destination_(o.pool_per_destination),
        total_(o.pool_total),
        idle_for_(std::chrono::milliseconds(std::max<int64_t>(o.pool_idle_ms, 1))),
        max_age_(std::chrono::milliseconds(std::max<int64_t>(o.pool_max_age_ms, 1))),
        timer_(net::make_strand(ioc)) {}

  bool Enabled() const { return per_destination_ > 0 && total_ > 0; }

  // The most recently used idle connection to `key` that is still quiet, or null.
  std::unique_ptr<Connection> Take(const std::string& key) {
    std::lock_guard lock(mu_);
    CloseExpiredLocked(SteadyClock::now());
    for (size_t i = idle_.size(); i-- > 0;) {
      if (idle_[i].key != key) continue;
      std::unique_ptr<Connection> c = std::move(idle_[i].connection);
      idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
      if (c->Quiet()) return c;
      c->Close();
    }
    return nullptr;
  }

  // Kept for the next delivery to `key`, or closed (full, too old, the sender gone).
  void Give(std::string key, std::unique_ptr<Connection> c) {
    auto now = SteadyClock::now();
    std::lock_guard lock(mu_);
    if (closed_ || !Enabled() || now - c->opened >= max_age_) return c->Close();
    CloseExpiredLocked(now);
    c->idle_since = now;
    idle_.push_back({std::move(key), std::move(c)});
    const std::string& k = idle_.back().key;
    size_t same =
        std::count_if(idle_.begin(), idle_.end(), [&](const Idle& e) { return e.key == k; });
    if (same > per_destination_) {
      auto oldest =
          std::find_if(idle_.begin(), idle_.end(), [&](const Idle& e) { return e.key == k; });
      oldest->connection->Close();
      idle_.erase(oldest);
    }
    while (idle_.size() > total_) {
      idle_.front().connection->Close();
      idle_.erase(idle_.begin());
    }
    ArmLocked();
  }

  // The sender is going: every idle connection closed, none kept from now on.
  void CloseAll() {
    std::lock_guard lock(mu_);
    closed_ = true;
    for (Idle& e : idle_) e.connection->Close();
    idle_.clear();
    timer_.cancel();
  }

  size_t IdleCount() const {
    std::lock_guard lock(mu_);
    return idle_.size();
  }

 private:
  struct Idle {
    std::string key;
    std::unique_ptr<Connection> connection;
  };

  // Idle ones are in the order they went idle: the expired ones are at the front.
  void CloseExpiredLocked(SteadyClock::time_point now) {
    size_t n = 0;
    while (n < idle_.size() && now - idle_[n].connection->idle_since >= idle_for_) {
      idle_[n++].connection->Close();
    }
    idle_.erase(idle_.begin(), idle_.begin() + static_cast<std::ptrdiff_t>(n));
  }

  // One timer, due when the oldest idle connection expires; none when nothing is idle.
  void ArmLocked() {
    if (armed_ || closed_ || idle_.empty()) return;
    armed_ = true;
    timer_.expires_at(idle_.front().connection->idle_since + idle_for_);
    timer_.async_wait([weak = weak_from_this()](beast::error_code) {
      if (auto self = weak.lock()) self->OnTimer();
    });
  }

  void OnTimer() {
    std::lock_guard lock(mu_);
    armed_ = false;
    if (closed_) return;
    CloseExpiredLocked(SteadyClock::now());
    ArmLocked();
  }

  const size_t per_destination_;
  const size_t total_;
  const SteadyClock::duration idle_for_;
  const SteadyClock::duration max_age_;
  mutable std::mutex mu_;
  std::vector<Idle> idle_;
  net::steady_timer timer_;
  bool armed_ = false;
  bool closed_ = false;
};

namespace {

using Pool = WebhookSender::Pool;

// One attempt, alive until its last handler has run; every handler runs on its strand (a
// reused connection's, or a new one).
class Attempt : public std::enable_shared_from_this<Attempt> {
 public:
  Attempt(net::io_context& ioc, std::shared_ptr<const WebhookSender::Shared> shared,
          std::weak_ptr<Pool> pool, std::optional<WebhookUrl> url, std::string url_error,
          std::unique_ptr<Connection> reused, WebhookDelivery d,
          std::function<void(WebhookOutcome)> done)
      : shared_(std::move(shared)),
        pool_(std::move(pool)),
        parsed_url_(std::move(url)),
        url_error_(std::move(url_error)),
        delivery_(std::move(d)),
        done_(std::move(done)),
        strand_(reused ? reused->strand : net::make_strand(ioc)),
        resolver_(strand_),
        deadline_(strand_),
        conn_(std::move(reused)),
        reused_(conn_ != nullptr),
        reusable_(reused_) {}

  void Begin() {
    net::post(strand_, [self = shared_from_this()] { self->Start(); });
  }

 private:
  const WebhookSenderOptions& Options() const { return shared_->options; }

  void Start() {
    if (!parsed_url_) return Finish(Kind::kRefused, "bad URL: " + url_error_);
    url_ = std::move(*parsed_url_);
    if (!IsDeliveryId(delivery_.id)) return Finish(Kind::kRefused, "bad webhook-id");
    int64_t timestamp = delivery_.timestamp_s;
    if (timestamp <= 0) {
      timestamp = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
    }
    auto signature =
        WebhookSignatureHeader(delivery_.secrets, delivery_.id, timestamp, delivery_.body);
    if (!signature) return Finish(Kind::kRefused, "no valid signing secret");

    request_.method(http::verb::post);
    request_.target(url_.target);
    request_.version(11);
    request_.set(http::field::host, url_.host_header);
    request_.set(http::field::user_agent, Options().user_agent);
    request_.set(http::field::content_type, "application/json");
    request_.set("webhook-id", delivery_.id);
    request_.set("webhook-timestamp", std::to_string(timestamp));
    request_.set("webhook-signature", *signature);
    auto pool = pool_.lock();
    if (!pool || !pool->Enabled()) request_.set(http::field::connection, "close");
    request_.body() = std::move(delivery_.body);
    request_.prepare_payload();

    deadline_.expires_after(std::chrono::milliseconds(std::max<int64_t>(Options().timeout_ms, 1)));
    deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->OnDeadline();
    });

    if (conn_) return Write();  // kept alive: checked and connected when it was opened
    Resolve();
  }

  void Resolve() {
    if (url_.address) {
      Check({tcp::endpoint(*url_.address, url_.port)});
      return;
    }
    phase_ = "resolving the host";
    resolver_.async_resolve(
        url_.host, std::to_string(url_.port),
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
          if (self->finished_) return;
          if (ec)
            return self->Finish(Kind::kRetry, "resolving " + self->url_.host + ": " + ec.message());
          std::vector<tcp::endpoint> endpoints;
          for (const auto& entry : results) endpoints.push_back(entry.endpoint());
          self->Check(endpoints);
        });
  }

  // Only the allowed addresses are connected to, and only these: the one lookup decides.
  void Check(const std::vector<tcp::endpoint>& resolved) {
    std::vector<tcp::endpoint> allowed;
    std::string refused;
    for (const tcp::endpoint& e : resolved) {
      if (Options().allow.Allows(url_.host, e.address())) {
        allowed.push_back(e);
      } else if (refused.empty()) {
        refused = e.address().to_string() + " (" +
                  std::string(InternalRange(e.address()).value_or("internal")) + ")";
      }
    }
    if (allowed.empty()) {
      if (refused.empty()) return Finish(Kind::kRetry, "resolving " + url_.host + ": no address");
      return Finish(Kind::kRefused,
                    "destination " + refused + " is not allowed: see --webhook-allow");
    }
    Connect(std::move(allowed));
  }

  beast::tcp_stream& Tcp() { return conn_->Tcp(); }

  void Connect(std::vector<tcp::endpoint> endpoints) {
    conn_ = std::make_unique<Connection>(strand_);
    if (url_.https) {
      conn_->tls.emplace(strand_, shared_->tls);
    } else {
      conn_->plain.emplace(strand_);
    }
    conn_->opened = SteadyClock::now();
    phase_ = "connecting";
    Tcp().async_connect(
        endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
          if (self->finished_) return;
          if (ec) {
            return self->Finish(Kind::kRetry, "connecting to " + self->url_.host + ":" +
                                                  std::to_string(self->url_.port) + ": " +
                                                  ec.message());
          }
          beast::error_code ignored;
          self->Tcp().socket().set_option(tcp::no_delay(true), ignored);
          if (self->conn_->tls) return self->Handshake();
          self->Write();
        });
  }

  void Handshake() {
    auto& tls = *conn_->tls;
    SSL* ssl = tls.native_handle();
    SSL_set_min_proto_version(ssl, TLS1_2_VERSION);
    // SNI carries names only (RFC 6066): an address is verified against the certificate's
    // IP entries by host_name_verification all the same.
    if (!url_.address && SSL_set_tlsext_host_name(ssl, url_.host.c_str()) != 1) {
      return Finish(Kind::kRetry, "TLS: cannot set the server name");
    }
    tls.set_verify_mode(ssl::verify_peer);
    tls.set_verify_callback(ssl::host_name_verification(url_.host));
    phase_ = "in the TLS handshake";
    tls.async_handshake(
        ssl::stream_base::client, [self = shared_from_this()](beast::error_code ec) {
          if (self->finished_) return;
          if (ec) {
            std::string why = ec.message();
            long verify = SSL_get_verify_result(self->conn_->tls->native_handle());
            if (verify != X509_V_OK) {
              why += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
            }
            return self->Finish(Kind::kRetry, "TLS handshake with " + self->url_.host + ": " + why);
          }
          self->Write();
        });
  }

  template <class F>
  void WithStream(F&& f) {
    if (conn_->tls) {
      f(*conn_->tls);
    } else {
      f(*conn_->plain);
    }
  }

  // A kept-alive connection the server closed before any byte of its answer: the request goes
  // again on a new connection, once (a new connection is never reused_).
  bool SendAgain(const beast::error_code& ec) {
    if (!reused_ || !ClosedByTheServer(ec)) return false;
    reused_ = false;
    conn_->Close();
    retired_ = std::move(conn_);  // its last handler has run; kept for the attempt's life
    buffer_.clear();
    parser_.reset();
    Resolve();
    return true;
  }

  void Write() {
    phase_ = "sending the request";
    reusable_ = false;
    WithStream([this](auto& stream) {
      http::async_write(stream, request_,
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (self->finished_) return;
                          if (ec && self->SendAgain(ec)) return;
                          if (ec) return self->Finish(Kind::kRetry, "sending: " + ec.message());
                          self->ReadHead();
                        });
    });
  }

  void ReadHead() {
    phase_ = "waiting for the response";
    parser_.emplace();
    parser_->header_limit(kMaxResponseHeadBytes);
    parser_->body_limit(boost::none);  // the body is cut by our own count, never buffered
    WithStream([this](auto& stream) {
      http::async_read_header(stream, buffer_, *parser_,
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                if (self->finished_) return;
                                self->OnHead(ec);
                              });
    });
  }

  void OnHead(beast::error_code ec) {
    if (ec && interim_ == 0 && !parser_->got_some() && buffer_.size() == 0 && SendAgain(ec)) {
      return;
    }
    if (ec == http::error::header_limit) {
      return Finish(Kind::kRetry, "the response's head is over " +
                                      std::to_string(kMaxResponseHeadBytes) + " bytes");
    }
    if (ec) return Finish(Kind::kRetry, "reading the response: " + ec.message());
    const auto& head = parser_->get();
    int status = head.result_int();
    if (status >= 100 && status <= 199) {
      if (status == 101 || ++interim_ > kMaxInterimResponses) {
        return Finish(Kind::kRetry, "unexpected HTTP " + std::to_string(status));
      }
      return ReadHead();  // an interim answer (103 Early Hints, ...): the final one follows
    }
    status_ = status;
    if (status == 429 || status == 503) {
      auto it = head.find(http::field::retry_after);
      if (it != head.end()) {
        int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
        retry_after_ms_ = ParseRetryAfterMs(it->value(), now_ms);
      }
    }
    if (status >= 300 && status <= 399) {
      auto it = head.find(http::field::location);
      if (it != head.end()) location_ = Printable(it->value(), 200);
    }
    if (parser_->is_done()) return Answered();
    phase_ = "reading the response";
    ReadBody();
  }

  void ReadBody() {
    size_t room = Options().max_response_bytes - body_bytes_;
    if (room == 0) return Answered();  // the cap: the rest is never read
    auto& body = parser_->get().body();
    given_ = std::min(room, chunk_.size());
    body.data = chunk_.data();
    body.size = given_;
    WithStream([this](auto& stream) {
      http::async_read_some(stream, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (self->finished_) return;
                              self->OnBody(ec);
                            });
    });
  }

  void OnBody(beast::error_code ec) {
    size_t got = given_ - parser_->get().body().size;
    if (snippet_.size() < kSnippetBytes + 1) {
      snippet_.append(chunk_.data(), std::min(got, kSnippetBytes + 1 - snippet_.size()));
    }
    body_bytes_ += got;
    if (ec == http::error::need_buffer) ec = {};
    // The status is in: a body cut short (eof, a reset) does not change what it said.
    if (ec || parser_->is_done()) return Answered();
    ReadBody();
  }

  // `in_time`: not called by the deadline (when a read may still be pending).
  void Answered(bool in_time = true) {
    // Reused only after a clean end: the whole answer read (not cut at the cap), nothing read
    // past it, and the server keeping the connection (keep_alive() is false for
    // `Connection: close`, HTTP/1.0 without keep-alive, and a body ended by the close).
    reusable_ = in_time && parser_->is_done() && parser_->keep_alive() && buffer_.size() == 0;
    WebhookOutcome out;
    out.status = status_;
    out.kind = KindOfStatus(status_);
    out.retry_after_ms = retry_after_ms_;
    out.body_bytes = body_bytes_;
    if (out.kind != Kind::kDelivered) {
      out.error = "HTTP " + std::to_string(status_);
      if (status_ >= 300 && status_ <= 399) {
        out.error += ": redirect not followed";
        if (!location_.empty()) out.error += " (to " + location_ + ")";
      } else if (!snippet_.empty()) {
        std::string text = Printable(snippet_, kSnippetBytes);
        if (!text.empty()) out.error += ": " + text;
      }
    }
    Finish(std::move(out));
  }

  void OnDeadline() {
    if (finished_) return;
    reusable_ = false;                         // an operation may be pending on it
    if (status_ != 0) return Answered(false);  // the body was slow; the answer is in
    Finish(Kind::kRetry,
           "timed out after " + std::to_string(Options().timeout_ms) + " ms " + phase_);
  }

  void Finish(Kind kind, std::string error) {
    WebhookOutcome out;
    out.kind = kind;
    out.error = std::move(error);
    Finish(std::move(out));
  }

  void Finish(WebhookOutcome out) {
    if (finished_) return;
    finished_ = true;
    deadline_.cancel();
    resolver_.cancel();
    if (conn_) {
      // Reusable: nothing pending on it, so it may leave this attempt. Otherwise it is closed
      // and stays here until the attempt's last handler has run.
      std::shared_ptr<Pool> pool = reusable_ ? pool_.lock() : nullptr;
      if (pool) {
        pool->Give(DestinationKey(url_), std::move(conn_));
      } else {
        conn_->Close();
      }
    }
    auto done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::move(out));
  }

  std::shared_ptr<const WebhookSender::Shared> shared_;
  std::weak_ptr<Pool> pool_;
  std::optional<WebhookUrl> parsed_url_;
  std::string url_error_;
  WebhookDelivery delivery_;
  std::function<void(WebhookOutcome)> done_;
  Strand strand_;
  tcp::resolver resolver_;
  net::steady_timer deadline_;
  WebhookUrl url_;
  std::unique_ptr<Connection> conn_;
  std::unique_ptr<Connection> retired_;  // a kept-alive one the server had closed
  bool reused_ = false;                  // conn_ came from the pool
  bool reusable_ = false;                // conn_ may go back to the pool
  http::request<http::string_body> request_;
  beast::flat_buffer buffer_{kMaxResponseHeadBytes + 4096};
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::array<char, 4096> chunk_{};
  size_t given_ = 0;
  size_t body_bytes_ = 0;
  std::string snippet_;
  std::string location_;
  int status_ = 0;
  int interim_ = 0;
  std::optional<int64_t> retry_after_ms_;
  std::string phase_ = "starting";
  bool finished_ = false;
};

}  // namespace

std::optional<int64_t> ParseRetryAfterMs(std::string_view value, int64_t now_ms) {
  value = TrimOws(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), IsDigit)) {
    int64_t seconds = 0;
    for (char c : value) {
      seconds = seconds * 10 + (c - '0');
      if (seconds * 1000 >= kMaxRetryAfterMs) return kMaxRetryAfterMs;
    }
    return seconds * 1000;
  }
  auto at = ParseHttpDate(value);
  if (!at) return std::nullopt;
  return std::clamp<int64_t>(*at - now_ms, 0, kMaxRetryAfterMs);
}

WebhookSender::WebhookSender(net::io_context& ioc, WebhookSenderOptions options) : ioc_(ioc) {
  for (char c : options.user_agent) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) throw std::runtime_error("webhook user agent: control character");
  }
  if (options.max_response_bytes == 0) options.max_response_bytes = 1;
  auto shared = std::make_shared<Shared>();
  shared->options = std::move(options);
  const WebhookSenderOptions& o = shared->options;
  SSL_CTX* ctx = shared->tls.native_handle();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    throw std::runtime_error("webhook TLS: cannot require TLS 1.2");
  }
  shared->tls.set_options(ssl::context::default_workarounds | ssl::context::no_compression);
  try {
    if (!o.ca_file.empty()) shared->tls.load_verify_file(o.ca_file);
    if (!o.ca_dir.empty()) {
      if (!std::filesystem::is_directory(o.ca_dir)) {
        throw std::runtime_error("webhook CA directory " + o.ca_dir + " is not a directory");
      }
      shared->tls.add_verify_path(o.ca_dir);
    }
    if (o.ca_file.empty() && o.ca_dir.empty()) shared->tls.set_default_verify_paths();
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("webhook CA file " + o.ca_file + ": " + e.code().message());
  }
  shared->tls.set_verify_mode(ssl::verify_peer);
  pool_ = std::make_shared<Pool>(ioc, shared->options);
  shared_ = std::move(shared);
}

WebhookSender::~WebhookSender() { pool_->CloseAll(); }

size_t WebhookSender::IdleConnections() const { return pool_->IdleCount(); }

void WebhookSender::Send(WebhookDelivery delivery, std::function<void(WebhookOutcome)> done) {
  std::string error;
  std::optional<WebhookUrl> url = ParseWebhookUrl(delivery.url, error);
  std::unique_ptr<Connection> reused;
  if (url && pool_->Enabled()) reused = pool_->Take(DestinationKey(*url));
  std::make_shared<Attempt>(ioc_, shared_, pool_, std::move(url), std::move(error),
                            std::move(reused), std::move(delivery), std::move(done))
      ->Begin();
}

}  // namespace anteroom::webhook
