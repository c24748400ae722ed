// The durable backend's crash test: the real server, with `--fsync always`, is killed with
// SIGKILL at random moments (seeded; at least 5 kills, 200-1500 ms apart) and restarted on the
// same data directory, while client threads keep using it:
//  - producers push jobs {"n": k, "pad": ...} (each k once) and note the k whose push answered
//    201;
//  - workers fetch (lease 1.5 s, so the leases held at a kill run out after the restart and the
//    jobs come back) and ack, noting every delivery and every ack answered ok; an ack without an
//    answer is retried until it gets one (acks are idempotent);
//  - room clients check 20 sessions into a room of capacity 5; an active session leaves (final)
//    after 0.8-2.5 s and joins again at the back.
// `--compact-min-mb 1` and the padding make the server snapshot (fork) about once a second, and
// some kills wait for a snapshot being written, so kills also land during compactions. Every
// restart must succeed, and right after it the queue's counters add up and count every push
// answered 201 so far.
//
// At the end the workers drain the queue, then:
//  - every push answered 201 was delivered and acked ok (at-least-once: a push whose answer was
//    lost may or may not exist);
//  - no answered ack is undone: no job acked ok is delivered by a fetch sent after the ack's
//    answer arrived;
//  - no check answer ever shows more active sessions than the capacity, and an active session
//    that kept checking in is still active, also across a restart when its last active answer
//    came shortly before the kill (the downtime counts against its idle timeout, hence the
//    margins);
//  - the counters add up (pushed = acked + ready + delayed + inflight + dead + cancelled) and
//    cover what the clients saw, no incarnation logged an error, and a clean restart at the end
//    changes no counter.
// A second, shorter run does the same (without the room) with `--fsync everysec`: an answer
// comes once the change is written to the kernel, so a process crash (SIGKILL, not a machine
// crash) loses nothing either.
//
// The seed (printed) fixes the kill times and the clients' choices; thread scheduling is not
// reproducible. Rerun with a seed: ANTEROOM_TEST_SEED=N.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

constexpr char kQueue[] = "crash-q";
constexpr char kRoom[] = "crash-room";
constexpr int64_t kCapacity = 5;
constexpr int kSessions = 20;
constexpr int kRoomThreads = 2;  // each checks kSessions / kRoomThreads sessions in turn
constexpr int64_t kCheckinTimeoutMs = 3'000;
constexpr int64_t kGraceMs = 1'000;
constexpr int64_t kIdleTimeoutMs = 4'000;  // an active session silent this long leaves
// A session answered active by a check sent at A must still be active when checked again with
// the answer at S if S - A < kIdleTimeoutMs - kIdleMarginMs; across a restart, only when the
// active answer came less than kBeforeKillMs before the kill.
constexpr int64_t kIdleMarginMs = 1'500;
constexpr int64_t kBeforeKillMs = 1'000;
constexpr int64_t kLeaseMs = 1'500;
constexpr int kFetchMax = 32;
constexpr double kSlowWorkShare = 0.03;  // batches acked after 0-2 leases
constexpr int64_t kWaitMs = 100;
// Padding in each payload, so that an incarnation writes more than --compact-min-mb (1 MiB) to
// its log between kills and compacts (the threshold counts the bytes it appended itself).
constexpr size_t kPadBytes = 700;
constexpr int kMaxAttempts = 1'000;  // kills expire leases: a job must never go dead here
constexpr milliseconds kDrainWithin = seconds(30);
constexpr milliseconds kAckRetryFor = seconds(30);  // an ack is retried until answered
constexpr int64_t kKillGapMinMs = 200;
constexpr int64_t kKillGapMaxMs = 1'500;
constexpr double kHuntShare = 0.4;  // kills that strike while a snapshot is being written

int64_t MsBetween(TimePoint a, TimePoint b) {
  return std::chrono::duration_cast<milliseconds>(b - a).count();
}

uint64_t TestSeed() {
  if (const char* s = std::getenv("ANTEROOM_TEST_SEED"); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 10);
  }
  return std::random_device{}();
}

// Where the server is now, and when each restart happened. The URL changes at each restart
// (port 0); incarnation e (0 = the first start) was started after restarts_[e - 1].
class Endpoint {
 public:
  struct Restart {
    TimePoint killed_at;
    TimePoint up_at;
  };

  explicit Endpoint(std::string url) : url_(std::move(url)) {}

