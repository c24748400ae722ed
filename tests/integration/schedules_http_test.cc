// Schedules of repeatable jobs through the real server: the routes (bad input answered 400 and
// changing nothing, 404, 409), runs firing in real time, and exactly-once runs across SIGKILLs:
// the embedded backend restarted on its data directory, and three processes sharing one
// redis-server killed and restarted at random (seeded) moments, all of them down for a while.
// After each, every nominal time from the schedule's creation to its latest run was pushed
// exactly once: runs == (latest - first) / period + 1 == jobs pushed to its queue == jobs
// fetched.
#include <signal.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
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

constexpr int64_t kPeriodMs = 1000;  // the shortest interval a schedule may have

std::string EverySchedule(const std::string& queue, int64_t every_ms) {
  return json::serialize(json::object{{"queue", queue},
                                      {"every_ms", every_ms},
                                      {"misfire", "run_all"},
                                      {"max_catchup", 1000},
                                      {"job", json::object{{"payload", json::object{{"k", 1}}}}}});
}

int64_t Int(const json::value& v, std::string_view key) {
  return v.as_object().at(key).to_number<int64_t>();
}

// Fetches (and acks) every ready job of `queue`; answers how many came, each id once.
int64_t DrainCount(Client& c, const std::string& queue) {
  std::set<std::string> ids;
  for (int round = 0; round < 1000; ++round) {
    HttpResult r = c.Fetch(queue, "drain", 100, 60'000);
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) break;
    const json::array& jobs = r.json.as_object().at("jobs").as_array();
    if (jobs.empty()) break;
    json::array leases;
    for (const auto& j : jobs) {
      EXPECT_TRUE(ids.insert(std::string(j.at("id").as_string())).second) << "delivered twice";
      leases.push_back(j.at("lease"));
    }
    EXPECT_EQ(c.Request("POST", "/v1/queues/" + queue + "/ack",
                        json::serialize(json::object{{"leases", leases}}))
                  .status,
              200);
  }
  return static_cast<int64_t>(ids.size());
}

// Every nominal time from the schedule's first to its latest run was pushed once. Pauses it.
void ExpectEveryRunOnce(Client& c, const std::string& id, const std::string& queue,
                        int64_t min_runs) {
  // Paused first, so that nothing more fires while the counts are read.
  HttpResult s = c.Request("POST", "/v1/schedules/" + id + "/pause");
  ASSERT_EQ(s.status, 200) << s.body;
  const int64_t runs = Int(s.json, "runs");
  const int64_t first = Int(s.json, "created_at_ms");
  const int64_t last = Int(s.json, "last_run_at_ms");
  EXPECT_GE(runs, min_runs);
  EXPECT_EQ((last - first) % kPeriodMs, 0);
  EXPECT_EQ(runs, (last - first) / kPeriodMs + 1) << s.body;
  HttpResult q = c.Request("GET", "/v1/queues/" + queue);
  ASSERT_EQ(q.status, 200) << q.body;
  EXPECT_EQ(Int(q.json, "pushed"), runs) << q.body;
  EXPECT_EQ(DrainCount(c, queue), runs);
}

