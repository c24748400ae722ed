// The room family's handlers in process: configuration (admin), check-ins, touches, leaves,
// evictions and challenges, dispatched through the router over a memory backend.
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

TEST(RoomsFamilyTest, PutGetListDeleteNeedTheKeyWhereTheyChangeThings) {
  FamilyWorld w;
  EXPECT_EQ(w.Call(verb::put, "/v1/rooms/r", R"({"capacity": 2})").status, 401u);
  Response put = w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 2})");
  ASSERT_EQ(put.status, 200u) << put.body;
  EXPECT_EQ(Json(put).at("capacity").as_int64(), 2);
  EXPECT_EQ(Json(w.Call(verb::get, "/v1/rooms/r")).at("room").as_string(), "r");
  EXPECT_EQ(Json(w.Call(verb::get, "/v1/rooms")).at("rooms").as_array().size(), 1u);
  EXPECT_EQ(w.Call(verb::delete_, "/v1/rooms/r").status, 401u);
  Response deleted = w.Admin(verb::delete_, "/v1/rooms/r");
  EXPECT_TRUE(Json(deleted).at("deleted").as_bool());
  EXPECT_EQ(ErrorCode(w.Call(verb::get, "/v1/rooms/r")), "unknown_room");
}

TEST(RoomsFamilyTest, CheckTouchLeave) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1})").status, 200u);
  Response first = w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "alice"})");
  ASSERT_EQ(first.status, 200u) << first.body;
  EXPECT_EQ(Json(first).at("status").as_string(), "active");
  EXPECT_TRUE(Json(first).at("token").is_string());
  Response second = w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "bob"})");
  EXPECT_EQ(Json(second).at("status").as_string(), "waiting");
  EXPECT_EQ(Json(second).at("position").as_int64(), 1);
  Response named = w.Call(verb::post, "/v1/rooms/r/check", "");
  EXPECT_TRUE(Json(named).at("session").is_string())
      << "the server names a session: " << named.body;

  EXPECT_EQ(w.Call(verb::post, "/v1/rooms/r/touch", R"({"session": "bob"})").status, 200u);
  Response left = w.Call(verb::post, "/v1/rooms/r/leave", R"({"session": "alice", "final": true})");
  ASSERT_EQ(left.status, 200u) << left.body;
  Response admitted = w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "bob"})");
  EXPECT_EQ(Json(admitted).at("status").as_string(), "active") << admitted.body;

  EXPECT_EQ(w.Call(verb::delete_, "/v1/rooms/r/sessions/bob").status, 401u);
  EXPECT_EQ(w.Admin(verb::delete_, "/v1/rooms/r/sessions/bob").status, 200u);
}

TEST(RoomsFamilyTest, RequestsRefusedBeforeTheBackend) {
  FamilyWorld w;
  Response name = w.Call(verb::get, "/v1/rooms/a%20b");
  EXPECT_EQ(name.status, 400u);
  EXPECT_EQ(ErrorMessage(name), wire::BadPathName(wire::kRoomNames));
  Response session = w.Admin(verb::delete_, "/v1/rooms/r/sessions/a%20b");
  EXPECT_EQ(ErrorMessage(session), wire::BadPathName(wire::kSessionIds));
  Response touch = w.Call(verb::post, "/v1/rooms/r/touch", "{}");
  EXPECT_EQ(ErrorMessage(touch), wire::FieldRequired("session"));
  Response field = w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "a b"})");
  EXPECT_EQ(ErrorMessage(field), wire::BadNameField("session"));
  Response patch = w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 0})");
  EXPECT_EQ(ErrorMessage(patch), wire::IntegerOutOfRange("capacity", 1, core::kMaxCapacity));
  Response challenge = w.Admin(verb::put, "/v1/rooms/r", R"({"challenge": 3})");
  EXPECT_EQ(ErrorMessage(challenge), wire::kChallengeShape);
  Response url = w.Admin(verb::put, "/v1/rooms/r", R"({"target_url": 3})");
  EXPECT_EQ(ErrorMessage(url), wire::kTargetUrlType);
  Response query = w.Call(verb::get, "/v1/rooms/r/challenge?session=a%20b");
  EXPECT_EQ(ErrorMessage(query), wire::BadNameField("session"));
  EXPECT_EQ(w.Call(verb::get, "/v1/rooms").body, R"({"rooms":[]})") << "nothing was created";
}

TEST(RoomsFamilyTest, ChallengeOfARoomWithAndWithoutOne) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/open", R"({"capacity": 1})").status, 200u);
  Response none = w.Call(verb::get, "/v1/rooms/open/challenge?session=s1");
  ASSERT_EQ(none.status, 200u) << none.body;
  EXPECT_TRUE(Json(none).at("type").is_null());
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/hard",
                    R"({"capacity": 1, "challenge": {"type": "pow", "difficulty": 4}})")
                .status,
            200u);
  Response puzzle = w.Call(verb::get, "/v1/rooms/hard/challenge");
  ASSERT_EQ(puzzle.status, 200u) << puzzle.body;
  EXPECT_EQ(Json(puzzle).at("type").as_string(), "pow");
  EXPECT_EQ(Json(puzzle).at("difficulty").as_int64(), 4);
  Response refused = w.Call(verb::post, "/v1/rooms/hard/check", R"({"session": "s1"})");
  EXPECT_EQ(ErrorCode(refused), "challenge_required") << refused.body;
  EXPECT_NE(ErrorMessage(refused).find("/v1/rooms/hard/challenge?session=s1"), std::string::npos);
}

TEST(RoomsFamilyTest, TheLiveRoutesWantTheirTransport) {
  FamilyWorld w;
  Response ws = w.Call(verb::get, "/v1/rooms/r/ws?session=s");
  EXPECT_EQ(ws.status, 426u);
  EXPECT_EQ(ErrorMessage(ws), wire::kNotWebSocket);
  Response name = w.Call(verb::get, "/v1/rooms/a%20b/events");
  EXPECT_EQ(ErrorMessage(name), wire::BadPathName(wire::kRoomNames));
}

}  // namespace
}  // namespace anteroom::server
