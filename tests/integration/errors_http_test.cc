// Every error case of the API against a real server: the error JSON shape, the status, the
// code, and that the room's state is unchanged afterwards.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <string>
#include <vector>

#include "support/api_checks.h"
#include "support/server_fixture.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;

// A room "r" of capacity 2 with s1, s2 active and s3 waiting; every test compares the state
// of the room (and the list of rooms) before and after the bad requests.
class ErrorsHttpTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    MustPut("r", {{"capacity", 2}, {"grace_ms", 60000}, {"admit_per_minute", 100}});
    ASSERT_TRUE(IsSession(client().Check("r", "s1"), "active"));
    ASSERT_TRUE(IsSession(client().Check("r", "s2"), "active"));
    ASSERT_TRUE(IsSession(client().Check("r", "s3"), "waiting"));
    before_ = Snapshot("r");
    list_before_ = json::serialize(client().ListRooms().json);
  }

  void ExpectUnchanged(const std::string& what) {
    EXPECT_EQ(Snapshot("r"), before_) << "state changed after: " << what;
    EXPECT_EQ(json::serialize(client().ListRooms().json), list_before_)
        << "rooms changed after: " << what;
  }

  // Sends a raw body and expects the error, then an unchanged room.
  void ExpectBad(const std::string& method, const std::string& path, const std::string& body,
                 int status, const std::string& code) {
    HttpResult r = client().Request(method, path, body);
    EXPECT_TRUE(IsError(r, status, code)) << method << " " << path << " " << body.substr(0, 200);
    ExpectUnchanged(method + " " + path + " " + body.substr(0, 200));
  }

  std::string before_;
  std::string list_before_;
};

const std::vector<std::string> kNotJson = {
    "{",
    "not json",
    "{\"capacity\": 3",
    "{capacity: 3}",
    "{'capacity': 3}",
    "}{",
    "{\"a\":1}x",
    "{\"capacity\": 01}",
    "\xff\xfe",
    "{\"session\":\"\xff\"}",
    "   ",
    "{\"a\":" + std::string(5000, '[') + std::string(5000, ']') + "}",
};
const std::vector<std::string> kNotAnObject = {"[]", "[1,2]", "3", "null", "\"str\"", "true"};

TEST_F(ErrorsHttpTest, MalformedJsonIsInvalidJsonOnEveryBodyRoute) {
  for (const std::string& body : kNotJson) {
    ExpectBad("PUT", "/v1/rooms/r", body, 400, "invalid_json");
    ExpectBad("POST", "/v1/rooms/r/check", body, 400, "invalid_json");
    ExpectBad("POST", "/v1/rooms/r/touch", body, 400, "invalid_json");
    ExpectBad("POST", "/v1/rooms/r/leave", body, 400, "invalid_json");
    HttpResult v = client().Request("POST", "/v1/tokens/verify", body);
    EXPECT_TRUE(IsError(v, 400, "invalid_json")) << body;
  }
  // An empty body is not an object where one is required (check alone reads it as {}).
  ExpectBad("PUT", "/v1/rooms/r", "", 400, "invalid_json");
  ExpectBad("POST", "/v1/rooms/r/touch", "", 400, "invalid_json");
  ExpectBad("POST", "/v1/rooms/r/leave", "", 400, "invalid_json");
  EXPECT_TRUE(IsError(client().Request("POST", "/v1/tokens/verify", ""), 400, "invalid_json"));
}

TEST_F(ErrorsHttpTest, ABodyThatIsNotAnObjectIsInvalidJson) {
  for (const std::string& body : kNotAnObject) {
    ExpectBad("PUT", "/v1/rooms/r", body, 400, "invalid_json");
    ExpectBad("PUT", "/v1/rooms/fresh", body, 400, "invalid_json");
    ExpectBad("POST", "/v1/rooms/r/check", body, 400, "invalid_json");
    ExpectBad("POST", "/v1/rooms/r/touch", body, 400, "invalid_json");
    ExpectBad("POST", "/v1/rooms/r/leave", body, 400, "invalid_json");
    EXPECT_TRUE(IsError(client().Request("POST", "/v1/tokens/verify", body), 400, "invalid_json"))
        << body;
  }
}

