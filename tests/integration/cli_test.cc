// The CLI as a subprocess against a real server: thin clients that print JSON and exit 0, or
// exit non-zero on errors; --help on every command.
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

class CliTest : public ServerTest {
 protected:
  // Runs the CLI with --server pointing at the test server.
  CliResult Cli(std::vector<std::string> args, const EnvVars& env = {}) {
    args.push_back("--server");
    args.push_back(server().url());
    return RunCli(args, env);
  }
};

// stdout parsed as one JSON value (null when it is not JSON).
json::value Json(const CliResult& r) {
  boost::system::error_code ec;
  json::value v = json::parse(r.out, ec);
  return ec ? json::value(nullptr) : v;
}

std::string Describe(const CliResult& r) {
  return "exit " + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "") +
         "\nstdout: " + r.out + "\nstderr: " + r.err;
}

TEST_F(CliTest, RoomCommandsPrintJsonAndExitZero) {
  CliResult create = Cli({"room", "create", "R", "--capacity", "2"});
  ASSERT_EQ(create.exit_code, 0) << Describe(create);
  EXPECT_EQ(StrField(Json(create), "room"), "R") << Describe(create);
  EXPECT_EQ(IntField(Json(create), "capacity"), 2);
  EXPECT_EQ(IntField(client().GetRoom("R").json, "capacity"), 2) << "the server has it";

  CliResult patch = Cli({"room", "create", "R", "--grace-ms", "1234", "--no-idle-timeout",
                         "--admit-per-minute", "60"});
  ASSERT_EQ(patch.exit_code, 0) << Describe(patch);
  json::value room = client().GetRoom("R").json;
  EXPECT_EQ(IntField(room, "capacity"), 2);
  EXPECT_EQ(IntField(room, "grace_ms"), 1234);
  EXPECT_TRUE(room.at("idle_timeout_ms").is_null());
  EXPECT_EQ(IntField(room, "admit_per_minute"), 60);

  CliResult get = Cli({"room", "get", "R"});
  ASSERT_EQ(get.exit_code, 0) << Describe(get);
  EXPECT_EQ(Json(get), client().GetRoom("R").json) << Describe(get);

  CliResult list = Cli({"room", "list"});
  ASSERT_EQ(list.exit_code, 0) << Describe(list);
  ASSERT_TRUE(Json(list).is_object()) << Describe(list);
  ASSERT_EQ(Json(list).at("rooms").as_array().size(), 1u) << Describe(list);
  EXPECT_EQ(StrField(Json(list).at("rooms").as_array()[0], "room"), "R");

  CliResult check = Cli({"check", "R", "S"});
  ASSERT_EQ(check.exit_code, 0) << Describe(check);
  EXPECT_EQ(StrField(Json(check), "session"), "S") << Describe(check);
  EXPECT_EQ(StrField(Json(check), "status"), "active");
  EXPECT_TRUE(StrField(Json(check), "token").has_value());

  CliResult issued = Cli({"check", "R"});
  ASSERT_EQ(issued.exit_code, 0) << Describe(issued);
  auto id = StrField(Json(issued), "session");
  ASSERT_TRUE(id.has_value()) << Describe(issued);
  EXPECT_GE(id->size(), 22u);
  EXPECT_EQ(IntField(client().GetRoom("R").json, "active"), 2);

  CliResult del = Cli({"room", "delete", "R"});
  ASSERT_EQ(del.exit_code, 0) << Describe(del);
  EXPECT_EQ(BoolField(Json(del), "deleted"), true) << Describe(del);
  EXPECT_TRUE(IsError(client().GetRoom("R"), 404, "unknown_room"));
}

