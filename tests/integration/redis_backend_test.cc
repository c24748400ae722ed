// The Redis backend through real processes: `anteroom serve --store redis://...` (and
// `redis+cluster://...`) against Debian's redis-server started by the test on loopback ports.
// Skipped when /usr/bin/redis-server is missing. Every request has a bounded wait (a raw
// keep-alive connection with timeouts, so a hung backend fails the test instead of hanging
// it); every process a test starts is stopped by PID before it ends.
//
//  - MultiProcessRoom: 3 processes on one Redis; 1000 simulated clients (8 threads; 300 and 4
//    under sanitizers) spread over them, on one room of capacity 50 with random arrivals,
//    check-ins, leaves, returns within grace and drop-outs (check-in timeout 2 s, idle 1.5 s,
//    grace 1 s, so expiry happens during the run). Capacity is never exceeded (every answer,
//    and GETs sampled every 20 ms); admissions follow arrival order (no session that arrived
//    after another, still waiting, is admitted before it; returns within grace are not
//    arrivals); a waiting session's position never goes up; and three times the clients hold
//    still (no arrivals, leaves or drop-outs; every earlier drop-out has expired) and check in
//    together: the waiting sessions' positions are exactly 1..waiting. A token issued by one
//    process verifies on another.
//  - MultiProcessQueues: a long poll parked on one process wakes within 500 ms of a push through
//    another; then 4 workers over 3 processes, 2 producers: no job delivered to two workers
//    while a lease is valid, no acked job delivered again, every push answered 201 acked, the
//    counters add up.
//  - NoJobWaitsForALeaseWhileItsWorkerAsks: a long poll whose client left gets no job; the live
//    worker asking next (same worker name, another process pushing) gets it at once, attempt 1.
//  - QueueBenchmarkRunTwiceDoesNotWaitForLeases: `anteroom-bench queue` on 3 processes, twice on
//    the same queues (scripts/bench-redis.sh's 3-process scenario): no job waits for a lease.
//  - SurvivorRunsExpiry: 3 processes, two killed with SIGKILL; rooms' grace, check-in and idle
//    deadlines, and queues' leases, heartbeats and delays set up through the killed ones still
//    happen on time (within ~1 s) through the survivor.
//  - RedisRestartUnderLoad: redis-server with AOF (appendfsync always) restarted (SIGTERM), then
//    killed (SIGKILL) and started again, then frozen (SIGSTOP) for 4 s, longer than the store's
//    timeout, under producers, workers and a room client: requests
//    during the outage answer 503 with a JSON error within a few seconds, the processes
//    reconnect by themselves, and afterwards every push answered 201 is delivered and acked and
//    the counters add up.
//  - ClusterSlotMigration: a 3-master Redis Cluster; the slots of a live queue and a live room
//    are migrated (and moved back) while clients run: every request answered, nothing lost,
//    the counters add up, positions exact.
//
// Seeds are printed; rerun with ANTEROOM_TEST_SEED=N (thread scheduling is not reproducible).
#include <signal.h>
#include <sys/types.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "support/payload_checks.h"
#include "support/redis_process.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

#define SKIP_WITHOUT_REDIS() \
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed"

int64_t WallMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t MsBetween(TimePoint a, TimePoint b) {
  return std::chrono::duration_cast<milliseconds>(b - a).count();
}

uint64_t TestSeed() {
  if (const char* s = std::getenv("ANTEROOM_TEST_SEED"); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 10);
  }
  return std::random_device{}();
}

// ---- bounded HTTP ------------------------------------------------------------------------------

struct Answer {
  int status = 0;  // 0: no answer (see error)
  std::string body;
  json::value json;
  std::string error;
  TimePoint sent;
  TimePoint received;
  int64_t sent_wall = 0;  // ms since the epoch (the clock Redis's TIME reads)
  int64_t received_wall = 0;

  int64_t ms() const { return MsBetween(sent, received); }
  std::string Describe() const {
    return error.empty() ? std::to_string(status) + " " + body : "no answer: " + error;
  }
};

std::optional<int64_t> Int(const json::value& v, std::string_view key) {
  if (!v.is_object()) return std::nullopt;
  const json::value* f = v.as_object().if_contains(key);
  if (f == nullptr || !f->is_int64()) return std::nullopt;
  return f->as_int64();
}

std::optional<std::string> Str(const json::value& v, std::string_view key) {
  if (!v.is_object()) return std::nullopt;
  const json::value* f = v.as_object().if_contains(key);
  if (f == nullptr || !f->is_string()) return std::nullopt;
  return std::string(f->as_string());
}

std::optional<bool> Bool(const json::value& v, std::string_view key) {
  if (!v.is_object()) return std::nullopt;
  const json::value* f = v.as_object().if_contains(key);
  if (f == nullptr || !f->is_bool()) return std::nullopt;
  return f->as_bool();
}

const json::array* Arr(const json::value& v, std::string_view key) {
  if (!v.is_object()) return nullptr;
  const json::value* f = v.as_object().if_contains(key);
  return f != nullptr && f->is_array() ? &f->as_array() : nullptr;
}

// {"error": {"code": CODE, "message": non-empty}}, nothing else.
bool IsJsonError(const Answer& a, std::string_view code) {
  if (!a.json.is_object() || a.json.as_object().size() != 1) return false;
  const json::value* e = a.json.as_object().if_contains("error");
  if (e == nullptr || !e->is_object() || e->as_object().size() != 2) return false;
  auto c = Str(*e, "code");
  auto m = Str(*e, "message");
  return c == code && m && !m->empty();
}

// One keep-alive connection to one process, every wait bounded. Not thread-safe.
class HttpConn {
 public:
  explicit HttpConn(uint16_t port) : port_(port) {}

  uint16_t port() const { return port_; }

  Answer Call(std::string_view method, std::string_view target, std::string_view body = {},
              milliseconds timeout = seconds(6)) {
    Answer a;
    a.sent = SteadyClock::now();
    a.sent_wall = WallMs();
    Exchange(a, method, target, body, timeout);
    a.received = SteadyClock::now();
    a.received_wall = WallMs();
    return a;
  }
  Answer Get(std::string_view target, milliseconds timeout = seconds(6)) {
    return Call("GET", target, {}, timeout);
  }
  Answer Post(std::string_view target, const json::object& body,
              milliseconds timeout = seconds(6)) {
    return Call("POST", target, json::serialize(body), timeout);
  }
  Answer Put(std::string_view target, const json::object& body, milliseconds timeout = seconds(6)) {
    return Call("PUT", target, json::serialize(body), timeout);
  }

 private:
  void Exchange(Answer& a, std::string_view method, std::string_view target, std::string_view body,
                milliseconds timeout) {
    if (!conn_ || !conn_->connected()) {
      conn_ = std::make_unique<RawConnection>(port_, std::min<milliseconds>(timeout, seconds(3)));
      if (!conn_->connected()) {
        conn_.reset();
        a.error = "cannot connect to port " + std::to_string(port_);
        return;
      }
    }
    if (!conn_->Send(RawRequest(method, target, body))) {
      conn_.reset();
      a.error = "send failed";
      return;
    }
    std::string response = conn_->ReadResponse(timeout);
    int status = RawStatus(response);
    if (status == 0) {
      conn_.reset();
      a.error = response.empty()
                    ? "closed or no answer within " + std::to_string(timeout.count()) + " ms"
                    : "malformed answer: " + Tail(response, 300);
      return;
    }
    a.body = RawBody(response);
    if (auto length = RawHeader(response, "Content-Length");
        length && a.body.size() < std::strtoull(length->c_str(), nullptr, 10)) {
      conn_.reset();
      a.error = "truncated answer: " + Tail(response, 300);
      return;
    }
    a.status = status;
    if (auto connection = RawHeader(response, "Connection"); connection && *connection == "close") {
      conn_.reset();
    }
    boost::system::error_code ec;
    a.json = json::parse(a.body, ec);
    if (ec) a.json = nullptr;
  }

  uint16_t port_;
  std::unique_ptr<RawConnection> conn_;
};

std::string RoomPath(std::string_view room, std::string_view tail = {}) {
  return "/v1/rooms/" + std::string(room) + std::string(tail);
}
std::string QueuePath(std::string_view queue, std::string_view tail = {}) {
  return "/v1/queues/" + std::string(queue) + std::string(tail);
}

// ---- processes ---------------------------------------------------------------------------------

using Servers = std::vector<std::unique_ptr<ServerProcess>>;

// `anteroom serve --store STORE` n times (no token secret in the environment: the processes
// share the one kept in Redis). Empty (and *error) when one did not start; those started are
// stopped by their destructors.
Servers StartAnterooms(int n, const std::string& store, std::string* error) {
  Servers servers;
  for (int i = 0; i < n; ++i) {
    auto s = std::make_unique<ServerProcess>(std::vector<std::string>{"--store", store}, EnvVars{},
                                             seconds(20));
    if (!s->started()) {
      *error = "process " + std::to_string(i) + ": " + s->error();
      return {};
    }
    servers.push_back(std::move(s));
  }
  return servers;
}

std::string Logs(Servers& servers) {
  std::string out;
  for (size_t i = 0; i < servers.size(); ++i) {
    if (!servers[i]) continue;
    out += "\n--- anteroom process " + std::to_string(i) + " (pid " +
           std::to_string(servers[i]->pid()) + ") stderr:\n" + Tail(servers[i]->Errors(), 2500);
  }
  return out;
}

std::vector<uint16_t> Ports(Servers& servers) {
  std::vector<uint16_t> ports;
  for (auto& s : servers) ports.push_back(s->port());
  return ports;
}

// SIGKILL, then reap (Stop finds it dead).
void KillNine(ServerProcess& s) {
  kill(s.pid(), SIGKILL);
  s.Stop();
}

// Up to `limit` messages kept, all counted; thread-safe.
class Problems {
 public:
  void Add(std::string what) {
    std::lock_guard lock(mu_);
    ++count_;
    if (kept_.size() < 15) kept_.push_back(std::move(what));
  }
  int64_t count() const {
    std::lock_guard lock(mu_);
    return count_;
  }
  std::string Text() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& k : kept_) out += "\n  " + k;
    if (count_ > static_cast<int64_t>(kept_.size())) {
      out += "\n  ... and " + std::to_string(count_ - static_cast<int64_t>(kept_.size())) + " more";
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  int64_t count_ = 0;
  std::vector<std::string> kept_;
};

struct QueueStats {
  int64_t ready = -1, delayed = -1, inflight = -1, dead = -1, pushed = -1, acked = -1,
          cancelled = -1, expired = -1;
  bool ok = false;
  std::string body;

  int64_t Sum() const { return acked + ready + delayed + inflight + dead + cancelled; }
  bool AddsUp() const { return ok && pushed == Sum(); }
  bool Idle() const { return ok && ready == 0 && delayed == 0 && inflight == 0; }
};

QueueStats StatsOf(HttpConn& conn, const std::string& queue) {
  QueueStats s;
  Answer a = conn.Get(QueuePath(queue));
  s.body = a.Describe();
  if (a.status != 200) return s;
  auto get = [&](std::string_view k) { return Int(a.json, k).value_or(-1); };
  s.ready = get("ready");
  s.delayed = get("delayed");
  s.inflight = get("inflight");
  s.dead = get("dead");
  s.pushed = get("pushed");
  s.acked = get("acked");
  s.cancelled = get("cancelled");
  s.expired = get("expired");
  s.ok = s.ready >= 0 && s.delayed >= 0 && s.inflight >= 0 && s.dead >= 0 && s.pushed >= 0 &&
         s.acked >= 0 && s.cancelled >= 0;
  return s;
}

struct RoomState {
  int64_t active = -1, waiting = -1, admitted_total = -1, dropped_total = -1;
  bool ok = false;
  std::string body;
  bool SameAs(const RoomState& o) const {
    return ok && o.ok && active == o.active && waiting == o.waiting &&
           admitted_total == o.admitted_total && dropped_total == o.dropped_total;
  }
};

RoomState RoomOf(HttpConn& conn, const std::string& room) {
  RoomState r;
  Answer a = conn.Get(RoomPath(room));
  r.body = a.Describe();
  if (a.status != 200) return r;
  r.active = Int(a.json, "active").value_or(-1);
  r.waiting = Int(a.json, "waiting").value_or(-1);
  r.admitted_total = Int(a.json, "admitted_total").value_or(-1);
  r.dropped_total = Int(a.json, "dropped_total").value_or(-1);
  r.ok = r.active >= 0 && r.waiting >= 0 && r.admitted_total >= 0 && r.dropped_total >= 0;
  return r;
}

