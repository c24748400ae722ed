// Workers crashing mid-job lose nothing: the real server, 4 `anteroom work` processes (2 loops
// each), 10k jobs; two workers are killed with SIGKILL while every one of their loops is in the
// middle of a job. At the end every job was acked exactly once from the server's point of view,
// none is left ready, delayed, in flight or dead, and the deliveries seen by the commands add up
// with the server's counters (at-least-once, nothing lost).
//
// Each worker runs `sh -c SCRIPT` per job; the script appends the payload ({"n": i}) to the
// worker's own log file, so the logs list every delivery a command saw. A worker is made to be
// "mid-job" on purpose: the test creates its hold file, and the next job each of its loops
// starts waits (after logging) until the file is gone. Once all its loops hold a job, the test
// checks the server shows those jobs in flight for that worker, kills the worker with SIGKILL,
// then removes the hold file (the orphaned commands finish; this process is their subreaper, so
// it reaps them and checks none is left behind).
//
// The two victims get their jobs back by the two different routes:
//  - crash-w0: lease 60 s, heartbeat ttl 2 s: the jobs must come back when the heartbeats stop,
//    long before the lease would run out;
//  - crash-w1: lease 3 s, heartbeat ttl 120 s: the jobs must come back when the lease runs out.
// (Not shorter: a live worker that misses its ttl on a loaded machine loses its leases, which
// the test survives, but then it could no longer check what the victim held when killed.)
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/server_fixture.h"
#include "support/server_process.h"
#include "support/temp_dir.h"
#include "support/worker_process.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

using std::chrono::milliseconds;
using std::chrono::seconds;
using SteadyClock = std::chrono::steady_clock;

