// The pieces of the Redis client that need no server: URLs and cluster slots.
#include <gtest/gtest.h>

#include "store/redis/cluster_client.h"
#include "store/redis/redis_url.h"

namespace anteroom::store::redis {
namespace {

TEST(KeySlot, MatchesTheClusterSpecification) {
  EXPECT_EQ(KeySlot("123456789"), 12739);  // the spec's CRC16 check value, mod 16384
  EXPECT_EQ(KeySlot("foo"), 12182);        // CLUSTER KEYSLOT foo
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  // An empty tag does not count: the whole key is hashed.
  EXPECT_EQ(KeySlot("foo{}{bar}"), KeySlot(std::string_view("foo{}{bar}")));
  EXPECT_NE(KeySlot("foo{}{bar}"), KeySlot("bar"));
  // Only the first tag counts.
  EXPECT_EQ(KeySlot("foo{{bar}}zap"), KeySlot("{bar"));
}

TEST(KeySlot, EveryKeyOfARoomOrQueueSharesOneSlot) {
  for (const char* suffix : {"m", "l", "s", "d", "v", "x", "poll", "wj"}) {
    EXPECT_EQ(KeySlot(std::string("anteroom:{q:jobs}:") + suffix), KeySlot("q:jobs"));
  }
}

TEST(RedisUrl, Single) {
  std::string error;
  auto url = ParseRedisUrl("redis://127.0.0.1:6380/2", error);
  ASSERT_TRUE(url) << error;
  EXPECT_FALSE(url->cluster);
  ASSERT_EQ(url->seeds.size(), 1u);
  EXPECT_EQ(url->seeds[0].host, "127.0.0.1");
  EXPECT_EQ(url->seeds[0].port, 6380);
  EXPECT_EQ(url->db, 2);
  EXPECT_TRUE(url->password.empty());
}

TEST(RedisUrl, PasswordIsPercentDecoded) {
  std::string error;
  auto url = ParseRedisUrl("redis://:p%40ss@localhost", error);
  ASSERT_TRUE(url) << error;
  EXPECT_EQ(url->password, "p@ss");
  EXPECT_EQ(url->seeds[0].port, 6379);
  auto with_user = ParseRedisUrl("redis://app:secret@h:1", error);
  ASSERT_TRUE(with_user) << error;
  EXPECT_EQ(with_user->user, "app");
  EXPECT_EQ(with_user->password, "secret");
}

TEST(RedisUrl, ClusterSeeds) {
  std::string error;
  auto url = ParseRedisUrl("redis+cluster://127.0.0.1:7000,127.0.0.1:7001,[::1]:7002", error);
  ASSERT_TRUE(url) << error;
  EXPECT_TRUE(url->cluster);
  ASSERT_EQ(url->seeds.size(), 3u);
  EXPECT_EQ(url->seeds[2].host, "::1");
  EXPECT_EQ(url->seeds[2].port, 7002);
}

TEST(RedisUrl, PlainIsNotTls) {
  std::string error;
  auto single = ParseRedisUrl("redis://h:1", error);
  auto cluster = ParseRedisUrl("redis+cluster://h:1", error);
  ASSERT_TRUE(single && cluster) << error;
  EXPECT_FALSE(single->tls);
  EXPECT_FALSE(cluster->tls);
}

TEST(RedisUrl, RedissIsTls) {
  std::string error;
  auto url = ParseRedisUrl("rediss://app:p%40ss@redis.example.com:6380/3", error);
  ASSERT_TRUE(url) << error;
  EXPECT_TRUE(url->tls);
  EXPECT_FALSE(url->cluster);
  ASSERT_EQ(url->seeds.size(), 1u);
  EXPECT_EQ(url->seeds[0], (Endpoint{"redis.example.com", 6380}));
  EXPECT_EQ(url->user, "app");
  EXPECT_EQ(url->password, "p@ss");
  EXPECT_EQ(url->db, 3);
  auto bare = ParseRedisUrl("rediss://127.0.0.1", error);
  ASSERT_TRUE(bare) << error;
  EXPECT_TRUE(bare->tls);
  EXPECT_EQ(bare->seeds[0], (Endpoint{"127.0.0.1", 6379}));
}

TEST(RedisUrl, RedissClusterIsTlsToEverySeed) {
  std::string error;
  auto url = ParseRedisUrl("rediss+cluster://:pw@10.0.0.1:7000,[::1]:7001,redis-2:7002", error);
  ASSERT_TRUE(url) << error;
  EXPECT_TRUE(url->tls);
  EXPECT_TRUE(url->cluster);
  EXPECT_EQ(url->password, "pw");
  EXPECT_EQ(url->seeds,
            (std::vector<Endpoint>{{"10.0.0.1", 7000}, {"::1", 7001}, {"redis-2", 7002}}));
}

TEST(RedisUrl, Rejects) {
  std::string error;
  for (const char* bad :
       {"http://h:1", "redis://", "redis://h:0", "redis://h:70000", "redis://h:1/x",
        "redis://a:1,b:2", "redis+cluster://h:1/3", "redis://h:port", "rediss://",
        "rediss://a:1,b:2", "rediss+cluster://h:1/3", "redisss://h:1", "rediss:/h:1",
        "rediss+sentinel://h:1", "REDISS://h:1", "redis+clusters://h:1"}) {
    EXPECT_FALSE(ParseRedisUrl(bad, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

}  // namespace
}  // namespace anteroom::store::redis
