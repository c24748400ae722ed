// The admin event stream against the real server: every kind of room change told once, in
// order, each room's events numbered without a gap; resuming with Last-Event-ID; filters; a reset
// for a position the server no longer keeps; bad requests refused before any stream.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "support/api_checks.h"
#include "support/live_client.h"
#include "support/server_fixture.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;
using Kind = LiveClient::Kind;

constexpr milliseconds kWait(5000);
constexpr char kAdmin[] = "lifecycle-admin-key";

class LifecycleHttpTest : public ServerTest {
 protected:
  std::vector<std::string> ServerArgs() const override { return {"--live-heartbeat-ms", "400"}; }
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}, {"ANTEROOM_ADMIN_KEY", kAdmin}};
  }
  std::string AdminKey() const override { return kAdmin; }

  std::unique_ptr<LiveClient> Open(const std::string& query = {},
                                   std::vector<std::string> headers = {}) {
    headers.push_back(std::string("Authorization: Bearer ") + kAdmin);
    auto c = std::make_unique<LiveClient>(server().port(), "/v1/admin/events" + query,
                                          Kind::kEvents, kWait, headers);
    EXPECT_TRUE(c->ok()) << c->error() << " " << c->refused_body();
    return c;
  }

  // The next `n` events (heartbeats skipped), or fewer when they do not come in time.
  static std::vector<boost::json::object> Take(LiveClient& c, size_t n) {
    std::vector<boost::json::object> out;
    while (out.size() < n) {
      auto m = c.Next(kWait);
      if (!m) break;
      if (m->type() == "heartbeat") continue;
      out.push_back(m->json.as_object());
    }
    return out;
  }
  static std::string Type(const boost::json::object& e) {
    return std::string(e.at("type").as_string());
  }
  // An event's id, <ms>-<n>, as the pair it orders by.
  static std::pair<int64_t, int64_t> Position(const boost::json::object& e) {
    std::string id(e.at("id").as_string());
    size_t dash = id.find('-');
    return {std::stoll(id.substr(0, dash)), std::stoll(id.substr(dash + 1))};
  }
  static std::string Session(const boost::json::object& e) {
    const auto& d = e.at("data").as_object();
    return d.contains("session") ? std::string(d.at("session").as_string()) : "";
  }
};