  std::pair<std::string, uint64_t> Current() const {
    std::lock_guard lock(mu_);
    return {url_, restarts_.size()};
  }

  void Restarted(std::string url, TimePoint killed_at, TimePoint up_at) {
    std::lock_guard lock(mu_);
    url_ = std::move(url);
    restarts_.push_back({killed_at, up_at});
  }

  // The restart that started incarnation e (e >= 1).
  Restart RestartBefore(uint64_t e) const {
    std::lock_guard lock(mu_);
    return restarts_.at(e - 1);
  }

 private:
  mutable std::mutex mu_;
  std::string url_;
  std::vector<Restart> restarts_;
};

// A Client (one per thread) that follows the server to its new port after a restart.
class FollowingClient {
 public:
  explicit FollowingClient(const Endpoint& endpoint) : endpoint_(endpoint) {}

  // The client for the server as it is now; `incarnation` is set to the one it talks to.
  Client& Get(uint64_t* incarnation = nullptr) {
    auto [url, e] = endpoint_.Current();
    if (!client_ || url != url_) {
      client_ = std::make_unique<Client>(url);
      url_ = url;
    }
    if (incarnation != nullptr) *incarnation = e;
    return *client_;
  }

 private:
  const Endpoint& endpoint_;
  std::string url_;
  std::unique_ptr<Client> client_;
};

struct Delivery {
  int64_t n;
  std::string id;
  TimePoint fetch_sent;
};

// What one client thread saw; written by that thread only, read after it is joined.
struct ThreadLog {
  std::vector<int64_t> answered;  // producers: pushes answered 201
  std::vector<Delivery> deliveries;
  std::vector<std::pair<std::string, TimePoint>> acked_ok;  // key (id/n), ack answer time
  std::vector<int64_t> acked_n;
  int64_t transport_errors = 0;
  int64_t lease_lost = 0;
  int64_t checks = 0;
  int64_t admissions = 0;      // checks answered active for a session that was not active
  int64_t leaves = 0;          // final leaves answered 200
  int64_t restart_checks = 0;  // sessions checked for survival across a restart
  std::vector<std::string> violations;
  std::vector<std::string> unexpected;  // answers no client should get

  void Unexpected(std::string what) {
    if (unexpected.size() < 10) unexpected.push_back(std::move(what));
  }
  void Violation(std::string what) {
    if (violations.size() < 20) violations.push_back(std::move(what));
  }
};

std::string JobKey(const std::string& id, int64_t n) { return id + "/" + std::to_string(n); }

std::string Describe(const HttpResult& r) {
  return r.error.empty() ? std::to_string(r.status) + " " + r.body : "transport: " + r.error;
}

struct Scenario {
  const char* fsync;
  milliseconds kill_phase;  // kills go on until this has passed and min_kills were done
  int min_kills;
  int producers;
  int workers;
  bool rooms;
};

struct Flags {
  std::atomic<bool> stop_producers{false};
  std::atomic<bool> stop_rooms{false};
  std::atomic<bool> stop_workers{false};
  std::atomic<bool> abort{false};  // the test failed: everything stops, nothing is retried
  std::atomic<int64_t> answered_pushes{0};
};

void Backoff(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> ms(10, 40);
  std::this_thread::sleep_for(milliseconds(ms(rng)));
}

void Producer(const Endpoint& endpoint, Flags& flags, int index, int count, uint64_t seed,
              ThreadLog& log) {
  std::mt19937_64 rng(seed);
  FollowingClient fc(endpoint);
  const json::object options{{"max_attempts", kMaxAttempts}};
  const std::string pad(kPadBytes, 'x');
  // Each n is pushed once: after a lost answer the next push uses the next n (a lost push may
  // or may not exist; the checks tell jobs apart by id and n).
  for (int64_t n = index; !flags.stop_producers && !flags.abort; n += count) {
    HttpResult r = fc.Get().Push(kQueue, json::object{{"n", n}, {"pad", pad}}, options);
    if (!r.error.empty()) {
      ++log.transport_errors;
      Backoff(rng);
      continue;
    }
    if (r.status != 201 || !StrField(r.json, "id")) {
      log.Unexpected("push n " + std::to_string(n) + ": " + Describe(r));
      Backoff(rng);
      continue;
    }
    log.answered.push_back(n);
    ++flags.answered_pushes;
  }
}

