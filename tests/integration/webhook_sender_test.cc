// webhook::WebhookSender (src/webhook/sender.h) against real receivers in this process: an HTTP
// or HTTPS server on 127.0.0.1 (raw Asio; TLS with a self-signed certificate the openssl CLI
// makes per test) answering as each test says. Outcomes per status (2xx, 5xx, 410, 429 and
// 503 with Retry-After, 3xx not followed, an interim 103), the one deadline (a receiver that
// never answers), the cap on bytes read (10 MB and an endless chunked body), the allow-list
// (loopback refused, then let through by CIDR or host name, refused before any connection),
// TLS (verified against the CA file, refused without it and for a name the certificate does not
// carry), and Send from many threads at once. Kept-alive connections (one sender, several
// deliveries): reused for the same destination (plain and TLS), one connection counted by the
// receiver; an idle one the receiver closed dropped before reuse; a request on one the receiver
// closed as it arrived sent again once on a new connection (never on a new one); not reused
// after an answer over the read cap, `Connection: close`, HTTP/1.0, or past the idle time;
// idle ones at most as many as the limits say. Every wait is bounded; every server is stopped.

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/temp_dir.h"
#include "webhook/sender.h"
#include "webhook/signature.h"

namespace anteroom::webhook {
namespace {

namespace net = boost::asio;
namespace ssl = net::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Kind = WebhookOutcome::Kind;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// What a receiver answers to every request: `head` (status line, headers, blank line, maybe a
// body) as raw bytes, then `filler` `filler_times` times (or until the client hangs up when
// `endless`). `never`: the request is read and nothing is ever answered.
struct Reply {
  std::string head;
  std::string filler;
  size_t filler_times = 0;
  bool endless = false;
  bool never = false;
  bool deaf = false;   // accepts, then reads nothing and says nothing
  bool stall = false;  // after `head`, the connection is held open and nothing more is sent
  // After answering, read the next request on the connection (else: shut it down for sending).
  bool keep_alive = false;
  // With keep_alive: once a connection has had this many answers, its next request is read and
  // the connection closed without an answer (a server closing an idle connection as the
  // request arrives). -1: never.
  int hang_up_after = -1;
};

Reply Status(int status, std::string_view reason, std::string extra_headers = "",
             std::string body = "") {
  Reply r;
  r.head = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) + "\r\n" +
           extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  return r;
}

struct Received {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// A receiver on 127.0.0.1, port 0, on a thread of its own; stopped by its destructor.
class Receiver {
 public:
  explicit Receiver(Reply reply, ssl::context* tls = nullptr)
      : reply_(std::move(reply)), tls_(tls) {
    acceptor_.open(tcp::v4());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind({net::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~Receiver() {
    ioc_.stop();  // the held connections close as their handlers are destroyed
    thread_.join();
  }

  uint16_t port() const { return port_; }
  int accepted() const { return accepted_; }
  int hung_up() const { return hung_up_; }  // connections this receiver closed or shut down
  int ended() const { return ended_; }      // connections whose client closed them (keep_alive)
  size_t filler_sent() const { return filler_sent_; }
  std::vector<Received> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) return;
      ++accepted_;
      if (reply_.deaf) {
        held_.push_back(std::make_shared<tcp::socket>(std::move(socket)));
      } else if (tls_ != nullptr) {
        auto stream = std::make_shared<ssl::stream<tcp::socket>>(std::move(socket), *tls_);
        stream->async_handshake(ssl::stream_base::server, [this, stream](beast::error_code e) {
          if (!e) Serve(stream);
        });
      } else {
        Serve(std::make_shared<tcp::socket>(std::move(socket)));
      }
      Accept();
    });
  }

  // `answered`: answers already sent on this connection.
  template <class Stream>
  void Serve(std::shared_ptr<Stream> stream, std::shared_ptr<beast::flat_buffer> buffer = nullptr,
             int answered = 0) {
    if (!buffer) buffer = std::make_shared<beast::flat_buffer>();
    auto request = std::make_shared<http::request<http::string_body>>();
    http::async_read(*stream, *buffer, *request,
                     [this, stream, buffer, request, answered](beast::error_code ec, size_t) {
                       if (ec) {
                         if (answered > 0) ++ended_;
                         return;
                       }
                       Record(*request);
                       if (reply_.never) {
                         held_.push_back(stream);  // open, silent, until the receiver stops
                         return;
                       }
                       if (answered == reply_.hang_up_after) {
                         beast::error_code ignored;
                         beast::get_lowest_layer(*stream).close(ignored);
                         ++hung_up_;
                         return;
                       }
                       net::async_write(
                           *stream, net::buffer(reply_.head),
                           [this, stream, buffer, answered](beast::error_code e, size_t) {
                             if (!e) Fill(stream, buffer, answered + 1, 0);
                           });
                     });
  }

