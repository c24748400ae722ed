// The browser files served by the real server: /anteroom.js, /wait/{room}, /demo and /admin.
// Content types and caching headers, the bytes embedded at build time, the room name filled
// into the waiting page, `serve --templates DIR`, and the admin key on /admin.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "support/api_checks.h"
#include "support/server_fixture.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kWebDir = fs::path(ANTEROOM_SOURCE_DIR) / "web";

// One raw GET: the whole response (head and body), so headers can be read.
std::string Get(uint16_t port, std::string_view target,
                const std::vector<std::string>& headers = {}) {
  RawConnection connection(port);
  if (!connection.connected()) return {};
  connection.Send(RawRequest("GET", target, {}, headers));
  return connection.ReadResponse();
}

std::string Header(std::string_view response, std::string_view name) {
  return RawHeader(response, name).value_or("<absent>");
}

void WriteFile(const fs::path& path, std::string_view text) {
  std::ofstream(path, std::ios::binary) << text;
}

void ExpectPage(std::string_view response, std::string_view what) {
  EXPECT_EQ(RawStatus(response), 200) << what << "\n" << response.substr(0, 500);
  EXPECT_EQ(Header(response, "Content-Type"), "text/html; charset=utf-8") << what;
  EXPECT_EQ(Header(response, "Cache-Control"), "no-cache") << what;
  EXPECT_EQ(Header(response, "X-Content-Type-Options"), "nosniff") << what;
}

class WebHttpTest : public ServerTest {};

TEST_F(WebHttpTest, ServesTheClientScriptAsEmbedded) {
  std::string r = Get(server().port(), "/anteroom.js");
  ASSERT_EQ(RawStatus(r), 200) << r.substr(0, 500);
  EXPECT_EQ(Header(r, "Content-Type"), "application/javascript; charset=utf-8");
  EXPECT_EQ(Header(r, "Cache-Control"), "public, max-age=300");
  EXPECT_EQ(Header(r, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(RawBody(r), ReadFile(kWebDir / "anteroom.js"));
  EXPECT_NE(RawBody(r).find("window.Anteroom"), std::string::npos);
}

TEST_F(WebHttpTest, ServesTheDemoAndAdminPagesAsEmbedded) {
  std::string demo = Get(server().port(), "/demo");
  ExpectPage(demo, "/demo");
  EXPECT_EQ(Header(demo, "Referrer-Policy"), "no-referrer");
  EXPECT_EQ(RawBody(demo), ReadFile(kWebDir / "demo.html"));

  std::string admin = Get(server().port(), "/admin");  // no admin key set: open
  ExpectPage(admin, "/admin");
  EXPECT_EQ(Header(admin, "X-Frame-Options"), "DENY");
  EXPECT_EQ(RawBody(admin), ReadFile(kWebDir / "admin.html"));
}

TEST_F(WebHttpTest, WaitPageCarriesTheRoomEscaped) {
  // Valid names may hold '.', ':', '-' and '_'; the page exists even before the room does.
  const std::string room = "a.b:c-d_9";
  for (const std::string& target :
       std::vector<std::string>{"/wait/a.b:c-d_9", "/wait/a.b%3Ac-d_9", "/wait/a.b%3ac%2Dd_9"}) {
    std::string r = Get(server().port(), target);
    ExpectPage(r, target);
    EXPECT_EQ(Header(r, "Referrer-Policy"), "no-referrer");
    std::string body = RawBody(r);
    EXPECT_NE(body.find("<strong>a.b:c-d_9</strong>"), std::string::npos) << target;
    EXPECT_NE(body.find("const room = \"a.b:c-d_9\";"), std::string::npos) << target;
    EXPECT_NE(body.find("<title>Waiting room: a.b:c-d_9</title>"), std::string::npos) << target;
    EXPECT_EQ(body.find("{{"), std::string::npos) << "a placeholder was left in " << target;
    EXPECT_NE(body.find("<script src=\"/anteroom.js\"></script>"), std::string::npos);
  }
  // The same page once the room exists.
  MustPut(room, {{"capacity", 1}});
  ExpectPage(Get(server().port(), "/wait/" + room), "existing room");
  // Longest valid name.
  ExpectPage(Get(server().port(), "/wait/" + std::string(128, 'r')), "128-byte name");
}

TEST_F(WebHttpTest, BadRoomNamesAndPathsAreRefused) {
  for (const std::string& target :
       std::vector<std::string>{"/wait/bad%20name", "/wait/%3Cscript%3E", "/wait/a%2Fb",
                                "/wait/" + std::string(129, 'r'), "/wait/", "/wait/%C3%A9"}) {
    HttpResult r = client().Request("GET", target);
    EXPECT_TRUE(IsError(r, 400, "invalid_argument")) << target << " " << r.status << r.body;
  }
  for (const std::string& target :
       std::vector<std::string>{"/wait", "/wait/a/b", "/demo/x", "/admin/x", "/anteroom.js/x",
                                "/anteroom.css", "/web/wait.html"}) {
    HttpResult r = client().Request("GET", target);
    EXPECT_TRUE(IsError(r, 404, "not_found")) << target << " " << r.status << r.body;
  }
  for (const std::string& target :
       std::vector<std::string>{"/wait/x", "/demo", "/admin", "/anteroom.js"}) {
    HttpResult r = client().Request("POST", target, "{}");
    EXPECT_TRUE(IsError(r, 405, "method_not_allowed")) << target << " " << r.status << r.body;
  }
}

class WebAdminKeyTest : public ServerTest {
 protected:
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}, {"ANTEROOM_ADMIN_KEY", "web-key"}};
  }
};

