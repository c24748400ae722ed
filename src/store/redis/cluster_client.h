#pragma once
// Routes commands to the right Redis: one server, or the master owning a key's slot in a
// Redis Cluster (CRC16 of the hash tag), following MOVED (and refreshing the slot map) and
// ASK (ASKING, then the command, on the importing node), retrying TRYAGAIN (a migrating
// slot whose keys are split between two nodes) and CLUSTERDOWN until the command's timeout. Scripts
// are called by SHA and sent whole once when a server answers NOSCRIPT. One connection per server,
// pipelined. All calls on the io_context's thread.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/connection.h"
#include "store/redis/redis_url.h"

namespace anteroom::store::redis {

// The slot of a key: CRC16 of its hash tag ({...}) or of the whole key.
uint16_t KeySlot(std::string_view key);

// A MOVED or ASK error ("MOVED 3999 127.0.0.1:6381"): the slot and where it went (an empty
// host means the node that answered, `asked_host`); false if it does not read so.
bool ParseRedirect(std::string_view error, std::string_view asked_host, uint16_t& slot,
                   Endpoint& to);

// One range of a CLUSTER SLOTS answer: slots first..last (within 0..16383) on `master`.
struct SlotRange {
  uint16_t first = 0, last = 0;
  Endpoint master;
};
// The ranges of a CLUSTER SLOTS answer, in order; ranges that do not read so, or hold no slot,
// are skipped.
std::vector<SlotRange> ParseSlotMap(const Reply& answer, std::string_view asked_host);

// A script's code (`body`: Lua that defines `local function run(KEYS, ARGV)` and returns
// nothing) in the two forms Redis takes it: a function library (Redis 7: loaded once with
// FUNCTION LOAD, called with FCALL, so its helper functions are made once, not per call) and
// an EVAL script calling run (Redis 6, by EVALSHA). Names carry a hash of the code, so
// processes of different versions sharing a Redis each call their own.
struct Script {
  std::string source;    // the EVAL script
  std::string sha;       // SHA-1 hex of source
  std::string function;  // the library's one function, also the library's name
  std::string library;   // FUNCTION LOAD's argument
  Script(std::string_view name, std::string_view body);
};

class ClusterClient {
 public:
  using Callback = Connection::Callback;

  // `tls`: the context of a rediss:// URL (TlsContextFor), shared by the connections to every
  // node, discovered ones too; null there means the system's trust store. Unused for redis://.
  ClusterClient(boost::asio::io_context& io, RedisUrl url, int64_t timeout_ms,
                std::shared_ptr<RedisTlsContext> tls = nullptr);
  ~ClusterClient();

  // Learns the slot map (cluster) or connects; `done` gets "" or what went wrong.
  void Start(std::function<void(std::string)> done);
  // A command about `key` (routing only; "" = any server).
  void Call(std::string_view key, std::vector<std::string> args, Callback cb);
  // FCALL (or, from a Redis without functions, EVALSHA) of `script` over `keys` (all in one
  // slot) and `argv`. A server that lost the library or script (a restart, a failover, FLUSHALL
  // of functions) is sent it again.
  void Eval(const Script& script, std::vector<std::string> keys, std::vector<std::string> argv,
            Callback cb);
  // A connection of its own to some server, for SUBSCRIBE (messages are cluster-wide).
  std::shared_ptr<Connection> NewSubscriber();
  // Every master (one server outside a cluster), e.g. to run SCRIPT LOAD everywhere.
  std::vector<std::shared_ptr<Connection>> Masters();
  void Close();
  bool closed() const { return closed_; }

 private:
  struct Request;
  std::shared_ptr<Connection> NodeFor(const Endpoint& e);
  void Dispatch(std::shared_ptr<Request> req, std::shared_ptr<Connection> conn, bool asking);
  // `conn` answered it (after ASKING when `asking`).
  void OnReply(std::shared_ptr<Request> req, Reply reply, std::shared_ptr<Connection> conn,
               bool asking);
  void RetryLater(std::shared_ptr<Request> req, int ms);
  bool CanRetry(const Request& req) const;
  void RefreshSlots(std::function<void(std::string)> done = nullptr);

  boost::asio::io_context& io_;
  RedisUrl url_;
  int64_t timeout_ms_;
  ConnectionOptions conn_options_;
  std::map<std::pair<std::string, uint16_t>, std::shared_ptr<Connection>> nodes_;
  std::array<std::shared_ptr<Connection>, 16384> slots_{};
  std::shared_ptr<Connection> any_;  // the single server, or a seed
  // Whether the servers have FUNCTION/FCALL (Redis 7); learned from the first FCALL refused as
  // an unknown command, then every script goes by EVALSHA.
  bool functions_ = true;
  bool refreshing_ = false;
  bool closed_ = false;
  size_t next_seed_ = 0;
};

}  // namespace anteroom::store::redis
