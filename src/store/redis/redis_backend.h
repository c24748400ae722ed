#pragma once
// The Redis backend: rooms and queues live in Redis (one server or a Redis Cluster), so any
// number of anteroom processes serve the same ones. Each operation is one Lua script on the
// node owning the room's or queue's hash tag (src/store/redis/lua/), run atomically by Redis
// with Redis's own clock (TIME), so processes with skewed clocks agree.
//
// Threads: the backend runs one io_context on a thread of its own; every call is posted to
// it and every completion is called from it.
//
// Expiry: every process sweeps. A registry (sorted set) holds, for each room and queue, a time
// no later than its next deadline; every 100 ms a process takes the due entries, advances each
// (idempotent: a second process finds nothing left to do) and records its next deadline.
// Long polls park in the process that took them and look again when a queue's name is
// published on the wake channel (by whichever process made jobs ready), or at their deadline.

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "core/hmac.h"
#include "core/lease_mac.h"
#include "store/backend.h"
#include "store/redis/client.h"
#include "store/redis/key_layout.h"

namespace anteroom::store::redis {

struct RedisBackendOptions {
  std::string url;  // redis://... or redis+cluster://...
  std::string key_prefix = "anteroom:";
  int64_t token_ttl_ms = 600'000;  // how long revocations are remembered
  std::string lease_secret = "anteroom-leases";
  bool redis_time = true;  // false: scripts take the time from the injected clock (tests)
  bool run_timer = true;   // false: nothing sweeps or times out until RunDue() (tests)
  int64_t timeout_ms = 3000;
  int64_t sweep_interval_ms = 100;
};

class RedisBackend final : public Backend {
 public:
  // Throws (at start-up) when the URL is wrong or Redis cannot be reached.
  RedisBackend(const Clock& clock, RedisBackendOptions options);
  ~RedisBackend() override;

  void PutRoom(std::string room, core::RoomPatch patch, Completion<core::RoomInfo> done) override;
  void GetRoom(std::string room, Completion<core::RoomInfo> done) override;
  void ListRooms(Completion<std::vector<core::RoomInfo>> done) override;
  void DeleteRoom(std::string room, Completion<core::RoomInfo> done) override;
  void Check(std::string room, std::string session, Completion<core::SessionView> done) override;
  void Touch(std::string room, std::string session, Completion<core::SessionView> done) override;
  void Leave(std::string room, std::string session, bool final,
             Completion<core::SessionView> done) override;
  void EndSession(std::string room, std::string session,
                  Completion<core::SessionView> done) override;
  void IsRevoked(std::string room, std::string session, uint64_t admission,
                 Completion<bool> done) override;

  void Push(std::string queue, std::vector<core::JobSpec> jobs,
            Completion<std::vector<core::PushResult>> done) override;
  void Fetch(std::string queue, core::FetchRequest request,
             Completion<core::FetchAnswer> done) override;
  void Ack(std::string queue, std::vector<std::string> leases,
           Completion<std::vector<core::LeaseOutcome>> done) override;
  void Nack(std::string queue, std::vector<std::string> leases, std::optional<int64_t> delay_ms,
            std::string error, Completion<std::vector<core::LeaseOutcome>> done) override;
  void Extend(std::string queue, std::vector<std::string> leases, int64_t lease_ms,
              Completion<std::vector<core::LeaseOutcome>> done) override;
  void Heartbeat(std::string queue, std::string worker, int64_t ttl_ms,
                 Completion<Done> done) override;
  void ReleaseWorker(std::string queue, std::string worker, Completion<size_t> done) override;
  void GetQueue(std::string queue, Completion<core::QueueStats> done) override;
  void ListQueues(Completion<std::vector<std::pair<std::string, core::QueueStats>>> done) override;
  void Inflight(std::string queue, std::optional<std::string> worker,
                Completion<std::vector<core::InflightJob>> done) override;
  void Dead(std::string queue, size_t limit, Completion<std::vector<core::DeadJob>> done) override;
  void RequeueDead(std::string queue, std::optional<std::vector<core::JobId>> ids,
                   Completion<size_t> done) override;
  void Cancel(std::string queue, core::JobId id, Completion<core::CancelOutcome> done) override;
  void SetPaused(std::string queue, bool paused, Completion<Done> done) override;

  // Sweeps whatever is due now and times out long polls past their deadline; returns when
  // done. For tests with run_timer = false (call from a thread other than the backend's).
  void RunDue();

  // The token secret shared through Redis: set once (SET NX) by the first process.
  static std::string SharedSecret(const std::string& url, const std::string& key_prefix,
                                  const std::string& candidate);

 private:
  struct Waiter;
  struct Polls;
  using ReplyFn = std::function<void(OpResult<Reply>)>;

  // Runs `fn` on the backend's thread.
  template <typename Fn>
  void Post(Fn&& fn) {
    boost::asio::post(io_, std::forward<Fn>(fn));
  }
  std::string NowArg() const;
  // One script call; `k` gets the reply after the status word was checked (errors mapped).
  void RoomScript(const std::string& room, std::vector<std::string> argv, ReplyFn k);
  void QueueScript(const std::string& queue, std::vector<std::string> argv, ReplyFn k);
  void AfterScript(char kind, const std::string& name, const Reply& reply);
  void Register(const std::string& member, int64_t when);
  void Publish(const std::string& queue);

  // Leases: "<id>.<delivery>.<tag>", signed per queue.
  std::string LeaseFor(const std::string& queue, core::JobId id, uint64_t delivery);
  bool ParseLease(const std::string& queue, std::string_view lease, core::JobId& id,
                  uint64_t& delivery);
  // Valid leases as (id, delivery, extra) ARGV triples; outcome slots for the invalid ones.
  std::vector<std::string> LeaseArgs(const std::string& queue,
                                     const std::vector<std::string>& leases,
                                     std::vector<int>& slots, bool with_jitter);
  static std::vector<core::LeaseOutcome> MergeOutcomes(const std::vector<int>& slots,
                                                       const Reply& outcomes);
  void LeaseOp(const char* op, std::string queue, std::vector<std::string> leases,
               std::vector<std::string> tail, bool jitter,
               Completion<std::vector<core::LeaseOutcome>> done);
  std::vector<core::Delivery> Deliveries(const std::string& queue, const Reply& jobs);

  // Long polls (redis_queues.cc).
  void Park(const std::string& queue, core::FetchRequest request, core::FetchAnswer answer,
            int64_t deadline, Completion<core::FetchAnswer> done);
  void Wake(const std::string& queue);
  void ServeWaiters(const std::string& queue);
  void ExpireWaiters(int64_t now);

  // Sweeping (redis_backend.cc).
  void Sweep(std::function<void()> done);
  void SweepOne(const std::string& member, std::function<void()> done);
  void ArmSweeper();

  const Clock& clock_;
  RedisBackendOptions options_;
  KeyLayout keys_;
  core::Hmac lease_key_;
  core::LeaseMac lease_mac_;  // used on the backend's thread only
  Script room_script_, queue_script_, sweep_script_;

  boost::asio::io_context io_;
  std::unique_ptr<Client> client_;
  std::shared_ptr<Connection> subscriber_;
  boost::asio::steady_timer sweep_timer_;
  std::mt19937_64 rng_{std::random_device{}()};  // backoff jitter for nacks
  int sweep_ticks_ = 0;
  bool sweeping_ = false;
  std::unordered_map<std::string, std::unique_ptr<Polls>> polls_;
  std::thread thread_;
};

}  // namespace anteroom::store::redis
