// The queue commands of the CLI against a real server:
//  - `anteroom push Q JSON` and `anteroom push Q --file F` (newline-delimited JSON, batches of
//    1000), with their options and their errors;
//  - `anteroom queue stats|list|dead|requeue`, which print the server's JSON, and the admin key
//    requeue needs when the server has one;
//  - `anteroom work Q -- sh -c SCRIPT`: acks on exit 0, nacks with the stderr tail otherwise,
//    extends the lease while the command runs, runs --concurrency jobs at once, and on a signal
//    stops fetching and finishes its jobs within --shutdown-grace-ms, handing back at once
//    those that outlive it (or all of them on a second signal).
//
// Worker processes (support/worker_process.h) are forked and exec'd, stopped by their PID and
// reaped. This process is the subreaper of what it starts while a test runs, so a command left
// behind by a worker ends up as its child and is killed (by PID) and reaped in TearDown. Every
// wait is bounded. The commands talk to the test through files in a per-test temporary
// directory, named by environment variables (LOG, DONE, HOLD, PIDF).
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
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
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

// How long a worker may take to exit after it was told to. It long-polls 1 s at a time, so it
// normally takes about that; the rest is room for a loaded machine and sanitizers.
constexpr milliseconds kExitWithin = seconds(8);
// Bound for waits on something that normally takes well under a second.
constexpr milliseconds kSoon = seconds(10);
// Heartbeat ttl of the workers: short enough that the heartbeat thread stops quickly (it sleeps
// ttl/30 at a time), long enough that a loaded machine does not miss it (a missed ttl releases
// the worker's leases, which some tests would see).
constexpr char kHeartbeatMs[] = "3000";

// The non-empty lines of a file (none if it does not exist).
std::vector<std::string> Lines(const fs::path& path) {
  std::vector<std::string> out;
  std::istringstream in(ReadFile(path));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

json::value ParseOrNull(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  return ec ? json::value(nullptr) : v;
}

// stdout parsed as one JSON value (null when it is not JSON).
json::value Json(const CliResult& r) { return ParseOrNull(r.out); }

std::string Describe(const CliResult& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") +
         "\nstdout: " + Tail(r.out) + "\nstderr: " + Tail(r.err);
}

std::string DescribeStatus(const std::optional<int>& status) {
  if (!status) return "still running";
  if (WIFEXITED(*status)) return "exit " + std::to_string(WEXITSTATUS(*status));
  if (WIFSIGNALED(*status)) return "killed by signal " + std::to_string(WTERMSIG(*status));
  return "wait status " + std::to_string(*status);
}

bool ExitedZero(const std::optional<int>& status) {
  return status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

class QueueCliTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_FALSE(dir_.path().empty()) << "mkdtemp: " << std::strerror(errno);
    reaper_ = std::make_unique<OrphanReaper>();
    ASSERT_TRUE(reaper_->enabled()) << "prctl(PR_SET_CHILD_SUBREAPER): " << std::strerror(errno);
    reaper_->Keep(server().pid());
  }

  void TearDown() override {
    for (auto& w : workers_) w->Kill();
    workers_.clear();
    if (reaper_) {
      // Anything else still our child is a command a worker left behind: killed by its PID.
      for (pid_t pid : reaper_->KillRunning()) {
        ADD_FAILURE() << "a process the test started is still running: PID " << pid;
      }
      reaper_.reset();
    }
    ServerTest::TearDown();
  }

  // The CLI with --server pointing at the test server.
  CliResult Cli(std::vector<std::string> args, const EnvVars& env = {}) {
    args.push_back("--server");
    args.push_back(server().url());
    return RunCli(args, env);
  }

  fs::path File(const std::string& name) const { return dir_.path() / name; }

  // `anteroom work QUEUE --worker NAME --heartbeat-ms 3000 EXTRA... -- sh -c SCRIPT`, with
  // LOG, DONE, HOLD and PIDF naming files of the test's directory.
  WorkerProcess& StartWorker(const std::string& queue, const std::string& name,
                             const std::string& script,
                             const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"work",     queue,          "--worker",       name,
                                     "--server", server().url(), "--heartbeat-ms", kHeartbeatMs};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    EnvVars env = {{"LOG", File("log").string()},
                   {"DONE", File("done").string()},
                   {"HOLD", File("hold").string()},
                   {"PIDF", File("pid").string()}};
    workers_.push_back(std::make_unique<WorkerProcess>(args, env, File(name + ".out")));
    return *workers_.back();
  }

  json::value Stats(const std::string& queue) {
    HttpResult r = client().QueueStats(queue);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    return r.json;
  }
  int64_t Stat(const std::string& queue, std::string_view key) {
    return IntField(Stats(queue), key).value_or(-1);
  }
  std::string StatsText(const std::string& queue) { return json::serialize(Stats(queue)); }

  // Jobs fetched by a probe worker (lease 30 s, no wait).
  json::array Fetch(const std::string& queue, int max = 1000) {
    HttpResult r = client().Fetch(queue, "probe", max);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    if (!r.json.is_object() || !r.json.as_object().contains("jobs")) return {};
    return r.json.at("jobs").as_array();
  }

  // GET /v1/queues/Q/inflight?worker=W: the jobs in flight for the worker.
  json::array Inflight(const std::string& queue, const std::string& worker) {
    HttpResult r = client().Request("GET", "/v1/queues/" + queue + "/inflight?worker=" + worker);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    if (!r.json.is_object() || !r.json.as_object().contains("jobs")) return {};
    return r.json.at("jobs").as_array();
  }

  json::array Dead(const std::string& queue) {
    HttpResult r = client().Request("GET", "/v1/queues/" + queue + "/dead");
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    if (!r.json.is_object() || !r.json.as_object().contains("jobs")) return {};
    return r.json.at("jobs").as_array();
  }

  // A job pushed through the client; its id.
  std::string MustPush(const std::string& queue, const json::value& payload,
                       const json::object& options = {}) {
    HttpResult r = client().Push(queue, payload, options);
    EXPECT_EQ(r.status, 201) << r.body << r.error;
    return StrField(r.json, "id").value_or("");
  }

  TempDir dir_{"anteroom-qcli"};
  std::unique_ptr<OrphanReaper> reaper_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
};

// ---------------------------------------------------------------------------------------------
// anteroom push

