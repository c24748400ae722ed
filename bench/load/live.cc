// `anteroom-bench live`: the live channel under load. Opens N WebSocket connections to one room
// (each a new waiting session), checks that they report the positions 1..N exactly, then admits
// at a steady rate and measures, for every client and every change, the delay from the change to
// the first message that shows it. Also reports the server's memory per live connection.
//
// Exactness: the C slots are always held by the generator, so change k (the k-th `leave final`
// of a holder) admits exactly the client first shown position k and moves every other client
// one place up. A client first shown p0 that is later shown position p has seen the changes
// 1..p0-p; shown "active", it has seen 1..p0. Its first message reflecting change k gives one
// delay sample: its arrival minus the moment change k's leave was answered (samples per client:
// min(p0, K), K the number of changes). Any message showing a change not yet sent, a position
// that went back, an unexpected "gone", or a final position other than p0-K is counted wrong.
//
// Turnover: a client shown "active" closes its WebSocket (its slot goes into grace, long
// enough for the run) and becomes a holder; it leaves with final C changes later. A holder is
// only asked to leave once its client saw "active" (else it would be told "gone" instead): if
// pushes run late, the schedule waits, and the lag is reported.
//
// Ports: one source address has ~28k ephemeral ports towards one server port, so connections
// are spread over 127.0.0.1, 127.0.0.2, ... (--per-address each; loopback servers only).
//
// Beyond one process: the fd limit is per process, so --processes P splits the clients over P
// forked generator processes, and --servers over several `anteroom serve` processes sharing the
// room through one backend (Redis). One driver makes the changes; what the driver and the parts
// share (the changes sent, each position's session, the samples) sits in one shared mapping.
#include <netinet/in.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/url/parse.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "anteroom/client.hpp"
#include "load/kit.h"
#include "load/load.h"

namespace anteroom::load {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

struct BenchLiveFlags {
  int64_t connections = 1'000;
  int64_t capacity = 10;
  double rate = 10;        // admissions per second
  double duration_s = 10;  // of admissions
  int threads = 2;
  double connect_rate = 5'000;  // new connections per second
  int max_handshakes = 500;     // in flight at once
  int64_t per_address = 20'000;
  std::string room;  // default: a unique name
  std::vector<std::string>
      servers;        // default: --server; part i opens its clients on servers[i % S]
  int processes = 1;  // generator processes (parts), each under its fd limit
  std::vector<int64_t> server_pids;
  int64_t redis_pid = 0;
  double settle_s = 15;         // after the last change, for the last pushes
  double fill_timeout_s = 600;  // to open every connection
  bool json = false;
};

const SteadyClock::time_point kEpoch = SteadyClock::now();
uint32_t SinceStartUs() {
  return static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - kEpoch).count());
}

// A field of a status message as the server writes it: a flat object, no spaces, strings
// without escapes (ids, status words, JWTs). Empty when absent.
std::string_view Field(std::string_view msg, std::string_view key) {
  char needle[32];
  if (key.size() + 3 > sizeof(needle)) return {};
  needle[0] = '"';
  std::copy(key.begin(), key.end(), needle + 1);
  needle[key.size() + 1] = '"';
  needle[key.size() + 2] = ':';
  size_t at = msg.find(std::string_view(needle, key.size() + 3));
  if (at == std::string_view::npos) return {};
  std::string_view rest = msg.substr(at + key.size() + 3);
  if (!rest.empty() && rest[0] == '"') {
    size_t end = rest.find('"', 1);
    return end == std::string_view::npos ? std::string_view() : rest.substr(1, end - 1);
  }
  return rest.substr(0, rest.find_first_of(",}"));
}