TEST_F(ErrorsHttpTest, WrongTypesAndOutOfRangeNumbersAreRejected) {
  const std::vector<std::string> bad_configs = {
      // capacity: wrong types, fractions, out of range
      R"({"capacity": "3"})",
      R"({"capacity": 1.5})",
      R"({"capacity": true})",
      R"({"capacity": null})",
      R"({"capacity": [3]})",
      R"({"capacity": {"n": 3}})",
      R"({"capacity": 3.0})",
      R"({"capacity": 1e3})",
      R"({"capacity": 0})",
      R"({"capacity": -1})",
      R"({"capacity": 1000000001})",
      R"({"capacity": 9223372036854775807})",
      R"({"capacity": 18446744073709551615})",
      R"({"capacity": 99999999999999999999999})",
      R"({"capacity": -9223372036854775808})",
      // durations
      R"({"grace_ms": -1})",
      R"({"grace_ms": 604800001})",
      R"({"grace_ms": "5"})",
      R"({"grace_ms": 2.5})",
      R"({"grace_ms": null})",
      R"({"grace_ms": false})",
      R"({"checkin_timeout_ms": -1})",
      R"({"checkin_timeout_ms": 604800001})",
      R"({"checkin_timeout_ms": null})",
      R"({"checkin_timeout_ms": "1000"})",
      R"({"idle_timeout_ms": -1})",
      R"({"idle_timeout_ms": 604800001})",
      R"({"idle_timeout_ms": "x"})",
      R"({"idle_timeout_ms": 0.5})",
      // rate cap
      R"({"admit_per_minute": 0})",
      R"({"admit_per_minute": -5})",
      R"({"admit_per_minute": 1000000001})",
      R"({"admit_per_minute": 2.5})",
      R"({"admit_per_minute": "10"})",
      R"({"admit_per_minute": true})",
      // one good field does not go through when another is bad
      R"({"capacity": 5, "grace_ms": -1})",
      R"({"grace_ms": 10, "capacity": 0})",
      R"({"capacity": 5, "admit_per_minute": 0})",
      R"({"capacity": 5, "idle_timeout_ms": null, "checkin_timeout_ms": 604800001})",
  };
  for (const std::string& body : bad_configs) {
    ExpectBad("PUT", "/v1/rooms/r", body, 400, "invalid_argument");
    ExpectBad("PUT", "/v1/rooms/fresh", body, 400, "invalid_argument");
    EXPECT_TRUE(IsError(client().GetRoom("fresh"), 404, "unknown_room")) << body;
  }
}

// The message of an error answer ("" when there is none).
std::string ErrorMessage(const HttpResult& r) {
  if (!r.json.is_object()) return "";
  const json::value* error = r.json.as_object().if_contains("error");
  if (error == nullptr || !error->is_object()) return "";
  const json::value* message = error->as_object().if_contains("message");
  return message != nullptr && message->is_string() ? std::string(message->as_string()) : "";
}

