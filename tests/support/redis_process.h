#pragma once
// Test support: real `redis-server` processes (Debian's /usr/bin/redis-server, version 7) for the
// Redis backend's tests. Loopback only (127.0.0.1), each server on a free port in a temp dir of
// its own; every wait is bounded; every process is stopped by its PID (SIGTERM, then SIGKILL
// after a bound, then waitpid). Commands are sent over RESP on a socket of our own (binary-safe,
// no redis-cli per command); `redis-cli --cluster create` builds a cluster.
//
// Children get SIGKILL when the thread that started them exits (as with ServerProcess): start
// (and Restart) them from a thread that outlives them, normally the test's main thread.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace anteroom::testing {

inline constexpr char kRedisServerPath[] = "/usr/bin/redis-server";
inline constexpr char kRedisCliPath[] = "/usr/bin/redis-cli";

// True when redis-server and redis-cli are installed (tests GTEST_SKIP otherwise).
bool RedisAvailable();

// A loopback TCP port nobody listens on right now (bind to port 0, read it, close). When
// `cluster_bus` is set, PORT + 10000 (Redis Cluster's bus port) is free too. 0 on failure.
// Another process may take the port before it is used: callers retry on a failed start.
uint16_t FreeLoopbackPort(bool cluster_bus = false);

// One RESP reply, parsed.
struct RespReply {
  enum class Type { kString, kStatus, kError, kInteger, kNil, kArray };
  Type type = Type::kNil;
  std::string str;  // string, status, error
  int64_t integer = 0;
  std::vector<RespReply> elements;

  bool is_error() const { return type == Type::kError; }
  // The reply as `redis-cli` prints it when stdout is not a terminal: strings, statuses and
  // integers as they are, errors as their text, nil as an empty line, arrays one element per
  // line (nested arrays flattened).
  std::string Text() const;
};

