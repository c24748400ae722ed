// `anteroom serve --store rediss://...` against Debian's redis-server with TLS on: a CA, a
// server and a client certificate made by Debian's `openssl` in a temp dir; redis-server on a
// free loopback TLS port (its plain port stays open for the test's own checks and readiness
// probe: anteroom is only given the TLS one). Skipped without redis-server or openssl; every
// process is stopped by PID (the helpers' destructors).
//
//  - RoomsAndQueuesOverTls: a room check-in and a push/fetch/ack over TLS; Redis killed and
//    started again: requests answer 503 meanwhile, then the process is back by itself.
//  - AClientCertificateForTlsAuthClients: Redis with `tls-auth-clients yes` refuses a process
//    without a certificate at start-up; one with --redis-tls-cert/--redis-tls-key works.
//  - AWrongCaIsRefused: Redis's certificate from a CA the process does not trust (given, or
//    the system's): start-up refused, the reason logged; never ready.
//  - ANameMismatchIsRefused: a certificate for another name: refused for an IP address (IP
//    SANs) and for a host name.
//  - ACertificateChangedUnderARunningProcess: Redis restarted with a certificate of another
//    CA: 503s and one clear log line while it lasts; restarted with a good one: ready again.
//  - ACaAndClientCertificateRenewedBySighup: Redis restarted with another CA's certificates,
//    for itself and its clients: 503s until the process's CA and client certificate files are
//    rewritten and it gets SIGHUP; a half-written pair is refused and changes nothing.
//  - AClusterOverTlsFromOneSeedAndASlotMoved: 3 masters with `tls-cluster yes`; the process is
//    given one seed's TLS port and reaches the others from CLUSTER SLOTS over TLS: rooms and
//    queues land on every node. A queue's slot moved under traffic: every job pushed is
//    delivered once, the redirects followed over TLS.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "anteroom/client.hpp"
#include "support/api_checks.h"
#include "support/redis_process.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace anteroom::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kOpenssl[] = "/usr/bin/openssl";
// How long a running process may take to notice Redis came back (backoff at most 2 s).
constexpr milliseconds kNotice = seconds(10);

// Certificates and keys (PEM, P-256) made once per test in a temp dir by Debian's openssl CLI.
class Pki {
 public:
  Pki() : dir_("anteroom-tls") {}

  fs::path Path(const std::string& name) const { return dir_.path() / name; }
  std::string File(const std::string& name) const { return Path(name).string(); }

  // A self-signed CA: NAME.pem, NAME.key.
  bool Ca(const std::string& name) {
    return Run({kOpenssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-days", "2", "-subj", "/CN=anteroom test " + name, "-keyout",
                File(name + ".key"), "-out", File(name + ".pem")});
  }

  // NAME.pem, NAME.key signed by CA, with the subjectAltName SAN (e.g. "IP:127.0.0.1").
  bool Leaf(const std::string& name, const std::string& ca, const std::string& san) {
    std::ofstream(Path(name + ".ext")) << "subjectAltName=" << san << "\n";
    return Run({kOpenssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-subj", "/CN=" + name, "-keyout", File(name + ".key"), "-out",
                File(name + ".csr")}) &&
           Run({kOpenssl, "x509", "-req", "-in", File(name + ".csr"), "-CA", File(ca + ".pem"),
                "-CAkey", File(ca + ".key"), "-CAcreateserial", "-days", "2", "-extfile",
                File(name + ".ext"), "-out", File(name + ".pem")});
  }

  // Copies NAME.pem and NAME.key over AS.pem and AS.key (what a restarted Redis then loads).
  void Install(const std::string& name, const std::string& as) {
    for (const char* ext : {".pem", ".key"}) Copy(name + ext, as + ext);
  }
  void Copy(const std::string& from, const std::string& to) {
    fs::copy_file(Path(from), Path(to), fs::copy_options::overwrite_existing);
  }

  const std::string& error() const { return error_; }

 private:
  bool Run(const std::vector<std::string>& argv) {
    ProgramResult r = RunProgram(argv, seconds(30));
    if (r.exit_code == 0 && !r.timed_out) return true;
    error_ += argv[1] + " failed: " + r.out + "\n";
    return false;
  }

  TempDir dir_;
  std::string error_;
};