bool WaitUntil(const std::function<bool()>& done, milliseconds timeout,
               milliseconds every = milliseconds(20)) {
  auto deadline = SteadyClock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

// ==== a. many processes, one room ===============================================================

constexpr char kRoom[] = "mp-room";
constexpr int kRoomProcs = 3;
constexpr int64_t kCapacity = 50;
// Under ASan/UBSan (slower processes on the same 2 cores) fewer clients, so that the check-in
// cadence below still holds.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
constexpr int kSessions = kSanitized ? 300 : 1000;
constexpr int kRoomThreads = kSanitized ? 4 : 8;
constexpr int64_t kCheckinMs = 2000;
constexpr int64_t kIdleMs = 1500;
constexpr int64_t kGraceMs = 1000;
// Timing slack for deciding from the client's side what the server must have done.
constexpr int64_t kMarginMs = 300;
constexpr int kCadenceMinMs = 400;  // check-ins every 400-700 ms
constexpr int kCadenceMaxMs = 700;
constexpr int64_t kArrivalsOverMs = 12'000;
constexpr int64_t kQuietBeforeMs = 4'500;  // no new drop-outs this long before a hold
const std::vector<int64_t> kHoldsAtMs = {8'000, 16'000, 24'000};  // the last one ends the run
// After the last drop-out's deadline, how long expiry may take to show.
constexpr int64_t kExpiryLagMs = 1'000;

enum class Phase : int { kRun = 0, kHold = 1, kScan = 2 };

enum class SessState { kNotArrived, kWaiting, kActive, kAway, kOut, kGhost, kDone };

// One stay of a session in the room: from the check that joined it to the end of its stay.
struct Stint {
  std::string session;
  TimePoint join_sent, join_received;
  // Certainly not in the room before the joining check (not a return within grace, not a
  // session still in line from before).
  bool certain = true;
  // Every check-in of the stay came within the check-in timeout (minus margins), so the
  // session was in line without a break up to last_waiting_sent.
  bool continuous = true;
  bool waited = false;  // answered waiting at least once while continuous
  TimePoint last_waiting_sent;
  bool admitted = false;
  TimePoint first_active_received;
};

struct Sess {
  std::string id;
  SessState state = SessState::kNotArrived;
  TimePoint next;
  TimePoint hold_until;
  TimePoint last_sent, last_received;  // the last check answered 200
  TimePoint leave_sent, leave_received;
  TimePoint ghost_bound;  // a ghost is surely out of the room after this
  int64_t last_position = 0;
  // The position of the latest answer that said waiting, whatever the bookkeeping made of it
  // (last_position keeps only those of an unbroken wait): what a scan reports.
  int64_t answered_position = 0;
  bool position_valid = false;  // last_position belongs to the current continuous stay
  int stint = -1;
};

struct ScanItem {
  std::string session;
  std::string status;
  int64_t position = 0;
};

struct RoomRun {
  std::atomic<int> phase{static_cast<int>(Phase::kRun)};
  std::atomic<int> hold_round{0};
  std::atomic<int> held{0};  // threads that saw the current hold round
  std::atomic<int> scan_round{0};
  std::atomic<int> scanned{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> ghost_bound_ms{0};  // ms after t0
  TimePoint t0;
  std::vector<uint16_t> ports;
  uint64_t seed = 0;

  Problems violations;  // rule broken by the server
  Problems failures;    // answers no client should get
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> checks{0};
  std::atomic<int64_t> leaves{0};
  std::atomic<int64_t> grace_returns{0};
  std::atomic<int64_t> ghosts{0};
  std::atomic<int64_t> ambiguous_gaps{0};
  std::atomic<int64_t> tokens_verified{0};
  std::atomic<int64_t> max_active_seen{0};

  std::mutex mu;
  std::vector<ScanItem> scan;  // guarded by mu
  std::vector<Stint> stints;   // guarded by mu (merged at the end)

  bool Quiet(TimePoint now) const {
    int64_t at = MsBetween(t0, now);
    for (int64_t h : kHoldsAtMs) {
      if (at >= h - kQuietBeforeMs && at < h + 100) return true;
    }
    return false;
  }
  void NoteGhostBound(TimePoint bound) {
    int64_t ms = MsBetween(t0, bound);
    int64_t cur = ghost_bound_ms.load();
    while (ms > cur && !ghost_bound_ms.compare_exchange_weak(cur, ms)) {
    }
  }
  void NoteActive(int64_t active) {
    int64_t cur = max_active_seen.load();
    while (active > cur && !max_active_seen.compare_exchange_weak(cur, active)) {
    }
  }
};

class RoomClientThread {
 public:
  RoomClientThread(RoomRun& run, int index) : run_(run), index_(index), rng_(run.seed + index) {
    for (uint16_t p : run.ports) conns_.push_back(std::make_unique<HttpConn>(p));
    for (int i = index; i < kSessions; i += kRoomThreads) {
      Sess s;
      s.id = "s" + std::to_string(i);
      s.next = run.t0 + milliseconds(Uniform(0, kArrivalsOverMs));
      sessions_.push_back(std::move(s));
    }
  }

  void Run() {
    int my_hold = 0;
    int my_scan = 0;
    while (!run_.stop.load()) {
      auto phase = static_cast<Phase>(run_.phase.load());
      if (phase != Phase::kRun) {
        int hr = run_.hold_round.load();
        if (my_hold < hr) {
          my_hold = hr;
          run_.held.fetch_add(1);
        }
        int sr = run_.scan_round.load();
        if (phase == Phase::kScan && my_scan < sr) {
          my_scan = sr;
          Scan();
          run_.scanned.fetch_add(1);
          continue;
        }
      }
      Sess* due = nullptr;
      for (Sess& s : sessions_) {
        if (s.state == SessState::kDone) continue;
        if (due == nullptr || s.next < due->next) due = &s;
      }
      TimePoint now = SteadyClock::now();
      if (due == nullptr || due->next > now) {
        milliseconds nap(5);
        if (due != nullptr) {
          nap = std::min(nap, std::chrono::ceil<milliseconds>(due->next - now));
        }
        std::this_thread::sleep_for(nap);
        continue;
      }
      Act(*due, phase != Phase::kRun, run_.Quiet(now));
    }
    std::lock_guard lock(run_.mu);
    for (Stint& s : stints_) run_.stints.push_back(std::move(s));
  }

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  double Chance() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  milliseconds Cadence() { return milliseconds(Uniform(kCadenceMinMs, kCadenceMaxMs)); }
  size_t PickProcess() { return static_cast<size_t>(Uniform(0, kRoomProcs - 1)); }

  void Act(Sess& s, bool holding, bool quiet) {
    TimePoint now = SteadyClock::now();
    switch (s.state) {
      case SessState::kNotArrived:
      case SessState::kOut:
      case SessState::kGhost:
        if (holding) {
          s.next = now + milliseconds(300);
          return;
        }
        Check(s);
        return;
      case SessState::kWaiting: {
        double r = holding ? 1.0 : Chance();
        if (r < 0.015) {
          // Final: "gone" even if it was admitted since its last check.
          Leave(s, /*final=*/true, "gone", SessState::kOut);
        } else if (r < 0.03 && !quiet) {
          Ghost(s, s.last_received + milliseconds(2 * kCheckinMs));
        } else {
          Check(s);
        }
        return;
      }
      case SessState::kActive: {
        if (holding || now < s.hold_until) {
          Check(s);
          return;
        }
        double r = Chance();
        if (r < 0.45 || (r >= 0.65 && quiet)) {
          Leave(s, /*final=*/true, "gone", SessState::kOut);
        } else if (r < 0.65) {
          Leave(s, /*final=*/false, "grace", SessState::kAway);
        } else if (r < 0.80) {
          if (Leave(s, /*final=*/false, "grace", SessState::kGhost)) {
            Ghost(s, s.leave_received + milliseconds(kGraceMs));
          }
        } else {
          Ghost(s, s.last_received + milliseconds(kIdleMs + kGraceMs));
        }
        return;
      }
      case SessState::kAway:
        Check(s);
        return;
      case SessState::kDone:
        return;
    }
  }

  // The session stops calling; it may come back (a new arrival) once surely out.
  void Ghost(Sess& s, TimePoint bound) {
    run_.ghosts.fetch_add(1);
    s.state = SessState::kGhost;
    s.ghost_bound = bound;
    s.position_valid = false;
    run_.NoteGhostBound(bound);
    if (Chance() < 0.5) {
      s.next = bound + milliseconds(Uniform(500, 2000));
    } else {
      s.state = SessState::kDone;
    }
  }

  Stint& NewStint(Sess& s, const Answer& a, bool certain) {
    Stint st;
    st.session = s.id;
    st.join_sent = a.sent;
    st.join_received = a.received;
    st.certain = certain;
    stints_.push_back(std::move(st));
    s.stint = static_cast<int>(stints_.size()) - 1;
    s.position_valid = false;
    return stints_.back();
  }

  // POST check; the bookkeeping of every state. Answers the parsed status ("" on failure).
  std::string Check(Sess& s) {
    size_t p = PickProcess();
    Answer a = conns_[p]->Post(RoomPath(kRoom, "/check"), {{"session", s.id}});
    run_.requests.fetch_add(1);
    run_.checks.fetch_add(1);
    TimePoint now = SteadyClock::now();
    if (a.status != 200) {
      run_.failures.Add("check " + s.id + " on process " + std::to_string(p) + ": " + a.Describe());
      // Whether it happened is unknown: the stay is no longer known to be unbroken.
      if (s.stint >= 0) stints_[static_cast<size_t>(s.stint)].continuous = false;
      s.position_valid = false;
      s.next = now + Cadence();
      return {};
    }
    auto status = Str(a.json, "status").value_or("");
    auto active = Int(a.json, "active");
    auto waiting = Int(a.json, "waiting");
    auto position = Int(a.json, "position");
    if (!active || !waiting || (status != "active" && status != "waiting")) {
      run_.failures.Add("check " + s.id + ": odd answer " + a.body);
      s.next = now + Cadence();
      return {};
    }
    run_.NoteActive(*active);
    if (*active > kCapacity) {
      run_.violations.Add("check of " + s.id + " answered active=" + std::to_string(*active) +
                          " > capacity: " + a.body);
    }
    if (status == "waiting" && (!position || *position < 1 || *position > *waiting)) {
      run_.violations.Add("check of " + s.id + ": position outside 1..waiting: " + a.body);
    }
    if (status == "active") MaybeVerifyToken(s, a, p);
    if (status == "waiting") s.answered_position = position.value_or(0);

    const SessState before = s.state;
    auto gap_received = MsBetween(s.last_sent, a.received);  // >= the server's gap
    auto gap_sent = MsBetween(s.last_received, a.sent);      // <= the server's gap
    switch (before) {
      case SessState::kNotArrived:
      case SessState::kOut:
      case SessState::kGhost: {
        bool certain = before != SessState::kGhost || a.sent > s.ghost_bound;
        Stint& st = NewStint(s, a, certain);
        Arrived(s, st, a, status, position);
        break;
      }
      case SessState::kWaiting: {
        Stint& st = stints_[static_cast<size_t>(s.stint)];
        if (gap_sent > kCheckinMs + kMarginMs) {
          // Surely dropped from the line meanwhile (unless admitted just before: then active).
          run_.ambiguous_gaps.fetch_add(1);
          Stint& fresh = NewStint(s, a, /*certain=*/false);
          Arrived(s, fresh, a, status, position);
          break;
        }
        if (gap_received >= kCheckinMs - kMarginMs) {
          run_.ambiguous_gaps.fetch_add(1);
          st.continuous = false;
          s.position_valid = false;
        }
        if (status == "waiting") {
          if (st.continuous) {
            if (s.position_valid && *position > s.last_position) {
              run_.violations.Add(s.id + " waiting without a break: position went from " +
                                  std::to_string(s.last_position) + " to " +
                                  std::to_string(*position));
            }
            st.waited = true;
            st.last_waiting_sent = a.sent;
            s.last_position = *position;
            s.position_valid = true;
          }
        } else {
          Admitted(s, st, a);
        }
        break;
      }
      case SessState::kActive: {
        Stint& st = stints_[static_cast<size_t>(s.stint)];
        if (status == "active") break;
        if (gap_received < kIdleMs - kMarginMs) {
          run_.violations.Add(s.id + " was active, checked in every " +
                              std::to_string(gap_received) + " ms or less, and is now " + a.body);
        } else {
          run_.ambiguous_gaps.fetch_add(1);
        }
        st.continuous = false;
        Stint& fresh = NewStint(s, a, /*certain=*/false);
        Arrived(s, fresh, a, status, position);
        break;
      }
      case SessState::kAway: {
        // Left (not final) at leave_sent: its slot is kept until at least leave_sent + grace.
        bool within_grace = a.received < s.leave_sent + milliseconds(kGraceMs - kMarginMs);
        if (status == "active") {
          if (within_grace) run_.grace_returns.fetch_add(1);
          s.state = SessState::kActive;
          s.hold_until = now + milliseconds(Uniform(500, 1500));
          break;
        }
        if (within_grace) {
          run_.violations.Add(
              s.id + " came back " + std::to_string(MsBetween(s.leave_sent, a.received)) +
              " ms after leaving (grace " + std::to_string(kGraceMs) + " ms) and is " + a.body);
        }
        bool certain = a.sent > s.leave_received + milliseconds(kGraceMs + kMarginMs);
        Stint& fresh = NewStint(s, a, certain);
        Arrived(s, fresh, a, status, position);
        break;
      }
      case SessState::kDone:
        break;
    }
    s.last_sent = a.sent;
    s.last_received = a.received;
    s.next = now + Cadence();
    return status;
  }

  void Arrived(Sess& s, Stint& st, const Answer& a, const std::string& status,
               std::optional<int64_t> position) {
    if (status == "waiting") {
      s.state = SessState::kWaiting;
      st.waited = true;
      st.last_waiting_sent = a.sent;
      s.last_position = position.value_or(0);
      s.position_valid = true;
    } else {
      Admitted(s, st, a);
    }
  }

  void Admitted(Sess& s, Stint& st, const Answer& a) {
    s.state = SessState::kActive;
    s.position_valid = false;
    if (!st.admitted) {
      st.admitted = true;
      st.first_active_received = a.received;
    }
    s.hold_until = SteadyClock::now() + milliseconds(Uniform(1000, 3000));
  }

  // Every 10th token: verified by another process than the one that issued it.
  void MaybeVerifyToken(const Sess& s, const Answer& a, size_t issued_by) {
    if (++tokens_seen_ % 10 != 0) return;
    auto token = Str(a.json, "token");
    if (!token) {
      run_.violations.Add("an active answer without a token: " + a.body);
      return;
    }
    size_t other = (issued_by + 1) % run_.ports.size();
    Answer v = conns_[other]->Post("/v1/tokens/verify", {{"token", *token}});
    run_.requests.fetch_add(1);
    if (v.status != 200 || Bool(v.json, "valid") != true || Str(v.json, "session") != s.id ||
        Str(v.json, "room") != std::string(kRoom)) {
      // Only a failure if the session is surely still admitted; it is (it just checked in).
      run_.violations.Add("token of " + s.id + " from process " + std::to_string(issued_by) +
                          " does not verify on process " + std::to_string(other) + ": " +
                          v.Describe());
      return;
    }
    run_.tokens_verified.fetch_add(1);
  }

  // Leave; answers whether it was answered as expected (the state is then `next_state`).
  bool Leave(Sess& s, bool final, const std::string& want, SessState next_state) {
    size_t p = PickProcess();
    Answer a = conns_[p]->Post(RoomPath(kRoom, "/leave"), {{"session", s.id}, {"final", final}});
    run_.requests.fetch_add(1);
    run_.leaves.fetch_add(1);
    TimePoint now = SteadyClock::now();
    Stint* st = s.stint >= 0 ? &stints_[static_cast<size_t>(s.stint)] : nullptr;
    if (st != nullptr) st->continuous = false;  // the stay ends here
    s.position_valid = false;
    auto status = Str(a.json, "status");
    if (a.status != 200 || status != want) {
      // A 200 of another status or a 404 unknown_session is a failure only when the session
      // surely still was where we think (it checked in recently enough).
      bool timely = MsBetween(s.last_sent, a.received) <
                    (s.state == SessState::kWaiting ? kCheckinMs : kIdleMs) - kMarginMs;
      bool answered = a.status == 200 || a.status == 404;
      if (!answered || timely) {
        run_.failures.Add("leave" + std::string(final ? " final " : " ") + s.id + " (" +
                          (s.state == SessState::kWaiting ? "waiting" : "active") +
                          ") on process " + std::to_string(p) + ": " + a.Describe() +
                          ", want status " + want);
      } else {
        run_.ambiguous_gaps.fetch_add(1);
      }
      // Whatever happened, it is out or in grace now: come back later as a new arrival.
      s.state = SessState::kGhost;
      s.ghost_bound = now + milliseconds(kGraceMs + 2 * kCheckinMs);
      run_.NoteGhostBound(s.ghost_bound);
      s.next = s.ghost_bound + milliseconds(500);
      return false;
    }
    s.leave_sent = a.sent;
    s.leave_received = a.received;
    s.state = next_state;
    if (next_state == SessState::kAway) {
      s.next = now + milliseconds(Uniform(150, 500));
    } else if (next_state == SessState::kOut) {
      if (Chance() < 0.45) {
        s.next = now + milliseconds(Uniform(1000, 4000));
      } else {
        s.state = SessState::kDone;
      }
    }
    return true;
  }

  // Every session in the room checks in once; positions go to run_.scan.
  void Scan() {
    std::vector<ScanItem> items;
    for (Sess& s : sessions_) {
      if (s.state != SessState::kWaiting && s.state != SessState::kActive &&
          s.state != SessState::kAway) {
        continue;
      }
      std::string status = Check(s);
      ScanItem item{s.id, status, 0};
      if (status == "waiting") item.position = s.answered_position;
      items.push_back(std::move(item));
    }
    std::lock_guard lock(run_.mu);
    for (auto& i : items) run_.scan.push_back(std::move(i));
  }

  RoomRun& run_;
  int index_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<HttpConn>> conns_;
  std::vector<Sess> sessions_;
  std::vector<Stint> stints_;
  int64_t tokens_seen_ = 0;
};

TEST(RedisBackendTest, MultiProcessRoom) {
  SKIP_WITHOUT_REDIS();
  uint64_t seed = TestSeed();
  std::printf("seed %llu (ANTEROOM_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(kRoomProcs, redis.url(), &error);
  ASSERT_EQ(servers.size(), static_cast<size_t>(kRoomProcs)) << error;
  std::vector<std::unique_ptr<HttpConn>> admin;
  for (auto& s : servers) admin.push_back(std::make_unique<HttpConn>(s->port()));

  Answer put = admin[0]->Put(RoomPath(kRoom), {{"capacity", kCapacity},
                                               {"grace_ms", kGraceMs},
                                               {"checkin_timeout_ms", kCheckinMs},
                                               {"idle_timeout_ms", kIdleMs}});
  ASSERT_EQ(put.status, 200) << put.Describe() << Logs(servers);
  for (int i = 1; i < kRoomProcs; ++i) {
    Answer get = admin[static_cast<size_t>(i)]->Get(RoomPath(kRoom));
    ASSERT_EQ(get.status, 200) << "process " << i << " sees the room: " << get.Describe();
    EXPECT_EQ(Int(get.json, "capacity"), kCapacity) << get.body;
    EXPECT_EQ(Int(get.json, "grace_ms"), kGraceMs) << get.body;
  }

  // A token issued by process 0 verifies on process 1; revoked through process 2, process 1
  // says so.
  {
    Answer probe = admin[0]->Post(RoomPath(kRoom, "/check"), {{"session", "probe"}});
    ASSERT_EQ(probe.status, 200) << probe.Describe();
    ASSERT_EQ(Str(probe.json, "status"), "active") << probe.body;
    auto token = Str(probe.json, "token");
    ASSERT_TRUE(token.has_value()) << probe.body;
    Answer v = admin[1]->Post("/v1/tokens/verify", {{"token", *token}});
    EXPECT_EQ(v.status, 200) << v.Describe();
    EXPECT_EQ(Bool(v.json, "valid"), true) << "a token of process 0 on process 1: " << v.body;
    EXPECT_EQ(Str(v.json, "session"), "probe") << v.body;
    Answer left =
        admin[2]->Post(RoomPath(kRoom, "/leave"), {{"session", "probe"}, {"final", true}});
    EXPECT_EQ(Str(left.json, "status"), "gone") << left.Describe();
    Answer revoked = admin[1]->Post("/v1/tokens/verify", {{"token", *token}});
    EXPECT_EQ(Bool(revoked.json, "valid"), false) << revoked.body;
    EXPECT_EQ(Str(revoked.json, "reason"), "revoked") << revoked.body;
  }

  RoomRun run;
  run.seed = seed;
  run.ports = Ports(servers);
  run.t0 = SteadyClock::now() + milliseconds(100);
  std::vector<std::unique_ptr<RoomClientThread>> clients;
  for (int t = 0; t < kRoomThreads; ++t) {
    clients.push_back(std::make_unique<RoomClientThread>(run, t));
  }
  std::atomic<int64_t> samples{0};
  struct Joiner {
    RoomRun& run;
    std::vector<std::thread> threads;
    ~Joiner() {
      run.stop = true;
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{run, {}};
  for (auto& c : clients) joiner.threads.emplace_back([&c] { c->Run(); });
  // Sampler: GET from a random process every 20 ms.
  joiner.threads.emplace_back([&] {
    std::vector<std::unique_ptr<HttpConn>> conns;
    for (uint16_t p : run.ports) conns.push_back(std::make_unique<HttpConn>(p));
    std::mt19937 rng(static_cast<unsigned>(seed));
    while (!run.stop.load()) {
      size_t p = rng() % conns.size();
      Answer a = conns[p]->Get(RoomPath(kRoom));
      if (a.status != 200) {
        run.failures.Add("GET room on process " + std::to_string(p) + ": " + a.Describe());
      } else {
        auto active = Int(a.json, "active");
        if (!active || *active > kCapacity) {
          run.violations.Add("GET room on process " + std::to_string(p) + ": " + a.body);
        }
        if (active) run.NoteActive(*active);
        ++samples;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  });

  struct ScanResult {
    int64_t at_ms = 0;
    bool undisturbed = false;
    RoomState state;
    size_t waiting_items = 0, active_items = 0;
    std::string problem;
  };
  std::vector<ScanResult> scans;
  for (size_t h = 0; h < kHoldsAtMs.size(); ++h) {
    std::this_thread::sleep_until(run.t0 + milliseconds(kHoldsAtMs[h]));
    TimePoint hold_start = SteadyClock::now();
    int round = run.hold_round.fetch_add(1) + 1;
    run.phase = static_cast<int>(Phase::kHold);
    ASSERT_TRUE(WaitUntil([&] { return run.held.load() >= round * kRoomThreads; }, seconds(10)))
        << "client threads did not hold";
    // Every drop-out has expired (with lag), and every return within grace came back.
    TimePoint settled = std::max(run.t0 + milliseconds(run.ghost_bound_ms.load() + kExpiryLagMs),
                                 hold_start + milliseconds(1000));
    settled = std::min(settled, hold_start + milliseconds(2 * kCheckinMs + kExpiryLagMs + 1000));
    std::this_thread::sleep_until(settled);

    ScanResult result;
    result.at_ms = MsBetween(run.t0, hold_start);
    for (int attempt = 0; attempt < 3 && !result.undisturbed; ++attempt) {
      RoomState before = RoomOf(*admin[static_cast<size_t>(attempt % kRoomProcs)], kRoom);
      {
        std::lock_guard lock(run.mu);
        run.scan.clear();
      }
      run.scanned = 0;
      run.scan_round.fetch_add(1);
      run.phase = static_cast<int>(Phase::kScan);
      bool all = WaitUntil([&] { return run.scanned.load() >= kRoomThreads; }, seconds(20));
      run.phase = static_cast<int>(Phase::kHold);
      ASSERT_TRUE(all) << "client threads did not finish the scan";
      RoomState after = RoomOf(*admin[static_cast<size_t>((attempt + 1) % kRoomProcs)], kRoom);
      result.state = before;
      if (!before.SameAs(after)) {
        result.problem = "disturbed: before " + before.body + " after " + after.body;
        std::this_thread::sleep_for(milliseconds(300));
        continue;
      }
      result.undisturbed = true;
      result.problem.clear();
      std::vector<int64_t> positions;
      size_t active_items = 0;
      {
        std::lock_guard lock(run.mu);
        for (const ScanItem& i : run.scan) {
          if (i.status == "waiting") positions.push_back(i.position);
          if (i.status == "active") ++active_items;
        }
      }
      std::sort(positions.begin(), positions.end());
      result.waiting_items = positions.size();
      result.active_items = active_items;
      std::vector<int64_t> want(static_cast<size_t>(std::max<int64_t>(before.waiting, 0)));
      for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<int64_t>(i) + 1;
      if (positions != want) {
        std::string got;
        for (size_t i = 0; i < positions.size() && i < 40; ++i) {
          got += std::to_string(positions[i]) + " ";
        }
        result.problem = "positions of the " + std::to_string(positions.size()) +
                         " waiting sessions are not 1.." + std::to_string(before.waiting) +
                         " (room " + before.body + "); first: " + got;
      } else if (static_cast<int64_t>(active_items) != before.active) {
        result.problem = std::to_string(active_items) +
                         " sessions answered active, the room says " + before.body;
      } else if (before.waiting > 0 && before.active != kCapacity) {
        result.problem = "sessions wait while slots are free: " + before.body;
      }
    }
    scans.push_back(result);
    run.phase = static_cast<int>(Phase::kRun);
  }
  run.stop = true;
  for (auto& t : joiner.threads) t.join();
  joiner.threads.clear();

  RoomState final_state = RoomOf(*admin[0], kRoom);

  // Admission order: stay A waited without a break until it asked at last_waiting_sent; stay B
  // joined after A's joining check was answered (and B was surely not in the room before). If
  // B was seen admitted before A's last waiting check was sent, B overtook A.
  std::vector<const Stint*> waited;
  std::vector<const Stint*> admitted;
  for (const Stint& s : run.stints) {
    if (s.waited) waited.push_back(&s);
    if (s.admitted && s.certain) admitted.push_back(&s);
  }
  int64_t order_checks = 0;
  Problems overtaken;
  for (const Stint* a : waited) {
    for (const Stint* b : admitted) {
      if (b->join_sent <= a->join_received) continue;
      ++order_checks;
      if (b->first_active_received < a->last_waiting_sent) {
        overtaken.Add(b->session + " (joined " + std::to_string(MsBetween(run.t0, b->join_sent)) +
                      " ms) was admitted (seen at " +
                      std::to_string(MsBetween(run.t0, b->first_active_received)) + " ms) before " +
                      a->session + " (joined " +
                      std::to_string(MsBetween(run.t0, a->join_received)) +
                      " ms), still waiting at " +
                      std::to_string(MsBetween(run.t0, a->last_waiting_sent)) + " ms");
      }
    }
  }

  std::printf(
      "room run: %lld requests (%lld checks, %lld leaves), %zu stays, %zu admitted (certain), "
      "%lld grace returns, %lld drop-outs/abandoned, %lld ambiguous gaps (client late), %lld "
      "order pairs checked, %lld tokens cross-verified, %lld GET samples, max active %lld; final "
      "%s\n",
      static_cast<long long>(run.requests.load()), static_cast<long long>(run.checks.load()),
      static_cast<long long>(run.leaves.load()), run.stints.size(), admitted.size(),
      static_cast<long long>(run.grace_returns.load()), static_cast<long long>(run.ghosts.load()),
      static_cast<long long>(run.ambiguous_gaps.load()), static_cast<long long>(order_checks),
      static_cast<long long>(run.tokens_verified.load()), static_cast<long long>(samples.load()),
      static_cast<long long>(run.max_active_seen.load()), final_state.body.c_str());
  for (const ScanResult& s : scans) {
    std::printf("hold at %lld ms: %s, %zu waiting and %zu active answered; %s\n",
                static_cast<long long>(s.at_ms), s.undisturbed ? "undisturbed" : "DISTURBED",
                s.waiting_items, s.active_items, s.state.body.c_str());
  }

  EXPECT_EQ(run.failures.count(), 0) << run.failures.Text() << Logs(servers);
  EXPECT_EQ(run.violations.count(), 0) << run.violations.Text();
  EXPECT_EQ(overtaken.count(), 0) << "admissions out of arrival order:" << overtaken.Text();
  EXPECT_LE(run.max_active_seen.load(), kCapacity);
  for (const ScanResult& s : scans) {
    EXPECT_TRUE(s.undisturbed && s.problem.empty())
        << "hold at " << s.at_ms << " ms: " << s.problem;
  }
  // The run did what it is for: admissions, expiry, grace returns, cross-process tokens.
  ASSERT_TRUE(final_state.ok) << final_state.body;
  EXPECT_GE(final_state.admitted_total, kSanitized ? 100 : 200) << final_state.body;
  EXPECT_GT(final_state.dropped_total, 0) << "no drop-out expired: " << final_state.body;
  EXPECT_GT(run.grace_returns.load(), 0);
  EXPECT_GT(run.tokens_verified.load(), 0);
  EXPECT_GT(order_checks, 1000);
  EXPECT_LT(run.ambiguous_gaps.load(), run.checks.load() / (kSanitized ? 5 : 20))
      << "the clients were often late: the checks above are weak";
  for (size_t i = 0; i < servers.size(); ++i) {
    EXPECT_TRUE(servers[i]->Alive()) << "process " << i << " died" << Logs(servers);
  }
}

// ==== b. many processes, one queue ==============================================================

struct Delivery {
  std::string id;
  int64_t n = -1;
  int worker = -1;
  int64_t attempt = 0;
  std::string lease;
  int64_t lease_expires_ms = 0;
  int64_t fetch_sent_wall = 0;
  int64_t fetch_received_wall = 0;
};

struct AckOk {
  std::string id;
  int64_t received_wall = 0;
};

// What the workers of a run saw (merged under mu).
struct QueueLog {
  std::mutex mu;
  std::vector<Delivery> deliveries;
  std::vector<AckOk> acks;
  std::map<std::string, int64_t> answered;  // id -> n: pushes answered 201
  Problems violations;
  Problems failures;
  std::atomic<int64_t> forgotten{0};
  std::atomic<int64_t> late_acks_refused{0};
};

// Deliveries of one job in attempt order: distinct attempts, each after the previous lease ran
// out, and none sent after an ack of the job was answered ok.
void CheckDeliveries(QueueLog& log, int64_t slack_ms = 2) {
  std::map<std::string, std::vector<const Delivery*>> by_id;
  for (const Delivery& d : log.deliveries) by_id[d.id].push_back(&d);
  std::map<std::string, int64_t> first_ack;
  for (const AckOk& a : log.acks) {
    auto [it, inserted] = first_ack.emplace(a.id, a.received_wall);
    if (!inserted) it->second = std::min(it->second, a.received_wall);
  }
  for (auto& [id, ds] : by_id) {
    std::sort(ds.begin(), ds.end(),
              [](const Delivery* a, const Delivery* b) { return a->attempt < b->attempt; });
    for (size_t i = 1; i < ds.size(); ++i) {
      const Delivery& a = *ds[i - 1];
      const Delivery& b = *ds[i];
      if (a.attempt == b.attempt) {
        log.violations.Add("job " + id + " delivered twice as attempt " +
                           std::to_string(a.attempt) + " (workers " + std::to_string(a.worker) +
                           " and " + std::to_string(b.worker) + ")");
      } else if (b.fetch_received_wall + slack_ms < a.lease_expires_ms) {
        log.violations.Add("job " + id + " delivered to worker " + std::to_string(b.worker) +
                           " (attempt " + std::to_string(b.attempt) + ", answer at " +
                           std::to_string(b.fetch_received_wall) + ") while worker " +
                           std::to_string(a.worker) + "'s lease ran until " +
                           std::to_string(a.lease_expires_ms));
      }
    }
    if (auto acked = first_ack.find(id); acked != first_ack.end()) {
      for (const Delivery* d : ds) {
        if (d->fetch_sent_wall > acked->second) {
          log.violations.Add("job " + id + " acked ok (answer at " + std::to_string(acked->second) +
                             ") and delivered again by a fetch "
                             "sent at " +
                             std::to_string(d->fetch_sent_wall));
        }
      }
    }
  }
}

// Reads a fetch answer's jobs into deliveries.
std::vector<Delivery> ReadJobs(const Answer& a, int worker) {
  std::vector<Delivery> out;
  const json::array* jobs = Arr(a.json, "jobs");
  if (jobs == nullptr) return out;
  for (const json::value& j : *jobs) {
    Delivery d;
    d.id = Str(j, "id").value_or("");
    if (const json::value* p = j.is_object() ? j.as_object().if_contains("payload") : nullptr) {
      d.n = Int(*p, "n").value_or(-1);
    }
    d.worker = worker;
    d.attempt = Int(j, "attempt").value_or(0);
    d.lease = Str(j, "lease").value_or("");
    d.lease_expires_ms = Int(j, "lease_expires_ms").value_or(0);
    d.fetch_sent_wall = a.sent_wall;
    d.fetch_received_wall = a.received_wall;
    out.push_back(std::move(d));
  }
  return out;
}

// Outcomes of acks ("results" of /ack, "acked" of a fetch) into the log. `sent_wall`: when the
// ack left; an ack sent well within its lease must succeed.
void ReadAcks(QueueLog& log, const Answer& a, std::string_view field,
              const std::map<std::string, Delivery>& by_lease) {
  const json::array* results = Arr(a.json, field);
  if (results == nullptr) {
    log.failures.Add("no \"" + std::string(field) + "\" in " + a.body);
    return;
  }
  std::lock_guard lock(log.mu);
  for (const json::value& r : *results) {
    auto lease = Str(r, "lease").value_or("");
    auto it = by_lease.find(lease);
    if (it == by_lease.end()) {
      log.failures.Add("an ack outcome for a lease we did not send: " + json::serialize(r));
      continue;
    }
    if (Bool(r, "ok") == true) {
      log.acks.push_back({it->second.id, a.received_wall});
    } else if (a.sent_wall + 300 < it->second.lease_expires_ms) {
      log.violations.Add("ack of job " + it->second.id + " sent " +
                         std::to_string(it->second.lease_expires_ms - a.sent_wall) +
                         " ms before its lease ran out answered " + json::serialize(r));
    } else {
      log.late_acks_refused.fetch_add(1);
    }
  }
}

TEST(RedisBackendTest, MultiProcessQueues) {
  SKIP_WITHOUT_REDIS();
  uint64_t seed = TestSeed();
  std::printf("seed %llu (ANTEROOM_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(3, redis.url(), &error);
  ASSERT_EQ(servers.size(), 3u) << error;
  std::vector<uint16_t> ports = Ports(servers);

  // A long poll parked on process A wakes promptly when a job is pushed through process B.
  {
    constexpr char kWake[] = "wake-q";
    for (int round = 0; round < 6; ++round) {
      size_t a_index = static_cast<size_t>(round % 3);
      size_t b_index = static_cast<size_t>((round + 1) % 3);
      HttpConn a(ports[a_index]);
      HttpConn b(ports[b_index]);
      Answer fetched;
      std::thread poller([&] {
        fetched = a.Post(QueuePath(kWake, "/fetch"),
                         {{"worker", "waker"}, {"max", 1}, {"lease_ms", 30000}, {"wait_ms", 5000}},
                         seconds(10));
      });
      std::this_thread::sleep_for(milliseconds(300));  // parked by now
      Answer pushed = b.Post(QueuePath(kWake, "/jobs"), {{"payload", {{"round", round}}}});
      poller.join();
      ASSERT_EQ(pushed.status, 201) << pushed.Describe() << Logs(servers);
      ASSERT_EQ(fetched.status, 200) << fetched.Describe() << Logs(servers);
      const json::array* jobs = Arr(fetched.json, "jobs");
      ASSERT_TRUE(jobs != nullptr && jobs->size() == 1)
          << "round " << round << ": the long poll on process " << a_index
          << " did not get the job pushed through process " << b_index << ": " << fetched.body;
      EXPECT_EQ(Str((*jobs)[0], "id"), Str(pushed.json, "id"));
      int64_t wake_ms = MsBetween(pushed.sent, fetched.received);
      EXPECT_LT(wake_ms, 500) << "round " << round << ": a long poll on process " << a_index
                              << " woke " << wake_ms << " ms after the push through process "
                              << b_index;
      EXPECT_GE(fetched.ms(), 250) << "the fetch was parked before the push";
      Answer acked =
          a.Post(QueuePath(kWake, "/ack"),
                 {{"leases", json::array{json::value(Str((*jobs)[0], "lease").value_or(""))}}});
      ASSERT_EQ(acked.status, 200) << acked.Describe();
      std::printf("round %d: woke %lld ms after the push\n", round,
                  static_cast<long long>(wake_ms));
    }
  }

  constexpr char kQueue[] = "mp-q";
  constexpr int kProducers = 2;
  constexpr int kJobsPerProducer = 1000;
  constexpr int kWorkers = 4;
  constexpr int64_t kLeaseMs = 2000;
  QueueLog log;
  std::atomic<bool> producers_done{false};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{stop, threads};

  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937_64 rng(seed * 31 + static_cast<uint64_t>(p));
      std::vector<std::unique_ptr<HttpConn>> conns;
      for (uint16_t port : ports) conns.push_back(std::make_unique<HttpConn>(port));
      int n = p * kJobsPerProducer;
      const int end = n + kJobsPerProducer;
      while (n < end && !stop.load()) {
        size_t via = rng() % conns.size();
        int batch = (rng() % 10 < 3) ? std::min(10, end - n) : 1;
        Answer a;
        std::vector<int> ns;
        if (batch == 1) {
          ns.push_back(n);
          a = conns[via]->Post(QueuePath(kQueue, "/jobs"), {{"payload", {{"n", n}}}});
        } else {
          json::array jobs;
          for (int i = 0; i < batch; ++i) {
            ns.push_back(n + i);
            jobs.push_back(json::object{{"payload", {{"n", n + i}}}});
          }
          a = conns[via]->Post(QueuePath(kQueue, "/jobs"), {{"jobs", jobs}});
        }
        n += batch;
        if (a.status != 201) {
          log.failures.Add("push via process " + std::to_string(via) + ": " + a.Describe());
          continue;
        }
        std::vector<std::string> ids;
        if (batch == 1) {
          ids.push_back(Str(a.json, "id").value_or(""));
        } else if (const json::array* got = Arr(a.json, "ids")) {
          for (const auto& v : *got) ids.push_back(v.is_string() ? std::string(v.as_string()) : "");
        }
        if (ids.size() != ns.size()) {
          log.failures.Add("push answer without the ids: " + a.body);
          continue;
        }
        std::lock_guard lock(log.mu);
        for (size_t i = 0; i < ids.size(); ++i) log.answered[ids[i]] = ns[i];
        if (rng() % 4 == 0) std::this_thread::sleep_for(milliseconds(3));
      }
    });
  }
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(seed * 17 + static_cast<uint64_t>(w));
      HttpConn conn(ports[static_cast<size_t>(w % 3)]);
      std::string worker = "w" + std::to_string(w);
      std::vector<std::string> to_ack;  // acked with the next fetch
      std::map<std::string, Delivery> by_lease;
      while (!stop.load()) {
        json::object body{{"worker", worker}, {"max", 8}, {"lease_ms", kLeaseMs}, {"wait_ms", 500}};
        bool with_ack = !to_ack.empty();
        if (with_ack) {
          json::array leases;
          for (const auto& l : to_ack) leases.emplace_back(l);
          body["ack"] = std::move(leases);
        }
        Answer a = conn.Post(QueuePath(kQueue, "/fetch"), body, seconds(8));
        if (a.status != 200) {
          log.failures.Add(worker + " fetch: " + a.Describe());
          std::this_thread::sleep_for(milliseconds(50));
          continue;
        }
        if (with_ack) ReadAcks(log, a, "acked", by_lease);
        to_ack.clear();
        std::vector<Delivery> got = ReadJobs(a, w);
        std::vector<std::string> ack_now;
        {
          std::lock_guard lock(log.mu);
          for (Delivery& d : got) {
            log.deliveries.push_back(d);
            by_lease[d.lease] = d;
          }
        }
        for (Delivery& d : got) {
          if (rng() % 100 < 3) {
            log.forgotten.fetch_add(1);  // never acked: its lease runs out, it comes back
          } else if (rng() % 2 == 0) {
            to_ack.push_back(d.lease);
          } else {
            ack_now.push_back(d.lease);
          }
        }
        if (!ack_now.empty()) {
          json::array leases;
          for (const auto& l : ack_now) leases.emplace_back(l);
          Answer acked = conn.Post(QueuePath(kQueue, "/ack"), {{"leases", leases}});
          if (acked.status != 200) {
            log.failures.Add(worker + " ack: " + acked.Describe());
          } else {
            ReadAcks(log, acked, "results", by_lease);
          }
        }
      }
      if (!to_ack.empty()) {
        json::array leases;
        for (const auto& l : to_ack) leases.emplace_back(l);
        Answer acked = conn.Post(QueuePath(kQueue, "/ack"), {{"leases", leases}});
        if (acked.status == 200) ReadAcks(log, acked, "results", by_lease);
      }
    });
  }

  // Producers finish, then the workers drain the queue (forgotten jobs come back after 2 s).
  HttpConn observer(ports[0]);
  TimePoint start = SteadyClock::now();
  bool drained = WaitUntil(
      [&] {
        QueueStats s = StatsOf(observer, kQueue);
        if (!s.AddsUp()) {
          if (s.ok) log.violations.Add("counters do not add up mid-run: " + s.body);
        }
        std::lock_guard lock(log.mu);
        if (static_cast<int>(log.answered.size()) < kProducers * kJobsPerProducer &&
            log.failures.count() == 0) {
          return false;
        }
        if (!s.Idle()) return false;
        std::set<std::string> acked;
        for (const AckOk& a : log.acks) acked.insert(a.id);
        for (const auto& [id, n] : log.answered) {
          if (acked.count(id) == 0) return false;
        }
        return true;
      },
      seconds(40), milliseconds(200));
  int64_t run_ms = MsBetween(start, SteadyClock::now());
  producers_done = true;
  stop = true;
  for (auto& t : threads) t.join();
  threads.clear();

  CheckDeliveries(log);
  std::set<std::string> acked;
  for (const AckOk& a : log.acks) acked.insert(a.id);
  std::vector<std::string> lost;
  for (const auto& [id, n] : log.answered) {
    if (acked.count(id) == 0) lost.push_back(id + " (n=" + std::to_string(n) + ")");
  }
  QueueStats s0 = StatsOf(observer, kQueue);
  HttpConn other1(ports[1]);
  HttpConn other2(ports[2]);
  QueueStats s1 = StatsOf(other1, kQueue);
  QueueStats s2 = StatsOf(other2, kQueue);
  std::printf(
      "queue run: %zu pushes answered, %zu deliveries, %zu acks ok, %lld forgotten, %lld late acks "
      "refused, drained in %lld ms; stats %s\n",
      log.answered.size(), log.deliveries.size(), log.acks.size(),
      static_cast<long long>(log.forgotten.load()),
      static_cast<long long>(log.late_acks_refused.load()), static_cast<long long>(run_ms),
      s0.body.c_str());

  EXPECT_TRUE(drained) << "not drained in time; stats " << s0.body << Logs(servers);
  EXPECT_EQ(log.failures.count(), 0) << log.failures.Text() << Logs(servers);
  EXPECT_EQ(log.violations.count(), 0) << log.violations.Text();
  EXPECT_EQ(log.answered.size(), static_cast<size_t>(kProducers * kJobsPerProducer));
  EXPECT_TRUE(lost.empty()) << lost.size() << " jobs answered 201 never acked, e.g. "
                            << (lost.empty() ? "" : lost.front());
  ASSERT_TRUE(s0.ok) << s0.body;
  EXPECT_TRUE(s0.AddsUp()) << s0.body;
  EXPECT_TRUE(s0.Idle()) << s0.body;
  EXPECT_EQ(s0.pushed, static_cast<int64_t>(log.answered.size())) << s0.body;
  EXPECT_EQ(s0.acked, static_cast<int64_t>(acked.size())) << s0.body;
  EXPECT_EQ(s0.dead, 0) << s0.body;
  if (log.forgotten.load() > 0) {
    EXPECT_GT(s0.expired, 0) << s0.body;
  }
  EXPECT_EQ(s1.body, s0.body) << "process 1 sees other counters";
  EXPECT_EQ(s2.body, s0.body) << "process 2 sees other counters";
  // Every worker on every process got work.
  std::set<int> workers_used;
  for (const Delivery& d : log.deliveries) workers_used.insert(d.worker);
  EXPECT_EQ(workers_used.size(), static_cast<size_t>(kWorkers));
  for (size_t i = 0; i < servers.size(); ++i) {
    EXPECT_TRUE(servers[i]->Alive()) << "process " << i << " died" << Logs(servers);
  }
}

// ==== c. all processes but one killed ===========================================================

// A worker whose client left while its long poll was parked (as a benchmark generator that
// exits, or a worker killed mid-poll) must not take the next job: it stayed leased to nobody
// for the whole lease (30 s), first in line, while a live worker asking for it got nothing.
// Each of 3 processes has such a waiter on a queue of its own, with the worker name the live
// worker uses next; the job is pushed through another process (so the wake-up comes over
// Pub/Sub) and must reach the live worker at once, as a first attempt.
TEST(RedisBackendTest, NoJobWaitsForALeaseWhileItsWorkerAsks) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(3, redis.url(), &error);
  ASSERT_EQ(servers.size(), 3u) << error;
  std::vector<uint16_t> ports = Ports(servers);
  auto queue = [](size_t i) { return "left-q" + std::to_string(i); };
  {
    std::vector<std::unique_ptr<RawConnection>> gone;
    for (size_t i = 0; i < ports.size(); ++i) {
      gone.push_back(std::make_unique<RawConnection>(ports[i]));
      ASSERT_TRUE(gone.back()->connected());
      ASSERT_TRUE(gone.back()->Send(
          RawRequest("POST", QueuePath(queue(i), "/fetch"),
                     R"({"worker":"w","max":1,"lease_ms":30000,"wait_ms":20000})")));
    }
    std::this_thread::sleep_for(milliseconds(300));  // parked by now
  }                                                  // their clients close
  std::this_thread::sleep_for(milliseconds(300));    // and the processes have read that
  for (size_t i = 0; i < ports.size(); ++i) {
    size_t via = (i + 1) % ports.size();
    HttpConn live(ports[i]);
    HttpConn producer(ports[via]);
    Answer fetched;
    std::thread poller([&] {
      fetched = live.Post(QueuePath(queue(i), "/fetch"),
                          {{"worker", "w"}, {"max", 1}, {"lease_ms", 30000}, {"wait_ms", 5000}},
                          seconds(10));
    });
    std::this_thread::sleep_for(milliseconds(300));  // parked behind the one that left
    Answer pushed = producer.Post(QueuePath(queue(i), "/jobs"), {{"payload", {{"i", i}}}});
    poller.join();
    ASSERT_EQ(pushed.status, 201) << pushed.Describe() << Logs(servers);
    ASSERT_EQ(fetched.status, 200) << fetched.Describe() << Logs(servers);
    const json::array* jobs = Arr(fetched.json, "jobs");
    ASSERT_TRUE(jobs != nullptr && jobs->size() == 1)
        << "process " << i << ": the live worker got no job in " << fetched.ms()
        << " ms; it went to the long poll whose client had left: " << fetched.body << "; stats "
        << StatsOf(live, queue(i)).body;
    EXPECT_EQ(Int((*jobs)[0], "attempt"), 1);
    int64_t wake_ms = MsBetween(pushed.sent, fetched.received);
    EXPECT_LT(wake_ms, 1000) << "process " << i;
    QueueStats stats = StatsOf(live, queue(i));
    EXPECT_EQ(stats.inflight, 1) << stats.body;
    EXPECT_EQ(stats.expired, 0) << stats.body;
  }
}

// The benchmark that showed it (scripts/bench-redis.sh, its 3-process queue scenario): three
// `anteroom-bench queue` generators, each on its own process and queue, run twice in a row on
// the same queues. The first run's workers leave long polls parked when they exit; the second
// run's first jobs went to them and waited out the 30 s lease. No job may wait that long.
TEST(RedisBackendTest, QueueBenchmarkRunTwiceDoesNotWaitForLeases) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(3, redis.url(), &error);
  ASSERT_EQ(servers.size(), 3u) << error;
  std::vector<uint16_t> ports = Ports(servers);
  const int jobs = kSanitized ? 300 : 1500;
  for (int run = 0; run < 2; ++run) {
    // As the script does between scenarios (each generator checks its queue's counters).
    ASSERT_EQ(redis.Command({"FLUSHALL"}), "OK\n");
    std::vector<CliResult> results(ports.size());
    std::vector<std::thread> generators;
    for (size_t g = 0; g < ports.size(); ++g) {
      generators.emplace_back([&, g] {
        results[g] = RunBench(
            {"queue", "--server", "http://127.0.0.1:" + std::to_string(ports[g]), "--queue",
             "bench-q" + std::to_string(g), "--jobs", std::to_string(jobs), "--producers", "2",
             "--workers", "2", "--batch", "1", "--pipeline", "8", "--timeout", "60"},
            {}, seconds(90));
      });
    }
    for (auto& t : generators) t.join();
    for (size_t g = 0; g < results.size(); ++g) {
      const CliResult& r = results[g];
      ASSERT_EQ(r.exit_code, 0) << "run " << run << ", generator " << g << ": " << r.out << r.err
                                << Logs(servers);
      std::string line = r.out.substr(0, r.out.find('\n'));
      boost::system::error_code ec;
      json::value j = json::parse(line, ec);
      ASSERT_FALSE(ec) << line;
      auto max_ms = j.as_object().if_contains("push_to_fetch_max_ms");
      ASSERT_TRUE(max_ms != nullptr && max_ms->is_number()) << line;
      EXPECT_LT(max_ms->to_number<double>(), 10'000)
          << "run " << run << ", generator " << g << ": a job waited for its lease: " << line;
      std::printf("run %d, generator %zu: %s\n", run, g, line.c_str());
    }
    for (size_t g = 0; g < ports.size(); ++g) {
      HttpConn conn(ports[g]);
      QueueStats stats = StatsOf(conn, "bench-q" + std::to_string(g));
      EXPECT_EQ(stats.expired, 0) << "run " << run << ": " << stats.body;
    }
  }
}

TEST(RedisBackendTest, SurvivorRunsExpiry) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(3, redis.url(), &error);
  ASSERT_EQ(servers.size(), 3u) << error;
  HttpConn survivor(servers[0]->port());
  HttpConn p1(servers[1]->port());
  HttpConn p2(servers[2]->port());
  // How late a deadline may show through the survivor (the target: about 1 s; the rest is slack).
  constexpr int64_t kLateMs = 1300;
  constexpr int64_t kEarlyMs = 5;

  // Rooms, each with one deadline set up through the processes that are then killed.
  //  grace: x (active) leaves (not final) through p1; y waits (checks through p2, check-in
  //         timeout 10 s): y is admitted when x's grace ends.
  ASSERT_EQ(survivor
                .Put(RoomPath("exp-grace"), {{"capacity", 1},
                                             {"grace_ms", 1500},
                                             {"checkin_timeout_ms", 10000},
                                             {"idle_timeout_ms", nullptr}})
                .status,
            200);
  //  drop:  a holds the slot (no idle timeout); b waits (through p2) and stops calling in:
  //         dropped after 1.5 s.
  ASSERT_EQ(survivor
                .Put(RoomPath("exp-drop"), {{"capacity", 1},
                                            {"grace_ms", 1000},
                                            {"checkin_timeout_ms", 1500},
                                            {"idle_timeout_ms", nullptr}})
                .status,
            200);
  //  idle:  r is admitted through p2 and goes silent: idle after 1 s, its grace ends 0.5 s later.
  ASSERT_EQ(survivor
                .Put(RoomPath("exp-idle"), {{"capacity", 1},
                                            {"grace_ms", 500},
                                            {"checkin_timeout_ms", 10000},
                                            {"idle_timeout_ms", 1000}})
                .status,
            200);
  ASSERT_EQ(Str(p1.Post(RoomPath("exp-grace", "/check"), {{"session", "x"}}).json, "status"),
            "active");
  ASSERT_EQ(Str(p2.Post(RoomPath("exp-grace", "/check"), {{"session", "y"}}).json, "status"),
            "waiting");
  ASSERT_EQ(Str(p1.Post(RoomPath("exp-drop", "/check"), {{"session", "a"}}).json, "status"),
            "active");

  // Queues: a lease taken through p2 runs out; a worker heartbeating through p1 goes silent; a
  // delayed job pushed through p1 comes due.
  Answer pushed_lease = p1.Post(QueuePath("exp-lease", "/jobs"), {{"payload", {{"k", "lease"}}}});
  ASSERT_EQ(pushed_lease.status, 201) << pushed_lease.Describe();
  Answer pushed_hb = p2.Post(QueuePath("exp-hb", "/jobs"), {{"payload", {{"k", "hb"}}}});
  ASSERT_EQ(pushed_hb.status, 201) << pushed_hb.Describe();

  // The timed part: everything below happens within ~100 ms, then p1 and p2 die.
  Answer leased = p2.Post(QueuePath("exp-lease", "/fetch"),
                          {{"worker", "doomed"}, {"max", 1}, {"lease_ms", 2000}});
  Answer hb_fetch = p1.Post(QueuePath("exp-hb", "/fetch"),
                            {{"worker", "hb-doomed"}, {"max", 1}, {"lease_ms", 60000}});
  Answer hb = p1.Post(QueuePath("exp-hb", "/workers/hb-doomed/heartbeat"), {{"ttl_ms", 2000}});
  Answer delayed =
      p1.Post(QueuePath("exp-delay", "/jobs"), {{"payload", {{"k", "delay"}}}, {"delay_ms", 2500}});
  Answer left = p1.Post(RoomPath("exp-grace", "/leave"), {{"session", "x"}, {"final", false}});
  Answer dropper = p2.Post(RoomPath("exp-drop", "/check"), {{"session", "b"}});
  Answer idler = p2.Post(RoomPath("exp-idle", "/check"), {{"session", "r"}});
  ASSERT_EQ(leased.status, 200) << leased.Describe();
  ASSERT_EQ(hb_fetch.status, 200) << hb_fetch.Describe();
  ASSERT_EQ(hb.status, 200) << hb.Describe();
  ASSERT_EQ(delayed.status, 201) << delayed.Describe();
  ASSERT_EQ(Str(left.json, "status"), "grace") << left.Describe();
  ASSERT_EQ(Str(dropper.json, "status"), "waiting") << dropper.Describe();
  ASSERT_EQ(Str(idler.json, "status"), "active") << idler.Describe();
  std::vector<Delivery> lease_jobs = ReadJobs(leased, 0);
  ASSERT_EQ(lease_jobs.size(), 1u) << leased.body;
  ASSERT_EQ(ReadJobs(hb_fetch, 0).size(), 1u) << hb_fetch.body;

  KillNine(*servers[1]);
  KillNine(*servers[2]);
  TimePoint killed = SteadyClock::now();
  int64_t killed_wall = WallMs();
  ASSERT_LT(killed_wall, lease_jobs[0].lease_expires_ms - 500) << "set-up too slow to test";

  // Deadlines (wall ms): [earliest, latest] for the event.
  struct Expect {
    std::string what;
    int64_t earliest, latest;
  };
  Expect lease_due{"lease runs out", lease_jobs[0].lease_expires_ms,
                   lease_jobs[0].lease_expires_ms};
  Expect hb_due{"heartbeat silent", hb.sent_wall + 2000, hb.received_wall + 2000};
  Expect delay_due{"delayed job due", delayed.sent_wall + 2500, delayed.received_wall + 2500};
  Expect grace_due{"grace ends", left.sent_wall + 1500, left.received_wall + 1500};
  Expect drop_due{"waiting drop-out", dropper.sent_wall + 1500, dropper.received_wall + 1500};
  Expect idle_due{"idle, then grace ends", idler.sent_wall + 1500, idler.received_wall + 1500};

  // Queues: long polls on the survivor (nothing else touches those queues).
  struct Poll {
    std::string queue;
    Expect due;
    Answer answer;
  };
  std::vector<Poll> polls = {
      {"exp-lease", lease_due, {}}, {"exp-hb", hb_due, {}}, {"exp-delay", delay_due, {}}};
  std::vector<std::thread> pollers;
  for (Poll& p : polls) {
    pollers.emplace_back([&p, port = servers[0]->port()] {
      HttpConn conn(port);
      p.answer =
          conn.Post(QueuePath(p.queue, "/fetch"),
                    {{"worker", "survivor"}, {"max", 1}, {"lease_ms", 30000}, {"wait_ms", 8000}},
                    seconds(15));
    });
  }

  // Rooms: GET through the survivor every 50 ms until each has changed.
  struct Watch {
    std::string room;
    Expect due;
    std::function<bool(const RoomState&)> changed;
    int64_t first_changed_received = 0;
    std::string last;
  };
  std::vector<Watch> watches = {
      {"exp-grace", grace_due,
       [](const RoomState& s) { return s.admitted_total == 2 && s.waiting == 0; }, 0, ""},
      {"exp-drop", drop_due,
       [](const RoomState& s) { return s.dropped_total == 1 && s.waiting == 0; }, 0, ""},
      {"exp-idle", idle_due, [](const RoomState& s) { return s.active == 0; }, 0, ""},
  };
  auto watch_deadline = killed + seconds(8);
  while (SteadyClock::now() < watch_deadline) {
    bool all = true;
    for (Watch& w : watches) {
      if (w.first_changed_received != 0) continue;
      all = false;
      RoomState s = RoomOf(survivor, w.room);
      w.last = s.body;
      if (s.ok && w.changed(s)) w.first_changed_received = WallMs();
    }
    if (all) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  for (auto& t : pollers) t.join();

  for (const Watch& w : watches) {
    ASSERT_NE(w.first_changed_received, 0)
        << w.room << " (" << w.due.what << ") never happened; last " << w.last << Logs(servers);
    EXPECT_LE(w.first_changed_received, w.due.latest + kLateMs)
        << w.room << " (" << w.due.what << ") seen " << (w.first_changed_received - w.due.latest)
        << " ms after its deadline";
    // Not early: the first GET that saw it was answered after the earliest deadline.
    EXPECT_GE(w.first_changed_received + kEarlyMs, w.due.earliest)
        << w.room << " (" << w.due.what << ") seen " << (w.due.earliest - w.first_changed_received)
        << " ms before its deadline";
  }
  for (const Poll& p : polls) {
    ASSERT_EQ(p.answer.status, 200) << p.queue << ": " << p.answer.Describe() << Logs(servers);
    std::vector<Delivery> got = ReadJobs(p.answer, 9);
    ASSERT_EQ(got.size(), 1u) << p.queue << " (" << p.due.what
                              << "): the survivor's long poll got nothing within 8 s: "
                              << p.answer.body << Logs(servers);
    EXPECT_GE(p.answer.received_wall + kEarlyMs, p.due.earliest)
        << p.queue << " (" << p.due.what << ") delivered "
        << (p.due.earliest - p.answer.received_wall) << " ms early";
    EXPECT_LE(p.answer.received_wall, p.due.latest + kLateMs)
        << p.queue << " (" << p.due.what << ") delivered "
        << (p.answer.received_wall - p.due.latest) << " ms after its deadline";
    if (p.queue != "exp-delay") {
      EXPECT_EQ(got[0].attempt, 2) << p.answer.body;
    }
    Answer acked = survivor.Post(QueuePath(p.queue, "/ack"),
                                 {{"leases", json::array{json::value(got[0].lease)}}});
    EXPECT_EQ(acked.status, 200) << acked.Describe();
    QueueStats s = StatsOf(survivor, p.queue);
    EXPECT_TRUE(s.AddsUp() && s.Idle() && s.acked == 1 && s.pushed == 1)
        << p.queue << ": " << s.body;
    std::printf("%s (%s): delivered %lld ms after the earliest deadline\n", p.queue.c_str(),
                p.due.what.c_str(),
                static_cast<long long>(p.answer.received_wall - p.due.earliest));
  }
  for (const Watch& w : watches) {
    std::printf("%s (%s): seen %lld ms after the earliest deadline\n", w.room.c_str(),
                w.due.what.c_str(),
                static_cast<long long>(w.first_changed_received - w.due.earliest));
  }
  // The rooms go on working through the survivor: y claims its slot.
  Answer y = survivor.Post(RoomPath("exp-grace", "/check"), {{"session", "y"}});
  EXPECT_EQ(Str(y.json, "status"), "active") << y.Describe();
  EXPECT_TRUE(servers[0]->Alive()) << Logs(servers);
}

// ==== d. Redis restarted and killed under load ==================================================

TEST(RedisBackendTest, RedisRestartUnderLoad) {
  SKIP_WITHOUT_REDIS();
  uint64_t seed = TestSeed();
  std::printf("seed %llu (ANTEROOM_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  RedisProcess redis;
  ASSERT_TRUE(redis.Start({"--appendonly", "yes", "--appendfsync", "always"})) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(2, redis.url(), &error);
  ASSERT_EQ(servers.size(), 2u) << error;
  std::vector<uint16_t> ports = Ports(servers);
  constexpr char kQueue[] = "loss-q";
  constexpr char kLossRoom[] = "loss-room";
  constexpr int kRoomSessions = 10;
  // An answer (503 or other) must come within this; a long poll may wait wait_ms more.
  constexpr int64_t kAnswerWithinMs = 5000;
  constexpr int64_t kWaitMs = 300;
  {
    HttpConn admin(ports[0]);
    Answer put = admin.Put(RoomPath(kLossRoom), {{"capacity", 3},
                                                 {"checkin_timeout_ms", 120000},
                                                 {"idle_timeout_ms", nullptr},
                                                 {"grace_ms", 1000}});
    ASSERT_EQ(put.status, 200) << put.Describe() << Logs(servers);
  }

  struct Outage {
    TimePoint down, up;
  };
  std::mutex outage_mu;
  std::vector<Outage> outages;  // guarded by outage_mu
  auto during_outage = [&](const Answer& a) {
    std::lock_guard lock(outage_mu);
    for (const Outage& o : outages) {
      if (a.received >= o.down && a.sent <= o.up + seconds(1)) return true;
    }
    return false;
  };

  QueueLog log;
  std::atomic<int64_t> push_503{0}, push_no_answer{0}, other_503{0}, answered_503_in_outage{0};
  std::atomic<int64_t> slow{0};
  std::atomic<int64_t> max_ms{0};  // the slowest answer (minus a long poll's wait)
  Problems bad_503;
  std::atomic<bool> producing{true};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{stop, threads};

  // Judges one answer: 2xx, or 503 {"error": {"code": "unavailable"}}, within the bound.
  auto judge = [&](const Answer& a, const std::string& what, int64_t waited_ms) -> bool {
    int64_t took = a.ms() - waited_ms;
    int64_t seen = max_ms.load();
    while (took > seen && !max_ms.compare_exchange_weak(seen, took)) {
    }
    if (a.ms() > kAnswerWithinMs + waited_ms) {
      slow.fetch_add(1);
      log.failures.Add(what + " took " + std::to_string(a.ms()) + " ms: " + a.Describe());
    }
    if (!a.error.empty()) {
      log.failures.Add(what + ": " + a.Describe());
      return false;
    }
    if (a.status == 503) {
      if (!IsJsonError(a, "unavailable")) bad_503.Add(what + ": " + a.body);
      if (during_outage(a)) answered_503_in_outage.fetch_add(1);
      return false;
    }
    if (a.status < 200 || a.status >= 300) {
      log.failures.Add(what + ": " + a.Describe());
      return false;
    }
    return true;
  };

  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937_64 rng(seed + static_cast<uint64_t>(p));
      std::vector<std::unique_ptr<HttpConn>> conns;
      for (uint16_t port : ports) conns.push_back(std::make_unique<HttpConn>(port));
      for (int n = p; producing.load() && !stop.load(); n += 2) {
        size_t via = rng() % conns.size();
        Answer a = conns[via]->Post(QueuePath(kQueue, "/jobs"),
                                    {{"payload", {{"n", n}}}, {"max_attempts", 1000}},
                                    seconds(kAnswerWithinMs / 1000 + 3));
        if (!judge(a, "push " + std::to_string(n) + " via process " + std::to_string(via), 0)) {
          if (a.status == 503) push_503.fetch_add(1);
          if (!a.error.empty()) push_no_answer.fetch_add(1);
          std::this_thread::sleep_for(milliseconds(20));
          continue;
        }
        std::lock_guard lock(log.mu);
        log.answered[Str(a.json, "id").value_or("?")] = n;
        if (rng() % 3 == 0) std::this_thread::sleep_for(milliseconds(2));
      }
    });
  }
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      HttpConn conn(ports[static_cast<size_t>(w)]);
      std::string worker = "w" + std::to_string(w);
      std::map<std::string, Delivery> by_lease;
      while (!stop.load()) {
        Answer a =
            conn.Post(QueuePath(kQueue, "/fetch"),
                      {{"worker", worker}, {"max", 8}, {"lease_ms", 4000}, {"wait_ms", kWaitMs}},
                      seconds(kAnswerWithinMs / 1000 + 3));
        if (!judge(a, worker + " fetch", kWaitMs)) {
          if (a.status == 503) other_503.fetch_add(1);
          std::this_thread::sleep_for(milliseconds(50));
          continue;
        }
        std::vector<Delivery> got = ReadJobs(a, w);
        if (got.empty()) continue;
        json::array leases;
        {
          std::lock_guard lock(log.mu);
          for (Delivery& d : got) {
            log.deliveries.push_back(d);
            by_lease[d.lease] = d;
            leases.emplace_back(d.lease);
          }
        }
        // Acks are retried until answered (they are idempotent); a lease lost meanwhile means
        // the job comes back.
        TimePoint give_up = SteadyClock::now() + seconds(30);
        while (!stop.load() && SteadyClock::now() < give_up) {
          Answer acked = conn.Post(QueuePath(kQueue, "/ack"), {{"leases", leases}},
                                   seconds(kAnswerWithinMs / 1000 + 3));
          if (judge(acked, worker + " ack", 0)) {
            // Acks sent during an outage may be answered lease_lost later: not a violation
            // here, the job comes back (ReadAcks counts it as late when past the lease).
            const json::array* results = Arr(acked.json, "results");
            std::lock_guard lock(log.mu);
            if (results != nullptr) {
              for (const json::value& r : *results) {
                auto lease = Str(r, "lease").value_or("");
                if (Bool(r, "ok") == true && by_lease.count(lease) != 0) {
                  log.acks.push_back({by_lease[lease].id, acked.received_wall});
                }
              }
            }
            break;
          }
          if (acked.status == 503) other_503.fetch_add(1);
          std::this_thread::sleep_for(milliseconds(100));
        }
      }
    });
  }
  // A room client: 10 sessions check in over and over.
  threads.emplace_back([&] {
    std::vector<std::unique_ptr<HttpConn>> conns;
    for (uint16_t port : ports) conns.push_back(std::make_unique<HttpConn>(port));
    for (int i = 0; !stop.load(); ++i) {
      Answer a = conns[static_cast<size_t>(i) % conns.size()]->Post(
          RoomPath(kLossRoom, "/check"), {{"session", "s" + std::to_string(i % kRoomSessions)}},
          seconds(kAnswerWithinMs / 1000 + 3));
      if (!judge(a, "room check", 0)) {
        if (a.status == 503) other_503.fetch_add(1);
      } else if (Int(a.json, "active").value_or(99) > 3) {
        log.violations.Add("room over capacity: " + a.body);
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  });

  // Every process answers a read of the queue again (it reconnected by itself).
  auto all_back = [&](milliseconds within) -> int64_t {
    TimePoint from = SteadyClock::now();
    std::vector<std::unique_ptr<HttpConn>> conns;
    for (uint16_t port : ports) conns.push_back(std::make_unique<HttpConn>(port));
    bool ok = WaitUntil(
        [&] {
          for (auto& c : conns) {
            if (c->Get(QueuePath(kQueue), seconds(kAnswerWithinMs / 1000 + 3)).status != 200) {
              return false;
            }
          }
          return true;
        },
        within, milliseconds(50));
    return ok ? MsBetween(from, SteadyClock::now()) : -1;
  };

  std::this_thread::sleep_for(seconds(3));
  // Runs one outage: `cause()` takes Redis down and brings it back (false: it could not); the
  // window is recorded for the 503 accounting; answers how long the processes took to be back.
  auto outage = [&](const char* what, const std::function<bool()>& cause) -> int64_t {
    TimePoint down = SteadyClock::now();
    {
      std::lock_guard lock(outage_mu);
      outages.push_back({down, down + seconds(60)});
    }
    bool ok = cause();
    {
      std::lock_guard lock(outage_mu);
      outages.back().up = SteadyClock::now();
    }
    EXPECT_TRUE(ok) << what << ": " << redis.error();
    int64_t back = all_back(seconds(15));
    EXPECT_GE(back, 0) << "the processes were not back within 15 s after " << what << Logs(servers);
    std::this_thread::sleep_for(seconds(3));
    return back;
  };
  // Outage 1: SIGTERM (AOF flushed), 2 s down, started again on the same port.
  int64_t back1 = outage("a restart", [&] { return redis.Restart(milliseconds(2000)); });
  // Outage 2: SIGKILL (appendfsync always: whatever Redis answered is on disk), 1.5 s down.
  int64_t back2 = outage("a kill", [&] {
    redis.Kill();
    std::this_thread::sleep_for(milliseconds(1500));
    return redis.StartAgain();
  });
  // Outage 3: Redis hangs (SIGSTOP) for 4 s, longer than the store's timeout: connections stay
  // open and nothing is answered. Requests must still be answered (503) within the bound, and
  // the commands Redis runs late, once thawed, must not be taken for answers to later ones.
  int64_t back3 = outage("a hang", [&] {
    redis.Freeze();
    std::this_thread::sleep_for(milliseconds(4000));
    redis.Thaw();
    return true;
  });
  producing = false;

  // Drain: everything answered 201 is delivered and acked.
  HttpConn observer(ports[0]);
  bool drained = WaitUntil(
      [&] {
        QueueStats s = StatsOf(observer, kQueue);
        if (!s.Idle()) return false;
        std::lock_guard lock(log.mu);
        std::set<std::string> acked;
        for (const AckOk& a : log.acks) acked.insert(a.id);
        for (const auto& [id, n] : log.answered) {
          if (acked.count(id) == 0) return false;
        }
        return true;
      },
      seconds(30), milliseconds(200));
  stop = true;
  for (auto& t : threads) t.join();
  threads.clear();

  std::set<std::string> acked;
  for (const AckOk& a : log.acks) acked.insert(a.id);
  std::vector<std::string> lost;
  for (const auto& [id, n] : log.answered) {
    if (acked.count(id) == 0) lost.push_back(id + " (n=" + std::to_string(n) + ")");
  }
  QueueStats s = StatsOf(observer, kQueue);
  RoomState room = RoomOf(observer, kLossRoom);
  std::printf(
      "redis loss: %zu pushes answered 201, %lld answered 503, %lld unanswered; %lld other 503s; "
      "%lld 503s during outages; slowest answer %lld ms; back after %lld / %lld / %lld ms; %zu "
      "deliveries, %zu acks ok; stats %s; room %s\n",
      log.answered.size(), static_cast<long long>(push_503.load()),
      static_cast<long long>(push_no_answer.load()), static_cast<long long>(other_503.load()),
      static_cast<long long>(answered_503_in_outage.load()), static_cast<long long>(max_ms.load()),
      static_cast<long long>(back1), static_cast<long long>(back2), static_cast<long long>(back3),
      log.deliveries.size(), log.acks.size(), s.body.c_str(), room.body.c_str());

  EXPECT_EQ(log.failures.count(), 0)
      << "no hangs, no answers but 2xx and 503:" << log.failures.Text() << Logs(servers);
  EXPECT_EQ(slow.load(), 0);
  EXPECT_EQ(bad_503.count(), 0) << "503s without {\"error\": {\"code\": \"unavailable\"}}:"
                                << bad_503.Text();
  EXPECT_GT(answered_503_in_outage.load(), 0) << "no request was answered 503 during outages";
  EXPECT_EQ(log.violations.count(), 0) << log.violations.Text();
  EXPECT_TRUE(drained) << "not drained; stats " << s.body << Logs(servers);
  EXPECT_TRUE(lost.empty()) << lost.size() << " jobs answered 201 never acked, e.g. "
                            << (lost.empty() ? "" : lost.front());
  ASSERT_TRUE(s.ok) << s.body;
  EXPECT_TRUE(s.AddsUp()) << s.body;
  EXPECT_TRUE(s.Idle()) << s.body;
  // A push answered 503 (or not at all) may have happened or not; one answered 201 did.
  EXPECT_GE(s.pushed, static_cast<int64_t>(log.answered.size())) << s.body;
  EXPECT_LE(s.pushed,
            static_cast<int64_t>(log.answered.size()) + push_503.load() + push_no_answer.load())
      << s.body;
  EXPECT_EQ(s.acked, s.pushed) << s.body;
  EXPECT_GT(log.answered.size(), 100u);
  // The room kept its sessions (check-in timeout 2 minutes): 3 in, 7 waiting.
  EXPECT_EQ(room.active, 3) << room.body;
  EXPECT_EQ(room.waiting, kRoomSessions - 3) << room.body;
  for (size_t i = 0; i < servers.size(); ++i) {
    EXPECT_TRUE(servers[i]->Alive()) << "process " << i << " died" << Logs(servers);
  }
}

// ==== e. Redis Cluster: slots migrated under load ================================================

TEST(RedisBackendTest, ClusterSlotMigration) {
  SKIP_WITHOUT_REDIS();
  uint64_t seed = TestSeed();
  std::printf("seed %llu (ANTEROOM_TEST_SEED)\n", static_cast<unsigned long long>(seed));
  RedisCluster cluster;
  ASSERT_TRUE(cluster.Start()) << cluster.error();
  std::string error;
  Servers servers = StartAnterooms(1, cluster.url(), &error);
  ASSERT_EQ(servers.size(), 1u) << error;
  const uint16_t port = servers[0]->port();
  constexpr char kQueue[] = "mig-q";
  constexpr char kMigRoom[] = "mig-room";
  constexpr int64_t kRoomCapacity = 5;
  constexpr int kRoomSessions = 20;
  const int queue_slot = cluster.SlotOf("{q:" + std::string(kQueue) + "}");
  const int room_slot = cluster.SlotOf("{r:" + std::string(kMigRoom) + "}");
  ASSERT_GE(queue_slot, 0);
  ASSERT_GE(room_slot, 0);
  const int queue_home = cluster.NodeOfSlot(queue_slot);
  const int room_home = cluster.NodeOfSlot(room_slot);
  ASSERT_GE(queue_home, 0);
  ASSERT_GE(room_home, 0);
  {
    HttpConn admin(port);
    Answer put = admin.Put(RoomPath(kMigRoom), {{"capacity", kRoomCapacity},
                                                {"checkin_timeout_ms", 60000},
                                                {"idle_timeout_ms", nullptr},
                                                {"grace_ms", 500}});
    ASSERT_EQ(put.status, 200) << put.Describe() << Logs(servers);
  }

  QueueLog log;
  std::atomic<bool> producing{true};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> requests{0};
  // Failures and migration steps carry the time since t0, so they can be lined up.
  const TimePoint t0 = SteadyClock::now();
  auto at = [t0](const Answer& a) {
    return "[" + std::to_string(MsBetween(t0, a.sent)) + ".." +
           std::to_string(MsBetween(t0, a.received)) + " ms] ";
  };
  std::vector<std::thread> threads;
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } joiner{stop, threads};

  threads.emplace_back([&] {  // producer
    HttpConn conn(port);
    for (int n = 0; producing.load() && !stop.load(); ++n) {
      Answer a = conn.Post(QueuePath(kQueue, "/jobs"), {{"payload", {{"n", n}}}});
      requests.fetch_add(1);
      if (a.status != 201) {
        log.failures.Add(at(a) + "push " + std::to_string(n) + ": " + a.Describe());
        continue;
      }
      std::lock_guard lock(log.mu);
      log.answered[Str(a.json, "id").value_or("?")] = n;
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      HttpConn conn(port);
      std::string worker = "w" + std::to_string(w);
      std::map<std::string, Delivery> by_lease;
      while (!stop.load()) {
        Answer a =
            conn.Post(QueuePath(kQueue, "/fetch"),
                      {{"worker", worker}, {"max", 4}, {"lease_ms", 10000}, {"wait_ms", 300}});
        requests.fetch_add(1);
        if (a.status != 200) {
          log.failures.Add(at(a) + worker + " fetch: " + a.Describe());
          std::this_thread::sleep_for(milliseconds(50));
          continue;
        }
        std::vector<Delivery> got = ReadJobs(a, w);
        if (got.empty()) continue;
        json::array leases;
        {
          std::lock_guard lock(log.mu);
          for (Delivery& d : got) {
            log.deliveries.push_back(d);
            by_lease[d.lease] = d;
            leases.emplace_back(d.lease);
          }
        }
        Answer acked = conn.Post(QueuePath(kQueue, "/ack"), {{"leases", leases}});
        requests.fetch_add(1);
        if (acked.status != 200) {
          log.failures.Add(at(acked) + worker + " ack: " + acked.Describe());
          continue;
        }
        ReadAcks(log, acked, "results", by_lease);
      }
    });
  }
  // Room client: 20 sessions; an active one leaves (final) now and then and joins again.
  Problems room_problems;
  threads.emplace_back([&] {
    HttpConn conn(port);
    std::mt19937_64 rng(seed);
    std::map<std::string, std::string> status;
    for (int i = 0; !stop.load(); ++i) {
      std::string s = "s" + std::to_string(i % kRoomSessions);
      Answer a;
      bool leave = status[s] == "active" && rng() % 4 == 0;
      if (leave) {
        a = conn.Post(RoomPath(kMigRoom, "/leave"), {{"session", s}, {"final", true}});
      } else {
        a = conn.Post(RoomPath(kMigRoom, "/check"), {{"session", s}});
      }
      requests.fetch_add(1);
      if (a.status != 200) {
        room_problems.Add((leave ? "leave " : "check ") + s + ": " + a.Describe());
        continue;
      }
      status[s] = Str(a.json, "status").value_or("");
      auto active = Int(a.json, "active");
      if (!active || *active > kRoomCapacity) room_problems.Add("over capacity: " + a.body);
      if (status[s] == "waiting") {
        auto pos = Int(a.json, "position");
        auto waiting = Int(a.json, "waiting");
        if (!pos || !waiting || *pos < 1 || *pos > *waiting) {
          room_problems.Add("position outside the line: " + a.body);
        }
      }
      std::this_thread::sleep_for(milliseconds(3));
    }
  });

  auto migrate = [&](int slot, int to, bool slow) {
    RedisCluster::MigrateOptions options;
    if (slow) {
      options.pause_after_marking = milliseconds(800);
      options.pause_between_batches = milliseconds(150);
      options.pause_before_handover = milliseconds(400);
      options.batch = 2;
    }
    options.on_step = [&](const std::string& step) {
      if (step != "batch") {
        std::printf("[%lld ms] slot %d: %s\n",
                    static_cast<long long>(MsBetween(t0, SteadyClock::now())), slot, step.c_str());
      }
    };
    int64_t before = requests.load();
    bool ok = cluster.MigrateSlot(slot, to, options);
    std::printf("slot %d -> node %d: %s, %lld keys moved, %lld requests meanwhile\n", slot, to,
                ok ? "done" : cluster.error().c_str(),
                static_cast<long long>(cluster.last_migrated_keys()),
                static_cast<long long>(requests.load() - before));
    return ok;
  };
  std::this_thread::sleep_for(milliseconds(1500));
  const int queue_target = (queue_home + 1) % RedisCluster::kMasters;
  ASSERT_TRUE(migrate(queue_slot, queue_target, /*slow=*/true)) << cluster.error();
  EXPECT_GT(cluster.last_migrated_keys(), 0) << "the queue had no keys in its slot?";
  EXPECT_EQ(cluster.NodeOfSlot(queue_slot), queue_target);
  std::this_thread::sleep_for(milliseconds(1000));
  if (room_slot != queue_slot) {
    const int room_target = (room_home + 1) % RedisCluster::kMasters;
    ASSERT_TRUE(migrate(room_slot, room_target, /*slow=*/true)) << cluster.error();
    EXPECT_GT(cluster.last_migrated_keys(), 0) << "the room had no keys in its slot?";
    std::this_thread::sleep_for(milliseconds(1000));
  }
  // And the queue's slot back home, quickly.
  ASSERT_TRUE(migrate(queue_slot, queue_home, /*slow=*/false)) << cluster.error();
  std::this_thread::sleep_for(milliseconds(1000));
  producing = false;

  HttpConn observer(port);
  bool drained = WaitUntil(
      [&] {
        QueueStats s = StatsOf(observer, kQueue);
        if (!s.Idle()) return false;
        std::lock_guard lock(log.mu);
        std::set<std::string> acked;
        for (const AckOk& a : log.acks) acked.insert(a.id);
        for (const auto& [id, n] : log.answered) {
          if (acked.count(id) == 0) return false;
        }
        return true;
      },
      seconds(30), milliseconds(200));
  stop = true;
  for (auto& t : threads) t.join();
  threads.clear();

  CheckDeliveries(log);
  std::set<std::string> acked;
  for (const AckOk& a : log.acks) acked.insert(a.id);
  std::vector<std::string> lost;
  for (const auto& [id, n] : log.answered) {
    if (acked.count(id) == 0) lost.push_back(id + " (n=" + std::to_string(n) + ")");
  }
  QueueStats s = StatsOf(observer, kQueue);
  std::printf("cluster: %zu pushes answered, %zu deliveries, %zu acks ok; stats %s\n",
              log.answered.size(), log.deliveries.size(), log.acks.size(), s.body.c_str());
  EXPECT_TRUE(drained) << "not drained; stats " << s.body << Logs(servers);
  EXPECT_EQ(log.failures.count(), 0)
      << "every request answered 2xx during migrations:" << log.failures.Text() << Logs(servers);
  EXPECT_EQ(log.violations.count(), 0) << log.violations.Text();
  EXPECT_EQ(room_problems.count(), 0) << room_problems.Text();
  EXPECT_TRUE(lost.empty()) << lost.size() << " jobs answered 201 never acked, e.g. "
                            << (lost.empty() ? "" : lost.front());
  ASSERT_TRUE(s.ok) << s.body;
  EXPECT_TRUE(s.AddsUp()) << s.body;
  EXPECT_EQ(s.pushed, static_cast<int64_t>(log.answered.size())) << s.body;
  EXPECT_EQ(s.acked, static_cast<int64_t>(acked.size())) << s.body;
  EXPECT_GT(log.answered.size(), 500u);
  EXPECT_EQ(cluster.NodeOfSlot(queue_slot), queue_home);
  EXPECT_GT(cluster.KeysInSlot(queue_home, queue_slot), 0);

  // The room after its migration: every session checks in once, nothing else happens; the
  // waiting ones hold exactly 1..waiting.
  RoomState room = RoomOf(observer, kMigRoom);
  ASSERT_TRUE(room.ok) << room.body;
  std::vector<int64_t> positions;
  int64_t active = 0;
  for (int i = 0; i < kRoomSessions; ++i) {
    Answer a = observer.Post(RoomPath(kMigRoom, "/check"), {{"session", "s" + std::to_string(i)}});
    ASSERT_EQ(a.status, 200) << a.Describe();
    if (Str(a.json, "status") == "waiting")
      positions.push_back(Int(a.json, "position").value_or(0));
    if (Str(a.json, "status") == "active") ++active;
  }
  RoomState after = RoomOf(observer, kMigRoom);
  EXPECT_EQ(after.active, kRoomCapacity) << after.body;
  EXPECT_EQ(active, after.active) << after.body;
  std::sort(positions.begin(), positions.end());
  std::vector<int64_t> want;
  for (int64_t i = 1; i <= after.waiting; ++i) want.push_back(i);
  EXPECT_EQ(positions, want) << after.body;
  EXPECT_EQ(after.waiting + after.active, kRoomSessions) << after.body;
  EXPECT_TRUE(servers[0]->Alive()) << Logs(servers);
}