TEST_F(QueueCliTest, PushPrintsTheIdAndTheJobHasThePayload) {
  const std::string payload = R"({"a":[1,2,{"b":null}],"s":"\u00e9t\u00e9","t":true})";
  CliResult r = Cli({"push", "q", payload});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  json::value out = Json(r);
  ASSERT_TRUE(out.is_object()) << Describe(r);
  EXPECT_EQ(out.as_object().size(), 1u) << Describe(r);
  auto id = StrField(out, "id");
  ASSERT_TRUE(id.has_value()) << Describe(r);

  // Scalars are payloads too.
  CliResult number = Cli({"push", "q", "42"});
  ASSERT_EQ(number.exit_code, 0) << Describe(number);
  CliResult text = Cli({"push", "q", R"("just text")"});
  ASSERT_EQ(text.exit_code, 0) << Describe(text);

  EXPECT_EQ(Stat("q", "pushed"), 3) << StatsText("q");
  json::array jobs = Fetch("q");
  ASSERT_EQ(jobs.size(), 3u) << json::serialize(jobs);
  EXPECT_EQ(StrField(jobs[0], "id"), id);
  EXPECT_EQ(jobs[0].at("payload"), json::parse(payload)) << json::serialize(jobs[0]);
  EXPECT_EQ(IntField(jobs[0], "priority"), 0);
  EXPECT_EQ(IntField(jobs[0], "attempt"), 1);
  EXPECT_EQ(StrField(jobs[1], "id"), StrField(Json(number), "id"));
  EXPECT_EQ(jobs[1].at("payload"), json::value(42));
  EXPECT_EQ(jobs[2].at("payload"), json::value("just text"));
}

TEST_F(QueueCliTest, PushOptionsPriorityDelayMaxAttemptsDedupe) {
  // --priority: higher first.
  ASSERT_EQ(Cli({"push", "prio", R"("low")"}).exit_code, 0);
  CliResult high = Cli({"push", "prio", R"("high")", "--priority", "5"});
  ASSERT_EQ(high.exit_code, 0) << Describe(high);
  json::array jobs = Fetch("prio");
  ASSERT_EQ(jobs.size(), 2u) << json::serialize(jobs);
  EXPECT_EQ(jobs[0].at("payload"), json::value("high")) << json::serialize(jobs);
  EXPECT_EQ(IntField(jobs[0], "priority"), 5);
  EXPECT_EQ(StrField(jobs[0], "id"), StrField(Json(high), "id"));
  EXPECT_EQ(jobs[1].at("payload"), json::value("low"));
  EXPECT_EQ(IntField(jobs[1], "priority"), 0);

  // --delay-ms: delayed, not handed out.
  CliResult delayed = Cli({"push", "later", "{}", "--delay-ms", "60000"});
  ASSERT_EQ(delayed.exit_code, 0) << Describe(delayed);
  EXPECT_EQ(Stat("later", "delayed"), 1) << StatsText("later");
  EXPECT_EQ(Stat("later", "ready"), 0) << StatsText("later");
  EXPECT_TRUE(Fetch("later").empty());

  // --max-attempts 1: dead after its first failed delivery.
  CliResult once = Cli({"push", "once", "{}", "--max-attempts", "1"});
  ASSERT_EQ(once.exit_code, 0) << Describe(once);
  jobs = Fetch("once");
  ASSERT_EQ(jobs.size(), 1u);
  std::string lease(jobs[0].at("lease").as_string());
  ASSERT_EQ(client().Nack("once", {lease}, {}, "failed").status, 200);
  EXPECT_EQ(Stat("once", "dead"), 1) << StatsText("once");

  // --dedupe-key: the second push answers the first job's id and enqueues nothing, until that
  // job is acked.
  CliResult first = Cli({"push", "dd", R"("x")", "--dedupe-key", "k-1"});
  ASSERT_EQ(first.exit_code, 0) << Describe(first);
  CliResult again = Cli({"push", "dd", R"("y")", "--dedupe-key", "k-1"});
  ASSERT_EQ(again.exit_code, 0) << Describe(again);
  ASSERT_TRUE(StrField(Json(first), "id").has_value()) << Describe(first);
  EXPECT_EQ(StrField(Json(again), "id"), StrField(Json(first), "id")) << Describe(again);
  EXPECT_EQ(Stat("dd", "pushed"), 1) << StatsText("dd");
  jobs = Fetch("dd");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].at("payload"), json::value("x"));
  ASSERT_EQ(client().Ack("dd", {std::string(jobs[0].at("lease").as_string())}).status, 200);
  CliResult after = Cli({"push", "dd", R"("z")", "--dedupe-key", "k-1"});
  ASSERT_EQ(after.exit_code, 0) << Describe(after);
  EXPECT_NE(StrField(Json(after), "id"), StrField(Json(first), "id")) << Describe(after);
  EXPECT_EQ(Stat("dd", "pushed"), 2) << StatsText("dd");
}

TEST_F(QueueCliTest, PushErrorsExitNonZeroAndPushNothing) {
  // A payload and --file together: which one was meant is unclear, so neither is pushed.
  std::string file =
      (std::filesystem::temp_directory_path() / "anteroom-qcli-both.ndjson").string();
  { std::ofstream(file) << "{\"n\":1}\n"; }
  CliResult both = Cli({"push", "q", R"({"a":1})", "--file", file});
  std::filesystem::remove(file);
  EXPECT_NE(both.exit_code, 0) << Describe(both);
  CliResult bad_json = Cli({"push", "q", R"({"a":)"});
  EXPECT_FALSE(bad_json.timed_out);
  EXPECT_EQ(bad_json.exit_code, 2) << Describe(bad_json);
  EXPECT_NE(bad_json.err.find("not valid JSON"), std::string::npos) << Describe(bad_json);
  EXPECT_EQ(bad_json.out, "") << Describe(bad_json);

  CliResult trailing = Cli({"push", "q", "1 2"});
  EXPECT_EQ(trailing.exit_code, 2) << Describe(trailing);

  CliResult no_payload = Cli({"push", "q"});
  EXPECT_EQ(no_payload.exit_code, 2) << Describe(no_payload);
  EXPECT_NE(no_payload.err.find("payload"), std::string::npos) << Describe(no_payload);

  // Refused by the server: its error JSON on stdout, exit 1.
  CliResult bad_name = Cli({"push", "bad name", "1"});
  EXPECT_EQ(bad_name.exit_code, 1) << Describe(bad_name);
  EXPECT_EQ(ErrorCode(HttpResult{0, bad_name.out, Json(bad_name), {}}), "invalid_argument")
      << Describe(bad_name);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"push", "q", "1", "--max-attempts", "0"},
        std::vector<std::string>{"push", "q", "1", "--priority", "2147483648"},
        std::vector<std::string>{"push", "q", "1", "--dedupe-key", "not ok"},
        std::vector<std::string>{"push", "q", "1", "--delay-ms", "-5"}}) {
    CliResult r = Cli(args);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 1) << args[3] << " " << args[4] << ": " << Describe(r);
    EXPECT_NE(r.out.find("invalid_argument"), std::string::npos)
        << args[3] << " " << args[4] << ": " << Describe(r);
  }

  // Usage errors (CLI11).
  CliResult usage = Cli({"push", "q", "1", "--priority", "high"});
  EXPECT_NE(usage.exit_code, 0) << Describe(usage);

  // No server (nothing listens on port 1 of the loopback): a transport error, exit 2.
  CliResult no_server = RunCli({"push", "q", "1", "--server", "http://127.0.0.1:1"});
  EXPECT_FALSE(no_server.timed_out);
  EXPECT_EQ(no_server.exit_code, 2) << Describe(no_server);
  EXPECT_NE(no_server.err.find("error"), std::string::npos) << Describe(no_server);

  // Nothing was pushed anywhere: no queue exists.
  HttpResult list = client().ListQueues();
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(json::serialize(list.json), R"({"queues":[]})");
}