// A room's life, told in the order it happened, with the room's sequence 1, 2, 3, ...
TEST_F(LifecycleHttpTest, ARoomsLifeIsToldInOrderAndNumberedWithoutGaps) {
  auto stream = Open();
  ASSERT_EQ(client().PutRoom("r", {{"capacity", 1}, {"grace_ms", 60'000}}).status, 200);
  ASSERT_EQ(client().Check("r", "alice-000000000000000000").status, 200);  // admitted
  ASSERT_EQ(client().Check("r", "bob-00000000000000000000").status, 200);  // waits
  ASSERT_EQ(client().Check("r", "carol-000000000000000000").status, 200);
  ASSERT_EQ(client().Leave("r", "carol-000000000000000000").status, 200);        // left the line
  ASSERT_EQ(client().EndSession("r", "alice-000000000000000000").status, 200);   // revoked
  ASSERT_EQ(client().PutRoom("r", {{"capacity", 2}}).status, 200);               // changed
  ASSERT_EQ(client().Leave("r", "bob-00000000000000000000", true).status, 200);  // left a slot
  ASSERT_EQ(client().DeleteRoom("r").status, 200);

  std::vector<std::pair<std::string, std::string>> want = {
      {"room.created", ""},
      {"room.joined", "alice-000000000000000000"},
      {"room.admitted", "alice-000000000000000000"},
      {"room.joined", "bob-00000000000000000000"},
      {"room.joined", "carol-000000000000000000"},
      {"room.left", "carol-000000000000000000"},
      {"room.revoked", "alice-000000000000000000"},
      {"room.admitted", "bob-00000000000000000000"},
      {"room.changed", ""},
      {"room.left", "bob-00000000000000000000"},
      {"room.deleted", ""},
  };
  auto got = Take(*stream, want.size());
  ASSERT_EQ(got.size(), want.size());
  std::pair<int64_t, int64_t> last{0, 0};
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(boost::json::serialize(got[i]));
    EXPECT_EQ(Type(got[i]), want[i].first);
    EXPECT_EQ(Session(got[i]), want[i].second);
    EXPECT_EQ(got[i].at("room").as_string(), "r");
    EXPECT_EQ(got[i].at("seq").as_int64(), static_cast<int64_t>(i + 1));
    auto position = Position(got[i]);
    EXPECT_LT(last, position);
    last = position;
  }
  const auto& admitted = got[2].at("data").as_object();
  EXPECT_EQ(admitted.at("admission").as_int64(), 1);
  EXPECT_TRUE(got[0].contains("time"));
}

// Last-Event-ID resumes after the event it names: nothing missed, nothing twice.
TEST_F(LifecycleHttpTest, LastEventIdResumesAfterTheEventItNames) {
  auto first = Open();
  ASSERT_EQ(client().PutRoom("r", {{"capacity", 1}}).status, 200);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(client().Check("r", "s" + std::to_string(i) + "-0000000000000000000000").status, 200);
  }
  auto seen = Take(*first, 3);  // created, joined s0, admitted s0
  ASSERT_EQ(seen.size(), 3u);
  first->Close();
  ASSERT_EQ(client().Check("r", "late-00000000000000000000").status, 200);

  auto resumed = Open({}, {"Last-Event-ID: " + std::string(seen.back().at("id").as_string())});
  auto rest = Take(*resumed, 5);  // joined s1..s4, joined late
  ASSERT_EQ(rest.size(), 5u);
  for (size_t i = 0; i < rest.size(); ++i) {
    EXPECT_EQ(Type(rest[i]), "room.joined");
    EXPECT_EQ(rest[i].at("seq").as_int64(), static_cast<int64_t>(4 + i));
  }
  EXPECT_EQ(Session(rest.back()), "late-00000000000000000000");
}

TEST_F(LifecycleHttpTest, FiltersByTypeAndRoom) {
  auto admitted_in_a = Open("?types=room.admitted&rooms=a");
  auto everything = Open();
  ASSERT_EQ(client().PutRoom("a", {{"capacity", 5}}).status, 200);
  ASSERT_EQ(client().PutRoom("b", {{"capacity", 5}}).status, 200);
  ASSERT_EQ(client().Check("b", "in-b-00000000000000000000").status, 200);
  ASSERT_EQ(client().Check("a", "in-a-00000000000000000000").status, 200);
  auto all = Take(*everything, 6);
  EXPECT_EQ(all.size(), 6u);
  auto one = Take(*admitted_in_a, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(Type(one[0]), "room.admitted");
  EXPECT_EQ(Session(one[0]), "in-a-00000000000000000000");
  EXPECT_EQ(one[0].at("seq").as_int64(), 3);  // room a: created, joined, admitted
}

// A position the server does not keep (another server's, or from before this one started) is
// answered with a reset first, then everything kept.
TEST_F(LifecycleHttpTest, AnUnknownPositionIsToldToResetThenGetsWhatIsKept) {
  ASSERT_EQ(client().PutRoom("r", {{"capacity", 1}}).status, 200);
  auto stream = Open("?after=1000-1");
  auto got = Take(*stream, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(Type(got[0]), "reset");
  EXPECT_EQ(Type(got[1]), "room.created");
}

TEST_F(LifecycleHttpTest, BadRequestsAreRefusedBeforeAnyStream) {
  for (const char* query : {"?types=room.nope", "?types=room.joined,,room.left", "?rooms=a b",
                            "?after=12", "?after=1-x", "?rooms="}) {
    LiveClient c(server().port(), std::string("/v1/admin/events") + query, Kind::kEvents, kWait,
                 {std::string("Authorization: Bearer ") + kAdmin});
    EXPECT_EQ(c.refused_status(), 400) << query << " " << c.refused_body();
  }
  LiveClient no_key(server().port(), "/v1/admin/events", Kind::kEvents, kWait);
  EXPECT_EQ(no_key.refused_status(), 401) << no_key.refused_body();
  LiveClient bad_header(server().port(), "/v1/admin/events", Kind::kEvents, kWait,
                        {std::string("Authorization: Bearer ") + kAdmin, "Last-Event-ID: nope"});
  EXPECT_EQ(bad_header.refused_status(), 400) << bad_header.refused_body();
}

// Timed changes are told too: a waiting session that stops checking in drops out, and the grace
// of one that left runs out.
TEST_F(LifecycleHttpTest, DeadlinesAreToldWhenTheyFall) {
  auto stream = Open("?types=room.dropped,room.expired,room.admitted");
  ASSERT_EQ(client()
                .PutRoom("t", {{"capacity", 1}, {"grace_ms", 300}, {"checkin_timeout_ms", 600}})
                .status,
            200);
  ASSERT_EQ(client().Check("t", "holder-00000000000000000").status, 200);
  ASSERT_EQ(client().Check("t", "waiter-00000000000000000").status, 200);
  ASSERT_EQ(client().Leave("t", "holder-00000000000000000").status, 200);  // grace: 300 ms
  auto got = Take(*stream, 4);
  ASSERT_GE(got.size(), 3u);
  EXPECT_EQ(Type(got[0]), "room.admitted");
  EXPECT_EQ(Session(got[0]), "holder-00000000000000000");
  EXPECT_EQ(Type(got[1]), "room.expired");
  EXPECT_EQ(Session(got[1]), "holder-00000000000000000");
  EXPECT_EQ(Type(got[2]), "room.admitted");
  EXPECT_EQ(Session(got[2]), "waiter-00000000000000000");
  // The waiter, admitted without checking in again, never claims its slot: dropped.
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(Type(got[3]), "room.dropped");
  EXPECT_EQ(Session(got[3]), "waiter-00000000000000000");
}

// A queue's events: a job whose last attempt failed goes dead (its id and the error), and the
// queue is paused and resumed (told once each, not for a pause of a paused queue).
TEST_F(LifecycleHttpTest, AQueuesDeadJobsAndPausesAreTold) {
  auto stream = Open("?types=job.dead,queue.paused,queue.resumed");
  HttpResult pushed = client().Push("mail", boost::json::value("hello"), {{"max_attempts", 1}});
  ASSERT_EQ(pushed.status, 201) << pushed.body;
  std::string id(pushed.json.at("id").as_string());
  HttpResult got = client().Fetch("mail", "w1");
  ASSERT_EQ(got.status, 200) << got.body;
  std::string lease(got.json.at("jobs").at(0).at("lease").as_string());
  ASSERT_EQ(client().Nack("mail", {lease}, std::nullopt, "smtp refused").status, 200);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(client().Request("POST", "/v1/queues/mail/pause", "{}").status, 200);
  }
  ASSERT_EQ(client().Request("POST", "/v1/queues/mail/resume", "{}").status, 200);
  auto events = Take(*stream, 3);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(Type(events[0]), "job.dead");
  EXPECT_EQ(events[0].at("queue").as_string(), "mail");
  EXPECT_FALSE(events[0].contains("room"));
  EXPECT_EQ(events[0].at("data").at("job").as_string(), id);
  EXPECT_EQ(events[0].at("data").at("detail").as_string(), "smtp refused");
  EXPECT_EQ(Type(events[1]), "queue.paused");
  EXPECT_EQ(Type(events[2]), "queue.resumed");
}

}  // namespace
}  // namespace anteroom::testing