// On the Redis backend, payloads are stored and come back as sent, numbers byte for byte, from
// fetches and the dead-letter list; a number beyond every double is refused and nothing of its
// batch is stored. The payloads are read from the answers as text.
TEST(RedisBackendTest, PayloadsComeBackWithEveryNumberAsSent) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(1, redis.url(), &error);
  ASSERT_EQ(servers.size(), 1u) << error;
  HttpConn conn(servers[0]->port());
  const std::vector<std::pair<std::string, std::string>>& payloads = ExactPayloads();
  std::string batch = R"({"jobs": [)";
  for (size_t i = 0; i < payloads.size(); ++i) {
    batch += std::string(i ? "," : "") + R"({"payload": )" + payloads[i].first +
             R"(, "max_attempts": 1})";
  }
  batch += "]}";
  Answer pushed = conn.Call("POST", QueuePath("exact", "/jobs"), batch);
  ASSERT_EQ(pushed.status, 201) << pushed.Describe() << Logs(servers);
  Answer fetched =
      conn.Call("POST", QueuePath("exact", "/fetch"), R"({"worker": "w", "max": 100})");
  ASSERT_EQ(fetched.status, 200) << fetched.Describe();
  ASSERT_TRUE(fetched.json.is_object()) << "not JSON: " << fetched.body;
  const json::array* jobs = Arr(fetched.json, "jobs");
  ASSERT_TRUE(jobs != nullptr && jobs->size() == payloads.size()) << fetched.body;
  std::string leases;
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(PayloadText(fetched.body, i), payloads[i].second) << "job " << i;
    leases += std::string(i ? "," : "") + '"' + Str((*jobs)[i], "lease").value_or("") + '"';
  }
  // Dead letters (max_attempts 1): the same texts.
  Answer nacked = conn.Call("POST", QueuePath("exact", "/nack"), R"({"leases": [)" + leases + "]}");
  ASSERT_EQ(nacked.status, 200) << nacked.Describe();
  Answer dead = conn.Get(QueuePath("exact", "/dead"));
  ASSERT_EQ(dead.status, 200) << dead.Describe();
  ASSERT_TRUE(dead.json.is_object()) << "not JSON: " << dead.body;
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(PayloadText(dead.body, i), payloads[i].second) << "dead job " << i;
  }

  Answer refused = conn.Call("POST", QueuePath("finite", "/jobs"),
                             R"({"jobs": [{"payload": 1.5}, {"payload": -1e400}]})");
  EXPECT_EQ(refused.status, 400) << refused.Describe();
  Answer stats = conn.Get(QueuePath("finite"));
  EXPECT_EQ(Int(stats.json, "pushed"), 0) << stats.Describe();
  EXPECT_EQ(Int(stats.json, "ready"), 0) << stats.Describe();
}

