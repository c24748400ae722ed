// contrib/grafana/anteroom.json held to a real Prometheus: Debian's `prometheus` on a loopback
// port (temp dir, a config that scrapes a real `anteroom serve` every second) answers every
// query of every panel with data once traffic ran. Skipped when prometheus is not installed.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/redis_process.h"
#include "support/server_fixture.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kPrometheus[] = "/usr/bin/prometheus";
const fs::path kDashboard = fs::path(ANTEROOM_SOURCE_DIR) / "contrib/grafana/anteroom.json";

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// Every query of the dashboard, Grafana's $__rate_interval spelled out as Prometheus takes it.
std::vector<std::pair<std::string, std::string>> PanelQueries() {
  std::ifstream in(kDashboard);
  std::stringstream text;
  text << in.rdbuf();
  json::value dash = json::parse(text.str());
  std::vector<std::pair<std::string, std::string>> out;
  for (const json::value& panel : dash.at("panels").as_array()) {
    for (const json::value& target : panel.at("targets").as_array()) {
      std::string expr(target.at("expr").as_string());
      for (size_t at; (at = expr.find("$__rate_interval")) != std::string::npos;) {
        expr.replace(at, std::string_view("$__rate_interval").size(), "30s");
      }
      out.emplace_back(std::string(panel.at("title").as_string()), expr);
    }
  }
  return out;
}

// One round of traffic: a join and an admission, a push, a fetch and an ack.
void Traffic(Client& c, int round) {
  std::string s = "s" + std::to_string(round);
  c.Check("door", s);
  c.Leave("door", s, true);
  c.Push("work", {{"n", round}});
  HttpResult fetched = c.Fetch("work", "w1", 1);
  if (fetched.status != 200) return;
  const json::array& jobs = fetched.json.at("jobs").as_array();
  if (jobs.empty()) return;
  c.Ack("work", {std::string(jobs.at(0).at("lease").as_string())});
}

// `prometheus` as a child, stopped by its PID.
class PrometheusProcess {
 public:
  PrometheusProcess(const fs::path& dir, uint16_t port, uint16_t target_port) {
    fs::path config = dir / "prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "scrape_configs:\n  - job_name: anteroom\n    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << target_port << "']\n";
    int log = ::open((dir / "prometheus.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_ = SpawnBinary(
        {"--config.file=" + config.string(), "--storage.tsdb.path=" + (dir / "data").string(),
         "--web.listen-address=127.0.0.1:" + std::to_string(port)},
        {}, log, log, &error_, kPrometheus);
    if (log >= 0) ::close(log);
  }
  ~PrometheusProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;
  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }

 private:
  pid_t pid_ = -1;
  std::string error_;
};

TEST(GrafanaDashboardTest, EveryPanelQueryAnswersWithData) {
  if (!fs::exists(kPrometheus)) {
    GTEST_SKIP() << kPrometheus << " is not installed (Debian package prometheus)";
  }
  ASSERT_TRUE(fs::exists(kDashboard)) << kDashboard;
  std::vector<std::pair<std::string, std::string>> queries = PanelQueries();
  ASSERT_FALSE(queries.empty());

  ServerProcess server({"--fsync", "always"}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  ASSERT_EQ(c.PutRoom("door", {{"capacity", 1}}).status, 200);
  Traffic(c, 0);

  TempDir dir("grafana-dashboard");
  uint16_t port = FreeLoopbackPort();
  PrometheusProcess prometheus(dir.path(), port, server.port());
  ASSERT_GT(prometheus.pid(), 0) << prometheus.error();
  Client prom("http://127.0.0.1:" + std::to_string(port));
  bool ready = false;
  for (int i = 0; i < 100 && !ready; ++i) {
    ready = prom.Request("GET", "/-/ready").status == 200;
    if (!ready) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_TRUE(ready) << "prometheus did not become ready";

  // Traffic across several scrapes, so that rates and quantiles have two samples or more:
  // until Prometheus holds 4 (its first scrape comes a few seconds after it is ready).
  std::string scrapes = "/api/v1/query?query=" + UrlEncode("count_over_time(up[1m]) >= 4");
  bool scraped = false;
  auto until = std::chrono::steady_clock::now() + seconds(40);
  for (int round = 1; !scraped && std::chrono::steady_clock::now() < until; ++round) {
    Traffic(c, round);
    std::this_thread::sleep_for(milliseconds(200));
    HttpResult r = prom.Request("GET", scrapes);
    scraped = r.status == 200 && r.json.is_object() && r.json.at("data").is_object() &&
              !r.json.at("data").at("result").as_array().empty();
  }
  ASSERT_TRUE(scraped) << "prometheus did not scrape the server 4 times in 40 s";

  for (const auto& [title, expr] : queries) {
    HttpResult r = prom.Request("GET", "/api/v1/query?query=" + UrlEncode(expr));
    ASSERT_EQ(r.status, 200) << title << ": " << expr << "\n" << r.body;
    EXPECT_EQ(StrField(r.json, "status"), "success") << title << ": " << r.body;
    const json::value* result = r.json.is_object() && r.json.as_object().contains("data")
                                    ? r.json.at("data").as_object().if_contains("result")
                                    : nullptr;
    ASSERT_NE(result, nullptr) << title << ": " << r.body;
    EXPECT_FALSE(result->as_array().empty()) << title << ": no data for " << expr;
  }
  EXPECT_TRUE(server.Alive());
  server.Stop();
}

}  // namespace
}  // namespace anteroom::testing
