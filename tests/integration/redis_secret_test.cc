// The token secret (and the EdDSA signing key) that `anteroom serve --store redis://...`
// processes share through Redis (PREFIXsecret, PREFIXtoken-key:ALG), against Debian's
// redis-server started by the test on a loopback port. Skipped when /usr/bin/redis-server is
// missing; every process a test starts is stopped by PID (the helpers' destructors).
//
//  - ALostSecretIsPutBackByTheRunningProcesses: two processes share a secret; the key is
//    deleted and a third process started at once: it waits for a running process to put the
//    old secret back and takes it; a token and a lease of process 1 are accepted by the others.
//  - ALostSecretWithNoProcessRunningRefusesToStart: Redis holds a room but no secret, and no
//    process runs: start-up is refused with the explanation, nothing is minted; with
//    --accept-new-token-secret a new one is.
//  - RedisRestartedWithoutPersistence: the running processes put their secret back.
//  - ASplitSecretMakesTheProcessNotReady: the key (then the EdDSA key) set to another value
//    while processes run: /healthz degraded with the reason and /readyz 503 within a bound, and
//    ready again once the value is theirs again.
//  - AConfiguredSecretMustMatchRedis: ANTEROOM_TOKEN_SECRET differing from Redis's: start-up
//    refused; the same one: accepted.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/redis_process.h"
#include "support/server_process.h"

namespace anteroom::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

#define SKIP_WITHOUT_REDIS() \
  if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed"

constexpr char kSecretKey[] = "anteroom:secret";
constexpr char kEdDsaKey[] = "anteroom:token-key:EdDSA";
// Each process checks its values this often (--redis-secret-check-ms), so a start-up that
// finds the secret missing waits 2 * 300 + 1000 ms for a running process to put it back.
constexpr char kCheckMs[] = "300";
// Bound on what the processes notice (a few checks, reconnections included).
constexpr milliseconds kNotice = seconds(8);

std::unique_ptr<ServerProcess> Serve(const RedisProcess& redis, std::vector<std::string> args = {},
                                     EnvVars env = {}) {
  std::vector<std::string> all = {"--store", redis.url(), "--redis-secret-check-ms", kCheckMs};
  all.insert(all.end(), args.begin(), args.end());
  return std::make_unique<ServerProcess>(std::move(all), std::move(env), seconds(20));
}

// One command's reply as text: a status, a string or an integer; "" when Redis did not answer.
std::string Do(RedisProcess& redis, const std::vector<std::string>& args) {
  auto r = redis.Call(args);
  if (!r) return "";
  return r->type == RespReply::Type::kInteger ? std::to_string(r->integer) : r->str;
}

// What the key holds (binary-safe); nullopt when missing or when Redis did not answer.
std::optional<std::string> Held(RedisProcess& redis, const std::string& key) {
  auto r = redis.Call({"GET", key});
  if (!r || r->type != RespReply::Type::kString) return std::nullopt;
  return r->str;
}

struct Health {
  std::string status;  // healthz "status"
  std::string reason;  // healthz "reason"
  int ready = 0;       // readyz HTTP status
};

Health HealthOf(const ServerProcess& server) {
  Client c(server.url());
  HttpResult h = c.Health();
  HttpResult r = c.Request("GET", "/readyz");
  return {StrField(h.json, "status").value_or("no answer: " + h.error),
          StrField(h.json, "reason").value_or(""), r.status};
}

bool Ready(const ServerProcess& server) {
  Health h = HealthOf(server);
  return h.status == "ok" && h.ready == 200;
}

// A room "r" with an admitted session: its token.
std::string AdmittedToken(Client& c) {
  EXPECT_EQ(c.PutRoom("r", {{"capacity", 5}}).status, 200);
  HttpResult s = c.Check("r", "s1");
  EXPECT_TRUE(IsSession(s, "active")) << s.body;
  return StrField(s.json, "token").value_or("");
}

bool Verifies(Client& c, const std::string& token) {
  HttpResult v = c.VerifyToken(token);
  return v.status == 200 && BoolField(v.json, "valid") == true;
}

