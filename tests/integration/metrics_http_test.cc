// Monitoring over real TCP against a real `anteroom serve`: GET /metrics parsed line by line
// and held to the API's own answers, the latency histograms, GET /v1/stats/history sampling on
// a short interval, and the admin key (Bearer and Basic) on both.
#include <openssl/evp.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "support/api_checks.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kHistogram = "anteroom_http_request_duration_seconds";

// ---- a strict reader of the text format 0.0.4 ----------------------------------------------

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family -> type
  std::vector<std::string> errors;           // every line that breaks the format

  // The value of the one sample with this name and these labels.
  std::optional<double> Value(std::string_view name,
                              const std::map<std::string, std::string>& labels) const {
    for (const Sample& s : samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return std::nullopt;
  }
};

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names, without ':' for label names.
size_t NameLength(std::string_view s, bool colon) {
  size_t n = 0;
  while (n < s.size() && (n == 0 ? IsNameStart(s[n]) || (colon && s[n] == ':')
                                 : IsNameChar(s[n]) || (colon && s[n] == ':'))) {
    ++n;
  }
  return n;
}

std::optional<double> ParseValue(std::string_view text) {
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text == "NaN") return NAN;
  if (text.empty()) return std::nullopt;
  std::string copy(text);
  char* end = nullptr;
  double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
  return v;
}

// name{label="value",...} value: nullopt if the line breaks the format.
std::optional<Sample> ParseSampleLine(std::string_view line) {
  Sample s;
  size_t n = NameLength(line, true);
  if (n == 0) return std::nullopt;
  s.name = std::string(line.substr(0, n));
  line.remove_prefix(n);
  if (!line.empty() && line[0] == '{') {
    line.remove_prefix(1);
    while (true) {
      size_t ln = NameLength(line, false);
      if (ln == 0 || line.size() < ln + 2 || line[ln] != '=' || line[ln + 1] != '"') {
        return std::nullopt;
      }
      std::string label(line.substr(0, ln));
      line.remove_prefix(ln + 2);
      std::string value;
      while (!line.empty() && line[0] != '"') {
        if (line[0] == '\n') return std::nullopt;
        if (line[0] == '\\') {
          if (line.size() < 2) return std::nullopt;
          char e = line[1];
          if (e == '\\')
            value += '\\';
          else if (e == '"')
            value += '"';
          else if (e == 'n')
            value += '\n';
          else
            return std::nullopt;
          line.remove_prefix(2);
        } else {
          value += line[0];
          line.remove_prefix(1);
        }
      }
      if (line.empty()) return std::nullopt;
      line.remove_prefix(1);                                            // the closing quote
      if (!s.labels.emplace(label, value).second) return std::nullopt;  // a label twice
      if (line.empty()) return std::nullopt;
      if (line[0] == ',') {
        line.remove_prefix(1);
        continue;
      }
      if (line[0] != '}') return std::nullopt;
      line.remove_prefix(1);
      break;
    }
  }
  if (line.empty() || line[0] != ' ') return std::nullopt;
  line.remove_prefix(1);
  auto value = ParseValue(line);  // no timestamps: the value runs to the end of the line
  if (!value) return std::nullopt;
  s.value = *value;
  return s;
}

