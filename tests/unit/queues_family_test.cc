// The queue family's handlers in process: push, fetch, ack/nack/extend, workers, dead letters
// and the admin routes, dispatched through the router over a memory backend.
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/wire_errors.h"
#include "family_world.h"
#include "support/payload_checks.h"

namespace anteroom::server {
namespace {

using ::anteroom::testing::ExactPayloads;
using ::anteroom::testing::PayloadText;
using http::verb;
using testing::ErrorCode;
using testing::ErrorMessage;
using testing::FamilyWorld;
using testing::Json;

TEST(QueuesFamilyTest, PushFetchAck) {
  FamilyWorld w;
  Response pushed = w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": {"n": 1}})");
  ASSERT_EQ(pushed.status, 201u) << pushed.body;
  std::string id(Json(pushed).at("id").as_string());

  Response fetched = w.Call(verb::post, "/v1/queues/q/fetch", R"({"worker": "w1"})");
  ASSERT_EQ(fetched.status, 200u) << fetched.body;
  boost::json::value job = Json(fetched).at("jobs").as_array().at(0);
  EXPECT_EQ(job.at("id").as_string(), id);
  EXPECT_EQ(job.at("payload").at("n").as_int64(), 1);
  EXPECT_EQ(job.at("attempt").as_int64(), 1);
  std::string lease(job.at("lease").as_string());

  Response acked = w.Call(verb::post, "/v1/queues/q/ack", R"({"leases": [")" + lease + R"("]})");
  ASSERT_EQ(acked.status, 200u) << acked.body;
  EXPECT_TRUE(Json(acked).at("results").as_array().at(0).at("ok").as_bool());

  Response again = w.Call(verb::post, "/v1/queues/q/ack", R"({"leases": [")" + lease + R"("]})");
  EXPECT_TRUE(Json(again).at("results").as_array().at(0).at("ok").as_bool()) << "acks repeat";
  Response forged =
      w.Call(verb::post, "/v1/queues/q/ack", R"({"leases": ["1.1.AAAAAAAAAAAAAAAA"]})");
  EXPECT_EQ(Json(forged).at("results").as_array().at(0).at("code").as_string(), "invalid_lease");

  Response stats = w.Call(verb::get, "/v1/queues/q");
  EXPECT_EQ(Json(stats).at("acked").as_int64(), 1);
  Response list = w.Call(verb::get, "/v1/queues");
  EXPECT_EQ(Json(list).at("queues").as_array().size(), 1u);
}

TEST(QueuesFamilyTest, BatchesAndDedupe) {
  FamilyWorld w;
  Response batch = w.Call(verb::post, "/v1/queues/q/jobs",
                          R"({"jobs": [{"payload": 1}, {"payload": 2, "dedupe_key": "d"}]})");
  ASSERT_EQ(batch.status, 201u) << batch.body;
  EXPECT_EQ(Json(batch).at("ids").as_array().size(), 2u);
  Response dup = w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": 3, "dedupe_key": "d"})");
  EXPECT_EQ(dup.status, 200u) << "a dedupe hit creates nothing";

  Response bad = w.Call(verb::post, "/v1/queues/q/jobs", R"({"jobs": [{"payload": 1}, {}]})");
  EXPECT_EQ(bad.status, 400u);
  EXPECT_EQ(ErrorMessage(bad), wire::JobAt(1, wire::FieldRequired("payload")));
  Response one = w.Call(verb::post, "/v1/queues/q/jobs", R"({"priority": 1})");
  EXPECT_EQ(ErrorMessage(one), wire::FieldRequired("payload")) << "one job: no index";
  Response none = w.Call(verb::post, "/v1/queues/q/jobs", R"({"jobs": []})");
  EXPECT_EQ(ErrorMessage(none), wire::kJobsCount);
}

