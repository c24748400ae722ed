// `serve --config FILE`: the file's keys fed into serve's own flags, errors with their lines,
// the command line over the file, secrets from files; and the JSON log lines.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cmd/config_file.h"
#include "cmd/log_format.h"
#include "cmd/serve_flags.h"
#include "unit/scratch_dir.h"

namespace anteroom::cmd {
namespace {

class ConfigFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    std::string path = (dir_ / name);
    std::ofstream(path, std::ios::binary) << text;
    chmod(path.c_str(), mode);
    return path;
  }

  // serve's flags parsed from ARGS (then the config file, when --config is among them).
  ServeSettings Settle(std::vector<std::string> args) {
    AddServeFlags(app_, flags_);
    for (CLI::Option* opt : app_.get_options()) opt->capture_default_str();
    std::reverse(args.begin(), args.end());  // CLI11 takes a vector last first
    app_.parse(args);
    return SettleServeFlags(app_, flags_, [this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }

  ServeSettings SettleFile(const std::string& text) {
    return Settle({"--config", Write("anteroom.toml", text)});
  }

  std::string File() const { return (dir_ / "anteroom.toml"); }

  testing::ScratchDir dir_{"config-file"};
  CLI::App app_{"serve"};
  ServeFlags flags_;
  std::map<std::string, std::string> env_;
};

TEST_F(ConfigFileTest, KeysOfEveryTypeSetTheirFlags) {
  ServeSettings s = SettleFile(
      "# a comment\n"
      "max_rooms = 10\n"
      "listen = \"127.0.0.1:9000\"\n"
      "memory_only = true\n"
      "cors_origin = [\"https://a.example\", \"https://b.example\"]\n"
      "demo_room = \"lobby:5\"\n"
      "token_alg = \"EdDSA\"\n"
      "log_format = \"json\"\n");
  ASSERT_TRUE(s.ok()) << s.ErrorText();
  EXPECT_EQ(flags_.max_rooms, 10u);
  EXPECT_EQ(flags_.listen, "127.0.0.1:9000");
  EXPECT_TRUE(flags_.memory_only);
  EXPECT_EQ(flags_.cors_origins,
            (std::vector<std::string>{"https://a.example", "https://b.example"}));
  EXPECT_EQ(flags_.demo_rooms, (std::vector<std::string>{"lobby:5"}));
  EXPECT_EQ(flags_.token_alg, "EdDSA");
  EXPECT_EQ(flags_.log_format, "json");
  EXPECT_EQ(s.file_lines.at("max_rooms"), 2);
  EXPECT_EQ(s.file_lines.at("demo_room"), 6);
}

TEST_F(ConfigFileTest, FlagsOnTheCommandLineOverrideTheFile) {
  std::string file =
      Write("anteroom.toml", "max_rooms = 10\nmax_queues = 20\ndemo_room = [\"a:1\"]\n");
  ServeSettings s = Settle({"--config", file, "--max-rooms", "7", "--demo-room", "b:2"});
  ASSERT_TRUE(s.ok()) << s.ErrorText();
  EXPECT_EQ(flags_.max_rooms, 7u);
  EXPECT_EQ(flags_.max_queues, 20u);
  EXPECT_EQ(flags_.demo_rooms, (std::vector<std::string>{"b:2"}));
  EXPECT_EQ(s.file_lines.count("max_rooms"), 0u);
  std::string described = DescribeSettings(app_, flags_, s);
  EXPECT_NE(described.find("max_rooms = 7 (command line)"), std::string::npos) << described;
  EXPECT_NE(described.find("max_queues = 20 (" + file + ":2)"), std::string::npos) << described;
  EXPECT_NE(described.find("head_timeout_ms = 10000 (default)"), std::string::npos) << described;
}

TEST_F(ConfigFileTest, AWrongTypeNamesTheLineAndTheKey) {
  ServeSettings s = SettleFile("listen = \"127.0.0.1:1\"\n\nmax_rooms = \"ten\"\n");
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_EQ(s.errors[0], File() + ":3: max_rooms: expected an integer >= 0, got \"ten\"");
}

TEST_F(ConfigFileTest, OutOfRangeUsesTheFlagsOwnCheck) {
  ServeSettings s = SettleFile("max_connections = 0\nhead_timeout_ms = 5\n");
  ASSERT_EQ(s.errors.size(), 2u) << s.ErrorText();
  EXPECT_EQ(s.errors[0], File() + ":1: max_connections: expected an integer 1..10000000, got 0");
  EXPECT_EQ(s.errors[1], File() + ":2: head_timeout_ms: expected an integer 100..600000, got 5");
}

TEST_F(ConfigFileTest, NotOneOfTheChoices) {
  ServeSettings s = SettleFile("token_alg = \"HS512\"\nfsync = 1\nlog_format = \"xml\"\n");
  ASSERT_EQ(s.errors.size(), 3u) << s.ErrorText();
  EXPECT_EQ(
      s.errors[0],
      File() + ":1: token_alg: expected one of \"HS256\", \"EdDSA\", \"ES256\", got \"HS512\"");
  EXPECT_NE(s.errors[1].find(":2: fsync: expected one of"), std::string::npos) << s.errors[1];
  EXPECT_NE(s.errors[2].find(":3: log_format: expected one of \"text\", \"json\""),
            std::string::npos)
      << s.errors[2];
}

TEST_F(ConfigFileTest, ACustomCheckSaysWhatIsWrong) {
  ServeSettings s = SettleFile("public_url = \"ftp://x\"\n");
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_NE(s.errors[0].find(":1: public_url: a path starting with / or an http(s) URL"),
            std::string::npos)
      << s.errors[0];
}

TEST_F(ConfigFileTest, BooleansListsAndNegativeNumbersAreTyped) {
  ServeSettings s = SettleFile(
      "memory_only = \"yes\"\n"
      "cors_origin = [\"https://a.example\", 3]\n"
      "threads = -1\n");
  ASSERT_EQ(s.errors.size(), 3u) << s.ErrorText();
  EXPECT_EQ(s.errors[0], File() + ":1: memory_only: expected true or false, got \"yes\"");
  EXPECT_EQ(s.errors[1], File() + ":2: cors_origin: expected an array of strings, got 3");
  EXPECT_EQ(s.errors[2], File() + ":3: threads: expected an integer >= 0, got -1");
}

TEST_F(ConfigFileTest, UnknownKeysAreErrorsWithASuggestion) {
  ServeSettings s = SettleFile("max_room = 3\nmax-rooms = 2\nconfig = \"x\"\n[server]\nport = 1\n");
  ASSERT_EQ(s.errors.size(), 4u) << s.ErrorText();
  EXPECT_EQ(s.errors[0], File() + ":1: max_room: unknown key (did you mean max_rooms?)");
  EXPECT_NE(s.errors[1].find(":2: max-rooms: unknown key (did you mean max_rooms?)"),
            std::string::npos)
      << s.errors[1];
  EXPECT_NE(s.errors[2].find(":3: config: unknown key"), std::string::npos) << s.errors[2];
  EXPECT_NE(s.errors[3].find(":4: server: unknown key"), std::string::npos) << s.errors[3];
}

TEST_F(ConfigFileTest, AKeyGivenTwiceIsAnError) {
  ServeSettings s = SettleFile("max_rooms = 1\nmax_queues = 2\nmax_rooms = 3\n");
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_TRUE(s.errors[0].starts_with(File() + ":3: ")) << s.errors[0];
  EXPECT_NE(s.errors[0].find("max_rooms"), std::string::npos) << s.errors[0];
}

TEST_F(ConfigFileTest, BadTomlNamesTheLine) {
  ServeSettings s = SettleFile("max_rooms = 1\nlisten = \"unterminated\n");
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_TRUE(s.errors[0].starts_with(File() + ":2: ")) << s.errors[0];
}

TEST_F(ConfigFileTest, AMissingFileIsAnError) {
  ServeSettings s = Settle({"--config", (dir_ / "nope.toml")});
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_NE(s.errors[0].find("nope.toml: cannot read"), std::string::npos) << s.errors[0];
}

TEST_F(ConfigFileTest, SecretsFromFilesLoseTheirTrailingNewline) {
  std::string admin = Write("admin", "s3cret-admin\n");
  std::string queue = Write("queue", "s3cret-queue\r\n");
  std::string token = Write("token", "s3cret-token");
  std::string store = Write("store", "redis://:pw@127.0.0.1:6379/0\n");
  ServeSettings s =
      SettleFile("admin_key_file = \"" + admin + "\"\nqueue_key_file = \"" + queue +
                 "\"\ntoken_secret_file = \"" + token + "\"\nstore_file = \"" + store + "\"\n");
  ASSERT_TRUE(s.ok()) << s.ErrorText();
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(flags_.admin_key, "s3cret-admin");
  EXPECT_EQ(flags_.queue_key, "s3cret-queue");
  EXPECT_EQ(flags_.token_secret, "s3cret-token");
  EXPECT_EQ(flags_.store, "redis://:pw@127.0.0.1:6379/0");
  std::string described = DescribeSettings(app_, flags_, s);
  EXPECT_NE(described.find("admin_key = \"****\" (from admin_key_file)"), std::string::npos)
      << described;
  EXPECT_NE(described.find("store = \"redis://:****@127.0.0.1:6379/0\" (from store_file)"),
            std::string::npos)
      << described;
  EXPECT_EQ(described.find("s3cret"), std::string::npos) << described;
  EXPECT_EQ(described.find(":pw@"), std::string::npos) << described;
}

TEST_F(ConfigFileTest, ASecretFileOthersMayReadIsAWarning) {
  std::string admin = Write("admin", "k\n", 0644);
  ServeSettings s = SettleFile("admin_key_file = \"" + admin + "\"\n");
  ASSERT_TRUE(s.ok()) << s.ErrorText();
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("mode 0644"), std::string::npos) << s.warnings[0];
}

TEST_F(ConfigFileTest, AnUnreadableOrEmptySecretFileIsAnErrorOnItsLine) {
  std::string empty = Write("empty", "\n");
  ServeSettings s = SettleFile("max_rooms = 1\nadmin_key_file = \"" + (dir_ / "missing") +
                               "\"\nqueue_key_file = \"" + empty + "\"\n");
  ASSERT_EQ(s.errors.size(), 2u) << s.ErrorText();
  EXPECT_TRUE(s.errors[0].starts_with(File() + ":2: admin_key_file: cannot read")) << s.errors[0];
  EXPECT_TRUE(s.errors[1].starts_with(File() + ":3: queue_key_file: ")) << s.errors[1];
  EXPECT_NE(s.errors[1].find("is empty"), std::string::npos) << s.errors[1];
}

TEST_F(ConfigFileTest, ASecretAndItsFileTogetherAreAnError) {
  std::string queue = Write("queue", "q\n");
  ServeSettings s = SettleFile("queue_key = \"inline\"\nqueue_key_file = \"" + queue + "\"\n");
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_EQ(s.errors[0], File() + ":2: queue_key_file: queue_key is set too (line 1): give one");
}

TEST_F(ConfigFileTest, TheEnvironmentAndTheCommandLineComeBeforeTheFile) {
  std::string from_file = Write("admin", "file-admin\n");
  std::string flag_file = Write("queue-cli", "cli-queue\n");
  env_["ANTEROOM_ADMIN_KEY"] = "env-admin";
  env_["ANTEROOM_QUEUE_KEY"] = "env-queue";
  std::string file = Write("anteroom.toml",
                           "admin_key_file = \"" + from_file + "\"\nqueue_key = \"file-queue\"\n");
  ServeSettings s = Settle({"--config", file, "--queue-key-file", flag_file});
  ASSERT_TRUE(s.ok()) << s.ErrorText();
  EXPECT_EQ(flags_.admin_key, "env-admin");
  EXPECT_EQ(flags_.queue_key, "cli-queue");
  EXPECT_EQ(s.secret_sources.at("admin_key"), "environment ANTEROOM_ADMIN_KEY");
  EXPECT_EQ(s.secret_sources.at("queue_key"), "--queue-key-file");
}

TEST_F(ConfigFileTest, AnInlineSecretInAFileOthersMayReadIsAWarning) {
  std::string file = Write("anteroom.toml", "queue_key = \"inline\"\n", 0644);
  ServeSettings s = Settle({"--config", file});
  ASSERT_TRUE(s.ok()) << s.ErrorText();
  EXPECT_EQ(flags_.queue_key, "inline");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("queue_key_file"), std::string::npos) << s.warnings[0];
}

