// `anteroom-bench rooms`: a load generator like redis-benchmark. Pre-joins N sessions, then
// drives check-ins over C keep-alive connections for S seconds (loopback only, bounded) and
// prints one JSON line.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "anteroom/client.hpp"
#include "load/kit.h"
#include "load/load.h"

namespace anteroom::load {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct BenchRoomsFlags {
  std::string room = "bench";
  int64_t sessions = 10'000;
  int connections = 64;
  double duration_s = 10;
  int threads = 1;
  int64_t capacity = 100;
  int pipeline = 1;  // requests each connection sends before reading the answers
};

struct Shared {
  std::string host;
  std::string room;
  int64_t sessions;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> errors{0};
  SteadyClock::time_point deadline;
  int64_t limit = -1;  // >= 0: stop after this many requests in total (the join phase)
  int pipeline = 1;
};

// One keep-alive connection sending check after check.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(net::io_context& ioc, Shared& shared) : stream_(ioc), shared_(shared) {}
  std::vector<uint32_t> latencies_us;

  void Start(const tcp::resolver::results_type& endpoints) {
    stream_.async_connect(endpoints,
                          [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
                            if (ec) {
                              ++self->shared_.errors;
                              return;
                            }
                            self->stream_.socket().set_option(tcp::no_delay(true));
                            self->Next();
                          });
  }

 private:
  void Next() {
    if (SteadyClock::now() >= shared_.deadline) return;
    out_.clear();
    batch_ = 0;
    for (int k = 0; k < shared_.pipeline; ++k) {
      int64_t n = shared_.next.fetch_add(1);
      if (shared_.limit >= 0 && n >= shared_.limit) break;
      std::string body = fmt::format(R"({{"session":"bench-{}"}})", n % shared_.sessions);
      fmt::format_to(std::back_inserter(out_),
                     "POST /v1/rooms/{}/check HTTP/1.1\r\nHost: {}\r\nContent-Type: "
                     "application/json\r\nContent-Length: {}\r\n\r\n{}",
                     shared_.room, shared_.host, body.size(), body);
      ++batch_;
    }
    if (batch_ == 0) return;
    started_ = SteadyClock::now();
    net::async_write(stream_, net::buffer(out_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Fail();
                       self->ReadOne();
                     });
  }

  void ReadOne() {
    res_ = {};
    http::async_read(
        stream_, buffer_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec) return self->Fail();
          auto us = std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() -
                                                                          self->started_)
                        .count();
          self->latencies_us.push_back(static_cast<uint32_t>(us));
          if (self->res_.result() != http::status::ok) ++self->shared_.errors;
          if (--self->batch_ > 0) return self->ReadOne();
          self->Next();
        });
  }
  void Fail() { ++shared_.errors; }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::string out_;
  int batch_ = 0;
  http::response<http::string_body> res_;
  SteadyClock::time_point started_;
  Shared& shared_;
};

// Runs C connections until the deadline (or the request limit); returns all latencies.
std::vector<uint32_t> Drive(Shared& shared, const std::string& port, int connections, int threads) {
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(shared.host, port);
  std::vector<std::shared_ptr<Conn>> conns;
  for (int i = 0; i < connections; ++i) {
    conns.push_back(std::make_shared<Conn>(ioc, shared));
    conns.back()->Start(endpoints);
  }
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : pool) t.join();
  std::vector<uint32_t> all;
  for (auto& c : conns) all.insert(all.end(), c->latencies_us.begin(), c->latencies_us.end());
  return all;
}

int RunBenchRooms(const BenchRoomsFlags& f, const ClientFlags& client_flags) {
  auto url = boost::urls::parse_uri(client_flags.server);
  if (!url) throw std::runtime_error("--server must be a URL like http://127.0.0.1:8080");
  Shared shared;
  shared.host = std::string(url->host());
  std::string port = url->has_port() ? std::string(url->port()) : "80";
  shared.room = f.room;
  shared.sessions = f.sessions;
  shared.pipeline = f.pipeline;

  // The room must keep everyone for the whole run: long check-in timeout, no idling out.
  Client client(client_flags.server, client_flags.admin_key);
  HttpResult put = client.PutRoom(
      f.room,
      {{"capacity", f.capacity}, {"checkin_timeout_ms", 3'600'000}, {"idle_timeout_ms", nullptr}});
  if (!put.ok()) throw std::runtime_error("cannot create the bench room: " + put.body + put.error);

  shared.deadline = SteadyClock::now() + std::chrono::hours(1);
  shared.limit = f.sessions;
  shared.pipeline = 1;
  Drive(shared, port, f.connections, f.threads);  // join phase

  shared.next = 0;
  shared.limit = -1;
  shared.pipeline = f.pipeline;
  shared.errors = 0;
  auto start = SteadyClock::now();
  shared.deadline = start + std::chrono::milliseconds(static_cast<int64_t>(f.duration_s * 1000));
  auto latencies = Drive(shared, port, f.connections, f.threads);
  double secs = std::chrono::duration<double>(SteadyClock::now() - start).count();

  // One JSON line, numbers in plain notation (Boost.JSON would print 1.2E4).
  fmt::print(
      "{{\"checks\":{},\"checks_per_s\":{:.0f},\"p50_ms\":{:.3f},\"p99_ms\":{:.3f},"
      "\"max_ms\":{:.3f},\"errors\":{},\"sessions\":{},\"connections\":{},"
      "\"pipeline\":{},\"duration_s\":{:.2f}}}\n",
      latencies.size(), static_cast<double>(latencies.size()) / secs, PercentileMs(latencies, 0.50),
      PercentileMs(latencies, 0.99), PercentileMs(latencies, 1.0), shared.errors.load(), f.sessions,
      f.connections, f.pipeline, secs);
  return shared.errors.load() == 0 ? 0 : 1;
}

}  // namespace

void AddRoomsCommand(CLI::App& app, ClientFlags& flags) {
  auto f = std::make_shared<BenchRoomsFlags>();
  CLI::App* rooms = app.add_subcommand("rooms", "Check-ins per second on one room");
  rooms->add_option("--server", flags.server, "anteroom server URL")->capture_default_str();
  rooms->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  rooms->add_option("--room", f->room, "Room to use (created or changed)")->capture_default_str();
  rooms->add_option("--sessions", f->sessions, "Sessions to pre-join")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  rooms->add_option("--connections", f->connections, "Keep-alive connections")
      ->capture_default_str()
      ->check(CLI::Range(1, 10'000));
  rooms->add_option("--duration", f->duration_s, "Seconds of check-ins")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  rooms->add_option("--threads", f->threads, "Client threads")->capture_default_str();
  rooms->add_option("--capacity", f->capacity, "Room capacity")->capture_default_str();
  rooms
      ->add_option("--pipeline", f->pipeline,
                   "Requests per connection sent before reading their answers (HTTP pipelining)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  rooms->callback([f, &flags] {
    int rc = RunBenchRooms(*f, flags);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace anteroom::load