TEST(QueuesFamilyTest, RequestsRefusedBeforeTheBackend) {
  FamilyWorld w;
  Response name = w.Call(verb::post, "/v1/queues/a%20b/jobs", R"({"payload": 1})");
  EXPECT_EQ(name.status, 400u);
  EXPECT_EQ(ErrorMessage(name), wire::BadPathName(wire::kQueueNames));
  Response json = w.Call(verb::post, "/v1/queues/q/fetch", "{");
  EXPECT_EQ(ErrorCode(json), "invalid_json");
  Response worker = w.Call(verb::post, "/v1/queues/q/fetch", "{}");
  EXPECT_EQ(ErrorMessage(worker), wire::FieldRequired("worker"));
  Response leases = w.Call(verb::post, "/v1/queues/q/ack", R"({"leases": []})");
  EXPECT_EQ(ErrorMessage(leases), wire::LeasesCount("leases", 1));
  Response heartbeat = w.Call(verb::post, "/v1/queues/q/workers/w%20x/heartbeat", "{}");
  EXPECT_EQ(ErrorMessage(heartbeat), wire::BadPathName(wire::kWorkerNames));
  Response inflight = w.Call(verb::get, "/v1/queues/q/inflight?worker=a%20b");
  EXPECT_EQ(ErrorMessage(inflight), wire::BadNameField("worker"));
  Response dead = w.Call(verb::get, "/v1/queues/q/dead?limit=0");
  EXPECT_EQ(ErrorMessage(dead), wire::kDeadLimit);
  EXPECT_EQ(w.Call(verb::get, "/v1/queues").body, R"({"queues":[]})") << "nothing was created";
}

TEST(QueuesFamilyTest, NackToDeathThenRequeue) {
  FamilyWorld w;
  ASSERT_EQ(
      w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": "x", "max_attempts": 1})").status,
      201u);
  Response fetched = w.Call(verb::post, "/v1/queues/q/fetch", R"({"worker": "w"})");
  std::string lease(Json(fetched).at("jobs").as_array().at(0).at("lease").as_string());
  Response nacked = w.Call(verb::post, "/v1/queues/q/nack",
                           R"({"leases": [")" + lease + R"("], "error": "boom"})");
  ASSERT_EQ(nacked.status, 200u) << nacked.body;
  Response dead = w.Call(verb::get, "/v1/queues/q/dead");
  boost::json::array jobs = Json(dead).at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 1u) << dead.body;
  EXPECT_EQ(jobs.at(0).at("error").as_string(), "boom");
  EXPECT_EQ(w.Call(verb::post, "/v1/queues/q/dead/requeue", "").status, 401u);
  Response requeued = w.Admin(verb::post, "/v1/queues/q/dead/requeue", "");
  EXPECT_EQ(Json(requeued).at("count").as_int64(), 1);
}

TEST(QueuesFamilyTest, ExtendHeartbeatInflightCancel) {
  FamilyWorld w;
  Response pushed = w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": 1})");
  std::string id(Json(pushed).at("id").as_string());
  EXPECT_EQ(w.Call(verb::post, "/v1/queues/q/workers/w/heartbeat", R"({"ttl_ms": 5000})").status,
            200u);
  Response fetched =
      w.Call(verb::post, "/v1/queues/q/fetch", R"({"worker": "w", "lease_ms": 1000})");
  std::string lease(Json(fetched).at("jobs").as_array().at(0).at("lease").as_string());
  Response extended = w.Call(verb::post, "/v1/queues/q/extend",
                             R"({"leases": [")" + lease + R"("], "lease_ms": 60000})");
  EXPECT_TRUE(Json(extended).at("results").as_array().at(0).at("ok").as_bool()) << extended.body;
  Response inflight = w.Call(verb::get, "/v1/queues/q/inflight?worker=w");
  EXPECT_EQ(Json(inflight).at("jobs").as_array().size(), 1u);

  Response busy = w.Admin(verb::delete_, "/v1/queues/q/jobs/" + id);
  EXPECT_EQ(busy.status, 409u);
  EXPECT_EQ(ErrorMessage(busy), wire::kJobInFlight);
  Response unknown = w.Admin(verb::delete_, "/v1/queues/q/jobs/nope");
  EXPECT_EQ(ErrorCode(unknown), "unknown_job");
  Response released = w.Admin(verb::post, "/v1/queues/q/workers/w/release");
  EXPECT_EQ(Json(released).at("count").as_int64(), 1);
  EXPECT_EQ(Json(w.Admin(verb::delete_, "/v1/queues/q/jobs/" + id)).at("count").as_int64(), 1);
}