std::optional<int64_t> IntOf(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// With --processes > 1 the generator's parts are forked processes, so everything the driver and
// the parts share lives in one MAP_SHARED mapping: lock-free atomics and plain arrays only.
constexpr int kMaxParts = 64;
constexpr size_t kSessionBytes = 62;

struct Seat {  // what the client first shown position p tells the driver (Board::seat(p))
  std::atomic<uint8_t> taken{0};
  std::atomic<uint8_t> admitted{0};  // shown "active" with a token
  char session[kSessionBytes];
};

struct alignas(64) PartCounter {  // messages received by one part, on a line of its own
  std::atomic<int64_t> messages{0};
};

struct BoardHeader {
  std::atomic<int64_t> sent{0};  // changes whose leave was sent
  std::atomic<int64_t> first_seen{0}, failed{0}, converged{0}, wrong{0};
  std::atomic<int64_t> stop{0}, tallied{0};
  std::atomic<int64_t> samples{0}, expected_samples{0}, before_answer{0}, final_wrong{0};
  std::atomic<int> error_state{0}, final_error_state{0};  // 0 empty, 1 being written, 2 written
  char first_error[512];
  char final_error[512];
  PartCounter parts[kMaxParts];
};

class Board {
 public:
  Board(int64_t n, int64_t k) : n_(n), k_(k) {
    // Samples: sum over p = 1..n of min(p, k).
    int64_t m = std::min(n, k);
    capacity_ = m * (m + 1) / 2 + (n - m) * k;
    size_t at = Align(sizeof(BoardHeader));
    seats_at_ = at;
    at = Align(at + sizeof(Seat) * static_cast<size_t>(n + 1));
    answered_at_ = at;
    at = Align(at + sizeof(uint32_t) * static_cast<size_t>(k + 1));
    first_at_ = at;
    at = Align(at + sizeof(uint32_t) * static_cast<size_t>(k + 1));
    last_at_ = at;
    at = Align(at + sizeof(uint32_t) * static_cast<size_t>(k + 1));
    delays_at_ = at;
    bytes_ = Align(at + sizeof(uint32_t) * static_cast<size_t>(capacity_));
    void* mem = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) throw std::runtime_error("cannot map the generator's shared board");
    base_ = static_cast<char*>(mem);
    new (base_) BoardHeader();
    for (int64_t p = 0; p <= n; ++p) new (&seat(p)) Seat();
    for (int64_t i = 0; i <= k; ++i) {
      new (&first_us()[i]) std::atomic<uint32_t>(UINT32_MAX);
      new (&last_us()[i]) std::atomic<uint32_t>(0);
    }
  }
  ~Board() { munmap(base_, bytes_); }
  Board(const Board&) = delete;
  Board& operator=(const Board&) = delete;

  BoardHeader& h() { return *reinterpret_cast<BoardHeader*>(base_); }
  Seat& seat(int64_t p) { return reinterpret_cast<Seat*>(base_ + seats_at_)[p]; }
  uint32_t* answered_us() { return reinterpret_cast<uint32_t*>(base_ + answered_at_); }
  std::atomic<uint32_t>* first_us() {
    return reinterpret_cast<std::atomic<uint32_t>*>(base_ + first_at_);
  }
  std::atomic<uint32_t>* last_us() {
    return reinterpret_cast<std::atomic<uint32_t>*>(base_ + last_at_);
  }
  uint32_t* delays() { return reinterpret_cast<uint32_t*>(base_ + delays_at_); }
  int64_t n() const { return n_; }
  int64_t planned() const { return k_; }
  int64_t capacity() const { return capacity_; }

  int64_t Messages() {
    int64_t sum = 0;
    for (auto& p : h().parts) sum += p.messages.load(std::memory_order_relaxed);
    return sum;
  }
  // The first of these errors is kept; a reader sees it only once it is whole.
  void Error(std::string_view what) { Keep(h().error_state, h().first_error, what); }
  void FinalError(std::string_view what) { Keep(h().final_error_state, h().final_error, what); }
  std::string FirstError() { return Read(h().error_state, h().first_error); }
  std::string FinalErrorText() { return Read(h().final_error_state, h().final_error); }

 private:
  static size_t Align(size_t at) { return (at + 63) / 64 * 64; }
  static void Keep(std::atomic<int>& state, char (&to)[512], std::string_view what) {
    int empty = 0;
    if (!state.compare_exchange_strong(empty, 1)) return;
    size_t len = std::min(what.size(), sizeof(to) - 1);
    std::memcpy(to, what.data(), len);
    to[len] = 0;
    state.store(2, std::memory_order_release);
  }
  static std::string Read(std::atomic<int>& state, const char (&from)[512]) {
    return state.load(std::memory_order_acquire) == 2 ? std::string(from) : std::string();
  }

  int64_t n_, k_, capacity_ = 0;
  size_t seats_at_ = 0, answered_at_ = 0, first_at_ = 0, last_at_ = 0, delays_at_ = 0;
  size_t bytes_ = 0;
  char* base_ = nullptr;
};

void AtomicMin(std::atomic<uint32_t>& a, uint32_t v) {
  uint32_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v)) {
  }
}
void AtomicMax(std::atomic<uint32_t>& a, uint32_t v) {
  uint32_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v)) {
  }
}

// What every client of one part shares (a part: one generator process, or the whole generator).
struct Part {
  Board* board = nullptr;
  PartCounter* counter = nullptr;
  tcp::endpoint server;
  std::string host_header;
  std::string path;
  bool spread = false;  // bind to 127.0.0.x (a loopback server)
  int64_t per_address = 0;
};

struct Reflection {  // the first message showing the changes 1..upto
  uint32_t at_us;
  uint32_t upto;
};

const websocket::stream_base::timeout kNoTimeouts{
    .handshake_timeout = websocket::stream_base::none(),
    .idle_timeout = websocket::stream_base::none(),
    .keep_alive_pings = false};

// One WebSocket client; all its state lives on its io_context's thread. What the driver needs
// (its session, whether it saw "active") goes to the board's seat of its first position.
class LiveClient : public std::enable_shared_from_this<LiveClient> {
 public:
  LiveClient(net::io_context& ioc, Part& part, int64_t index)
      : ws_(ioc), part_(part), board_(*part.board), index_(index) {}

  int64_t p0 = 0;
  bool admitted = false;
  std::vector<Reflection> reflections;
  std::string last_status;
  int64_t last_position = 0;
  bool wrong = false;
  std::string why;

