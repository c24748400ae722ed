// The Redis test helpers on their own: a redis-server starts on a free loopback port, answers,
// keeps its AOF across a restart on the same port, and stops by PID; a 3-master cluster forms
// and a slot with keys in it moves to another master. Skipped when redis-server is missing.
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "support/redis_process.h"

namespace anteroom::testing {
namespace {

using std::chrono::milliseconds;

#define SKIP_WITHOUT_REDIS() \
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed"

TEST(RedisSupportTest, StartCommandRestartStop) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start({"--appendonly", "yes", "--appendfsync", "always"})) << redis.error();
  EXPECT_NE(redis.port(), 0);
  EXPECT_EQ(redis.url(), "redis://127.0.0.1:" + std::to_string(redis.port()));
  EXPECT_EQ(redis.Command({"PING"}), "PONG\n");
  EXPECT_EQ(redis.Command({"SET", "k", "v a\r\nl"}), "OK\n");
  EXPECT_EQ(redis.Command({"GET", "k"}), "v a\r\nl\n") << "binary-safe";
  EXPECT_EQ(redis.Command({"RPUSH", "l", "1", "2", "3"}), "3\n");
  EXPECT_EQ(redis.Command({"LRANGE", "l", "0", "-1"}), "1\n2\n3\n");
  EXPECT_EQ(redis.Command({"GET", "missing"}), "\n");
  auto err = redis.Call({"NOSUCHCOMMAND"});
  ASSERT_TRUE(err.has_value());
  EXPECT_TRUE(err->is_error()) << err->Text();
  EXPECT_NE(redis.Command({"CONFIG", "GET", "bind"}).find("127.0.0.1"), std::string::npos);

  // Restart: same port, and the AOF brings the data back.
  uint16_t port = redis.port();
  pid_t old_pid = redis.pid();
  auto before = std::chrono::steady_clock::now();
  ASSERT_TRUE(redis.Restart(milliseconds(300))) << redis.error();
  EXPECT_GE(std::chrono::steady_clock::now() - before, milliseconds(300));
  EXPECT_EQ(redis.port(), port);
  EXPECT_NE(redis.pid(), old_pid);
  EXPECT_EQ(kill(old_pid, 0), -1) << "the old server was reaped";
  EXPECT_EQ(redis.Command({"GET", "k"}), "v a\r\nl\n") << redis.Log();
  EXPECT_EQ(redis.Command({"LRANGE", "l", "0", "-1"}), "1\n2\n3\n");

  // Kill (SIGKILL) and start again: appendfsync always kept every write.
  EXPECT_EQ(redis.Command({"SET", "k2", "after"}), "OK\n");
  redis.Kill();
  EXPECT_FALSE(redis.Alive());
  EXPECT_FALSE(redis.Ping(milliseconds(200)));
  ASSERT_TRUE(redis.StartAgain()) << redis.error();
  EXPECT_EQ(redis.Command({"GET", "k2"}), "after\n");

  // Frozen: connections hang (commands time out), then it answers again.
  redis.Freeze();
  EXPECT_FALSE(redis.Ping(milliseconds(300)));
  redis.Thaw();
  EXPECT_TRUE(redis.Ping(milliseconds(2000)));

  pid_t pid = redis.pid();
  EXPECT_GE(redis.Stop(), 0);
  EXPECT_EQ(kill(pid, 0), -1);
  EXPECT_FALSE(redis.Ping(milliseconds(200)));
}

TEST(RedisSupportTest, WithoutPersistenceRestartLosesData) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  EXPECT_EQ(redis.Command({"CONFIG", "GET", "appendonly"}), "appendonly\nno\n");
  EXPECT_EQ(redis.Command({"CONFIG", "GET", "save"}), "save\n\n");
  EXPECT_EQ(redis.Command({"SET", "k", "v"}), "OK\n");
  ASSERT_TRUE(redis.Restart()) << redis.error();
  EXPECT_EQ(redis.Command({"GET", "k"}), "\n");
}

TEST(RedisSupportTest, TwoServersGetTwoPorts) {
  SKIP_WITHOUT_REDIS();
  RedisProcess a;
  RedisProcess b;
  ASSERT_TRUE(a.Start()) << a.error();
  ASSERT_TRUE(b.Start()) << b.error();
  EXPECT_NE(a.port(), b.port());
  EXPECT_NE(a.dir(), b.dir());
  a.Command({"SET", "k", "a"});
  EXPECT_EQ(b.Command({"GET", "k"}), "\n");
}