  template <class Stream>
  void Fill(std::shared_ptr<Stream> stream, std::shared_ptr<beast::flat_buffer> buffer,
            int answered, size_t done) {
    if (reply_.stall) {
      held_.push_back(stream);
      return;
    }
    if (reply_.filler.empty() || (!reply_.endless && done == reply_.filler_times)) {
      if (reply_.keep_alive) return Serve(stream, buffer, answered);
      beast::error_code ignored;
      beast::get_lowest_layer(*stream).shutdown(tcp::socket::shutdown_send, ignored);
      ++hung_up_;
      return;
    }
    net::async_write(*stream, net::buffer(reply_.filler),
                     [this, stream, buffer, answered, done](beast::error_code ec, size_t n) {
                       filler_sent_ += n;
                       if (!ec) Fill(stream, buffer, answered, done + 1);
                     });
  }

  void Record(const http::request<http::string_body>& request) {
    Received r;
    r.method = std::string(request.method_string());
    r.target = std::string(request.target());
    for (const auto& field : request) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = std::string(field.value());
    }
    r.body = request.body();
    std::lock_guard lock(mu_);
    requests_.push_back(std::move(r));
  }

  Reply reply_;
  ssl::context* tls_ = nullptr;
  net::io_context ioc_;
  tcp::acceptor acceptor_{ioc_};
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<int> accepted_{0};
  std::atomic<size_t> filler_sent_{0};
  std::atomic<int> hung_up_{0};
  std::atomic<int> ended_{0};
  std::vector<std::shared_ptr<void>> held_;  // the receiver's thread only
  mutable std::mutex mu_;
  std::vector<Received> requests_;
};

struct Result {
  WebhookOutcome out;
  int calls = 0;
  int64_t ms = 0;
};

// One Send on a fresh io_context, run here until its callback (bounded); then the sender goes
// (and its idle connection with it) and the io_context runs until it has nothing left.
Result SendOne(WebhookSenderOptions options, WebhookDelivery delivery) {
  net::io_context ioc;
  Result r;
  auto start = SteadyClock::now();
  {
    WebhookSender sender(ioc, std::move(options));
    sender.Send(std::move(delivery), [&](WebhookOutcome out) {
      r.out = std::move(out);
      ++r.calls;
      r.ms = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count();
    });
    auto until = start + std::chrono::seconds(30);
    while (r.calls == 0 && SteadyClock::now() < until) ioc.run_one_until(until);
  }
  ioc.run_for(std::chrono::seconds(10));
  return r;
}

// One sender on an io_context of its own thread, for several deliveries in a row; each Send
// waits for its callback (bounded).
class KeptSender {
 public:
  explicit KeptSender(WebhookSenderOptions options) {
    sender_.emplace(ioc_, std::move(options));
    thread_ = std::thread([this] { ioc_.run(); });
  }
  ~KeptSender() {
    sender_.reset();  // its idle connections closed, its timer cancelled
    guard_.reset();
    thread_.join();
  }

  Result Send(WebhookDelivery delivery) {
    auto results = SendAll({std::move(delivery)});
    return results.at(0);
  }

  // All at once; returns when every callback has run (or after 30 s).
  std::vector<Result> SendAll(std::vector<WebhookDelivery> deliveries) {
    auto state = std::make_shared<State>();
    state->results.resize(deliveries.size());
    auto start = SteadyClock::now();
    for (size_t i = 0; i < deliveries.size(); ++i) {
      sender_->Send(std::move(deliveries[i]), [state, i, start](WebhookOutcome out) {
        std::lock_guard lock(state->mu);
        Result& r = state->results[i];
        r.out = std::move(out);
        ++r.calls;
        r.ms = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count();
        ++state->done;
        state->cv.notify_all();
      });
    }
    std::unique_lock lock(state->mu);
    state->cv.wait_for(lock, std::chrono::seconds(30),
                       [&] { return state->done == deliveries.size(); });
    return state->results;
  }

  size_t idle() const { return sender_->IdleConnections(); }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    size_t done = 0;
    std::vector<Result> results;
  };
  net::io_context ioc_;
  net::executor_work_guard<net::io_context::executor_type> guard_ = net::make_work_guard(ioc_);
  std::optional<WebhookSender> sender_;
  std::thread thread_;
};