// Writes `lines` to a file, each followed by "\n".
fs::path WriteLines(const fs::path& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& line : lines) out << line << "\n";
  return path;
}

TEST_F(QueueCliTest, PushFileSkipsBlankLinesAndKeepsOrderInBatchesOf1000) {
  constexpr int kJobs = 2'500;
  std::vector<std::string> lines;
  for (int n = 0; n < kJobs; ++n) {
    lines.push_back(R"({"n":)" + std::to_string(n) + "}" + (n % 3 == 0 ? "\r" : ""));
    if (n % 700 == 0) {  // blank lines are skipped: spaces, tabs, CR, nothing
      lines.push_back("");
      lines.push_back(" \t \r");
    }
  }
  lines.push_back("");
  fs::path file = WriteLines(File("jobs.ndjson"), lines);

  CliResult r = Cli({"push", "many", "--file", file.string()});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  // One answer line per batch request: 1000 + 1000 + 500 ids.
  std::vector<std::string> out_lines;
  {
    std::istringstream in(r.out);
    std::string line;
    while (std::getline(in, line)) out_lines.push_back(line);
  }
  ASSERT_EQ(out_lines.size(), 3u) << Describe(r);
  std::vector<std::string> ids;
  const size_t want_sizes[3] = {1000, 1000, 500};
  for (size_t b = 0; b < 3; ++b) {
    json::value v = ParseOrNull(out_lines[b]);
    ASSERT_TRUE(v.is_object() && v.as_object().contains("ids") && v.at("ids").is_array())
        << out_lines[b].substr(0, 200);
    EXPECT_EQ(v.at("ids").as_array().size(), want_sizes[b]);
    for (const auto& id : v.at("ids").as_array()) ids.emplace_back(id.as_string());
  }
  ASSERT_EQ(ids.size(), static_cast<size_t>(kJobs));
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), ids.size()) << "distinct ids";
  EXPECT_EQ(Stat("many", "pushed"), kJobs) << StatsText("many");
  EXPECT_EQ(Stat("many", "ready"), kJobs) << StatsText("many");

  // The jobs are there in the file's order, with the printed ids.
  int n = 0;
  for (int round = 0; round < 3; ++round) {
    for (const auto& job : Fetch("many")) {
      ASSERT_LT(n, kJobs);
      EXPECT_EQ(IntField(job.at("payload"), "n"), n) << json::serialize(job);
      EXPECT_EQ(StrField(job, "id"), ids[static_cast<size_t>(n)]) << "job n " << n;
      ++n;
    }
  }
  EXPECT_EQ(n, kJobs);

  // The options apply to every job of the file.
  fs::path two = WriteLines(File("two.ndjson"), {R"("a")", R"("b")"});
  CliResult prio = Cli({"push", "prio", "--file", two.string(), "--priority", "3"});
  ASSERT_EQ(prio.exit_code, 0) << Describe(prio);
  json::array jobs = Fetch("prio");
  ASSERT_EQ(jobs.size(), 2u) << json::serialize(jobs);
  EXPECT_EQ(jobs[0].at("payload"), json::value("a"));
  EXPECT_EQ(jobs[1].at("payload"), json::value("b"));
  for (const auto& job : jobs) EXPECT_EQ(IntField(job, "priority"), 3) << json::serialize(job);

  // An empty file pushes nothing and succeeds.
  fs::path empty = WriteLines(File("empty.ndjson"), {"", "  "});
  CliResult none = Cli({"push", "none", "--file", empty.string()});
  EXPECT_EQ(none.exit_code, 0) << Describe(none);
  EXPECT_EQ(none.out, "") << Describe(none);
  EXPECT_EQ(Stat("none", "pushed"), 0);
}

