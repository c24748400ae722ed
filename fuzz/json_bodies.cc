// Request bodies: the first byte picks a POST/PUT route (or the readers of json_body.h,
// scheduled events' and RFC 3339 times' directly), the rest is the body. The routes run against a
// room and a queue that already hold sessions, jobs and a live lease, so bodies that pass
// validation reach the engine.
//
// In a body, @LEASE@ becomes the lease of a job now in flight and @TOKEN@ an admission token
// of the room, both valid: the seeds use them, and mutations keep them, to reach the paths
// behind the signature checks.

#include <boost/json/parse.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/wire_time.h"
#include "harness.h"
#include "http/json_body.h"
#include "server/event_json.h"
#include "server/target_url.h"

namespace {

namespace json = boost::json;
namespace http = boost::beast::http;
using anteroom::fuzz::World;

struct Route {
  http::verb method;
  const char* target;
};

constexpr std::array<Route, 16> kRoutes = {{
    {http::verb::put, "/v1/rooms/r"},
    {http::verb::put, "/v1/rooms/new"},
    {http::verb::post, "/v1/rooms/r/check"},
    {http::verb::post, "/v1/rooms/r/touch"},
    {http::verb::post, "/v1/rooms/r/leave"},
    {http::verb::post, "/v1/tokens/verify"},
    {http::verb::post, "/v1/queues/q/jobs"},
    {http::verb::post, "/v1/queues/q/fetch"},
    {http::verb::post, "/v1/queues/q/ack"},
    {http::verb::post, "/v1/queues/q/nack"},
    {http::verb::post, "/v1/queues/q/extend"},
    {http::verb::post, "/v1/queues/q/workers/w1/heartbeat"},
    {http::verb::post, "/v1/queues/q/workers/w1/release"},
    {http::verb::post, "/v1/queues/q/dead/requeue"},
    {http::verb::post, "/v1/queues/q/pause"},
    {http::verb::post, "/v1/queues/fresh/jobs"},
}};

void ReplaceAll(std::string& s, std::string_view from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

// Every reader of json_body.h on every member, with ranges that split the integers.
void ReadEverything(std::string_view body) {
  using namespace anteroom::http;
  using anteroom::server::CheckTargetUrl;
  for (bool empty_is_object : {false, true}) {
    auto o = ParseObject(body, empty_is_object);
    if (!o.ok()) continue;
    for (const auto& member : *o) {
      std::string_view key = member.key();
      (void)ReadInt(*o, key, INT64_MIN, INT64_MAX);
      (void)ReadInt(*o, key, 1, 1000);
      (void)ReadNullableInt(*o, key, 0, 604'800'000);
      (void)ReadBool(*o, key);
      (void)ReadString(*o, key);
      auto name = ReadName(*o, key);
      if (name.ok() && *name && (*name)->empty()) anteroom::fuzz::Fail("an empty name read");
      if (member.value().is_string()) {
        (void)CheckTargetUrl(member.value().as_string());
        // A time read is written back as text that reads to the same ms.
        if (auto ms = anteroom::ParseRfc3339Ms(member.value().as_string())) {
          if (anteroom::ParseRfc3339Ms(anteroom::FormatRfc3339Ms(*ms)) != ms) {
            anteroom::fuzz::Fail("a time does not read back");
          }
        }
      }
    }
    (void)ReadInt(*o, "absent", 0, 1);
    // A scheduled event's body: one read is written as a body that reads to the same spec, and
    // answered without trouble.
    if (auto spec = anteroom::server::ReadEventSpec(*o); spec.ok()) {
      auto again = anteroom::server::ReadEventSpec(anteroom::server::EventSpecJson(*spec));
      if (!again.ok() || !(*again == *spec)) anteroom::fuzz::Fail("an event does not read back");
      anteroom::core::RoomEvent event{"e", *spec, anteroom::core::EventStage::kRunning, {}};
      (void)anteroom::server::EventJson(event, spec->starts_at);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  size_t pick = data[0] % (kRoutes.size() + 1);
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (pick == kRoutes.size()) {
    ReadEverything(body);
    return 0;
  }

  World world;
  // A room of 2 with two admitted and one waiting; a queue with jobs, one in flight, one dead.
  world.Call(http::verb::put, "/v1/rooms/r", R"({"capacity":2,"grace_ms":1000})");
  std::string token;
  for (const char* s : {"ann", "bob", "cat"}) {
    auto r = world.Call(http::verb::post, "/v1/rooms/r/check",
                        std::string(R"({"session":")") + s + R"("})");
    if (r && token.empty()) {
      json::value v = json::parse(r->body);
      if (const json::value* t = v.as_object().if_contains("token"); t && t->is_string()) {
        token = std::string(t->as_string());
      }
    }
  }
  world.Call(http::verb::post, "/v1/queues/q/jobs",
             R"({"jobs":[{"payload":{"n":1},"priority":5},{"payload":"two","max_attempts":1},)"
             R"({"payload":[3],"dedupe_key":"d3","delay_ms":5000}]})");
  std::string lease;
  if (auto r = world.Call(http::verb::post, "/v1/queues/q/fetch", R"({"worker":"w1","max":1})")) {
    json::value v = json::parse(r->body);
    const json::array& jobs = v.at("jobs").as_array();
    if (!jobs.empty()) lease = std::string(jobs[0].at("lease").as_string());
  }
  // The job allowed one attempt dies on its failed delivery.
  if (auto r = world.Call(http::verb::post, "/v1/queues/q/fetch", R"({"worker":"w2","max":1})")) {
    json::value v = json::parse(r->body);
    for (const json::value& job : v.at("jobs").as_array()) {
      world.Call(http::verb::post, "/v1/queues/q/nack",
                 R"({"leases":[")" + std::string(job.at("lease").as_string()) + R"("]})");
    }
  }
  if (token.empty() || lease.empty()) anteroom::fuzz::Fail("the set-up did not work");

  ReplaceAll(body, "@LEASE@", lease);
  ReplaceAll(body, "@TOKEN@", token);
  anteroom::http::Request request;
  request.method = kRoutes[pick].method;
  request.target = kRoutes[pick].target;
  request.body = std::move(body);
  request.authorization = "Bearer " + std::string(anteroom::fuzz::kAdminKey);
  world.Dispatch(request);
  world.Settle();
  return 0;
}
