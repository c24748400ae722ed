#pragma once
// The Redis backend: rooms and queues live in Redis (one server or a Redis Cluster), so any
// number of anteroom processes serve the same ones. Each operation is one Lua script on the
// node owning the room's or queue's hash tag (src/store/redis/lua/), run atomically by Redis
// with Redis's own clock (TIME), so processes with skewed clocks agree.
//
// Threads: the backend has one shard (a Redis client, a lease signer) per io_context it is
// given, normally the HTTP server's: a call made on one of those threads is sent from it and
// answered on it, with no hand-off between threads; a call from any other thread is posted to
// a shard. Without contexts it runs one of its own on a thread of its own. Long polls, the
// sweeper and the Pub/Sub subscription live on the first shard (the home shard).
//
// Expiry: every process sweeps. A registry (sorted set) holds, for each room and queue, a time
// no later than its next deadline; every 100 ms a process takes the due entries, advances each
// (idempotent: a second process finds nothing left to do) and records its next deadline.
// Long polls park in the process that took them and look again when a queue's name is
// published on the wake channel (by whichever process made jobs ready), or at their deadline.

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "common/wire_errors.h"
#include "core/draw.h"
#include "core/hmac.h"
#include "core/lease_mac.h"
#include "store/backend.h"
#include "store/redis/cluster_client.h"
#include "store/redis/key_layout.h"
#include "store/redis/redis_tls.h"
#include "store/redis/redis_url.h"
#include "store/redis/script_replies.h"
#include "store/redis/shared_values.h"

namespace anteroom::store::redis {

struct RedisBackendOptions {
  std::string url;         // redis://... or redis+cluster://... (rediss: TLS)
  RedisTlsFiles tls = {};  // with rediss: the CA to trust, the client certificate (redis_tls.h)
  std::string key_prefix = "anteroom:";
  int64_t token_ttl_ms = 600'000;  // how long revocations are remembered
  std::string lease_secret = "anteroom-leases";
  bool redis_time = true;  // false: scripts take the time from the injected clock (tests)
  bool run_timer = true;   // false: nothing sweeps or times out until RunDue() (tests)
  int64_t timeout_ms = 3000;
  int64_t sweep_interval_ms = 100;
  // Caps on what clients create (0: none), as the memory backend's. Counted in Redis (a set of
  // names per kind), checked before a name this thread has not seen exist: processes sharing
  // the Redis may overshoot a cap by the creations they make at the same moment.
  size_t max_rooms = 0;
  size_t max_queues = 0;
  // The threads to run on (e.g. the HTTP server's); empty: a thread of the backend's own.
  // They must outlive the backend; they need not run yet.
  std::vector<boost::asio::io_context*> contexts = {};
  // Clients each room keeps per-client state for (as core::Room::set_max_clients).
  size_t max_clients_per_room = core::kDefaultMaxClientsPerRoom;
  // How often the values given to WatchShared are checked (also after each reconnection).
  int64_t shared_check_ms = 2000;
  // Positions of a draw published per script call (room.lua `draw`): the longest such a call
  // holds Redis is about this many moves into the line, ~6-12 us each (docs/benchmarks.md, "The
  // draw on Redis"). A sweep publishes one chunk of each draw it finds and, while any is left,
  // the next sweep comes at once.
  size_t draw_chunk = 5'000;
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
  using Backend::Check;
  void Check(std::string room, std::string session, core::Arrival arrival,
             Completion<core::SessionView> done) override;
  void Touch(std::string room, std::string session, Completion<core::SessionView> done) override;
  void Leave(std::string room, std::string session, bool final,
             Completion<core::SessionView> done) override;
  void EndSession(std::string room, std::string session,
                  Completion<core::SessionView> done) override;
  void IsRevoked(std::string room, std::string session, uint64_t admission,
                 Completion<bool> done) override;
  void AdmissionHolder(std::string room, uint64_t incarnation, uint64_t admission,
                       Completion<std::optional<std::string>> done) override;
  void ReadLine(std::string room, uint64_t since, Completion<core::LineView> done) override;
  void PutEvent(std::string room, std::string id, core::EventSpec spec,
                Completion<core::RoomEvent> done) override;
  void ListEvents(std::string room, Completion<std::vector<core::RoomEvent>> done) override;
  void DeleteEvent(std::string room, std::string id, Completion<core::RoomEvent> done) override;
  // Passes: minted and hashed here, kept and redeemed by room.lua (KEYS[15]).
  void MintPasses(std::string room, core::PassMint mint,
                  Completion<std::vector<core::MintedPass>> done) override;
  void ListPasses(std::string room, Completion<std::vector<core::RoomPass>> done) override;
  void RevokePasses(std::string room, std::optional<std::string> id,
                    Completion<int64_t> done) override;
  void Present(std::string room, std::vector<std::string> sessions,
               Completion<std::vector<core::SessionView>> done) override;