TEST_F(WebAdminKeyTest, AdminPageNeedsTheKeyOthersDoNot) {
  std::string denied = Get(server().port(), "/admin");
  EXPECT_EQ(RawStatus(denied), 401) << denied.substr(0, 500);
  EXPECT_EQ(RawBody(denied).find("<html"), std::string::npos) << "the page leaked";
  EXPECT_EQ(RawStatus(Get(server().port(), "/admin", {"Authorization: Bearer wrong"})), 401);
  ExpectPage(Get(server().port(), "/admin", {"Authorization: Bearer web-key"}), "/admin with key");
  ExpectPage(Get(server().port(), "/wait/demo"), "/wait without key");
  ExpectPage(Get(server().port(), "/demo"), "/demo without key");
  EXPECT_EQ(RawStatus(Get(server().port(), "/anteroom.js")), 200);
}

TEST(WebTemplatesTest, WaitHtmlInTheDirectoryReplacesTheBuiltInPage) {
  TempDir dir("anteroom-templates");
  ASSERT_FALSE(dir.path().empty());
  // Placeholders twice, an unknown one kept, and bytes that are not UTF-8 passed through.
  WriteFile(dir.path() / "wait.html",
            "<!doctype html><h1>{{room}}</h1><script>const r = {{room_json}};</script>"
            "{{room}} {{other}} \xff\n");
  ServerProcess server({"--memory-only", "--templates", dir.path().string()});
  ASSERT_TRUE(server.started()) << server.error();
  std::string r = Get(server.port(), "/wait/x.y:z-1");
  ExpectPage(r, "template");
  EXPECT_EQ(RawBody(r),
            "<!doctype html><h1>x.y:z-1</h1><script>const r = \"x.y:z-1\";</script>"
            "x.y:z-1 {{other}} \xff\n");
  // Read at start-up: changing the file later changes nothing.
  WriteFile(dir.path() / "wait.html", "changed");
  EXPECT_EQ(RawBody(Get(server.port(), "/wait/x.y:z-1")).substr(0, 15), "<!doctype html>");
  // The other pages stay built in.
  EXPECT_EQ(RawBody(Get(server.port(), "/demo")), ReadFile(kWebDir / "demo.html"));
  server.Stop();
}

