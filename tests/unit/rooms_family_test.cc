// The room family's handlers in process: configuration (admin), check-ins, touches, leaves,
// evictions and challenges, dispatched through the router over a memory backend.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "common/wire_errors.h"
#include "family_world.h"
#include "server/page_settings.h"

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
  Response first =
      w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "alice-Qm9vYmFyYmF6cXV4"})");
  ASSERT_EQ(first.status, 200u) << first.body;
  EXPECT_EQ(Json(first).at("status").as_string(), "active");
  EXPECT_TRUE(Json(first).at("token").is_string());
  Response second =
      w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "bob-UXVpY2tCcm93bkZveA"})");
  EXPECT_EQ(Json(second).at("status").as_string(), "waiting");
  EXPECT_EQ(Json(second).at("position").as_int64(), 1);
  Response named = w.Call(verb::post, "/v1/rooms/r/check", "");
  EXPECT_TRUE(Json(named).at("session").is_string())
      << "the server names a session: " << named.body;

  EXPECT_EQ(
      w.Call(verb::post, "/v1/rooms/r/touch", R"({"session": "bob-UXVpY2tCcm93bkZveA"})").status,
      200u);
  Response left = w.Call(verb::post, "/v1/rooms/r/leave",
                         R"({"session": "alice-Qm9vYmFyYmF6cXV4", "final": true})");
  ASSERT_EQ(left.status, 200u) << left.body;
  Response admitted =
      w.Call(verb::post, "/v1/rooms/r/check", R"({"session": "bob-UXVpY2tCcm93bkZveA"})");
  EXPECT_EQ(Json(admitted).at("status").as_string(), "active") << admitted.body;

  EXPECT_EQ(w.Call(verb::delete_, "/v1/rooms/r/sessions/bob-UXVpY2tCcm93bkZveA").status, 401u);
  EXPECT_EQ(w.Admin(verb::delete_, "/v1/rooms/r/sessions/bob-UXVpY2tCcm93bkZveA").status, 200u);
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
  Response port = w.Admin(verb::put, "/v1/rooms/r",
                          R"({"target_url": "https://shop.example:443evil.example/"})");
  EXPECT_EQ(port.status, 400u) << "the port runs into the host: common/uri_shape.h";
  Response query = w.Call(verb::get, "/v1/rooms/r/challenge?session=a%20b");
  EXPECT_EQ(ErrorMessage(query), wire::BadNameField("session"));
  EXPECT_EQ(w.Call(verb::get, "/v1/rooms").body, R"({"rooms":[]})") << "nothing was created";
}

TEST(RoomsFamilyTest, ChallengeOfARoomWithAndWithoutOne) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/open", R"({"capacity": 1})").status, 200u);
  Response none = w.Call(verb::get, "/v1/rooms/open/challenge?session=s1-SnVtcGVkT3ZlclRoZUxh");
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
  Response refused =
      w.Call(verb::post, "/v1/rooms/hard/check", R"({"session": "s1-SnVtcGVkT3ZlclRoZUxh"})");
  EXPECT_EQ(ErrorCode(refused), "challenge_required") << refused.body;
  EXPECT_NE(ErrorMessage(refused).find("/v1/rooms/hard/challenge?session=s1-SnVtcGVkT3ZlclRoZUxh"),
            std::string::npos);
}

TEST(RoomsFamilyTest, TheLiveRoutesWantTheirTransport) {
  FamilyWorld w;
  Response ws = w.Call(verb::get, "/v1/rooms/r/ws?session=s-ZXZlcnlTZXNzaW9uSWQx");
  EXPECT_EQ(ws.status, 426u);
  EXPECT_EQ(ErrorMessage(ws), wire::kNotWebSocket);
  Response name = w.Call(verb::get, "/v1/rooms/a%20b/events");
  EXPECT_EQ(ErrorMessage(name), wire::BadPathName(wire::kRoomNames));
}