TEST(RedisSupportTest, ClusterFormsAndMigratesASlot) {
  SKIP_WITHOUT_REDIS();
  RedisCluster cluster;
  ASSERT_TRUE(cluster.Start()) << cluster.error();
  std::string url = cluster.url();
  EXPECT_EQ(url.rfind("redis+cluster://127.0.0.1:", 0), 0u) << url;
  for (int i = 0; i < RedisCluster::kMasters; ++i) {
    EXPECT_NE(cluster.node(i).Command({"CLUSTER", "INFO"}).find("cluster_state:ok"),
              std::string::npos);
    EXPECT_NE(url.find("127.0.0.1:" + std::to_string(cluster.node(i).port())), std::string::npos);
  }

  const std::string tag = "{q:support}";
  int slot = cluster.SlotOf(tag);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(cluster.SlotOf(tag + ":jobs"), slot) << "the hash tag decides the slot";
  EXPECT_EQ(cluster.SlotOf("foo"), 12182) << "CRC16 as Redis documents it";
  int owner = cluster.NodeOfSlot(slot);
  ASSERT_GE(owner, 0);
  RedisProcess& src = cluster.node(owner);

  // 35 keys of the slot (several MIGRATE batches), one with a TTL.
  for (int i = 0; i < 35; ++i) {
    ASSERT_EQ(src.Command({"SET", tag + ":k" + std::to_string(i), std::to_string(i)}), "OK\n");
  }
  ASSERT_EQ(src.Command({"PEXPIRE", tag + ":k0", "600000"}), "1\n");
  ASSERT_EQ(src.Command({"HSET", tag + ":h", "f", "v"}), "1\n");
  EXPECT_EQ(cluster.KeysInSlot(owner, slot), 36);

  int to = (owner + 1) % RedisCluster::kMasters;
  std::vector<std::string> steps;
  std::atomic<bool> asked_mid_migration{false};
  RedisCluster::MigrateOptions options;
  options.pause_after_marking = milliseconds(100);
  options.pause_between_batches = milliseconds(20);
  options.on_step = [&](const std::string& step) {
    steps.push_back(step);
    if (step == "marked") {
      // A key not (yet) created answers ASK on the source while the slot is migrating.
      auto r = src.Call({"GET", tag + ":not-there"});
      asked_mid_migration = r && r->is_error() && r->str.rfind("ASK ", 0) == 0;
    }
  };
  ASSERT_TRUE(cluster.MigrateSlot(slot, to, options)) << cluster.error();
  EXPECT_TRUE(asked_mid_migration.load());
  EXPECT_EQ(cluster.last_migrated_keys(), 36);
  ASSERT_GE(steps.size(), 4u);
  EXPECT_EQ(steps.front(), "marked");
  EXPECT_EQ(steps.back(), "handed_over");

  EXPECT_EQ(cluster.NodeOfSlot(slot), to);
  EXPECT_EQ(cluster.NodesAgreeing(slot, to), RedisCluster::kMasters);
  EXPECT_EQ(cluster.KeysInSlot(owner, slot), 0);
  EXPECT_EQ(cluster.KeysInSlot(to, slot), 36);
  RedisProcess& dst = cluster.node(to);
  EXPECT_EQ(dst.Command({"GET", tag + ":k34"}), "34\n");
  EXPECT_EQ(dst.Command({"HGET", tag + ":h", "f"}), "v\n");
  auto ttl = dst.Call({"PTTL", tag + ":k0"});
  ASSERT_TRUE(ttl.has_value());
  EXPECT_GT(ttl->integer, 0) << "MIGRATE keeps the TTL";
  auto moved = src.Call({"GET", tag + ":k1"});
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->str.rfind("MOVED " + std::to_string(slot), 0), 0u) << moved->Text();
  for (int i = 0; i < RedisCluster::kMasters; ++i) {
    EXPECT_NE(cluster.node(i).Command({"CLUSTER", "INFO"}).find("cluster_state:ok"),
              std::string::npos);
  }

  // And back, with no pauses.
  ASSERT_TRUE(cluster.MigrateSlot(slot, owner)) << cluster.error();
  EXPECT_EQ(cluster.NodeOfSlot(slot), owner);
  EXPECT_EQ(src.Command({"GET", tag + ":k34"}), "34\n");
  // Moving a slot to the node that has it is a no-op.
  EXPECT_TRUE(cluster.MigrateSlot(slot, owner)) << cluster.error();
  EXPECT_EQ(cluster.last_migrated_keys(), 0);
}

}  // namespace
}  // namespace anteroom::testing