// One RESP connection to 127.0.0.1:port with bounded waits.
class RespConnection {
 public:
  explicit RespConnection(uint16_t port,
                          std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~RespConnection();
  RespConnection(const RespConnection&) = delete;
  RespConnection& operator=(const RespConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  // Sends the command and reads its reply; nullopt (and the connection closed) on a transport
  // error or timeout.
  std::optional<RespReply> Call(const std::vector<std::string>& args,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  bool Fill(std::chrono::steady_clock::time_point deadline);
  std::optional<RespReply> Parse(std::chrono::steady_clock::time_point deadline, int depth);
  std::optional<std::string> Line(std::chrono::steady_clock::time_point deadline);

  int fd_ = -1;
  std::string buffer_;
  size_t read_at_ = 0;
};

// A command-line program run to completion (killed by PID after the timeout).
struct ProgramResult {
  int exit_code = -1;  // 128 + signal when killed; -1 if it never ran
  bool timed_out = false;
  std::string out;  // stdout and stderr, interleaved
};
ProgramResult RunProgram(const std::vector<std::string>& argv,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

class RedisProcess {
 public:
  RedisProcess() = default;
  ~RedisProcess();
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  // Starts redis-server on a free loopback port in a fresh temp dir, with
  // `--save '' --appendonly no` (no persistence) unless EXTRA_ARGS say otherwise (they come last,
  // so they win), e.g. {"--appendonly", "yes", "--appendfsync", "always"}. Waits (bounded) until
  // it answers PING. False (and error()) on failure; retries a few ports when the one picked
  // was taken meanwhile. `cluster_bus`: also needs PORT + 10000 free.
  bool Start(std::vector<std::string> extra_args = {}, bool cluster_bus = false,
             std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Stops the server (SIGTERM: with AOF on it flushes; then SIGKILL after `grace`) and starts it
  // again on the same port, in the same dir, with the same arguments, so its AOF (or RDB)
  // survives. `down_for`: how long it stays down between the two (clients see an outage).
  bool Restart(std::chrono::milliseconds down_for = std::chrono::milliseconds(0),
               std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Starts it again after Stop() or Kill() (same port, dir and arguments).
  bool StartAgain(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // SIGKILL and reap (no flush: what appendfsync did not sync is lost).
  void Kill();
  // SIGTERM, up to `grace`, SIGKILL; reaps. Returns the wait status, -1 if not running.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // SIGSTOP / SIGCONT: the server hangs (connections stay open, nothing is answered).
  void Freeze();
  void Thaw();
  // True while the child has not exited (reaps it if it has).
  bool Alive();

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const;  // redis://127.0.0.1:PORT
  const std::string& error() const { return error_; }
  const std::filesystem::path& dir() const { return dir_->path(); }
  // redis-server's log file (its --logfile), for failure messages.
  std::string Log() const;

  // Sends one command (on a connection kept open, reconnected when needed) and returns the
  // reply as `redis-cli` prints it (RespReply::Text); "" when there was no answer.
  std::string Command(const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // The same with the parsed reply; nullopt when there was no answer.
  std::optional<RespReply> Call(const std::vector<std::string>& args,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // PING answered PONG within `timeout` (fresh connection).
  bool Ping(std::chrono::milliseconds timeout = std::chrono::seconds(1));

 private:
  bool Spawn(std::chrono::milliseconds timeout);

  std::unique_ptr<TempDir> dir_;
  std::vector<std::string> args_;  // the arguments after the defaults
  uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool reaped_ = true;
  std::string error_;
  std::unique_ptr<RespConnection> conn_;
};

// A Redis Cluster of 3 masters (no replicas) on loopback ports, each a RedisProcess with
// `--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000
// --appendonly no --save ''`, joined by `redis-cli --cluster create ... --cluster-replicas 0
// --cluster-yes`. With TLS, each node also has a TLS port with `--tls-cluster yes`: the bus and
// MIGRATE speak TLS, and CLUSTER SLOTS and MOVED name TLS ports to TLS clients. The plain ports
// stay open for the test's own commands (to which CLUSTER SLOTS names plain ports).
class RedisCluster {
 public:
  static constexpr int kMasters = 3;

  struct Tls {
    std::string cert_file;  // the nodes' certificate and key (PEM)
    std::string key_file;
    std::string ca_file;  // the CA the nodes and redis-cli verify each other with
  };

  RedisCluster() = default;
  explicit RedisCluster(Tls tls) : tls_(std::move(tls)) {}
  ~RedisCluster();
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  // Starts the nodes, creates the cluster and waits (bounded) until every node says
  // cluster_state:ok and knows all masters. False (and error()) on failure.
  bool Start(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void Stop();

  const std::string& error() const { return error_; }
  // redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3; with TLS rediss+cluster:// and the
  // TLS ports.
  std::string url() const;
  RedisProcess& node(int i) { return *nodes_.at(static_cast<size_t>(i)); }
  const std::string& node_id(int i) const { return ids_.at(static_cast<size_t>(i)); }

  // CLUSTER KEYSLOT key (-1 on failure).
  int SlotOf(const std::string& key);
  // The master serving `slot` as the nodes see it (CLUSTER SLOTS of each node; the answer of
  // the majority), -1 when unknown.
  int NodeOfSlot(int slot);
  // How many nodes agree that node `owner` serves `slot`.
  int NodesAgreeing(int slot, int owner);
  // Keys in the slot on node i (CLUSTER COUNTKEYSINSLOT), -1 on failure.
  int64_t KeysInSlot(int node, int slot);

  struct MigrateOptions {
    // After IMPORTING/MIGRATING are set and before any key moves (clients see ASK redirects).
    std::chrono::milliseconds pause_after_marking{0};
    // After each batch of keys moved (the slot is split between the two nodes meanwhile).
    std::chrono::milliseconds pause_between_batches{0};
    // Before the final SETSLOT ... NODE (every key moved, slot still migrating).
    std::chrono::milliseconds pause_before_handover{0};
    int batch = 10;  // keys per MIGRATE
    std::chrono::milliseconds timeout{std::chrono::seconds(30)};
    // Called (from the migrating thread) after each step, with its name: "marked",
    // "batch", "moved", "handed_over".
    std::function<void(const std::string&)> on_step;
  };
  // The standard manual resharding of one slot to master `to`: CLUSTER SETSLOT slot IMPORTING
  // src-id on the target, MIGRATING dst-id on the source, then CLUSTER GETKEYSINSLOT + MIGRATE
  // 127.0.0.1 port "" 0 5000 KEYS ... until the slot is empty on the source, then CLUSTER
  // SETSLOT slot NODE dst-id on the target, the source and the other master; waits until every
  // node agrees. True when done (also when `to` already serves it); false and error() otherwise.
  bool MigrateSlot(int slot, int to, const MigrateOptions& options);
  bool MigrateSlot(int slot, int to) { return MigrateSlot(slot, to, MigrateOptions{}); }

  // Keys moved by the last MigrateSlot.
  int64_t last_migrated_keys() const { return last_migrated_keys_; }

 private:
  // The port the cluster knows node i by: its TLS port with TLS.
  uint16_t ClusterPort(size_t i) const;

  std::optional<Tls> tls_;
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
  std::vector<uint16_t> tls_ports_;  // with TLS, node i's
  std::vector<std::string> ids_;
  std::string error_;
  int64_t last_migrated_keys_ = 0;
};

}  // namespace anteroom::testing