// Waits (bounded) until `f()` holds.
template <class F>
bool Eventually(F f, milliseconds within = milliseconds(10'000)) {
  auto until = SteadyClock::now() + within;
  while (!f()) {
    if (SteadyClock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

constexpr std::string_view kBody =
    R"({"type":"room.admitted","timestamp":"2026-11-27T15:00:00.000Z","data":{"room":"drop"}})";

WebhookDelivery DeliveryTo(const std::string& url, std::vector<std::string> secrets = {}) {
  WebhookDelivery d;
  d.url = url;
  d.id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W";
  d.timestamp_s = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  d.body = std::string(kBody);
  d.secrets = secrets.empty() ? std::vector<std::string>{NewWebhookSecret()} : std::move(secrets);
  return d;
}

WebhookSenderOptions Loopback(std::vector<std::string> allow = {"127.0.0.1/32"}) {
  WebhookSenderOptions o;
  std::string error;
  auto list = WebhookAllowList::Parse(allow, error);
  EXPECT_TRUE(list) << error;
  if (list) o.allow = std::move(*list);
  o.timeout_ms = 10'000;
  return o;
}

std::string Url(const Receiver& r, std::string_view path = "/hooks/anteroom?src=test",
                std::string_view host = "127.0.0.1", std::string_view scheme = "http") {
  return std::string(scheme) + "://" + std::string(host) + ":" + std::to_string(r.port()) +
         std::string(path);
}

TEST(WebhookSender, TwoHundredIsDeliveredSignedAsTheSpecificationSays) {
  Receiver receiver(Status(200, "OK", "", "thanks"));
  std::vector<std::string> secrets = {NewWebhookSecret(), NewWebhookSecret()};  // a rotation
  WebhookDelivery d = DeliveryTo(Url(receiver), secrets);
  WebhookSenderOptions options = Loopback();
  options.user_agent = "anteroom-test/1";
  Result r = SendOne(options, d);
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  EXPECT_EQ(r.out.status, 200);
  EXPECT_EQ(r.out.error, "");
  EXPECT_EQ(r.out.retry_after_ms, std::nullopt);
  EXPECT_EQ(r.out.body_bytes, 6u);

  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  const Received& got = requests[0];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.target, "/hooks/anteroom?src=test");
  EXPECT_EQ(got.body, kBody);
  EXPECT_EQ(got.headers.at("host"), "127.0.0.1:" + std::to_string(receiver.port()));
  EXPECT_EQ(got.headers.at("content-type"), "application/json");
  EXPECT_EQ(got.headers.at("content-length"), std::to_string(kBody.size()));
  EXPECT_EQ(got.headers.at("user-agent"), "anteroom-test/1");
  EXPECT_EQ(got.headers.at("webhook-id"), d.id);
  EXPECT_EQ(got.headers.at("webhook-timestamp"), std::to_string(d.timestamp_s));
  std::string signature = got.headers.at("webhook-signature");
  EXPECT_EQ(signature, *SignWebhook(secrets[0], d.id, d.timestamp_s, kBody) + " " +
                           *SignWebhook(secrets[1], d.id, d.timestamp_s, kBody));
}

TEST(WebhookSender, ZeroTimestampMeansNow) {
  Receiver receiver(Status(204, "No Content"));
  WebhookDelivery d = DeliveryTo(Url(receiver));
  d.timestamp_s = 0;
  int64_t before = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  Result r = SendOne(Loopback(), d);
  EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  int64_t sent = std::stoll(requests[0].headers.at("webhook-timestamp"));
  EXPECT_GE(sent, before);
  EXPECT_LE(sent, before + 30);
  EXPECT_EQ(requests[0].headers.at("webhook-signature"),
            *SignWebhook(d.secrets[0], d.id, sent, kBody));
}

TEST(WebhookSender, ServerErrorIsRetriedWithWhatTheReceiverSaid) {
  Receiver receiver(Status(500, "Internal Server Error", "", "database\r\nis down\x01"));
  Result r = SendOne(Loopback(), DeliveryTo(Url(receiver)));
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 500);
  EXPECT_EQ(r.out.error, "HTTP 500: database  is down");
  EXPECT_EQ(r.out.retry_after_ms, std::nullopt);
}

TEST(WebhookSender, GoneDisablesTheEndpoint) {
  Receiver receiver(Status(410, "Gone"));
  Result r = SendOne(Loopback(), DeliveryTo(Url(receiver)));
  EXPECT_EQ(r.out.kind, Kind::kGone);
  EXPECT_EQ(r.out.status, 410);
  EXPECT_EQ(r.out.error, "HTTP 410");
}

TEST(WebhookSender, OtherClientErrorsAreRetried) {
  Receiver receiver(Status(404, "Not Found"));
  Result r = SendOne(Loopback(), DeliveryTo(Url(receiver)));
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 404);
}

TEST(WebhookSender, TooManyRequestsCarriesRetryAfter) {
  Receiver receiver(Status(429, "Too Many Requests", "Retry-After: 7\r\n"));
  Result r = SendOne(Loopback(), DeliveryTo(Url(receiver)));
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 429);
  EXPECT_EQ(r.out.retry_after_ms, 7000);
}

TEST(WebhookSender, UnavailableCarriesRetryAfterAsADate) {
  std::time_t at = std::time(nullptr) + 120;
  char date[64];
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", std::gmtime(&at));
  Receiver receiver(
      Status(503, "Service Unavailable", "Retry-After: " + std::string(date) + "\r\n"));
  Result r = SendOne(Loopback(), DeliveryTo(Url(receiver)));
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 503);
  ASSERT_TRUE(r.out.retry_after_ms);
  EXPECT_GT(*r.out.retry_after_ms, 100'000);
  EXPECT_LE(*r.out.retry_after_ms, 120'000);
}

TEST(WebhookSender, RedirectsAreNotFollowed) {
  Receiver receiver(
      Status(308, "Permanent Redirect", "Location: http://169.254.169.254/latest\r\n"));
  Result r = SendOne(Loopback(), DeliveryTo(Url(receiver)));
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 308);
  EXPECT_EQ(r.out.error, "HTTP 308: redirect not followed (to http://169.254.169.254/latest)");
  EXPECT_EQ(receiver.accepted(), 1);
  EXPECT_EQ(receiver.requests().size(), 1u);
}