// A bad line stops the command (exit 2, naming the line). The batches of 1000 sent before it
// stay pushed and were printed; the jobs read since the last batch are not pushed. So stdout
// always lists exactly the jobs that were pushed.
TEST_F(QueueCliTest, PushFileStopsAtABadLine) {
  fs::path early = WriteLines(File("early.ndjson"), {"1", "2", "{bad", "4"});
  CliResult r = Cli({"push", "early", "--file", early.string()});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("line 3"), std::string::npos) << Describe(r);
  EXPECT_EQ(r.out, "") << Describe(r);
  EXPECT_EQ(Stat("early", "pushed"), 0) << StatsText("early");

  std::vector<std::string> lines;
  for (int n = 0; n < 1'001; ++n) lines.push_back(std::to_string(n));
  lines.push_back("[1,");  // line 1002
  lines.push_back("7");
  fs::path late = WriteLines(File("late.ndjson"), lines);
  CliResult l = Cli({"push", "late", "--file", late.string()});
  EXPECT_EQ(l.exit_code, 2) << Describe(l);
  EXPECT_NE(l.err.find("line 1002"), std::string::npos) << Describe(l);
  ASSERT_EQ(std::count(l.out.begin(), l.out.end(), '\n'), 1) << Describe(l);
  json::value printed = Json(l);
  ASSERT_TRUE(printed.is_object() && printed.as_object().contains("ids")) << Describe(l);
  EXPECT_EQ(printed.at("ids").as_array().size(), 1'000u);
  EXPECT_EQ(Stat("late", "pushed"), 1'000) << StatsText("late");

  // A batch the server refuses: its error on stdout, exit 1, nothing pushed.
  fs::path ok = WriteLines(File("ok.ndjson"), {"1", "2"});
  CliResult refused = Cli({"push", "refused", "--file", ok.string(), "--max-attempts", "0"});
  EXPECT_EQ(refused.exit_code, 1) << Describe(refused);
  EXPECT_NE(refused.out.find("invalid_argument"), std::string::npos) << Describe(refused);
  EXPECT_EQ(Stat("refused", "pushed"), 0) << StatsText("refused");

  CliResult missing = Cli({"push", "missing", "--file", File("no-such-file").string()});
  EXPECT_EQ(missing.exit_code, 2) << Describe(missing);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << Describe(missing);
  EXPECT_EQ(Stat("missing", "pushed"), 0);
}

// ---------------------------------------------------------------------------------------------
// anteroom queue stats|list|dead|requeue

// Pushes `n` jobs with max_attempts 1 and fails them: `n` dead jobs. Their ids, oldest first.
std::vector<std::string> MakeDead(Client& client, const std::string& queue, int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    HttpResult pushed =
        client.Push(queue, json::object{{"dead", i}}, json::object{{"max_attempts", 1}});
    EXPECT_EQ(pushed.status, 201) << pushed.body;
    HttpResult fetched = client.Fetch(queue, "probe");
    EXPECT_EQ(fetched.status, 200) << fetched.body;
    const json::array& jobs = fetched.json.at("jobs").as_array();
    EXPECT_EQ(jobs.size(), 1u) << fetched.body;
    if (jobs.size() != 1) return ids;
    ids.emplace_back(jobs[0].at("id").as_string());
    HttpResult nacked = client.Nack(queue, {std::string(jobs[0].at("lease").as_string())}, {},
                                    "failure " + std::to_string(i));
    EXPECT_EQ(nacked.status, 200) << nacked.body;
  }
  return ids;
}

TEST_F(QueueCliTest, QueueStatsListDeadRequeuePrintTheServersJson) {
  MustPush("alpha", json::object{{"k", 1}});
  MustPush("alpha", json::object{{"k", 2}}, json::object{{"delay_ms", 60'000}});
  std::vector<std::string> dead_ids = MakeDead(client(), "beta", 3);
  ASSERT_EQ(dead_ids.size(), 3u);

  CliResult stats = Cli({"queue", "stats", "alpha"});
  ASSERT_EQ(stats.exit_code, 0) << Describe(stats);
  EXPECT_EQ(Json(stats), Stats("alpha")) << Describe(stats);
  EXPECT_EQ(IntField(Json(stats), "ready"), 1) << Describe(stats);
  EXPECT_EQ(IntField(Json(stats), "delayed"), 1) << Describe(stats);

  // A queue nobody pushed to: zero counts, not an error.
  CliResult fresh = Cli({"queue", "stats", "nobody-yet"});
  ASSERT_EQ(fresh.exit_code, 0) << Describe(fresh);
  EXPECT_EQ(IntField(Json(fresh), "pushed"), 0) << Describe(fresh);

  CliResult list = Cli({"queue", "list"});
  ASSERT_EQ(list.exit_code, 0) << Describe(list);
  EXPECT_EQ(Json(list), client().ListQueues().json) << Describe(list);
  json::value list_json = Json(list);
  ASSERT_TRUE(list_json.is_object() && list_json.at("queues").is_array()) << Describe(list);
  std::set<std::string> names;
  for (const auto& q : list_json.at("queues").as_array()) {
    if (auto name = StrField(q, "queue")) names.insert(*name);
  }
  EXPECT_EQ(names.count("alpha"), 1u) << Describe(list);
  EXPECT_EQ(names.count("beta"), 1u) << Describe(list);

  CliResult dead = Cli({"queue", "dead", "beta"});
  ASSERT_EQ(dead.exit_code, 0) << Describe(dead);
  EXPECT_EQ(Json(dead), client().Request("GET", "/v1/queues/beta/dead").json) << Describe(dead);
  json::value dead_json = Json(dead);
  ASSERT_TRUE(dead_json.is_object()) << Describe(dead);
  const json::array& entries = dead_json.at("jobs").as_array();
  ASSERT_EQ(entries.size(), 3u) << Describe(dead);
  EXPECT_EQ(StrField(entries[0], "id"), dead_ids[0]) << "oldest first";
  EXPECT_EQ(StrField(entries[0], "error"), "failure 0");
  EXPECT_EQ(entries[0].at("payload"), (json::object{{"dead", 0}}));

  CliResult limited = Cli({"queue", "dead", "beta", "--limit", "2"});
  ASSERT_EQ(limited.exit_code, 0) << Describe(limited);
  ASSERT_TRUE(Json(limited).is_object()) << Describe(limited);
  EXPECT_EQ(Json(limited).at("jobs").as_array().size(), 2u) << Describe(limited);
  CliResult bad_limit = Cli({"queue", "dead", "beta", "--limit", "0"});
  EXPECT_EQ(bad_limit.exit_code, 1) << Describe(bad_limit);
  EXPECT_NE(bad_limit.out.find("invalid_argument"), std::string::npos) << Describe(bad_limit);

  // requeue --id: only that one (its attempts start over); then the rest.
  CliResult one = Cli({"queue", "requeue", "beta", "--id", dead_ids[1]});
  ASSERT_EQ(one.exit_code, 0) << Describe(one);
  EXPECT_EQ(IntField(Json(one), "count"), 1) << Describe(one);
  EXPECT_EQ(Stat("beta", "dead"), 2) << StatsText("beta");
  json::array jobs = Fetch("beta");
  ASSERT_EQ(jobs.size(), 1u) << json::serialize(jobs);
  EXPECT_EQ(StrField(jobs[0], "id"), dead_ids[1]);
  EXPECT_EQ(IntField(jobs[0], "attempt"), 1);

  CliResult rest = Cli({"queue", "requeue", "beta"});
  ASSERT_EQ(rest.exit_code, 0) << Describe(rest);
  EXPECT_EQ(IntField(Json(rest), "count"), 2) << Describe(rest);
  EXPECT_EQ(Stat("beta", "dead"), 0) << StatsText("beta");
  EXPECT_EQ(Stat("beta", "ready"), 2) << StatsText("beta");

  // Errors: the server's error JSON and exit 1; usage errors exit non-zero.
  CliResult bad = Cli({"queue", "stats", "bad name"});
  EXPECT_EQ(bad.exit_code, 1) << Describe(bad);
  EXPECT_NE(bad.out.find("invalid_argument"), std::string::npos) << Describe(bad);
  CliResult bad_requeue = Cli({"queue", "requeue", "bad name"});
  EXPECT_EQ(bad_requeue.exit_code, 1) << Describe(bad_requeue);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"queue"}, std::vector<std::string>{"queue", "stats"},
        std::vector<std::string>{"queue", "nonsense", "q"}}) {
    CliResult r = Cli(args);
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.exit_code, 0) << Describe(r);
  }
}

class QueueCliAdminTest : public QueueCliTest {
 protected:
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}, {"ANTEROOM_ADMIN_KEY", "k3y"}};
  }
  std::string AdminKey() const override { return "k3y"; }
};