// A session id is its session's only credential. One a client names must carry 128 bits (22
// characters); shorter ones only with the admin key (apps naming sessions after their users,
// server-side), or on a server with no admin key at all (everything open).
TEST(RoomsFamilyTest, ClientsNameSessionsWith128Bits) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1})").status, 200u);
  const std::string short_id = "user-42";
  const std::string id21(21, 'x'), id22(22, 'x');
  for (const auto& [method, target, body] : std::vector<std::tuple<verb, std::string, std::string>>{
           {verb::post, "/v1/rooms/r/check", R"({"session": "user-42"})"},
           {verb::post, "/v1/rooms/r/check", R"({"session": ")" + id21 + R"("})"},
           {verb::post, "/v1/rooms/r/touch", R"({"session": "user-42"})"},
           {verb::post, "/v1/rooms/r/leave", R"({"session": "user-42", "final": true})"},
           {verb::get, "/v1/rooms/r/events?session=user-42", ""},
           {verb::get, "/v1/rooms/r/ws?session=user-42", ""},
           {verb::get, "/v1/rooms/r/challenge?session=user-42", ""},
       }) {
    SCOPED_TRACE(target + " " + body);
    Response r = w.Call(method, target, body);
    EXPECT_EQ(r.status, 400u) << r.body;
    EXPECT_EQ(ErrorMessage(r), wire::kShortSessionId);
  }
  EXPECT_EQ(Json(w.Call(verb::get, "/v1/rooms/r")).at("active").as_int64(), 0) << "nobody joined";
  Response long_enough =
      w.Call(verb::post, "/v1/rooms/r/check", R"({"session": ")" + id22 + R"("})");
  EXPECT_EQ(long_enough.status, 200u) << long_enough.body;
  // The app's own server, with the admin key, names its users' sessions as it likes.
  Response app = w.Admin(verb::post, "/v1/rooms/r/check", R"({"session": "user-42"})");
  EXPECT_EQ(app.status, 200u) << app.body;
  EXPECT_EQ(Json(app).at("status").as_string(), "waiting");
  EXPECT_EQ(w.Admin(verb::post, "/v1/rooms/r/touch", R"({"session": "user-42"})").status, 200u);
  // ... but the admin key of another server is not it.
  Response wrong = *w.Send(verb::post, "/v1/rooms/r/touch", R"({"session": "user-42"})",
                           "Bearer not-the-admin-key");
  EXPECT_EQ(wrong.status, 400u);

  FamilyWorld open("", "");
  ASSERT_EQ(open.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1})").status, 200u);
  EXPECT_EQ(open.Call(verb::post, "/v1/rooms/r/check", R"({"session": "ann"})").status, 200u)
      << "no admin key: every request has the admin's rights";
}

// Touch and leave answer a session the room never had as one that has just left for good, so
// they cannot be used to learn whether an id is in the room.
TEST(RoomsFamilyTest, ATokenKeepsItsHolderAliveWithoutNamingIt) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1, "grace_ms": 60000})").status,
            200u);
  Response joined = w.Call(verb::post, "/v1/rooms/r/check", "");
  ASSERT_EQ(Json(joined).at("status").as_string(), "active");
  const std::string session(Json(joined).at("session").as_string());
  const std::string token(Json(joined).at("token").as_string());
  auto by_token = [&](const std::string& t) {
    return w.Call(verb::post, "/v1/rooms/r/check", R"({"token": ")" + t + R"("})");
  };
  Response r = by_token(token);
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_TRUE(Json(r).at("session").is_null());
  EXPECT_EQ(Json(r).at("status").as_string(), "active");
  EXPECT_FALSE(Json(r).at("token").as_string().empty());
  EXPECT_EQ(r.body.find(session), std::string::npos) << r.body;
  // Out for a moment (grace): the token's check brings the holder back.
  ASSERT_EQ(w.Call(verb::post, "/v1/rooms/r/leave", R"({"session": ")" + session + R"("})").status,
            200u);
  EXPECT_EQ(Json(by_token(token)).at("status").as_string(), "active");
  // Not this room's token, or both names at once: refused, nothing changed.
  EXPECT_EQ(by_token("x.y.z").status, 400u);
  EXPECT_EQ(w.Call(verb::post, "/v1/rooms/r/check",
                   R"({"token": ")" + token + R"(", "session": ")" + session + R"("})")
                .status,
            400u);
  EXPECT_EQ(w.Call(verb::get, "/v1/rooms/r/events?token=" + token + "&session=" + session).status,
            400u);
  // The admission over: gone, never a join.
  ASSERT_EQ(w.Admin(verb::delete_, "/v1/rooms/r/sessions/" + session).status, 200u);
  Response gone = by_token(token);
  EXPECT_EQ(Json(gone).at("status").as_string(), "gone");
  EXPECT_TRUE(Json(gone).at("session").is_null());
  EXPECT_EQ(Json(w.Call(verb::get, "/v1/rooms/r")).at("waiting").as_int64(), 0);
  EXPECT_EQ(Json(w.Call(verb::get, "/v1/rooms/r")).at("active").as_int64(), 0);
  EXPECT_EQ(ErrorCode(w.Call(verb::get, "/v1/rooms/r/events?token=" + token)), "unknown_session");
}