  template <typename Done>
  void Open(Done done) {
    beast::error_code ec;
    tcp::socket& sock = ws_.next_layer();
    sock.open(tcp::v4(), ec);
    if (!ec && part_.spread) {
      // The port is chosen at connect time, per destination: the whole range per address.
      int one = 1;
      ::setsockopt(sock.native_handle(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
      auto block = static_cast<uint32_t>(index_ / part_.per_address);
      net::ip::address_v4 source((127u << 24) + 1 + block);
      sock.bind(tcp::endpoint(source, 0), ec);
    }
    if (ec) return Fail(fmt::format("socket: {}", ec.message()), done);
    sock.async_connect(part_.server, [self = shared_from_this(), done](beast::error_code ec) {
      if (ec) return self->Fail(fmt::format("connect: {}", ec.message()), done);
      self->ws_.set_option(
          websocket::stream_base::timeout{.handshake_timeout = std::chrono::seconds(60),
                                          .idle_timeout = websocket::stream_base::none(),
                                          .keep_alive_pings = false});
      self->ws_.async_handshake(
          self->refusal_, self->part_.host_header, self->part_.path,
          [self, done](beast::error_code ec) {
            if (ec) {
              return self->Fail(fmt::format("handshake: {} ({} {})", ec.message(),
                                            self->refusal_.result_int(), self->refusal_.body()),
                                done);
            }
            self->refusal_ = {};
            // No timer from here on (Beast would arm one for the closing handshake), so
            // nothing outlives Close().
            self->ws_.set_option(kNoTimeouts);
            done();
            self->Read();
          });
    });
  }

  void Close() {
    closing_ = true;
    ws_.set_option(kNoTimeouts);  // cancels the stream's timer
    beast::error_code ignored;
    ws_.next_layer().close(ignored);
  }

 private:
  template <typename Done>
  void Fail(std::string what, Done& done) {
    ++board_.h().failed;
    board_.Error(what);
    done();
  }

  void Read() {
    buffer_.clear();
    ws_.async_read(buffer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        if (!self->closing_) self->MarkWrong(fmt::format("connection ended: {}", ec.message()));
        return;
      }
      auto data = self->buffer_.cdata();
      self->OnMessage(std::string_view(static_cast<const char*>(data.data()), data.size()));
      if (!self->closing_) self->Read();
    });
  }

  void OnMessage(std::string_view msg) {
    uint32_t now = SinceStartUs();
    std::string_view type = Field(msg, "type");
    if (type == "heartbeat") return;  // every 15 s: not counted
    part_.counter->messages.fetch_add(1, std::memory_order_relaxed);
    if (type != "status") return MarkWrong(fmt::format("unexpected message {}", msg));
    std::string_view status = Field(msg, "status");
    std::optional<int64_t> position = IntOf(Field(msg, "position"));
    last_status.assign(status);
    BoardHeader& h = board_.h();
    if (p0 == 0) {  // the first message: where this client starts
      if (status != "waiting" || !position || *position < 1 || *position > board_.n()) {
        return MarkWrong(fmt::format("first message not waiting at 1..{}: {}", board_.n(), msg));
      }
      std::string_view session = Field(msg, "session");
      if (session.empty() || session.size() >= kSessionBytes) {
        return MarkWrong(fmt::format("first message without a session: {}", msg));
      }
      Seat& seat = board_.seat(*position);
      if (seat.taken.exchange(1) != 0) {
        return MarkWrong(fmt::format("position {} was shown to two clients", *position));
      }
      std::memcpy(seat.session, session.data(), session.size());
      seat.session[session.size()] = 0;
      p0 = last_position = *position;
      target_ = std::min(p0, board_.planned());
      h.first_seen.fetch_add(1, std::memory_order_release);
      if (target_ == 0) h.converged.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    int64_t upto;
    if (status == "waiting" && position) {
      upto = p0 - *position;
      last_position = *position;
    } else if (status == "active" || status == "grace") {
      upto = p0;
    } else {
      return MarkWrong(fmt::format("unexpected status: {}", msg));
    }
    if (upto > h.sent.load(std::memory_order_acquire)) {
      return MarkWrong(fmt::format("shows {} changes, {} were made: {}", upto, h.sent.load(), msg));
    }
    if (upto < reflected_) return MarkWrong(fmt::format("went back a place: {}", msg));
    if (upto > reflected_) {
      reflections.push_back({now, static_cast<uint32_t>(upto)});
      reflected_ = upto;
      if (reflected_ == target_) h.converged.fetch_add(1, std::memory_order_relaxed);
    }
    if (status == "active") {
      if (Field(msg, "token").size() < 20) return MarkWrong(fmt::format("no token: {}", msg));
      // Admitted: hang up (the slot goes into grace) and let the driver hold the slot.
      admitted = true;
      board_.seat(p0).admitted.store(1, std::memory_order_release);
      closing_ = true;
      ws_.async_close(websocket::close_code::normal,
                      [self = shared_from_this()](beast::error_code) {
                        beast::error_code ignored;
                        self->ws_.next_layer().close(ignored);
                      });
    }
  }

  void MarkWrong(std::string what) {
    if (!wrong) {
      wrong = true;
      why = what;
      board_.h().wrong.fetch_add(1, std::memory_order_relaxed);
      board_.Error(fmt::format("client {}: {}", index_, what));
    }
  }

  websocket::stream<tcp::socket> ws_;
  websocket::response_type refusal_;  // the server's answer to the handshake, when not 101
  beast::flat_buffer buffer_;
  Part& part_;
  Board& board_;
  int64_t index_;
  int64_t target_ = -1;
  int64_t reflected_ = 0;
  bool closing_ = false;
};

// One io_context and its thread; opens its clients at its share of the rate.
struct Worker {
  net::io_context ioc{1};
  std::vector<std::shared_ptr<LiveClient>> clients;
  size_t next = 0;
  int in_flight = 0;
  double budget = 0;
  double rate = 0;  // per second
  int max_in_flight = 1;
  net::steady_timer opener{ioc};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
  std::thread thread;

  static constexpr auto kStep = std::chrono::milliseconds(5);