TEST_F(QueueCliAdminTest, RequeueNeedsTheAdminKeyFromTheFlagOrTheEnvironment) {
  std::vector<std::string> ids = MakeDead(client(), "adm", 3);
  ASSERT_EQ(ids.size(), 3u);

  // With an admin key and no queue key, reading queues needs the admin key too: the data plane
  // is not left open.
  for (const std::vector<std::string>& args : {std::vector<std::string>{"queue", "stats", "adm"},
                                               std::vector<std::string>{"queue", "list"},
                                               std::vector<std::string>{"queue", "dead", "adm"}}) {
    CliResult r = Cli(args);
    EXPECT_EQ(r.exit_code, 1) << args[1] << ": " << Describe(r);
    EXPECT_NE(r.out.find("unauthorized"), std::string::npos) << Describe(r);
    CliResult keyed = Cli(args, {{"ANTEROOM_ADMIN_KEY", "k3y"}});
    EXPECT_EQ(keyed.exit_code, 0) << args[1] << ": " << Describe(keyed);
  }

  CliResult none = Cli({"queue", "requeue", "adm"});
  EXPECT_EQ(none.exit_code, 1) << Describe(none);
  EXPECT_NE(none.out.find("unauthorized"), std::string::npos) << Describe(none);
  CliResult wrong = Cli({"queue", "requeue", "adm", "--admin-key", "wrong"});
  EXPECT_EQ(wrong.exit_code, 1) << Describe(wrong);
  CliResult wrong_env = Cli({"queue", "requeue", "adm"}, {{"ANTEROOM_ADMIN_KEY", "wrong"}});
  EXPECT_EQ(wrong_env.exit_code, 1) << Describe(wrong_env);
  EXPECT_EQ(Stat("adm", "dead"), 3) << "nothing requeued: " << StatsText("adm");

  CliResult flag = Cli({"queue", "requeue", "adm", "--id", ids[0], "--admin-key", "k3y"});
  EXPECT_EQ(flag.exit_code, 0) << Describe(flag);
  EXPECT_EQ(IntField(Json(flag), "count"), 1) << Describe(flag);
  CliResult env = Cli({"queue", "requeue", "adm", "--id", ids[1]}, {{"ANTEROOM_ADMIN_KEY", "k3y"}});
  EXPECT_EQ(env.exit_code, 0) << Describe(env);
  EXPECT_EQ(IntField(Json(env), "count"), 1) << Describe(env);
  // The flag wins over the environment.
  CliResult both =
      Cli({"queue", "requeue", "adm", "--admin-key", "k3y"}, {{"ANTEROOM_ADMIN_KEY", "wrong"}});
  EXPECT_EQ(both.exit_code, 0) << Describe(both);
  EXPECT_EQ(IntField(Json(both), "count"), 1) << Describe(both);
  EXPECT_EQ(Stat("adm", "dead"), 0) << StatsText("adm");
  EXPECT_EQ(Stat("adm", "ready"), 3) << StatsText("adm");
}

// ---------------------------------------------------------------------------------------------
// anteroom work

TEST_F(QueueCliTest, WorkUsageErrorsExitAtOnce) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"work", "uq"},  // no command
        std::vector<std::string>{"work", "uq", "--lease-ms", "299", "--", "true"},
        std::vector<std::string>{"work", "uq", "--heartbeat-ms", "299", "--", "true"},
        std::vector<std::string>{"work", "uq", "--concurrency", "0", "--", "true"},
        std::vector<std::string>{"work", "uq", "--concurrency", "1001", "--", "true"}}) {
    std::vector<std::string> with_server = args;
    with_server.insert(with_server.begin() + 2, {"--server", server().url()});
    CliResult r = RunCli(with_server, {}, seconds(10));
    EXPECT_FALSE(r.timed_out) << args[2];
    EXPECT_NE(r.exit_code, 0) << Describe(r);
  }
  EXPECT_EQ(Stat("uq", "workers"), 0) << "no worker started: " << StatsText("uq");
}

// The command appends its stdin (the payload) and a newline to $LOG, in one write (commands of
// one worker may run at once).
constexpr char kLogPayload[] = "p=$(cat)\nprintf '%s\\n' \"$p\" >> \"$LOG\"\n";

TEST_F(QueueCliTest, WorkAcksJobsWhoseCommandExitsZero) {
  std::vector<json::value> payloads;
  for (int n = 0; n < 5; ++n) {
    payloads.push_back(json::object{{"n", n}, {"text", "job " + std::to_string(n)}});
    MustPush("wa", payloads.back());
  }
  WorkerProcess& w = StartWorker("wa", "w-ack", kLogPayload);
  ASSERT_TRUE(w.started()) << w.error();

  // All five acked while the worker still runs: the last ack is not held back until it stops.
  ASSERT_TRUE(WaitFor([&] { return Stat("wa", "acked") == 5; }, kSoon))
      << StatsText("wa") << w.Output();
  ASSERT_TRUE(w.Alive()) << w.Output();
  std::vector<std::string> seen = Lines(File("log"));
  ASSERT_EQ(seen.size(), payloads.size()) << ReadFile(File("log"));
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(ParseOrNull(seen[i]), payloads[i]) << "delivery " << i << ": " << seen[i];
  }
  json::value stats = Stats("wa");
  EXPECT_EQ(IntField(stats, "ready"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "workers"), 1) << "the worker heartbeats: " << json::serialize(stats);

  // Idle, it stops on SIGTERM within about a long poll, exit 0, with nothing in flight.
  auto signalled = SteadyClock::now();
  w.Signal(SIGTERM);
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
  std::printf(
      "[ qcli     ] idle worker exited %lld ms after SIGTERM\n",
      static_cast<long long>(
          std::chrono::duration_cast<milliseconds>(SteadyClock::now() - signalled).count()));
  stats = Stats("wa");
  EXPECT_EQ(IntField(stats, "acked"), 5) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(Lines(File("log")).size(), 5u) << "no delivery after the stop";
}

// Payloads pushed by the CLI reach the command exactly as written, numbers byte for byte:
// neither `push` nor `work` passes them through a parsed value.
TEST_F(QueueCliTest, PushAndWorkKeepEveryNumberAsWritten) {
  CliResult one = Cli({"push", "exact", R"({"big": 100000000000000000000001, "x": 1.10})"});
  ASSERT_EQ(one.exit_code, 0) << Describe(one);
  fs::path file = WriteLines(File("exact.ndjson"),
                             {"[1e5, -0.0, -0]", "0.1000000000000000055511151231257827", "1E+2"});
  CliResult many = Cli({"push", "exact", "--file", file.string(), "--priority", "0"});
  ASSERT_EQ(many.exit_code, 0) << Describe(many);
  CliResult infinite = Cli({"push", "exact", "1e400"});
  EXPECT_NE(infinite.exit_code, 0) << Describe(infinite);
  EXPECT_EQ(Stat("exact", "pushed"), 4) << StatsText("exact");

  WorkerProcess& w = StartWorker("exact", "w-exact", kLogPayload);
  ASSERT_TRUE(w.started()) << w.error();
  ASSERT_TRUE(WaitFor([&] { return Stat("exact", "acked") == 4; }, kSoon))
      << StatsText("exact") << w.Output();
  EXPECT_EQ(Lines(File("log")), (std::vector<std::string>{
                                    R"({"big":100000000000000000000001,"x":1.10})", "[1e5,-0.0,-0]",
                                    "0.1000000000000000055511151231257827", "1E+2"}))
      << ReadFile(File("log"));
  w.Signal(SIGTERM);
  EXPECT_TRUE(ExitedZero(w.WaitExit(kExitWithin))) << w.Output();
}