TEST(RoomsFamilyTest, TouchAndLeaveDoNotTellWhetherASessionExists) {
  FamilyWorld w;
  ASSERT_EQ(w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1})").status, 200u);
  const std::string a = "a-000000000000000000000", b = "b-000000000000000000000",
                    c = "c-000000000000000000000", nobody = "n-000000000000000000000";
  for (const std::string& id : {a, b, c}) {
    ASSERT_EQ(w.Call(verb::post, "/v1/rooms/r/check", R"({"session": ")" + id + R"("})").status,
              200u);
  }
  // b waits: a final leave of b, and of nobody, answer alike but for the id.
  auto without_id = [](Response r, const std::string& id) {
    std::string body = r.body;
    body.replace(body.find(id), id.size(), "ID");
    return std::to_string(r.status) + " " + body;
  };
  Response left = w.Call(verb::post, "/v1/rooms/r/leave", R"({"session": ")" + b + R"("})");
  // Now 1 active, 1 waiting (c): nobody's answers are read against the same counts.
  Response touch_nobody =
      w.Call(verb::post, "/v1/rooms/r/touch", R"({"session": ")" + nobody + R"("})");
  Response leave_nobody =
      w.Call(verb::post, "/v1/rooms/r/leave", R"({"session": ")" + nobody + R"(", "final": true})");
  Response leave_b_again =
      w.Call(verb::post, "/v1/rooms/r/leave", R"({"session": ")" + b + R"(", "final": true})");
  EXPECT_EQ(Json(left).at("status").as_string(), "gone") << left.body;
  EXPECT_EQ(without_id(touch_nobody, nobody), without_id(leave_b_again, b));
  EXPECT_EQ(without_id(leave_nobody, nobody), without_id(leave_b_again, b));
  EXPECT_EQ(Json(leave_nobody).at("waiting").as_int64(), 1);
  EXPECT_EQ(Json(leave_nobody).at("active").as_int64(), 1);
  // An unknown room is still said: rooms are public.
  EXPECT_EQ(ErrorCode(w.Call(verb::post, "/v1/rooms/nowhere/touch",
                             R"({"session": ")" + nobody + R"("})")),
            "unknown_room");
}