TEST(WebhookSender, InterimAnswersAreSkipped) {
  Reply reply = Status(202, "Accepted");
  reply.head = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" + reply.head;
  Receiver receiver(reply);
  Result r = SendOne(Loopback(), DeliveryTo(Url(receiver)));
  EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  EXPECT_EQ(r.out.status, 202);
}

TEST(WebhookSender, AReceiverThatNeverAnswersTimesOutWithinTheBound) {
  Reply silent;
  silent.never = true;
  Receiver receiver(silent);
  WebhookSenderOptions options = Loopback();
  options.timeout_ms = 700;
  Result r = SendOne(options, DeliveryTo(Url(receiver)));
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 0);
  EXPECT_EQ(r.out.error, "timed out after 700 ms waiting for the response");
  EXPECT_GE(r.ms, 650);
  EXPECT_LT(r.ms, 3000);
  EXPECT_EQ(receiver.requests().size(), 1u);  // it was sent; the answer never came
}

TEST(WebhookSender, AnAnswerWhoseBodyStallsCountsAtTheDeadline) {
  Reply stalled;
  stalled.head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc";
  stalled.stall = true;
  Receiver receiver(stalled);
  WebhookSenderOptions options = Loopback();
  options.timeout_ms = 500;
  Result r = SendOne(options, DeliveryTo(Url(receiver)));
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;  // the receiver said 200
  EXPECT_EQ(r.out.status, 200);
  EXPECT_EQ(r.out.body_bytes, 3u);
  EXPECT_GE(r.ms, 450);
  EXPECT_LT(r.ms, 3000);
}

TEST(WebhookSender, AHandshakeThatNeverEndsTimesOutWithinTheBound) {
  Reply deaf;
  deaf.deaf = true;
  Receiver receiver(deaf);
  WebhookSenderOptions options = Loopback();
  options.timeout_ms = 500;
  Result r = SendOne(options, DeliveryTo(Url(receiver, "/", "127.0.0.1", "https")));
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.error, "timed out after 500 ms in the TLS handshake");
  EXPECT_GE(r.ms, 450);
  EXPECT_LT(r.ms, 3000);
}

TEST(WebhookSender, TenMegabytesAreNotRead) {
  Reply big = Status(200, "OK");
  big.head = "HTTP/1.1 200 OK\r\nContent-Length: 10485760\r\n\r\n";
  big.filler.assign(64 * 1024, 'x');
  big.filler_times = 160;  // 10 MiB
  Receiver receiver(big);
  WebhookSenderOptions options = Loopback();
  options.max_response_bytes = 64 * 1024;
  Result r = SendOne(options, DeliveryTo(Url(receiver)));
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  EXPECT_EQ(r.out.body_bytes, 64u * 1024);
  EXPECT_LT(r.ms, 5000);
}

TEST(WebhookSender, AnEndlessBodyIsCutAtTheCap) {
  Reply endless;
  endless.head = "HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n";
  endless.filler = "1000\r\n" + std::string(0x1000, 'y') + "\r\n";
  endless.endless = true;
  Receiver receiver(endless);
  WebhookSenderOptions options = Loopback();
  options.max_response_bytes = 10'000;
  Result r = SendOne(options, DeliveryTo(Url(receiver)));
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 500);
  EXPECT_EQ(r.out.body_bytes, 10'000u);
  EXPECT_EQ(r.out.error, "HTTP 500: " + std::string(120, 'y') + "...");
  EXPECT_LT(r.ms, 5000);
}

