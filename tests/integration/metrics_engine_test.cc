// The engine's own measurements on GET /metrics, over real TCP against a real `anteroom serve`
// on each backend: job wait and run histograms, the embedded log's fsync histogram and errors,
// and the build; then Debian's `promtool check metrics` on the live text (skipped when the
// prometheus package is not installed).
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/redis_process.h"
#include "support/server_fixture.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;

constexpr char kPromtool[] = "/usr/bin/promtool";

// The value of the sample written exactly as `series` (name and labels as the server writes
// them), nullopt when there is none.
std::optional<double> SampleValue(const std::string& text, std::string_view series) {
  std::string needle = "\n" + std::string(series) + " ";
  size_t at = text.find(needle);
  if (at == std::string::npos) return std::nullopt;
  at += needle.size();
  return std::strtod(text.c_str() + at, nullptr);
}

std::string Scrape(Client& c) {
  HttpResult r = c.Request("GET", "/metrics");
  EXPECT_EQ(r.status, 200) << r.body << r.error;
  return r.body;
}

// Rooms joined and admitted (s1 at once, s2 after waiting at least 40 ms), and jobs pushed,
// fetched and acked: 4 fetched (each having waited ready), 3 acked after running at least 50 ms.
void DriveTraffic(Client& c) {
  ASSERT_EQ(c.PutRoom("door", {{"capacity", 1}}).status, 200);
  ASSERT_EQ(c.Check("door", "s1").status, 200);
  ASSERT_EQ(c.Check("door", "s2").status, 200);  // waits
  std::this_thread::sleep_for(milliseconds(40));
  ASSERT_EQ(c.Leave("door", "s1", true).status, 200);  // s2 admitted
  for (int i = 0; i < 5; ++i) ASSERT_EQ(c.Push("work", {{"n", i}}).status, 201);
  std::this_thread::sleep_for(milliseconds(30));  // the jobs wait ready
  HttpResult fetched = c.Fetch("work", "w1", 4);
  ASSERT_EQ(fetched.status, 200) << fetched.body;
  const boost::json::array& jobs = fetched.json.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 4u);
  std::this_thread::sleep_for(milliseconds(60));  // the jobs run
  std::vector<std::string> leases;
  for (size_t i = 0; i < 3; ++i) leases.emplace_back(jobs.at(i).at("lease").as_string());
  ASSERT_EQ(c.Ack("work", leases).status, 200);
}

// s1 waited 0, s2 at least the 40 ms slept.
void ExpectRoomWaits(const std::string& text) {
  EXPECT_EQ(SampleValue(text, "anteroom_room_wait_seconds_count"), 2) << text;
  EXPECT_EQ(SampleValue(text, "anteroom_room_wait_seconds_bucket{le=\"0.1\"}"), 2);
  std::optional<double> sum = SampleValue(text, "anteroom_room_wait_seconds_sum");
  ASSERT_TRUE(sum.has_value());
  EXPECT_GE(*sum, 0.04);
  EXPECT_LT(*sum, 60.0);
}

void ExpectJobHistograms(const std::string& text) {
  EXPECT_EQ(SampleValue(text, "anteroom_job_wait_seconds_count"), 4) << text;
  EXPECT_EQ(SampleValue(text, "anteroom_job_wait_seconds_bucket{le=\"+Inf\"}"), 4);
  // Each waited at least the 30 ms slept (and not an hour: a wrong start would show).
  std::optional<double> wait_sum = SampleValue(text, "anteroom_job_wait_seconds_sum");
  ASSERT_TRUE(wait_sum.has_value());
  EXPECT_GE(*wait_sum, 4 * 0.025);
  EXPECT_LT(*wait_sum, 4 * 60.0);
  EXPECT_EQ(SampleValue(text, "anteroom_job_wait_seconds_bucket{le=\"0.005\"}"), 0);
  EXPECT_EQ(SampleValue(text, "anteroom_job_run_seconds_count"), 3);
  std::optional<double> run_sum = SampleValue(text, "anteroom_job_run_seconds_sum");
  ASSERT_TRUE(run_sum.has_value());
  EXPECT_GE(*run_sum, 3 * 0.05);
  EXPECT_LT(*run_sum, 3 * 60.0);
  EXPECT_EQ(SampleValue(text, "anteroom_job_run_seconds_bucket{le=\"0.025\"}"), 0);
  EXPECT_NE(text.find("\nanteroom_build_info{version=\""), std::string::npos);
  EXPECT_NE(text.find("# TYPE anteroom_room_wait_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE anteroom_job_wait_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE anteroom_log_fsync_errors_total counter\n"), std::string::npos);
  EXPECT_EQ(SampleValue(text, "anteroom_backend_up"), 1);
}