  void OpenSome() {
    budget = std::min(budget + rate * 0.005, std::max(1.0, rate * 0.05));
    while (next < clients.size() && in_flight < max_in_flight && budget >= 1) {
      budget -= 1;
      ++in_flight;
      clients[next++]->Open([this] { --in_flight; });
    }
    if (next == clients.size()) return;
    opener.expires_after(kStep);
    opener.async_wait([this](beast::error_code ec) {
      if (!ec) OpenSome();
    });
  }
};

// For lining up the run's phases with other tools' logs (e.g. Redis's SLOWLOG).
double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Progress(bool quiet, std::string_view text) {
  if (!quiet) fmt::print(stderr, "bench live: {}\n", text);
}

struct Result {
  int64_t connections = 0, capacity = 0, changes = 0, samples = 0, expected_samples = 0;
  int64_t wrong = 0, failed = 0, converged = 0, messages = 0, fill_messages = 0;
  double p50 = 0, p99 = 0, max = 0, messages_per_s = 0, fill_s = 0, window_s = 0;
  double leave_rtt_p50 = 0, leave_rtt_max = 0, lag_max = 0, holder_wait_max = 0;
  // Per change: the delay to the first client that showed it, and from there to the last (the
  // fan-out of the pushes); medians and max over the changes, in ms.
  double first_p50 = 0, first_max = 0, fanout_p50 = 0, fanout_max = 0;
  // Per change: the delay to the last client that showed it; p50/p99/max over the changes, ms.
  double last_p50 = 0, last_p99 = 0, last_max = 0;
  double server_cpu_s = -1, own_cpu_s = -1;  // during the admissions and the last pushes
  double redis_cpu_s = -1;                   // the same window, when --redis-pid is given
  int64_t server_rss_before_kb = -1, server_rss_after_kb = -1, own_rss_kb = -1;
  double server_bytes_per_conn = 0;
  int64_t addresses = 1, processes = 1, servers = 1;
  int64_t before_answer = 0;  // samples shown before the generator had read the leave's answer
  std::string first_error;
};

void PrintHuman(const Result& r, const BenchLiveFlags& f) {
  fmt::print(
      "anteroom-bench live: {} WebSocket connections on one room, capacity {}, over {} server "
      "process(es) from {} generator process(es)\n",
      r.connections, r.capacity, r.servers, r.processes);
  fmt::print("  opened in {:.1f} s over {} source address(es); positions 1..{} verified\n",
             r.fill_s, r.addresses, r.connections);
  fmt::print(
      "  {} changes at {:.1f}/s (schedule lag max {:.0f} ms; leave round trip p50 {:.2f} "
      "ms, max {:.2f} ms)\n",
      r.changes, f.rate, r.lag_max, r.leave_rtt_p50, r.leave_rtt_max);
  if (r.holder_wait_max > 0) {
    fmt::print(
        "  (waited up to {:.0f} ms for an admitted client to see \"active\" before it left)\n",
        r.holder_wait_max);
  }
  fmt::print(
      "  delay change -> client: p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms over {} samples "
      "(expected {})\n",
      r.p50, r.p99, r.max, r.samples, r.expected_samples);
  fmt::print(
      "  per change: first client after p50 {:.1f} ms (max {:.1f}), last client {:.1f} ms after "
      "the first (max {:.1f})\n",
      r.first_p50, r.first_max, r.fanout_p50, r.fanout_max);
  fmt::print(
      "  per change, the last client to show it: p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms\n",
      r.last_p50, r.last_p99, r.last_max);
  fmt::print("  messages: {} in {:.1f} s, {:.0f}/s (and {} while connecting)\n", r.messages,
             r.window_s, r.messages_per_s, r.fill_messages);
  if (r.server_cpu_s >= 0 && r.messages > 0) {
    fmt::print("  CPU meanwhile: server {:.2f} s ({:.1f} us per message), generator {:.2f} s\n",
               r.server_cpu_s, r.server_cpu_s * 1e6 / static_cast<double>(r.messages), r.own_cpu_s);
  }
  if (r.redis_cpu_s >= 0 && r.changes > 0) {
    fmt::print("  Redis CPU meanwhile: {:.3f} s, {:.2f} ms per change\n", r.redis_cpu_s,
               r.redis_cpu_s * 1e3 / static_cast<double>(r.changes));
  }
  if (r.server_rss_after_kb >= 0) {
    fmt::print("  server RSS {:.1f} MiB -> {:.1f} MiB: {:.0f} bytes per live connection\n",
               r.server_rss_before_kb / 1024.0, r.server_rss_after_kb / 1024.0,
               r.server_bytes_per_conn);
  }
  fmt::print("  generator RSS {:.1f} MiB with every connection open\n", r.own_rss_kb / 1024.0);
  fmt::print("  wrong clients: {}, failed connections: {}, converged: {}/{}\n", r.wrong, r.failed,
             r.converged, r.connections);
  if (!r.first_error.empty()) fmt::print("  first error: {}\n", r.first_error);
}

void PrintJson(const Result& r, const BenchLiveFlags& f) {
  // One line, numbers in plain notation.
  fmt::print(
      "{{\"connections\":{},\"capacity\":{},\"rate\":{:.2f},\"changes\":{},\"samples\":{},"
      "\"expected_samples\":{},\"p50_ms\":{:.3f},\"p99_ms\":{:.3f},\"max_ms\":{:.3f},"
      "\"messages\":{},\"messages_per_s\":{:.0f},\"fill_messages\":{},\"fill_s\":{:.3f},"
      "\"wrong_positions\":{},\"failed_connections\":{},\"converged\":{},"
      "\"leave_rtt_p50_ms\":{:.3f},\"leave_rtt_max_ms\":{:.3f},\"schedule_lag_max_ms\":{:.3f},"
      "\"server_rss_before_kb\":{},\"server_rss_after_kb\":{},"
      "\"server_bytes_per_connection\":{:.0f},\"generator_rss_kb\":{},\"addresses\":{},"
      "\"threads\":{},\"shown_before_answer\":{},\"holder_wait_max_ms\":{:.3f},"
      "\"first_client_p50_ms\":{:.3f},\"first_client_max_ms\":{:.3f},\"fanout_p50_ms\":{:.3f},"
      "\"fanout_max_ms\":{:.3f},\"server_cpu_s\":{:.3f},\"generator_cpu_s\":{:.3f},"
      "\"window_s\":{:.3f},\"last_client_p50_ms\":{:.3f},\"last_client_p99_ms\":{:.3f},"
      "\"last_client_max_ms\":{:.3f},\"redis_cpu_s\":{:.3f},\"processes\":{},\"servers\":{}}}\n",
      r.connections, r.capacity, f.rate, r.changes, r.samples, r.expected_samples, r.p50, r.p99,
      r.max, r.messages, r.messages_per_s, r.fill_messages, r.fill_s, r.wrong, r.failed,
      r.converged, r.leave_rtt_p50, r.leave_rtt_max, r.lag_max, r.server_rss_before_kb,
      r.server_rss_after_kb, r.server_bytes_per_conn, r.own_rss_kb, r.addresses, f.threads,
      r.before_answer, r.holder_wait_max, r.first_p50, r.first_max, r.fanout_p50, r.fanout_max,
      r.server_cpu_s, r.own_cpu_s, r.window_s, r.last_p50, r.last_p99, r.last_max, r.redis_cpu_s,
      r.processes, r.servers);
}

void RaiseFileLimit(int64_t needed) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  if (static_cast<int64_t>(lim.rlim_cur) < needed) {
    throw std::runtime_error(fmt::format(
        "{} connections need about {} file descriptors, the limit is {}: raise it (ulimit -n)",
        needed - 64, needed, lim.rlim_cur));
  }
}