// The usual set: CA "ca" signing "server" (127.0.0.1 and localhost) and "client"; "other", a CA
// nobody trusts, signing "stranger" (the same names); "elsewhere" signed by "ca" for another
// name. Redis serves "live".pem/.key: "server"'s at first.
class RedisTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RedisAvailable()) GTEST_SKIP() << kRedisServerPath << " is not installed";
    if (!fs::exists(kOpenssl)) GTEST_SKIP() << kOpenssl << " is not installed";
    const std::string names = "IP:127.0.0.1,DNS:localhost";
    ASSERT_TRUE(pki_.Ca("ca") && pki_.Ca("other") && pki_.Leaf("server", "ca", names) &&
                pki_.Leaf("client", "ca", "DNS:anteroom-client") &&
                pki_.Leaf("stranger", "other", names) &&
                pki_.Leaf("elsewhere", "ca", "DNS:redis.elsewhere.test"))
        << pki_.error();
    pki_.Install("server", "live");
    pki_.Copy("ca.pem", "clients-ca.pem");
  }

  // redis-server with TLS on a free loopback port (tls_port_), its certificate live.pem, taking
  // client certificates signed by the CA(s) of clients-ca.pem.
  void StartRedis(bool auth_clients) {
    tls_port_ = FreeLoopbackPort();
    ASSERT_NE(tls_port_, 0);
    ASSERT_TRUE(redis_.Start({"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
                              pki_.File("live.pem"), "--tls-key-file", pki_.File("live.key"),
                              "--tls-ca-cert-file", pki_.File("clients-ca.pem"),
                              "--tls-auth-clients", auth_clients ? "yes" : "no"}))
        << redis_.error();
  }

  std::string Url(const std::string& host = "127.0.0.1") const {
    return "rediss://" + host + ":" + std::to_string(tls_port_);
  }

  std::unique_ptr<ServerProcess> Serve(std::vector<std::string> args) {
    args.insert(args.end(), {"--redis-secret-check-ms", "300"});
    return std::make_unique<ServerProcess>(std::move(args), EnvVars{}, seconds(20));
  }

  Pki pki_;
  RedisProcess redis_;
  uint16_t tls_port_ = 0;
};

int ReadyStatus(const ServerProcess& server) {
  Client c(server.url());
  return c.Request("GET", "/readyz").status;
}