TEST_F(QueueCliTest, WorkNacksWithTheStderrTail) {
  // Job "long": 5000 bytes on stderr, then "boom-end", exit 4: only the tail is kept; one
  // attempt. Job "short": "boom-123", exit 3; two attempts: the nack leaves the delay to the
  // server, so the retry comes after the backoff (1 s +-20%), not at once.
  MustPush("wn", json::value("long"), json::object{{"max_attempts", 1}});
  MustPush("wn", json::value("short"), json::object{{"max_attempts", 2}});
  WorkerProcess& w = StartWorker("wn", "w-nack",
                                 "p=$(cat)\n"
                                 "case \"$p\" in\n"
                                 "  *long*) head -c 5000 /dev/zero | tr '\\0' x >&2\n"
                                 "          echo boom-end >&2; exit 4;;\n"
                                 "  *) echo boom-123 >&2; exit 3;;\n"
                                 "esac\n");
  ASSERT_TRUE(w.started()) << w.error();

  ASSERT_TRUE(WaitFor([&] { return Stat("wn", "dead") == 2; }, kSoon))
      << StatsText("wn") << w.Output();
  EXPECT_TRUE(w.Alive()) << "a failing command does not stop the worker" << w.Output();
  json::value stats = Stats("wn");
  EXPECT_EQ(IntField(stats, "nacked"), 3) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "acked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);

  json::array dead = Dead("wn");
  ASSERT_EQ(dead.size(), 2u) << json::serialize(dead);
  EXPECT_EQ(dead[0].at("payload"), json::value("long"));
  EXPECT_EQ(IntField(dead[0], "attempts"), 1) << json::serialize(dead[0]);
  std::string tail = StrField(dead[0], "error").value_or("");
  EXPECT_EQ(tail.rfind("exit status 4", 0), 0u) << tail.substr(0, 100);
  EXPECT_NE(tail.find("boom-end"), std::string::npos) << Tail(tail, 100);
  EXPECT_LE(tail.size(), 2'048u + 64u) << "only the tail of stderr";
  EXPECT_GE(tail.size(), 1'024u) << "a useful part of stderr";

  EXPECT_EQ(dead[1].at("payload"), json::value("short"));
  EXPECT_EQ(IntField(dead[1], "attempts"), 2) << json::serialize(dead[1]);
  std::string error = StrField(dead[1], "error").value_or("");
  EXPECT_NE(error.find("boom-123"), std::string::npos) << error;
  EXPECT_NE(error.find("exit status 3"), std::string::npos) << error;
  const json::value* history = dead[1].as_object().if_contains("history");
  ASSERT_TRUE(history != nullptr && history->is_array() && history->as_array().size() == 2)
      << json::serialize(dead[1]);
  const json::array& h = history->as_array();
  for (const auto& attempt : h) {
    EXPECT_NE(StrField(attempt, "error").value_or("").find("boom-123"), std::string::npos)
        << json::serialize(attempt);
  }
  int64_t gap = IntField(h[1], "at_ms").value_or(0) - IntField(h[0], "at_ms").value_or(0);
  EXPECT_GE(gap, 750) << "retried without the backoff: " << json::serialize(dead[1]);

  // The CLI shows the same dead letters.
  CliResult cli = Cli({"queue", "dead", "wn"});
  ASSERT_EQ(cli.exit_code, 0) << Describe(cli);
  EXPECT_EQ(Json(cli), client().Request("GET", "/v1/queues/wn/dead").json) << Describe(cli);

  w.Signal(SIGTERM);
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
}

TEST_F(QueueCliTest, WorkExtendsTheLeaseWhileTheCommandRuns) {
  // The command runs 2.5 s on a lease of 1 s (the CLI allows 300 ms and up). Without
  // extensions the lease would run out (expiry is within 1 s of the deadline) and the job would
  // be redelivered.
  MustPush("wx", json::object{{"slow", true}});
  WorkerProcess& w =
      StartWorker("wx", "w-ext", std::string(kLogPayload) + "sleep 2.5\necho done >> \"$DONE\"\n",
                  {"--lease-ms", "1000"});
  ASSERT_TRUE(w.started()) << w.error();

  ASSERT_TRUE(WaitFor([&] { return !Lines(File("log")).empty(); }, kSoon)) << w.Output();
  json::array first = Inflight("wx", "w-ext");
  ASSERT_EQ(first.size(), 1u) << json::serialize(first) << StatsText("wx");
  int64_t first_expiry = IntField(first[0], "lease_expires_ms").value_or(0);
  EXPECT_EQ(IntField(first[0], "attempt"), 1);
  std::this_thread::sleep_for(milliseconds(1'200));
  json::array later = Inflight("wx", "w-ext");
  ASSERT_EQ(later.size(), 1u) << "the lease ran out: " << StatsText("wx") << w.Output();
  int64_t later_expiry = IntField(later[0], "lease_expires_ms").value_or(0);
  EXPECT_GE(later_expiry - first_expiry, 500) << "the lease was not extended";
  EXPECT_EQ(IntField(later[0], "attempt"), 1);

  ASSERT_TRUE(WaitFor([&] { return Stat("wx", "acked") == 1; }, kSoon))
      << StatsText("wx") << w.Output();
  json::value stats = Stats("wx");
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(Lines(File("log")).size(), 1u) << "delivered once: " << ReadFile(File("log"));
  EXPECT_EQ(Lines(File("done")).size(), 1u);

  w.Signal(SIGTERM);
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
}

TEST_F(QueueCliTest, WorkFinishesTheRunningJobOnSigtermAndFetchesNoMore) {
  std::string first = MustPush("wg", json::object{{"n", 1}});
  std::string second = MustPush("wg", json::object{{"n", 2}});
  WorkerProcess& w = StartWorker("wg", "w-graceful",
                                 std::string(kLogPayload) + "sleep 1.5\necho done >> \"$DONE\"\n");
  ASSERT_TRUE(w.started()) << w.error();

  ASSERT_TRUE(WaitFor([&] { return !Lines(File("log")).empty(); }, kSoon)) << w.Output();
  w.Signal(SIGTERM);  // the command is running (its process group does not get the signal)
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();

  EXPECT_EQ(Lines(File("done")).size(), 1u) << "the command ran to its end" << w.Output();
  std::vector<std::string> seen = Lines(File("log"));
  ASSERT_EQ(seen.size(), 1u) << ReadFile(File("log"));
  EXPECT_EQ(ParseOrNull(seen[0]), (json::object{{"n", 1}}));
  json::value stats = Stats("wg");
  EXPECT_EQ(IntField(stats, "acked"), 1)
      << "the finished job was acked " << json::serialize(stats) << w.Output();
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "ready"), 1) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  // The second job was never delivered.
  json::array jobs = Fetch("wg");
  ASSERT_EQ(jobs.size(), 1u) << json::serialize(jobs);
  EXPECT_EQ(StrField(jobs[0], "id"), second);
  EXPECT_EQ(IntField(jobs[0], "attempt"), 1) << json::serialize(jobs[0]);
  HttpResult gone = client().Request("DELETE", "/v1/queues/wg/jobs/" + first);
  EXPECT_EQ(gone.status, 404) << "the first job is acked for good: " << gone.body;
}

TEST_F(QueueCliTest, WorkSendsTheLastAckWhenStopping) {
  // The finished job's ack normally rides on the next fetch. The command signals its worker
  // ($PPID) and exits 0 a moment later, so there is no next fetch: the ack must go on its own.
  // (On a very loaded machine the signal may be handled only after the worker saw the command
  // exit; then the ack rides on a fetch, which may get the second job: the worker must hand it
  // back. Either way the first job is acked and nothing is left in flight.)
  MustPush("we", json::object{{"n", 1}});
  MustPush("we", json::object{{"n", 2}});
  WorkerProcess& w = StartWorker(
      "we", "w-last", std::string(kLogPayload) + "kill -TERM \"$PPID\"\nsleep 0.3\nexit 0\n");
  ASSERT_TRUE(w.started()) << w.error();

  std::optional<int> status = w.WaitExit(kSoon);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
  json::value stats = Stats("we");
  EXPECT_EQ(IntField(stats, "acked"), 1) << json::serialize(stats) << w.Output();
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "ready"), 1) << json::serialize(stats);
  EXPECT_LE(IntField(stats, "nacked").value_or(-1), 1) << json::serialize(stats);
  EXPECT_EQ(Lines(File("log")).size(), 1u) << ReadFile(File("log"));
  std::vector<std::string> seen = Lines(File("log"));
  if (!seen.empty()) {
    EXPECT_EQ(ParseOrNull(seen[0]), (json::object{{"n", 1}}));
  }
}