TEST_F(ErrorsHttpTest, BadPausedAndTargetUrlAreRejectedWithAClearMessage) {
  // {body, a part of the message that must say what is wrong}
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"paused": 1})", "'paused' must be a boolean"},
      {R"({"paused": "true"})", "'paused' must be a boolean"},
      {R"({"paused": null})", "'paused' must be a boolean"},
      {R"({"target_url": 5})", "'target_url' must be a string or null"},
      {R"({"target_url": true})", "'target_url' must be a string or null"},
      {R"({"target_url": ["/a"]})", "'target_url' must be a string or null"},
      {R"({"target_url": ""})", "it is empty"},
      {R"({"target_url": "shop/checkout"})", "absolute http or https URL, or a path"},
      {R"({"target_url": "?next=1"})", "absolute http or https URL, or a path"},
      {R"({"target_url": "ftp://files.example/x"})", "the scheme is 'ftp'"},
      {R"x({"target_url": "javascript:alert(1)"})x", "the scheme is 'javascript'"},
      {R"({"target_url": "data:text/html,hi"})", "the scheme is 'data'"},
      {R"({"target_url": "mailto:a@example.com"})", "the scheme is 'mailto'"},
      {R"({"target_url": "//evil.example/x"})", "another host"},
      {R"({"target_url": "http://"})", "it has no host"},
      {R"({"target_url": "https:///path"})", "it has no host"},
      {R"({"target_url": "https:shop"})", "it has no host"},
      {R"({"target_url": "https://shop.example@evil.example/"})", "user name or password"},
      {R"({"target_url": "https://exa mple.com/"})", "not a valid URL"},
      {R"({"target_url": "https://shop.example/caf\u00e9"})", "not a valid URL"},
      {R"({"target_url": "/a b"})", "not a valid path"},
      {R"({"target_url": "/\\evil.example"})", "not a valid path"},
      {R"({"target_url": "/a\nb"})", "control characters"},
      {R"({"target_url": "https://shop.example/\r\nSet-Cookie: x=1"})", "control characters"},
      {R"({"target_url": "/a\u0000b"})", "control characters"},
      {R"({"target_url": "/a\u007fb"})", "control characters"},
      {"{\"target_url\": \"/" + std::string(2048, 'a') + "\"}", "longer than 2048 bytes"},
      // a good field does not go through with a bad one
      {R"({"paused": true, "target_url": "ftp://x/"})", "the scheme is 'ftp'"},
      {R"({"target_url": "/ok", "paused": "no"})", "'paused' must be a boolean"},
      {R"({"capacity": 5, "target_url": "//x"})", "another host"},
  };
  for (const auto& [body, why] : bad) {
    HttpResult r = client().Request("PUT", "/v1/rooms/r", body);
    EXPECT_TRUE(IsError(r, 400, "invalid_argument")) << body.substr(0, 200);
    EXPECT_NE(ErrorMessage(r).find(why), std::string::npos)
        << body.substr(0, 200) << " answered: " << ErrorMessage(r);
    ExpectUnchanged(body.substr(0, 200));
    ExpectBad("PUT", "/v1/rooms/fresh", "{\"capacity\": 1, " + body.substr(1), 400,
              "invalid_argument");
    EXPECT_TRUE(IsError(client().GetRoom("fresh"), 404, "unknown_room")) << body.substr(0, 200);
  }
}

TEST_F(ErrorsHttpTest, BadSessionFieldsAreRejected) {
  const std::vector<std::string> bad_sessions = {
      R"({"session": 42})",
      R"({"session": true})",
      R"({"session": ["s1"]})",
      R"({"session": {"id": "s1"}})",
      R"({"session": ""})",
      R"({"session": "a b"})",
      R"({"session": "a/b"})",
      R"({"session": "s1\n"})",
      R"({"session": "caf\u00e9"})",
      R"({"session": "a\u0000b"})",
      R"({"session": "<script>"})",
      R"({"session": "s1?"})",
      "{\"session\": \"" + std::string(129, 'x') + "\"}",
      "{\"session\": \"" + std::string(60000, 'y') + "\"}",
  };
  for (const std::string& body : bad_sessions) {
    ExpectBad("POST", "/v1/rooms/r/check", body, 400, "invalid_argument");
    ExpectBad("POST", "/v1/rooms/r/touch", body, 400, "invalid_argument");
    ExpectBad("POST", "/v1/rooms/r/leave", body, 400, "invalid_argument");
  }
  // touch and leave require the session.
  ExpectBad("POST", "/v1/rooms/r/touch", "{}", 400, "invalid_argument");
  ExpectBad("POST", "/v1/rooms/r/leave", "{}", 400, "invalid_argument");
  ExpectBad("POST", "/v1/rooms/r/leave", R"({"final": true})", 400, "invalid_argument");
  // final must be a boolean: s1 stays active.
  for (const char* body :
       {R"({"session": "s1", "final": "yes"})", R"({"session": "s1", "final": 1})",
        R"({"session": "s1", "final": null})", R"({"session": "s1", "final": "true"})"}) {
    ExpectBad("POST", "/v1/rooms/r/leave", body, 400, "invalid_argument");
  }
  EXPECT_TRUE(IsSession(client().Touch("r", "s1"), "active"));
  // A 128-byte session is fine.
  EXPECT_TRUE(IsSession(client().Check("r", std::string(128, 'z')), "waiting"));
}

TEST_F(ErrorsHttpTest, BadRoomNamesInThePathAreRejected) {
  const std::vector<std::string> bad_rooms = {
      std::string(129, 'r'),
      "a%20b",      // "a b"
      "a%2Fb",      // "a/b" in one segment
      "caf%C3%A9",  // UTF-8
      "r%00",       // NUL
      "%3Cscript%3E",
      "r%3F",  // "r?"
      "r%22",  // a quote
  };
  for (const std::string& room : bad_rooms) {
    std::string base = "/v1/rooms/" + room;
    ExpectBad("PUT", base, R"({"capacity": 3})", 400, "invalid_argument");
    ExpectBad("GET", base, "", 400, "invalid_argument");
    ExpectBad("DELETE", base, "", 400, "invalid_argument");
    ExpectBad("POST", base + "/check", R"({"session": "s9"})", 400, "invalid_argument");
    ExpectBad("POST", base + "/touch", R"({"session": "s1"})", 400, "invalid_argument");
    ExpectBad("POST", base + "/leave", R"({"session": "s1"})", 400, "invalid_argument");
    ExpectBad("DELETE", base + "/sessions/s1", "", 400, "invalid_argument");
  }
  // A target that is not a valid path at all.
  ExpectBad("GET", "/v1/rooms/%zz", "", 400, "invalid_argument");
  ExpectBad("POST", "/v1/rooms/r%/check", "{}", 400, "invalid_argument");
}

TEST_F(ErrorsHttpTest, BadSessionNamesInThePathAreRejected) {
  for (const std::string& session :
       {std::string(129, 's'), std::string("a%20b"), std::string("s1%2F"), std::string("%C3%A9")}) {
    ExpectBad("DELETE", "/v1/rooms/r/sessions/" + session, "", 400, "invalid_argument");
  }
}

TEST_F(ErrorsHttpTest, VerifyRequiresATokenString) {
  for (const char* body :
       {"{}", R"({"token": 5})", R"({"token": null})", R"({"token": ["a"]})", R"({"tok": "x"})"}) {
    EXPECT_TRUE(
        IsError(client().Request("POST", "/v1/tokens/verify", body), 400, "invalid_argument"))
        << body;
  }
  ExpectUnchanged("verify");
}

TEST_F(ErrorsHttpTest, UnknownRouteIs404NotFound) {
  for (const char* path : {"/", "/v1", "/v1/room", "/v1/rooms/r/extra", "/v1/rooms/r/check/x",
                           "/v1/rooms/r/sessions", "/v1/rooms/r/sessions/s1/x", "/v2/rooms/r",
                           "/healthz/x", "/v1/tokens", "/V1/rooms/r", "/v1/rooms/r/checkin"}) {
    ExpectBad("GET", path, "", 404, "not_found");
    ExpectBad("POST", path, "{}", 404, "not_found");
  }
}

TEST_F(ErrorsHttpTest, WrongMethodIs405WithAnAllowHeader) {
  struct Case {
    const char* method;
    const char* path;
    std::vector<std::string> allowed;
  };
  const std::vector<Case> cases = {
      {"POST", "/v1/rooms/r", {"PUT", "GET", "DELETE"}},
      {"PATCH", "/v1/rooms/r", {"PUT", "GET", "DELETE"}},
      {"GET", "/v1/rooms/r/check", {"POST"}},
      {"PUT", "/v1/rooms/r/touch", {"POST"}},
      {"DELETE", "/v1/rooms/r/leave", {"POST"}},
      {"GET", "/v1/rooms/r/sessions/s1", {"DELETE"}},
      {"POST", "/v1/rooms", {"GET"}},
      {"DELETE", "/v1/rooms", {"GET"}},
      {"GET", "/v1/tokens/verify", {"POST"}},
      {"POST", "/healthz", {"GET"}},
  };
  for (const Case& c : cases) {
    std::string answer =
        RawExchange(server().port(), RawRequest(c.method, c.path, "{}", {"Connection: close"}));
    EXPECT_EQ(RawStatus(answer), 405) << c.method << " " << c.path << "\n" << answer;
    auto allow = RawHeader(answer, "Allow");
    ASSERT_TRUE(allow.has_value()) << c.method << " " << c.path << "\n" << answer;
    for (const std::string& m : c.allowed) {
      EXPECT_NE(allow->find(m), std::string::npos) << *allow << " lacks " << m;
    }
    EXPECT_EQ(allow->find(c.method), std::string::npos) << *allow;
    HttpResult r = client().Request(c.method, c.path, "{}");
    EXPECT_TRUE(IsError(r, 405, "method_not_allowed")) << c.method << " " << c.path;
    ExpectUnchanged(std::string(c.method) + " " + c.path);
  }
}

// A room-config body of exactly `size` bytes: {"capacity": 7} padded with spaces.
std::string PaddedConfig(size_t size, int capacity) {
  std::string head = "{\"capacity\": " + std::to_string(capacity);
  std::string body = head + std::string(size - head.size() - 1, ' ') + "}";
  return body;
}

TEST_F(ErrorsHttpTest, BodiesOver64KiBAre413) {
  constexpr size_t kLimit = 64 * 1024;
  std::string over = PaddedConfig(kLimit + 1, 7);
  ASSERT_EQ(over.size(), kLimit + 1);
  ExpectBad("PUT", "/v1/rooms/r", over, 413, "payload_too_large");
  ExpectBad("PUT", "/v1/rooms/fresh", over, 413, "payload_too_large");
  ExpectBad("PUT", "/v1/rooms/r", PaddedConfig(1024 * 1024, 7), 413, "payload_too_large");
  std::string check = "{\"session\": \"s9\"" + std::string(kLimit, ' ') + "}";
  ExpectBad("POST", "/v1/rooms/r/check", check, 413, "payload_too_large");
  std::string verify = "{\"token\": \"x\"" + std::string(kLimit, ' ') + "}";
  EXPECT_TRUE(
      IsError(client().Request("POST", "/v1/tokens/verify", verify), 413, "payload_too_large"));
  ExpectUnchanged("verify over 64 KiB");

  // A Content-Length over the limit is refused before the body is sent.
  std::string answer = RawExchange(
      server().port(), "PUT /v1/rooms/r HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n");
  EXPECT_EQ(RawStatus(answer), 413) << answer;
  // A chunked body that grows over the limit.
  std::string chunked = "PUT /v1/rooms/r HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) chunked += "1000\r\n" + std::string(0x1000, ' ') + "\r\n";
  chunked += "0\r\n\r\n";
  answer = RawExchange(server().port(), chunked);
  EXPECT_EQ(RawStatus(answer), 413) << answer.substr(0, 300);
  ExpectUnchanged("raw bodies over 64 KiB");

  // Exactly 64 KiB is accepted.
  HttpResult ok = client().Request("PUT", "/v1/rooms/r", PaddedConfig(kLimit, 7));
  ASSERT_EQ(ok.status, 200) << ok.body << ok.error;
  EXPECT_EQ(IntField(client().GetRoom("r").json, "capacity"), 7);
}

TEST_F(ErrorsHttpTest, ErrorsAnswerJson) {
  std::string answer = RawExchange(
      server().port(), RawRequest("POST", "/v1/rooms/r/check", "{", {"Connection: close"}));
  EXPECT_EQ(RawStatus(answer), 400) << answer;
  auto type = RawHeader(answer, "Content-Type");
  ASSERT_TRUE(type.has_value()) << answer;
  EXPECT_NE(type->find("application/json"), std::string::npos) << *type;
  json::value body = json::parse(RawBody(answer));
  EXPECT_TRUE(body.at("error").at("code").is_string());
}

// ---- the admin key ------------------------------------------------------------------------

constexpr char kAdminKey[] = "s3cret-admin-key";

class AdminKeyTest : public ServerTest {
 protected:
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}, {"ANTEROOM_ADMIN_KEY", kAdminKey}};
  }
  std::string AdminKey() const override { return kAdminKey; }

  void SetUp() override {
    ServerTest::SetUp();
    if (HasFatalFailure()) return;
    MustPut("r", {{"capacity", 1}});
    ASSERT_TRUE(IsSession(client().Check("r", "s1"), "active"));
    ASSERT_TRUE(IsSession(client().Check("r", "s2"), "waiting"));
    before_ = Snapshot("r");
  }

  std::string before_;
};

TEST_F(AdminKeyTest, AdminRoutesNeedTheBearerKey) {
  Client anonymous(server().url());
  Client wrong(server().url(), "wrong-key");
  Client prefix(server().url(), std::string(kAdminKey).substr(0, 5));
  Client longer(server().url(), std::string(kAdminKey) + "x");
  for (Client* c : {&anonymous, &wrong, &prefix, &longer}) {
    EXPECT_TRUE(IsError(c->PutRoom("r", {{"capacity", 9}}), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->PutRoom("new", {{"capacity", 9}}), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->DeleteRoom("r"), 401, "unauthorized"));
    EXPECT_TRUE(IsError(c->EndSession("r", "s1"), 401, "unauthorized"));
    EXPECT_EQ(Snapshot("r"), before_);
    EXPECT_TRUE(IsError(client().GetRoom("new"), 404, "unknown_room"));
  }
  // Other schemes or spellings of the header are refused too.
  for (const std::string& header :
       {std::string("Authorization: ") + kAdminKey,
        std::string("Authorization: Basic ") + kAdminKey, std::string("Authorization: Bearer"),
        std::string("Authorization: Bearer  ") + kAdminKey,
        std::string("X-Admin-Key: ") + kAdminKey}) {
    std::string answer = RawExchange(
        server().port(), RawRequest("DELETE", "/v1/rooms/r", "", {header, "Connection: close"}));
    EXPECT_EQ(RawStatus(answer), 401) << header << "\n" << answer;
    EXPECT_TRUE(RawHeader(answer, "WWW-Authenticate").has_value()) << answer;
  }
  EXPECT_EQ(Snapshot("r"), before_);

  // Non-admin routes stay open.
  EXPECT_EQ(anonymous.GetRoom("r").status, 200);
  EXPECT_EQ(anonymous.ListRooms().status, 200);
  // (A client names its session with 128 bits; a short name takes the admin key.)
  const std::string id = "s1-AAAAAAAAAAAAAAAAAAAAAA";
  EXPECT_TRUE(IsSession(anonymous.Check("r", id), "waiting"));
  EXPECT_TRUE(IsSession(anonymous.Touch("r", id), "waiting"));
  EXPECT_TRUE(IsError(anonymous.Check("r", "s9"), 400, "invalid_argument"));
  EXPECT_TRUE(IsSession(client().Check("r", "s9"), "waiting")) << "the admin key may";
  EXPECT_EQ(anonymous.Health().status, 200);
}

TEST_F(AdminKeyTest, TheRightKeyIsAccepted) {
  HttpResult put = client().PutRoom("r", {{"capacity", 3}});
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(IntField(put.json, "capacity"), 3);
  std::string answer = RawExchange(
      server().port(),
      RawRequest("PUT", "/v1/rooms/raw", R"({"capacity": 2})",
                 {std::string("Authorization: Bearer ") + kAdminKey, "Connection: close"}));
  EXPECT_EQ(RawStatus(answer), 200) << answer;
  EXPECT_TRUE(IsSession(client().EndSession("r", "s1"), "gone"));
  HttpResult del = client().DeleteRoom("r");
  EXPECT_EQ(del.status, 200) << del.body;
  EXPECT_TRUE(IsError(client().GetRoom("r"), 404, "unknown_room"));
}

}  // namespace
}  // namespace anteroom::testing
