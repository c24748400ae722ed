#pragma once
// Values every anteroom process on one Redis must share: the token secret (PREFIXsecret, which
// also keys leases and puzzles) and the EdDSA/ES256 signing keys (PREFIXtoken-key:ALG). What
// one process signs verifies on another only while they share them, so a lost key (Redis
// restarted without persistence, an eviction, FLUSHALL, DEL) is never replaced silently:
//  - at start-up, ClaimShared takes the value Redis holds; when the key is missing while Redis
//    holds rooms or queues it waits (bounded) for a running process to put it back, and then
//    answers kLost rather than minting one (unless told to mint);
//  - while a process runs, SharedValueWatch (owned by RedisBackend) puts a missing key back
//    with the process's own value, and reports a different value in the log and through the
//    health check (/healthz degraded, /readyz 503).
// docs/security.md, "The token secret with Redis", says what operators see and do.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/redis/cluster_client.h"
#include "store/redis/redis_tls.h"

namespace anteroom::store::redis {

// One value to share: under `key`, this process's `value`; `what` names it in messages
// ("token secret", "EdDSA signing key").
struct SharedValue {
  std::string key;
  std::string value;
  std::string what;
};

struct ClaimOptions {
  // The value is the operator's (ANTEROOM_TOKEN_SECRET): put when the key is missing, whatever
  // Redis holds besides; a different value in Redis answers kDiffers.
  bool configured = false;
  // The key missing while Redis holds rooms or queues: how long to wait for a running process
  // to put it back (SharedValueWatch does within its interval).
  int64_t restore_wait_ms = 5000;
  // Then: put this process's value (kMinted) instead of answering kLost.
  bool mint_when_lost = false;
  // Bound of each Redis command.
  int64_t timeout_ms = 5000;
  RedisTlsFiles tls = {};  // with rediss://: as RedisBackendOptions::tls
};

struct Claimed {
  enum class Outcome {
    kFound,     // Redis held it (the same as ours when configured)
    kCreated,   // Redis held no anteroom state: the first process's value (SET NX) was taken
    kRestored,  // missing while state existed; a running process put it back while we waited
    kMinted,    // missing while state existed, nobody put it back: ours put (mint_when_lost)
    kLost,      // missing while state existed, nobody put it back: nothing put; value empty
    kDiffers,   // configured, and Redis holds another value; value empty (never logged)
  };
  Outcome outcome = Outcome::kFound;
  std::string value;
};

// Start-up only (blocks the calling thread; an io_context of its own, every command bounded by
// options.timeout_ms). `prefix` is the key prefix (whose registry and name sets show whether
// Redis holds anteroom state). Throws std::runtime_error when Redis cannot be read.
Claimed ClaimShared(const std::string& url, const std::string& prefix, const SharedValue& mine,
                    const ClaimOptions& options);

// Keeps the shared values of a running process in place. Runs on one io_context's thread (the
// Redis backend's home shard) through that thread's client; every call there, except
// problem(). Every `interval`, and at CheckNow() (after a reconnection), each value is checked
// by one script: a missing key is put back (SET with this process's value; a warning), a
// different value makes problem() say so (an error in the log when it starts, then once a
// minute while it lasts; an info line when it is over). While Redis cannot be reached the
// values are looked at again every 250 ms, and problem() keeps what was last known.
class SharedValueWatch {
 public:
  SharedValueWatch(boost::asio::io_context& io, ClusterClient& client,
                   std::chrono::milliseconds interval);
  ~SharedValueWatch();
  SharedValueWatch(const SharedValueWatch&) = delete;
  SharedValueWatch& operator=(const SharedValueWatch&) = delete;

  // Watches one more value (checked at once).
  void Add(SharedValue value);
  // Checks now (or right after the check under way).
  void CheckNow();
  // No more checks; answers still to come are ignored.
  void Stop();
  // "" while every value is in place (or not checked yet); else why not. Any thread.
  std::string problem() const;

 private:
  void Check();
  void Finish(bool reached);
  void Arm(std::chrono::milliseconds after);

  ClusterClient& client_;
  std::chrono::milliseconds interval_;
  boost::asio::steady_timer timer_;
  Script script_;
  std::vector<SharedValue> values_;
  std::vector<bool> differs_;                                  // per value, as last seen
  std::vector<std::chrono::steady_clock::time_point> logged_;  // last error logged, per value
  bool checking_ = false;
  bool again_ = false;
  bool stopped_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // answers after destruction: ignored

  mutable std::mutex mu_;
  std::string problem_;  // guarded by mu_
};

}  // namespace anteroom::store::redis