// A room check-in (admitted) and a job pushed, fetched and acked: all answered.
void RoomAndQueueWork(const ServerProcess& server, const std::string& tag) {
  Client c(server.url());
  HttpResult put = c.PutRoom("hall-" + tag, {{"capacity", 2}});
  ASSERT_EQ(put.status, 200) << put.body;
  HttpResult check = c.Check("hall-" + tag);
  EXPECT_TRUE(IsSession(check, "active")) << check.body;
  HttpResult pushed = c.Push("q-" + tag, boost::json::object{{"n", 1}});
  ASSERT_EQ(pushed.status, 201) << pushed.body;
  HttpResult fetched = c.Fetch("q-" + tag, "w", 1);
  ASSERT_EQ(fetched.status, 200) << fetched.body;
  ASSERT_EQ(fetched.json.at("jobs").as_array().size(), 1u) << fetched.body;
  const boost::json::value& job = fetched.json.at("jobs").at(0);
  EXPECT_EQ(job.at("id"), pushed.json.at("id"));
  HttpResult acked = c.Ack("q-" + tag, {std::string(job.at("lease").as_string())});
  EXPECT_EQ(acked.status, 200) << acked.body;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One command's reply on the server's plain port, as redis-cli prints it, trailing newline cut.
std::string Said(RedisProcess& redis, const std::vector<std::string>& args) {
  std::string text = redis.Command(args);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

TEST_F(RedisTlsTest, RoomsAndQueuesOverTls) {
  StartRedis(/*auth_clients=*/false);
  auto server = Serve({"--store", Url(), "--redis-tls-ca", pki_.File("ca.pem")});
  ASSERT_TRUE(server->started()) << server->error();
  EXPECT_EQ(ReadyStatus(*server), 200);
  RoomAndQueueWork(*server, "a");
  // The work is in this Redis (read over its plain port; the process knows only the TLS one).
  EXPECT_EQ(Said(redis_, {"EXISTS", "anteroom:secret"}), "1");
  EXPECT_NE(Said(redis_, {"DBSIZE"}), "0");

  // Killed: answers are 503 (not hangs, not crashes) until it is back.
  redis_.Kill();
  Client c(server->url());
  EXPECT_TRUE(WaitFor([&] { return c.Check("hall-a").status == 503; }, kNotice));
  HttpResult down = c.Push("q-a", 2);
  EXPECT_TRUE(IsError(down, 503, "unavailable")) << down.body;
  ASSERT_TRUE(redis_.StartAgain()) << redis_.error();
  EXPECT_TRUE(WaitFor([&] { return ReadyStatus(*server) == 200; }, kNotice, milliseconds(100)));
  // Redis came back empty (no persistence): the process put its secret back and works on.
  EXPECT_TRUE(WaitFor(
      [&] {
        return Said(redis_, {"EXISTS", "anteroom:secret"}) == "1";
      },
      kNotice, milliseconds(50)));
  EXPECT_TRUE(WaitFor(
      [&] {
        return c.PutRoom("hall-b", {{"capacity", 2}}).status == 200;
      },
      kNotice, milliseconds(100)));
  RoomAndQueueWork(*server, "b");
  EXPECT_TRUE(server->Alive());
}

TEST_F(RedisTlsTest, AClientCertificateForTlsAuthClients) {
  StartRedis(/*auth_clients=*/true);
  auto without = Serve({"--store", Url(), "--redis-tls-ca", pki_.File("ca.pem")});
  EXPECT_FALSE(without->started());
  EXPECT_TRUE(Contains(without->Errors(), "certificate required")) << without->Errors();

  auto with = Serve({"--store", Url(), "--redis-tls-ca", pki_.File("ca.pem"), "--redis-tls-cert",
                     pki_.File("client.pem"), "--redis-tls-key", pki_.File("client.key")});
  ASSERT_TRUE(with->started()) << with->error();
  RoomAndQueueWork(*with, "a");

  // A key that is not the certificate's: refused at start, naming the file.
  auto mismatched =
      Serve({"--store", Url(), "--redis-tls-ca", pki_.File("ca.pem"), "--redis-tls-cert",
             pki_.File("client.pem"), "--redis-tls-key", pki_.File("server.key")});
  EXPECT_FALSE(mismatched->started());
  EXPECT_TRUE(Contains(mismatched->Errors(), "the key " + pki_.File("server.key") +
                                                 " does not match the certificate " +
                                                 pki_.File("client.pem")))
      << mismatched->Errors();
}

TEST_F(RedisTlsTest, AWrongCaIsRefused) {
  StartRedis(/*auth_clients=*/false);
  auto other = Serve({"--store", Url(), "--redis-tls-ca", pki_.File("other.pem")});
  EXPECT_FALSE(other->started());
  EXPECT_TRUE(Contains(other->Errors(), "TLS handshake failed: certificate verify failed"))
      << other->Errors();
  // The system's trust store does not hold the test CA either.
  auto system = Serve({"--store", Url()});
  EXPECT_FALSE(system->started());
  EXPECT_TRUE(Contains(system->Errors(), "certificate verify failed")) << system->Errors();
  // TLS settings with a plain URL: refused, not ignored.
  auto plain = Serve({"--store", redis_.url(), "--redis-tls-ca", pki_.File("ca.pem")});
  EXPECT_FALSE(plain->started());
  EXPECT_TRUE(Contains(plain->Errors(), "need a rediss://")) << plain->Errors();
}

TEST_F(RedisTlsTest, ANameMismatchIsRefused) {
  pki_.Install("elsewhere", "live");
  StartRedis(/*auth_clients=*/false);
  auto by_ip = Serve({"--store", Url(), "--redis-tls-ca", pki_.File("ca.pem")});
  EXPECT_FALSE(by_ip->started());
  EXPECT_TRUE(Contains(by_ip->Errors(), "certificate verify failed: IP address mismatch"))
      << by_ip->Errors();
  auto by_name = Serve({"--store", Url("localhost"), "--redis-tls-ca", pki_.File("ca.pem")});
  EXPECT_FALSE(by_name->started());
  EXPECT_TRUE(Contains(by_name->Errors(), "certificate verify failed: hostname mismatch"))
      << by_name->Errors();
}

TEST_F(RedisTlsTest, ANameIsVerifiedAndSentAsSni) {
  StartRedis(/*auth_clients=*/false);
  auto server = Serve({"--store", Url("localhost"), "--redis-tls-ca", pki_.File("ca.pem")});
  ASSERT_TRUE(server->started()) << server->error();
  RoomAndQueueWork(*server, "a");
}

TEST_F(RedisTlsTest, ACertificateChangedUnderARunningProcess) {
  StartRedis(/*auth_clients=*/false);
  auto server = Serve({"--store", Url(), "--redis-tls-ca", pki_.File("ca.pem")});
  ASSERT_TRUE(server->started()) << server->error();
  RoomAndQueueWork(*server, "a");

  redis_.Kill();
  pki_.Install("stranger", "live");
  ASSERT_TRUE(redis_.StartAgain()) << redis_.error();
  Client c(server->url());
  // Not ready, and /readyz says why.
  EXPECT_TRUE(WaitFor(
      [&] {
        HttpResult r = c.Request("GET", "/readyz");
        return r.status == 503 && Contains(r.body, "certificate verify failed");
      },
      kNotice, milliseconds(100)));
  HttpResult refused = c.Check("hall-a");
  EXPECT_TRUE(IsError(refused, 503, "unavailable")) << refused.body;
  EXPECT_TRUE(WaitFor(
      [&] { return Contains(server->Errors(), "TLS handshake failed: certificate verify failed"); },
      kNotice));
  // Logged once while it lasts, not at every reconnection attempt nor by every connection.
  std::this_thread::sleep_for(seconds(3));
  std::string errors = server->Errors();
  const std::string line = "TLS handshake failed: certificate verify failed";
  size_t first = errors.find(line);
  EXPECT_EQ(errors.find(line, first + 1), std::string::npos) << errors;

  redis_.Kill();
  pki_.Install("server", "live");
  ASSERT_TRUE(redis_.StartAgain()) << redis_.error();
  EXPECT_TRUE(WaitFor([&] { return ReadyStatus(*server) == 200; }, kNotice, milliseconds(100)));
  EXPECT_TRUE(WaitFor(
      [&] {
        return c.PutRoom("hall-b", {{"capacity", 2}}).status == 200;
      },
      kNotice, milliseconds(100)));
  RoomAndQueueWork(*server, "b");
  EXPECT_TRUE(Contains(server->Errors(), "TLS handshake succeeded")) << server->Errors();
}

// Redis moves to certificates of another CA, for its own and for its clients'; the process is
// given the new CA and a new client certificate in the files it started with, and SIGHUP: it
// reconnects with them, without a restart. A reload whose files do not load keeps what it had.
TEST_F(RedisTlsTest, ACaAndClientCertificateRenewedBySighup) {
  ASSERT_TRUE(pki_.Leaf("renewed", "other", "DNS:anteroom-client")) << pki_.error();
  pki_.Install("client", "mine");
  pki_.Copy("ca.pem", "trusted.pem");
  StartRedis(/*auth_clients=*/true);
  auto server =
      Serve({"--store", Url(), "--redis-tls-ca", pki_.File("trusted.pem"), "--redis-tls-cert",
             pki_.File("mine.pem"), "--redis-tls-key", pki_.File("mine.key")});
  ASSERT_TRUE(server->started()) << server->error();
  RoomAndQueueWork(*server, "a");

  redis_.Kill();
  pki_.Install("stranger", "live");
  pki_.Copy("other.pem", "clients-ca.pem");
  ASSERT_TRUE(redis_.StartAgain()) << redis_.error();
  EXPECT_TRUE(WaitFor([&] { return ReadyStatus(*server) == 503; }, kNotice, milliseconds(100)));

  // Half-written: the new certificate, the old key. Refused; the process goes on as it was.
  pki_.Copy("renewed.pem", "mine.pem");
  ASSERT_EQ(kill(server->pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor([&] { return Contains(server->Errors(), "SIGHUP: Redis TLS reload failed"); },
                      kNotice));
  EXPECT_TRUE(Contains(server->Errors(), "does not match the certificate")) << server->Errors();
  EXPECT_EQ(ReadyStatus(*server), 503);

  pki_.Copy("renewed.key", "mine.key");
  pki_.Copy("other.pem", "trusted.pem");
  ASSERT_EQ(kill(server->pid(), SIGHUP), 0);
  EXPECT_TRUE(WaitFor(
      [&] {
        return Contains(server->Output() + server->Errors(),
                        "Redis TLS reloaded for new connections: trusting " +
                            pki_.File("trusted.pem") + ", client certificate /CN=renewed");
      },
      kNotice));
  EXPECT_TRUE(WaitFor([&] { return ReadyStatus(*server) == 200; }, kNotice, milliseconds(100)))
      << server->Errors();
  EXPECT_TRUE(WaitFor(
      [&] {
        return Client(server->url()).PutRoom("hall-b", {{"capacity", 2}}).status == 200;
      },
      kNotice, milliseconds(100)));
  RoomAndQueueWork(*server, "b");
  EXPECT_TRUE(server->Alive());
}

// Three masters, TLS for clients and the bus (`tls-cluster yes`, so CLUSTER SLOTS and MOVED name
// the TLS ports). The process is given one seed and reaches the others from CLUSTER SLOTS; then
// a queue's slot is moved to another node under a producer and a worker: the process follows
// TRYAGAIN and ASK while it migrates and MOVED after, to a node it reaches over TLS.
TEST_F(RedisTlsTest, AClusterOverTlsFromOneSeedAndASlotMoved) {
  RedisCluster cluster({.cert_file = pki_.File("server.pem"),
                        .key_file = pki_.File("server.key"),
                        .ca_file = pki_.File("ca.pem")});
  ASSERT_TRUE(cluster.Start()) << cluster.error();
  std::string seed = cluster.url().substr(0, cluster.url().find(','));
  ASSERT_EQ(seed.rfind("rediss+cluster://127.0.0.1:", 0), 0u) << seed;
  auto server = Serve({"--store", seed, "--redis-tls-ca", pki_.File("ca.pem")});
  ASSERT_TRUE(server->started()) << server->error();
  // Names enough that every node holds some (slots are CRC16 of each name's hash tag).
  for (int i = 0; i < 12; ++i) RoomAndQueueWork(*server, std::to_string(i));
  for (int i = 0; i < RedisCluster::kMasters; ++i) {
    EXPECT_NE(Said(cluster.node(i), {"DBSIZE"}), "0") << "node " << i << " holds no key";
  }

  const std::string queue = "moving";
  const int slot = cluster.SlotOf("{q:" + queue + "}");
  const int from = cluster.NodeOfSlot(slot);
  ASSERT_GE(from, 0);
  const int to = (from + 1) % RedisCluster::kMasters;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> pushed, acked, problems;
  std::thread traffic([&] {
    Client c(server->url());
    for (int i = 0; !stop.load() && i < 100000; ++i) {
      HttpResult p = c.Push(queue, boost::json::object{{"n", i}});
      HttpResult f = c.Fetch(queue, "w", 5);
      std::lock_guard lock(mu);
      if (p.status == 201) {
        pushed.push_back(std::string(p.json.at("id").as_string()));
      } else {
        problems.push_back("push: " + std::to_string(p.status) + " " + p.body);
      }
      if (f.status != 200) {
        problems.push_back("fetch: " + std::to_string(f.status) + " " + f.body);
        continue;
      }
      std::vector<std::string> leases;
      for (const auto& job : f.json.at("jobs").as_array()) {
        acked.push_back(std::string(job.at("id").as_string()));
        leases.push_back(std::string(job.at("lease").as_string()));
      }
      if (leases.empty()) continue;
      HttpResult a = c.Ack(queue, leases);
      if (a.status != 200) problems.push_back("ack: " + std::to_string(a.status) + " " + a.body);
    }
  });
  std::this_thread::sleep_for(milliseconds(300));
  RedisCluster::MigrateOptions slow;
  slow.pause_after_marking = milliseconds(500);
  slow.pause_between_batches = milliseconds(100);
  slow.pause_before_handover = milliseconds(300);
  slow.batch = 1;
  bool moved = cluster.MigrateSlot(slot, to, slow);
  std::this_thread::sleep_for(milliseconds(500));
  stop = true;
  traffic.join();
  ASSERT_TRUE(moved) << cluster.error();
  std::printf("slot %d, node %d -> %d: %lld keys moved; %zu jobs pushed meanwhile\n", slot, from,
              to, static_cast<long long>(cluster.last_migrated_keys()), pushed.size());
  EXPECT_GT(cluster.last_migrated_keys(), 0);
  EXPECT_EQ(cluster.KeysInSlot(from, slot), 0);
  EXPECT_GT(cluster.KeysInSlot(to, slot), 0);

  // Whatever was left is fetched from the new node; every job pushed was delivered once.
  Client c(server->url());
  for (int round = 0; round < 100; ++round) {
    HttpResult f = c.Fetch(queue, "w", 100);
    ASSERT_EQ(f.status, 200) << f.body;
    if (f.json.at("jobs").as_array().empty()) break;
    std::vector<std::string> leases;
    for (const auto& job : f.json.at("jobs").as_array()) {
      acked.push_back(std::string(job.at("id").as_string()));
      leases.push_back(std::string(job.at("lease").as_string()));
    }
    EXPECT_EQ(c.Ack(queue, leases).status, 200);
  }
  EXPECT_TRUE(problems.empty()) << problems.size() << " failed, the first: " << problems.front();
  EXPECT_GT(pushed.size(), 10u);
  std::sort(pushed.begin(), pushed.end());
  std::sort(acked.begin(), acked.end());
  EXPECT_EQ(pushed, acked);
  EXPECT_TRUE(server->Alive());
}

}  // namespace
}  // namespace anteroom::testing