TEST_F(QueueCliTest, WorkSecondSignalAbandonsTheRunningJob) {
  const json::value payload = json::object{{"long", "job"}};
  std::string id = MustPush("wf", payload);
  // The command records its PID, then sleeps 30 s (exec: the PID stays the same).
  WorkerProcess& w = StartWorker("wf", "w-abandon",
                                 std::string(kLogPayload) + "echo $$ > \"$PIDF\"\nexec sleep 30\n");
  ASSERT_TRUE(w.started()) << w.error();
  ASSERT_TRUE(WaitFor([&] { return !Lines(File("pid")).empty(); }, kSoon)) << w.Output();
  pid_t command_pid = static_cast<pid_t>(std::stol(Lines(File("pid"))[0]));

  // First signal (SIGINT): the worker keeps waiting for the command.
  w.Signal(SIGINT);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(w.Alive()) << "one signal: the worker waits for its job" << w.Output();
  EXPECT_EQ(kill(command_pid, 0), 0) << "one signal: the command keeps running";
  EXPECT_EQ(Stat("wf", "inflight"), 1) << StatsText("wf");

  // Second signal (SIGTERM): the command is stopped, the job handed back, the worker exits.
  auto second = SteadyClock::now();
  w.Signal(SIGTERM);
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
  EXPECT_LT(SteadyClock::now() - second, seconds(20)) << "did not wait for the 30 s command";
  errno = 0;
  bool command_gone = kill(command_pid, 0) != 0 && errno == ESRCH;
  EXPECT_TRUE(command_gone) << "the command (PID " << command_pid << ") was not stopped";
  if (!command_gone) {
    kill(command_pid, SIGKILL);  // ours (a descendant); TearDown reaps it
  }

  json::value stats = Stats("wf");
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "ready"), 1) << "handed back without delay " << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "delayed"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "acked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 1) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  json::array jobs = Fetch("wf");
  ASSERT_EQ(jobs.size(), 1u) << json::serialize(jobs);
  EXPECT_EQ(StrField(jobs[0], "id"), id);
  EXPECT_EQ(jobs[0].at("payload"), payload);
  EXPECT_EQ(IntField(jobs[0], "attempt"), 2) << "the abandoned delivery counts";
}

TEST_F(QueueCliTest, WorkDrainsOnSigintWithinTheGrace) {
  // Four jobs of 1.5 s, two at once: on SIGINT the two running finish and are acked, nothing
  // new is taken, and the worker exits 0 long before its (default, 25 s) grace.
  for (int n = 0; n < 4; ++n) MustPush("wd", json::object{{"n", n}});
  WorkerProcess& w =
      StartWorker("wd", "w-drain", std::string(kLogPayload) + "sleep 1.5\necho done >> \"$DONE\"\n",
                  {"--concurrency", "2"});
  ASSERT_TRUE(w.started()) << w.error();
  ASSERT_TRUE(WaitFor([&] { return Lines(File("log")).size() == 2; }, kSoon)) << w.Output();
  auto signalled = SteadyClock::now();
  w.Signal(SIGINT);
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
  auto took = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - signalled);
  std::printf("[ qcli     ] worker with 2 running jobs exited %lld ms after SIGINT\n",
              static_cast<long long>(took.count()));

  EXPECT_EQ(Lines(File("done")).size(), 2u) << "the running commands ran to their end";
  EXPECT_EQ(Lines(File("log")).size(), 2u) << "a job was taken after the signal";
  json::value stats = Stats("wd");
  EXPECT_EQ(IntField(stats, "acked"), 2) << json::serialize(stats) << w.Output();
  EXPECT_EQ(IntField(stats, "ready"), 2) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
}