// DIR/NAME.html is the template NAME, which a room's page.template selects; the admin's preview
// renders it in a state.
TEST(WebTemplatesTest, NamedTemplatesAreSelectedByTheRoom) {
  TempDir dir("anteroom-templates");
  ASSERT_FALSE(dir.path().empty());
  WriteFile(dir.path() / "shop.html", "<p>{{title}}|{{t.heading_line}}|{{lang}}|{{state}}</p>");
  WriteFile(dir.path() / "not a name.html", "ignored");
  ServerProcess server({"--memory-only", "--templates", dir.path().string()});
  ASSERT_TRUE(server.started()) << server.error();
  Client c(server.url());
  ASSERT_EQ(c.PutRoom("r", {{"capacity", 1},
                            {"page", {{"template", "shop"}, {"title", "<T>"}, {"language", "es"}}}})
                .status,
            200);
  EXPECT_EQ(RawBody(Get(server.port(), "/wait/r")), "<p>&lt;T&gt;|Estás en la fila|es|</p>");
  EXPECT_EQ(RawBody(Get(server.port(), "/v1/rooms/r/page/preview?state=closed&lang=de")),
            "<p>&lt;T&gt;|Sie sind in der Warteschlange|de|closed</p>");
  // The built-in page for rooms that name no template.
  EXPECT_NE(RawBody(Get(server.port(), "/wait/other")).find("const room = \"other\";"),
            std::string::npos);
  server.Stop();
}

TEST(WebTemplatesTest, DirectoryWithoutWaitHtmlKeepsTheBuiltInPage) {
  TempDir dir("anteroom-templates");
  ASSERT_FALSE(dir.path().empty());
  WriteFile(dir.path() / "other.html", "not used");
  ServerProcess server({"--memory-only", "--templates", dir.path().string()});
  ASSERT_TRUE(server.started()) << server.error();
  std::string body = RawBody(Get(server.port(), "/wait/r"));
  EXPECT_NE(body.find("const room = \"r\";"), std::string::npos) << body.substr(0, 300);
  server.Stop();
}

// A start-up that must fail at once, naming --templates.
void ExpectStartFails(const std::string& dir, std::string_view why) {
  CliResult r = RunCli({"serve", "--listen", "127.0.0.1:0", "--memory-only", "--templates", dir},
                       {}, std::chrono::seconds(15));
  EXPECT_FALSE(r.timed_out) << dir;
  EXPECT_EQ(r.exit_code, 1) << dir << "\n" << r.err;
  EXPECT_NE(r.err.find("--templates " + dir + ": " + std::string(why)), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
}

TEST(WebTemplatesTest, UnusableDirectoryFailsStartUp) {
  TempDir dir("anteroom-templates");
  ASSERT_FALSE(dir.path().empty());
  ExpectStartFails((dir.path() / "missing").string(), "no such directory");
  WriteFile(dir.path() / "file", "x");
  ExpectStartFails((dir.path() / "file").string(), "not a directory");
  fs::create_directory(dir.path() / "dirs");
  fs::create_directory(dir.path() / "dirs" / "wait.html");
  ExpectStartFails((dir.path() / "dirs").string(), "wait.html is not a regular file");
  fs::create_directory(dir.path() / "empty");
  WriteFile(dir.path() / "empty" / "wait.html", "");
  ExpectStartFails((dir.path() / "empty").string(), "wait.html is empty");
  if (geteuid() != 0) {  // root reads anything
    fs::create_directory(dir.path() / "locked");
    WriteFile(dir.path() / "locked" / "wait.html", "x");
    ASSERT_EQ(chmod((dir.path() / "locked" / "wait.html").c_str(), 0), 0);
    ExpectStartFails((dir.path() / "locked").string(), "cannot read wait.html");
    ASSERT_EQ(chmod((dir.path() / "locked").c_str(), 0), 0);
    ExpectStartFails((dir.path() / "locked").string(), "cannot read the directory");
    chmod((dir.path() / "locked").c_str(), 0700);
  }
}

}  // namespace
}  // namespace anteroom::testing
