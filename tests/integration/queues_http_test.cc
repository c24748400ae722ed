// Reliable queues over real TCP against a real `anteroom serve`: every route with its answer
// shape, bad input (each followed by a look at the queue showing nothing changed), the admin
// key, long polls and lease expiry in real time (short timeouts, bounded waits).
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/names.h"
#include "common/wire_errors.h"
#include "support/api_checks.h"
#include "support/payload_checks.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// How long after a deadline a timer-driven change may take (the target is within 1 s; the rest
// is slack for a loaded machine).
constexpr milliseconds kWithin(1500);

int64_t WallNowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t MsSince(SteadyClock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - start).count();
}

std::string Path(std::string_view queue, std::string_view tail = {}) {
  return "/v1/queues/" + std::string(queue) + std::string(tail);
}

std::set<std::string> Keys(const json::value& v) {
  std::set<std::string> keys;
  if (v.is_object()) {
    for (const auto& kv : v.as_object()) keys.insert(std::string(kv.key()));
  }
  return keys;
}

bool IsDecimalId(const json::value& v) {
  if (!v.is_string()) return false;
  std::string s(v.as_string());
  return !s.empty() && s.size() <= 20 && s.find_first_not_of("0123456789") == std::string::npos &&
         s[0] != '0';
}

const std::set<std::string> kStatsKeys = {
    "queue", "waiting_deps", "ready",   "delayed",   "inflight", "dead",  "pushed",
    "acked", "nacked",       "expired", "cancelled", "workers",  "paused"};

// One stats object: exactly the documented fields (docs/api.md), with their types.
::testing::AssertionResult IsStats(const json::value& v, std::string_view queue) {
  if (Keys(v) != kStatsKeys) {
    return ::testing::AssertionFailure() << "not a stats object: " << json::serialize(v);
  }
  if (StrField(v, "queue") != std::string(queue)) {
    return ::testing::AssertionFailure() << "queue is not " << queue << ": " << json::serialize(v);
  }
  for (const std::string& key : kStatsKeys) {
    if (key == "queue" || key == "paused") continue;
    auto n = IntField(v, key);
    if (!n || *n < 0) {
      return ::testing::AssertionFailure() << key << " is not a count: " << json::serialize(v);
    }
  }
  if (!BoolField(v, "paused")) {
    return ::testing::AssertionFailure() << "paused is not a bool: " << json::serialize(v);
  }
  int64_t rhs = *IntField(v, "acked") + *IntField(v, "waiting_deps") + *IntField(v, "ready") +
                *IntField(v, "delayed") + *IntField(v, "inflight") + *IntField(v, "dead") +
                *IntField(v, "cancelled");
  if (*IntField(v, "pushed") != rhs) {
    return ::testing::AssertionFailure()
           << "pushed != acked + waiting_deps + ready + delayed + inflight + dead + cancelled: "
           << json::serialize(v);
  }
  return ::testing::AssertionSuccess();
}

class QueuesHttpTest : public ServerTest {
 protected:
  HttpResult Post(const std::string& path, std::string_view body) {
    return client().Request("POST", path, body);
  }
  HttpResult Get(const std::string& path) { return client().Request("GET", path); }

  // A push that must answer 201 {"id"}; the id.
  std::string MustPush(const std::string& q, const json::value& payload,
                       const json::object& options = {}) {
    HttpResult r = client().Push(q, payload, options);
    EXPECT_EQ(r.status, 201) << r.body << r.error;
    EXPECT_EQ(Keys(r.json), std::set<std::string>{"id"}) << r.body;
    return StrField(r.json, "id").value_or("");
  }
  // A fetch that must answer 200 {"jobs": [...]}; the jobs.
  json::array MustFetch(const std::string& q, const std::string& worker, int max = 1,
                        int64_t lease_ms = 30'000, int64_t wait_ms = 0) {
    HttpResult r = client().Fetch(q, worker, max, lease_ms, wait_ms);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    EXPECT_EQ(Keys(r.json), std::set<std::string>{"jobs"}) << r.body;
    if (r.status != 200 || !r.json.is_object() || !r.json.at("jobs").is_array()) return {};
    return r.json.at("jobs").as_array();
  }
  std::string LeaseOf(const json::value& job) { return StrField(job, "lease").value_or(""); }

  json::value Stats(const std::string& q) {
    HttpResult r = client().QueueStats(q);
    EXPECT_EQ(r.status, 200) << r.body << r.error;
    EXPECT_TRUE(IsStats(r.json, q));
    return r.json;
  }
  // The queue's GET answer as text, to compare before and after a refused request.
  std::string Snapshot(const std::string& q) { return json::serialize(Stats(q)); }
  std::string ListSnapshot() {
    HttpResult r = client().ListQueues();
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body;
  }
  void ExpectCounts(const std::string& q, int64_t ready, int64_t delayed, int64_t inflight,
                    int64_t dead) {
    json::value s = Stats(q);
    EXPECT_EQ(IntField(s, "ready"), ready) << json::serialize(s);
    EXPECT_EQ(IntField(s, "delayed"), delayed) << json::serialize(s);
    EXPECT_EQ(IntField(s, "inflight"), inflight) << json::serialize(s);
    EXPECT_EQ(IntField(s, "dead"), dead) << json::serialize(s);
  }

  // 200 {"results": [...]}, one item per lease in order: {"lease", "ok": true} when codes[i]
  // is empty, else {"lease", "ok": false, "code": codes[i]}.
  ::testing::AssertionResult HasResults(const HttpResult& r, const std::vector<std::string>& leases,
                                        const std::vector<std::string>& codes) {
    if (r.status != 200) {
      return ::testing::AssertionFailure() << "status " << r.status << ": " << r.body << r.error;
    }
    if (Keys(r.json) != std::set<std::string>{"results"} || !r.json.at("results").is_array()) {
      return ::testing::AssertionFailure() << "not {\"results\": [...]}: " << r.body;
    }
    const json::array& results = r.json.at("results").as_array();
    if (results.size() != leases.size()) {
      return ::testing::AssertionFailure() << "wanted " << leases.size() << " results: " << r.body;
    }
    for (size_t i = 0; i < leases.size(); ++i) {
      const json::value& item = results[i];
      bool want_ok = codes[i].empty();
      std::set<std::string> want_keys = want_ok ? std::set<std::string>{"lease", "ok"}
                                                : std::set<std::string>{"lease", "ok", "code"};
      if (Keys(item) != want_keys || StrField(item, "lease") != leases[i] ||
          BoolField(item, "ok") != want_ok || (!want_ok && StrField(item, "code") != codes[i])) {
        return ::testing::AssertionFailure()
               << "item " << i << " is not " << (want_ok ? "ok" : codes[i]) << ": " << r.body;
      }
    }
    return ::testing::AssertionSuccess();
  }

  HttpResult AckBody(const std::string& q, const json::object& body) {
    return Post(Path(q, "/ack"), json::serialize(body));
  }
};

// ---- push ----------------------------------------------------------------------------------

TEST_F(QueuesHttpTest, PushAnswers201WithADecimalId) {
  HttpResult r = client().Push("q", json::object{{"task", "a"}});
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Keys(r.json), std::set<std::string>{"id"}) << r.body;
  EXPECT_TRUE(IsDecimalId(r.json.at("id"))) << r.body;
  std::string second = MustPush("q", 2);
  EXPECT_NE(second, *StrField(r.json, "id"));
  json::value s = Stats("q");
  EXPECT_EQ(IntField(s, "pushed"), 2);
  EXPECT_EQ(IntField(s, "ready"), 2);
}

TEST_F(QueuesHttpTest, DedupeHitAnswers200WithTheExistingId) {
  std::string id = MustPush("q", "one", {{"dedupe_key", "order:42"}});
  HttpResult again = client().Push("q", "two", {{"dedupe_key", "order:42"}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json, json::parse(R"({"id":")" + id + R"("})"));
  ExpectCounts("q", 1, 0, 0, 0);
  EXPECT_EQ(IntField(Stats("q"), "pushed"), 1);
  json::array jobs = MustFetch("q", "w");
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].at("payload"), json::value("one")) << "the first job was kept";
  // Acked, the key is free again.
  ASSERT_TRUE(HasResults(client().Ack("q", {LeaseOf(jobs[0])}), {LeaseOf(jobs[0])}, {""}));
  HttpResult fresh = client().Push("q", "three", {{"dedupe_key", "order:42"}});
  EXPECT_EQ(fresh.status, 201) << fresh.body;
  EXPECT_NE(StrField(fresh.json, "id"), id);
}

