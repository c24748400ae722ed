// `anteroom-bench launch`: a drop as people make it (docs/benchmarks.md, "A drop over HTTP"). N
// people arrive over A seconds into the pre-queue of one room's event and check in every C seconds
// over HTTP (polling, as a page without a live channel does); the event starts with a shuffle;
// an admitted person leaves at their next check-in (a steady outflow of about capacity / (C/2)
// a second); mid-run the room switches to `random` and back to `fifo`. One JSON line reports:
//
//  - every answer's latency (p50, p99, max) and the rate reached;
//  - exactness: after the draw every `waiting` answer in fifo is held to a model (when it can
//    be: see Run::random_sent_us), namely
//    position = rank - (N - waiting) + (admitted people drawn behind it). `rank` is the
//    person's place in the draw, recomputed from the event's seed with core::FisherYates over
//    the arrival order. The arrivals go over one pipelined connection, so the server takes them
//    in the order they are sent. `waiting` comes from the same answer, and the people drawn
//    behind who got in are those the random method let in, each seen at their next check-in;
//  - the time from starts_at until no answer says `prequeue` any more (every check then
//    answers a drawn position);
//  - the server's resident memory per person, once everyone has arrived (--server-pid).
//
// Loopback only, bounded by --run-s after the start; the arrival connection plus
// --connections for check-ins and leaves.
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <future>
#include <thread>

#include "anteroom/client.hpp"
#include "core/draw.h"
#include "load/kit.h"
#include "load/load.h"
#include "load/pipelined_conn.h"

namespace anteroom::load {

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct LaunchFlags {
  std::string room = "launch";
  int64_t people = 1'000'000;
  double arrive_s = 60;
  double checkin_s = 20;
  double start_after_s = 70;  // starts_at, from the first arrival
  double run_s = 90;          // how long after the start the run goes on
  double random_at_s = 30;    // after the start: the room switches to random ...
  double fifo_at_s = 45;      // ... and back to fifo
  int64_t capacity = 10'000;
  int connections = 8;
  int server_pid = 0;
  std::vector<std::string> check_servers;  // more processes (one store) for the check-ins
};

// The few fields of a status answer the run reads (its format is the server's own).
struct Answer {
  std::string_view status;
  std::string_view phase;
  std::string_view method;
  int64_t position = -1;  // -1: null
  int64_t waiting = -1;
};
std::string_view StringField(std::string_view body, std::string_view key) {
  size_t at = body.find(key);
  if (at == std::string_view::npos) return {};
  at += key.size();
  size_t end = body.find('"', at);
  return end == std::string_view::npos ? std::string_view() : body.substr(at, end - at);
}
int64_t NumberField(std::string_view body, std::string_view key) {
  size_t at = body.find(key);
  if (at == std::string_view::npos) return -1;
  at += key.size();
  int64_t v = 0;
  bool any = false;
  while (at < body.size() && body[at] >= '0' && body[at] <= '9') {
    v = v * 10 + (body[at++] - '0');
    any = true;
  }
  return any ? v : -1;
}
Answer Parse(std::string_view body) {
  return {StringField(body, R"("status":")"), StringField(body, R"("phase":")"),
          StringField(body, R"("queueing_method":")"), NumberField(body, R"("position":)"),
          NumberField(body, R"("waiting":)")};
}

// Counts over ranks 1..n: how many marked ranks lie above r.
class Fenwick {
 public:
  explicit Fenwick(int64_t n) : tree_(static_cast<size_t>(n) + 1, 0), n_(n) {}
  void Mark(int64_t r) {
    for (; r <= n_; r += r & -r) ++tree_[static_cast<size_t>(r)];
    ++total_;
  }
  int64_t Above(int64_t r) const {
    int64_t upto = 0;
    for (; r > 0; r -= r & -r) upto += tree_[static_cast<size_t>(r)];
    return total_ - upto;
  }

