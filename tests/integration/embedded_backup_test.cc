// The embedded backend's online backup (docs/operations.md, "Back up and restore"): `anteroom
// backup` against a running server under a push/ack load, `anteroom restore` into new data
// directories with each in-flight rule, servers started on them. Every job pushed (answered
// 201) before the backup was asked for is there exactly once, acked ones are not delivered
// again, the room's line is in the same order, tokens minted before verify; jobs leased at the
// backup are ready again (requeue) or still leased (keep). Also: the backup's files are held
// open through a compaction that deletes its snapshot, the route needs the admin key, a server
// without a data directory refuses it, and a restore never writes into a non-empty directory.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kKey[] = "backup-test-admin-key";
const EnvVars kAdminEnv = {{"ANTEROOM_ADMIN_KEY", kKey}};

std::unique_ptr<ServerProcess> ServeOn(const fs::path& data) {
  return std::make_unique<ServerProcess>(std::vector<std::string>{"--data", data.string()},
                                         kAdminEnv, seconds(20));
}

// Every job of `q` the server hands out now (acked as they come), by id: how often each came.
std::map<std::string, int> DrainReady(Client& c, std::map<std::string, int>* attempts = nullptr) {
  std::map<std::string, int> seen;
  for (int i = 0; i < 2'000; ++i) {
    HttpResult f = c.Fetch("q", "restore", 100);
    EXPECT_EQ(f.status, 200) << f.body;
    if (f.status != 200) break;
    const json::array& jobs = f.json.at("jobs").as_array();
    if (jobs.empty()) break;
    std::vector<std::string> leases;
    for (const json::value& j : jobs) {
      std::string id(j.at("id").as_string());
      ++seen[id];
      if (attempts) (*attempts)[id] = static_cast<int>(j.at("attempt").to_number<int64_t>());
      leases.emplace_back(j.at("lease").as_string());
    }
    EXPECT_EQ(c.Ack("q", leases).status, 200);
  }
  return seen;
}

std::string JobState(Client& c, const std::string& id) {
  HttpResult job = c.Request("GET", "/v1/queues/q/jobs/" + id);
  EXPECT_EQ(job.status, 200) << id << ": " << job.body;
  return job.status == 200 ? std::string(job.json.at("state").as_string()) : "";
}