TEST(QueuesFamilyTest, PauseAndResumeAreAdminRoutes) {
  FamilyWorld w;
  ASSERT_EQ(w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": 1})").status, 201u);
  EXPECT_EQ(w.Call(verb::post, "/v1/queues/q/pause").status, 401u);
  Response paused = w.Admin(verb::post, "/v1/queues/q/pause");
  EXPECT_TRUE(Json(paused).at("paused").as_bool()) << paused.body;
  Response fetched = w.Call(verb::post, "/v1/queues/q/fetch", R"({"worker": "w"})");
  EXPECT_TRUE(Json(fetched).at("jobs").as_array().empty()) << "a paused queue hands out nothing";
  EXPECT_FALSE(Json(w.Admin(verb::post, "/v1/queues/q/resume")).at("paused").as_bool());
}

TEST(QueuesFamilyTest, ALongPollParksUntilAJobComes) {
  FamilyWorld w;
  auto parked = w.Dispatch(verb::post, "/v1/queues/q/fetch", R"({"worker": "w", "wait_ms": 5000})");
  EXPECT_FALSE(parked->has_value()) << "parked";
  EXPECT_EQ(w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": 1})").status, 201u);
  w.backend().RunDue();
  ASSERT_TRUE(parked->has_value()) << "answered when the job came";
  EXPECT_EQ(Json(**parked).at("jobs").as_array().size(), 1u) << (*parked)->body;
}

// Payloads sent, and the text stored and returned for them: numbers byte for byte, whitespace
// gone, strings as boost::json::serialize writes them.
// ExactPayloads() and more.
const std::vector<std::pair<std::string, std::string>> kPayloads = [] {
  std::vector<std::pair<std::string, std::string>> out = ExactPayloads();
  out.insert(out.end(), {
                            {"1e-400", "1e-400"},
                            {"18446744073709551616", "18446744073709551616"},
                            {R"({ "a" : [ 1.50 , -0 , {"b": 2e0} ], "s": "\u00e9\/" })",
                             "{\"a\":[1.50,-0,{\"b\":2e0}],\"s\":\"\xc3\xa9/\"}"},
                            {R"({"a": 1.0, "b": 2, "a": 3.0})",
                             R"({"a":3.0,"b":2})"},  // as parse: the last a, first place
                            {R"({"n": 0, "d": "2024-01-02"})", R"({"n":0,"d":"2024-01-02"})"},
                            {R"([1, "x", true, null])", R"([1,"x",true,null])"},
                        });
  return out;
}();

TEST(QueuesFamilyTest, PayloadsComeBackAsSent) {
  FamilyWorld w;
  for (const auto& [sent, stored] : kPayloads) {
    Response pushed = w.Call(verb::post, "/v1/queues/one/jobs", R"({"payload": )" + sent + "}");
    ASSERT_EQ(pushed.status, 201u) << sent << ": " << pushed.body;
    Response fetched = w.Call(verb::post, "/v1/queues/one/fetch", R"({"worker": "w"})");
    ASSERT_EQ(fetched.status, 200u) << fetched.body;
    EXPECT_EQ(PayloadText(fetched.body), stored) << "sent " << sent;
    EXPECT_TRUE(Json(fetched).is_object()) << "not JSON: " << fetched.body;
  }
  // A batch: each job's own text, in order (a repeated "payload": the last).
  std::string batch = R"({"jobs": [)";
  for (size_t i = 0; i < kPayloads.size(); ++i) {
    batch += (i ? ", " : "") + std::string(R"({"payload": "replaced", "payload": )") +
             kPayloads[i].first + R"(, "priority": 0})";
  }
  batch += "]}";
  Response pushed = w.Call(verb::post, "/v1/queues/many/jobs", batch);
  ASSERT_EQ(pushed.status, 201u) << pushed.body;
  Response fetched = w.Call(verb::post, "/v1/queues/many/fetch", R"({"worker": "w", "max": 100})");
  ASSERT_EQ(Json(fetched).at("jobs").as_array().size(), kPayloads.size()) << fetched.body;
  for (size_t i = 0; i < kPayloads.size(); ++i) {
    EXPECT_EQ(PayloadText(fetched.body, i), kPayloads[i].second) << "job " << i;
  }
}

