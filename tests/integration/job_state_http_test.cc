// Job state through the real server: GET /v1/queues/{q}/jobs/{id}, results at ack (and at the
// acks of a fetch), progress and per-job logs, keep_acked in the queue's settings. Bad input is
// answered 4xx and changes nothing; what was kept survives a SIGKILL of the embedded server and
// is shared by two processes on one redis-server.
#include <signal.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "anteroom/client.hpp"
#include "support/redis_process.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;

std::string PushOne(Client& c, const std::string& queue, const json::value& payload) {
  HttpResult r = c.Push(queue, payload);
  EXPECT_EQ(r.status, 201) << r.body;
  return r.status == 201 ? std::string(r.json.at("id").as_string()) : "";
}

// The one job fetched: {id, lease}.
std::pair<std::string, std::string> FetchOne(Client& c, const std::string& queue) {
  HttpResult r = c.Fetch(queue, "w", 1, 60'000);
  EXPECT_EQ(r.status, 200) << r.body;
  const json::array& jobs = r.json.at("jobs").as_array();
  EXPECT_EQ(jobs.size(), 1u) << r.body;
  if (jobs.empty()) return {};
  return {std::string(jobs[0].at("id").as_string()), std::string(jobs[0].at("lease").as_string())};
}

HttpResult Job(Client& c, const std::string& queue, const std::string& id) {
  return c.Request("GET", "/v1/queues/" + queue + "/jobs/" + id);
}

std::string Body(const json::object& o) { return json::serialize(o); }

TEST(JobStateHttpTest, BadBodiesAreRefusedAndChangeNothing) {
  ServerProcess server;
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  std::string id = PushOne(c, "q", json::object{{"n", 1}});
  auto [fetched, lease] = FetchOne(c, "q");
  ASSERT_EQ(fetched, id);
  const std::string big(70 * 1024, 'x');
  struct Bad {
    std::string path;
    std::string body;
    int status;
  };
  const std::vector<Bad> bad = {
      {"ack", Body({{"leases", json::array{lease}}, {"results", 1}}), 400},
      {"ack", Body({{"leases", json::array{lease}}, {"results", json::array{1, 2}}}), 400},
      {"ack", Body({{"leases", json::array{lease}}, {"results", json::array{big}}}), 413},
      {"ack", R"({"leases": [")" + lease + R"("], "results": [1e400]})", 400},
      {"progress", R"({"lease": ")" + lease + R"(", "progress": {"p": -1e400}})", 400},
      {"fetch",
       Body({{"worker", "w"}, {"ack", json::array{lease}}, {"ack_results", json::array{}}}), 400},
      {"fetch", Body({{"worker", "w"}, {"ack_results", json::array{1}}}), 400},
      {"progress", Body({{"progress", 1}}), 400},
      {"progress", Body({{"lease", lease}}), 400},
      {"progress", Body({{"lease", 5}, {"progress", 1}}), 400},
      {"progress", Body({{"lease", lease}, {"progress", std::string(5'000, 'p')}}), 413},
      {"log", Body({{"lease", lease}}), 400},
      {"log", Body({{"lease", lease}, {"lines", json::array{}}}), 400},
      {"log", Body({{"lease", lease}, {"lines", json::array{1}}}), 400},
      {"log", Body({{"lease", lease}, {"lines", "one"}}), 400},
      {"log", Body({{"lease", lease}, {"lines", json::array(101, "l")}}), 400},
      {"log", Body({{"lease", lease}, {"lines", json::array{big}}}), 400},
      {"settings", Body({{"keep_acked", 5}}), 400},
      {"settings", Body({{"keep_acked", {{"count", -1}}}}), 400},
      {"settings", Body({{"keep_acked", {{"age_ms", 0}}}}), 400},
      {"settings", Body({{"keep_acked", {{"count", 2'000'000}}}}), 400},
      {"settings", Body({{"keep_acked", {{"cuont", 5}}}}), 400},
  };
  for (const Bad& b : bad) {
    const char* method = b.path == "settings" ? "PUT" : "POST";
    HttpResult r = c.Request(method, "/v1/queues/q/" + b.path, b.body);
    EXPECT_EQ(r.status, b.status) << b.path << " " << b.body.substr(0, 200) << " -> " << r.body;
  }
  HttpResult job = Job(c, "q", id);
  ASSERT_EQ(job.status, 200) << job.body;
  EXPECT_EQ(job.json.at("state"), "inflight") << job.body;
  EXPECT_FALSE(job.json.as_object().contains("progress"));
  EXPECT_TRUE(job.json.at("log").as_array().empty());
  HttpResult settings = c.Request("GET", "/v1/queues/q/settings");
  EXPECT_EQ(settings.json.at("keep_acked"), (json::object{{"count", 1000}, {"age_ms", 86'400'000}}))
      << settings.body;
  EXPECT_EQ(Job(c, "q", "abc").status, 404);
  EXPECT_EQ(Job(c, "q", "0").status, 404);
  EXPECT_EQ(Job(c, "q", "999").status, 404);
  EXPECT_EQ(Job(c, "nobody", "1").status, 404);
}

TEST(JobStateHttpTest, AWorkerReportsAndAProducerReadsTheResult) {
  ServerProcess server;
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  // The payload keeps its exact text, as on a delivery.
  HttpResult pushed = c.Request("POST", "/v1/queues/q/jobs",
                                R"({"payload": {"n": 1.50, "big": 100000000000000000000001}})");
  ASSERT_EQ(pushed.status, 201);
  std::string id(pushed.json.at("id").as_string());
  EXPECT_EQ(Job(c, "q", id).json.at("state"), "ready");
  auto [fetched, lease] = FetchOne(c, "q");
  ASSERT_EQ(fetched, id);
  HttpResult p = c.Request("POST", "/v1/queues/q/progress",
                           Body({{"lease", lease}, {"progress", {{"done", 40}, {"of", 100}}}}));
  ASSERT_EQ(p.status, 200) << p.body;
  EXPECT_EQ(p.json, (json::object{{"ok", true}}));
  HttpResult l = c.Request("POST", "/v1/queues/q/log",
                           Body({{"lease", lease}, {"lines", json::array{"connected", "héllo"}}}));
  ASSERT_EQ(l.status, 200) << l.body;
  HttpResult running = Job(c, "q", id);
  ASSERT_EQ(running.status, 200);
  EXPECT_EQ(running.json.at("state"), "inflight");
  EXPECT_EQ(running.json.at("attempts"), 1);
  EXPECT_TRUE(running.json.as_object().contains("lease_expires_ms"));
  EXPECT_EQ(running.json.at("progress"), (json::object{{"done", 40}, {"of", 100}}));
  EXPECT_NE(running.body.find(R"("payload":{"n":1.50,"big":100000000000000000000001})"),
            std::string::npos)
      << running.body;

  HttpResult ack =
      c.Request("POST", "/v1/queues/q/ack",
                Body({{"leases", json::array{lease}}, {"results", json::array{{{"rows", 120}}}}}));
  ASSERT_EQ(ack.status, 200) << ack.body;
  HttpResult done = Job(c, "q", id);
  ASSERT_EQ(done.status, 200);
  EXPECT_EQ(done.json.at("state"), "acked");
  EXPECT_EQ(done.json.at("result"), (json::object{{"rows", 120}}));
  EXPECT_EQ(done.json.at("progress"), (json::object{{"done", 40}, {"of", 100}}));
  ASSERT_EQ(done.json.at("log").as_array().size(), 2u);
  EXPECT_EQ(done.json.at("log").at(1).at("line"), "héllo");
  EXPECT_TRUE(done.json.as_object().contains("finished_at_ms"));

  // A lease that is no longer current reports nothing.
  HttpResult late =
      c.Request("POST", "/v1/queues/q/progress", Body({{"lease", lease}, {"progress", 100}}));
  EXPECT_EQ(late.json, (json::object{{"ok", false}, {"code", "lease_lost"}})) << late.body;

  // The worker loop's ack-and-fetch carries a result too.
  std::string second = PushOne(c, "q", 2);
  std::string third = PushOne(c, "q", 3);
  auto [got, lease2] = FetchOne(c, "q");
  ASSERT_EQ(got, second);
  HttpResult loop = c.Request(
      "POST", "/v1/queues/q/fetch",
      Body({{"worker", "w"}, {"ack", json::array{lease2}}, {"ack_results", json::array{"sent"}}}));
  ASSERT_EQ(loop.status, 200) << loop.body;
  EXPECT_EQ(loop.json.at("acked").at(0).at("ok"), true);
  EXPECT_EQ(Job(c, "q", second).json.at("result"), "sent");
  EXPECT_EQ(Job(c, "q", third).json.at("state"), "inflight");

  // Results and progress keep their numbers as sent, as payloads do, and so do a batch's
  // callback payloads; fetch's ack_results too.
  std::string exact = PushOne(c, "q", 4);
  std::string exact2 = PushOne(c, "q", 5);
  auto [e_id, e_lease] = FetchOne(c, "q");
  ASSERT_EQ(e_id, exact);
  ASSERT_EQ(c.Request("POST", "/v1/queues/q/ack",
                      R"({"leases": [")" + e_lease + R"("], "results": [{"n": 1.50, "z": -0}]})")
                .status,
            200);
  EXPECT_NE(Job(c, "q", exact).body.find(R"("result":{"n":1.50,"z":-0})"), std::string::npos)
      << Job(c, "q", exact).body;
  auto [f_id, f_lease] = FetchOne(c, "q");
  ASSERT_EQ(f_id, exact2);
  ASSERT_EQ(c.Request("POST", "/v1/queues/q/progress",
                      R"({"lease": ")" + f_lease + R"(", "progress": [0.10, 1E3]})")
                .status,
            200);
  EXPECT_NE(Job(c, "q", exact2).body.find(R"("progress":[0.10,1E3])"), std::string::npos)
      << Job(c, "q", exact2).body;
  HttpResult rode =
      c.Request("POST", "/v1/queues/q/fetch",
                R"({"worker": "w", "ack": [")" + f_lease + R"("], "ack_results": [2.500]})");
  ASSERT_EQ(rode.status, 200) << rode.body;
  EXPECT_NE(Job(c, "q", exact2).body.find(R"("result":2.500)"), std::string::npos)
      << Job(c, "q", exact2).body;
  ASSERT_EQ(c.Request("POST", "/v1/queues/cb/batches",
                      R"({"id": "x", "on_complete": {"payload": {"t": 0.5e1}}})")
                .status,
            201);
  HttpResult sealed = c.Request("POST", "/v1/queues/cb/batches/x/seal", "{}");
  ASSERT_EQ(sealed.status, 200) << sealed.body;
  std::string callback(sealed.json.at("callbacks_pushed").at("on_complete").as_string());
  EXPECT_NE(Job(c, "cb", callback).body.find(R"("payload":{"t":0.5e1})"), std::string::npos)
      << Job(c, "cb", callback).body;

  // keep_acked: none kept from now on, and the ones kept go at once.
  ASSERT_EQ(c.Request("PUT", "/v1/queues/q/settings", R"({"keep_acked": {"count": 0}})").status,
            200);
  EXPECT_EQ(Job(c, "q", id).status, 404);
  EXPECT_EQ(Job(c, "q", second).status, 404);
}

// What a queue keeps is durable: results, progress and logs of jobs in flight and finished.
void ExpectKeptAcrossRestart(const std::vector<std::string>& args, bool kill) {
  auto server = std::make_unique<ServerProcess>(args);
  ASSERT_TRUE(server->started()) << server->error();
  std::string acked, running;
  std::string lease;
  {
    Client c(server->url());
    ASSERT_EQ(c.Request("PUT", "/v1/queues/k/settings", R"({"keep_acked": {"count": 10}})").status,
              200);
    acked = PushOne(c, "k", "a");
    running = PushOne(c, "k", "b");
    auto [a_id, a_lease] = FetchOne(c, "k");
    ASSERT_EQ(a_id, acked);
    ASSERT_EQ(c.Request("POST", "/v1/queues/k/log",
                        Body({{"lease", a_lease}, {"lines", json::array{"a1"}}}))
                  .status,
              200);
    ASSERT_EQ(c.Request("POST", "/v1/queues/k/ack",
                        Body({{"leases", json::array{a_lease}}, {"results", json::array{42}}}))
                  .status,
              200);
    auto [b_id, b_lease] = FetchOne(c, "k");
    ASSERT_EQ(b_id, running);
    lease = b_lease;
    ASSERT_EQ(
        c.Request("POST", "/v1/queues/k/progress", Body({{"lease", lease}, {"progress", 0.5}}))
            .status,
        200);
  }
  if (kill) {
    ::kill(server->pid(), SIGKILL);
    server->Stop();
    server = std::make_unique<ServerProcess>(args);
    ASSERT_TRUE(server->started()) << server->error();
  }
  Client c(server->url());
  HttpResult a = Job(c, "k", acked);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.json.at("state"), "acked");
  EXPECT_EQ(a.json.at("result"), 42);
  EXPECT_EQ(a.json.at("log").at(0).at("line"), "a1");
  HttpResult b = Job(c, "k", running);
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.json.at("state"), "inflight");
  EXPECT_EQ(b.json.at("progress"), 0.5);
  EXPECT_EQ(c.Request("GET", "/v1/queues/k/settings").json.at("keep_acked").at("count"), 10);
  HttpResult ack = c.Request("POST", "/v1/queues/k/ack",
                             Body({{"leases", json::array{lease}}, {"results", json::array{"b"}}}));
  EXPECT_EQ(ack.json.at("results").at(0).at("ok"), true) << ack.body;
  EXPECT_EQ(Job(c, "k", running).json.at("result"), "b");
}

TEST(JobStateHttpTest, WhatIsKeptSurvivesASigkillOfTheEmbeddedServer) {
  TempDir data("anteroom-job-state");
  ExpectKeptAcrossRestart({"--data", data.path().string()}, /*kill=*/true);
}

TEST(JobStateHttpTest, WhatIsKeptSurvivesASigkillOnRedis) {
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ExpectKeptAcrossRestart({"--store", redis.url()}, /*kill=*/true);
}

// A pipeline: two jobs, then one that waits on both and reads their results; bad dependency
// lists are refused and push nothing. With `kill`, the server is SIGKILLed while it waits.
void ExpectPipeline(const std::vector<std::string>& args) {
  auto server = std::make_unique<ServerProcess>(args);
  ASSERT_TRUE(server->started()) << server->error();
  std::string a, b, c;
  {
    Client c0(server->url());
    const std::vector<std::string> bad = {
        R"({"payload": 1, "depends_on": []})",
        R"({"payload": 1, "depends_on": "1"})",
        R"({"payload": 1, "depends_on": ["1", "1"]})",
        R"({"payload": 1, "depends_on": ["x"]})",
        R"({"payload": 1, "depends_on": [0]})",
        R"({"payload": 1, "depends_on": ["1"], "on_dependency_failure": "maybe"})",
    };
    for (const std::string& body : bad) {
      HttpResult r = c0.Request("POST", "/v1/queues/p/jobs", body);
      EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    }
    json::array many;
    for (int k = 1; k <= 101; ++k) many.push_back(json::value(std::to_string(k)));
    EXPECT_EQ(c0.Request("POST", "/v1/queues/p/jobs", Body({{"payload", 1}, {"depends_on", many}}))
                  .status,
              400);
    EXPECT_EQ(c0.Request("GET", "/v1/queues/p").json.at("pushed"), 0);
    a = PushOne(c0, "p", "a");
    b = PushOne(c0, "p", "b");
    HttpResult r = c0.Request("POST", "/v1/queues/p/jobs",
                              Body({{"payload", "c"}, {"depends_on", json::array{a, b}}}));
    ASSERT_EQ(r.status, 201) << r.body;
    c = std::string(r.json.at("id").as_string());
    HttpResult waiting = Job(c0, "p", c);
    EXPECT_EQ(waiting.json.at("state"), "waiting_deps") << waiting.body;
    EXPECT_EQ(waiting.json.at("waiting_on"), 2);
    EXPECT_EQ(c0.Request("GET", "/v1/queues/p").json.at("waiting_deps"), 1);
  }
  ::kill(server->pid(), SIGKILL);
  server->Stop();
  server = std::make_unique<ServerProcess>(args);
  ASSERT_TRUE(server->started()) << server->error();
  Client cl(server->url());
  HttpResult got = cl.Fetch("p", "w", 10, 60'000);
  ASSERT_EQ(got.json.at("jobs").as_array().size(), 2u) << got.body;
  for (const auto& j : got.json.at("jobs").as_array()) {
    json::value result = j.at("payload");  // each job's result: its own payload
    ASSERT_EQ(
        cl.Request("POST", "/v1/queues/p/ack",
                   Body({{"leases", json::array{j.at("lease")}}, {"results", json::array{result}}}))
            .status,
        200);
  }
  auto [id, lease] = FetchOne(cl, "p");
  EXPECT_EQ(id, c);
  HttpResult deps = cl.Request("GET", "/v1/queues/p/jobs/" + c + "/dependencies");
  ASSERT_EQ(deps.status, 200) << deps.body;
  EXPECT_EQ(deps.json,
            (json::object{
                {"dependencies", json::array{{{"id", a}, {"state", "acked"}, {"result", "a"}},
                                             {{"id", b}, {"state", "acked"}, {"result", "b"}}}}}))
      << deps.body;
  EXPECT_EQ(cl.Request("GET", "/v1/queues/p/jobs/999/dependencies").status, 404);
}

TEST(JobStateHttpTest, APipelineWaitsAcrossASigkillOfTheEmbeddedServer) {
  TempDir data("anteroom-pipeline");
  ExpectPipeline({"--data", data.path().string()});
}

TEST(JobStateHttpTest, APipelineWaitsAcrossASigkillOnRedis) {
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ExpectPipeline({"--store", redis.url()});
}

// A batch with callbacks through the real server, the server SIGKILLed between its jobs: bad
// bodies are refused, and after the restart the batch settles and each callback is pushed once.
void ExpectBatchSettlesOnce(const std::vector<std::string>& args) {
  auto server = std::make_unique<ServerProcess>(args);
  ASSERT_TRUE(server->started()) << server->error();
  {
    Client c(server->url());
    const std::vector<std::string> bad = {
        R"({"id": "bad id!"})",
        R"({"on_success": 5})",
        R"({"on_success": {"payload": 1, "depends_on": ["1"]}})",
        R"({"on_dead": {"priority": 1}})",
        R"({"on_sucess": {"payload": 1}})",
    };
    for (const std::string& body : bad) {
      HttpResult r = c.Request("POST", "/v1/queues/bq/batches", body);
      EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    }
    HttpResult made = c.Request(
        "POST", "/v1/queues/bq/batches",
        R"({"id": "import", "on_success": {"payload": {"all": "ok"}}, "on_complete": {"payload": "done"}})");
    ASSERT_EQ(made.status, 201) << made.body;
    EXPECT_EQ(made.json.at("sealed"), false);
    EXPECT_EQ(c.Request("POST", "/v1/queues/bq/batches", R"({"id": "import"})").status, 409);
    HttpResult unknown =
        c.Request("POST", "/v1/queues/bq/jobs", R"({"payload": 1, "batch": "nope"})");
    EXPECT_EQ(unknown.status, 404) << unknown.body;
    EXPECT_EQ(unknown.json.at("error").at("code"), "unknown_batch");
    HttpResult pushed = c.Request(
        "POST", "/v1/queues/bq/jobs",
        R"({"jobs": [{"payload": 1, "batch": "import"}, {"payload": 2, "batch": "import"}]})");
    ASSERT_EQ(pushed.status, 201) << pushed.body;
    HttpResult sealed = c.Request("POST", "/v1/queues/bq/batches/import/seal");
    ASSERT_EQ(sealed.status, 200) << sealed.body;
    EXPECT_EQ(sealed.json.at("pending"), 2);
    EXPECT_EQ(
        c.Request("POST", "/v1/queues/bq/jobs", R"({"payload": 3, "batch": "import"})").status,
        409);
    auto [id, lease] = FetchOne(c, "bq");
    ASSERT_EQ(c.Request("POST", "/v1/queues/bq/ack", Body({{"leases", json::array{lease}}})).status,
              200);
  }
  ::kill(server->pid(), SIGKILL);
  server->Stop();
  server = std::make_unique<ServerProcess>(args);
  ASSERT_TRUE(server->started()) << server->error();
  Client c(server->url());
  HttpResult before = c.Request("GET", "/v1/queues/bq/batches/import");
  ASSERT_EQ(before.status, 200) << before.body;
  EXPECT_EQ(before.json.at("acked"), 1);
  EXPECT_EQ(before.json.at("pending"), 1);
  auto [id, lease] = FetchOne(c, "bq");
  ASSERT_EQ(c.Request("POST", "/v1/queues/bq/ack", Body({{"leases", json::array{lease}}})).status,
            200);
  HttpResult after = c.Request("GET", "/v1/queues/bq/batches/import");
  EXPECT_EQ(after.json.at("settled"), true) << after.body;
  EXPECT_TRUE(after.json.at("callbacks_pushed").as_object().contains("on_success"));
  HttpResult callbacks = c.Fetch("bq", "w", 10, 60'000);
  ASSERT_EQ(callbacks.json.at("jobs").as_array().size(), 2u) << callbacks.body;
  EXPECT_EQ(callbacks.json.at("jobs").at(0).at("payload"), "done");
  EXPECT_EQ(callbacks.json.at("jobs").at(1).at("payload"), (json::object{{"all", "ok"}}));
  EXPECT_EQ(c.Request("GET", "/v1/queues/bq/batches/nope").status, 404);
}

TEST(JobStateHttpTest, ABatchSettlesOnceAcrossASigkillOfTheEmbeddedServer) {
  TempDir data("anteroom-batch");
  ExpectBatchSettlesOnce({"--data", data.path().string()});
}

TEST(JobStateHttpTest, ABatchSettlesOnceAcrossASigkillOnRedis) {
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ExpectBatchSettlesOnce({"--store", redis.url()});
}

}  // namespace
}  // namespace anteroom::testing
