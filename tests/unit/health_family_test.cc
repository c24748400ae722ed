// The health family in process: /healthz and /readyz over a working memory backend, public
// with an admin key set.
#include <gtest/gtest.h>

#include "family_world.h"

namespace anteroom::server {
namespace {

using http::verb;
using testing::FamilyWorld;
using testing::Json;

TEST(HealthFamilyTest, HealthzAndReadyzAnswerWithoutAKey) {
  FamilyWorld w;
  Response health = w.Call(verb::get, "/healthz");
  EXPECT_EQ(health.status, 200u);
  EXPECT_EQ(Json(health).at("status").as_string(), "ok");
  Response ready = w.Call(verb::get, "/readyz");
  EXPECT_EQ(ready.status, 200u);
  EXPECT_EQ(Json(ready).at("status").as_string(), "ready");
  EXPECT_EQ(w.Call(verb::post, "/healthz").status, 405u);
}

TEST(HealthFamilyTest, MetricsAndHistoryNeedTheKey) {
  FamilyWorld w;
  EXPECT_EQ(w.Call(verb::get, "/metrics").status, 401u);
  Response metrics = w.Admin(verb::get, "/metrics");
  EXPECT_EQ(metrics.status, 200u);
  EXPECT_NE(metrics.body.find("anteroom_backend_up 1"), std::string::npos) << metrics.body;
  EXPECT_EQ(w.Admin(verb::get, "/v1/stats/history").status, 200u);
}

}  // namespace
}  // namespace anteroom::server