TEST_F(QueueCliTest, WorkHandsBackAJobOutlivingTheGraceAtOnce) {
  // A 30 s command on a 60 s lease, a grace of 500 ms: after SIGINT the command is stopped and
  // its job is ready again at once (not when the lease runs out), as a new attempt.
  std::string id = MustPush("wh", json::object{{"long", true}});
  WorkerProcess& w = StartWorker("wh", "w-grace",
                                 std::string(kLogPayload) + "echo $$ > \"$PIDF\"\nexec sleep 30\n",
                                 {"--shutdown-grace-ms", "500", "--lease-ms", "60000"});
  ASSERT_TRUE(w.started()) << w.error();
  ASSERT_TRUE(WaitFor([&] { return !Lines(File("pid")).empty(); }, kSoon)) << w.Output();
  pid_t command_pid = static_cast<pid_t>(std::stol(Lines(File("pid"))[0]));

  auto signalled = SteadyClock::now();
  w.Signal(SIGINT);
  std::optional<int> status = w.WaitExit(kExitWithin);
  auto took = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - signalled);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
  EXPECT_GE(took.count(), 400) << "the grace was not waited for";
  std::printf("[ qcli     ] worker exited %lld ms after SIGINT (grace 500 ms)\n",
              static_cast<long long>(took.count()));
  errno = 0;
  bool command_gone = kill(command_pid, 0) != 0 && errno == ESRCH;
  EXPECT_TRUE(command_gone) << "the command (PID " << command_pid << ") was not stopped";
  if (!command_gone) kill(command_pid, SIGKILL);  // ours (a descendant); TearDown reaps it

  json::value stats = Stats("wh");
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats) << w.Output();
  EXPECT_EQ(IntField(stats, "ready"), 1) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "delayed"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "nacked"), 1) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "expired"), 0) << json::serialize(stats);
  json::array jobs = Fetch("wh");
  ASSERT_EQ(jobs.size(), 1u) << json::serialize(jobs);
  EXPECT_EQ(StrField(jobs[0], "id"), id);
  EXPECT_EQ(IntField(jobs[0], "attempt"), 2) << json::serialize(jobs[0]);
}

TEST_F(QueueCliTest, WorkDoesNotRunAJobThatArrivesAfterTheStopSignal) {
  WorkerProcess& w = StartWorker("wl", "w-late", kLogPayload);
  ASSERT_TRUE(w.started()) << w.error();
  // Once it says it runs, its loop is (about to be) in a long poll (1 s). (Its heartbeats do not
  // show: a queue nobody pushed to keeps no worker.)
  ASSERT_TRUE(
      WaitFor([&] { return w.Output().find("1 loop(s) running") != std::string::npos; }, kSoon))
      << w.Output();
  std::this_thread::sleep_for(milliseconds(300));
  w.Signal(SIGTERM);
  // The job may reach the pending long poll: the worker must hand it back, not run it. (The
  // signal is handled asynchronously, by whichever thread the kernel picks: on a loaded machine
  // that can lag behind the loop thread, so the push waits a moment.)
  std::this_thread::sleep_for(milliseconds(300));
  MustPush("wl", json::object{{"late", true}});
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();

  EXPECT_TRUE(Lines(File("log")).empty()) << "the command ran: " << ReadFile(File("log"));
  json::value stats = Stats("wl");
  EXPECT_EQ(IntField(stats, "ready"), 1) << json::serialize(stats) << w.Output();
  EXPECT_EQ(IntField(stats, "inflight"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "acked"), 0) << json::serialize(stats);
  EXPECT_EQ(IntField(stats, "dead"), 0) << json::serialize(stats);
  // (Which way it went depends on timing: the long poll got the job and the worker handed it
  // back, or the poll ended first and the job was never delivered.)
  std::printf("[ qcli     ] late job %s\n", IntField(stats, "nacked") == 1
                                                ? "delivered after the signal and handed back"
                                                : "never delivered");
}

TEST_F(QueueCliTest, WorkConcurrencyRunsNJobsAtOnce) {
  // Each command logs its payload, then waits while $HOLD exists (at most 15 s).
  for (int n = 0; n < 4; ++n) MustPush("wc", json::object{{"n", n}});
  std::ofstream(File("hold")).flush();
  WorkerProcess& w = StartWorker("wc", "w-conc",
                                 std::string(kLogPayload) +
                                     "i=0\n"
                                     "while [ -e \"$HOLD\" ] && [ \"$i\" -lt 300 ]; do\n"
                                     "  sleep 0.05; i=$((i+1))\n"
                                     "done\n",
                                 {"--concurrency", "3"});
  ASSERT_TRUE(w.started()) << w.error();

  // Three jobs in flight for this worker at once, three commands running, the fourth waits.
  bool three = WaitFor(
      [&] { return Inflight("wc", "w-conc").size() == 3 && Lines(File("log")).size() == 3; }, kSoon,
      milliseconds(50));
  EXPECT_TRUE(three) << "in flight: " << json::serialize(Inflight("wc", "w-conc")) << "\nlog:\n"
                     << ReadFile(File("log")) << w.Output();
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(Inflight("wc", "w-conc").size(), 3u) << "never more than --concurrency";
  EXPECT_EQ(Lines(File("log")).size(), 3u) << ReadFile(File("log"));
  EXPECT_EQ(Stat("wc", "ready"), 1) << StatsText("wc");

  fs::remove(File("hold"));
  ASSERT_TRUE(WaitFor([&] { return Stat("wc", "acked") == 4; }, kSoon))
      << StatsText("wc") << w.Output();
  std::set<std::string> seen;  // as text: json::value has no ordering
  for (const auto& line : Lines(File("log"))) seen.insert(json::serialize(ParseOrNull(line)));
  std::set<std::string> want;
  for (int n = 0; n < 4; ++n) want.insert(json::serialize(json::object{{"n", n}}));
  EXPECT_EQ(seen, want) << ReadFile(File("log"));
  EXPECT_EQ(Stat("wc", "expired"), 0) << StatsText("wc");

  w.Signal(SIGTERM);
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
  EXPECT_EQ(Stat("wc", "inflight"), 0) << StatsText("wc");
}

// Regression: a command that exits 0 without reading its stdin, with a payload larger than a
// pipe's buffer (64 KiB), used to kill the worker by SIGPIPE and leave the job in flight until
// its lease ran out.
TEST_F(QueueCliTest, WorkSurvivesACommandThatDoesNotReadALargePayload) {
  MustPush("wp", json::object{{"big", std::string(300'000, 'x')}});
  WorkerProcess& w = StartWorker("wp", "w-pipe", "echo ran >> \"$DONE\"\nexit 0\n");
  ASSERT_TRUE(w.started()) << w.error();
  bool acked = WaitFor([&] { return Stat("wp", "acked") == 1 || !w.Alive(); }, kSoon) &&
               Stat("wp", "acked") == 1;
  EXPECT_TRUE(acked) << StatsText("wp") << w.Output();
  EXPECT_TRUE(w.Alive()) << "the worker died: " << DescribeStatus(w.WaitExit(milliseconds(0)))
                         << w.Output();
  w.Signal(SIGTERM);
  std::optional<int> status = w.WaitExit(kExitWithin);
  EXPECT_TRUE(ExitedZero(status)) << DescribeStatus(status) << w.Output();
}

}  // namespace
}  // namespace anteroom::testing