TEST(WebhookSender, AnOversizedHeadIsRefused) {
  Reply huge = Status(200, "OK", "X-Padding: " + std::string(20'000, 'p') + "\r\n");
  Receiver receiver(huge);
  Result r = SendOne(Loopback(), DeliveryTo(Url(receiver)));
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 0);
  EXPECT_NE(r.out.error.find("head is over"), std::string::npos) << r.out.error;
}

TEST(WebhookSender, LoopbackIsRefusedUnlessAllowed) {
  Receiver receiver(Status(200, "OK"));
  Result refused = SendOne(Loopback({}), DeliveryTo(Url(receiver)));
  EXPECT_EQ(refused.out.kind, Kind::kRefused);
  EXPECT_EQ(refused.out.status, 0);
  EXPECT_EQ(refused.out.error,
            "destination 127.0.0.1 (loopback) is not allowed: see --webhook-allow");
  Result mapped = SendOne(Loopback({}), DeliveryTo(Url(receiver, "/", "[::ffff:127.0.0.1]")));
  EXPECT_EQ(mapped.out.kind, Kind::kRefused) << mapped.out.error;
  Result other = SendOne(Loopback({"10.0.0.0/8", "127.0.0.2/32"}), DeliveryTo(Url(receiver)));
  EXPECT_EQ(other.out.kind, Kind::kRefused);
  EXPECT_EQ(receiver.accepted(), 0);  // refused before any connection

  Result allowed = SendOne(Loopback({"127.0.0.1/32"}), DeliveryTo(Url(receiver)));
  EXPECT_EQ(allowed.out.kind, Kind::kDelivered) << allowed.out.error;
  EXPECT_EQ(receiver.accepted(), 1);
}

TEST(WebhookSender, AHostNameIsAllowedByNameAfterOneResolution) {
  Receiver receiver(Status(200, "OK"));
  Result refused = SendOne(Loopback({}), DeliveryTo(Url(receiver, "/", "localhost")));
  EXPECT_EQ(refused.out.kind, Kind::kRefused);
  EXPECT_NE(refused.out.error.find("(loopback) is not allowed"), std::string::npos)
      << refused.out.error;
  // localhost may resolve to ::1 first: the receiver listens on 127.0.0.1 only, and the
  // sender tries the next allowed address.
  Result allowed = SendOne(Loopback({"localhost"}), DeliveryTo(Url(receiver, "/", "LocalHost")));
  EXPECT_EQ(allowed.out.kind, Kind::kDelivered) << allowed.out.error;
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].headers.at("host"), "localhost:" + std::to_string(receiver.port()));
}

TEST(WebhookSender, BadDeliveriesAreRefusedWithoutAConnection) {
  Receiver receiver(Status(200, "OK"));
  struct Case {
    WebhookDelivery d;
    std::string error;
  };
  std::vector<Case> cases;
  cases.push_back({DeliveryTo("ftp://127.0.0.1/"), "bad URL: the scheme must be http or https"});
  cases.push_back({DeliveryTo("http://user:pw@127.0.0.1:" + std::to_string(receiver.port()) + "/"),
                   "bad URL: a user name or password is not allowed in the URL"});
  cases.push_back({DeliveryTo(Url(receiver), {"whsec_tooshort"}), "no valid signing secret"});
  cases.push_back({DeliveryTo(Url(receiver)), "bad webhook-id"});
  cases.back().d.id = "msg.with.dots";
  cases.push_back({DeliveryTo(Url(receiver)), "bad webhook-id"});
  cases.back().d.id = "msg\r\nX-Injected: 1";
  for (Case& c : cases) {
    Result r = SendOne(Loopback(), c.d);
    ASSERT_EQ(r.calls, 1);
    EXPECT_EQ(r.out.kind, Kind::kRefused) << c.d.url;
    EXPECT_EQ(r.out.error, c.error);
  }
  EXPECT_EQ(receiver.accepted(), 0);
}

TEST(WebhookSender, ARefusedConnectionIsRetried) {
  uint16_t port = 0;
  {
    Receiver gone(Status(200, "OK"));
    port = gone.port();
  }
  Result r = SendOne(Loopback(), DeliveryTo("http://127.0.0.1:" + std::to_string(port) + "/"));
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 0);
  EXPECT_NE(r.out.error.find("connecting to 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << r.out.error;
}

TEST(WebhookSender, SendFromManyThreadsCallsBackOnceEach) {
  Receiver receiver(Status(200, "OK"));
  net::io_context ioc;
  auto guard = net::make_work_guard(ioc);
  std::vector<std::thread> io;
  for (int i = 0; i < 2; ++i) io.emplace_back([&ioc] { ioc.run(); });
  constexpr int kThreads = 4, kEach = 10;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, delivered = 0;
  {
    WebhookSender sender(ioc, Loopback());
    std::vector<std::thread> senders;
    for (int t = 0; t < kThreads; ++t) {
      senders.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          WebhookDelivery d = DeliveryTo(Url(receiver));
          d.id = "msg_" + std::to_string(t) + "_" + std::to_string(i);
          sender.Send(std::move(d), [&](WebhookOutcome out) {
            std::lock_guard lock(mu);
            ++done;
            if (out.kind == Kind::kDelivered) ++delivered;
            cv.notify_all();
          });
        }
      });
    }
    for (auto& t : senders) t.join();
  }  // the sender goes; its deliveries in flight finish all the same
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(30), [&] { return done == kThreads * kEach; }));
    EXPECT_EQ(delivered, kThreads * kEach);
  }
  guard.reset();
  for (auto& t : io) t.join();
  EXPECT_EQ(done, kThreads * kEach);
  EXPECT_EQ(receiver.requests().size(), static_cast<size_t>(kThreads * kEach));
}

Reply KeptAlive(Reply r) {
  r.keep_alive = true;
  return r;
}