TEST_F(ConfigFileTest, WithoutAFileOnlyTheSecretsAreSettled) {
  env_["ANTEROOM_TOKEN_SECRET"] = "t";
  ServeSettings s = Settle({"--max-rooms", "4"});
  ASSERT_TRUE(s.ok()) << s.ErrorText();
  EXPECT_EQ(flags_.max_rooms, 4u);
  EXPECT_EQ(flags_.token_secret, "t");
  EXPECT_TRUE(s.file_lines.empty());
}

TEST_F(ConfigFileTest, RedisTlsKeysSetTheirFlags) {
  ServeSettings s = SettleFile(
      "store = \"rediss://:pw@redis.internal:6380\"\n"
      "redis_tls_ca = \"/etc/anteroom/redis-ca.pem\"\n"
      "redis_tls_cert = \"/etc/anteroom/client.pem\"\n"
      "redis_tls_key = \"/etc/anteroom/client.key\"\n");
  ASSERT_TRUE(s.ok()) << s.ErrorText();
  EXPECT_EQ(flags_.store, "rediss://:pw@redis.internal:6380");
  EXPECT_EQ(flags_.redis_tls_ca, "/etc/anteroom/redis-ca.pem");
  EXPECT_EQ(flags_.redis_tls_cert, "/etc/anteroom/client.pem");
  EXPECT_EQ(flags_.redis_tls_key, "/etc/anteroom/client.key");
}