constexpr char kQueue[] = "crash-q";
constexpr int kJobs = 10'000;
constexpr int kBatch = 1'000;
constexpr int kWorkers = 4;
constexpr int kConcurrency = 4;  // loops per worker
// A victim is held once its own log shows this many deliveries (the first victim is held
// earlier, so both kills land while plenty of jobs are left).
constexpr size_t kHoldAfter[2] = {500, 1'200};
// A killed worker's jobs must be back within this. Expected: about 2-4 s (heartbeat ttl 2 s or
// lease 3 s, plus the <= 1 s timer); crash-w0's lease is 60 s, so coming back within this
// bound shows the heartbeat did it.
constexpr milliseconds kBackWithin = seconds(20);
// Generous: each job starts a process (`sh`), so 10k jobs take about 35 s on 2 cores in an
// optimised build.
constexpr milliseconds kAllAckedWithin = seconds(150);

// The command each worker runs per job. JOB_LOG, JOB_HOLD, JOB_HELD come from the worker's
// environment (one set per worker). The hold is bounded (60 s), so a command never outlives a
// failed test by much.
constexpr char kScript[] =
    "IFS= read -r p\n"
    "printf '%s\\n' \"$p\" >> \"$JOB_LOG\"\n"
    "if [ -e \"$JOB_HOLD\" ]; then\n"
    "  printf '%s\\n' \"$p\" >> \"$JOB_HELD\"\n"
    "  i=0\n"
    "  while [ -e \"$JOB_HOLD\" ] && [ \"$i\" -lt 1200 ]; do sleep 0.05; i=$((i+1)); done\n"
    "fi\n"
    "exit 0\n";

int64_t MsSince(SteadyClock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count();
}

size_t CountLines(const fs::path& path) {
  std::string text = ReadFile(path);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// The n of a log line {"n":N}; nullopt for anything else.
std::optional<int64_t> JobNumber(const std::string& line) {
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  if (ec || !v.is_object() || v.as_object().size() != 1) return std::nullopt;
  return IntField(v, "n");
}

struct WorkerSpec {
  std::string name;
  int64_t lease_ms;
  int64_t heartbeat_ms;
};

// Victims first: crash-w0 comes back by heartbeat, crash-w1 by lease expiry (see the top).
const WorkerSpec kSpecs[kWorkers] = {
    {"crash-w0", 60'000, 2'000},
    {"crash-w1", 3'000, 120'000},
    {"crash-w2", 10'000, 5'000},
    {"crash-w3", 10'000, 5'000},
};

class WorkerCrashTest : public ServerTest {
 protected:
  json::value Stats() {
    HttpResult r = client().QueueStats(kQueue);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    return r.json;
  }

  int64_t Stat(const json::value& stats, std::string_view key) {
    return IntField(stats, key).value_or(-1);
  }

  // The ids of the jobs in flight (of one worker, when given); nullopt if the answer is bad.
  std::optional<std::set<std::string>> InflightIds(const std::string& worker = {}) {
    std::string path = std::string("/v1/queues/") + kQueue + "/inflight";
    if (!worker.empty()) path += "?worker=" + worker;
    HttpResult r = client().Request("GET", path);
    if (r.status != 200 || !r.json.is_object() || !r.json.as_object().contains("jobs") ||
        !r.json.at("jobs").is_array()) {
      ADD_FAILURE() << "GET " << path << ": " << r.status << " " << r.body << r.error;
      return std::nullopt;
    }
    std::set<std::string> ids;
    for (const auto& job : r.json.at("jobs").as_array()) {
      if (auto id = StrField(job, "id")) ids.insert(*id);
    }
    return ids;
  }
};

TEST_F(WorkerCrashTest, TwoWorkersKilledMidJobLoseNothingAndEveryJobIsAckedOnce) {
  auto test_start = SteadyClock::now();
  OrphanReaper reaper;
  ASSERT_TRUE(reaper.enabled()) << "prctl(PR_SET_CHILD_SUBREAPER): " << std::strerror(errno);
  reaper.Keep(server().pid());
  TempDir dir("anteroom-crash");
  ASSERT_FALSE(dir.path().empty()) << "mkdtemp: " << std::strerror(errno);

  // 10k jobs, {"n": i}; the ids answered (in order) map a job back to its n.
  std::map<std::string, int64_t> n_of_id;
  for (int first = 0; first < kJobs; first += kBatch) {
    json::array jobs;
    for (int n = first; n < first + kBatch; ++n) {
      jobs.push_back(json::object{{"payload", json::object{{"n", n}}}});
    }
    HttpResult r = client().PushBatch(kQueue, jobs);
    ASSERT_EQ(r.status, 201) << r.body << r.error;
    const json::array& ids = r.json.at("ids").as_array();
    ASSERT_EQ(ids.size(), static_cast<size_t>(kBatch)) << r.body;
    for (size_t k = 0; k < ids.size(); ++k) {
      n_of_id[std::string(ids[k].as_string())] = first + static_cast<int64_t>(k);
    }
  }
  ASSERT_EQ(n_of_id.size(), static_cast<size_t>(kJobs)) << "the ids are not distinct";
  {
    json::value stats = Stats();
    ASSERT_EQ(Stat(stats, "pushed"), kJobs) << json::serialize(stats);
    ASSERT_EQ(Stat(stats, "ready"), kJobs) << json::serialize(stats);
  }

  // Four workers, each with its own log, hold file and held-jobs file.
  struct Files {
    fs::path log, hold, held, output;
  };
  std::vector<Files> files;
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  for (const WorkerSpec& spec : kSpecs) {
    Files f{dir.path() / (spec.name + ".log"), dir.path() / (spec.name + ".hold"),
            dir.path() / (spec.name + ".held"), dir.path() / (spec.name + ".out")};
    std::ofstream(f.log).flush();  // exists (empty) before the first job
    std::vector<std::string> args = {"work",
                                     kQueue,
                                     "--worker",
                                     spec.name,
                                     "--concurrency",
                                     std::to_string(kConcurrency),
                                     "--lease-ms",
                                     std::to_string(spec.lease_ms),
                                     "--heartbeat-ms",
                                     std::to_string(spec.heartbeat_ms),
                                     "--server",
                                     server().url(),
                                     "--",
                                     "sh",
                                     "-c",
                                     kScript};
    EnvVars env = {
        {"JOB_LOG", f.log.string()}, {"JOB_HOLD", f.hold.string()}, {"JOB_HELD", f.held.string()}};
    workers.push_back(std::make_unique<WorkerProcess>(args, env, f.output));
    ASSERT_TRUE(workers.back()->started()) << workers.back()->error();
    reaper.Keep(workers.back()->pid());
    files.push_back(f);
  }
  auto worker_output = [&](size_t w) {
    return "\n" + kSpecs[w].name + " output (tail):\n" + Tail(ReadFile(files[w].output));
  };

  // The two kills. For each victim: hold it, wait until all its loops are mid-job, check the
  // server has those jobs (and no others) in flight for it, SIGKILL, let the orphans go, and
  // wait for the server to take the jobs back.
  std::set<std::string> in_flight_at_kill;  // job ids, both victims
  for (size_t v = 0; v < 2; ++v) {
    const WorkerSpec& spec = kSpecs[v];
    const Files& f = files[v];
    ASSERT_TRUE(WaitFor([&] { return CountLines(f.log) >= kHoldAfter[v]; }, seconds(60)))
        << spec.name << " saw " << CountLines(f.log) << " deliveries; stats "
        << json::serialize(Stats()) << worker_output(v);
    ASSERT_TRUE(workers[v]->Alive()) << spec.name << " exited early" << worker_output(v);

    std::ofstream(f.hold).flush();
    ASSERT_TRUE(WaitFor([&] { return CountLines(f.held) >= kConcurrency; }, seconds(20)))
        << spec.name << " did not start holding " << kConcurrency << " jobs; held file:\n"
        << ReadFile(f.held) << worker_output(v);
    std::set<int64_t> held_ns;
    {
      std::istringstream lines(ReadFile(f.held));
      std::string line;
      while (std::getline(lines, line)) {
        auto n = JobNumber(line);
        ASSERT_TRUE(n.has_value()) << "bad line in " << f.held << ": " << line;
        held_ns.insert(*n);
      }
    }
    ASSERT_EQ(held_ns.size(), static_cast<size_t>(kConcurrency)) << ReadFile(f.held);

    // Mid-job: the server shows jobs in flight for this worker, and only held ones (each loop
    // fetches one job at a time, and all are inside a held command). Normally it is all of them;
    // a lease lost to a stall of the machine would be one fewer, and is not what this tests.
    auto ids = InflightIds(spec.name);
    ASSERT_TRUE(ids.has_value());
    ASSERT_FALSE(ids->empty()) << spec.name << " holds jobs, but none is in flight for it";
    for (const std::string& id : *ids) {
      ASSERT_EQ(n_of_id.count(id), 1u) << "unknown job id in flight: " << id;
      ASSERT_EQ(held_ns.count(n_of_id[id]), 1u)
          << spec.name << " has job n " << n_of_id[id] << " in flight, but is not running it";
    }

    int status = workers[v]->Kill();
    reaper.Forget(workers[v]->pid());
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "wait status " << status;
    auto killed_at = SteadyClock::now();
    in_flight_at_kill.insert(ids->begin(), ids->end());
    fs::remove(f.hold);  // the orphaned commands finish (their worker is gone: no ack)

    // Back on the server: crash-w0 by its heartbeat ttl (lease 60 s), crash-w1 by its lease
    // (heartbeat ttl 120 s).
    bool back = WaitFor(
        [&] {
          auto still = InflightIds(spec.name);
          return still.has_value() && still->empty();
        },
        kBackWithin, milliseconds(50));
    ASSERT_TRUE(back) << spec.name << "'s jobs are still in flight " << MsSince(killed_at)
                      << " ms after the kill; stats " << json::serialize(Stats());
    std::printf("[ crash    ] %s killed holding %zu jobs; back on the server after %lld ms\n",
                spec.name.c_str(), ids->size(), static_cast<long long>(MsSince(killed_at)));
  }

  // The survivors finish the queue. (The wait also ends when nothing is left to deliver, so a
  // lost job fails the test at once rather than at the deadline.)
  bool finished = WaitFor(
      [&] {
        HttpResult r = client().QueueStats(kQueue);
        if (r.status != 200) return false;
        if (IntField(r.json, "acked") == kJobs) return true;
        return IntField(r.json, "ready") == 0 && IntField(r.json, "delayed") == 0 &&
               IntField(r.json, "inflight") == 0;
      },
      kAllAckedWithin, milliseconds(100));
  json::value stats = Stats();
  ASSERT_TRUE(finished) << "still not done: " << json::serialize(stats) << worker_output(2)
                        << worker_output(3);

  // Every job acked exactly once from the server's point of view, and nothing left anywhere.
  EXPECT_EQ(Stat(stats, "pushed"), kJobs) << json::serialize(stats);
  EXPECT_EQ(Stat(stats, "acked"), kJobs) << json::serialize(stats);
  EXPECT_EQ(Stat(stats, "ready"), 0) << json::serialize(stats);
  EXPECT_EQ(Stat(stats, "delayed"), 0) << json::serialize(stats);
  EXPECT_EQ(Stat(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(Stat(stats, "dead"), 0) << json::serialize(stats);
  EXPECT_EQ(Stat(stats, "cancelled"), 0) << json::serialize(stats);
  EXPECT_EQ(Stat(stats, "nacked"), 0) << "no command failed: " << json::serialize(stats);
  // Each job held at a kill had a lease end without an ack.
  EXPECT_GE(Stat(stats, "expired"), static_cast<int64_t>(in_flight_at_kill.size()))
      << json::serialize(stats);
  auto left = InflightIds();
  ASSERT_TRUE(left.has_value());
  EXPECT_TRUE(left->empty()) << left->size() << " jobs still in flight";
  {
    HttpResult dead = client().Request("GET", std::string("/v1/queues/") + kQueue + "/dead");
    EXPECT_EQ(dead.status, 200) << dead.body << dead.error;
    EXPECT_EQ(json::serialize(dead.json), R"({"jobs":[]})");
  }
  // Gone for good: acked jobs are unknown to cancel (the ones held at the kills, and a sample).
  {
    std::vector<std::string> sample(in_flight_at_kill.begin(), in_flight_at_kill.end());
    int k = 0;
    for (const auto& [id, n] : n_of_id) {
      if (k++ % 97 == 0) sample.push_back(id);
    }
    for (const std::string& id : sample) {
      HttpResult r =
          client().Request("DELETE", std::string("/v1/queues/") + kQueue + "/jobs/" + id);
      if (r.status != 404) {  // (one failure is enough: a 200 here cancelled the job)
        ADD_FAILURE() << "job " << id << " (n " << n_of_id[id] << ") is still known: " << r.status
                      << " " << r.body;
        break;
      }
    }
  }

  // The survivors stop cleanly (SIGTERM: nothing in hand, so nothing handed back).
  for (size_t w = 2; w < kWorkers; ++w) {
    int status = workers[w]->Stop(seconds(10));
    reaper.Forget(workers[w]->pid());
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << kSpecs[w].name << " wait status " << status << worker_output(w);
  }
  json::value after = Stats();
  for (const char* key : {"acked", "nacked", "expired", "ready", "inflight", "dead"}) {
    EXPECT_EQ(Stat(after, key), Stat(stats, key)) << key << " changed when the workers stopped";
  }

  // The deliveries seen by the commands (all four logs, killed workers included).
  std::vector<int> seen(kJobs, 0);
  int64_t deliveries = 0;
  std::string per_worker;
  std::vector<std::string> bad_lines;
  for (const Files& f : files) {
    std::istringstream lines(ReadFile(f.log));
    std::string line;
    int64_t mine = 0;
    while (std::getline(lines, line)) {
      auto n = JobNumber(line);
      if (!n || *n < 0 || *n >= kJobs) {
        bad_lines.push_back(f.log.filename().string() + ": " + line);
        continue;
      }
      ++seen[static_cast<size_t>(*n)];
      ++mine;
    }
    deliveries += mine;
    per_worker += (per_worker.empty() ? "" : " ") + std::to_string(mine);
  }
  EXPECT_TRUE(bad_lines.empty()) << bad_lines.size()
                                 << " bad log lines, first: " << bad_lines.front();
  std::vector<int> never;
  for (int n = 0; n < kJobs; ++n) {
    if (seen[static_cast<size_t>(n)] == 0) never.push_back(n);
  }
  EXPECT_TRUE(never.empty()) << never.size() << " jobs were never delivered, first n "
                             << never.front();
  // The jobs held at a kill were run again elsewhere (their first run never got acked).
  for (const std::string& id : in_flight_at_kill) {
    EXPECT_GE(seen[static_cast<size_t>(n_of_id[id])], 2)
        << "job n " << n_of_id[id] << " was in flight at a kill and never delivered again";
  }
  // Deliveries add up: every delivery the server made ended in an ack, a nack or an expired
  // lease (nothing is in flight now), and every one of them ran a command that logged it (a
  // worker was only killed once all its loops were inside a command). So the two counts match,
  // and the redeliveries are exactly the deliveries beyond one per job.
  int64_t server_deliveries = Stat(stats, "acked") + Stat(stats, "nacked") + Stat(stats, "expired");
  EXPECT_EQ(deliveries, server_deliveries)
      << "deliveries seen by commands vs acked + nacked + expired: " << json::serialize(stats);
  EXPECT_GE(deliveries - kJobs, static_cast<int64_t>(in_flight_at_kill.size()));

  // The orphaned commands of the killed workers were reaped by this process; none is left.
  std::vector<pid_t> running;
  size_t orphans = reaper.Reap(seconds(10), &running);
  EXPECT_GE(orphans, static_cast<size_t>(2 * kConcurrency))
      << "the held commands of the killed workers were orphaned and should have been reaped";
  EXPECT_TRUE(running.empty()) << running.size() << " leftover processes, first PID "
                               << running.front();

  std::printf(
      "[ crash    ] %d jobs, %lld deliveries (%lld redelivered; per worker: %s), expired %lld, "
      "%zu orphans reaped, %lld ms\n",
      kJobs, static_cast<long long>(deliveries), static_cast<long long>(deliveries - kJobs),
      per_worker.c_str(), static_cast<long long>(Stat(stats, "expired")), orphans,
      static_cast<long long>(MsSince(test_start)));
}

}  // namespace
}  // namespace anteroom::testing