// Leases of one fetch: lease -> (job id, n).
struct Batch {
  std::vector<std::string> leases;
  std::map<std::string, std::pair<std::string, int64_t>> job_of_lease;
  TimePoint ack_at;  // when the worker acks them
};

// Acks a batch, retrying until an answer comes: acks are idempotent, so a retry of an ack that
// took effect before a kill answers ok (and one that did not either takes effect now or answers
// lease_lost, and the job comes back).
void AckBatch(FollowingClient& fc, const Flags& flags, const Batch& batch, std::mt19937_64& rng,
              ThreadLog& log) {
  TimePoint give_up = SteadyClock::now() + kAckRetryFor;
  while (!flags.abort) {
    HttpResult a = fc.Get().Ack(kQueue, batch.leases);
    TimePoint answered = SteadyClock::now();
    if (!a.error.empty()) {
      ++log.transport_errors;
      if (answered > give_up) {
        log.Unexpected("ack: no answer for " + std::to_string(kAckRetryFor.count()) + " ms");
        return;
      }
      Backoff(rng);
      continue;
    }
    const json::value* results =
        a.json.is_object() ? a.json.as_object().if_contains("results") : nullptr;
    if (a.status != 200 || results == nullptr || !results->is_array() ||
        results->as_array().size() != batch.leases.size()) {
      log.Unexpected("ack: " + Describe(a));
      return;
    }
    for (const json::value& item : results->as_array()) {
      auto lease = StrField(item, "lease");
      auto ok = BoolField(item, "ok");
      auto it = lease ? batch.job_of_lease.find(*lease) : batch.job_of_lease.end();
      if (it == batch.job_of_lease.end() || !ok) {
        log.Unexpected("ack: bad result " + json::serialize(item));
        continue;
      }
      if (*ok) {
        log.acked_ok.emplace_back(JobKey(it->second.first, it->second.second), answered);
        log.acked_n.push_back(it->second.second);
      } else if (StrField(item, "code") == "lease_lost") {
        ++log.lease_lost;
      } else {
        log.Unexpected("ack: " + json::serialize(item));
      }
    }
    return;
  }
}

void Worker(const Endpoint& endpoint, Flags& flags, const std::string& name, uint64_t seed,
            ThreadLog& log) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> work_ms(0, 10);
  std::bernoulli_distribution slow(kSlowWorkShare);
  std::uniform_int_distribution<int64_t> slow_ms(0, 2 * kLeaseMs);
  FollowingClient fc(endpoint);
  // Batches put aside: now and then a batch is worked on too long (while the worker goes on
  // with others), so its leases may run out: their acks answer lease_lost and the jobs are
  // delivered again.
  std::vector<Batch> slow_batches;
  auto ack_due = [&](bool all) {
    TimePoint now = SteadyClock::now();
    for (auto it = slow_batches.begin(); it != slow_batches.end();) {
      if (all || it->ack_at <= now) {
        AckBatch(fc, flags, *it, rng, log);
        it = slow_batches.erase(it);
      } else {
        ++it;
      }
    }
  };
  while (!flags.stop_workers && !flags.abort) {
    ack_due(false);
    TimePoint sent = SteadyClock::now();
    HttpResult r = fc.Get().Fetch(kQueue, name, kFetchMax, kLeaseMs, kWaitMs);
    if (!r.error.empty()) {
      ++log.transport_errors;
      Backoff(rng);
      continue;
    }
    const json::value* jobs = r.json.is_object() ? r.json.as_object().if_contains("jobs") : nullptr;
    if (r.status != 200 || jobs == nullptr || !jobs->is_array()) {
      log.Unexpected("fetch: " + Describe(r));
      Backoff(rng);
      continue;
    }
    Batch batch;
    for (const json::value& job : jobs->as_array()) {
      auto id = StrField(job, "id");
      auto lease = StrField(job, "lease");
      const json::value* payload =
          job.is_object() ? job.as_object().if_contains("payload") : nullptr;
      int64_t n = payload != nullptr ? IntField(*payload, "n").value_or(-1) : -1;
      if (!id || !lease || n < 0) {
        log.Unexpected("fetch: bad job " + json::serialize(job));
        continue;
      }
      log.deliveries.push_back({n, *id, sent});
      batch.leases.push_back(*lease);
      batch.job_of_lease[*lease] = {*id, n};
    }
    if (batch.leases.empty()) continue;
    if (slow(rng)) {
      batch.ack_at = SteadyClock::now() + milliseconds(slow_ms(rng));
      slow_batches.push_back(std::move(batch));
      continue;
    }
    std::this_thread::sleep_for(milliseconds(work_ms(rng)));  // "working"
    AckBatch(fc, flags, batch, rng, log);
  }
  ack_due(/*all=*/true);
}