 private:
  std::vector<int32_t> tree_;
  int64_t n_;
  int64_t total_ = 0;
};

enum class Kind : uint8_t { kJoin, kCheck, kLeave };
enum class State : uint8_t { kHere, kLeft, kGone };

struct Run;

class Conn : public PipelinedConn {
 public:
  Conn(net::io_context& ioc, std::string host, Run& run) : PipelinedConn(ioc, host), run_(run) {}
  void Ask(Kind kind, int64_t person);
  // The server closes a connection that stays idle (check-ins start a round after the
  // arrivals): a closed one with nothing pending is replaced, not a failure.
  bool closed_idle() const { return closed_idle_; }

 protected:
  void OnConnected() override {
    connected_ = true;
    for (auto& [kind, person] : early_) Ask(kind, person);
    early_.clear();
  }
  void OnAnswer(int tag, int status, std::string& body) override;
  void OnFailure(const std::string& what) override;

 private:
  struct Pending {
    int64_t person;
    int64_t sent_us;
    Kind kind;
  };
  Run& run_;
  std::deque<Pending> pending_;
  std::vector<std::pair<Kind, int64_t>> early_;  // asked before the connection was up
  bool connected_ = false;
  bool closed_idle_ = false;
};

struct Run {
  LaunchFlags f;
  std::string room_path;
  int64_t t0_us = 0;     // the first arrival's time
  int64_t start_us = 0;  // starts_at, on the steady clock
  std::vector<State> state;
  std::vector<int32_t> rank;  // 1-based place in the draw; empty until the seed is known
  std::unique_ptr<Fenwick> admitted;
  std::vector<std::shared_ptr<Conn>> conns;  // [0] arrivals, the rest check-ins
  std::vector<int64_t> round_cursor;         // per check-in round, the next person
  int64_t joined_cursor = 0;
  std::vector<uint32_t> latency_us;
  // Exactness.
  int64_t verified = 0, mismatches = 0;
  std::vector<std::string> first_mismatches;
  // The model needs every person the random method let in. Answers are held to it when sent
  // before the switch to random and received before the switch back was sent (saying fifo,
  // they were made before the switch), or sent after the switch back once everyone still here
  // has had an answer to a request sent after it (then each one let in at random was seen).
  int64_t random_sent_us = INT64_MAX;  // the switch to random is about to be sent
  int64_t back_sent_us = INT64_MAX;    // the switch back is about to be sent
  int64_t back_us = INT64_MAX;         // the switch back to fifo was answered
  std::vector<bool> seen_after_back;
  int64_t seen_after = 0, left_before_back = 0;
  bool all_seen() const { return seen_after >= f.people - left_before_back - gone; }
  // Time to positions.
  int64_t last_prequeue_after_start_us = 0;
  int64_t first_waiting_after_start_us = 0;
  // Counts.
  int64_t answers = 0, errors = 0, admitted_seen = 0, gone = 0, closed = 0, behind_max = 0;
  std::string failure;        // what stopped the run (a connection lost, a wrong answer)
  std::string first_refusal;  // the first answer that was not a 200
  bool stopping = false;

