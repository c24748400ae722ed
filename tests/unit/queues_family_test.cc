// The queue family's handlers in process: push, fetch, ack/nack/extend, workers, dead letters
// and the admin routes, dispatched through the router over a memory backend.
#include <gtest/gtest.h>

#include "common/wire_errors.h"
#include "family_world.h"

namespace anteroom::server {
namespace {

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

}  // namespace
}  // namespace anteroom::server