// One session of the room, as its client sees it.
struct SessionState {
  std::string name;
  enum { kOut, kWaiting, kActive, kUnsure } state = kOut;  // kUnsure: a leave lost its answer
  // The last check answered active: when it was sent, when the answer came, and from which
  // incarnation.
  TimePoint last_active_sent;
  TimePoint last_active;
  uint64_t last_active_incarnation = 0;
  // When an active session leaves (final).
  TimePoint leave_at;
};

void RoomClient(const Endpoint& endpoint, Flags& flags, int index, uint64_t seed, ThreadLog& log) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> hold_ms(800, 2'500);
  std::uniform_int_distribution<int> pause_ms(5, 15);
  FollowingClient fc(endpoint);
  std::vector<SessionState> sessions;
  for (int s = index; s < kSessions; s += kRoomThreads) {
    sessions.emplace_back();
    sessions.back().name = "s" + std::to_string(s);
  }
  for (size_t turn = 0; !flags.stop_rooms && !flags.abort; ++turn) {
    SessionState& s = sessions[turn % sessions.size()];
    std::this_thread::sleep_for(milliseconds(pause_ms(rng)));
    uint64_t incarnation = 0;
    Client& client = fc.Get(&incarnation);
    TimePoint sent = SteadyClock::now();
    if (s.state == SessionState::kActive && sent >= s.leave_at) {
      HttpResult r = client.Leave(kRoom, s.name, /*final=*/true);
      if (!r.error.empty()) {
        ++log.transport_errors;
        s.state = SessionState::kUnsure;  // left or not: the next check tells
        Backoff(rng);
      } else if (r.status == 200) {
        ++log.leaves;
        s.state = SessionState::kOut;
      } else {
        log.Unexpected("leave " + s.name + ": " + Describe(r));
        s.state = SessionState::kUnsure;
      }
      continue;
    }
    HttpResult r = client.Check(kRoom, s.name);
    TimePoint answered = SteadyClock::now();
    if (!r.error.empty()) {
      ++log.transport_errors;
      Backoff(rng);
      continue;
    }
    auto status = StrField(r.json, "status");
    auto active = IntField(r.json, "active");
    auto capacity = IntField(r.json, "capacity");
    if (r.status != 200 || !status || !active || !capacity ||
        (*status != "active" && *status != "waiting")) {
      log.Unexpected("check " + s.name + ": " + Describe(r));
      continue;
    }
    ++log.checks;
    if (*active > *capacity || *capacity != kCapacity) {
      log.Violation("check " + s.name + " answered " + r.body + " (capacity " +
                    std::to_string(kCapacity) + ")");
    }
    // A session answered active that kept checking in must still be active, unless its idle
    // timeout may have passed (the server's downtime counts). Across a restart, checked only
    // when the last active answer came shortly before the kill.
    if (s.state == SessionState::kActive) {
      // The server saw the last check at or after last_active_sent and sees this one at or
      // before `answered`: well within the idle timeout (which is followed by grace, where a
      // check is active again at once).
      int64_t silent_ms = MsBetween(s.last_active_sent, answered);
      bool in_time = silent_ms < kIdleTimeoutMs - kIdleMarginMs;
      bool across = incarnation > s.last_active_incarnation;
      if (across) {
        Endpoint::Restart first = endpoint.RestartBefore(s.last_active_incarnation + 1);
        in_time = in_time && MsBetween(s.last_active, first.killed_at) < kBeforeKillMs;
        if (in_time) ++log.restart_checks;
      }
      if (in_time && *status != "active") {
        log.Violation("session " + s.name + " was active by a check sent " +
                      std::to_string(silent_ms) + " ms before this answer" +
                      (across ? " (and before a restart)" : "") + ", now: " + r.body);
      }
    }
    if (*status == "active") {
      if (s.state != SessionState::kActive) {
        ++log.admissions;
        s.leave_at = answered + milliseconds(hold_ms(rng));
      }
      s.state = SessionState::kActive;
      s.last_active_sent = sent;
      s.last_active = answered;
      s.last_active_incarnation = incarnation;
    } else {
      s.state = SessionState::kWaiting;
    }
  }
}