  int64_t Now() const { return NowUs() - t0_us; }
  // The people whose k-th check-in is due by now (k = 0: their arrival).
  int64_t DueBy(int64_t now_us, int round) const {
    double t = static_cast<double>(now_us) / 1e6 - f.checkin_s * round;
    if (t < 0) return 0;
    return std::min(f.people, static_cast<int64_t>(t / f.arrive_s * static_cast<double>(f.people)));
  }
  // Where each connection goes: conns[i] to servers[server_of[i]] (0: --server, for arrivals).
  struct Server {
    std::string host;
    tcp::resolver::results_type endpoints;
  };
  std::vector<Server> servers;
  std::vector<size_t> server_of;
  net::io_context* ioc = nullptr;
  void Tick();
  void Fail(std::string what) {
    if (failure.empty()) failure = std::move(what);
    ++errors;
  }
};

void Run::Tick() {
  for (size_t i = 0; i < conns.size(); ++i) {
    if (!conns[i]->closed_idle()) continue;
    const Server& server = servers[server_of[i]];
    conns[i] = std::make_shared<Conn>(*ioc, server.host, *this);
    conns[i]->Connect(server.endpoints);
  }
  int64_t now = Now();
  int64_t due = DueBy(now, 0);
  for (; joined_cursor < due; ++joined_cursor) conns[0]->Ask(Kind::kJoin, joined_cursor);
  size_t checkers = conns.size() - 1;
  for (size_t r = 1; r < round_cursor.size(); ++r) {
    int64_t& cursor = round_cursor[r];
    int64_t until = std::min(DueBy(now, static_cast<int>(r)), joined_cursor);
    behind_max = std::max(behind_max, until - cursor);
    for (; cursor < until; ++cursor) {
      if (state[static_cast<size_t>(cursor)] != State::kHere) continue;
      conns[1 + static_cast<size_t>(cursor) % checkers]->Ask(Kind::kCheck, cursor);
    }
  }
}

void Conn::Ask(Kind kind, int64_t person) {
  if (!connected_) {
    early_.emplace_back(kind, person);
    return;
  }
  std::string body = fmt::format(R"({{"session":"p{}"{}}})", person,
                                 kind == Kind::kLeave ? R"(,"final":true)" : "");
  pending_.push_back({person, NowUs(), kind});
  Send("POST", run_.room_path + (kind == Kind::kLeave ? "/leave" : "/check"), body, 0);
}

void Conn::OnFailure(const std::string& what) {
  if (run_.stopping) return;
  if (pending_.empty() && early_.empty()) {
    closed_idle_ = true;
    return;
  }
  run_.Fail("connection: " + what);
}

void Conn::OnAnswer(int, int status, std::string& body) {
  Pending p = pending_.front();
  pending_.pop_front();
  int64_t now = NowUs();
  run_.latency_us.push_back(static_cast<uint32_t>(std::min<int64_t>(now - p.sent_us, UINT32_MAX)));
  ++run_.answers;
  if (status != 200) {  // overload (503, 429): counted, and the person tries again later
    ++run_.errors;
    if (run_.first_refusal.empty()) {
      run_.first_refusal =
          fmt::format("HTTP {} for p{}: {}", status, p.person, body.substr(0, 200));
    }
    return;
  }
  if (p.kind == Kind::kLeave) return;
  Answer a = Parse(body);
  const auto who = static_cast<size_t>(p.person);
  if (p.sent_us >= run_.back_us && !run_.seen_after_back[who]) {
    run_.seen_after_back[who] = true;
    ++run_.seen_after;
  }
  int64_t since_start = now - run_.start_us;
  if (a.status == "prequeue") {
    if (since_start >= 0) run_.last_prequeue_after_start_us = since_start;
  } else if (a.status == "waiting") {
    if (since_start >= 0 && run_.first_waiting_after_start_us == 0) {
      run_.first_waiting_after_start_us = since_start;
    }
    if (!run_.rank.empty() && a.phase == "queue" && a.method == "fifo" &&
        ((p.sent_us < run_.random_sent_us && now < run_.back_sent_us) ||
         (p.sent_us >= run_.back_us && run_.all_seen()))) {
      int64_t r = run_.rank[who];
      int64_t expected = r - (run_.f.people - a.waiting) + run_.admitted->Above(r);
      ++run_.verified;
      if (a.position != expected) {
        ++run_.mismatches;
        if (run_.first_mismatches.size() < 5) {
          run_.first_mismatches.push_back(
              fmt::format("p{} rank {}: position {}, model {} (waiting {}, admitted behind {})",
                          p.person, r, a.position, expected, a.waiting, run_.admitted->Above(r)));
        }
      }
    }
  } else if (a.status == "active") {
    ++run_.admitted_seen;
    if (!run_.rank.empty()) run_.admitted->Mark(run_.rank[who]);
    run_.state[who] = State::kLeft;
    Ask(Kind::kLeave, p.person);  // the outflow: in, and away again
  } else if (a.status == "gone") {
    ++run_.gone;
    run_.state[who] = State::kGone;
  } else if (a.status == "closed") {
    ++run_.closed;
  } else {
    run_.Fail(fmt::format("unexpected answer for p{}: {}", p.person, body.substr(0, 200)));
  }
}

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int RunLaunch(const LaunchFlags& flags, const ClientFlags& client_flags) {
  Run run;
  run.f = flags;
  run.room_path = "/v1/rooms/" + flags.room;
  const auto n = static_cast<size_t>(flags.people);
  run.state.assign(n, State::kHere);
  run.latency_us.reserve(n * 8);
  run.round_cursor.assign(
      static_cast<size_t>(std::ceil((flags.start_after_s + flags.run_s) / flags.checkin_s)) + 1, 0);

  // The room and its event: a pre-queue from now, the shuffled start start_after_s away.
  Client admin(client_flags.server, client_flags.admin_key);
  HttpResult put = admin.PutRoom(
      flags.room, {{"capacity", flags.capacity},
                   {"checkin_timeout_ms", static_cast<int64_t>(flags.checkin_s * 3000)},
                   {"idle_timeout_ms", nullptr},
                   {"queueing_method", "fifo"}});
  if (!put.ok()) throw std::runtime_error("cannot make the room: " + put.body + put.error);
  const int64_t wall0 = WallMs();
  const auto start_ms = static_cast<int64_t>(flags.start_after_s * 1000);
  boost::json::object event{{"name", "launch"},
                            {"prequeue_at", wall0},
                            {"starts_at", wall0 + start_ms},
                            {"ends_at", wall0 + 86'400'000},
                            {"shuffle_at_start", true}};
  HttpResult scheduled =
      admin.Request("PUT", run.room_path + "/schedule/drop", boost::json::serialize(event));
  if (!scheduled.ok()) {
    throw std::runtime_error("cannot schedule: " + scheduled.body + scheduled.error);
  }
  run.t0_us = NowUs();
  run.start_us = run.t0_us + start_ms * 1000;
  run.seen_after_back.assign(n, false);
  const std::string proc = "/proc/" + std::to_string(flags.server_pid);
  int64_t rss0 = flags.server_pid > 0 ? RssKb(proc + "/status") : -1;
  std::atomic<int64_t> rss_arrived{-1};

  net::io_context ioc;
  tcp::resolver resolver(ioc);
  std::vector<std::string> urls{client_flags.server};
  urls.insert(urls.end(), flags.check_servers.begin(), flags.check_servers.end());
  for (const std::string& u : urls) {
    auto url = boost::urls::parse_uri(u);
    if (!url) throw std::runtime_error("a server must be a URL like http://127.0.0.1:8080");
    std::string port = url->has_port() ? std::string(url->port()) : "80";
    run.servers.push_back({std::string(url->host()), resolver.resolve(url->host(), port)});
  }
  run.ioc = &ioc;
  for (int i = 0; i < 1 + flags.connections; ++i) {
    // Arrivals to --server; check-ins spread over every server given.
    size_t server = i == 0 ? 0 : static_cast<size_t>(i - 1) % run.servers.size();
    run.server_of.push_back(server);
    run.conns.push_back(std::make_shared<Conn>(ioc, run.servers[server].host, run));
    run.conns.back()->Connect(run.servers[server].endpoints);
  }
  net::steady_timer timer(ioc);
  const int64_t end_us = run.start_us + static_cast<int64_t>(flags.run_s * 1e6);
  std::function<void()> tick = [&] {
    if (NowUs() >= end_us || !run.failure.empty()) {
      run.stopping = true;
      for (auto& c : run.conns) c->Close();
      return;
    }
    run.Tick();
    timer.expires_after(std::chrono::milliseconds(5));
    timer.async_wait([&](boost::system::error_code) { tick(); });
  };
  tick();

  // The control: memory once everyone is in, the draw's seed, the method's switches.
  std::string control_error;
  std::thread control([&] {
    try {
      Client c(client_flags.server, client_flags.admin_key);
      auto sleep_until = [](int64_t us) {
        int64_t left = us - NowUs();
        if (left > 0) std::this_thread::sleep_for(std::chrono::microseconds(left));
      };
      sleep_until(run.t0_us + static_cast<int64_t>((flags.arrive_s + 3) * 1e6));
      if (flags.server_pid > 0) rss_arrived = RssKb(proc + "/status");
      sleep_until(run.start_us);
      boost::json::value shuffle;
      while (NowUs() < end_us) {
        HttpResult e = c.Request("GET", run.room_path + "/schedule/drop");
        if (e.ok() && e.json.is_object() && e.json.as_object().contains("shuffle") &&
            !e.json.as_object().at("shuffle").is_null()) {
          shuffle = e.json.as_object().at("shuffle");
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (shuffle.is_null()) throw std::runtime_error("the event never showed its shuffle");
      std::string hex(shuffle.at("seed").as_string());
      int64_t count = shuffle.at("count").to_number<int64_t>();
      if (count != flags.people) {
        throw std::runtime_error(fmt::format("the draw took {} people, not {}: {} / room {}", count,
                                             flags.people, boost::json::serialize(shuffle),
                                             c.GetRoom(flags.room).body));
      }
      core::DrawSeed seed{};
      for (size_t i = 0; i < seed.size(); ++i) {
        seed[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
      }
      std::vector<uint32_t> order(n);
      for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
      core::FisherYates draw(seed, std::move(order));
      draw.Step(n);
      auto rank = std::make_shared<std::vector<int32_t>>(n);
      for (size_t k = 0; k < n; ++k) (*rank)[draw.order()[k]] = static_cast<int32_t>(k + 1);
      net::post(ioc, [&run, rank] {
        run.admitted = std::make_unique<Fenwick>(run.f.people);
        run.rank = std::move(*rank);
      });
      sleep_until(run.start_us + static_cast<int64_t>(flags.random_at_s * 1e6));
      auto mark = [&ioc](int64_t& at) {
        std::promise<void> told;
        net::post(ioc, [&at, &told] {
          at = NowUs();
          told.set_value();
        });
        told.get_future().wait_for(std::chrono::seconds(5));  // the run may have stopped
      };
      mark(run.random_sent_us);
      HttpResult r = c.PutRoom(flags.room, {{"queueing_method", "random"}});
      if (!r.ok()) throw std::runtime_error("switch to random: " + r.body + r.error);
      sleep_until(run.start_us + static_cast<int64_t>(flags.fifo_at_s * 1e6));
      mark(run.back_sent_us);
      r = c.PutRoom(flags.room, {{"queueing_method", "fifo"}});
      if (!r.ok()) throw std::runtime_error("switch to fifo: " + r.body + r.error);
      net::post(ioc, [&run] {
        run.back_us = NowUs();
        run.left_before_back =
            static_cast<int64_t>(std::count(run.state.begin(), run.state.end(), State::kLeft));
      });
    } catch (const std::exception& e) {
      control_error = e.what();
    }
  });
  ioc.run();
  control.join();
  if (!control_error.empty() && run.failure.empty()) run.failure = control_error;

  double secs = static_cast<double>(NowUs() - run.t0_us) / 1e6;
  int64_t rss1 = rss_arrived.load();
  double rss_per_person =
      rss0 >= 0 && rss1 >= 0 ? static_cast<double>(rss1 - rss0) * 1024.0 / flags.people : -1;
  std::string mismatches;
  for (const auto& m : run.first_mismatches) mismatches += (mismatches.empty() ? "" : "; ") + m;
  auto& lat = run.latency_us;
  fmt::print(
      "{{\"people\":{},\"answers\":{},\"per_s\":{:.0f},\"p50_ms\":{:.3f},\"p99_ms\":{:.3f},"
      "\"max_ms\":{:.3f},\"verified\":{},\"mismatches\":{},\"admitted\":{},\"gone\":{},"
      "\"closed\":{},\"errors\":{},\"positions_after_start_ms\":{:.0f},"
      "\"first_position_after_start_ms\":{:.0f},\"rss_bytes_per_person\":{:.1f},"
      "\"most_checkins_behind\":{},\"seconds\":{:.1f},\"failure\":{},\"first_refusal\":{},"
      "\"first_mismatches\":{}}}\n",
      flags.people, run.answers, static_cast<double>(run.answers) / secs, PercentileMs(lat, 0.50),
      PercentileMs(lat, 0.99), PercentileMs(lat, 1.0), run.verified, run.mismatches,
      run.admitted_seen, run.gone, run.closed, run.errors,
      static_cast<double>(run.last_prequeue_after_start_us) / 1e3,
      static_cast<double>(run.first_waiting_after_start_us) / 1e3, rss_per_person, run.behind_max,
      secs, boost::json::serialize(boost::json::value(run.failure)),
      boost::json::serialize(boost::json::value(run.first_refusal)),
      boost::json::serialize(boost::json::value(mismatches)));
  return run.failure.empty() && run.mismatches == 0 && run.gone == 0 ? 0 : 1;
}

}  // namespace

void AddLaunchCommand(CLI::App& app, ClientFlags& flags) {
  auto f = std::make_shared<LaunchFlags>();
  CLI::App* cmd = app.add_subcommand("launch", "A drop: pre-queue, shuffled start, outflow");
  cmd->add_option("--server", flags.server, "anteroom server URL")->capture_default_str();
  cmd->add_option("--admin-key", flags.admin_key, "Admin key (default: $ANTEROOM_ADMIN_KEY)");
  cmd->add_option("--room", f->room, "Room to use (created or changed)")->capture_default_str();
  cmd->add_option("--people", f->people, "People who arrive")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{10'000'000}));
  cmd->add_option("--arrive-s", f->arrive_s, "Seconds over which they arrive")
      ->capture_default_str();
  cmd->add_option("--checkin-s", f->checkin_s, "Seconds between a person's check-ins")
      ->capture_default_str();
  cmd->add_option("--start-after-s", f->start_after_s, "The start, from the first arrival")
      ->capture_default_str();
  cmd->add_option("--run-s", f->run_s, "Seconds the run goes on after the start")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  cmd->add_option("--random-at-s", f->random_at_s, "Switch to random, after the start")
      ->capture_default_str();
  cmd->add_option("--fifo-at-s", f->fifo_at_s, "Switch back to fifo, after the start")
      ->capture_default_str();
  cmd->add_option("--capacity", f->capacity, "Room capacity")->capture_default_str();
  cmd->add_option("--connections", f->connections, "Keep-alive connections for check-ins")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--server-pid", f->server_pid, "The server's PID, for its memory")
      ->capture_default_str();
  cmd->add_option("--check-server", f->check_servers,
                  "Another process on the same store: check-ins go to every server (repeatable)");
  cmd->callback([f, &flags] {
    if (f->start_after_s <= f->arrive_s)
      throw CLI::ValidationError("--start-after-s must be > --arrive-s");
    if (f->fifo_at_s <= f->random_at_s)
      throw CLI::ValidationError("--fifo-at-s must be > --random-at-s");
    int rc = RunLaunch(*f, flags);
    if (rc != 0) std::exit(rc);
  });
}

}  // namespace anteroom::load