  void Push(std::string queue, std::vector<core::JobSpec> jobs,
            Completion<std::vector<core::PushResult>> done) override;
  void Fetch(std::string queue, core::FetchRequest request,
             Completion<core::FetchAnswer> done) override;
  using Backend::Ack;
  void Ack(std::string queue, std::vector<std::string> leases, std::vector<std::string> results,
           Completion<std::vector<core::LeaseOutcome>> done) override;
  void Snooze(std::string queue, std::vector<std::string> leases, int64_t delay_ms,
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
  void GetJob(std::string queue, core::JobId id, Completion<core::JobView> done) override;
  void GetJobDependencies(std::string queue, core::JobId id,
                          Completion<std::vector<core::DependencyView>> done) override;
  void CreateBatch(std::string queue, std::string id, core::BatchSpec spec,
                   Completion<core::BatchView> done) override;
  void SealBatch(std::string queue, std::string id, Completion<core::BatchView> done) override;
  void GetBatch(std::string queue, std::string id, Completion<core::BatchView> done) override;
  void SetProgress(std::string queue, std::string lease, std::string progress,
                   Completion<core::LeaseOutcome> done) override;
  void AppendJobLog(std::string queue, std::string lease, std::vector<std::string> lines,
                    Completion<core::LeaseOutcome> done) override;
  void SetPaused(std::string queue, bool paused, Completion<Done> done) override;
  void SetQueueKey(std::string queue, std::optional<std::string> digest,
                   Completion<Done> done) override;
  void GetQueueKey(std::string queue, Completion<std::optional<std::string>> done) override;
  void SetQueueSettings(std::string queue, core::QueueSettings settings,
                        Completion<Done> done) override;
  void GetQueueSettings(std::string queue, Completion<core::QueueSettings> done) override;
  void PutSchedule(std::string id, core::ScheduleSpec spec,
                   Completion<core::Schedule> done) override;
  void GetSchedule(std::string id, Completion<core::Schedule> done) override;
  void ListSchedules(Completion<std::vector<core::Schedule>> done) override;
  void PauseSchedule(std::string id, bool paused, Completion<core::Schedule> done) override;
  void DeleteSchedule(std::string id, Completion<core::Schedule> done) override;
  void ReadEvents(std::optional<EventId> after, size_t max, Completion<EventRead> done) override;
  // Called on the home shard's thread when any process told the feed something.
  void WatchEvents(std::function<void()> fn) override;
  // A hash per kind (KeyLayout::Config).
  void PutConfig(ConfigEntry entry, Completion<Done> done) override;
  void DeleteConfig(std::string kind, std::string name, Completion<bool> done) override;
  void ListConfig(std::string kind, Completion<std::vector<ConfigEntry>> done) override;
  // A string with a TTL names the holder (role_script_); the position beside it.
  void HoldRole(std::string role, std::string holder, int64_t ttl_ms,
                Completion<std::optional<std::string>> done) override;
  void SaveRolePosition(std::string role, std::string holder, std::string position,
                        Completion<bool> done) override;
  void CheckHealth(Completion<HealthReport> done) override;

  // Sweeps whatever is due now and times out long polls past their deadline; returns when
  // done. For tests with run_timer = false (call from a thread other than the backend's).
  void RunDue();

  // Keeps `value` (the token secret, a signing key: taken at start-up by ClaimShared) in Redis
  // while the process runs: put back when missing, and while Redis holds another value
  // CheckHealth reports it (shared_values.h). Any thread; before or after the threads run.
  void WatchShared(SharedValue value);

  // With rediss://: the TLS context (MakeRedisTlsContext: a renewed client certificate, another
  // CA) that the handshakes starting from now on use; open connections keep their sessions.
  // False, and nothing changes, for redis://. Any thread.
  bool UseTls(std::shared_ptr<boost::asio::ssl::context> context);
  bool uses_tls() const { return tls_ != nullptr; }

  // How ReadLine got the lines it answered: whole (the room's snapshot) or as the changes since
  // the line this process kept (deltas), and how often deltas were refused here (then read
  // whole again). Any thread.
  struct LineReads {
    uint64_t full = 0;
    uint64_t delta = 0;
    uint64_t fallback = 0;
  };
  LineReads line_reads() const {
    return {line_full_.load(std::memory_order_relaxed), line_delta_.load(std::memory_order_relaxed),
            line_fallback_.load(std::memory_order_relaxed)};
  }

 private:
  struct Waiter;
  struct Polls;
  using ReplyFn = std::function<void(OpResult<Reply>)>;

  // A room's line as of (incarnation, version), rebuilt by ReadLine.
  struct LineCache {
    uint64_t incarnation = 0;
    uint64_t version = 0;
    core::IdList line;
    std::chrono::steady_clock::time_point used;
  };
  // Takes `c` to `version` by the entries of room.lua's delta log (KEYS[11]); false, with `c`
  // unchanged, when they do not chain exactly from c's version to `version` or name a session
  // the line does not hold.
  static bool ApplyLineDeltas(LineCache& c, const std::vector<std::string>& entries,
                              uint64_t incarnation, uint64_t version);

  // What one thread uses, only on that thread.
  struct Shard {
    Shard(boost::asio::io_context& context, const RedisUrl& url, int64_t timeout_ms,
          const std::shared_ptr<RedisTlsContext>& tls, const core::Hmac& lease_key,
          const core::DrawSeed& entropy_seed)
        : io(context),
          client(std::make_unique<ClusterClient>(context, url, timeout_ms, tls)),
          lease_mac(lease_key),
          entropy(entropy_seed) {}
    boost::asio::io_context& io;
    std::unique_ptr<ClusterClient> client;
    core::LeaseMac lease_mac;
    std::mt19937_64 rng{std::random_device{}()};  // backoff jitter for nacks
    // What every room script call carries as ARGV[4] (room.lua ENTROPY: a draw's seed, the
    // random method's picks): 32 bytes of a ChaCha20 keystream keyed once from the OS CSPRNG
    // (so a call costs no system call), in hex.
    core::DrawStream entropy;
    // Rooms ('r' + name) and queues ('q' + name) seen to exist: no cap check for them. Bounded:
    // cleared when it grows past kKnownNames.
    std::unordered_set<std::string> known;
    // The last line ReadLine answered per room, to apply the next deltas to. A room's reads
    // normally stay on one shard (the live hub's thread), but any shard keeps its own.
    // Bounded: rooms not read for kLineIdleMs are dropped, all of them past kLineRooms.
    std::unordered_map<std::string, LineCache> lines;
    std::chrono::steady_clock::time_point lines_swept{};
  };
  static constexpr size_t kKnownNames = 100'000;
  static constexpr size_t kDrawsKept = 64;  // draws_ beyond this are dropped (recomputed if needed)
  static constexpr size_t kLineRooms = 10'000;
  static constexpr int64_t kLineIdleMs = 60'000;
  // ReadLine on shard `s`; with `deltas` false the snapshot is asked for whatever is kept.
  void ReadLineOn(Shard& s, std::string room, uint64_t since, bool deltas,
                  Completion<core::LineView> done);

  // Calls k(nullopt) when `name` of `kind` ('r', 'q') exists or fits under its cap, else
  // k(the refusal's message). After a creation, Created() counts the name, then calls `then`.
  void WithinCap(Shard& s, char kind, const std::string& name,
                 std::function<void(std::optional<std::string>)> k);
  void Created(Shard& s, char kind, const std::string& name, std::function<void()> then);
  // A name that no longer counts (a queue's key removed, never pushed to): uncounted, then
  // `then`. Other shards may still know it: they skip its cap check, as after DeleteRoom.
  void Uncounted(Shard& s, char kind, const std::string& name, std::function<void()> then);

  // Runs fn(shard) now when called on a shard's thread, else on the next shard's thread.
  template <typename Fn>
  void Post(Fn&& fn) {
    for (auto& shard : shards_) {
      if (shard->io.get_executor().running_in_this_thread()) return fn(*shard);
    }
    Shard& shard = *shards_[next_shard_++ % shards_.size()];
    boost::asio::post(shard.io, [&shard, fn = std::forward<Fn>(fn)]() mutable { fn(shard); });
  }
  Shard& home() { return *shards_.front(); }
  std::string NowArg() const;
  static std::string Entropy(Shard& s);
  // One script call; `k` gets the reply after the status word was checked (errors mapped).
  void RoomScript(Shard& s, const std::string& room, std::vector<std::string> argv, ReplyFn k);
  // A room operation on one session answered with its view: check, touch, leave, evict
  // (room.lua `op` with the session, then `more`).
  void SessionOp(std::string room, std::string op, std::string session,
                 std::vector<std::string> more, Completion<core::SessionView> done);
  void QueueScript(Shard& s, const std::string& queue, std::vector<std::string> argv, ReplyFn k);
  void AfterScript(Shard& s, char kind, const std::string& name, const Reply& reply);
  void Register(Shard& s, const std::string& member, int64_t when);
  void Publish(Shard& s, const std::string& queue);

  // Reads every registered room ('r') or queue ('q') at once: read(shard, name, answer), where
  // answer(nullopt) leaves the name out (gone, or not to be listed). Answers (name, item)
  // sorted by name, or the first failure.
  template <typename Item>
  using Answer = std::function<void(OpResult<std::optional<Item>>)>;
  template <typename Item, typename Read>
  void ReadRegistered(Shard& s, char kind, Read read,
                      Completion<std::vector<std::pair<std::string, Item>>> done) {
    using List = std::vector<std::pair<std::string, Item>>;
    s.client->Call(
        keys_.Registry(), {"ZRANGE", keys_.Registry(), "0", "-1"}, [&s, kind, read, done](Reply r) {
          if (r.failed()) return done({OpStatus::kUnavailable, wire::RedisUnavailable(r.str)});
          struct Gather {
            List items;
            size_t left = 0;
            std::optional<OpResult<List>> failure;
          };
          auto g = std::make_shared<Gather>();
          std::vector<std::string> names;
          for (const Reply& m : r.elements) {
            if (m.str.size() > 2 && m.str[0] == kind && m.str[1] == ':')
              names.push_back(m.str.substr(2));
          }
          g->left = names.size();
          auto finish = [g, done] {
            if (g->failure) return done(std::move(*g->failure));
            std::sort(g->items.begin(), g->items.end(),
                      [](const auto& a, const auto& b) { return a.first < b.first; });
            done(std::move(g->items));
          };
          if (names.empty()) return finish();
          for (const std::string& name : names) {
            read(s, name, Answer<Item>([g, name, finish](OpResult<std::optional<Item>> item) {
                   if (!item.ok()) {
                     g->failure.emplace(item.status(), item.message());
                   } else if (*item) {
                     g->items.emplace_back(name, std::move(**item));
                   }
                   if (--g->left == 0) finish();
                 }));
          }
        });
  }

  // Leases: "<id>.<delivery>.<tag>", signed per queue.
  static std::string LeaseFor(Shard& s, const std::string& queue, core::JobId id,
                              uint64_t delivery);
  static bool ParseLease(Shard& s, const std::string& queue, std::string_view lease,
                         core::JobId& id, uint64_t& delivery);
  // Valid leases as (id, delivery[, jitter]) ARGV; outcome slots for the invalid ones.
  static std::vector<std::string> LeaseArgs(Shard& s, const std::string& queue,
                                            const std::vector<std::string>& leases,
                                            std::vector<int>& slots, bool triples);
  // The outcome of each lease: the script's (`outcomes`, one per valid lease) or invalid.
  static std::vector<core::LeaseOutcome> MergeOutcomes(
      const std::vector<int>& slots, const std::vector<core::LeaseOutcome>& outcomes);
  static std::vector<std::string> SettingsArgs(const core::QueueSettings& settings);
  // A job's eight push arguments (queue.lua op_push), appended to `argv`: a push's jobs and a
  // batch's callbacks alike.
  static void JobArgs(const core::JobSpec& job, std::vector<std::string>& argv);
  // A script that answers a batch's view (batchseal, batch) or false for none (kUnknownBatch).
  void BatchOp(const char* op, std::string queue, std::string id, Completion<core::BatchView> done);
  // `each`: empty, or one argument per lease, of which those of the valid leases go after
  // `tail`.
  void LeaseOp(const char* op, std::string queue, std::vector<std::string> leases,
               std::vector<std::string> tail, Completion<std::vector<core::LeaseOutcome>> done,
               std::vector<std::string> each = {});
  // A report of one lease's job (progress, joblog): its id and delivery, then `args`.
  void ReportOp(const char* op, std::string queue, std::string lease, std::vector<std::string> args,
                Completion<core::LeaseOutcome> done);
  // The largest job id queue.lua can name (2^53 - 1, its NEVER).
  static constexpr core::JobId kMaxScriptJobId = (core::JobId{1} << 53) - 1;
  // The jobs a fetch leased, each with its lease signed (and its wait observed).
  static std::vector<core::Delivery> Deliveries(Shard& s, const std::string& queue,
                                                std::vector<LeasedJob> jobs);

  // Long polls (redis_queues.cc), on the home shard.
  // `retry_in`: ms until a job held back by the queue's limits may go (0: none is).
  void Park(const std::string& queue, core::FetchRequest request, core::FetchAnswer answer,
            int64_t deadline, int64_t retry_in, Completion<core::FetchAnswer> done);
  // The waiter's timer: at its deadline, or sooner (`retry_in` > 0) to look again then.
  void ArmWaiter(const std::shared_ptr<Waiter>& w, int64_t retry_in);
  void Wake(const std::string& queue);
  // Wake for every queue with long polls parked here (the sweeper once a second, a reconnection).
  void WakeAll();
  void ServeWaiters(const std::string& queue);
  void Served(const std::string& queue, const std::shared_ptr<Waiter>& w, OpResult<Reply> r);
  void ExpireWaiters(int64_t now);
  void DropWaiter(const std::shared_ptr<Waiter>& w);
  // What a fetch answers when its client hung up; GiveBack returns what was leased for it.
  static OpResult<core::FetchAnswer> HungUp();
  void GiveBack(Shard& s, const std::string& queue, const std::vector<core::Delivery>& jobs);

  // Schedules (redis_schedules.cc). A schedule lives in its queue's keys (queue.lua); the
  // index (KeyLayout::ScheduleIndex) finds its queue by id. The core's timing is computed here,
  // and every write names the record it was computed from, so a change that lost a race with
  // another process's is read and computed again (up to kScheduleTries times).
  static constexpr int kScheduleTries = 8;
  // The queue the index names for schedule `id` (which may no longer hold it), and how many
  // entries the index has.
  struct IndexEntry {
    std::optional<std::string> queue;
    int64_t count = 0;
  };
  void LookUpSchedule(Shard& s, const std::string& id, std::function<void(OpResult<IndexEntry>)> k);
  // Schedule `id` as queue `queue` keeps it (nullopt: it keeps none), and the script's time.
  struct ScheduleAt {
    int64_t now_ms = 0;
    std::optional<StoredSchedule> stored;
  };
  void ReadSchedule(Shard& s, const std::string& queue, const std::string& id,
                    std::function<void(OpResult<ScheduleAt>)> k);
  // What a put or a pause makes of the schedule as it stands (nullopt: none) at `now`: the
  // schedule to write, nullopt to leave it as it is, or a refusal.
  using ScheduleChange = std::function<OpResult<std::optional<core::Schedule>>(
      const std::optional<core::Schedule>& before, int64_t now)>;
  void ChangeSchedule(Shard& s, const std::string& queue, const std::string& id,
                      ScheduleChange change, int tries, Completion<core::Schedule> done);
  // Removes the index's entry for `id` if it still names `queue`; then `then`.
  void DropIndexEntry(Shard& s, const std::string& id, const std::string& queue,
                      std::function<void()> then);
  // The sweeper, on the home shard: fires queue `queue`'s due schedules (queue.lua `advance`
  // answered them) one after another, by id as the embedded backend does; `done` gets the
  // answer of the last firing that ran (its next deadline is the queue's), or nullopt.
  void FireDue(const std::string& queue, ScheduleRead due,
               std::function<void(std::optional<Reply>)> done);

  // Sweeping (redis_backend.cc), on the home shard.
  void Sweep(std::function<void()> done);
  void SweepOne(const std::string& member, std::function<void()> done);
  void ArmSweeper();
  // The draws being published (room.lua `draw`), on the home shard: the arguments of the next
  // chunk of `room`'s draw as `state` says it stands. A shuffled draw's order is computed here,
  // with core::FisherYates over its seed (as the embedded backend's): deterministic, so any
  // process computes the same ranks and may send any chunk; the script takes a chunk only at
  // the count already published. Each process keeps the shuffle it computed per room (so a
  // chunk costs its own steps) and drops it once the draw is over or another one is on.
  std::vector<std::string> DrawChunkArgs(const std::string& room, const DrawState& state);
  struct DrawWork {
    std::string event;
    core::DrawSeed seed{};
    core::FisherYates shuffle;
  };
  std::unordered_map<std::string, DrawWork> draws_;
  bool drawing_ = false;  // the last sweep published a chunk and left more: sweep again at once

  const Clock& clock_;
  RedisBackendOptions options_;
  KeyLayout keys_;
  core::Hmac lease_key_;
  Script room_script_, queue_script_, sweep_script_, feed_script_, hold_role_script_,
      save_role_script_, index_drop_script_;
  bool feed_ = false;  // lifecycle events are kept (a single Redis: room.lua's KEYS 17, 18)
  std::mutex watchers_mu_;
  std::vector<std::function<void()>> watchers_;
  void TellWatchers();

  std::unique_ptr<boost::asio::io_context> own_io_;  // without options.contexts
  std::shared_ptr<RedisTlsContext> tls_;             // every connection's; null for redis://
  std::thread own_thread_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<size_t> next_shard_{0};
  std::atomic<uint64_t> line_full_{0}, line_delta_{0}, line_fallback_{0};

  // Home shard only.
  std::shared_ptr<Connection> subscriber_;
  std::unique_ptr<boost::asio::steady_timer> sweep_timer_;
  std::unique_ptr<SharedValueWatch> shared_watch_;
  int sweep_ticks_ = 0;
  bool sweeping_ = false;
  std::unordered_map<std::string, std::unique_ptr<Polls>> polls_;
};

}  // namespace anteroom::store::redis