// True while the server writes a snapshot (snap-N.snap.tmp exists until it is published).
bool SnapshotBeingWritten(const std::filesystem::path& dir) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("snap-", 0) == 0 && name.size() > 4 && name.ends_with(".tmp")) return true;
  }
  return false;
}

int CountOf(const std::string& text, std::string_view what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

// The lines of text that contain `what` (at most `max`).
std::string LinesWith(const std::string& text, std::string_view what, int max = 5) {
  std::string out;
  int found = 0;
  for (size_t at = text.find(what); at != std::string::npos && found < max;
       at = text.find(what, at + 1)) {
    size_t begin = text.rfind('\n', at);
    begin = begin == std::string::npos ? 0 : begin + 1;
    size_t end = text.find('\n', at);
    out += text.substr(begin, end == std::string::npos ? std::string::npos : end - begin) + "\n";
    ++found;
    at = end == std::string::npos ? text.size() : end;
  }
  return out;
}

json::value Stats(Client& client) {
  HttpResult r = client.QueueStats(kQueue);
  EXPECT_EQ(r.status, 200) << Describe(r);
  return r.json;
}

int64_t Stat(const json::value& stats, std::string_view key) {
  return IntField(stats, key).value_or(-1);
}

// pushed = acked + ready + delayed + inflight + dead + cancelled.
::testing::AssertionResult CountersAddUp(const json::value& stats) {
  int64_t sum = 0;
  for (const char* key :
       {"acked", "waiting_deps", "ready", "delayed", "inflight", "dead", "cancelled"}) {
    int64_t v = Stat(stats, key);
    if (v < 0) return ::testing::AssertionFailure() << "no " << key << ": " << stats;
    sum += v;
  }
  if (Stat(stats, "pushed") != sum) {
    return ::testing::AssertionFailure() << "pushed != acked + ready + delayed + inflight + dead "
                                            "+ cancelled: "
                                         << json::serialize(stats);
  }
  return ::testing::AssertionSuccess();
}

void RunScenario(const Scenario& sc) {
  const uint64_t seed = TestSeed();
  std::printf("[ crash    ] --fsync %s, seed %llu (rerun with ANTEROOM_TEST_SEED=%llu)%s\n",
              sc.fsync, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed), kSanitized ? ", sanitized build" : "");
  std::fflush(stdout);
  std::mt19937_64 rng(seed);
  TimePoint test_start = SteadyClock::now();

  TempDir data("anteroom-server-crash");
  ASSERT_FALSE(data.path().empty()) << "mkdtemp failed";
  std::vector<std::string> args = {"--data", data.path().string()};
  args.insert(args.end(), {"--fsync", sc.fsync, "--compact-min-mb", "1"});
  const EnvVars env = {{"ANTEROOM_TOKEN_SECRET", "server-crash-test-secret"}};
  auto server = std::make_unique<ServerProcess>(args, env);
  ASSERT_TRUE(server->started()) << server->error();
  std::string server_logs;  // stderr of the incarnations that are gone
  Client admin(server->url());
  if (sc.rooms) {
    HttpResult r = admin.PutRoom(kRoom, json::object{{"capacity", kCapacity},
                                                     {"checkin_timeout_ms", kCheckinTimeoutMs},
                                                     {"grace_ms", kGraceMs},
                                                     {"idle_timeout_ms", kIdleTimeoutMs}});
    ASSERT_EQ(r.status, 200) << Describe(r);
  }

  Endpoint endpoint(server->url());
  Flags flags;
  const int threads = sc.producers + sc.workers + (sc.rooms ? kRoomThreads : 0);
  std::vector<ThreadLog> logs(static_cast<size_t>(threads));
  std::vector<std::thread> producers, workers, rooms;
  // Whatever happens, every thread is stopped and joined before the test returns.
  struct Joiner {
    Flags& flags;
    std::vector<std::thread>* groups[3];
    ~Joiner() {
      flags.abort = true;
      for (auto* group : groups) {
        for (auto& t : *group) {
          if (t.joinable()) t.join();
        }
      }
    }
  } joiner{flags, {&producers, &workers, &rooms}};
  size_t slot = 0;
  for (int i = 0; i < sc.producers; ++i, ++slot) {
    producers.emplace_back(Producer, std::cref(endpoint), std::ref(flags), i, sc.producers,
                           seed + 1 + slot, std::ref(logs[slot]));
  }
  for (int i = 0; i < sc.workers; ++i, ++slot) {
    workers.emplace_back(Worker, std::cref(endpoint), std::ref(flags),
                         "crash-w" + std::to_string(i), seed + 1 + slot, std::ref(logs[slot]));
  }
  for (int i = 0; sc.rooms && i < kRoomThreads; ++i, ++slot) {
    rooms.emplace_back(RoomClient, std::cref(endpoint), std::ref(flags), i, seed + 1 + slot,
                       std::ref(logs[slot]));
  }

  // The kills. ServerProcess children die with the thread that spawned them: this one. Some
  // kills hunt for a compaction: within their random delay they strike as soon as a snapshot
  // is being written (compactions are short, so random kills alone seldom hit one).
  std::uniform_int_distribution<int64_t> gap_ms(kKillGapMinMs, kKillGapMaxMs);
  std::bernoulli_distribution hunt(kHuntShare);
  int kills = 0;
  int kills_mid_snapshot = 0;
  int compactions = 0;
  int64_t max_restart_ms = 0;
  TimePoint phase_end = SteadyClock::now() + sc.kill_phase;
  while (kills < sc.min_kills || SteadyClock::now() < phase_end) {
    TimePoint kill_at = SteadyClock::now() + milliseconds(gap_ms(rng));
    if (hunt(rng)) {
      while (SteadyClock::now() < kill_at && !SnapshotBeingWritten(data.path())) {
        std::this_thread::sleep_for(milliseconds(1));
      }
      if (SteadyClock::now() < kill_at) ++kills_mid_snapshot;
    } else {
      std::this_thread::sleep_until(kill_at);
    }
    if (!server->Alive()) {
      ADD_FAILURE() << "the server died on its own before kill " << kills + 1 << "; stderr:\n"
                    << Tail(server->Errors());
      return;
    }
    TimePoint killed_at = SteadyClock::now();
    ASSERT_EQ(kill(server->pid(), SIGKILL), 0);
    int status = server->Stop();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "wait status " << status;
    std::string errors = server->Errors();
    compactions += CountOf(errors, "compaction: snapshot");
    server_logs += errors;
    server.reset();
    server = std::make_unique<ServerProcess>(args, env);
    ASSERT_TRUE(server->started()) << "restart after kill " << kills + 1 << " (seed " << seed
                                   << ") failed: " << server->error();
    TimePoint up_at = SteadyClock::now();
    max_restart_ms = std::max(max_restart_ms, MsBetween(killed_at, up_at));
    ++kills;
    // Right after recovery: the counters add up and count every push answered before now.
    int64_t answered = flags.answered_pushes.load();
    endpoint.Restarted(server->url(), killed_at, up_at);
    Client check(server->url());
    json::value stats = Stats(check);
    EXPECT_TRUE(CountersAddUp(stats)) << "after restart " << kills << " (seed " << seed << ")";
    EXPECT_GE(Stat(stats, "pushed"), answered)
        << "after restart " << kills << " (seed " << seed << "): pushes answered 201 are lost; "
        << json::serialize(stats);
    if (::testing::Test::HasFailure()) return;
  }
  TimePoint kills_done = SteadyClock::now();

  // Drain: no more pushes or checks; the workers finish what is left (the leases held at the
  // last kill run out first).
  flags.stop_producers = true;
  for (auto& t : producers) t.join();
  flags.stop_rooms = true;
  for (auto& t : rooms) t.join();
  Client client(server->url());
  bool drained = WaitFor(
      [&] {
        HttpResult r = client.QueueStats(kQueue);
        return r.status == 200 && IntField(r.json, "ready") == 0 &&
               IntField(r.json, "delayed") == 0 && IntField(r.json, "inflight") == 0;
      },
      kDrainWithin, milliseconds(100));
  flags.stop_workers = true;
  for (auto& t : workers) t.join();
  ASSERT_TRUE(drained) << "not drained within " << kDrainWithin.count()
                       << " ms: " << json::serialize(Stats(client)) << " (seed " << seed << ")";
  int64_t drain_ms = MsBetween(kills_done, SteadyClock::now());
  json::value stats = Stats(client);

  // What the clients saw, all together.
  std::set<int64_t> answered, delivered, acked;
  std::map<std::string, TimePoint> first_ack;  // job key -> earliest ok answer
  std::vector<const Delivery*> deliveries;
  int64_t transport_errors = 0, lease_lost = 0, checks = 0, restart_checks = 0;
  int64_t admissions = 0, leaves = 0;
  int64_t answered_pushes = 0, ack_answers = 0;
  std::vector<std::string> violations, unexpected;
  for (const ThreadLog& log : logs) {
    answered.insert(log.answered.begin(), log.answered.end());
    answered_pushes += static_cast<int64_t>(log.answered.size());
    for (const Delivery& d : log.deliveries) {
      delivered.insert(d.n);
      deliveries.push_back(&d);
    }
    for (const auto& [key, at] : log.acked_ok) {
      auto [it, fresh] = first_ack.emplace(key, at);
      if (!fresh) it->second = std::min(it->second, at);
    }
    ack_answers += static_cast<int64_t>(log.acked_ok.size());
    acked.insert(log.acked_n.begin(), log.acked_n.end());
    transport_errors += log.transport_errors;
    lease_lost += log.lease_lost;
    checks += log.checks;
    admissions += log.admissions;
    leaves += log.leaves;
    restart_checks += log.restart_checks;
    violations.insert(violations.end(), log.violations.begin(), log.violations.end());
    unexpected.insert(unexpected.end(), log.unexpected.begin(), log.unexpected.end());
  }

  std::printf(
      "[ crash    ] --fsync %s: %d kills (%d during a snapshot write; restart <= %lld ms), "
      "%d compactions; %lld pushes answered, %zu deliveries, %lld acks ok (%zu jobs), "
      "%lld lease_lost, %lld transport errors; %lld checks (%lld admissions, %lld leaves), "
      "%lld sessions checked across restarts; drained in %lld ms; %lld ms in all; seed %llu\n",
      sc.fsync, kills, kills_mid_snapshot, static_cast<long long>(max_restart_ms), compactions,
      static_cast<long long>(answered_pushes), deliveries.size(),
      static_cast<long long>(ack_answers), first_ack.size(), static_cast<long long>(lease_lost),
      static_cast<long long>(transport_errors), static_cast<long long>(checks),
      static_cast<long long>(admissions), static_cast<long long>(leaves),
      static_cast<long long>(restart_checks), static_cast<long long>(drain_ms),
      static_cast<long long>(MsBetween(test_start, SteadyClock::now())),
      static_cast<unsigned long long>(seed));
  std::printf("[ crash    ] stats %s\n", json::serialize(stats).c_str());
  std::fflush(stdout);

  const std::string seed_text = " (seed " + std::to_string(seed) + ")";
  EXPECT_GE(kills, sc.min_kills);
  EXPECT_TRUE(unexpected.empty()) << unexpected.size()
                                  << " unexpected answers, first: " << unexpected.front()
                                  << seed_text;
  EXPECT_GT(answered_pushes, 0);
  EXPECT_EQ(static_cast<int64_t>(answered.size()), answered_pushes) << "an n answered twice";

  // Every push answered 201 was delivered and acked.
  std::vector<int64_t> never_delivered, never_acked;
  for (int64_t n : answered) {
    if (!delivered.count(n)) never_delivered.push_back(n);
    if (!acked.count(n)) never_acked.push_back(n);
  }
  EXPECT_TRUE(never_delivered.empty())
      << never_delivered.size() << " jobs answered 201 were never delivered, first n "
      << never_delivered.front() << seed_text;
  EXPECT_TRUE(never_acked.empty())
      << never_acked.size() << " jobs answered 201 were never acked ok, first n "
      << never_acked.front() << seed_text;

  // No answered ack is undone: no delivery of an acked job by a fetch sent after the answer.
  int64_t undone = 0;
  std::string first_undone;
  for (const Delivery* d : deliveries) {
    auto it = first_ack.find(JobKey(d->id, d->n));
    if (it != first_ack.end() && d->fetch_sent > it->second) {
      if (undone++ == 0) {
        first_undone = "job " + d->id + " (n " + std::to_string(d->n) + ") acked ok, then " +
                       std::to_string(MsBetween(it->second, d->fetch_sent)) +
                       " ms later a fetch delivered it again";
      }
    }
  }
  EXPECT_EQ(undone, 0) << "acks undone: " << first_undone << seed_text;

  // Rooms: capacity never exceeded, active sessions not lost across restarts.
  EXPECT_TRUE(violations.empty()) << violations.size()
                                  << " room violations, first: " << violations.front() << seed_text;
  if (sc.rooms) {
    EXPECT_GT(checks, 0);
    EXPECT_GT(leaves, 0) << "the sessions never took turns";
    // Normally dozens (a session is left out when its last active answer came too long before
    // the kill or the restart was slow).
    EXPECT_GT(restart_checks, 0) << "no session could be checked across a restart";
    HttpResult room = client.GetRoom(kRoom);
    EXPECT_EQ(room.status, 200) << Describe(room);
    EXPECT_LE(IntField(room.json, "active").value_or(-1), kCapacity) << room.body;
  }

  // The counters add up and cover what the clients saw.
  EXPECT_TRUE(CountersAddUp(stats)) << seed_text;
  EXPECT_EQ(Stat(stats, "ready"), 0);
  EXPECT_EQ(Stat(stats, "delayed"), 0);
  EXPECT_EQ(Stat(stats, "inflight"), 0);
  EXPECT_EQ(Stat(stats, "dead"), 0) << json::serialize(stats);
  EXPECT_EQ(Stat(stats, "cancelled"), 0) << json::serialize(stats);
  EXPECT_GE(Stat(stats, "pushed"), answered_pushes) << json::serialize(stats);
  EXPECT_GE(Stat(stats, "acked"), answered_pushes) << json::serialize(stats);
  // Each job acked ok was acked once on the server (an ok answer is durable).
  EXPECT_GE(Stat(stats, "acked"), static_cast<int64_t>(first_ack.size())) << json::serialize(stats);

  // A clean restart changes no counter.
  {
    bool alive = server->Alive();
    std::string errors = server->Errors();
    int status = server->Stop();
    EXPECT_TRUE(alive) << "the server died on its own; stderr:\n" << Tail(errors);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "wait status " << status << "; stderr:\n"
        << Tail(server->Errors());
    server_logs += server->Errors();
    server.reset();
    server = std::make_unique<ServerProcess>(args, env);
    ASSERT_TRUE(server->started()) << "clean restart failed: " << server->error();
    Client after(server->url());
    json::value again = Stats(after);
    for (const char* key : {"pushed", "acked", "ready", "delayed", "inflight", "dead", "nacked",
                            "expired", "cancelled"}) {
      EXPECT_EQ(Stat(again, key), Stat(stats, key))
          << key << " changed across a clean restart: " << json::serialize(again) << " vs "
          << json::serialize(stats);
    }
    server_logs += server->Errors();
    server->Stop();
  }
  // No incarnation logged an error (a failed write, sync or compaction) or a sanitizer report.
  int reports = 0;
  std::string report_lines;
  for (const char* what : {"[error]", "[critical]", "Sanitizer", "runtime error:"}) {
    reports += CountOf(server_logs, what);
    report_lines += LinesWith(server_logs, what);
  }
  EXPECT_EQ(reports, 0) << report_lines << seed_text;
  // What the restarts found (for the record): kills during a compaction leave an unfinished
  // snapshot; a kill mid-write leaves a torn tail.
  int segments = 0, snapshots = 0;
  for (const auto& entry : std::filesystem::directory_iterator(data.path())) {
    std::string name = entry.path().filename().string();
    segments += name.rfind("log-", 0) == 0;
    snapshots += name.rfind("snap-", 0) == 0;
  }
  std::printf(
      "[ crash    ] recovery warnings: %d (%d unfinished snapshots removed, %d segments replaced "
      "by a snapshot); data dir at the end: %d log segments, %d snapshots\n",
      CountOf(server_logs, "] recovery: "), CountOf(server_logs, "unfinished snapshot removed"),
      CountOf(server_logs, "replaced by a snapshot"), segments, snapshots);
  std::fflush(stdout);
}

// --fsync always: an answer comes once the change is on disk.
TEST(ServerCrash, KilledAtRandomUnderLoadLosesNothingAnswered) {
  RunScenario({.fsync = "always",
               .kill_phase = kSanitized ? seconds(12) : seconds(18),
               .min_kills = 5,
               .producers = 3,
               .workers = 3,
               .rooms = true});
}

// --fsync everysec: an answer comes once the change is written to the kernel, so a process
// crash loses nothing either.
TEST(ServerCrash, EverysecKilledProcessLosesNothingAnswered) {
  RunScenario({.fsync = "everysec",
               .kill_phase = seconds(6),
               .min_kills = 3,
               .producers = 2,
               .workers = 2,
               .rooms = false});
}

}  // namespace
}  // namespace anteroom::testing
