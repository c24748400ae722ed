// `anteroom serve --config FILE` as a real process: its settings take effect, flags override it,
// a bad file stops it with the line; `anteroom config check`; `--log-format json` lines.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/json/parse.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

constexpr char kAdminKey[] = "admin-key-from-a-file";

class ConfigServeTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = (dir_.path() / name).string();
    std::ofstream(path, std::ios::binary) << text;
    chmod(path.c_str(), 0600);
    return path;
  }

  // A config of one room at most, the admin key from a file.
  std::string Config() {
    std::string key_file = Write("admin.key", std::string(kAdminKey) + "\n");
    return Write("anteroom.toml",
                 "memory_only = true\nmax_rooms = 1\nadmin_key_file = \"" + key_file + "\"\n");
  }

  TempDir dir_{"anteroom-config"};
};

// RawRequest with the Authorization header when asked.
int Put(uint16_t port, const std::string& room, const std::string& key) {
  std::vector<std::string> headers = {"Content-Type: application/json", "Connection: close"};
  if (!key.empty()) headers.push_back("Authorization: Bearer " + key);
  return RawStatus(
      RawExchange(port, RawRequest("PUT", "/v1/rooms/" + room, R"({"capacity":10})", headers)));
}

TEST_F(ConfigServeTest, TheFilesSettingsTakeEffect) {
  ServerProcess server({"--config", Config()});
  ASSERT_TRUE(server.started()) << server.error();
  EXPECT_EQ(Put(server.port(), "a", ""), 401);  // the admin key from admin_key_file is needed
  EXPECT_EQ(Put(server.port(), "a", "wrong"), 401);
  int created = Put(server.port(), "a", kAdminKey);
  EXPECT_TRUE(created >= 200 && created < 300) << created;
  EXPECT_EQ(Put(server.port(), "b", kAdminKey), 507);  // max_rooms = 1
  EXPECT_EQ(server.Errors().find(kAdminKey), std::string::npos);
}

TEST_F(ConfigServeTest, AFlagOverridesTheFile) {
  ServerProcess server({"--config", Config(), "--max-rooms", "2"});
  ASSERT_TRUE(server.started()) << server.error();
  for (const char* room : {"a", "b"}) {
    int created = Put(server.port(), room, kAdminKey);
    EXPECT_TRUE(created >= 200 && created < 300) << room << ": " << created;
  }
  EXPECT_EQ(Put(server.port(), "c", kAdminKey), 507);
}

TEST_F(ConfigServeTest, ABadFileStopsTheServerWithItsLine) {
  std::string bad = Write("bad.toml", "memory_only = true\n\nmax_rooms = \"ten\"\nmax_romos = 1\n");
  CliResult r = RunCli({"serve", "--listen", "127.0.0.1:0", "--config", bad});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.err.find(bad + ":3: max_rooms: expected an integer >= 0, got \"ten\""),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(bad + ":4: max_romos: unknown key (did you mean max_rooms?)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << r.out;
}

TEST_F(ConfigServeTest, ConfigCheckPrintsTheSettingsWithSecretsMasked) {
  std::string file = Config();
  CliResult r = RunCli({"config", "check", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("max_rooms = 1 (" + file + ":2)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max_queues = 10000 (default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("admin_key = \"****\" (from admin_key_file)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(kAdminKey), std::string::npos) << r.out;

  std::string bad = Write("bad.toml", "max_rooms = 1\nfsync = \"sometimes\"\n");
  CliResult b = RunCli({"config", "check", bad});
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_NE(b.err.find(bad + ":2: fsync: expected one of"), std::string::npos) << b.err;
}

TEST_F(ConfigServeTest, JsonLogsAreOneObjectALine) {
  std::string file = Write("json.toml", "log_format = \"json\"\nlog_level = \"debug\"\n");
  ServerProcess server({"--memory-only", "--config", file});
  ASSERT_TRUE(server.started()) << server.error();
  int created = Put(server.port(), "a", "");  // open: no key set, which start-up warns of
  EXPECT_TRUE(created >= 200 && created < 300) << created;
  EXPECT_EQ(RawStatus(RawExchange(server.port(), RawRequest("GET", "/v1/rooms/nope"))), 404);
  server.Stop();
  int lines = 0;
  for (const std::string& text : {server.Output(), server.Errors()}) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      ++lines;
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(line, ec);
      ASSERT_FALSE(ec) << "not JSON: " << line;
      ASSERT_TRUE(v.is_object()) << line;
      EXPECT_TRUE(v.as_object().contains("time")) << line;
      EXPECT_TRUE(v.as_object().contains("level")) << line;
      EXPECT_TRUE(v.as_object().contains("message")) << line;
    }
  }
  EXPECT_GE(lines, 3);
  EXPECT_NE(server.Output().find("\"url\":\"" + server.url() + "\""), std::string::npos)
      << server.Output();
}

}  // namespace
}  // namespace anteroom::testing