TEST(EmbeddedBackupTest, ABackupUnderLoadRestoresWithEitherInflightRule) {
  TempDir root("anteroom-embedded-backup");
  ASSERT_FALSE(root.path().empty());
  fs::path live_dir = root.path() / "live";
  auto server = ServeOn(live_dir);
  ASSERT_TRUE(server->started()) << server->error();
  Client c(server->url(), kKey);

  // A room of one slot: the first in, five in line behind; the first's token.
  ASSERT_EQ(c.PutRoom("hall", {{"capacity", 1}}).status, 200);
  std::vector<std::string> sessions;
  std::string token;
  for (int i = 0; i < 6; ++i) {
    HttpResult r = c.Check("hall");
    ASSERT_EQ(r.status, 200) << r.body;
    sessions.emplace_back(r.json.at("session").as_string());
    if (i == 0) {
      ASSERT_EQ(r.json.at("status"), "active") << r.body;
      token = std::string(r.json.at("token").as_string());
    } else {
      ASSERT_EQ(r.json.at("position").to_number<int64_t>(), i) << r.body;
    }
  }

  // 50 jobs acked before; every acked job kept, so a job not delivered after the restore is
  // looked up as acked rather than gone. Then 3 leased to "held" for 10 minutes, never acked:
  // what the in-flight rule is about.
  ASSERT_EQ(
      c.Request("PUT", "/v1/queues/q/settings", R"({"keep_acked": {"count": 1000000}})").status,
      200);
  std::set<std::string> acked;
  for (int i = 0; i < 50; ++i) ASSERT_EQ(c.Push("q", i).status, 201);
  for (int i = 0; i < 50; ++i) {
    HttpResult f = c.Fetch("q", "w", 1);
    ASSERT_EQ(f.status, 200);
    const json::value& job = f.json.at("jobs").at(0);
    ASSERT_EQ(c.Ack("q", {std::string(job.at("lease").as_string())}).status, 200);
    acked.emplace(job.at("id").as_string());
  }
  std::map<std::string, std::string> held;  // id -> lease
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Push("q", 100 + i).status, 201);
  HttpResult hf = c.Fetch("q", "held", 3, 600'000);
  ASSERT_EQ(hf.status, 200) << hf.body;
  for (const json::value& j : hf.json.at("jobs").as_array()) {
    held.emplace(j.at("id").as_string(), j.at("lease").as_string());
  }
  ASSERT_EQ(held.size(), 3u);

  // A producer and a worker running through the backup.
  std::mutex mu;
  std::set<std::string> pushed;  // answered 201
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    Client p(server->url(), kKey);
    for (int i = 0; i < 20'000 && !stop; ++i) {
      HttpResult r = p.Push("q", 1000 + i);
      if (r.status != 201) continue;
      std::lock_guard lock(mu);
      pushed.emplace(r.json.at("id").as_string());
    }
  });
  std::thread worker([&] {  // what it acks after the backup point comes back
    Client w(server->url(), kKey);
    for (int i = 0; i < 20'000 && !stop; ++i) {
      HttpResult f = w.Fetch("q", "w2", 1);
      if (f.status != 200 || f.json.at("jobs").as_array().empty()) continue;
      w.Ack("q", {std::string(f.json.at("jobs").at(0).at("lease").as_string())});
    }
  });
  std::this_thread::sleep_for(milliseconds(300));
  std::set<std::string> before;
  {
    std::lock_guard lock(mu);
    before = pushed;
  }
  fs::path backup = root.path() / "backup";
  CliResult b = RunCli({"backup", "--server", server->url(), "--to", backup.string()}, kAdminEnv,
                       seconds(60));
  std::this_thread::sleep_for(milliseconds(200));  // the load goes on after the backup point
  stop = true;
  producer.join();
  worker.join();
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  ASSERT_GE(before.size(), 10u) << "the producer was running when the backup was taken";
  json::value point = json::parse(b.out);
  EXPECT_GE(point.at("snapshot").to_number<int64_t>(), 1) << b.out;
  EXPECT_FALSE(point.at("taken_at").as_string().empty()) << b.out;
  EXPECT_EQ(point.at("rooms").to_number<int64_t>(), 1) << b.out;
  EXPECT_TRUE(fs::exists(backup / "backup.json"));
  EXPECT_TRUE(fs::exists(backup / "secret"));
  // Nothing of the staging directory is left beside it.
  for (const auto& entry : fs::directory_iterator(root.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();
  }
  CliResult checked = RunCli({"check-data", backup.string()});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
  server.reset();

  // A restore never writes into a directory that holds anything.
  fs::path occupied = root.path() / "occupied";
  fs::create_directories(occupied);
  std::ofstream(occupied / "keep-me") << "x";
  CliResult refused = RunCli({"restore", "--from", backup.string(), "--data", occupied.string()});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("not empty"), std::string::npos) << refused.err;
  EXPECT_EQ(std::distance(fs::directory_iterator(occupied), fs::directory_iterator{}), 1);

  fs::path requeued = root.path() / "requeued";
  fs::path kept = root.path() / "kept";
  CliResult r1 = RunCli({"restore", "--from", backup.string(), "--data", requeued.string()});
  ASSERT_EQ(r1.exit_code, 0) << r1.out << r1.err;
  EXPECT_GE(json::parse(r1.out).at("requeued").to_number<int64_t>(), 3) << r1.out;
  CliResult r2 =
      RunCli({"restore", "--from", backup.string(), "--data", kept.string(), "--inflight", "keep"});
  ASSERT_EQ(r2.exit_code, 0) << r2.out << r2.err;
  EXPECT_EQ(json::parse(r2.out).at("requeued").to_number<int64_t>(), 0) << r2.out;

  // requeue: every job pushed before the backup is delivered once or was acked; the held
  // ones come first-time again (their attempt not used up).
  {
    auto again = ServeOn(requeued);
    ASSERT_TRUE(again->started()) << again->error();
    Client r(again->url(), kKey);
    std::map<std::string, int> attempts;
    std::map<std::string, int> seen = DrainReady(r, &attempts);
    for (const std::string& id : before) {
      if (seen.count(id)) continue;
      EXPECT_EQ(JobState(r, id), "acked") << id;
    }
    for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
    for (const std::string& id : acked) EXPECT_EQ(seen.count(id), 0u) << id;
    for (const auto& [id, lease] : held) {
      ASSERT_EQ(seen.count(id), 1u) << id;
      EXPECT_EQ(attempts[id], 1) << id;
    }
    for (size_t i = 1; i < sessions.size(); ++i) {
      HttpResult check = r.Check("hall", sessions[i]);
      ASSERT_EQ(check.status, 200) << check.body;
      EXPECT_EQ(check.json.at("position").to_number<int64_t>(), static_cast<int64_t>(i))
          << check.body;
    }
    HttpResult verified = r.VerifyToken(token);
    ASSERT_EQ(verified.status, 200) << verified.body;
    EXPECT_EQ(verified.json.at("valid"), true) << verified.body;
  }

  // keep: the held jobs are still leased, and the lease from before the backup acks them.
  {
    auto again = ServeOn(kept);
    ASSERT_TRUE(again->started()) << again->error();
    Client r(again->url(), kKey);
    std::map<std::string, int> seen = DrainReady(r);
    for (const std::string& id : before) {
      if (seen.count(id)) continue;
      std::string state = JobState(r, id);
      EXPECT_TRUE(state == "acked" || state == "inflight") << id << " " << state;
    }
    for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
    for (const auto& [id, lease] : held) {
      EXPECT_EQ(seen.count(id), 0u) << id;
      EXPECT_EQ(JobState(r, id), "inflight") << id;
      HttpResult ack = r.Ack("q", {lease});
      ASSERT_EQ(ack.status, 200) << ack.body;
      EXPECT_EQ(ack.json.at("results").at(0).at("ok"), true) << ack.body;
    }
    HttpResult verified = r.VerifyToken(token);
    ASSERT_EQ(verified.status, 200) << verified.body;
    EXPECT_EQ(verified.json.at("valid"), true) << verified.body;
  }
}