struct ServerAddress {
  tcp::endpoint endpoint;
  std::string host_header;
};

ServerAddress Resolve(const std::string& server_url) {
  auto url = boost::urls::parse_uri(server_url);
  if (!url) throw std::runtime_error("a server must be a URL like http://127.0.0.1:8080");
  std::string host(url->host());
  std::string port = url->has_port() ? std::string(url->port()) : "80";
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  for (const auto& e : resolver.resolve(host, port)) {
    if (e.endpoint().address().is_v4()) return {e.endpoint(), host + ":" + port};
  }
  throw std::runtime_error(server_url + " has no IPv4 address");
}

struct PartPlan {
  int index = 0;
  int64_t begin = 0, end = 0;  // client indexes
  ServerAddress server;
};

// After the run, one part's clients as samples and verdicts on the board.
void Tally(const std::vector<std::shared_ptr<LiveClient>>& clients, Board& board) {
  BoardHeader& h = board.h();
  const int64_t k_total = board.planned();
  const uint32_t* answered_us = board.answered_us();
  std::vector<uint32_t> delays;
  int64_t expected = 0, before_answer = 0, wrong = 0;
  for (const auto& c : clients) {
    int64_t target = std::min(c->p0, k_total);
    expected += target;
    uint32_t prev = 0;
    for (const Reflection& r : c->reflections) {
      for (uint32_t k = prev + 1; k <= r.upto; ++k) {
        // Shown before the driver read the leave's answer: the change was made, so 0.
        uint32_t t = answered_us[k];
        if (r.at_us < t) ++before_answer;
        uint32_t delay = r.at_us > t ? r.at_us - t : 0;
        delays.push_back(delay);
        AtomicMin(board.first_us()[k], delay);
        AtomicMax(board.last_us()[k], delay);
      }
      prev = r.upto;
    }
    bool right =
        !c->wrong && static_cast<int64_t>(prev) == target &&
        (c->p0 <= k_total ? c->admitted
                          : c->last_status == "waiting" && c->last_position == c->p0 - k_total);
    if (!right) {
      ++wrong;
      board.FinalError(
          c->wrong ? c->why
                   : fmt::format("a client first at position {} ended {} at position {} having "
                                 "seen {} of {} changes",
                                 c->p0, c->last_status, c->last_position, prev, target));
    }
  }
  int64_t from = h.samples.fetch_add(static_cast<int64_t>(delays.size()));
  if (from + static_cast<int64_t>(delays.size()) <= board.capacity()) {
    std::copy(delays.begin(), delays.end(), board.delays() + from);
  } else {
    board.FinalError("more samples than a client can show");
    wrong += 1;
  }
  h.expected_samples += expected;
  h.before_answer += before_answer;
  h.final_wrong += wrong;
}