TEST_F(QueuesHttpTest, BatchPushAnswersIds) {
  HttpResult r = client().PushBatch(
      "q", json::array{json::object{{"payload", "a"}}, json::object{{"payload", "b"}},
                       json::object{{"payload", "c"}, {"dedupe_key", "k"}}});
  ASSERT_EQ(r.status, 201) << r.body;
  ASSERT_EQ(Keys(r.json), std::set<std::string>{"ids"}) << r.body;
  const json::array& ids = r.json.at("ids").as_array();
  ASSERT_EQ(ids.size(), 3u);
  std::set<std::string> distinct;
  for (const json::value& id : ids) {
    EXPECT_TRUE(IsDecimalId(id)) << r.body;
    if (id.is_string()) distinct.insert(std::string(id.as_string()));
  }
  EXPECT_EQ(distinct.size(), 3u);
  ExpectCounts("q", 3, 0, 0, 0);

  // Only dedupe hits: 200, the same ids, nothing enqueued.
  HttpResult hits =
      client().PushBatch("q", json::array{json::object{{"payload", "x"}, {"dedupe_key", "k"}}});
  EXPECT_EQ(hits.status, 200) << hits.body;
  EXPECT_EQ(hits.json, (json::object{{"ids", json::array{ids[2]}}})) << hits.body;
  // A mix: 201.
  HttpResult mix =
      client().PushBatch("q", json::array{json::object{{"payload", "y"}, {"dedupe_key", "k"}},
                                          json::object{{"payload", "z"}}});
  EXPECT_EQ(mix.status, 201) << mix.body;
  ExpectCounts("q", 4, 0, 0, 0);

  json::array jobs = MustFetch("q", "w", 10);
  std::vector<std::string> payloads;
  for (const json::value& j : jobs) payloads.push_back(StrField(j, "payload").value_or("?"));
  EXPECT_EQ(payloads, (std::vector<std::string>{"a", "b", "c", "z"}));
}