TEST(QueuesFamilyTest, DeadLettersKeepThePayloadText) {
  FamilyWorld w;
  ASSERT_EQ(
      w.Call(verb::post, "/v1/queues/q/jobs",
             R"({"payload": {"x": 1.10, "big": 100000000000000000000001}, "max_attempts": 1})")
          .status,
      201u);
  Response fetched = w.Call(verb::post, "/v1/queues/q/fetch", R"({"worker": "w"})");
  std::string lease(Json(fetched).at("jobs").as_array().at(0).at("lease").as_string());
  ASSERT_EQ(w.Call(verb::post, "/v1/queues/q/nack",
                   R"({"leases": [")" + lease + R"("], "error": "said \"no\"\n"})")
                .status,
            200u);
  Response dead = w.Call(verb::get, "/v1/queues/q/dead");
  ASSERT_EQ(dead.status, 200u) << dead.body;
  EXPECT_EQ(PayloadText(dead.body), R"({"x":1.10,"big":100000000000000000000001})") << dead.body;
  boost::json::value v = Json(dead);
  ASSERT_TRUE(v.is_object()) << "not JSON: " << dead.body;
  const boost::json::value& job = v.at("jobs").as_array().at(0);
  EXPECT_EQ(job.at("error").as_string(), "said \"no\"\n");
  EXPECT_EQ(job.at("attempts").as_int64(), 1);
  EXPECT_EQ(job.at("history").as_array().at(0).at("error").as_string(), "said \"no\"\n");
  EXPECT_EQ(job.at("history").as_array().at(0).at("attempt").as_int64(), 1);
}

TEST(QueuesFamilyTest, NonFiniteNumbersAreRefused) {
  FamilyWorld w;
  for (std::string payload : {"1e400", "-1e400", R"({"a": [1, 1E999]})"}) {
    Response r = w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": )" + payload + "}");
    EXPECT_EQ(r.status, 400u) << payload << ": " << r.body;
    EXPECT_EQ(ErrorMessage(r), wire::kPayloadNotFinite) << payload;
  }
  Response batch = w.Call(verb::post, "/v1/queues/q/jobs",
                          R"({"jobs": [{"payload": 1.5}, {"payload": 1e400}, {"payload": 3}]})");
  EXPECT_EQ(batch.status, 400u) << batch.body;
  EXPECT_EQ(ErrorMessage(batch), wire::JobAt(1, wire::kPayloadNotFinite));
  EXPECT_EQ(Json(w.Call(verb::get, "/v1/queues/q")).at("ready").as_int64(), 0) << "nothing pushed";
  EXPECT_EQ(Json(w.Call(verb::get, "/v1/queues/q")).at("pushed").as_int64(), 0);
}

TEST(QueuesFamilyTest, ThePayloadLimitIsOnTheStoredText) {
  FamilyWorld w;
  // Exactly 1 MiB of stored text once the spaces are gone, with a double (so the text comes from
  // the source, where 1.5 stays 1.5 and does not grow into 1.5E0).
  auto payload = [](std::string_view comma, size_t n) {
    return std::string("[1.5") + std::string(comma) + '"' + std::string(n, 'x') + "\"]";
  };
  size_t fits = 1024 * 1024 - payload(",", 0).size();
  ASSERT_EQ(payload(",", fits).size(), 1024u * 1024u);
  Response ok =
      w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": )" + payload(" ,  ", fits) + "}");
  EXPECT_EQ(ok.status, 201u) << ok.body.substr(0, 200);
  Response big =
      w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload": )" + payload(",", fits + 1) + "}");
  EXPECT_EQ(big.status, 413u) << big.body.substr(0, 200);
}

