// Launch day over real TCP against a real `anteroom serve`: the schedule routes, statuses in
// the pre-queue, a shuffled drop whose order anyone can recompute from its seed, queueing
// methods, passes (on the embedded backend and across two processes on Redis), and a SIGKILL
// at the start of a draw (the order after the restart is the one the seed gives).
#include <signal.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "core/draw.h"
#include "support/api_checks.h"
#include "support/redis_process.h"
#include "support/server_fixture.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Body(const json::object& o) { return json::serialize(o); }

HttpResult PutEvent(Client& c, const std::string& room, const std::string& id,
                    const json::object& body) {
  return c.Request("PUT", "/v1/rooms/" + room + "/schedule/" + id, Body(body));
}

std::string Session(int i) {  // 128 bits, as a client's session id must carry
  char buf[40];
  std::snprintf(buf, sizeof buf, "launch-session-%016d", i);
  return buf;
}

core::DrawSeed SeedFromHex(const std::string& hex) {
  core::DrawSeed seed{};
  for (size_t i = 0; i < seed.size() && 2 * i + 1 < hex.size(); ++i) {
    seed[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return seed;
}

// Polls until `done` holds or `limit` passes.
template <typename Pred>
bool WaitFor(Pred done, milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return done();
}

using LaunchHttpTest = ServerTest;

TEST_F(LaunchHttpTest, TheScheduleRoutes) {
  MustPut("r", {{"capacity", 2}});
  HttpResult put = PutEvent(client(), "r", "drop",
                            {{"name", "Winter drop"},
                             {"prequeue_at", "2100-01-01T09:00:00Z"},
                             {"starts_at", "2100-01-01T10:00:00+01:00"},
                             {"ends_at", "2100-01-01T12:00:00Z"},
                             {"shuffle_at_start", true},
                             {"overrides", {{"capacity", 50}, {"queueing_method", "random"}}}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(StrField(put.json, "id"), "drop");
  EXPECT_EQ(StrField(put.json, "phase"), "scheduled");
  EXPECT_EQ(StrField(put.json, "starts_at"), "2100-01-01T09:00:00.000Z");
  EXPECT_TRUE(put.json.at("shuffle").is_null());

  HttpResult get = client().Request("GET", "/v1/rooms/r/schedule/drop");
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.json.at("overrides"), put.json.at("overrides"));
  HttpResult list = client().Request("GET", "/v1/rooms/r/schedule");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.json.at("events").as_array().size(), 1u);

  HttpResult overlap =
      PutEvent(client(), "r", "other",
               {{"starts_at", "2100-01-01T11:00:00Z"}, {"ends_at", "2100-01-01T13:00:00Z"}});
  EXPECT_TRUE(IsError(overlap, 409, "conflict")) << overlap.body;
  EXPECT_NE(overlap.body.find("'drop'"), std::string::npos) << "names the other";
  EXPECT_TRUE(IsError(PutEvent(client(), "r", "bad", {{"starts_at", "tomorrow"}}), 400,
                      "invalid_argument"));
  EXPECT_TRUE(IsError(PutEvent(client(), "r", "bad",
                               {{"starts_at", 5'000'000'000'000}, {"ends_at", 4'000'000'000'000}}),
                      400, "invalid_argument"));
  EXPECT_TRUE(IsError(PutEvent(client(), "nowhere", "x",
                               {{"starts_at", 5'000'000'000'000}, {"ends_at", 6'000'000'000'000}}),
                      404, "unknown_room"));
  EXPECT_TRUE(IsError(client().Request("GET", "/v1/rooms/r/schedule/missing"), 404, "not_found"));

  HttpResult del = client().Request("DELETE", "/v1/rooms/r/schedule/drop");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.json.at("deleted"), json::value(true));
  EXPECT_TRUE(client().Request("GET", "/v1/rooms/r/schedule").json.at("events").as_array().empty());
}

// A drop end to end: the pre-queue with its countdown, a shuffle at the start, every status
// then an exact place, and the order the one the logged seed gives (recomputed here).
TEST_F(LaunchHttpTest, AShuffledDropGivesExactPlacesInTheOrderItsSeedGives) {
  MustPut("r", {{"capacity", 2}});
  // The pre-queue fills with a start far off; then the start is brought near (an event that has
  // not started may move), so a slow machine cannot miss it.
  int64_t prequeue_at = NowMs() - 1'000;
  auto drop = [&](int64_t starts_at) {
    return json::object{{"prequeue_at", prequeue_at},
                        {"starts_at", starts_at},
                        {"ends_at", starts_at + 600'000},
                        {"shuffle_at_start", true}};
  };
  ASSERT_EQ(PutEvent(client(), "r", "drop", drop(NowMs() + 3'600'000)).status, 200);
  constexpr int kPeople = 40;
  for (int i = 0; i < kPeople; ++i) {
    HttpResult r = client().Check("r", Session(i));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(StrField(r.json, "status"), "prequeue");
    EXPECT_EQ(StrField(r.json, "phase"), "prequeue");
    EXPECT_GT(IntField(r.json, "starts_in_ms").value_or(0), 0);
    EXPECT_GT(IntField(r.json, "refresh_after_ms").value_or(0), 0);
    EXPECT_TRUE(r.json.at("position").is_null());
  }
  ASSERT_EQ(PutEvent(client(), "r", "drop", drop(NowMs() + 300)).status, 200);
  ASSERT_TRUE(WaitFor(
      [&] {
        HttpResult e = client().Request("GET", "/v1/rooms/r/schedule/drop");
        return e.status == 200 && e.json.at("shuffle").is_object() &&
               client().GetRoom("r").json.at("waiting") == json::value(kPeople - 2);
      },
      milliseconds(10'000)));
  HttpResult event = client().Request("GET", "/v1/rooms/r/schedule/drop");
  const json::object& shuffle = event.json.at("shuffle").as_object();
  EXPECT_EQ(shuffle.at("count"), json::value(kPeople));
  std::string seed = std::string(shuffle.at("seed").as_string());
  ASSERT_EQ(seed.size(), 64u);

  std::vector<uint32_t> arrival(kPeople);
  for (int i = 0; i < kPeople; ++i) arrival[static_cast<size_t>(i)] = static_cast<uint32_t>(i);
  core::FisherYates draw(SeedFromHex(seed), arrival);
  while (draw.done() < draw.size()) draw.Step(1'000);
  for (int k = 0; k < kPeople; ++k) {
    int i = static_cast<int>(draw.order()[static_cast<size_t>(k)]);
    HttpResult r = client().Check("r", Session(i));
    ASSERT_EQ(r.status, 200) << r.body;
    if (k < 2) {
      EXPECT_EQ(StrField(r.json, "status"), "active") << k;
    } else {
      EXPECT_EQ(StrField(r.json, "status"), "waiting") << k;
      EXPECT_EQ(IntField(r.json, "position"), k - 1) << "the drawn place, exactly";
      EXPECT_EQ(StrField(r.json, "phase"), "queue");
    }
  }
  HttpResult late = client().Check("r", Session(kPeople));
  EXPECT_EQ(IntField(late.json, "position"), kPeople - 1) << "later arrivals go behind";
}

TEST_F(LaunchHttpTest, QueueingMethodsOverHttp) {
  MustPut("r", {{"capacity", 1}});
  client().Check("r", Session(0));
  client().Check("r", Session(1));
  EXPECT_TRUE(
      IsError(client().PutRoom("r", {{"queueing_method", "lottery"}}), 400, "invalid_argument"));
  EXPECT_TRUE(IsError(client().PutRoom("r", {{"include_active", true}}), 400, "invalid_argument"));
  HttpResult random = client().PutRoom("r", {{"queueing_method", "random"}});
  ASSERT_EQ(random.status, 200) << random.body;
  EXPECT_EQ(StrField(random.json, "queueing_method"), "random");
  HttpResult waiting = client().Check("r", Session(1));
  EXPECT_TRUE(waiting.json.at("position").is_null()) << waiting.body;
  EXPECT_EQ(waiting.json.at("odds").at("chance_next").to_number<double>(), 1.0);
  ASSERT_EQ(client().PutRoom("r", {{"queueing_method", "reject"}}).status, 200);
  HttpResult closed = client().Check("r", Session(2));
  EXPECT_EQ(StrField(closed.json, "status"), "closed") << closed.body;
  EXPECT_EQ(StrField(closed.json, "phase"), "closed");
  HttpResult brake =
      client().PutRoom("r", {{"queueing_method", "queue_all"}, {"include_active", true}});
  ASSERT_EQ(brake.status, 200) << brake.body;
  EXPECT_EQ(IntField(client().Check("r", Session(0)).json, "position"), 1)
      << "the holder went back to the head of the line";
  EXPECT_EQ(IntField(client().Check("r", Session(1)).json, "position"), 2);
}

// What the room object says is in force, as GET answers it: {phase, event, prequeued,
// effective}, and the room's own capacity and method; the listing must answer the same. The
// two are separate requests: when an event starts between them they differ for a moment, so a
// difference must last over a few reads to count.
std::string InForce(Client& c, const std::string& room) {
  auto shown = [](const json::value& r) {
    json::object o{{"phase", r.at("phase")},         {"event", r.at("event")},
                   {"prequeued", r.at("prequeued")}, {"effective", r.at("effective")},
                   {"capacity", r.at("capacity")},   {"queueing_method", r.at("queueing_method")}};
    return json::serialize(o);
  };
  std::string listed;
  std::string got_shown;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(milliseconds(50));
    HttpResult got = c.GetRoom(room);
    if (got.status != 200) return "GET answered " + std::to_string(got.status);
    got_shown = shown(got.json);
    HttpResult list = c.ListRooms();
    listed = "not listed";
    if (list.status == 200) {
      for (const json::value& r : list.json.at("rooms").as_array()) {
        if (r.at("room") == json::value(room)) listed = shown(r);
      }
    }
    if (listed == got_shown) return got_shown;
  }
  EXPECT_EQ(listed, got_shown) << "the listing answers the room object alike";
  return got_shown;
}

// The room object over HTTP (the dashboard's source): an open pre-queue counted, a running
// event's overrides in force beside the room's own settings, the room's own after a cancel.
void RoomObjectOverHttp(Client& c) {
  ASSERT_EQ(c.PutRoom("r", {{"capacity", 1}}).status, 200);
  ASSERT_EQ(c.Check("r", Session(0)).status, 200);
  int64_t now = NowMs();
  auto drop = [&](int64_t starts_at) {
    return json::object{{"prequeue_at", now - 1'000},
                        {"starts_at", starts_at},
                        {"ends_at", now + 7'200'000},
                        {"overrides", {{"capacity", 3}, {"queueing_method", "passthrough"}}}};
  };
  ASSERT_EQ(PutEvent(c, "r", "drop", drop(now + 3'600'000)).status, 200);
  ASSERT_EQ(StrField(c.Check("r", Session(1)).json, "status"), "prequeue");
  ASSERT_EQ(StrField(c.Check("r", Session(2)).json, "status"), "prequeue");
  const std::string own =
      R"("effective":{"capacity":1,"grace_ms":30000,"checkin_timeout_ms":30000,)"
      R"("admit_per_minute":null,"queueing_method":"fifo"},"capacity":1,"queueing_method":"fifo"})";
  EXPECT_EQ(InForce(c, "r"), R"({"phase":"prequeue","event":"drop","prequeued":2,)" + own);
  ASSERT_EQ(PutEvent(c, "r", "drop", drop(NowMs() + 300)).status, 200);  // the start brought near
  const std::string running =
      R"({"phase":"open","event":"drop","prequeued":0,"effective":{"capacity":3,"grace_ms":30000,)"
      R"("checkin_timeout_ms":30000,"admit_per_minute":null,"queueing_method":"passthrough"},)"
      R"("capacity":1,"queueing_method":"fifo"})";
  EXPECT_TRUE(WaitFor([&] { return InForce(c, "r") == running; }, milliseconds(10'000)))
      << InForce(c, "r");
  // A touch of a session the room does not know answers "gone" with what is in force too.
  HttpResult gone = c.Touch("r", "nobody-here");
  ASSERT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(StrField(gone.json, "status"), "gone");
  EXPECT_EQ(IntField(gone.json, "capacity"), 3) << gone.body;
  EXPECT_EQ(StrField(gone.json, "phase"), "open") << gone.body;
  EXPECT_EQ(StrField(gone.json, "queueing_method"), "passthrough") << gone.body;
  ASSERT_EQ(c.Request("DELETE", "/v1/rooms/r/schedule/drop").status, 200);
  EXPECT_EQ(InForce(c, "r"), R"({"phase":"queue","event":null,"prequeued":0,)" + own)
      << "cancelled: the room's own settings, three holders of one slot";
}

TEST_F(LaunchHttpTest, TheRoomObjectShowsWhatIsInForce) { RoomObjectOverHttp(client()); }

TEST(LaunchRedisHttpTest, TheRoomObjectShowsWhatIsInForce) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  ServerProcess server({"--store", redis.url()}, {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}});
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  RoomObjectOverHttp(c);
  EXPECT_TRUE(server.Alive());
}

// Passes over HTTP: `admin` mints, lists and revokes; checks go through `other` (the same
// client, or another process on the same store).
void PassesOverHttpThrough(Client& admin, Client& other) {
  ASSERT_EQ(admin.PutRoom("r", {{"capacity", 1}}).status, 200);
  other.Check("r", Session(0));
  other.Check("r", Session(1));
  HttpResult minted = admin.Request("POST", "/v1/rooms/r/passes",
                                    Body({{"count", 2}, {"kind", "admit"}, {"uses", 1}}));
  ASSERT_EQ(minted.status, 201) << minted.body;
  const json::array& passes = minted.json.at("passes").as_array();
  ASSERT_EQ(passes.size(), 2u);
  std::string code = std::string(passes[0].at("code").as_string());
  std::string id = std::string(passes[0].at("id").as_string());
  HttpResult in =
      other.Request("POST", "/v1/rooms/r/check", Body({{"session", Session(2)}, {"pass", code}}));
  ASSERT_EQ(in.status, 200) << in.body;
  EXPECT_EQ(IntField(in.json, "position"), 1) << "no slot free: first in line";
  HttpResult used =
      other.Request("POST", "/v1/rooms/r/check", Body({{"session", Session(3)}, {"pass", code}}));
  EXPECT_TRUE(IsError(used, 400, "invalid_argument")) << used.body;
  EXPECT_NE(used.body.find("this pass has been used as often as it may"), std::string::npos)
      << used.body;
  EXPECT_TRUE(IsError(admin.Request("POST", "/v1/rooms/r/passes", Body({{"kind", "vip"}})), 400,
                      "invalid_argument"));
  HttpResult list = admin.Request("GET", "/v1/rooms/r/passes");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(list.json.at("passes").as_array().size(), 2u);
  EXPECT_EQ(list.body.find(code), std::string::npos) << "a code is shown once";
  HttpResult gone = admin.Request("DELETE", "/v1/rooms/r/passes/" + id);
  ASSERT_EQ(gone.status, 200) << gone.body;
  EXPECT_EQ(gone.json.at("revoked"), json::value(1));
  EXPECT_TRUE(IsError(admin.Request("DELETE", "/v1/rooms/r/passes/" + id), 404, "not_found"));
  EXPECT_EQ(admin.Request("DELETE", "/v1/rooms/r/passes").json.at("revoked"), json::value(1));
  EXPECT_TRUE(IsError(admin.Request("GET", "/v1/rooms/nowhere/passes"), 404, "unknown_room"));
}

TEST_F(LaunchHttpTest, PassesOverHttp) { PassesOverHttpThrough(client(), client()); }

// On Redis, minted through one process and redeemed through another.
TEST(LaunchRedisHttpTest, PassesMintedOnOneProcessAreRedeemedOnAnother) {
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  EnvVars env{{"ANTEROOM_TOKEN_SECRET", kTokenSecret}};
  ServerProcess one({"--store", redis.url()}, env);
  ServerProcess two({"--store", redis.url()}, env);
  ASSERT_TRUE(one.started()) << one.error();
  ASSERT_TRUE(two.started()) << two.error();
  Client admin(one.url());
  Client other(two.url());
  PassesOverHttpThrough(admin, other);
  EXPECT_TRUE(one.Alive());
  EXPECT_TRUE(two.Alive());
}

// SIGKILL right at the start of a large draw (published a few places a turn), then a restart
// on the same data directory: the line is the order the logged seed gives, whenever the kill
// landed, and nobody is lost or twice in it.
TEST(LaunchCrashTest, AKillAtTheDrawGivesTheSeedsOrderAfterTheRestart) {
  TempDir dir("anteroom-launch-crash");
  ASSERT_FALSE(dir.path().empty());
  std::vector<std::string> args = {"--data", dir.path().string(), "--fsync",
                                   "always", "--draw-chunk",      "7"};
  constexpr int kPeople = 1'500;
  int64_t starts_at = 0;
  {
    ServerProcess server(args, {{"ANTEROOM_TOKEN_SECRET", "launch-crash-secret-0123456789"}});
    ASSERT_TRUE(server.started()) << server.error();
    Client c(server.url(), "");
    ASSERT_EQ(c.PutRoom("r", {{"capacity", 1}}).status, 200);
    // The pre-queue fills with a start far off, then the start is brought to a moment from now
    // (an event that has not started may move), so a slow machine cannot miss it.
    int64_t prequeue_at = NowMs() - 1'000;  // already open (the server's clock may lag ours)
    auto event = [&](int64_t start) {
      return json::object{{"prequeue_at", prequeue_at},
                          {"starts_at", start},
                          {"ends_at", start + 600'000},
                          {"shuffle_at_start", true}};
    };
    ASSERT_EQ(PutEvent(c, "r", "drop", event(NowMs() + 3'600'000)).status, 200);
    for (int i = 0; i < kPeople; ++i) {
      HttpResult r = c.Check("r", Session(i));
      ASSERT_EQ(StrField(r.json, "status"), "prequeue") << i << r.body;
    }
    starts_at = NowMs() + 300;
    ASSERT_EQ(PutEvent(c, "r", "drop", event(starts_at)).status, 200);
    std::this_thread::sleep_for(milliseconds(std::max<int64_t>(0, starts_at - NowMs() + 3)));
    kill(server.pid(), SIGKILL);
    server.Stop();
  }
  ServerProcess server(args, {{"ANTEROOM_TOKEN_SECRET", "launch-crash-secret-0123456789"}});
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url(), "");
  ASSERT_TRUE(WaitFor(
      [&] {
        HttpResult e = c.Request("GET", "/v1/rooms/r/schedule/drop");
        HttpResult room = c.GetRoom("r");
        return e.status == 200 && e.json.at("shuffle").is_object() && room.status == 200 &&
               room.json.at("waiting") == json::value(kPeople - 1);
      },
      milliseconds(20'000)));
  std::string seed = std::string(
      c.Request("GET", "/v1/rooms/r/schedule/drop").json.at("shuffle").at("seed").as_string());
  std::vector<uint32_t> arrival(kPeople);
  for (int i = 0; i < kPeople; ++i) arrival[static_cast<size_t>(i)] = static_cast<uint32_t>(i);
  core::FisherYates draw(SeedFromHex(seed), arrival);
  while (draw.done() < draw.size()) draw.Step(100'000);
  // Everyone checks in now (the restart counts them as seen): the first drawn holds the slot,
  // the rest wait at their drawn place.
  for (int k = 0; k < kPeople; k += 37) {
    int i = static_cast<int>(draw.order()[static_cast<size_t>(k)]);
    HttpResult r = c.Check("r", Session(i));
    ASSERT_EQ(r.status, 200) << r.body;
    if (k == 0) {
      EXPECT_EQ(StrField(r.json, "status"), "active");
    } else {
      EXPECT_EQ(IntField(r.json, "position"), k) << "drawn place " << k;
    }
  }
}

// A switch to random, three slots freed (three picks from the room's seed stream), then
// SIGKILL: after the restart the room is still random, the same three hold the slots, and
// switching back to fifo gives everyone else their place in arrival order.
TEST(LaunchCrashTest, AKillAfterASwitchKeepsTheMethodThePicksAndTheOrder) {
  TempDir dir("anteroom-launch-switch");
  ASSERT_FALSE(dir.path().empty());
  std::vector<std::string> args = {"--data", dir.path().string(), "--fsync", "always"};
  const EnvVars env = {{"ANTEROOM_TOKEN_SECRET", "launch-switch-secret-0123456789"}};
  constexpr int kPeople = 60;
  std::set<int> picked;
  {
    ServerProcess server(args, env);
    ASSERT_TRUE(server.started()) << server.error();
    Client c(server.url(), "");
    ASSERT_EQ(c.PutRoom("r", {{"capacity", 3}}).status, 200);
    for (int i = 0; i < kPeople; ++i) ASSERT_EQ(c.Check("r", Session(i)).status, 200);
    ASSERT_EQ(c.PutRoom("r", {{"queueing_method", "random"}}).status, 200);
    for (int i = 0; i < 3; ++i) ASSERT_EQ(c.Leave("r", Session(i), true).status, 200);
    for (int i = 3; i < kPeople; ++i) {
      HttpResult r = c.Check("r", Session(i));
      ASSERT_EQ(r.status, 200) << r.body;
      if (StrField(r.json, "status") == "active") picked.insert(i);
    }
    ASSERT_EQ(picked.size(), 3u);
    // Three picks from 57 landing on the first three in line: a 1 in 29,260 chance.
    EXPECT_NE(picked, (std::set<int>{3, 4, 5})) << "the picks look like fifo's";
    kill(server.pid(), SIGKILL);
    server.Stop();
  }
  ServerProcess server(args, env);
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url(), "");
  HttpResult room = c.GetRoom("r");
  ASSERT_EQ(room.status, 200) << room.body;
  EXPECT_EQ(StrField(room.json, "queueing_method"), "random");
  for (int i = 3; i < kPeople; ++i) {
    HttpResult r = c.Check("r", Session(i));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(StrField(r.json, "status"), picked.contains(i) ? "active" : "waiting") << i;
  }
  ASSERT_EQ(c.PutRoom("r", {{"queueing_method", "fifo"}}).status, 200);
  int64_t place = 0;
  for (int i = 3; i < kPeople; ++i) {
    if (picked.contains(i)) continue;
    HttpResult r = c.Check("r", Session(i));
    EXPECT_EQ(IntField(r.json, "position"), ++place) << i;
  }
}

}  // namespace
}  // namespace anteroom::testing