// Scripts are a function library on Redis 7 (FUNCTION LOAD once, FCALL per call), loaded again
// when the server lost it; a server without FCALL (Redis 6, here FCALL renamed away) gets
// EVALSHA of the same code.
void RoomAndQueueWork(HttpConn& conn, const std::string& tag) {
  Answer put = conn.Put(RoomPath("fn" + tag), {{"capacity", 1}});
  ASSERT_EQ(put.status / 100, 2) << put.Describe();
  Answer a = conn.Post(RoomPath("fn" + tag, "/check"), {{"session", "first-session-" + tag}});
  ASSERT_EQ(a.status, 200) << a.Describe();
  EXPECT_EQ(Str(a.json, "status"), "active") << a.Describe();
  Answer b = conn.Post(RoomPath("fn" + tag, "/check"), {{"session", "second-session-" + tag}});
  EXPECT_EQ(Int(b.json, "position"), 1) << b.Describe();
  Answer pushed =
      conn.Call("POST", QueuePath("fn" + tag, "/jobs"), R"({"jobs": [{"payload": 7}]})");
  ASSERT_EQ(pushed.status, 201) << pushed.Describe();
  Answer fetched = conn.Call("POST", QueuePath("fn" + tag, "/fetch"), R"({"worker": "w"})");
  ASSERT_EQ(fetched.status, 200) << fetched.Describe();
  const json::array* jobs = Arr(fetched.json, "jobs");
  ASSERT_TRUE(jobs != nullptr && jobs->size() == 1u) << fetched.body;
  std::string lease = Str((*jobs)[0], "lease").value_or("");
  Answer acked =
      conn.Call("POST", QueuePath("fn" + tag, "/ack"), R"({"leases": [")" + lease + R"("]})");
  EXPECT_EQ(acked.status, 200) << acked.Describe();
}

