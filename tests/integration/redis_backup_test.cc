// The Redis backend's backup, the documented way (docs/operations.md, "Back up and restore"):
// BGSAVE while anteroom keeps pushing and acking, the dump copied once LASTSAVE moved, a fresh
// redis-server started on the copy, anteroom started on that. Every job pushed (answered 201)
// before the BGSAVE was sent is there exactly once, acked ones are not delivered again, the
// room's line is in the same order, and a token minted before verifies. The embedded backend's
// backup route answers 409 here, pointing to BGSAVE.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "support/redis_process.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string Field(const std::string& info, const std::string& key) {
  size_t at = info.find(key + ":");
  if (at == std::string::npos) return "";
  size_t end = info.find_first_of("\r\n", at);
  return info.substr(at + key.size() + 1, end - at - key.size() - 1);
}

TEST(RedisBackupTest, ABgsaveUnderLoadRestoresIntoAFreshRedis) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess live;
  ASSERT_TRUE(live.Start()) << live.error();
  auto server = std::make_unique<ServerProcess>(std::vector<std::string>{"--store", live.url()},
                                                EnvVars{}, seconds(20));
  ASSERT_TRUE(server->started()) << server->error();
  Client c(server->url());

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

  // Jobs: 50 acked before, then a producer and a worker running through the backup.
  // Every acked job kept, so that a job not delivered after the restore is looked up as acked
  // (or in flight) rather than gone.
  ASSERT_EQ(c.Request("PUT", "/v1/queues/q/settings", R"({"keep_acked": {"count": 1000000}})")
                .status,
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
  std::mutex mu;
  std::set<std::string> pushed;  // answered 201
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    Client p(server->url());
    for (int i = 0; i < 20'000 && !stop; ++i) {
      HttpResult r = p.Push("q", 1000 + i);
      if (r.status != 201) continue;
      std::lock_guard lock(mu);
      pushed.emplace(r.json.at("id").as_string());
    }
  });
  std::thread worker([&] {  // fetches and acks; what it acks after the backup point comes back
    Client w(server->url());
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
  std::string last = live.Command({"LASTSAVE"});
  ASSERT_NE(live.Command({"BGSAVE"}).find("Background saving started"), std::string::npos);
  std::string info;
  for (int i = 0; i < 200; ++i) {
    info = live.Command({"INFO", "persistence"});
    if (Field(info, "rdb_bgsave_in_progress") == "0" && live.Command({"LASTSAVE"}) != last) break;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_EQ(Field(info, "rdb_last_bgsave_status"), "ok") << info;
  std::this_thread::sleep_for(milliseconds(200));  // the load goes on after the backup point
  stop = true;
  producer.join();
  worker.join();
  ASSERT_GE(before.size(), 10u) << "the producer was running when the backup was taken";

  TempDir copy("anteroom-redis-backup");
  std::filesystem::copy_file(live.dir() / "dump.rdb", copy.path() / "dump.rdb");
  server.reset();
  live.Stop();

  RedisProcess restored;
  ASSERT_TRUE(restored.Start({"--dir", copy.path().string(), "--dbfilename", "dump.rdb"}))
      << restored.error();
  auto again = std::make_unique<ServerProcess>(std::vector<std::string>{"--store", restored.url()},
                                               EnvVars{}, seconds(20));
  ASSERT_TRUE(again->started()) << again->error();
  Client r(again->url());

  // Every job answered 201 before the BGSAVE was sent is there, once; none acked before it is.
  std::map<std::string, int> seen;
  for (int i = 0; i < 2'000; ++i) {
    HttpResult f = r.Fetch("q", "restore", 100);
    ASSERT_EQ(f.status, 200) << f.body;
    const json::array& jobs = f.json.at("jobs").as_array();
    if (jobs.empty()) break;
    std::vector<std::string> leases;
    for (const json::value& j : jobs) {
      ++seen[std::string(j.at("id").as_string())];
      leases.emplace_back(j.at("lease").as_string());
    }
    ASSERT_EQ(r.Ack("q", leases).status, 200);
  }
  // Acked at the backup, or in flight (leased to w2: they come back when their lease runs out,
  // 30 s by default): looked up rather than fetched.
  for (const std::string& id : before) {
    if (seen.count(id)) continue;
    HttpResult job = r.Request("GET", "/v1/queues/q/jobs/" + id);
    ASSERT_EQ(job.status, 200) << id << ": " << job.body;
    std::string state(job.json.at("state").as_string());
    EXPECT_TRUE(state == "inflight" || state == "acked") << id << " " << state;
  }
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
  for (const std::string& id : acked) EXPECT_EQ(seen.count(id), 0u) << id;

  // The line, in order; the token minted before verifies.
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

// `anteroom backup` is the embedded backend's: on Redis the route says to use BGSAVE instead.
TEST(RedisBackupTest, TheEmbeddedBackupRoutePointsToBgsave) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess live;
  ASSERT_TRUE(live.Start()) << live.error();
  ServerProcess server({"--store", live.url()}, EnvVars{{"ANTEROOM_ADMIN_KEY", "k"}}, seconds(20));
  ASSERT_TRUE(server.started()) << server.error();
  HttpResult r = Client(server.url(), "k").Request("POST", "/v1/admin/backups");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(r.json.at("error").at("code"), "conflict") << r.body;
  EXPECT_NE(r.body.find("BGSAVE"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace anteroom::testing