TEST_F(QueuesHttpTest, ABatchOfExactly1000IsAccepted) {
  json::array jobs;
  for (int i = 0; i < 1000; ++i) jobs.push_back(json::object{{"payload", i}});
  HttpResult r = client().PushBatch("q", jobs);
  ASSERT_EQ(r.status, 201) << r.body.substr(0, 200);
  EXPECT_EQ(r.json.at("ids").as_array().size(), 1000u);
  json::array got = MustFetch("q", "w", 1000);
  ASSERT_EQ(got.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(got[i].at("payload"), json::value(i));
  ExpectCounts("q", 0, 0, 1000, 0);
}

TEST_F(QueuesHttpTest, AnyJsonPayloadRoundTripsExactly) {
  std::vector<json::value> payloads = {
      json::parse(R"({"a":1,"b":[true,false,null],"c":{"d":"e"}})"),
      json::parse(R"([1,"two",3.5,[[]],{}])"),
      json::value("plain \"quoted\" text with \\ and \n and \u00e9 and \u2603"),
      json::value(42),
      json::value(-7),
      json::value(0),
      json::value(2.5),
      json::value(-1e300),
      json::value(static_cast<uint64_t>(18446744073709551615ULL)),
      json::value(INT64_MIN),
      json::value(nullptr),
      json::value(true),
      json::value(false),
      json::value(""),
      json::object{},
      json::array{},
      json::parse(R"({"deep":[[[[[[[[[[{"x":[1,{"y":null}]}]]]]]]]]]]})"),
      json::parse(R"({"</script>":"<>&'","emoji":"\ud83d\ude00"})"),
  };
  std::vector<std::string> ids;
  for (const json::value& p : payloads) ids.push_back(MustPush("q", p));
  json::array jobs = MustFetch("q", "w", 100);
  ASSERT_EQ(jobs.size(), payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(StrField(jobs[i], "id"), ids[i]);
    EXPECT_EQ(jobs[i].at("payload"), payloads[i])
        << "sent " << json::serialize(payloads[i]) << ", got "
        << json::serialize(jobs[i].at("payload"));
  }
  // The same in the dead-letter list.
  HttpResult dead_push = client().Push("d", payloads[0], {{"max_attempts", 1}});
  ASSERT_EQ(dead_push.status, 201);
  json::array d = MustFetch("d", "w");
  ASSERT_EQ(d.size(), 1u);
  ASSERT_EQ(client().Nack("d", {LeaseOf(d[0])}).status, 200);
  HttpResult dead = Get(Path("d", "/dead"));
  ASSERT_EQ(dead.status, 200) << dead.body;
  ASSERT_EQ(dead.json.at("jobs").as_array().size(), 1u);
  EXPECT_EQ(dead.json.at("jobs").at(0).at("payload"), payloads[0]) << dead.body;
}

// Payloads come back as sent, numbers byte for byte (whitespace between tokens goes), in fetch
// answers and in the dead-letter list.
TEST_F(QueuesHttpTest, PayloadsComeBackWithEveryNumberAsSent) {
  std::vector<std::pair<std::string, std::string>> payloads = ExactPayloads();
  payloads.emplace_back(R"({"n": [1.10, 2], "s": "t\u00e9"})",
                        "{\"n\":[1.10,2],\"s\":\"t\xc3\xa9\"}");
  std::string batch = R"({"jobs": [)";
  for (size_t i = 0; i < payloads.size(); ++i) {
    HttpResult one = Post(Path("one", "/jobs"), R"({"payload": )" + payloads[i].first + "}");
    EXPECT_EQ(one.status, 201) << payloads[i].first << ": " << one.body << one.error;
    batch += std::string(i ? "," : "") + R"({"payload": )" + payloads[i].first + "}";
  }
  HttpResult pushed = Post(Path("many", "/jobs"), batch + "]}");
  ASSERT_EQ(pushed.status, 201) << pushed.body << pushed.error;
  for (std::string_view q : {"one", "many"}) {
    HttpResult fetched = Post(Path(q, "/fetch"), R"({"worker": "w", "max": 100})");
    ASSERT_EQ(fetched.status, 200) << fetched.body;
    ASSERT_TRUE(fetched.json.is_object()) << "not JSON: " << fetched.body;
    ASSERT_EQ(fetched.json.at("jobs").as_array().size(), payloads.size()) << fetched.body;
    for (size_t i = 0; i < payloads.size(); ++i) {
      EXPECT_EQ(PayloadText(fetched.body, i), payloads[i].second) << q << " job " << i;
    }
  }

  HttpResult doomed = Post(Path("dead", "/jobs"),
                           R"({"payload": [100000000000000000000001, 1.10], "max_attempts": 1})");
  ASSERT_EQ(doomed.status, 201) << doomed.body;
  json::array jobs = MustFetch("dead", "w");
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_EQ(client().Nack("dead", {LeaseOf(jobs[0])}, std::nullopt, "no").status, 200);
  HttpResult dead = Get(Path("dead", "/dead"));
  ASSERT_EQ(dead.status, 200) << dead.body;
  ASSERT_TRUE(dead.json.is_object()) << "not JSON: " << dead.body;
  EXPECT_EQ(PayloadText(dead.body), "[100000000000000000000001,1.10]") << dead.body;
}

TEST_F(QueuesHttpTest, BoundaryValuesAreAccepted) {
  EXPECT_EQ(client().Push("q", 1, {{"priority", INT32_MAX}}).status, 201);
  EXPECT_EQ(client().Push("q", 2, {{"priority", INT32_MIN}}).status, 201);
  EXPECT_EQ(client().Push("q", 3, {{"max_attempts", 1}}).status, 201);
  EXPECT_EQ(client().Push("q", 4, {{"max_attempts", 1000}}).status, 201);
  EXPECT_EQ(client().Push("q", 5, {{"delay_ms", 0}}).status, 201);
  std::string longest(kMaxNameBytes, 'k');
  EXPECT_EQ(client().Push("q", 6, {{"dedupe_key", longest}}).status, 201);
  // A payload of exactly 1 MiB as serialized JSON (a string: its bytes plus two quotes).
  std::string mib(1024 * 1024 - 2, 'x');
  HttpResult big = client().Push("q", json::value(mib));
  EXPECT_EQ(big.status, 201) << big.body;
  ExpectCounts("q", 7, 0, 0, 0);

  json::array jobs = MustFetch("q", "w", 1000, 43'200'000);
  ASSERT_EQ(jobs.size(), 7u);
  EXPECT_EQ(IntField(jobs[0], "priority"), INT32_MAX);
  EXPECT_EQ(IntField(jobs[6], "priority"), INT32_MIN) << "the lowest priority comes last";
  EXPECT_EQ(jobs[5].at("payload"), json::value(mib));
  MustPush("short", "x");
  EXPECT_EQ(MustFetch("short", "w", 1, 100).size(), 1u);

  // A queue name of 128 bytes.
  std::string name(kMaxNameBytes, 'Q');
  name[1] = '.';
  name[2] = ':';
  name[3] = '-';
  name[4] = '_';
  MustPush(name, "x");
  EXPECT_TRUE(IsStats(Stats(name), name));
}

// ---- fetch ---------------------------------------------------------------------------------

TEST_F(QueuesHttpTest, FetchAnswersJobsInDeliveryOrderWithEveryField) {
  std::string low = MustPush("q", "low", {{"priority", -1}});
  std::string a = MustPush("q", "a");
  std::string hi = MustPush("q", "hi", {{"priority", 7}});
  std::string b = MustPush("q", "b");
  int64_t before = WallNowMs();
  json::array jobs = MustFetch("q", "w", 10, 5'000);
  int64_t after = WallNowMs();
  ASSERT_EQ(jobs.size(), 4u);
  std::vector<std::string> ids;
  for (const json::value& j : jobs) {
    EXPECT_EQ(Keys(j), (std::set<std::string>{"id", "payload", "attempt", "lease",
                                              "lease_expires_ms", "priority"}))
        << json::serialize(j);
    EXPECT_TRUE(IsDecimalId(j.at("id"))) << json::serialize(j);
    ids.push_back(StrField(j, "id").value_or(""));
    EXPECT_EQ(IntField(j, "attempt"), 1);
    std::string lease = LeaseOf(j);
    EXPECT_TRUE(std::regex_match(lease, std::regex(R"(\d+\.\d+\.[A-Za-z0-9_-]+)"))) << lease;
    EXPECT_EQ(lease.substr(0, lease.find('.')), ids.back()) << "<id>.<delivery>.<tag>";
    auto expires = IntField(j, "lease_expires_ms");
    ASSERT_TRUE(expires.has_value());
    EXPECT_GE(*expires, before + 5'000 - 100) << "absolute ms since the epoch";
    EXPECT_LE(*expires, after + 5'000 + 100);
  }
  EXPECT_EQ(ids, (std::vector<std::string>{hi, a, b, low}));
  EXPECT_EQ(IntField(jobs[0], "priority"), 7);
  EXPECT_EQ(IntField(jobs[1], "priority"), 0);
  EXPECT_EQ(IntField(jobs[3], "priority"), -1);
  EXPECT_EQ(jobs[0].at("payload"), json::value("hi"));
  ExpectCounts("q", 0, 0, 4, 0);
  EXPECT_TRUE(MustFetch("q", "w2", 10).empty()) << "leased jobs are not handed out again";
}

TEST_F(QueuesHttpTest, FetchDefaultsToOneJobAndA30sLease) {
  MustPush("q", 1);
  MustPush("q", 2);
  int64_t before = WallNowMs();
  HttpResult r = Post(Path("q", "/fetch"), R"({"worker":"w"})");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json.at("jobs").as_array().size(), 1u);
  auto expires = IntField(r.json.at("jobs").at(0), "lease_expires_ms");
  ASSERT_TRUE(expires);
  EXPECT_GE(*expires, before + 30'000 - 100);
  EXPECT_LE(*expires, WallNowMs() + 30'000 + 100);
}

TEST_F(QueuesHttpTest, AQueueNobodyPushedToAnswersEmptyNot404) {
  json::array jobs = MustFetch("fresh", "w", 10);
  EXPECT_TRUE(jobs.empty());
  json::value s = Stats("fresh");
  EXPECT_EQ(s,
            json::parse(
                R"({"queue":"fresh","waiting_deps":0,"ready":0,"delayed":0,"inflight":0,"dead":0,)"
                R"("pushed":0,"acked":0,"nacked":0,"expired":0,"cancelled":0,)"
                R"("workers":0,"paused":false})"));
  HttpResult inflight = Get(Path("fresh", "/inflight"));
  EXPECT_EQ(inflight.status, 200) << inflight.body;
  EXPECT_EQ(inflight.json, json::parse(R"({"jobs":[]})"));
  HttpResult dead = Get(Path("fresh", "/dead"));
  EXPECT_EQ(dead.status, 200) << dead.body;
  EXPECT_EQ(dead.json, json::parse(R"({"jobs":[]})"));
  HttpResult list = client().ListQueues();
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(list.json, json::parse(R"({"queues":[]})")) << "reads create no queue";
}

// ---- ack, nack, extend ---------------------------------------------------------------------

TEST_F(QueuesHttpTest, AckAnswersPerItemResults) {
  MustPush("q", "a");
  MustPush("q", "b");
  json::array jobs = MustFetch("q", "w", 2);
  ASSERT_EQ(jobs.size(), 2u);
  std::string la = LeaseOf(jobs[0]);
  std::string lb = LeaseOf(jobs[1]);
  std::string forged = la;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  std::string other = la.substr(0, la.find('.')) + ".77" + la.substr(la.rfind('.'));
  std::vector<std::string> leases = {la, forged, "not-a-lease", other, "1.1", la};
  EXPECT_TRUE(
      HasResults(client().Ack("q", leases), leases,
                 {"", "invalid_lease", "invalid_lease", "invalid_lease", "invalid_lease", ""}));
  json::value s = Stats("q");
  EXPECT_EQ(IntField(s, "acked"), 1) << "a repeated ack counts once";
  EXPECT_EQ(IntField(s, "inflight"), 1);
  // Acked again in a later request: ok, nothing counted.
  EXPECT_TRUE(HasResults(client().Ack("q", {la}), {la}, {""}));
  EXPECT_EQ(IntField(Stats("q"), "acked"), 1);
  EXPECT_TRUE(HasResults(client().Ack("q", {lb}), {lb}, {""}));
  ExpectCounts("q", 0, 0, 0, 0);
  EXPECT_EQ(IntField(Stats("q"), "acked"), 2);
}

TEST_F(QueuesHttpTest, FetchWithAckAcksFirstAndAnswersTheOutcomes) {
  MustPush("q", "a");
  MustPush("q", "b");
  json::array first = MustFetch("q", "w");
  ASSERT_EQ(first.size(), 1u);
  std::string la = LeaseOf(first[0]);
  std::string odd = "quote\"and\\backslash";  // echoed back as valid JSON
  HttpResult r = client().Fetch("q", "w", 1, 30'000, 0, {la, odd, la});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Keys(r.json), (std::set<std::string>{"jobs", "acked"})) << r.body;
  HttpResult as_results = r;
  as_results.json = json::object{{"results", r.json.at("acked")}};
  EXPECT_TRUE(HasResults(as_results, {la, odd, la}, {"", "invalid_lease", ""}));
  const json::array& jobs = r.json.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(json::serialize(jobs[0].at("payload")), "\"b\"");
  json::value s = Stats("q");
  EXPECT_EQ(IntField(s, "acked"), 1);
  ExpectCounts("q", 0, 0, 1, 0);
  // An empty ack list is allowed and answers an empty "acked".
  HttpResult empty = Post(Path("q", "/fetch"), R"({"worker":"w","ack":[]})");
  ASSERT_EQ(empty.status, 200) << empty.body;
  EXPECT_EQ(json::serialize(empty.json.at("acked")), "[]");
  // Without "ack" the answer has no "acked".
  EXPECT_EQ(Keys(Post(Path("q", "/fetch"), R"({"worker":"w"})").json),
            std::set<std::string>{"jobs"});
}

TEST_F(QueuesHttpTest, StaleLeasesAreLost) {
  std::string id = MustPush("q", "job");
  json::array first = MustFetch("q", "w1");
  ASSERT_EQ(first.size(), 1u);
  std::string stale = LeaseOf(first[0]);
  HttpResult release = Post(Path("q", "/workers/w1/release"), "");
  ASSERT_EQ(release.status, 200) << release.body;
  EXPECT_EQ(release.json, json::parse(R"({"count":1})"));
  json::array second = MustFetch("q", "w2");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(StrField(second[0], "id"), id);
  EXPECT_EQ(IntField(second[0], "attempt"), 2);
  EXPECT_TRUE(HasResults(client().Ack("q", {stale}), {stale}, {"lease_lost"}));
  EXPECT_TRUE(HasResults(client().Nack("q", {stale}), {stale}, {"lease_lost"}));
  EXPECT_TRUE(HasResults(client().Extend("q", {stale}, 1'000), {stale}, {"lease_lost"}));
  json::value s = Stats("q");
  EXPECT_EQ(IntField(s, "inflight"), 1);
  EXPECT_EQ(IntField(s, "acked"), 0);
  EXPECT_EQ(IntField(s, "nacked"), 0);
  std::string fresh = LeaseOf(second[0]);
  EXPECT_TRUE(HasResults(client().Ack("q", {stale, fresh}), {stale, fresh}, {"lease_lost", ""}));
  EXPECT_EQ(IntField(Stats("q"), "acked"), 1);
}

TEST_F(QueuesHttpTest, NackWithDelayAndError) {
  MustPush("q", "job", {{"max_attempts", 3}});
  json::array jobs = MustFetch("q", "w");
  ASSERT_EQ(jobs.size(), 1u);
  std::string lease = LeaseOf(jobs[0]);
  HttpResult r = client().Nack("q", {lease, "junk"}, 60'000, "it broke");
  EXPECT_TRUE(HasResults(r, {lease, "junk"}, {"", "invalid_lease"}));
  ExpectCounts("q", 0, 1, 0, 0);
  EXPECT_EQ(IntField(Stats("q"), "nacked"), 1);
  EXPECT_TRUE(MustFetch("q", "w").empty());
  // Without delay_ms: backoff, so not ready at once either.
  MustPush("r", "job");
  json::array rj = MustFetch("r", "w");
  ASSERT_EQ(rj.size(), 1u);
  EXPECT_TRUE(HasResults(client().Nack("r", {LeaseOf(rj[0])}), {LeaseOf(rj[0])}, {""}));
  ExpectCounts("r", 0, 1, 0, 0);
  // delay_ms 0: ready now, attempt 2 next.
  MustPush("s", "job");
  json::array sj = MustFetch("s", "w");
  ASSERT_EQ(sj.size(), 1u);
  EXPECT_TRUE(HasResults(client().Nack("s", {LeaseOf(sj[0])}, 0), {LeaseOf(sj[0])}, {""}));
  json::array again = MustFetch("s", "w");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(IntField(again[0], "attempt"), 2);
}

TEST_F(QueuesHttpTest, ExtendMovesTheLeaseAndDefaultsTo30s) {
  MustPush("q", "job");
  json::array jobs = MustFetch("q", "w", 1, 1'000);
  ASSERT_EQ(jobs.size(), 1u);
  std::string lease = LeaseOf(jobs[0]);
  int64_t before = WallNowMs();
  EXPECT_TRUE(HasResults(client().Extend("q", {lease}, 600'000), {lease}, {""}));
  HttpResult inflight = Get(Path("q", "/inflight"));
  ASSERT_EQ(inflight.status, 200);
  auto expires = IntField(inflight.json.at("jobs").at(0), "lease_expires_ms");
  ASSERT_TRUE(expires);
  EXPECT_GE(*expires, before + 600'000 - 100);
  EXPECT_LE(*expires, WallNowMs() + 600'000 + 100);

  before = WallNowMs();
  HttpResult r = Post(Path("q", "/extend"), R"({"leases":[")" + lease + R"("]})");
  EXPECT_TRUE(HasResults(r, {lease}, {""}));
  inflight = Get(Path("q", "/inflight"));
  expires = IntField(inflight.json.at("jobs").at(0), "lease_expires_ms");
  ASSERT_TRUE(expires);
  EXPECT_GE(*expires, before + 30'000 - 100);
  EXPECT_LE(*expires, WallNowMs() + 30'000 + 100);
}

// ---- stats and lists -----------------------------------------------------------------------

TEST_F(QueuesHttpTest, StatsCountEveryState) {
  MustPush("q", 1);
  MustPush("q", 2, {{"delay_ms", 600'000}});
  MustPush("q", 3, {{"max_attempts", 1}});
  MustPush("q", 4);
  MustPush("q", 5);
  MustPush("q", 6);
  json::array jobs = MustFetch("q", "w", 3);  // 1, 3, 4
  ASSERT_EQ(jobs.size(), 3u);
  ASSERT_TRUE(HasResults(client().Ack("q", {LeaseOf(jobs[0])}), {LeaseOf(jobs[0])}, {""}));
  ASSERT_EQ(client().Nack("q", {LeaseOf(jobs[1])}, 0, "x").status, 200);
  std::string later = MustPush("q", 7);
  ASSERT_EQ(client().Request("DELETE", Path("q", "/jobs/" + later)).status, 200);
  HttpResult hb = Post(Path("q", "/workers/idle/heartbeat"), R"({"ttl_ms":60000})");
  ASSERT_EQ(hb.status, 200) << hb.body;
  json::value s = Stats("q");
  EXPECT_EQ(
      s, json::parse(R"({"queue":"q","waiting_deps":0,"ready":2,"delayed":1,"inflight":1,"dead":1,)"
                     R"("pushed":7,"acked":1,"nacked":1,"expired":0,"cancelled":1,)"
                     R"("workers":2,"paused":false})"))
      << json::serialize(s);
}

TEST_F(QueuesHttpTest, ListQueuesShowsQueuesPushedTo) {
  MustPush("b", 1);
  MustPush("a", 1);
  MustPush("a", 2);
  MustFetch("fetched-only", "w");
  ASSERT_EQ(Post(Path("beat-only", "/workers/w/heartbeat"), R"({"ttl_ms":1000})").status, 200);
  HttpResult r = client().ListQueues();
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(Keys(r.json), std::set<std::string>{"queues"});
  std::set<std::string> names;
  for (const json::value& q : r.json.at("queues").as_array()) {
    std::string name = StrField(q, "queue").value_or("");
    EXPECT_TRUE(IsStats(q, name));
    names.insert(name);
    if (name == "a") {
      EXPECT_EQ(IntField(q, "ready"), 2);
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"a", "b"})) << r.body;
}

TEST_F(QueuesHttpTest, InflightListsJobsByWorker) {
  MustPush("q", 1);
  MustPush("q", 2);
  MustPush("q", 3);
  json::array w1 = MustFetch("q", "w1", 2, 10'000);
  json::array w2 = MustFetch("q", "w2", 1, 20'000);
  ASSERT_EQ(w1.size(), 2u);
  ASSERT_EQ(w2.size(), 1u);
  HttpResult mine = Get(Path("q", "/inflight?worker=w1"));
  ASSERT_EQ(mine.status, 200) << mine.body;
  ASSERT_EQ(Keys(mine.json), std::set<std::string>{"jobs"});
  const json::array& jobs = mine.json.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 2u);
  std::set<std::string> ids;
  for (const json::value& j : jobs) {
    EXPECT_EQ(Keys(j), (std::set<std::string>{"id", "worker", "attempt", "lease_expires_ms"}))
        << mine.body;
    EXPECT_TRUE(IsDecimalId(j.at("id")));
    EXPECT_EQ(StrField(j, "worker"), "w1");
    EXPECT_EQ(IntField(j, "attempt"), 1);
    ids.insert(StrField(j, "id").value_or(""));
  }
  EXPECT_EQ(ids, (std::set<std::string>{*StrField(w1[0], "id"), *StrField(w1[1], "id")}));
  EXPECT_EQ(IntField(jobs[0], "lease_expires_ms"), IntField(w1[0], "lease_expires_ms"));
  HttpResult theirs = Get(Path("q", "/inflight?worker=w2"));
  ASSERT_EQ(theirs.json.at("jobs").as_array().size(), 1u);
  EXPECT_EQ(StrField(theirs.json.at("jobs").at(0), "worker"), "w2");
  EXPECT_EQ(Get(Path("q", "/inflight")).json.at("jobs").as_array().size(), 3u);
  EXPECT_EQ(Get(Path("q", "/inflight?worker=nobody")).json, json::parse(R"({"jobs":[]})"));
}

// ---- workers, pause, dead letters, cancel --------------------------------------------------

TEST_F(QueuesHttpTest, HeartbeatAndRelease) {
  MustPush("q", "a");
  MustPush("q", "b");
  MustPush("q", "c");
  HttpResult hb = Post(Path("q", "/workers/w/heartbeat"), R"({"ttl_ms":60000})");
  ASSERT_EQ(hb.status, 200) << hb.body;
  EXPECT_EQ(IntField(Stats("q"), "workers"), 1);
  ASSERT_EQ(MustFetch("q", "w", 2).size(), 2u);
  HttpResult release = Post(Path("q", "/workers/w/release"), "");
  ASSERT_EQ(release.status, 200) << release.body;
  EXPECT_EQ(release.json, json::parse(R"({"count":2})"));
  ExpectCounts("q", 3, 0, 0, 0);
  json::array again = MustFetch("q", "x", 3);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again[0].at("payload"), json::value("a"));
  EXPECT_EQ(IntField(again[0], "attempt"), 2);
  EXPECT_EQ(IntField(again[2], "attempt"), 1);
  release = Post(Path("q", "/workers/nobody/release"), "");
  EXPECT_EQ(release.json, json::parse(R"({"count":0})"));
}

TEST_F(QueuesHttpTest, PausedQueueAcceptsPushesAndHandsOutNothing) {
  MustPush("q", "before");
  HttpResult paused = Post(Path("q", "/pause"), "");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_TRUE(IsStats(paused.json, "q"));
  EXPECT_EQ(BoolField(paused.json, "paused"), true);
  EXPECT_EQ(BoolField(Stats("q"), "paused"), true);
  MustPush("q", "during");
  EXPECT_TRUE(MustFetch("q", "w", 10).empty());
  ExpectCounts("q", 2, 0, 0, 0);
  HttpResult resumed = Post(Path("q", "/resume"), "");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(BoolField(resumed.json, "paused"), false);
  EXPECT_EQ(MustFetch("q", "w", 10).size(), 2u);
}

TEST_F(QueuesHttpTest, DeadLettersAndRequeue) {
  std::vector<std::string> ids;
  for (const char* p : {"a", "b", "c"}) {
    ids.push_back(MustPush("q", p, {{"max_attempts", 1}}));
    json::array j = MustFetch("q", "w");
    ASSERT_EQ(j.size(), 1u);
    ASSERT_TRUE(HasResults(client().Nack("q", {LeaseOf(j[0])}, 0, std::string("boom ") + p),
                           {LeaseOf(j[0])}, {""}));
  }
  int64_t now = WallNowMs();
  ExpectCounts("q", 0, 0, 0, 3);
  HttpResult dead = Get(Path("q", "/dead?limit=2"));
  ASSERT_EQ(dead.status, 200) << dead.body;
  ASSERT_EQ(Keys(dead.json), std::set<std::string>{"jobs"});
  const json::array& jobs = dead.json.at("jobs").as_array();
  ASSERT_EQ(jobs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    std::set<std::string> keys = Keys(jobs[i]);
    for (const char* k : {"id", "payload", "attempts", "error", "failed_at_ms"}) {
      EXPECT_EQ(keys.count(k), 1u) << k << " missing: " << dead.body;
    }
    EXPECT_EQ(StrField(jobs[i], "id"), ids[i]);
    EXPECT_EQ(IntField(jobs[i], "attempts"), 1);
    EXPECT_EQ(StrField(jobs[i], "error"), std::string("boom ") + "ab"[i]);
    auto failed_at = IntField(jobs[i], "failed_at_ms");
    ASSERT_TRUE(failed_at);
    EXPECT_LE(*failed_at, now + 100);
    EXPECT_GE(*failed_at, now - 10'000);
  }
  EXPECT_EQ(jobs[0].at("payload"), json::value("a"));
  EXPECT_EQ(Get(Path("q", "/dead")).json.at("jobs").as_array().size(), 3u);

  HttpResult some = Post(Path("q", "/dead/requeue"), R"({"ids":[")" + ids[1] + R"(", "999999"]})");
  ASSERT_EQ(some.status, 200) << some.body;
  EXPECT_EQ(some.json, json::parse(R"({"count":1})"));
  ExpectCounts("q", 1, 0, 0, 2);
  json::array back = MustFetch("q", "w");
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(StrField(back[0], "id"), ids[1]);
  EXPECT_EQ(IntField(back[0], "attempt"), 1) << "a requeued job starts again from 1";
  HttpResult all = Post(Path("q", "/dead/requeue"), "");
  ASSERT_EQ(all.status, 200) << all.body;
  EXPECT_EQ(all.json, json::parse(R"({"count":2})"));
  ExpectCounts("q", 2, 0, 1, 0);
  EXPECT_EQ(Post(Path("q", "/dead/requeue"), "{}").json, json::parse(R"({"count":0})"));
}

TEST_F(QueuesHttpTest, DeleteCancelsReadyAndDelayedJobsOnly) {
  std::string leased = MustPush("q", "leased");
  std::string delayed = MustPush("q", "delayed", {{"delay_ms", 600'000}});
  std::string ready = MustPush("q", "ready");
  ASSERT_EQ(MustFetch("q", "w").size(), 1u);
  HttpResult r = client().Request("DELETE", Path("q", "/jobs/" + leased));
  EXPECT_TRUE(IsError(r, 409, "conflict"));
  r = client().Request("DELETE", Path("q", "/jobs/" + ready));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json, json::parse(R"({"count":1})"));
  r = client().Request("DELETE", Path("q", "/jobs/" + delayed));
  EXPECT_EQ(r.json, json::parse(R"({"count":1})"));
  EXPECT_TRUE(
      IsError(client().Request("DELETE", Path("q", "/jobs/" + delayed)), 404, "unknown_job"));
  EXPECT_TRUE(IsError(client().Request("DELETE", Path("q", "/jobs/424242")), 404, "unknown_job"));
  EXPECT_TRUE(IsError(client().Request("DELETE", Path("q", "/jobs/abc")), 404, "unknown_job"));
  EXPECT_TRUE(IsError(client().Request("DELETE", Path("nobody", "/jobs/1")), 404, "unknown_job"));
  ExpectCounts("q", 0, 0, 1, 0);
  EXPECT_EQ(IntField(Stats("q"), "cancelled"), 2);
}

// ---- bad input: a clear 4xx and no change of state -----------------------------------------

class QueueBadInputTest : public QueuesHttpTest {
 protected:
  void SetUp() override {
    QueuesHttpTest::SetUp();
    if (HasFatalFailure()) return;
    MustPush("q", "first");
    MustPush("q", "second", {{"dedupe_key", "k"}});
    json::array jobs = MustFetch("q", "w", 1, 600'000);
    ASSERT_EQ(jobs.size(), 1u);
    lease_ = LeaseOf(jobs[0]);
    before_ = Snapshot("q");
    list_before_ = ListSnapshot();
  }

  // The request is refused with `status` and `code`, and nothing changed.
  void ExpectRefused(const std::string& method, const std::string& path, std::string_view body,
                     int status, std::string_view code) {
    HttpResult r = client().Request(method, path, body);
    EXPECT_TRUE(IsError(r, status, code))
        << method << " " << path << " " << std::string(body.substr(0, 200));
    EXPECT_EQ(Snapshot("q"), before_)
        << method << " " << path << " " << std::string(body.substr(0, 200));
    EXPECT_EQ(ListSnapshot(), list_before_) << method << " " << path;
  }
  void ExpectBadPush(std::string_view body, int status = 400,
                     std::string_view code = "invalid_argument") {
    ExpectRefused("POST", Path("q", "/jobs"), body, status, code);
  }
  void ExpectBadFetch(std::string_view body) {
    ExpectRefused("POST", Path("q", "/fetch"), body, 400, "invalid_argument");
  }

  std::string lease_;
  std::string before_;
  std::string list_before_;
};

TEST_F(QueueBadInputTest, PushWithoutPayloadOrWithWrongTypes) {
  ExpectBadPush("{}");
  ExpectBadPush(R"({"priority":1})");
  ExpectBadPush(R"({"payload":1,"priority":"1"})");
  ExpectBadPush(R"({"payload":1,"priority":1.5})");
  ExpectBadPush(R"({"payload":1,"priority":true})");
  ExpectBadPush(R"({"payload":1,"delay_ms":"5"})");
  ExpectBadPush(R"({"payload":1,"delay_ms":-1})");
  ExpectBadPush(R"({"payload":1,"max_attempts":"3"})");
  ExpectBadPush(R"({"payload":1,"dedupe_key":5})");
  ExpectBadPush(R"({"payload":1,"dedupe_key":""})");
  ExpectBadPush(R"({"payload":1,"dedupe_key":"has space"})");
  ExpectBadPush(R"({"payload":1,"dedupe_key":")" + std::string(kMaxNameBytes + 1, 'k') + "\"}");
  ExpectBadPush("not json", 400, "invalid_json");
  ExpectBadPush("[1,2]", 400, "invalid_json");
  ExpectBadPush("", 400, "invalid_json");
}

TEST_F(QueueBadInputTest, PushOutOfRange) {
  ExpectBadPush(R"({"payload":1,"priority":2147483648})");
  ExpectBadPush(R"({"payload":1,"priority":-2147483649})");
  ExpectBadPush(R"({"payload":1,"priority":18446744073709551615})");
  ExpectBadPush(R"({"payload":1,"max_attempts":0})");
  ExpectBadPush(R"({"payload":1,"max_attempts":1001})");
  ExpectBadPush(R"({"payload":1,"max_attempts":-1})");
}

TEST_F(QueueBadInputTest, BatchesAreAllOrNothing) {
  json::array many;
  for (int i = 0; i < 1001; ++i) many.push_back(json::object{{"payload", i}});
  ExpectBadPush(json::serialize(json::object{{"jobs", many}}));
  ExpectBadPush(R"({"jobs":[]})");
  ExpectBadPush(R"({"jobs":{"payload":1}})");
  ExpectBadPush(R"({"jobs":[{"payload":1},{"payload":2},{"payload":3,"priority":"x"}]})");
  ExpectBadPush(R"({"jobs":[{"payload":1},{"nopayload":2}]})");
  ExpectBadPush(R"({"jobs":[{"payload":1},{"payload":2,"max_attempts":0}]})");
  ExpectBadPush(R"({"jobs":[{"payload":1,"dedupe_key":"new"},7]})");
  // A batch whose second job is over 1 MiB: 413, and the first is not enqueued either.
  json::array big{json::object{{"payload", "small"}},
                  json::object{{"payload", std::string(2 * 1024 * 1024, 'x')}}};
  ExpectBadPush(json::serialize(json::object{{"jobs", big}}), 413, "payload_too_large");
}

// A number beyond every double has no value a consumer could read: refused, all or nothing.
TEST_F(QueueBadInputTest, NonFiniteNumbersAreRefused) {
  ExpectBadPush(R"({"payload": 1e400})");
  ExpectBadPush(R"({"payload": -1e400})");
  ExpectBadPush(R"({"payload": {"a": [1, 1E999]}})");
  ExpectBadPush(R"({"jobs": [{"payload": 1.5}, {"payload": 1e400}, {"payload": 3}]})");
  HttpResult r = Post(Path("q", "/jobs"), R"({"jobs": [{"payload": 1}, {"payload": -1e400}]})");
  EXPECT_EQ(StrField(r.json.at("error"), "message"), wire::JobAt(1, wire::kPayloadNotFinite))
      << r.body;
  HttpResult fresh = Post(Path("fresh", "/jobs"), R"({"payload": 1e400})");
  EXPECT_EQ(fresh.status, 400) << fresh.body;
  EXPECT_EQ(IntField(Stats("fresh"), "ready"), 0);
  EXPECT_EQ(IntField(Stats("fresh"), "pushed"), 0);
}

TEST_F(QueueBadInputTest, PayloadsOver1MiBAre413) {
  ExpectBadPush(json::serialize(json::object{{"payload", std::string(2 * 1024 * 1024, 'x')}}), 413,
                "payload_too_large");
  // One byte over: a string of 1 MiB - 1 bytes serializes to 1 MiB + 1.
  ExpectBadPush(json::serialize(json::object{{"payload", std::string(1024 * 1024 - 1, 'x')}}), 413,
                "payload_too_large");
  json::array nested;
  for (int i = 0; i < 300; ++i) nested.emplace_back(std::string(4096, 'y'));
  ExpectBadPush(json::serialize(json::object{{"payload", json::object{{"n", nested}}}}), 413,
                "payload_too_large");
}

TEST_F(QueueBadInputTest, FetchOutOfRangeOrWrongTypes) {
  ExpectBadFetch(R"({"worker":"w","wait_ms":60001})");
  ExpectBadFetch(R"({"worker":"w","wait_ms":-1})");
  ExpectBadFetch(R"({"worker":"w","wait_ms":"10"})");
  ExpectBadFetch(R"({"worker":"w","lease_ms":99})");
  ExpectBadFetch(R"({"worker":"w","lease_ms":43200001})");
  ExpectBadFetch(R"({"worker":"w","lease_ms":"1000"})");
  ExpectBadFetch(R"({"worker":"w","max":0})");
  ExpectBadFetch(R"({"worker":"w","max":1001})");
  ExpectBadFetch(R"({"worker":"w","max":2.0})");
  ExpectBadFetch(R"({"max":1})");
  ExpectBadFetch(R"({"worker":7})");
  ExpectBadFetch(R"({"worker":""})");
  ExpectBadFetch(R"({"worker":"a b"})");
  ExpectBadFetch(R"({"worker":")" + std::string(kMaxNameBytes + 1, 'w') + "\"}");
  ExpectRefused("POST", Path("q", "/fetch"), "{", 400, "invalid_json");
}

TEST_F(QueueBadInputTest, FetchAckMustBeUpTo1000Strings) {
  ExpectBadFetch(R"({"worker":"w","ack":")" + lease_ + "\"}");
  ExpectBadFetch(R"({"worker":"w","ack":[")" + lease_ + R"(",5]})");
  ExpectBadFetch(R"({"worker":"w","ack":null})");
  json::array many;
  many.push_back(json::value(lease_));
  for (int i = 0; i < 1000; ++i) many.push_back(json::value("x"));
  ExpectBadFetch(json::serialize(json::object{{"worker", "w"}, {"ack", many}}));
  // A bad fetch field next to a good ack: nothing is acked either.
  ExpectBadFetch(R"({"worker":"w","max":0,"ack":[")" + lease_ + R"("]})");
}

TEST_F(QueueBadInputTest, LeaseListsMustBe1To1000Strings) {
  for (const char* route : {"/ack", "/nack", "/extend"}) {
    std::string path = Path("q", route);
    ExpectRefused("POST", path, "{}", 400, "invalid_argument");
    ExpectRefused("POST", path, R"({"leases":[]})", 400, "invalid_argument");
    ExpectRefused("POST", path, R"({"leases":")" + lease_ + "\"}", 400, "invalid_argument");
    // A valid lease next to a bad item: the whole request is refused, the job stays leased.
    ExpectRefused("POST", path, R"({"leases":[")" + lease_ + R"(",5]})", 400, "invalid_argument");
    ExpectRefused("POST", path, R"({"leases":[")" + lease_ + R"(",null]})", 400,
                  "invalid_argument");
    json::array many;
    many.push_back(json::value(lease_));
    for (int i = 0; i < 1000; ++i) many.push_back(json::value("x"));
    ExpectRefused("POST", path, json::serialize(json::object{{"leases", many}}), 400,
                  "invalid_argument");
  }
  ExpectRefused("POST", Path("q", "/extend"), R"({"leases":[")" + lease_ + R"("],"lease_ms":99})",
                400, "invalid_argument");
  ExpectRefused("POST", Path("q", "/extend"),
                R"({"leases":[")" + lease_ + R"("],"lease_ms":43200001})", 400, "invalid_argument");
  ExpectRefused("POST", Path("q", "/nack"), R"({"leases":[")" + lease_ + R"("],"delay_ms":-1})",
                400, "invalid_argument");
  ExpectRefused("POST", Path("q", "/nack"), R"({"leases":[")" + lease_ + R"("],"error":5})", 400,
                "invalid_argument");
  // 1000 leases is the most: accepted, each item answered.
  json::array most;
  for (int i = 0; i < 1000; ++i) most.push_back(json::value("x"));
  HttpResult r = Post(Path("q", "/ack"), json::serialize(json::object{{"leases", most}}));
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 200);
  EXPECT_EQ(r.json.at("results").as_array().size(), 1000u);
  EXPECT_EQ(Snapshot("q"), before_);
}

TEST_F(QueueBadInputTest, NamesOver128Bytes) {
  std::string long_name(kMaxNameBytes + 1, 'n');
  ExpectRefused("POST", Path(long_name, "/jobs"), R"({"payload":1})", 400, "invalid_argument");
  ExpectRefused("POST", Path(long_name, "/fetch"), R"({"worker":"w"})", 400, "invalid_argument");
  ExpectRefused("GET", Path(long_name), "", 400, "invalid_argument");
  ExpectRefused("POST", Path("q", "/workers/" + long_name + "/heartbeat"), R"({"ttl_ms":1000})",
                400, "invalid_argument");
  ExpectRefused("POST", Path("q", "/workers/" + long_name + "/release"), "", 400,
                "invalid_argument");
  ExpectRefused("GET", Path("q", "/inflight?worker=" + long_name), "", 400, "invalid_argument");
  ExpectRefused("POST", Path("bad%20name", "/jobs"), R"({"payload":1})", 400, "invalid_argument");
}

TEST_F(QueueBadInputTest, HeartbeatNeedsATtl) {
  std::string path = Path("q", "/workers/w/heartbeat");
  ExpectRefused("POST", path, "{}", 400, "invalid_argument");
  ExpectRefused("POST", path, R"({"ttl_ms":0})", 400, "invalid_argument");
  ExpectRefused("POST", path, R"({"ttl_ms":"1000"})", 400, "invalid_argument");
}

TEST_F(QueueBadInputTest, DeadLimitAndRequeueIds) {
  ExpectRefused("GET", Path("q", "/dead?limit=0"), "", 400, "invalid_argument");
  ExpectRefused("GET", Path("q", "/dead?limit=abc"), "", 400, "invalid_argument");
  ExpectRefused("POST", Path("q", "/dead/requeue"), R"({"ids":"1"})", 400, "invalid_argument");
  ExpectRefused("POST", Path("q", "/dead/requeue"), R"({"ids":[true]})", 400, "invalid_argument");
}

// ---- the admin key -------------------------------------------------------------------------

constexpr char kAdminKey[] = "queue-admin-key";

// ---- limits, groups and snoozes --------------------------------------------------------------

TEST_F(QueueBadInputTest, SettingsOutOfShapeAreRefusedAndChangeNothing) {
  auto settings = [&] { return Get(Path("q", "/settings")).body; };
  std::string was = settings();
  for (std::string body : {
           R"({"fairness":"lifo"})",
           R"({"fairness":1})",
           R"({"limits":{}})",
           R"({"limits":[1]})",
           R"({"limits":[{"key":"tenant","concurrency":1}]})",
           R"({"limits":[{"key":"group","concurrency":1},{"key":"group","concurrency":2}]})",
           R"({"limits":[{"key":null}]})",
           R"({"limits":[{"key":null,"concurrency":0}]})",
           R"({"limits":[{"key":null,"concurrency":1000001}]})",
           R"({"limits":[{"key":null,"rate":{"limit":0,"period_ms":1000}}]})",
           R"({"limits":[{"key":null,"rate":{"limit":1,"period_ms":86400001}}]})",
           R"({"limits":[{"key":null,"rate":{"limit":1,"period_ms":1000,"burst":0}}]})",
           R"({"limits":[{"key":null,"rate":{"limit":1}}]})",
           R"({"limits":[{"key":null,"rate":{"limit":1,"period_ms":1000,"per":"s"}}]})",
           R"({"limits":[{"key":null,"concurrency":1,"weight":2}]})",
           R"({"limits":[{"key":null,"concurrency":1},{"key":null,"concurrency":1},)"
           R"({"key":"group","concurrency":1}]})",
           R"({"fairness":"fifo","extra":true})",
       }) {
    ExpectRefused("PUT", Path("q", "/settings"), body, 400, "invalid_argument");
  }
  ExpectRefused("PUT", Path("q", "/settings"), "[1]", 400, "invalid_json");
  EXPECT_EQ(settings(), was);
}

TEST_F(QueueBadInputTest, GroupsAndSnoozesOutOfShapeAreRefused) {
  ExpectBadPush(R"({"payload":1,"group":""})");
  ExpectBadPush(R"({"payload":1,"group":5})");
  ExpectBadPush(R"({"payload":1,"group":"has space"})");
  ExpectBadPush(R"({"payload":1,"group":")" + std::string(kMaxNameBytes + 1, 'g') + "\"}");
  json::array leases{json::value(lease_)};
  for (json::object body : {
           json::object{{"rate_limited", true}},
           json::object{{"rate_limited", true}, {"retry_after_ms", -1}},
           json::object{{"rate_limited", true}, {"retry_after_ms", 3'600'001}},
           json::object{{"rate_limited", "yes"}, {"retry_after_ms", 10}},
           json::object{{"retry_after_ms", 10}},
       }) {
    body["leases"] = leases;
    ExpectRefused("POST", Path("q", "/nack"), json::serialize(body), 400, "invalid_argument");
  }
}

TEST_F(QueuesHttpTest, SettingsAreSetReadAndReplacedWhole) {
  HttpResult fresh = Get(Path("q", "/settings"));
  ASSERT_EQ(fresh.status, 200) << fresh.body;
  EXPECT_EQ(fresh.json, json::parse(R"({"fairness":"fifo","limits":[],"queue":"q",)"
                                    R"("keep_acked":{"count":1000,"age_ms":86400000}})"));
  HttpResult put =
      client().Request("PUT", Path("q", "/settings"),
                       R"({"fairness":"round_robin","limits":[{"key":null,"concurrency":4},)"
                       R"({"key":"group","rate":{"limit":10,"period_ms":1000},"concurrency":2}]})");
  ASSERT_EQ(put.status, 200) << put.body;
  json::value want = json::parse(
      R"({"queue":"q","fairness":"round_robin","limits":[)"
      R"({"key":"group","rate":{"limit":10,"period_ms":1000,"burst":10},"concurrency":2},)"
      R"({"key":null,"concurrency":4}],"keep_acked":{"count":1000,"age_ms":86400000}})");
  EXPECT_EQ(put.json, want) << "burst defaults to the limit";
  EXPECT_EQ(Get(Path("q", "/settings")).json, want);
  // Replaced whole: what the body leaves out goes back to its default.
  ASSERT_EQ(client().Request("PUT", Path("q", "/settings"), "{}").status, 200);
  EXPECT_EQ(Get(Path("q", "/settings")).json, fresh.json);
  EXPECT_NE(ListSnapshot().find("\"q\""), std::string::npos) << "settings make the queue";
}

TEST_F(QueuesHttpTest, GroupsAreHeldToTheirConcurrencyAndNamedInDeliveries) {
  ASSERT_EQ(
      client()
          .Request("PUT", Path("q", "/settings"), R"({"limits":[{"key":"group","concurrency":1}]})")
          .status,
      200);
  MustPush("q", "a1", {{"group", "acme"}});
  MustPush("q", "a2", {{"group", "acme"}});
  MustPush("q", "b1", {{"group", "bolt"}});
  MustPush("q", "u1");
  json::array jobs = MustFetch("q", "w", 10);
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(StrField(jobs[0], "group"), "acme");
  EXPECT_EQ(StrField(jobs[1], "group"), "bolt");
  EXPECT_EQ(Keys(jobs[2]).count("group"), 0u) << "an ungrouped job names none";
  ExpectCounts("q", 1, 0, 3, 0);
  // The held job comes to a long poll when acme's job is acked.
  auto start = SteadyClock::now();
  std::future<HttpResult> poll = std::async(std::launch::async, [&] {
    Client other(server().url(), AdminKey());
    return other.Fetch("q", "v", 1, 30'000, 5'000);
  });
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_EQ(client().Ack("q", {LeaseOf(jobs[0])}).status, 200);
  HttpResult got = poll.get();
  ASSERT_EQ(got.status, 200) << got.body;
  ASSERT_EQ(got.json.at("jobs").as_array().size(), 1u) << got.body;
  EXPECT_EQ(got.json.at("jobs").at(0).at("payload"), "a2");
  EXPECT_LT(MsSince(start), 100 + kWithin.count());
}

TEST_F(QueuesHttpTest, ARateLimitedNackSnoozesTheGroupWithoutUsingAnAttempt) {
  MustPush("q", "a1", {{"group", "acme"}});
  MustPush("q", "a2", {{"group", "acme"}});
  MustPush("q", "b1", {{"group", "bolt"}});
  json::array first = MustFetch("q", "w");
  ASSERT_EQ(first.size(), 1u);
  std::string lease = LeaseOf(first[0]);
  json::object body{
      {"leases", json::array{json::value(lease)}}, {"rate_limited", true}, {"retry_after_ms", 400}};
  HttpResult r = Post(Path("q", "/nack"), json::serialize(body));
  EXPECT_TRUE(HasResults(r, {lease}, {""}));
  EXPECT_EQ(IntField(Stats("q"), "nacked"), 0) << "a snooze is no failure";
  json::array during = MustFetch("q", "w", 10);
  ASSERT_EQ(during.size(), 1u);
  EXPECT_EQ(during[0].at("payload"), "b1") << "acme waits";
  auto start = SteadyClock::now();
  json::array after = MustFetch("q", "w", 10, 30'000, 5'000);
  int64_t waited = MsSince(start);
  ASSERT_EQ(after.size(), 2u) << "both of acme's jobs once the hold is over";
  EXPECT_EQ(after[0].at("payload"), "a2");
  EXPECT_EQ(after[1].at("payload"), "a1");
  EXPECT_EQ(IntField(after[1], "attempt"), 1);
  EXPECT_LT(waited, 400 + kWithin.count()) << "parked until the hold ends, not the whole poll";
}

TEST_F(QueuesHttpTest, ARateParksALongPollUntilTheNextJobIsAllowed) {
  ASSERT_EQ(
      client()
          .Request("PUT", Path("q", "/settings"),
                   R"({"limits":[{"key":null,"rate":{"limit":2,"period_ms":1000,"burst":1}}]})")
          .status,
      200);
  for (int i = 0; i < 3; ++i) MustPush("q", i);
  auto start = SteadyClock::now();
  std::vector<int64_t> at;
  for (int i = 0; i < 3; ++i) {
    json::array got = MustFetch("q", "w", 10, 30'000, 5'000);
    ASSERT_EQ(got.size(), 1u) << "one at a time at 2 a second";
    at.push_back(MsSince(start));
  }
  EXPECT_GE(at[2] - at[0], 900) << "two intervals of 500 ms, to the ms the clock allows";
  EXPECT_LT(at[2], 1000 + kWithin.count());
}

class QueueAdminTest : public QueuesHttpTest {
 protected:
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}, {"ANTEROOM_ADMIN_KEY", kAdminKey}};
  }
  std::string AdminKey() const override { return kAdminKey; }
};

// With only an admin key set, the data plane is not open to anyone. An
// anonymous client (or one with a wrong key) can neither push, fetch every queue's jobs, read
// dead letters nor nack jobs to death; a worker with the key does all of it.
TEST_F(QueueAdminTest, AnonymousClientsCannotUseTheDataPlane) {
  Client anonymous(server().url());
  Client wrong(server().url(), "not-the-key");
  ASSERT_EQ(client().Push("q", "secret-job", {{"max_attempts", 1}}).status, 201);
  ASSERT_EQ(client().Push("q", "dead-to-be", {{"max_attempts", 1}}).status, 201);
  HttpResult dying = client().Fetch("q", "w", 1);
  ASSERT_EQ(dying.json.at("jobs").as_array().size(), 1u);
  ASSERT_EQ(client().Nack("q", {LeaseOf(dying.json.at("jobs").at(0))}).status, 200);
  std::string before = Snapshot("q");
  ExpectCounts("q", 1, 0, 0, 1);

  for (Client* c : {&anonymous, &wrong}) {
    EXPECT_TRUE(IsError(c->Fetch("q", "thief"), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Request("GET", Path("q", "/dead")), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Nack("q", {"1.1.AAAAAAAAAAAAAAAA"}), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Push("q", "spam"), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Ack("q", {"1.1.AAAAAAAAAAAAAAAA"}), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Extend("q", {"1.1.AAAAAAAAAAAAAAAA"}, 600'000), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->QueueStats("q"), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->ListQueues(), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Request("GET", Path("q", "/inflight?worker=w")), 401, "unauthorized"));
    EXPECT_TRUE(
        IsError(c->Request("POST", Path("q", "/workers/w/heartbeat"), R"({"ttl_ms":600000})"), 401,
                "unauthorized"));
    EXPECT_EQ(Snapshot("q"), before) << "nothing fetched, nacked or pushed";
  }
  // The 401 names the key and challenges for it.
  std::string raw = RawExchange(server().port(),
                                RawRequest("GET", Path("q", "/dead"), "", {"Connection: close"}));
  EXPECT_EQ(RawStatus(raw), 401) << raw;
  EXPECT_TRUE(RawHeader(raw, "WWW-Authenticate").has_value()) << raw;
  EXPECT_NE(RawBody(raw).find("the admin key"), std::string::npos) << raw;
  // With the key, the worker gets the job.
  HttpResult got = client().Fetch("q", "w");
  ASSERT_EQ(got.status, 200) << got.body;
  ASSERT_EQ(got.json.at("jobs").as_array().size(), 1u);
  EXPECT_EQ(client().Request("GET", Path("q", "/dead")).status, 200);
}

TEST_F(QueueAdminTest, AdminRoutesNeedTheBearerKey) {
  Client anonymous(server().url());
  Client wrong(server().url(), "not-the-key");
  // Producers and workers use the key too (no queue key set: the admin key).
  Client& worker = client();
  HttpResult pushed = worker.Push("q", "dead-to-be", {{"max_attempts", 1}});
  ASSERT_EQ(pushed.status, 201) << pushed.body;
  HttpResult f = worker.Fetch("q", "w");
  ASSERT_EQ(f.status, 200) << f.body;
  ASSERT_EQ(f.json.at("jobs").as_array().size(), 1u);
  ASSERT_EQ(worker.Nack("q", {LeaseOf(f.json.at("jobs").at(0))}).status, 200);
  ASSERT_EQ(worker.Push("q", "leased").status, 201);
  HttpResult leased = worker.Fetch("q", "w", 1, 600'000);
  ASSERT_EQ(leased.json.at("jobs").as_array().size(), 1u);
  std::string lease = LeaseOf(leased.json.at("jobs").at(0));
  ASSERT_EQ(worker.Extend("q", {lease}, 600'000).status, 200);
  HttpResult ready = worker.Push("q", "ready");
  ASSERT_EQ(ready.status, 201);
  std::string ready_id = StrField(ready.json, "id").value_or("");
  EXPECT_EQ(
      worker.Request("POST", Path("q", "/workers/w/heartbeat"), R"({"ttl_ms":600000})").status,
      200);
  EXPECT_EQ(worker.QueueStats("q").status, 200);
  EXPECT_EQ(worker.ListQueues().status, 200);
  EXPECT_EQ(worker.Request("GET", Path("q", "/inflight?worker=w")).status, 200);
  EXPECT_EQ(worker.Request("GET", Path("q", "/dead")).status, 200);
  std::string before = Snapshot("q");
  ExpectCounts("q", 1, 0, 1, 1);

  for (Client* c : {&anonymous, &wrong}) {
    EXPECT_TRUE(IsError(c->Request("POST", Path("q", "/workers/w/release")), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Request("POST", Path("q", "/pause")), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Request("POST", Path("q", "/resume")), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Request("POST", Path("q", "/dead/requeue"), "{}"), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->Request("DELETE", Path("q", "/jobs/" + ready_id)), 401, "unauthorized"));
    EXPECT_EQ(Snapshot("q"), before);
  }

  // With the key each of them works.
  HttpResult release = client().Request("POST", Path("q", "/workers/w/release"));
  EXPECT_EQ(release.json, json::parse(R"({"count":1})")) << release.body;
  HttpResult pause = client().Request("POST", Path("q", "/pause"));
  EXPECT_EQ(BoolField(pause.json, "paused"), true) << pause.body;
  HttpResult resume = client().Request("POST", Path("q", "/resume"));
  EXPECT_EQ(BoolField(resume.json, "paused"), false) << resume.body;
  HttpResult requeue = client().Request("POST", Path("q", "/dead/requeue"), "{}");
  EXPECT_EQ(requeue.json, json::parse(R"({"count":1})")) << requeue.body;
  HttpResult del = client().Request("DELETE", Path("q", "/jobs/" + ready_id));
  EXPECT_EQ(del.json, json::parse(R"({"count":1})")) << del.body;
  ExpectCounts("q", 2, 0, 0, 0);
}

// ---- the queue key ---------------------------------------------------------------------------

constexpr char kQueueKey[] = "queue-worker-key";

class QueueKeyTest : public QueuesHttpTest {
 protected:
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret},
            {"ANTEROOM_ADMIN_KEY", kAdminKey},
            {"ANTEROOM_QUEUE_KEY", kQueueKey}};
  }
  std::string AdminKey() const override { return kAdminKey; }
};

// A worker with the queue key runs the data plane; it is not an admin; others get nothing.
TEST_F(QueueKeyTest, TheQueueKeyOpensTheDataPlaneOnly) {
  Client worker(server().url(), kQueueKey);
  Client anonymous(server().url());
  ASSERT_EQ(worker.Push("q", "job", {{"max_attempts", 1}}).status, 201);
  EXPECT_TRUE(IsError(anonymous.Fetch("q", "thief"), 401, "unauthorized"));
  EXPECT_TRUE(IsError(anonymous.Request("GET", Path("q", "/dead")), 401, "unauthorized"));
  HttpResult f = worker.Fetch("q", "w");
  ASSERT_EQ(f.status, 200) << f.body;
  ASSERT_EQ(f.json.at("jobs").as_array().size(), 1u);
  EXPECT_EQ(worker.Nack("q", {LeaseOf(f.json.at("jobs").at(0))}).status, 200);
  EXPECT_EQ(worker.Request("GET", Path("q", "/dead")).status, 200);
  EXPECT_EQ(worker.QueueStats("q").status, 200);
  // The admin key passes queue routes too.
  EXPECT_EQ(client().Request("GET", Path("q", "/dead")).status, 200);
  // Admin routes stay the admin's.
  EXPECT_TRUE(
      IsError(worker.Request("POST", Path("q", "/dead/requeue"), "{}"), 401, "unauthorized"));
  EXPECT_TRUE(IsError(worker.Request("POST", Path("q", "/pause")), 401, "unauthorized"));
  ExpectCounts("q", 0, 0, 0, 1);
}

// ---- real time: long polls and lease expiry ------------------------------------------------

using QueueTimingTest = QueuesHttpTest;

TEST_F(QueueTimingTest, LongPollAnswersSoonAfterAPushFromAnotherConnection) {
  std::string url = server().url();
  auto start = SteadyClock::now();
  auto poll = std::async(std::launch::async, [url] {
    Client worker(url);
    return worker.Fetch("q", "w", 5, 30'000, 5'000);
  });
  ASSERT_EQ(poll.wait_for(milliseconds(300)), std::future_status::timeout)
      << "answered before any job was pushed";
  auto pushed_at = SteadyClock::now();
  std::string id = MustPush("q", json::object{{"n", 1}});
  ASSERT_EQ(poll.wait_for(milliseconds(1'000)), std::future_status::ready)
      << "the long poll did not answer within 1 s of the push";
  int64_t after_push = MsSince(pushed_at);
  HttpResult r = poll.get();
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  ASSERT_EQ(r.json.at("jobs").as_array().size(), 1u) << r.body;
  const json::value& job = r.json.at("jobs").at(0);
  EXPECT_EQ(StrField(job, "id"), id);
  EXPECT_EQ(job.at("payload"), json::parse(R"({"n":1})"));
  EXPECT_EQ(IntField(job, "attempt"), 1);
  EXPECT_LT(after_push, 1'000);
  EXPECT_LT(MsSince(start), 5'000);
  ExpectCounts("q", 0, 0, 1, 0);
}

TEST_F(QueueTimingTest, LongPollOnAnEmptyQueueAnswersEmptyAtItsDeadline) {
  auto start = SteadyClock::now();
  HttpResult r = client().Fetch("empty", "w", 1, 30'000, 300);
  int64_t elapsed = MsSince(start);
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  EXPECT_EQ(r.json, json::parse(R"({"jobs":[]})"));
  EXPECT_GE(elapsed, 290) << "answered before wait_ms";
  EXPECT_LT(elapsed, 300 + kWithin.count()) << "answered long after wait_ms";
  // wait_ms 0 answers at once.
  start = SteadyClock::now();
  EXPECT_TRUE(MustFetch("empty", "w", 1, 30'000, 0).empty());
  EXPECT_LT(MsSince(start), 250);
}

TEST_F(QueueTimingTest, LongPollersAreServedInTheOrderTheyStarted) {
  std::string url = server().url();
  auto first = std::async(std::launch::async, [url] {
    Client c(url);
    return c.Fetch("q", "first", 1, 30'000, 5'000);
  });
  std::this_thread::sleep_for(milliseconds(200));
  auto second = std::async(std::launch::async, [url] {
    Client c(url);
    return c.Fetch("q", "second", 1, 30'000, 5'000);
  });
  std::this_thread::sleep_for(milliseconds(200));
  ASSERT_EQ(first.wait_for(milliseconds(0)), std::future_status::timeout);
  MustPush("q", "one");
  ASSERT_EQ(first.wait_for(milliseconds(1'000)), std::future_status::ready);
  HttpResult r1 = first.get();
  ASSERT_EQ(r1.json.at("jobs").as_array().size(), 1u) << r1.body;
  EXPECT_EQ(r1.json.at("jobs").at(0).at("payload"), json::value("one"));
  EXPECT_EQ(second.wait_for(milliseconds(100)), std::future_status::timeout)
      << "the second poller took the job meant for the first";
  MustPush("q", "two");
  ASSERT_EQ(second.wait_for(milliseconds(1'000)), std::future_status::ready);
  HttpResult r2 = second.get();
  ASSERT_EQ(r2.json.at("jobs").as_array().size(), 1u) << r2.body;
  EXPECT_EQ(r2.json.at("jobs").at(0).at("payload"), json::value("two"));
}

TEST_F(QueueTimingTest, AnExpiredLeaseMakesTheJobFetchableAgain) {
  std::string id = MustPush("q", "job");
  auto start = SteadyClock::now();
  json::array first = MustFetch("q", "w1", 1, 300);
  ASSERT_EQ(first.size(), 1u);
  json::array again;
  ASSERT_TRUE(WaitFor(
      [&] {
        again = MustFetch("q", "w2", 1, 30'000);
        return !again.empty();
      },
      milliseconds(300) + kWithin))
      << Snapshot("q");
  EXPECT_GE(MsSince(start), 250) << "redelivered before the lease ran out";
  EXPECT_EQ(StrField(again[0], "id"), id);
  EXPECT_EQ(IntField(again[0], "attempt"), 2);
  EXPECT_EQ(IntField(Stats("q"), "expired"), 1);
  std::string stale = LeaseOf(first[0]);
  EXPECT_TRUE(HasResults(client().Ack("q", {stale}), {stale}, {"lease_lost"}));
  EXPECT_TRUE(HasResults(client().Ack("q", {LeaseOf(again[0])}), {LeaseOf(again[0])}, {""}));
}

TEST_F(QueueTimingTest, AnExpiredLeaseWakesALongPollerByTimeAlone) {
  MustPush("q", "job");
  ASSERT_EQ(MustFetch("q", "w1", 1, 300).size(), 1u);
  auto start = SteadyClock::now();
  HttpResult r = client().Fetch("q", "w2", 1, 30'000, 5'000);
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json.at("jobs").as_array().size(), 1u) << r.body;
  EXPECT_EQ(IntField(r.json.at("jobs").at(0), "attempt"), 2);
  EXPECT_LT(MsSince(start), 300 + kWithin.count());
}

TEST_F(QueueTimingTest, ASilentWorkerLosesItsJobsBeforeTheLeaseRunsOut) {
  MustPush("q", "job");
  ASSERT_EQ(Post(Path("q", "/workers/w1/heartbeat"), R"({"ttl_ms":300})").status, 200);
  json::array first = MustFetch("q", "w1", 1, 600'000);
  ASSERT_EQ(first.size(), 1u);
  auto start = SteadyClock::now();
  ASSERT_TRUE(
      WaitFor([&] { return IntField(Stats("q"), "ready") == 1; }, milliseconds(300) + kWithin))
      << Snapshot("q");
  EXPECT_GE(MsSince(start), 200);
  json::array again = MustFetch("q", "w2");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(IntField(again[0], "attempt"), 2);
  EXPECT_EQ(IntField(Stats("q"), "workers"), 1) << "w1 is gone, w2 holds the job";
}

}  // namespace
}  // namespace anteroom::testing