// The transfer reads the files the backup holds open: a compaction that deletes the snapshot
// meanwhile changes nothing of what the client reads.
TEST(EmbeddedBackupTest, AHeldSnapshotOutlivesTheCompactionThatDeletesIt) {
  TempDir root("anteroom-embedded-backup");
  ASSERT_FALSE(root.path().empty());
  fs::path data = root.path() / "data";
  auto server = ServeOn(data);
  ASSERT_TRUE(server->started()) << server->error();
  Client c(server->url(), kKey);
  for (int i = 0; i < 200; ++i)
    ASSERT_EQ(c.Push("q", json::string(std::string(500, 'x'))).status, 201);
  HttpResult taken = c.Request("POST", "/v1/admin/backups");
  ASSERT_EQ(taken.status, 201) << taken.body;
  std::string id(taken.json.at("id").as_string());
  const json::object& snap = taken.json.at("files").as_array().back().as_object();
  std::string name(snap.at("name").as_string());
  uint64_t bytes = snap.at("bytes").to_number<uint64_t>();
  ASSERT_TRUE(fs::exists(data / name));

  ASSERT_EQ(c.Push("q", 1).status, 201);
  ASSERT_EQ(::kill(server->pid(), SIGUSR1), 0);  // compact now: the backup's snapshot goes
  for (int i = 0; i < 200 && fs::exists(data / name); ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_FALSE(fs::exists(data / name)) << "the compaction did not replace the snapshot";

  std::string got;
  std::string base = "/v1/admin/backups/" + id + "/files/" + name;
  for (int i = 0; i < 100 && got.size() < bytes; ++i) {
    HttpResult r =
        c.Request("GET", base + "?offset=" + std::to_string(got.size()) + "&length=4096");
    ASSERT_EQ(r.status, 200) << r.body;
    ASSERT_FALSE(r.body.empty());
    got += r.body;
  }
  EXPECT_EQ(got.size(), bytes);
  HttpResult end = c.Request("GET", base + "?offset=" + std::to_string(bytes));
  EXPECT_EQ(end.status, 200);
  EXPECT_TRUE(end.body.empty());
  HttpResult past = c.Request("GET", base + "?offset=" + std::to_string(bytes + 1));
  EXPECT_EQ(past.status, 400) << past.body;
  HttpResult other = c.Request("GET", "/v1/admin/backups/" + id + "/files/LOCK");
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(other.json.at("error").at("code"), "unknown_backup") << other.body;

  EXPECT_EQ(c.Request("DELETE", "/v1/admin/backups/" + id).status, 200);
  HttpResult gone = c.Request("GET", base);
  EXPECT_EQ(gone.status, 404) << gone.body;
  EXPECT_EQ(gone.json.at("error").at("code"), "unknown_backup") << gone.body;
}

TEST(EmbeddedBackupTest, ABackupWithoutTheAdminKeyIsRefused) {
  TempDir root("anteroom-embedded-backup");
  ASSERT_FALSE(root.path().empty());
  auto server = ServeOn(root.path() / "data");
  ASSERT_TRUE(server->started()) << server->error();
  fs::path to = root.path() / "backup";
  CliResult b = RunCli({"backup", "--server", server->url(), "--to", to.string()});
  EXPECT_EQ(b.exit_code, 1) << b.out << b.err;
  EXPECT_NE(b.err.find("HTTP 401"), std::string::npos) << b.err;
  EXPECT_FALSE(fs::exists(to));
  CliResult wrong = RunCli({"backup", "--server", server->url(), "--to", to.string()},
                           {{"ANTEROOM_ADMIN_KEY", "not-the-key"}});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.out << wrong.err;
  EXPECT_NE(wrong.err.find("HTTP 401"), std::string::npos) << wrong.err;
  EXPECT_FALSE(fs::exists(to));
}

TEST(EmbeddedBackupTest, AServerWithoutADataDirectoryPointsToBgsave) {
  TempDir root("anteroom-embedded-backup");
  ASSERT_FALSE(root.path().empty());
  ServerProcess server({"--memory-only"}, kAdminEnv);
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url(), kKey);
  HttpResult r = c.Request("POST", "/v1/admin/backups");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find("BGSAVE"), std::string::npos) << r.body;
  fs::path to = root.path() / "backup";
  CliResult b = RunCli({"backup", "--server", server.url(), "--to", to.string()}, kAdminEnv);
  EXPECT_EQ(b.exit_code, 1) << b.out << b.err;
  EXPECT_NE(b.err.find("BGSAVE"), std::string::npos) << b.err;
  EXPECT_FALSE(fs::exists(to));
}

}  // namespace
}  // namespace anteroom::testing