// PUT /v1/queues/{q}/key: a key given, or one made and answered once; bad shapes refused and
// nothing set; the refusal names the queue's own key.
TEST(QueuesFamilyTest, AQueuesOwnKey) {
  FamilyWorld w;
  Response made = w.Admin(verb::put, "/v1/queues/q/key", "");
  ASSERT_EQ(made.status, 200u) << made.body;
  std::string key(Json(made).at("key").as_string());
  EXPECT_GE(key.size(), 40u);
  EXPECT_TRUE(Json(made).at("own_key").as_bool());
  EXPECT_EQ(w.Call(verb::post, "/v1/queues/q/jobs", R"({"payload":1})").status, 401u)
      << "the server's queue key no longer opens q";
  Response refused = w.Call(verb::get, "/v1/queues/q");
  EXPECT_EQ(ErrorMessage(refused), wire::kOwnQueueKeyNeeded);
  EXPECT_EQ(testing::HeaderOf(refused, "WWW-Authenticate").empty(), false);
  EXPECT_EQ(w.Send(verb::post, "/v1/queues/q/jobs", R"({"payload":1})", "Bearer " + key)->status,
            201u);
  EXPECT_EQ(w.Call(verb::post, "/v1/queues/other/jobs", R"({"payload":1})").status, 201u);
  // The key is not a key of the server's: the admin routes and the list stay closed to it.
  EXPECT_EQ(w.Send(verb::post, "/v1/queues/q/pause", "", "Bearer " + key)->status, 401u);
  EXPECT_EQ(w.Send(verb::get, "/v1/queues", "", "Bearer " + key)->status, 401u);
  EXPECT_EQ(w.Send(verb::get, "/v1/queues/other", "", "Bearer " + key)->status, 401u);
  // Only the admin sets keys.
  EXPECT_EQ(w.Send(verb::put, "/v1/queues/q/key", "", "Bearer " + key)->status, 401u);
  EXPECT_EQ(w.Call(verb::delete_, "/v1/queues/q/key").status, 401u);
  for (const char* bad : {R"({"key":"short"})", R"({"key":"has a space in it here"})",
                          R"({"key":7})", R"({"key":"ééééééééééééééééé"})"}) {
    Response r = w.Admin(verb::put, "/v1/queues/q/key", bad);
    EXPECT_EQ(r.status, 400u) << bad;
    EXPECT_EQ(ErrorMessage(r), wire::kQueueKeyShape) << bad;
  }
  EXPECT_EQ(w.Send(verb::get, "/v1/queues/q", "", "Bearer " + key)->status, 200u)
      << "a refused change left the key as it was";
  ASSERT_EQ(w.Admin(verb::delete_, "/v1/queues/q/key").status, 200u);
  EXPECT_EQ(w.Call(verb::get, "/v1/queues/q").status, 200u);
  EXPECT_EQ(w.Send(verb::get, "/v1/queues/q", "", "Bearer " + key)->status, 401u);
}

// A key set through another process (straight into the backend here) is obeyed once this
// process's cached answer is a second old; this process's own changes at once.
TEST(QueuesFamilyTest, AKeySetElsewhereIsObeyedWithinASecond) {
  FamilyWorld w;
  ASSERT_EQ(w.Call(verb::get, "/v1/queues/q").status, 200u);  // cached: no key of its own
  std::optional<OpResult<Done>> set;
  w.backend().SetQueueKey("q", KeyDigest("elsewhere-made-key-0123"),
                          [&set](OpResult<Done> r) { set = std::move(r); });
  ASSERT_TRUE(set && set->ok());
  EXPECT_EQ(w.Call(verb::get, "/v1/queues/q").status, 200u) << "cached for up to a second";
  w.clock().Advance(QueueKeys::kFreshMs);
  EXPECT_EQ(w.Call(verb::get, "/v1/queues/q").status, 401u);
  EXPECT_EQ(w.Send(verb::get, "/v1/queues/q", "", "Bearer elsewhere-made-key-0123")->status, 200u);
}

}  // namespace
}  // namespace anteroom::server