// One part of the generator: opens its clients at its share of the rate, keeps them until the
// driver says stop, then tallies them on the board.
void RunPart(const BenchLiveFlags& f, const PartPlan& plan, const std::string& path, Board& board,
             int parts) {
  Part part;
  part.board = &board;
  part.counter = &board.h().parts[plan.index];
  part.server = plan.server.endpoint;
  part.host_header = plan.server.host_header;
  part.path = path;
  part.spread = part.server.address().is_loopback();
  part.per_address = f.per_address;

  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < f.threads; ++t) {
    auto w = std::make_unique<Worker>();
    w->rate = f.connect_rate / parts / f.threads;
    w->max_in_flight = std::max(1, f.max_handshakes / parts / f.threads);
    w->guard.emplace(w->ioc.get_executor());
    workers.push_back(std::move(w));
  }
  std::vector<std::shared_ptr<LiveClient>> clients;
  clients.reserve(static_cast<size_t>(plan.end - plan.begin));
  for (int64_t i = plan.begin; i < plan.end; ++i) {
    Worker& w = *workers[static_cast<size_t>(i % f.threads)];
    clients.push_back(std::make_shared<LiveClient>(w.ioc, part, i));
    w.clients.push_back(clients.back());
  }
  for (auto& w : workers) {
    net::post(w->ioc, [w = w.get()] { w->OpenSome(); });
    w->thread = std::thread([w = w.get()] { w->ioc.run(); });
  }
  while (board.h().stop.load(std::memory_order_acquire) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& w : workers) {
    net::post(w->ioc, [w = w.get()] {
      w->opener.cancel();
      for (auto& c : w->clients) c->Close();
    });
    w->guard.reset();
  }
  // Every operation ends with its socket; should one not, the context is stopped anyway.
  auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  for (auto& w : workers) {
    while (!w->ioc.stopped() && SteadyClock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    w->ioc.stop();
    if (w->thread.joinable()) w->thread.join();
  }
  Tally(clients, board);
  board.h().tallied.fetch_add(1, std::memory_order_release);
}

// The generator's parts: threads of this process, or (--processes > 1) forked processes, so
// that each holds fewer descriptors than one process may.
class Parts {
 public:
  Parts(const BenchLiveFlags& f, std::vector<PartPlan> plans, std::string path, Board& board)
      : f_(f), plans_(std::move(plans)), path_(std::move(path)), board_(board) {}
  ~Parts() { Stop(); }

  void Start() {
    int parts = static_cast<int>(plans_.size());
    if (parts == 1) {
      thread_ = std::thread([this] { RunPart(f_, plans_[0], path_, board_, 1); });
      return;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    for (const PartPlan& plan : plans_) {
      pid_t pid = fork();  // before this process starts any thread
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        int rc = 0;
        try {
          RunPart(f_, plan, path_, board_, parts);
        } catch (const std::exception& e) {
          board_.Error(fmt::format("generator part {}: {}", plan.index, e.what()));
          rc = 1;
        }
        std::fflush(stderr);
        _exit(rc);
      }
      pids_.push_back(pid);
    }
  }

  // CPU seconds and RSS of the parts (this process's own when they are threads).
  double CpuSeconds() const {
    if (pids_.empty()) return load::CpuSeconds("/proc/self");
    double sum = 0;
    for (pid_t pid : pids_) sum += load::CpuSeconds(fmt::format("/proc/{}", pid));
    return sum;
  }
  int64_t RssKb() const {
    if (pids_.empty()) return load::RssKb("/proc/self/status");
    int64_t sum = 0;
    for (pid_t pid : pids_) sum += load::RssKb(fmt::format("/proc/{}/status", pid));
    return sum;
  }