TEST_F(CliTest, RoomCreatePausesResumesAndSetsTheTargetUrl) {
  CliResult create =
      Cli({"room", "create", "R", "--capacity", "1", "--pause", "--target-url", "/in"});
  ASSERT_EQ(create.exit_code, 0) << Describe(create);
  json::value room = client().GetRoom("R").json;
  EXPECT_EQ(BoolField(room, "paused"), true);
  EXPECT_EQ(StrField(room, "target_url"), "/in");

  CliResult resume = Cli({"room", "create", "R", "--resume", "--no-target-url"});
  ASSERT_EQ(resume.exit_code, 0) << Describe(resume);
  room = client().GetRoom("R").json;
  EXPECT_EQ(BoolField(room, "paused"), false);
  EXPECT_TRUE(room.at("target_url").is_null());

  CliResult bad = Cli({"room", "create", "R", "--target-url", "ftp://x/"});
  EXPECT_NE(bad.exit_code, 0) << Describe(bad);
}

TEST_F(CliTest, ErrorsExitNonZero) {
  CliResult get = Cli({"room", "get", "nope"});
  EXPECT_FALSE(get.timed_out);
  EXPECT_NE(get.exit_code, 0) << Describe(get);
  EXPECT_NE(get.out.find("unknown_room"), std::string::npos) << Describe(get);

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"check", "nope", "S"},
        std::vector<std::string>{"room", "delete", "nope"},
        std::vector<std::string>{"room", "create", "nope"},  // no capacity
        std::vector<std::string>{"room", "create", "R", "--capacity", "0"},
        std::vector<std::string>{"room", "create", "bad name", "--capacity", "1"},
        std::vector<std::string>{"check", "R", "bad session"}}) {
    CliResult r = Cli(args);
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.exit_code, 0) << args[0] << " " << args[1] << ": " << Describe(r);
  }
  // Usage errors.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, std::vector<std::string>{"room"},
        std::vector<std::string>{"room", "get"}, std::vector<std::string>{"nonsense"},
        std::vector<std::string>{"room", "create", "R", "--capacity", "many"}}) {
    CliResult r = RunCli(args);
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.exit_code, 0) << Describe(r);
  }
  EXPECT_TRUE(IsError(client().GetRoom("nope"), 404, "unknown_room"));
  EXPECT_TRUE(client().ListRooms().json.at("rooms").as_array().empty());
}

TEST_F(CliTest, NoServerExitsNonZero) {
  std::string url = server().url();
  server().Stop();
  CliResult r = RunCli({"room", "list", "--server", url});
  EXPECT_FALSE(r.timed_out);
  EXPECT_NE(r.exit_code, 0) << Describe(r);
  server_.reset();  // TearDown expects a live server otherwise
}

// The live channel's load generator (scripts/bench-live.sh) against a real server: 200 waiting
// WebSocket clients, 2 s of admissions; every pushed position checked, every change measured.
TEST_F(CliTest, BenchLiveSeesEveryChangeAtTheRightPosition) {
  CliResult r = RunBench({"live", "--server", server().url(), "-n", "200", "--capacity", "5",
                          "--rate", "10", "--duration", "2", "--settle", "10", "--server-pid",
                          std::to_string(server().pid()), "--json"},
                         {}, std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << Describe(r);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  json::value j = Json(r);
  ASSERT_TRUE(j.is_object()) << Describe(r);
  EXPECT_EQ(IntField(j, "wrong_positions"), 0) << Describe(r);
  EXPECT_EQ(IntField(j, "failed_connections"), 0) << Describe(r);
  EXPECT_EQ(IntField(j, "converged"), 200) << Describe(r);
  EXPECT_EQ(IntField(j, "changes"), 20) << Describe(r);
  // Clients 1..20 are admitted at change p0 (p0 samples each); the other 180 see all 20.
  EXPECT_EQ(IntField(j, "samples"), 20 * 21 / 2 + 180 * 20) << Describe(r);
  EXPECT_EQ(IntField(j, "samples"), IntField(j, "expected_samples")) << Describe(r);
  EXPECT_GT(j.at("max_ms").to_number<double>(), 0) << Describe(r);
  EXPECT_GT(IntField(j, "messages").value_or(0), 200) << Describe(r);
  EXPECT_GT(IntField(j, "server_rss_after_kb").value_or(0), 0) << Describe(r);
  EXPECT_GT(IntField(j, "generator_rss_kb").value_or(0), 0) << Describe(r);
  // The generator deleted its room.
  EXPECT_TRUE(client().ListRooms().json.at("rooms").as_array().empty()) << Describe(r);
}

// The load generators are their own binary: the product carries none of them.
TEST(CliHelpTest, TheLoadGeneratorsAreApartFromTheProduct) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"},
                                               {"rooms", "--help"},
                                               {"queue", "--help"},
                                               {"live", "--help"}}) {
    CliResult r = RunBench(args, {}, std::chrono::seconds(10));
    EXPECT_EQ(r.exit_code, 0) << args[0] << Describe(r);
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << args[0] << Describe(r);
  }
  CliResult product = RunCli({"bench", "rooms"}, {}, std::chrono::seconds(10));
  EXPECT_NE(product.exit_code, 0) << "anteroom has no bench command" << Describe(product);
  CliResult help = RunCli({"--help"}, {}, std::chrono::seconds(10));
  EXPECT_EQ(help.out.find("bench"), std::string::npos) << Describe(help);
}