TEST(RedisSecretTest, ALostSecretIsPutBackByTheRunningProcesses) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto a = Serve(redis);
  ASSERT_TRUE(a->started()) << a->error();
  auto b = Serve(redis);
  ASSERT_TRUE(b->started()) << b->error();
  // The start-up warning of a Redis deployment with no ANTEROOM_TOKEN_SECRET.
  // (stderr is drained by another thread than the one that saw the process listening)
  EXPECT_TRUE(
      WaitFor([&] { return a->Errors().find("Set ANTEROOM_TOKEN_SECRET") != std::string::npos; },
              std::chrono::seconds(5)))
      << a->Errors();
  std::optional<std::string> secret = Held(redis, kSecretKey);
  ASSERT_TRUE(secret.has_value());

  Client ca(a->url()), cb(b->url());
  std::string token = AdmittedToken(ca);
  ASSERT_TRUE(Verifies(cb, token));
  ASSERT_EQ(ca.Push("q", "job").status, 201);
  HttpResult fetched = ca.Fetch("q", "w1");
  ASSERT_EQ(fetched.status, 200) << fetched.body;
  ASSERT_EQ(fetched.json.at("jobs").as_array().size(), 1u) << fetched.body;
  std::string lease = *StrField(fetched.json.at("jobs").as_array()[0], "lease");

  // Lost while rooms and queues exist; a third process starts at once.
  ASSERT_EQ(Do(redis, {"DEL", kSecretKey}), "1");
  auto c = Serve(redis);
  ASSERT_TRUE(c->started()) << "it should have waited for the running processes to put the "
                               "secret back: "
                            << c->error();
  EXPECT_EQ(Held(redis, kSecretKey), secret) << "the old secret is back, no new one";
  EXPECT_TRUE(WaitFor(
      [&] {
        return a->Errors().find("was missing") != std::string::npos ||
               b->Errors().find("was missing") != std::string::npos;
      },
      kNotice))
      << "a running process says it put the secret back:\n"
      << a->Errors() << "\n---\n"
      << b->Errors();

  Client cc(c->url());
  EXPECT_TRUE(Verifies(cb, token)) << "process 1's token on process 2";
  EXPECT_TRUE(Verifies(cc, token)) << "process 1's token on process 3";
  HttpResult acked = cb.Ack("q", {lease});
  ASSERT_EQ(acked.status, 200) << acked.body;
  EXPECT_EQ(BoolField(acked.json.at("results").as_array()[0], "ok"), true)
      << "process 1's lease acked through process 2: " << acked.body;
  for (ServerProcess* s : {a.get(), b.get(), c.get()}) {
    EXPECT_TRUE(Ready(*s)) << HealthOf(*s).reason;
    EXPECT_TRUE(s->Alive());
  }
}

TEST(RedisSecretTest, ALostSecretWithNoProcessRunningRefusesToStart) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  {
    auto a = Serve(redis);
    ASSERT_TRUE(a->started()) << a->error();
    Client ca(a->url());
    ASSERT_EQ(ca.PutRoom("r", {{"capacity", 5}}).status, 200);
    a->Stop();
  }
  ASSERT_EQ(Do(redis, {"DEL", kSecretKey}), "1");

  auto refused = Serve(redis);
  EXPECT_FALSE(refused->started());
  EXPECT_FALSE(refused->Alive());
  const std::string& why = refused->error();
  EXPECT_NE(why.find("Redis holds rooms or queues"), std::string::npos) << why;
  EXPECT_NE(why.find("was lost"), std::string::npos) << why;
  EXPECT_NE(why.find("ANTEROOM_TOKEN_SECRET"), std::string::npos) << why;
  EXPECT_NE(why.find("--accept-new-token-secret"), std::string::npos) << why;
  EXPECT_EQ(Held(redis, kSecretKey), std::nullopt) << "no secret minted";

  // The operator accepts a new one.
  auto renewed = Serve(redis, {"--accept-new-token-secret"});
  ASSERT_TRUE(renewed->started()) << renewed->error();
  EXPECT_TRUE(WaitFor(
      [&] { return renewed->Errors().find("a new token secret is in use") != std::string::npos; },
      std::chrono::seconds(5)))
      << renewed->Errors();
  EXPECT_TRUE(Held(redis, kSecretKey).has_value());
  // Processes started later take it.
  auto later = Serve(redis);
  ASSERT_TRUE(later->started()) << later->error();
  Client cr(renewed->url()), cl(later->url());
  HttpResult s = cr.Check("r", "s1");
  ASSERT_TRUE(IsSession(s, "active")) << s.body;
  EXPECT_TRUE(Verifies(cl, *StrField(s.json, "token")));
}

TEST(RedisSecretTest, RedisRestartedWithoutPersistence) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;  // no persistence: a restart loses every key
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto a = Serve(redis);
  ASSERT_TRUE(a->started()) << a->error();
  auto b = Serve(redis);
  ASSERT_TRUE(b->started()) << b->error();
  std::optional<std::string> secret = Held(redis, kSecretKey);
  ASSERT_TRUE(secret.has_value());

  ASSERT_TRUE(redis.Restart()) << redis.error();
  EXPECT_TRUE(WaitFor([&] { return Held(redis, kSecretKey) == secret; }, kNotice, milliseconds(50)))
      << "the running processes put their secret back:\n"
      << a->Errors();
  EXPECT_TRUE(WaitFor([&] { return Ready(*a) && Ready(*b); }, kNotice, milliseconds(100)))
      << HealthOf(*a).reason << " / " << HealthOf(*b).reason;
  Client ca(a->url()), cb(b->url());
  std::string token = AdmittedToken(ca);
  EXPECT_TRUE(Verifies(cb, token));
}