TEST(SchedulesHttpTest, BadBodiesAreRefusedAndChangeNothing) {
  ServerProcess server;
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  const std::string job = R"("job": {"payload": 1})";
  const std::vector<std::string> bad = {
      "{}",
      R"({"queue": "q", "every_ms": 1000})",
      R"({"queue": "q", )" + job + "}",
      R"({"queue": "q", "every_ms": 1000, "cron": "* * * * *", )" + job + "}",
      R"({"queue": "q", "every_ms": 1000, "tz": "UTC", )" + job + "}",
      R"({"queue": "q", "every_ms": 5, )" + job + "}",
      R"({"queue": "q", "cron": "61 * * * *", )" + job + "}",
      R"({"queue": "q", "cron": "0 0 30 2 *", )" + job + "}",
      R"({"queue": "q", "cron": "* * * * *", "tz": "Mars/Olympus", )" + job + "}",
      R"({"queue": "q", "cron": "* * * * *", "overlap": "maybe", )" + job + "}",
      R"({"queue": "q", "cron": "* * * * *", "misfire": "later", )" + job + "}",
      R"({"queue": "q", "cron": "* * * * *", "max_catchup": 0, )" + job + "}",
      R"({"queue": "q", "cron": "* * * * *", "jitter_ms": -1, )" + job + "}",
      R"({"queue": "q", "cron": "* * * * *", "start_at": "2030-01-01T00:00:00Z",
          "end_at": "2029-01-01T00:00:00Z", )" +
          job + "}",
      R"({"queue": "q", "cron": "* * * * *", "shedule": 1, )" + job + "}",
      R"({"queue": "q", "cron": "* * * * *", "job": {"payload": 1, "priorty": 2}})",
      R"({"queue": "q", "cron": "* * * * *", "job": {"payload": 1e400}})",
      R"({"queue": "bad name!", "cron": "* * * * *", )" + job + "}",
  };
  for (const std::string& body : bad) {
    HttpResult r = c.Request("PUT", "/v1/schedules/s", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_EQ(r.json.as_object().at("error").as_object().at("code"), "invalid_argument") << r.body;
  }
  HttpResult list = c.Request("GET", "/v1/schedules");
  ASSERT_EQ(list.status, 200);
  EXPECT_TRUE(list.json.at("schedules").as_array().empty());
  EXPECT_EQ(c.Request("GET", "/v1/queues").json.at("queues").as_array().size(), 0u);
  HttpResult bad_id = c.Request("PUT", "/v1/schedules/no%20spaces", EverySchedule("q", 1000));
  EXPECT_EQ(bad_id.status, 400) << bad_id.body;
}

TEST(SchedulesHttpTest, PutReadListPauseDelete) {
  ServerProcess server;
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  HttpResult put = c.Request("PUT", "/v1/schedules/daily", R"({"queue": "reports",
      "cron": "30 2 * * *", "tz": "Europe/Berlin", "start_at": "2026-03-27T00:00:00Z",
      "overlap": "skip", "misfire": "run_once", "misfire_grace_ms": 60000, "jitter_ms": 1000,
      "job": {"payload": {"report": "daily", "n": 100000000000000000000001}, "priority": 3,
              "group": "acme", "max_attempts": 2}})");
  ASSERT_EQ(put.status, 200) << put.body;
  const json::object& s = put.json.as_object();
  EXPECT_EQ(s.at("id"), "daily");
  EXPECT_EQ(s.at("queue"), "reports");
  EXPECT_EQ(s.at("cron"), "30 2 * * *");
  EXPECT_EQ(s.at("tz"), "Europe/Berlin");
  EXPECT_EQ(s.at("overlap"), "skip");
  EXPECT_EQ(s.at("misfire"), "run_once");
  EXPECT_EQ(s.at("runs"), 0);
  EXPECT_EQ(s.at("paused"), false);
  EXPECT_EQ(s.at("job").at("priority"), 3);
  EXPECT_EQ(s.at("job").at("group"), "acme");
  ASSERT_EQ(s.at("next_fire_times").as_array().size(), 5u);
  // 02:30 in Berlin: 00:30 or 01:30 UTC by the season (today's date decides which).
  for (const auto& t : s.at("next_fire_times").as_array()) {
    std::string text(t.as_string());
    EXPECT_TRUE(text.ends_with("T00:30:00.000Z") || text.ends_with("T01:30:00.000Z")) << text;
  }
  EXPECT_EQ(c.Request("GET", "/v1/schedules/daily").json.at("id"), "daily");
  EXPECT_EQ(c.Request("GET", "/v1/schedules").json.at("schedules").as_array().size(), 1u);

  HttpResult moved = c.Request("PUT", "/v1/schedules/daily", EverySchedule("other", 1000));
  EXPECT_EQ(moved.status, 409) << moved.body;

  HttpResult paused = c.Request("POST", "/v1/schedules/daily/pause");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(paused.json.at("paused"), true);
  HttpResult resumed = c.Request("POST", "/v1/schedules/daily/resume");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(resumed.json.at("paused"), false);

  HttpResult gone = c.Request("DELETE", "/v1/schedules/daily");
  ASSERT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(gone.json.at("deleted"), true);
  for (auto [method, path] :
       {std::pair{"GET", "/v1/schedules/daily"}, std::pair{"DELETE", "/v1/schedules/daily"},
        std::pair{"POST", "/v1/schedules/daily/pause"}}) {
    HttpResult r = c.Request(method, path);
    EXPECT_EQ(r.status, 404) << method << " " << path;
    EXPECT_EQ(r.json.at("error").at("code"), "unknown_schedule") << r.body;
  }
}