class CliAdminTest : public CliTest {
 protected:
  EnvVars ServerEnv() const override {
    return {{"ANTEROOM_TOKEN_SECRET", kTokenSecret}, {"ANTEROOM_ADMIN_KEY", "k3y"}};
  }
  std::string AdminKey() const override { return "k3y"; }
};

TEST_F(CliAdminTest, TheAdminKeyComesFromTheFlagOrTheEnvironment) {
  CliResult none = Cli({"room", "create", "R", "--capacity", "2"});
  EXPECT_NE(none.exit_code, 0) << Describe(none);
  EXPECT_NE(none.out.find("unauthorized"), std::string::npos) << Describe(none);
  EXPECT_TRUE(IsError(client().GetRoom("R"), 404, "unknown_room"));

  CliResult flag = Cli({"room", "create", "R", "--capacity", "2", "--admin-key", "k3y"});
  EXPECT_EQ(flag.exit_code, 0) << Describe(flag);
  CliResult env = Cli({"room", "create", "R2", "--capacity", "2"}, {{"ANTEROOM_ADMIN_KEY", "k3y"}});
  EXPECT_EQ(env.exit_code, 0) << Describe(env);
  CliResult del = Cli({"room", "delete", "R", "--admin-key", "wrong"});
  EXPECT_NE(del.exit_code, 0) << Describe(del);
  EXPECT_EQ(client().GetRoom("R").status, 200);
}

TEST(CliHelpTest, HelpOnEveryCommandExitsZero) {
  const std::vector<std::vector<std::string>> commands = {
      {"--help"},
      {"serve", "--help"},
      {"room", "--help"},
      {"room", "create", "--help"},
      {"room", "get", "--help"},
      {"room", "list", "--help"},
      {"room", "delete", "--help"},
      {"check", "--help"},
      {"backup", "--help"},
      {"restore", "--help"},
  };
  for (const auto& args : commands) {
    CliResult r = RunCli(args, {}, std::chrono::seconds(10));
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_FALSE(r.timed_out) << joined;
    EXPECT_EQ(r.exit_code, 0) << joined << Describe(r);
    EXPECT_FALSE(r.out.empty()) << joined << Describe(r);
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << joined << Describe(r);
  }
  // serve --help documents the flags the tests and the README rely on.
  CliResult serve = RunCli({"serve", "--help"});
  for (const char* flag : {"--listen", "--demo-room", "--token-ttl-ms"}) {
    EXPECT_NE(serve.out.find(flag), std::string::npos) << flag << "\n" << serve.out;
  }
  CliResult check = RunCli({"check", "--help"});
  EXPECT_NE(check.out.find("--server"), std::string::npos) << check.out;
}

}  // namespace
}  // namespace anteroom::testing