TEST(MaskUrlPassword, HidesOnlyThePassword) {
  EXPECT_EQ(MaskUrlPassword("redis://:pw@h:1/0"), "redis://:****@h:1/0");
  EXPECT_EQ(MaskUrlPassword("redis://user:p@ss@h:1"), "redis://user:****@h:1");
  EXPECT_EQ(MaskUrlPassword("redis://h:1/0"), "redis://h:1/0");
  EXPECT_EQ(MaskUrlPassword("redis+cluster://:pw@a:1,b:2"), "redis+cluster://:****@a:1,b:2");
  EXPECT_EQ(MaskUrlPassword("rediss://app:pw@h:1/0"), "rediss://app:****@h:1/0");
  EXPECT_EQ(MaskUrlPassword("rediss+cluster://:pw@a:1,b:2"), "rediss+cluster://:****@a:1,b:2");
}

TEST(JsonLog, EveryLineIsOneObjectEvenWithBadUtf8) {
  std::string line = JsonLogLine("info", "caf\xC3\xA9 \xFF\"quoted\"\n", {{"url", "http://x"}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  boost::json::value v = boost::json::parse(line);
  EXPECT_EQ(v.at("level").as_string(), "info");
  EXPECT_EQ(v.at("message").as_string(), "caf\xC3\xA9 \xEF\xBF\xBD\"quoted\"\n");
  EXPECT_EQ(v.at("url").as_string(), "http://x");
  EXPECT_TRUE(v.at("time").as_string().ends_with("Z"));
}

TEST(JsonLog, TheFormatterWritesSpdlogMessages) {
  JsonLogFormatter formatter;
  spdlog::details::log_msg msg("", spdlog::level::warn, "disk \"full\"");
  spdlog::memory_buf_t out;
  formatter.format(msg, out);
  std::string text(out.data(), out.size());
  ASSERT_TRUE(text.ends_with("\n"));
  boost::json::value v = boost::json::parse(text);
  EXPECT_EQ(v.at("level").as_string(), "warning");
  EXPECT_EQ(v.at("message").as_string(), "disk \"full\"");
  EXPECT_TRUE(v.as_object().contains("thread"));
}

}  // namespace
}  // namespace anteroom::cmd