TEST(SchedulesHttpTest, RunsFireInRealTime) {
  ServerProcess server;
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  // The job's payload is pushed as sent, numbers and all.
  ASSERT_EQ(c.Request("PUT", "/v1/schedules/tick",
                      R"({"queue": "ticks", "every_ms": 1000, "misfire": "run_all",)"
                      R"( "job": {"payload": {"k": 1, "f": 1.50}}})")
                .status,
            200);
  // The first run is at creation, then one a second: three within 2.5 s.
  int64_t runs = 0;
  for (int k = 0; k < 50 && runs < 3; ++k) {
    std::this_thread::sleep_for(milliseconds(100));
    runs = Int(c.Request("GET", "/v1/schedules/tick").json, "runs");
  }
  EXPECT_GE(runs, 3);
  HttpResult fetched = c.Fetch("ticks", "w", 10);
  ASSERT_EQ(fetched.status, 200);
  EXPECT_GE(fetched.json.at("jobs").as_array().size(), 3u);
  EXPECT_NE(fetched.body.find(R"("payload":{"k":1,"f":1.50})"), std::string::npos) << fetched.body;
}

TEST(SchedulesHttpTest, EveryRunOnceAcrossSigkillsOfTheEmbeddedServer) {
  TempDir data("anteroom-schedules-crash");
  std::vector<std::string> args = {"--data", data.path().string()};
  auto server = std::make_unique<ServerProcess>(args);
  ASSERT_TRUE(server->started()) << server->error();
  {
    Client c(server->url());
    ASSERT_EQ(c.Request("PUT", "/v1/schedules/s", EverySchedule("q", kPeriodMs)).status, 200);
  }
  std::mt19937 rng(7);
  for (int kill = 0; kill < 4; ++kill) {
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution(300, 1200)(rng)));
    ::kill(server->pid(), SIGKILL);
    server->Stop();
    // Down for a while: the runs missed are caught up (run_all) after the restart.
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution(0, 1200)(rng)));
    server = std::make_unique<ServerProcess>(args);
    ASSERT_TRUE(server->started()) << server->error();
  }
  std::this_thread::sleep_for(milliseconds(700));
  Client c(server->url());
  ExpectEveryRunOnce(c, "s", "q", 5);
}

TEST(SchedulesHttpTest, EveryRunOnceWithThreeProcessesOnRedisKilledAtRandom) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  const std::vector<std::string> args = {"--store", redis.url()};
  std::vector<std::unique_ptr<ServerProcess>> servers;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<ServerProcess>(args, EnvVars{}, seconds(20)));
    ASSERT_TRUE(servers.back()->started()) << servers.back()->error();
  }
  {
    Client c(servers[0]->url());
    for (const char* id : {"a", "b", "c"}) {
      HttpResult r = c.Request("PUT", std::string("/v1/schedules/") + id,
                               EverySchedule(std::string("q-") + id, kPeriodMs));
      ASSERT_EQ(r.status, 200) << r.body;
    }
  }
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937 rng(seed);
  for (int round = 0; round < 10; ++round) {
    std::this_thread::sleep_for(milliseconds(std::uniform_int_distribution(200, 900)(rng)));
    if (round == 5) {
      // Everyone down at once: the runs missed meanwhile are caught up, once.
      for (auto& s : servers) ::kill(s->pid(), SIGKILL);
      for (auto& s : servers) s->Stop();
      std::this_thread::sleep_for(milliseconds(1'500));
      for (auto& s : servers) {
        s = std::make_unique<ServerProcess>(args, EnvVars{}, seconds(20));
        ASSERT_TRUE(s->started()) << s->error();
      }
      continue;
    }
    auto& victim = servers[std::uniform_int_distribution(0, 2)(rng)];
    ::kill(victim->pid(), SIGKILL);
    victim->Stop();
    victim = std::make_unique<ServerProcess>(args, EnvVars{}, seconds(20));
    ASSERT_TRUE(victim->started()) << victim->error();
  }
  std::this_thread::sleep_for(milliseconds(700));
  Client c(servers[1]->url());
  for (const char* id : {"a", "b", "c"}) {
    SCOPED_TRACE(id);
    ExpectEveryRunOnce(c, id, std::string("q-") + id, 8);
  }
}

}  // namespace
}  // namespace anteroom::testing