// Polls /metrics until `series` reaches `at_least` (bounded), answering the last text.
std::string ScrapeUntil(Client& c, std::string_view series, double at_least) {
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text = Scrape(c);
    std::optional<double> v = SampleValue(text, series);
    if (v && *v >= at_least) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  return text;
}

class MetricsEngineTest : public ServerTest {
 protected:
  std::vector<std::string> ServerArgs() const override { return {"--fsync", "always"}; }
};

TEST_F(MetricsEngineTest, JobAndFsyncHistogramsCountTheTraffic) {
  DriveTraffic(client());
  std::string text = ScrapeUntil(client(), "anteroom_log_fsync_seconds_count", 1);
  ExpectJobHistograms(text);
  ExpectRoomWaits(text);
  EXPECT_GE(SampleValue(text, "anteroom_log_fsync_seconds_count").value_or(0), 1);
  EXPECT_EQ(SampleValue(text, "anteroom_log_fsync_errors_total"), 0);
}

TEST(MetricsEngineRedisTest, JobHistogramsCountTheTrafficOnRedis) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ServerProcess server({"--store", redis.url()}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  DriveTraffic(c);
  std::string text = Scrape(c);
  ExpectJobHistograms(text);
  ExpectRoomWaits(text);
  EXPECT_EQ(SampleValue(text, "anteroom_log_fsync_seconds_count"), 0) << "no log on Redis";
  EXPECT_TRUE(server.Alive());
  server.Stop();
}

// Two processes share a room on Redis: each admission is counted once, by the process whose
// call made it, though every process reads every room's events.
TEST(MetricsEngineRedisTest, EachAdmissionIsCountedByOneProcessOnly) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ServerProcess one({"--store", redis.url()}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(one.started()) << one.error();
  ServerProcess two({"--store", redis.url()}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(two.started()) << two.error();
  Client a(one.url());
  Client b(two.url());
  ASSERT_EQ(a.PutRoom("door", {{"capacity", 1}}).status, 200);
  ASSERT_EQ(a.Check("door", "s1").status, 200);  // in at once, by one
  ASSERT_EQ(b.Check("door", "s2").status, 200);  // waits
  ASSERT_EQ(b.Check("door", "s3").status, 200);  // waits
  std::this_thread::sleep_for(milliseconds(40));
  ASSERT_EQ(b.Leave("door", "s1", true).status, 200);  // s2 in, by two
  ASSERT_EQ(a.Leave("door", "s2", true).status, 200);  // s3 in, by one
  std::string by_one = Scrape(a);
  std::string by_two = Scrape(b);
  EXPECT_EQ(SampleValue(by_one, "anteroom_room_wait_seconds_count"), 2) << by_one;
  EXPECT_EQ(SampleValue(by_two, "anteroom_room_wait_seconds_count"), 1) << by_two;
  EXPECT_GE(SampleValue(by_two, "anteroom_room_wait_seconds_sum").value_or(0), 0.04);
  one.Stop();
  two.Stop();
}

// promtool's lint of the exposition (names, units, suffixes, HELP, histogram shape).
TEST_F(MetricsEngineTest, PromtoolAcceptsTheLiveText) {
  if (!std::filesystem::exists(kPromtool)) {
    GTEST_SKIP() << kPromtool << " is not installed (Debian package prometheus)";
  }
  DriveTraffic(client());
  TempDir dir("metrics-promtool");
  std::filesystem::path file = dir.path() / "metrics.txt";
  std::ofstream(file) << Scrape(client());
  ProgramResult r =
      RunProgram({"/bin/sh", "-c",
                  "exec " + std::string(kPromtool) + " check metrics < '" + file.string() + "'"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(r.timed_out);
}

}  // namespace
}  // namespace anteroom::testing