int64_t CommandCalls(RedisProcess& redis, std::string_view command) {
  std::string stats = redis.Command({"INFO", "commandstats"});
  std::string marker = "cmdstat_" + std::string(command) + ":calls=";
  size_t at = stats.find(marker);
  return at == std::string::npos ? 0 : std::stoll(stats.substr(at + marker.size()));
}

TEST(RedisBackendTest, ScriptsAreAFunctionLibraryWhereRedisHasThem) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(1, redis.url(), &error);
  ASSERT_EQ(servers.size(), 1u) << error;
  HttpConn conn(servers[0]->port());
  RoomAndQueueWork(conn, "a");
  std::string libraries = redis.Command({"FUNCTION", "LIST"});
  EXPECT_NE(libraries.find("anteroom_room_"), std::string::npos) << libraries;
  EXPECT_NE(libraries.find("anteroom_queue_"), std::string::npos) << libraries;
  EXPECT_GT(CommandCalls(redis, "fcall"), 5);
  EXPECT_EQ(CommandCalls(redis, "evalsha"), 0);
  EXPECT_EQ(CommandCalls(redis, "eval"), 0);

  // The server loses its functions (a restart without persistence, FUNCTION FLUSH): loaded again.
  EXPECT_EQ(redis.Command({"FUNCTION", "FLUSH"}), "OK\n");
  RoomAndQueueWork(conn, "b");
  EXPECT_NE(redis.Command({"FUNCTION", "LIST"}).find("anteroom_room_"), std::string::npos);
}

TEST(RedisBackendTest, ScriptsGoByEvalshaWhereRedisHasNoFunctions) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start({"--rename-command", "FCALL", ""})) << redis.error();
  std::string error;
  Servers servers = StartAnterooms(1, redis.url(), &error);
  ASSERT_EQ(servers.size(), 1u) << error;
  HttpConn conn(servers[0]->port());
  RoomAndQueueWork(conn, "a");
  EXPECT_GT(CommandCalls(redis, "evalsha"), 5);
  EXPECT_EQ(CommandCalls(redis, "fcall"), 0);
}

}  // namespace
}  // namespace anteroom::testing