WebhookDelivery Numbered(const std::string& url, int n) {
  WebhookDelivery d = DeliveryTo(url);
  d.id = "msg_" + std::to_string(n);
  return d;
}

std::vector<std::string> Ids(const Receiver& receiver) {
  std::vector<std::string> ids;
  for (const Received& r : receiver.requests()) ids.push_back(r.headers.at("webhook-id"));
  return ids;
}

TEST(WebhookSenderKeepAlive, SequentialDeliveriesShareOneConnection) {
  Receiver receiver(KeptAlive(Status(200, "OK", "", "thanks")));
  KeptSender sender(Loopback());
  for (int i = 0; i < 3; ++i) {
    Result r = sender.Send(Numbered(Url(receiver), i));
    ASSERT_EQ(r.calls, 1);
    EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
    EXPECT_EQ(r.out.body_bytes, 6u);
    EXPECT_EQ(sender.idle(), 1u);
  }
  EXPECT_EQ(receiver.accepted(), 1);
  EXPECT_EQ(Ids(receiver), (std::vector<std::string>{"msg_0", "msg_1", "msg_2"}));
  for (const Received& got : receiver.requests()) {
    EXPECT_EQ(got.headers.count("connection"), 0u);  // HTTP/1.1's default: kept alive
  }
  EXPECT_EQ(receiver.ended(), 0);
}

TEST(WebhookSenderKeepAlive, EachDestinationKeepsItsOwn) {
  Receiver sized(KeptAlive(Status(200, "OK", "", "thanks")));
  Reply chunked;
  chunked.head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nthanks\r\n0\r\n\r\n";
  Receiver streamed(KeptAlive(chunked));
  KeptSender sender(Loopback());
  for (int i = 0; i < 2; ++i) {
    for (Receiver* receiver : {&sized, &streamed}) {
      Result r = sender.Send(Numbered(Url(*receiver), i));
      EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
      EXPECT_EQ(r.out.body_bytes, 6u);
    }
  }
  EXPECT_EQ(sized.accepted(), 1);
  EXPECT_EQ(streamed.accepted(), 1);
  EXPECT_EQ(sized.requests().size(), 2u);
  EXPECT_EQ(streamed.requests().size(), 2u);
  EXPECT_EQ(sender.idle(), 2u);
}

TEST(WebhookSenderKeepAlive, AnIdleConnectionTheReceiverClosedIsNotUsed) {
  Receiver receiver(Status(204, "No Content"));  // answers, then closes the connection
  KeptSender sender(Loopback());
  EXPECT_EQ(sender.Send(Numbered(Url(receiver), 0)).out.kind, Kind::kDelivered);
  ASSERT_TRUE(Eventually([&] { return receiver.hung_up() == 1; }));
  std::this_thread::sleep_for(milliseconds(50));  // its FIN across loopback
  Result r = sender.Send(Numbered(Url(receiver), 1));
  EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  EXPECT_EQ(receiver.accepted(), 2);
  EXPECT_EQ(Ids(receiver), (std::vector<std::string>{"msg_0", "msg_1"}));  // seen closed: unused
}

TEST(WebhookSenderKeepAlive, ARequestTheReceiverHungUpOnIsSentAgainOnANewConnection) {
  Reply reply = KeptAlive(Status(204, "No Content"));
  reply.hang_up_after = 1;  // one answer per connection; the next request read, then a close
  Receiver receiver(reply);
  KeptSender sender(Loopback());
  for (int i = 0; i < 3; ++i) {
    Result r = sender.Send(Numbered(Url(receiver), i));
    ASSERT_EQ(r.calls, 1);
    EXPECT_EQ(r.out.kind, Kind::kDelivered) << i << ": " << r.out.error;
    EXPECT_EQ(r.out.status, 204);
  }
  // msg_1 reached the first connection as it closed, and went again on a second; msg_2 the same.
  EXPECT_EQ(receiver.accepted(), 3);
  EXPECT_EQ(receiver.hung_up(), 2);
  EXPECT_EQ(Ids(receiver), (std::vector<std::string>{"msg_0", "msg_1", "msg_1", "msg_2", "msg_2"}));
}

TEST(WebhookSenderKeepAlive, ANewConnectionClosedUnansweredIsNotSentAgain) {
  Reply reply = KeptAlive(Status(204, "No Content"));
  reply.hang_up_after = 0;
  Receiver receiver(reply);
  KeptSender sender(Loopback());
  Result r = sender.Send(Numbered(Url(receiver), 0));
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 0);
  EXPECT_NE(r.out.error.find("reading the response: "), std::string::npos) << r.out.error;
  EXPECT_EQ(receiver.accepted(), 1);
  EXPECT_EQ(receiver.requests().size(), 1u);
}