// Reads every line; HELP then TYPE must open each family once, before its samples, and every
// sample belongs to the family opened last (histograms: its _bucket, _sum and _count).
Exposition ParseExposition(std::string_view text) {
  Exposition out;
  if (text.empty() || text.back() != '\n') out.errors.push_back("the text must end in a newline");
  std::string current;  // the family whose samples may follow
  std::string help_for;
  std::set<std::string> helped;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    auto error = [&](std::string why) {
      out.errors.push_back(why + ": '" + std::string(line) + "'");
    };
    if (line.starts_with("# HELP ")) {
      std::string_view rest = line.substr(7);
      size_t n = NameLength(rest, true);
      if (n == 0 || rest.size() < n + 2 || rest[n] != ' ') error("bad HELP");
      std::string name(rest.substr(0, n));
      if (!helped.insert(name).second) error("HELP twice");
      help_for = name;
    } else if (line.starts_with("# TYPE ")) {
      std::string_view rest = line.substr(7);
      size_t n = NameLength(rest, true);
      std::string name(rest.substr(0, n));
      std::string type(n < rest.size() ? rest.substr(n + 1) : "");
      if (n == 0 || n >= rest.size() || rest[n] != ' ') error("bad TYPE");
      if (type != "counter" && type != "gauge" && type != "histogram") error("unknown type");
      if (help_for != name) error("TYPE without its HELP just before");
      if (!out.types.emplace(name, type).second) error("TYPE twice");
      current = name;
      help_for.clear();
    } else if (line.starts_with("#") || line.empty()) {
      error("unexpected comment or empty line");
    } else {
      auto sample = ParseSampleLine(line);
      if (!sample) {
        error("not name{labels} value");
        continue;
      }
      std::string family = sample->name;
      if (out.types.count(current) && out.types[current] == "histogram") {
        for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
          if (family == current + std::string(suffix)) family = current;
        }
      }
      if (family != current) error("a sample outside its family's block (TYPE " + current + ")");
      if (out.types.count(current) && out.types[current] == "counter" &&
          !sample->name.ends_with("_total")) {
        error("a counter not named *_total");
      }
      out.samples.push_back(std::move(*sample));
    }
  }
  return out;
}

TEST(ExpositionReaderTest, CatchesBrokenText) {
  EXPECT_TRUE(
      ParseExposition("# HELP a x\n# TYPE a gauge\na 1\na{b=\"c\\\"d\"} 2\n").errors.empty());
  EXPECT_FALSE(ParseExposition("a 1\n").errors.empty()) << "no TYPE";
  EXPECT_FALSE(ParseExposition("# TYPE a gauge\na 1\n").errors.empty()) << "no HELP";
  EXPECT_FALSE(ParseExposition("# HELP a x\n# TYPE a gauge\na{b=\"c\"d\"} 2\n").errors.empty());
  EXPECT_FALSE(ParseExposition("# HELP a x\n# TYPE a gauge\na 1 2 3\n").errors.empty());
  EXPECT_FALSE(ParseExposition("# HELP a x\n# TYPE a gauge\nb 1\n").errors.empty());
  EXPECT_FALSE(ParseExposition("# HELP a x\n# TYPE a gauge\na 1").errors.empty());
  EXPECT_EQ(ParseExposition("# HELP a x\n# TYPE a gauge\na{b=\"x\\ny\"} 2\n")
                .samples.at(0)
                .labels.at("b"),
            "x\ny");
}

// ---- helpers -----------------------------------------------------------------------------