  // Tells every part to stop and waits until each has tallied (or is killed after a minute).
  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    board_.h().stop.store(1, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
    auto deadline = SteadyClock::now() + std::chrono::seconds(60);
    for (pid_t pid : pids_) {
      int status = 0;
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (SteadyClock::now() > deadline) {
          kill(pid, SIGKILL);
          waitpid(pid, &status, 0);
          board_.Error(fmt::format("generator process {} did not finish", pid));
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

 private:
  const BenchLiveFlags& f_;
  std::vector<PartPlan> plans_;
  std::string path_;
  Board& board_;
  std::thread thread_;
  std::vector<pid_t> pids_;
  bool stopped_ = false;
};

double SumCpu(const std::vector<int64_t>& pids) {
  if (pids.empty()) return -1;
  double sum = 0;
  for (int64_t pid : pids) sum += CpuSeconds(fmt::format("/proc/{}", pid));
  return sum;
}
int64_t SumRss(const std::vector<int64_t>& pids) {
  if (pids.empty()) return -1;
  int64_t sum = 0;
  for (int64_t pid : pids) sum += RssKb(fmt::format("/proc/{}/status", pid));
  return sum;
}

int RunBenchLive(const BenchLiveFlags& f, const ClientFlags& client_flags) {
  const int64_t n = f.connections;
  const int parts = f.processes;
  std::vector<std::string> server_urls = f.servers;
  if (server_urls.empty()) server_urls.push_back(client_flags.server);
  std::vector<ServerAddress> servers;
  for (const auto& url : server_urls) servers.push_back(Resolve(url));
  // Each part holds one descriptor per client of its own.
  RaiseFileLimit((n + parts - 1) / parts + 64);
  bool quiet = false;  // progress goes to stderr, even with --json

  std::string room =
      f.room.empty() ? fmt::format("live-bench-{}-{}", getpid(), SinceStartUs()) : f.room;
  std::string path = fmt::format("/v1/rooms/{}/ws", room);
  Board board(n, std::llround(f.rate * f.duration_s));
  BoardHeader& h = board.h();
  const int64_t k_total = board.planned();

  // The room: every slot held by the generator, nobody dropped during the run. Changes go
  // through the first server; with several servers they share the room through their backend.
  Client http(server_urls[0], client_flags.admin_key);
  HttpResult put = http.PutRoom(room, {{"capacity", f.capacity},
                                       {"checkin_timeout_ms", 3'600'000},
                                       {"grace_ms", 3'600'000},
                                       {"idle_timeout_ms", nullptr},
                                       {"admit_per_minute", nullptr}});
  if (!put.ok()) throw std::runtime_error("cannot create the bench room: " + put.body + put.error);
  std::deque<std::pair<std::string, int64_t>> holders;  // oldest first; 0: not a bench client
  for (int64_t i = 0; i < f.capacity; ++i) {
    HttpResult r = http.Check(room);
    if (!r.ok() || !r.json.is_object() || r.json.at("status") != "active") {
      throw std::runtime_error("a holder was not admitted: " + r.body + r.error);
    }
    holders.emplace_back(std::string(r.json.at("session").as_string()), 0);
  }
  Result res;
  res.connections = n;
  res.capacity = f.capacity;
  res.changes = k_total;
  res.processes = parts;
  res.servers = static_cast<int64_t>(servers.size());
  res.server_rss_before_kb = SumRss(f.server_pids);
  bool spread = servers[0].endpoint.address().is_loopback();
  res.addresses = spread ? (n + f.per_address - 1) / f.per_address : 1;

  // ---- open N connections ---------------------------------------------------------------------
  std::vector<PartPlan> plans;
  for (int i = 0; i < parts; ++i) {
    plans.push_back({.index = i,
                     .begin = n * i / parts,
                     .end = n * (i + 1) / parts,
                     .server = servers[static_cast<size_t>(i) % servers.size()]});
  }
  auto fill_start = SteadyClock::now();
  Parts generator(f, std::move(plans), path, board);
  generator.Start();

  auto fill_deadline = fill_start + std::chrono::duration<double>(f.fill_timeout_s);
  auto next_note = fill_start + std::chrono::seconds(5);
  while (h.first_seen.load(std::memory_order_acquire) + h.failed.load() + h.wrong.load() < n &&
         SteadyClock::now() < fill_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (SteadyClock::now() >= next_note) {
      next_note += std::chrono::seconds(5);
      Progress(quiet, fmt::format("{} of {} connections waiting", h.first_seen.load(), n));
    }
  }
  res.fill_s = std::chrono::duration<double>(SteadyClock::now() - fill_start).count();
  auto print = [&] {
    if (f.json) {
      PrintJson(res, f);
    } else {
      PrintHuman(res, f);
    }
  };
  auto fail_early = [&](std::string what) {
    generator.Stop();
    http.DeleteRoom(room);
    res.failed = h.failed.load();
    res.wrong = h.wrong.load();
    std::string first = board.FirstError();
    res.first_error = what + (first.empty() ? "" : "; " + first);
    print();
    return 1;
  };
  if (h.first_seen.load(std::memory_order_acquire) != n) {
    return fail_early(
        fmt::format("only {} of {} connections reported waiting", h.first_seen.load(), n));
  }
  // Positions 1..N, each exactly once: N clients each took a distinct seat in 1..N.
  for (int64_t p = 1; p <= n; ++p) {
    if (board.seat(p).taken.load() == 0)
      return fail_early(fmt::format("position {} was not shown", p));
  }
  Progress(quiet,
           fmt::format("{} connections waiting at positions 1..{} in {:.1f} s", n, n, res.fill_s));
  // The counts of the last joins are still being pushed: let that finish before the memory is
  // read and the clock starts.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto quiet_deadline = SteadyClock::now() + std::chrono::duration<double>(f.settle_s);
  for (int64_t before = -1; before != board.Messages() && SteadyClock::now() < quiet_deadline;) {
    before = board.Messages();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  res.server_rss_after_kb = SumRss(f.server_pids);
  res.own_rss_kb = generator.RssKb();
  res.fill_messages = board.Messages();

  // ---- admissions at a steady rate ------------------------------------------------------------
  uint32_t* answered_us = board.answered_us();
  std::vector<uint32_t> rtt_us;
  uint32_t lag_max_us = 0, holder_wait_max_us = 0;
  double server_cpu_before = SumCpu(f.server_pids);
  double redis_cpu_before = f.redis_pid > 0 ? CpuSeconds(fmt::format("/proc/{}", f.redis_pid)) : -1;
  double own_cpu_before = generator.CpuSeconds();
  int64_t messages_before = board.Messages();
  Progress(quiet, fmt::format("admissions from unix time {:.3f}", UnixSeconds()));
  auto start = SteadyClock::now();
  auto hold_deadline = [&] {
    return SteadyClock::now() + std::chrono::duration<double>(f.settle_s);
  };
  for (int64_t k = 1; k <= k_total; ++k) {
    auto due = start + std::chrono::duration<double>(static_cast<double>(k - 1) / f.rate);
    std::this_thread::sleep_until(due);
    auto [holder, seat] = holders.front();
    holders.pop_front();
    if (seat > 0) {  // only once it saw "active", or it would be told "gone"
      auto waited = SteadyClock::now();
      auto limit = hold_deadline();
      while (!board.seat(seat).admitted.load(std::memory_order_acquire) &&
             SteadyClock::now() < limit) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      auto wait =
          std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - waited);
      holder_wait_max_us = std::max(holder_wait_max_us, static_cast<uint32_t>(wait.count()));
    }
    auto lag = std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - due);
    lag_max_us = std::max(lag_max_us, static_cast<uint32_t>(std::max<int64_t>(0, lag.count())));
    h.sent.store(k, std::memory_order_release);
    uint32_t sent = SinceStartUs();
    HttpResult r = http.Leave(room, holder, /*final=*/true);
    answered_us[k] = SinceStartUs();
    rtt_us.push_back(answered_us[k] - sent);
    if (!r.ok()) {
      return fail_early(fmt::format("leave of holder {} failed: {} {}", holder, r.body, r.error));
    }
    holders.emplace_back(std::string(board.seat(k).session), k);
  }
  // The last pushes.
  auto settle_deadline = hold_deadline();
  while (h.converged.load() < n && SteadyClock::now() < settle_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto end = SteadyClock::now();
  Progress(quiet,
           fmt::format("admissions and their pushes done at unix time {:.3f}", UnixSeconds()));
  res.messages = board.Messages() - messages_before;
  res.window_s = std::chrono::duration<double>(end - start).count();
  res.converged = h.converged.load();
  if (server_cpu_before >= 0) res.server_cpu_s = SumCpu(f.server_pids) - server_cpu_before;
  if (redis_cpu_before >= 0) {
    res.redis_cpu_s = CpuSeconds(fmt::format("/proc/{}", f.redis_pid)) - redis_cpu_before;
  }
  res.own_cpu_s = generator.CpuSeconds() - own_cpu_before;
  generator.Stop();       // every part tallies its clients on the board
  http.DeleteRoom(room);  // best effort (needs the admin key when the server has one)

  // ---- results (every part has stopped) --------------------------------------------------------
  res.expected_samples = h.expected_samples.load();
  res.before_answer = h.before_answer.load();
  res.wrong = h.final_wrong.load();
  res.first_error = board.FinalErrorText();
  if (res.first_error.empty()) res.first_error = board.FirstError();
  if (h.tallied.load() != parts) {
    res.wrong += n;  // a part that did not tally cannot vouch for its clients
    if (res.first_error.empty()) res.first_error = "a generator part did not finish";
  }
  res.samples = std::min(h.samples.load(), board.capacity());
  std::vector<uint32_t> delays(board.delays(), board.delays() + res.samples);
  res.p50 = PercentileMs(delays, 0.50);
  res.p99 = PercentileMs(delays, 0.99);
  res.max = PercentileMs(delays, 1.0);
  res.messages_per_s = static_cast<double>(res.messages) / res.window_s;
  res.leave_rtt_p50 = PercentileMs(rtt_us, 0.50);
  res.leave_rtt_max = PercentileMs(rtt_us, 1.0);
  res.lag_max = lag_max_us / 1000.0;
  res.holder_wait_max = holder_wait_max_us / 1000.0;
  std::vector<uint32_t> firsts, fanouts, lasts;
  for (int64_t k = 1; k <= k_total; ++k) {
    uint32_t first = board.first_us()[k].load(), last = board.last_us()[k].load();
    if (first == UINT32_MAX) continue;
    firsts.push_back(first);
    fanouts.push_back(last - first);
    lasts.push_back(last);
  }
  res.first_p50 = PercentileMs(firsts, 0.5);
  res.first_max = PercentileMs(firsts, 1.0);
  res.fanout_p50 = PercentileMs(fanouts, 0.5);
  res.fanout_max = PercentileMs(fanouts, 1.0);
  res.last_p50 = PercentileMs(lasts, 0.5);
  res.last_p99 = PercentileMs(lasts, 0.99);
  res.last_max = PercentileMs(lasts, 1.0);
  res.failed = h.failed.load();
  if (res.server_rss_after_kb >= 0 && res.server_rss_before_kb >= 0) {
    res.server_bytes_per_conn =
        static_cast<double>(res.server_rss_after_kb - res.server_rss_before_kb) * 1024.0 /
        static_cast<double>(n);
  }
  print();
  return res.wrong == 0 && res.failed == 0 ? 0 : 1;
}

}  // namespace

void AddLiveCommand(CLI::App& app, ClientFlags& flags) {
  auto f = std::make_shared<BenchLiveFlags>();
  CLI::App* live = app.add_subcommand(
      "live", "Delay of pushed positions over N WebSocket connections on one room");
  live->add_option("--server", flags.server, "anteroom server URL")->capture_default_str();
  live->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  live->add_option("-n,--connections", f->connections, "WebSocket connections (waiting sessions)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{2'000'000}));
  live->add_option("--capacity", f->capacity, "Room capacity (slots held by the generator)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100'000}));
  live->add_option("--rate", f->rate, "Admissions per second")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 10'000.0));
  live->add_option("--duration", f->duration_s, "Seconds of admissions")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  live->add_option("--threads", f->threads, "Client threads (one io_context each)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  live->add_option("--connect-rate", f->connect_rate, "New connections per second")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e6));
  live->add_option("--max-handshakes", f->max_handshakes, "Connection handshakes in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 100'000));
  live->add_option("--per-address", f->per_address,
                   "Connections per source address 127.0.0.x (ephemeral ports run out at ~28k)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{60'000}));
  live->add_option("--room", f->room, "Room to create (default: a unique name)");
  live->add_option("--servers", f->servers,
                   "Servers sharing the room (one backend), comma-separated; generator part i "
                   "connects to the i-th modulo their number (default: --server)")
      ->delimiter(',');
  live->add_option("--processes", f->processes,
                   "Generator processes, each holding its share of the connections (the fd "
                   "limit is per process)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxParts));
  live->add_option("--server-pid", f->server_pids,
                   "The servers' PIDs, comma-separated, for their memory per live connection and "
                   "CPU (/proc/PID)")
      ->delimiter(',');
  live->add_option("--redis-pid", f->redis_pid, "Redis's PID, for its CPU during the admissions");
  live->add_option("--settle", f->settle_s, "Seconds to wait for the last pushes")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 600.0));
  live->add_option("--fill-timeout", f->fill_timeout_s, "Seconds to open every connection")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  live->add_flag("--json", f->json, "Print one JSON line instead of the summary");
  live->callback([f, &flags] {
    int rc = RunBenchLive(*f, flags);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace anteroom::load