TEST(WebhookSenderKeepAlive, AnAnswerOverTheReadCapIsNotReused) {
  Receiver over(KeptAlive(Status(200, "OK", "", std::string(5000, 'x'))));
  Receiver within(KeptAlive(Status(200, "OK", "", std::string(1000, 'x'))));
  WebhookSenderOptions options = Loopback();
  options.max_response_bytes = 1000;
  KeptSender sender(options);
  for (int i = 0; i < 2; ++i) {
    Result r = sender.Send(Numbered(Url(over), i));
    EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
    EXPECT_EQ(r.out.body_bytes, 1000u);
    EXPECT_EQ(sender.idle(), 0u);
  }
  EXPECT_EQ(over.accepted(), 2);
  EXPECT_TRUE(Eventually([&] { return over.ended() == 2; }));  // each closed by the sender
  for (int i = 0; i < 2; ++i) {
    Result r = sender.Send(Numbered(Url(within), i));
    EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
    EXPECT_EQ(r.out.body_bytes, 1000u);
  }
  EXPECT_EQ(within.accepted(), 1);  // exactly the cap, all of it read: kept
}

TEST(WebhookSenderKeepAlive, ConnectionCloseFromTheReceiverIsHonoured) {
  // Each of these receivers keeps its connections open: the sender must be the one to close.
  Receiver says_close(KeptAlive(Status(200, "OK", "Connection: close\r\n")));
  Reply old_reply;
  old_reply.head = "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
  Receiver old(KeptAlive(old_reply));
  Reply old_kept_reply;
  old_kept_reply.head = "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
  Receiver old_kept(KeptAlive(old_kept_reply));
  KeptSender sender(Loopback());
  for (int i = 0; i < 2; ++i) {
    for (Receiver* receiver : {&says_close, &old, &old_kept}) {
      Result r = sender.Send(Numbered(Url(*receiver), i));
      EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
    }
  }
  EXPECT_EQ(says_close.accepted(), 2);
  EXPECT_EQ(old.accepted(), 2);
  EXPECT_EQ(old_kept.accepted(), 1);  // HTTP/1.0 that asks for keep-alive
  EXPECT_TRUE(Eventually([&] { return says_close.ended() == 2 && old.ended() == 2; }));
  EXPECT_EQ(sender.idle(), 1u);
}

TEST(WebhookSenderKeepAlive, ABodyEndedByTheCloseIsNotKept) {
  Reply reply;
  reply.head = "HTTP/1.1 200 OK\r\n\r\nthanks";  // no length: the close ends it
  Receiver receiver(reply);
  KeptSender sender(Loopback());
  Result r = sender.Send(Numbered(Url(receiver), 0));
  EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  EXPECT_EQ(r.out.body_bytes, 6u);
  EXPECT_EQ(sender.idle(), 0u);
}

TEST(WebhookSenderKeepAlive, AnIdleConnectionIsClosedAfterTheIdleTime) {
  Receiver receiver(KeptAlive(Status(204, "No Content")));
  WebhookSenderOptions options = Loopback();
  options.pool_idle_ms = 300;
  KeptSender sender(options);
  EXPECT_EQ(sender.Send(Numbered(Url(receiver), 0)).out.kind, Kind::kDelivered);
  auto idle_from = SteadyClock::now();
  EXPECT_EQ(sender.idle(), 1u);
  // Closed by the sender's own timer: no delivery needed.
  ASSERT_TRUE(Eventually([&] { return receiver.ended() == 1; }));
  EXPECT_GE(SteadyClock::now() - idle_from, milliseconds(250));
  EXPECT_EQ(sender.idle(), 0u);
  EXPECT_EQ(sender.Send(Numbered(Url(receiver), 1)).out.kind, Kind::kDelivered);
  EXPECT_EQ(receiver.accepted(), 2);
}

TEST(WebhookSenderKeepAlive, IdleConnectionsStayWithinTheLimits) {
  Receiver a(KeptAlive(Status(204, "No Content")));
  Receiver b(KeptAlive(Status(204, "No Content")));
  WebhookSenderOptions options = Loopback();
  options.pool_per_destination = 2;
  options.pool_total = 3;
  KeptSender sender(options);
  // Three at once: none idle when they start, so three connections.
  auto results = sender.SendAll({Numbered(Url(a), 0), Numbered(Url(a), 1), Numbered(Url(a), 2)});
  for (const Result& r : results) EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  EXPECT_EQ(a.accepted(), 3);
  EXPECT_EQ(sender.idle(), 2u);  // per destination
  EXPECT_TRUE(Eventually([&] { return a.ended() == 1; }));
  results = sender.SendAll({Numbered(Url(b), 0), Numbered(Url(b), 1), Numbered(Url(b), 2)});
  for (const Result& r : results) EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  EXPECT_EQ(b.accepted(), 3);
  // In all 3: an idle one of a's (the least recently used) closed; per destination 2: one of b's.
  EXPECT_EQ(sender.idle(), 3u);
  EXPECT_TRUE(Eventually([&] { return a.ended() == 2 && b.ended() == 1; }));
}