std::string Base64(std::string_view text) {
  std::string out(4 * ((text.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

class MetricsHttpTest : public ServerTest {
 protected:
  std::vector<std::string> ServerArgs() const override {
    return {"--stats-interval-ms", "100", "--threads", "2"};
  }

  // GET /metrics on a fresh connection: the raw answer (headers readable).
  std::string RawScrape(const std::vector<std::string>& headers = {}) {
    std::vector<std::string> all = headers;
    all.push_back("Connection: close");
    return RawExchange(server().port(), RawRequest("GET", "/metrics", "", all));
  }

  // GET /metrics through the fixture's client, parsed; any format error fails the test.
  Exposition Scrape() {
    HttpResult r = client().Request("GET", "/metrics");
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    Exposition e = ParseExposition(r.body);
    for (const std::string& error : e.errors) ADD_FAILURE() << error;
    if (!e.errors.empty()) ADD_FAILURE() << r.body;
    return e;
  }

  json::value History() {
    HttpResult r = client().Request("GET", "/v1/stats/history");
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    return r.json;
  }

  // The samples of one room (or queue) in the history; empty if it is not there.
  json::array SamplesOf(const json::value& history, std::string_view kind, std::string_view key,
                        std::string_view name) {
    if (!history.is_object()) return {};
    for (const json::value& item : history.at(kind).as_array()) {
      if (StrField(item, key) == name) return item.at("samples").as_array();
    }
    return {};
  }
};

double Num(const json::value& v, std::string_view key) {
  return static_cast<double>(IntField(v, key).value_or(-1));
}

TEST_F(MetricsHttpTest, MetricsParseAndAgreeWithTheApi) {
  MustPut("demo", {{"capacity", 2}});
  MustPut("other", {{"capacity", 7}});
  for (const char* s : {"s1", "s2", "s3", "s4"}) ASSERT_EQ(client().Check("demo", s).status, 200);
  ASSERT_TRUE(IsSession(client().Leave("demo", "s1", true), "gone"));  // s3 admitted
  ASSERT_TRUE(IsSession(client().Leave("demo", "s4"), "gone"));        // left the line
  for (int i = 0; i < 3; ++i) ASSERT_EQ(client().Push("emails", {{"n", i}}).status, 201);
  HttpResult fetched = client().Fetch("emails", "w1", 2);
  ASSERT_EQ(fetched.status, 200) << fetched.body;
  std::string lease(fetched.json.at("jobs").as_array().at(0).at("lease").as_string());
  std::string lease2(fetched.json.at("jobs").as_array().at(1).at("lease").as_string());
  ASSERT_EQ(client().Ack("emails", {lease}).status, 200);
  ASSERT_EQ(client().Nack("emails", {lease2}, 60'000).status, 200);

  std::string raw = RawScrape();
  ASSERT_EQ(RawStatus(raw), 200) << raw;
  EXPECT_EQ(RawHeader(raw, "Content-Type"), "text/plain; version=0.0.4; charset=utf-8");

  Exposition e = Scrape();
  EXPECT_EQ(e.Value("anteroom_backend_up", {}), 1);
  for (std::string_view name :
       {"anteroom_room_active", "anteroom_room_waiting", "anteroom_room_capacity",
        "anteroom_queue_ready", "anteroom_queue_inflight", "anteroom_queue_delayed",
        "anteroom_queue_dead"}) {
    EXPECT_EQ(e.types[std::string(name)], "gauge") << name;
  }
  for (std::string_view name :
       {"anteroom_room_admitted_total", "anteroom_room_dropped_total",
        "anteroom_room_released_total", "anteroom_queue_pushed_total", "anteroom_queue_acked_total",
        "anteroom_queue_nacked_total", "anteroom_queue_expired_total"}) {
    EXPECT_EQ(e.types[std::string(name)], "counter") << name;
  }
  EXPECT_EQ(e.types[std::string(kHistogram)], "histogram");

  for (const char* room : {"demo", "other"}) {
    HttpResult got = client().GetRoom(room);
    ASSERT_EQ(got.status, 200);
    std::map<std::string, std::string> l{{"room", room}};
    EXPECT_EQ(e.Value("anteroom_room_active", l), Num(got.json, "active")) << room;
    EXPECT_EQ(e.Value("anteroom_room_waiting", l), Num(got.json, "waiting")) << room;
    EXPECT_EQ(e.Value("anteroom_room_capacity", l), Num(got.json, "capacity")) << room;
    EXPECT_EQ(e.Value("anteroom_room_admitted_total", l), Num(got.json, "admitted_total"));
    EXPECT_EQ(e.Value("anteroom_room_dropped_total", l), Num(got.json, "dropped_total"));
  }
  std::map<std::string, std::string> demo{{"room", "demo"}};
  EXPECT_EQ(e.Value("anteroom_room_active", demo), 2);
  EXPECT_EQ(e.Value("anteroom_room_waiting", demo), 0);
  EXPECT_EQ(e.Value("anteroom_room_admitted_total", demo), 3);
  EXPECT_EQ(e.Value("anteroom_room_released_total", demo), 1) << "s1's final leave";

  HttpResult stats = client().QueueStats("emails");
  ASSERT_EQ(stats.status, 200);
  std::map<std::string, std::string> q{{"queue", "emails"}};
  for (std::string_view field : {"ready", "inflight", "delayed", "dead"}) {
    EXPECT_EQ(e.Value("anteroom_queue_" + std::string(field), q), Num(stats.json, field)) << field;
  }
  for (std::string_view field : {"pushed", "acked", "nacked", "expired"}) {
    EXPECT_EQ(e.Value("anteroom_queue_" + std::string(field) + "_total", q), Num(stats.json, field))
        << field;
  }
  EXPECT_EQ(e.Value("anteroom_queue_pushed_total", q), 3);
  EXPECT_EQ(e.Value("anteroom_queue_acked_total", q), 1);
  EXPECT_EQ(e.Value("anteroom_queue_nacked_total", q), 1);
  EXPECT_EQ(e.Value("anteroom_queue_ready", q), 1);
  EXPECT_EQ(e.Value("anteroom_queue_delayed", q), 1);
}

TEST_F(MetricsHttpTest, HistogramsAreCumulativeAndCountEveryRequest) {
  MustPut("h", {{"capacity", 1}});
  constexpr int kChecks = 7;
  for (int i = 0; i < kChecks; ++i)
    ASSERT_EQ(client().Check("h", "s" + std::to_string(i)).status, 200);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(client().Health().status, 200);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(client().Request("GET", "/no/such/route").status, 404);
  ASSERT_EQ(client().Request("DELETE", "/healthz").status, 405);
  ASSERT_EQ(client().Check("BAD NAME!").status, 400);  // a bad name still matched the route

  Exposition e = Scrape();
  auto count = [&](std::string method, std::string route) {
    return e.Value(std::string(kHistogram) + "_count", {{"method", method}, {"route", route}});
  };
  EXPECT_EQ(count("POST", "/v1/rooms/{room}/check"), kChecks + 1);
  EXPECT_EQ(count("GET", "/healthz"), 3);
  EXPECT_EQ(count("PUT", "/v1/rooms/{room}"), 1);
  EXPECT_EQ(count("GET", "unmatched"), 2);
  EXPECT_EQ(count("DELETE", "unmatched"), 1);
  EXPECT_EQ(count("GET", "/metrics"), 0) << "the scrape answering is not yet counted";
  EXPECT_EQ(count("POST", "/v1/queues/{q}/jobs"), 0) << "routes never called are written as zero";

  // Every series: buckets in bound order, cumulative, +Inf equal to _count, a sane _sum.
  std::map<std::pair<std::string, std::string>, std::vector<Sample>> buckets;
  for (const Sample& s : e.samples) {
    if (s.name != std::string(kHistogram) + "_bucket") continue;
    ASSERT_EQ(s.labels.size(), 3u);
    buckets[{s.labels.at("method"), s.labels.at("route")}].push_back(s);
  }
  ASSERT_FALSE(buckets.empty());
  const std::vector<std::string> want_le = {
      "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
      "0.1",    "0.25",    "0.5",    "1",     "2.5",    "5",     "10",   "+Inf"};
  for (const auto& [series, list] : buckets) {
    const auto& [method, route] = series;
    ASSERT_EQ(list.size(), want_le.size()) << method << " " << route;
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(list[i].labels.at("le"), want_le[i]);
      if (i > 0) {
        EXPECT_LE(list[i - 1].value, list[i].value) << method << " " << route;
      }
    }
    std::map<std::string, std::string> l{{"method", method}, {"route", route}};
    EXPECT_EQ(e.Value(std::string(kHistogram) + "_count", l), list.back().value);
    auto sum = e.Value(std::string(kHistogram) + "_sum", l);
    ASSERT_TRUE(sum.has_value());
    EXPECT_GE(*sum, 0);
    EXPECT_LT(*sum, 60.0 * std::max(1.0, list.back().value));
    if (list.back().value > 0) {
      EXPECT_GT(*sum, 0) << method << " " << route;
    }
  }

  // The first scrape is counted by the next.
  Exposition again = Scrape();
  EXPECT_EQ(
      again.Value(std::string(kHistogram) + "_count", {{"method", "GET"}, {"route", "/metrics"}}),
      1);
}

TEST_F(MetricsHttpTest, HistoryGrowsAndFollowsTheCounts) {
  MustPut("live", {{"capacity", 2}});
  ASSERT_EQ(client().Push("jobs", {{"n", 1}}).status, 201);

  json::value history;
  ASSERT_TRUE(WaitFor(
      [&] {
        history = History();
        return SamplesOf(history, "rooms", "room", "live").size() >= 3 &&
               SamplesOf(history, "queues", "queue", "jobs").size() >= 3;
      },
      seconds(10)))
      << json::serialize(history);
  EXPECT_EQ(IntField(history, "interval_ms"), 100);
  int64_t now_ms = IntField(history, "now_ms").value_or(0);
  json::array samples = SamplesOf(history, "rooms", "room", "live");
  int64_t last_t = -1;
  for (const json::value& s : samples) {
    int64_t t = IntField(s, "t").value_or(0);
    EXPECT_GT(t, last_t) << "oldest first";
    EXPECT_LE(t, now_ms);
    last_t = t;
    EXPECT_EQ(IntField(s, "capacity"), 2);
  }
  size_t before = samples.size();

  // Three checks: two admitted, one waiting; two more pushes.
  for (const char* s : {"a", "b", "c"}) ASSERT_EQ(client().Check("live", s).status, 200);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(client().Push("jobs", {{"n", i}}).status, 201);
  ASSERT_TRUE(WaitFor(
      [&] {
        history = History();
        json::array rooms = SamplesOf(history, "rooms", "room", "live");
        json::array queues = SamplesOf(history, "queues", "queue", "jobs");
        if (rooms.empty() || queues.empty()) return false;
        const json::value& r = rooms.back();
        const json::value& q = queues.back();
        return IntField(r, "active") == 2 && IntField(r, "waiting") == 1 &&
               IntField(r, "admitted_total") == 2 && IntField(q, "pushed_total") == 3 &&
               IntField(q, "ready") == 3;
      },
      seconds(10)))
      << json::serialize(history);
  EXPECT_GT(SamplesOf(history, "rooms", "room", "live").size(), before);
  json::array queue_samples = SamplesOf(history, "queues", "queue", "jobs");
  ASSERT_FALSE(queue_samples.empty());
  const json::value& q = queue_samples.back();
  for (std::string_view field : {"t", "ready", "inflight", "delayed", "dead", "pushed_total",
                                 "acked_total", "nacked_total", "expired_total"}) {
    EXPECT_TRUE(IntField(q, field).has_value()) << field;
  }
  json::array room_samples = SamplesOf(history, "rooms", "room", "live");
  ASSERT_FALSE(room_samples.empty());
  const json::value& r = room_samples.back();
  for (std::string_view field : {"t", "active", "waiting", "capacity", "admitted_total",
                                 "dropped_total", "released_total"}) {
    EXPECT_TRUE(IntField(r, field).has_value()) << field;
  }

  // A deleted room is forgotten at the next sample.
  ASSERT_EQ(client().DeleteRoom("live").status, 200);
  EXPECT_TRUE(
      WaitFor([&] { return SamplesOf(History(), "rooms", "room", "live").empty(); }, seconds(10)));
}

// With many queues one GET answers a page (the dashboard asks every 5 s): the answer's size is
// bounded by its limit, and `next` leads through every name once.
TEST_F(MetricsHttpTest, HistoryComesAPageAtATime) {
  for (int i = 0; i < 30; ++i) {
    ASSERT_EQ(client().Push(fmt::format("q{:02}", i), {{"n", i}}).status, 201);
  }
  ASSERT_TRUE(
      WaitFor([&] { return IntField(History(), "queues_total").value_or(0) == 30; }, seconds(10)));
  json::value first = History();
  EXPECT_EQ(first.at("queues").as_array().size(), 20u) << "20 rows unless asked otherwise";
  std::vector<std::string> names;
  std::string after;
  for (int pages = 0; pages < 10; ++pages) {
    std::string target = "/v1/stats/history?kinds=queues&limit=7";
    if (!after.empty()) target += "&queue_after=" + after;
    HttpResult r = client().Request("GET", target);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.json.at("rooms").as_array().empty()) << "rooms were not asked for";
    EXPECT_LE(r.json.at("queues").as_array().size(), 7u);
    for (const json::value& row : r.json.at("queues").as_array()) {
      names.emplace_back(row.at("queue").as_string());
    }
    const json::value& next = r.json.at("next").at("queue_after");
    if (next.is_null()) break;
    after = std::string(next.as_string());
  }
  ASSERT_EQ(names.size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(names[i], fmt::format("q{:02}", i));
  for (const char* bad : {"limit=0", "limit=101", "limit=x", "kinds=jobs", "queue_after=a%20b"}) {
    HttpResult r = client().Request("GET", std::string("/v1/stats/history?") + bad);
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
    EXPECT_EQ(ErrorCode(r), "invalid_argument") << bad;
  }
}

TEST(StatsIntervalFlagTest, BelowTheMinimumIsRefused) {
  CliResult r =
      RunCli({"serve", "--memory-only", "--listen", "127.0.0.1:0", "--stats-interval-ms", "99"}, {},
             seconds(10));
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("stats-interval-ms"), std::string::npos) << r.err;
}

// ---- the admin key on both routes ---------------------------------------------------------

constexpr char kAdminKey[] = "metrics-admin-key";

class MetricsAuthTest : public MetricsHttpTest {
 protected:
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}, {"ANTEROOM_ADMIN_KEY", kAdminKey}};
  }
  std::string AdminKey() const override { return kAdminKey; }

  std::string Get(std::string_view path, const std::vector<std::string>& headers) {
    std::vector<std::string> all = headers;
    all.push_back("Connection: close");
    return RawExchange(server().port(), RawRequest("GET", path, "", all));
  }
};

TEST_F(MetricsAuthTest, BothRoutesNeedTheKeyAsBearerOrBasic) {
  for (std::string_view path : {"/metrics", "/v1/stats/history"}) {
    for (const std::string& header :
         {std::string("Authorization: Bearer ") + kAdminKey,
          "Authorization: Basic " + Base64(std::string("prometheus:") + kAdminKey),
          "Authorization: basic " + Base64(std::string(":") + kAdminKey)}) {
      std::string answer = Get(path, {header});
      EXPECT_EQ(RawStatus(answer), 200) << path << " " << header << "\n" << answer;
    }
    for (const std::string& header :
         {std::string(), std::string("Authorization: Bearer wrong"),
          "Authorization: Basic " + Base64("prometheus:wrong"),
          "Authorization: Basic " + Base64(kAdminKey),       // no user:password
          std::string("Authorization: Basic ") + kAdminKey,  // not base64
          "Authorization: Basic " + Base64(std::string("u:") + kAdminKey).substr(1),
          std::string("Authorization: Basic")}) {
      std::string answer =
          Get(path, header.empty() ? std::vector<std::string>{} : std::vector<std::string>{header});
      EXPECT_EQ(RawStatus(answer), 401) << path << " " << header << "\n" << answer;
      EXPECT_EQ(RawHeader(answer, "WWW-Authenticate"), R"(Basic realm="anteroom", charset="UTF-8")")
          << answer;
      EXPECT_EQ(json::parse(RawBody(answer)).at("error").at("code"), "unauthorized");
    }
  }
  // A Basic login works on the other admin routes too.
  std::string put = RawExchange(
      server().port(), RawRequest("PUT", "/v1/rooms/basic", R"({"capacity": 1})",
                                  {"Authorization: Basic " + Base64(std::string("me:") + kAdminKey),
                                   "Connection: close"}));
  EXPECT_EQ(RawStatus(put), 200) << put;
}

// The ETA's measured error in the history: waiting people traced from their check answers
// (every one here: --eta-sample-ms 0) to their admissions, read from the event stream.
class EtaErrorHttpTest : public MetricsHttpTest {
 protected:
  std::vector<std::string> ServerArgs() const override {
    return {"--stats-interval-ms", "100", "--eta-sample-ms", "0", "--threads", "2"};
  }
};

TEST_F(EtaErrorHttpTest, HistoryShowsTheEtaErrorAfterAdmissions) {
  MustPut("shop", {{"capacity", 1}});
  ASSERT_EQ(client().Check("shop", "h").status, 200);
  std::vector<std::string> line = {"w1", "w2", "w3", "w4", "w5", "w6", "w7"};
  for (const std::string& s : line) ASSERT_EQ(client().Check("shop", s).status, 200);
  // A slot freed: the outflow is measured, so waiting answers carry an ETA.
  ASSERT_TRUE(IsSession(client().Leave("shop", "h", true), "gone"));
  for (size_t i = 1; i < line.size(); ++i) {
    HttpResult r = client().Check("shop", line[i]);
    ASSERT_EQ(StrField(r.json, "status"), "waiting") << r.body;
    ASSERT_TRUE(IntField(r.json, "eta_ms").has_value()) << r.body;
  }
  // Waits of a second or more (shorter are not scored), then one admission after another.
  std::this_thread::sleep_for(milliseconds(1'100));
  for (size_t i = 0; i + 1 < line.size(); ++i) {
    ASSERT_TRUE(IsSession(client().Leave("shop", line[i], true), "gone"));
  }
  EXPECT_EQ(StrField(client().Check("shop", line.back()).json, "status"), "active");

  json::value history;
  json::value last;
  ASSERT_TRUE(WaitFor(
      [&] {
        history = History();
        json::array samples = SamplesOf(history, "rooms", "room", "shop");
        if (samples.empty()) return false;
        last = samples.back();
        return IntField(last, "eta_traces") == 6;
      },
      seconds(10)))
      << json::serialize(history);
  // Errors are fractions of the actual wait: non-negative, p90 at least the median.
  ASSERT_TRUE(last.at("eta_error_p50").is_number()) << json::serialize(last);
  ASSERT_TRUE(last.at("eta_error_p90").is_number()) << json::serialize(last);
  double p50 = last.at("eta_error_p50").to_number<double>();
  double p90 = last.at("eta_error_p90").to_number<double>();
  EXPECT_GE(p50, 0);
  EXPECT_GE(p90, p50);
  // A room nobody waited in has no figures.
  MustPut("empty", {{"capacity", 1}});
  ASSERT_TRUE(WaitFor([&] { return !SamplesOf(History(), "rooms", "room", "empty").empty(); },
                      seconds(10)));
  json::value empty = SamplesOf(History(), "rooms", "room", "empty").back();
  EXPECT_EQ(IntField(empty, "eta_traces"), 0);
  EXPECT_TRUE(empty.at("eta_error_p50").is_null());
  EXPECT_TRUE(empty.at("eta_error_p90").is_null());
}

TEST_F(MetricsHttpTest, WithoutAKeyBothRoutesAreOpen) {
  Client anonymous(server().url());
  EXPECT_EQ(anonymous.Request("GET", "/metrics").status, 200);
  EXPECT_EQ(anonymous.Request("GET", "/v1/stats/history").status, 200);
}

}  // namespace
}  // namespace anteroom::testing