TEST(RoomsFamilyTest, PageSettingsAreValidatedKeptCanonicalAndCleared) {
  FamilyWorld w;
  Response put = w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 1, "page": {
      "template": "shop", "language": "de", "colors": {"text": "#1F2937", "accent": "#2f6fde"},
      "logo_url": "https://cdn.example/logo.svg", "message": "Two\nlines", "title": "Drop"}})");
  ASSERT_EQ(put.status, 200u) << put.body;
  const std::string canonical =
      R"({"title":"Drop","message":"Two\nlines","logo_url":"https://cdn.example/logo.svg",)"
      R"("colors":{"text":"#1f2937","accent":"#2f6fde"},"language":"de","template":"shop"})";
  EXPECT_EQ(boost::json::serialize(Json(put).at("page")), canonical);
  // Public: the page shows it.
  EXPECT_EQ(boost::json::serialize(Json(w.Call(verb::get, "/v1/rooms/r")).at("page")), canonical);
  ASSERT_EQ(
      w.Admin(verb::put, "/v1/rooms/r", R"({"page": {"logo_url": "/static/logo.png"}})").status,
      200u);
  EXPECT_EQ(boost::json::serialize(Json(w.Call(verb::get, "/v1/rooms/r")).at("page")),
            R"({"logo_url":"/static/logo.png"})")
      << "a page replaces the whole object";
  Response cleared = w.Admin(verb::put, "/v1/rooms/r", R"({"page": null})");
  EXPECT_TRUE(Json(cleared).at("page").is_null());

  const std::vector<std::tuple<std::string, std::string>> refused = {
      {R"("<h1>")", wire::PageShape("page")},
      {R"({"script": "x"})", wire::PageShape("page")},
      {R"({"title": 3})", wire::PageText("page.title", kMaxPageTitleBytes)},
      {R"({"title": "a\u0000b"})", wire::PageText("page.title", kMaxPageTitleBytes)},
      {R"({"title": "a\nb"})", wire::PageText("page.title", kMaxPageTitleBytes)},
      {"{\"title\": \"" + std::string(kMaxPageTitleBytes + 1, 't') + "\"}",
       wire::PageText("page.title", kMaxPageTitleBytes)},
      {R"({"message": "a\u001bb"})", wire::PageText("page.message", kMaxPageMessageBytes)},
      {R"({"logo_url": "http://cdn.example/l.png"})", wire::PageLogoUrl("page")},
      {R"x({"logo_url": "javascript:alert(1)"})x", wire::PageLogoUrl("page")},
      {R"x({"logo_url": "data:image/svg+xml,<svg/onload=alert(1)>"})x", wire::PageLogoUrl("page")},
      {R"({"logo_url": "//evil.example/l.png"})", wire::PageLogoUrl("page")},
      {R"({"logo_url": "https://user:pw@cdn.example/l.png"})", wire::PageLogoUrl("page")},
      {R"({"logo_url": "logo.png"})", wire::PageLogoUrl("page")},
      {R"({"logo_url": "https://cdn.example:443evil.example/l.png"})", wire::PageLogoUrl("page")},
      {R"({"colors": {"text": "red"}})", wire::PageColors("page")},
      {R"({"colors": {"text": "#fff"}})", wire::PageColors("page")},
      {R"({"colors": {"text": "#12345g"}})", wire::PageColors("page")},
      {R"x({"colors": {"text": "#123456;background:url(x)"}})x", wire::PageColors("page")},
      {R"({"colors": {"border": "#123456"}})", wire::PageColors("page")},
      {R"({"colors": "#123456"})", wire::PageColors("page")},
      {R"({"language": "it"})", wire::PageLanguage("page")},
      {R"({"language": "EN"})", wire::PageLanguage("page")},
      {R"({"template": "../wait"})", wire::PageTemplate("page")},
      {R"({"template": ""})", wire::PageTemplate("page")},
  };
  for (const auto& [page, message] : refused) {
    Response r = w.Admin(verb::put, "/v1/rooms/r", R"({"capacity": 3, "page": )" + page + "}");
    EXPECT_EQ(r.status, 400u) << page;
    EXPECT_EQ(ErrorMessage(r), message) << page;
  }
  EXPECT_EQ(Json(w.Call(verb::get, "/v1/rooms/r")).at("capacity").as_int64(), 1)
      << "a refused page changes nothing";
}

TEST(RoomsFamilyTest, AcceptLanguagePicksABundledLanguage) {
  EXPECT_EQ(PickLanguage(""), "en");
  EXPECT_EQ(PickLanguage("de-CH, de;q=0.9, en;q=0.8"), "de");
  EXPECT_EQ(PickLanguage("it, fr;q=0.5, ja;q=0.7"), "ja");
  EXPECT_EQ(PickLanguage("pt-BR"), "en");
  EXPECT_EQ(PickLanguage("ES-419,es;q=0.9"), "es");
  EXPECT_EQ(PickLanguage("fr;q=0, de;q=0.1"), "de");
  EXPECT_EQ(PickLanguage("*;q=0.5, fr;q=0.4"), "en");
  EXPECT_EQ(PickLanguage("ja;q=0.5 , fr ; q=0.9"), "fr");
}

}  // namespace
}  // namespace anteroom::server