TEST(WebhookSenderKeepAlive, NothingIsKeptWhenThePoolIsOff) {
  Receiver receiver(KeptAlive(Status(204, "No Content")));
  WebhookSenderOptions options = Loopback();
  options.pool_per_destination = 0;
  KeptSender sender(options);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(sender.Send(Numbered(Url(receiver), i)).out.kind, Kind::kDelivered);
  }
  EXPECT_EQ(receiver.accepted(), 2);
  for (const Received& got : receiver.requests()) EXPECT_EQ(got.headers.at("connection"), "close");
  EXPECT_EQ(sender.idle(), 0u);
}

// HTTPS against a certificate made for this test: CN and subjectAltName "localhost" only.
class WebhookSenderTls : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    cert_ = (dir_.path() / "cert.pem").string();
    key_ = (dir_.path() / "key.pem").string();
    std::string command =
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-subj /CN=localhost -addext subjectAltName=DNS:localhost -keyout " +
        key_ + " -out " + cert_ + " >" + (dir_.path() / "openssl.log").string() + " 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << testing::ReadFile(dir_.path() / "openssl.log");
    server_.use_certificate_chain_file(cert_);
    server_.use_private_key_file(key_, ssl::context::pem);
  }

  testing::TempDir dir_{"webhook-tls"};
  std::string cert_, key_;
  ssl::context server_{ssl::context::tls_server};
};

TEST_F(WebhookSenderTls, VerifiedAgainstTheCaFile) {
  Receiver receiver(Status(200, "OK"), &server_);
  WebhookSenderOptions options = Loopback({"localhost"});
  options.ca_file = cert_;
  Result r = SendOne(options, DeliveryTo(Url(receiver, "/tls", "localhost", "https")));
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target, "/tls");
  EXPECT_EQ(requests[0].body, kBody);
}

TEST_F(WebhookSenderTls, RefusedWithoutTheCa) {
  Receiver receiver(Status(200, "OK"), &server_);
  WebhookSenderOptions options = Loopback({"localhost"});  // OpenSSL's default trust store
  Result r = SendOne(options, DeliveryTo(Url(receiver, "/tls", "localhost", "https")));
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_EQ(r.out.status, 0);
  EXPECT_NE(r.out.error.find("certificate verify failed"), std::string::npos) << r.out.error;
  EXPECT_NE(r.out.error.find("self-signed"), std::string::npos) << r.out.error;
  EXPECT_TRUE(receiver.requests().empty());
}

TEST_F(WebhookSenderTls, RefusedForANameTheCertificateDoesNotCarry) {
  Receiver receiver(Status(200, "OK"), &server_);
  WebhookSenderOptions options = Loopback({"127.0.0.1/32"});
  options.ca_file = cert_;
  Result r = SendOne(options, DeliveryTo(Url(receiver, "/tls", "127.0.0.1", "https")));
  EXPECT_EQ(r.out.kind, Kind::kRetry);
  EXPECT_NE(r.out.error.find("certificate verify failed"), std::string::npos) << r.out.error;
  EXPECT_TRUE(receiver.requests().empty());
}

TEST_F(WebhookSenderTls, AKeptConnectionSkipsTheHandshake) {
  Receiver receiver(KeptAlive(Status(200, "OK")), &server_);
  WebhookSenderOptions options = Loopback({"localhost"});
  options.ca_file = cert_;
  KeptSender sender(options);
  for (int i = 0; i < 3; ++i) {
    Result r = sender.Send(Numbered(Url(receiver, "/tls", "localhost", "https"), i));
    EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  }
  EXPECT_EQ(receiver.accepted(), 1);
  EXPECT_EQ(receiver.requests().size(), 3u);
}

TEST_F(WebhookSenderTls, ARequestTheReceiverHungUpOnIsSentAgain) {
  Reply reply = KeptAlive(Status(200, "OK"));
  reply.hang_up_after = 1;  // closed without a close_notify
  Receiver receiver(reply, &server_);
  WebhookSenderOptions options = Loopback({"localhost"});
  options.ca_file = cert_;
  KeptSender sender(options);
  for (int i = 0; i < 2; ++i) {
    Result r = sender.Send(Numbered(Url(receiver, "/tls", "localhost", "https"), i));
    EXPECT_EQ(r.out.kind, Kind::kDelivered) << r.out.error;
  }
  EXPECT_EQ(receiver.accepted(), 2);
  EXPECT_EQ(Ids(receiver), (std::vector<std::string>{"msg_0", "msg_1", "msg_1"}));
}

TEST_F(WebhookSenderTls, AnUnreadableCaFileIsAStartUpError) {
  net::io_context ioc;
  WebhookSenderOptions options;
  options.ca_file = (dir_.path() / "missing.pem").string();
  EXPECT_THROW(WebhookSender(ioc, options), std::runtime_error);
  options.ca_file.clear();
  options.ca_dir = (dir_.path() / "missing").string();
  EXPECT_THROW(WebhookSender(ioc, options), std::runtime_error);
}

}  // namespace
}  // namespace anteroom::webhook