TEST(RedisSecretTest, ASplitSecretMakesTheProcessNotReady) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto a = Serve(redis, {"--token-alg", "EdDSA"});
  ASSERT_TRUE(a->started()) << a->error();
  auto b = Serve(redis, {"--token-alg", "EdDSA"});
  ASSERT_TRUE(b->started()) << b->error();
  ASSERT_TRUE(Ready(*a) && Ready(*b));
  std::optional<std::string> secret = Held(redis, kSecretKey);
  std::optional<std::string> pem = Held(redis, kEdDsaKey);
  ASSERT_TRUE(secret.has_value());
  ASSERT_TRUE(pem.has_value());

  // Another secret in Redis (as a process that minted its own would have put there).
  ASSERT_EQ(Do(redis, {"SET", kSecretKey, "someone-else's"}), "OK");
  for (ServerProcess* s : {a.get(), b.get()}) {
    EXPECT_TRUE(WaitFor(
        [&] {
          Health h = HealthOf(*s);
          return h.status == "degraded" && h.ready == 503;
        },
        kNotice, milliseconds(50)))
        << "status " << HealthOf(*s).status;
    Health h = HealthOf(*s);
    EXPECT_NE(h.reason.find(kSecretKey), std::string::npos) << h.reason;
    EXPECT_NE(h.reason.find("token secret"), std::string::npos) << h.reason;
    Client c(s->url());
    HttpResult r = c.Request("GET", "/readyz");
    EXPECT_EQ(StrField(r.json, "reason"), h.reason) << r.body;
  }
  EXPECT_TRUE(WaitFor([&] { return a->Errors().find("holds another value") != std::string::npos; },
                      kNotice))
      << a->Errors();
  EXPECT_EQ(Held(redis, kSecretKey), "someone-else's") << "a different value is not overwritten";

  // Mended: ready again.
  ASSERT_EQ(Do(redis, {"SET", kSecretKey, *secret}), "OK");
  EXPECT_TRUE(WaitFor([&] { return Ready(*a) && Ready(*b); }, kNotice, milliseconds(50)))
      << HealthOf(*a).reason;

  // The same for the shared EdDSA signing key.
  ASSERT_EQ(Do(redis, {"SET", kEdDsaKey, "not-our-key"}), "OK");
  EXPECT_TRUE(WaitFor([&] { return HealthOf(*a).ready == 503; }, kNotice, milliseconds(50)));
  EXPECT_NE(HealthOf(*a).reason.find(kEdDsaKey), std::string::npos) << HealthOf(*a).reason;
  ASSERT_EQ(Do(redis, {"DEL", kEdDsaKey}), "1");
  EXPECT_TRUE(WaitFor([&] { return Held(redis, kEdDsaKey) == pem; }, kNotice, milliseconds(50)))
      << "a lost signing key is put back";
  EXPECT_TRUE(WaitFor([&] { return Ready(*a) && Ready(*b); }, kNotice, milliseconds(50)))
      << HealthOf(*a).reason;
}

TEST(RedisSecretTest, AConfiguredSecretMustMatchRedis) {
  SKIP_WITHOUT_REDIS();
  RedisProcess redis;
  ASSERT_TRUE(redis.Start()) << redis.error();
  auto a = Serve(redis, {}, {{"ANTEROOM_TOKEN_SECRET", "alpha-secret"}});
  ASSERT_TRUE(a->started()) << a->error();
  EXPECT_EQ(Held(redis, kSecretKey), "alpha-secret");
  EXPECT_EQ(a->Errors().find("ANTEROOM_TOKEN_SECRET is not set"), std::string::npos) << a->Errors();

  auto other = Serve(redis, {}, {{"ANTEROOM_TOKEN_SECRET", "beta-secret"}});
  EXPECT_FALSE(other->started());
  EXPECT_FALSE(other->Alive());
  EXPECT_NE(other->error().find("ANTEROOM_TOKEN_SECRET differs"), std::string::npos)
      << other->error();
  EXPECT_EQ(other->error().find("beta-secret"), std::string::npos) << "no secret in logs";
  EXPECT_EQ(Held(redis, kSecretKey), "alpha-secret");

  auto same = Serve(redis, {}, {{"ANTEROOM_TOKEN_SECRET", "alpha-secret"}});
  ASSERT_TRUE(same->started()) << same->error();
  auto unset = Serve(redis);  // takes the one in Redis
  ASSERT_TRUE(unset->started()) << unset->error();
  Client ca(a->url()), cs(same->url()), cu(unset->url());
  std::string token = AdmittedToken(ca);
  EXPECT_TRUE(Verifies(cs, token));
  EXPECT_TRUE(Verifies(cu, token));
}

}  // namespace
}  // namespace anteroom::testing
