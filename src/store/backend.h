#pragma once
// The one engine interface for rooms and queues. There are two backends, and three ways to run:
//  - embedded: MemoryBackend (memory/: the in-memory state engine over core/, the timer) is
//    the backend; on its own it keeps nothing across restarts, and with the log (log/:
//    EmbeddedStore attaches a LogJournal as the engine's ChangeSink, and adds snapshots and
//    recovery) it is durable. log/ is not a backend of its own: it makes the memory one durable;
//  - redis: RedisBackend (redis/: Lua scripts over Redis structures, shared by processes).
// tests/conformance runs the same suite against each (memory, memory + log, Redis).
//
// Calls are asynchronous: each takes a completion that receives an OpResult exactly once,
// possibly before the call returns (the memory backend) or later from another thread (a
// network backend). Completions must not block. Names are validated by the caller.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/histogram.h"
#include "common/op_status.h"
#include "core/job_schedule.h"
#include "core/queue_types.h"
#include "core/room_types.h"
#include "store/lifecycle_event.h"

namespace anteroom::store {

template <typename T>
using Completion = std::function<void(OpResult<T>)>;

// The length of a queue key's digest (SHA-256): the only one SetQueueKey takes (others are
// refused with kInvalidArgument) and the one a stored digest always has.
inline constexpr size_t kQueueKeyDigestBytes = 32;

// Whether changes can be made now (GET /healthz, /readyz). Reads may still work when they
// cannot: a full disk refuses changes, not reads.
struct HealthReport {
  bool changes_ok = true;
  std::string problem;  // why not, when !changes_ok
};

// A named setting that belongs to no room or queue (a webhook; `kind` says which), kept as
// durably as rooms and queues are and shared by the processes of a backend. `value` is what the
// HTTP layer validated and wrote (JSON text): the backend keeps it, never reads it.
struct ConfigEntry {
  std::string kind;
  std::string name;
  std::string value;
  bool operator==(const ConfigEntry&) const = default;
};
inline constexpr size_t kMaxConfigValueBytes = 64 * 1024;

// Each backend, where it hands out jobs and takes acks (never where it replays them), tells
// the process's EngineMetrics how long they waited (ready -> fetched) and ran (fetched ->
// acked), by its own clock.
inline void ObserveFetched(const std::vector<core::Delivery>& jobs, int64_t now_ms) {
  for (const core::Delivery& d : jobs) {
    if (d.ready_ms > 0) ProcessEngineMetrics().job_wait.ObserveMs(now_ms - d.ready_ms);
  }
}
inline void ObserveRan(int64_t ran_ms) { ProcessEngineMetrics().job_run.ObserveMs(ran_ms); }
// Likewise where a room admits (never in a replay): how long the session waited in line, when
// the room knows (a session saved before join times were kept does not say).
inline void ObserveRoomWait(int64_t waited_ms) {
  if (waited_ms >= 0) ProcessEngineMetrics().room_wait.ObserveMs(waited_ms);
}

class Backend {
 public:
  virtual ~Backend() = default;

  // Creates (patch.capacity required) or changes a room. Answers the room as GetRoom does.
  virtual void PutRoom(std::string room, core::RoomPatch patch,
                       Completion<core::RoomInfo> done) = 0;
  virtual void GetRoom(std::string room, Completion<core::RoomInfo> done) = 0;
  virtual void ListRooms(Completion<std::vector<core::RoomInfo>> done) = 0;
  // Answers the room as it was just before it was deleted.
  virtual void DeleteRoom(std::string room, Completion<core::RoomInfo> done) = 0;

  // Joins (a session the room does not know) or checks in. A join may be refused by the room's
  // challenge (kChallengeRequired) or its per-client limits (kRateLimited, retry_after_ms set).
  virtual void Check(std::string room, std::string session, core::Arrival arrival,
                     Completion<core::SessionView> done) = 0;
  // With no client and no proof (tools and tests): no per-client limit applies.
  void Check(std::string room, std::string session, Completion<core::SessionView> done) {
    Check(std::move(room), std::move(session), core::Arrival{}, std::move(done));
  }
  virtual void Touch(std::string room, std::string session, Completion<core::SessionView> done) = 0;
  virtual void Leave(std::string room, std::string session, bool final,
                     Completion<core::SessionView> done) = 0;
  virtual void EndSession(std::string room, std::string session,
                          Completion<core::SessionView> done) = 0;
  // Whether tokens of this admission were revoked (final leave, eviction, slot released).
  virtual void IsRevoked(std::string room, std::string session, uint64_t admission,
                         Completion<bool> done) = 0;
  // The session holding admission `admission` of incarnation `incarnation` of the room (what
  // a token names); nullopt when nobody holds it any more (its tokens are revoked) or the room
  // was deleted and created again since (another incarnation).
  virtual void AdmissionHolder(std::string room, uint64_t incarnation, uint64_t admission,
                               Completion<std::optional<std::string>> done) = 0;

  // ---- launch day: a room's scheduled events (core/schedule.h says what may change).

  // Adds or changes event `id`; answers it as stored (kInvalidArgument, kConflict: refused,
  // nothing changed).
  virtual void PutEvent(std::string room, std::string id, core::EventSpec spec,
                        Completion<core::RoomEvent> done) = 0;
  // Every event of the room, in time order.
  virtual void ListEvents(std::string room, Completion<std::vector<core::RoomEvent>> done) = 0;
  // Cancels it (kNotFound when the room has no such event); answers it as it was.
  virtual void DeleteEvent(std::string room, std::string id, Completion<core::RoomEvent> done) = 0;

  // ---- passes (core/room_pass.h)

  // Mints mint.count passes: each a random code (answered this once) kept as its digest.
  virtual void MintPasses(std::string room, core::PassMint mint,
                          Completion<std::vector<core::MintedPass>> done) = 0;
  virtual void ListPasses(std::string room, Completion<std::vector<core::RoomPass>> done) = 0;
  // One (kNotFound when unknown) or, with nullopt, every pass; answers how many went.
  virtual void RevokePasses(std::string room, std::optional<std::string> id,
                            Completion<int64_t> done) = 0;

  // ---- live channels (server/live_hub.h): everyone's place from one read per tick, not one
  // lookup per connected session per change.

  // The counts, and the line in order when its version differs from `since`.
  virtual void ReadLine(std::string room, uint64_t since, Completion<core::LineView> done) = 0;
  // A check-in of each known session by its open live connection: grace ends, an admission is
  // claimed; unknown sessions are never joined. A view per id, in order (gone when unknown).
  virtual void Present(std::string room, std::vector<std::string> sessions,
                       Completion<std::vector<core::SessionView>> done) = 0;

  // ---- queues. A queue is created by its first push; reads of a queue nobody pushed to
  // answer empty lists and zero counts, so workers may start before producers.

  // All or nothing: every job is accepted or none is.
  virtual void Push(std::string queue, std::vector<core::JobSpec> jobs,
                    Completion<std::vector<core::PushResult>> done) = 0;
  // Acks request.ack, then answers at once when a job is ready; otherwise waits up to
  // request.wait_ms for one (long poll), long pollers of a queue being served in the order
  // they started waiting.
  virtual void Fetch(std::string queue, core::FetchRequest request,
                     Completion<core::FetchAnswer> done) = 0;
  // `results` is empty, or one per lease: the JSON text the job's worker gave as its result
  // ("": none, at most core::kMaxResultBytes), kept with the acked job for lookup.
  virtual void Ack(std::string queue, std::vector<std::string> leases,
                   std::vector<std::string> results,
                   Completion<std::vector<core::LeaseOutcome>> done) = 0;
  void Ack(std::string queue, std::vector<std::string> leases,
           Completion<std::vector<core::LeaseOutcome>> done) {
    Ack(std::move(queue), std::move(leases), {}, std::move(done));
  }
  virtual void Nack(std::string queue, std::vector<std::string> leases,
                    std::optional<int64_t> delay_ms, std::string error,
                    Completion<std::vector<core::LeaseOutcome>> done) = 0;
  // A worker told "slow down" upstream (a 429): each job goes back to wait `delay_ms` without
  // using up its attempt, and holds back its group (an ungrouped job: the whole queue) as long.
  virtual void Snooze(std::string queue, std::vector<std::string> leases, int64_t delay_ms,
                      Completion<std::vector<core::LeaseOutcome>> done) = 0;
  virtual void Extend(std::string queue, std::vector<std::string> leases, int64_t lease_ms,
                      Completion<std::vector<core::LeaseOutcome>> done) = 0;
  virtual void Heartbeat(std::string queue, std::string worker, int64_t ttl_ms,
                         Completion<Done> done) = 0;
  virtual void ReleaseWorker(std::string queue, std::string worker, Completion<size_t> done) = 0;
  virtual void GetQueue(std::string queue, Completion<core::QueueStats> done) = 0;
  virtual void ListQueues(
      Completion<std::vector<std::pair<std::string, core::QueueStats>>> done) = 0;
  virtual void Inflight(std::string queue, std::optional<std::string> worker,
                        Completion<std::vector<core::InflightJob>> done) = 0;
  virtual void Dead(std::string queue, size_t limit,
                    Completion<std::vector<core::DeadJob>> done) = 0;
  virtual void RequeueDead(std::string queue, std::optional<std::vector<core::JobId>> ids,
                           Completion<size_t> done) = 0;
  virtual void Cancel(std::string queue, core::JobId id, Completion<core::CancelOutcome> done) = 0;
  // Job `id` wherever it is (kUnknownJob: never pushed, or finished and no longer kept).
  virtual void GetJob(std::string queue, core::JobId id, Completion<core::JobView> done) = 0;
  // Batches (core::BatchSpec). Create: kConflict when `id` is taken, kLimitReached past
  // core::kMaxOpenBatches (and creates the queue, within --max-queues). Seal and get:
  // kUnknownBatch when there is no such batch (never made, or settled and no longer kept). A
  // push naming a batch is refused whole when the batch is unknown (kUnknownBatch) or sealed
  // (kConflict).
  virtual void CreateBatch(std::string queue, std::string id, core::BatchSpec spec,
                           Completion<core::BatchView> done) = 0;
  virtual void SealBatch(std::string queue, std::string id, Completion<core::BatchView> done) = 0;
  virtual void GetBatch(std::string queue, std::string id, Completion<core::BatchView> done) = 0;
  // What became of job `id`'s dependencies, in the order it named them (kUnknownJob as GetJob).
  virtual void GetJobDependencies(std::string queue, core::JobId id,
                                  Completion<std::vector<core::DependencyView>> done) = 0;
  // The job of a current lease reports how far it got: `progress` (JSON text, at most
  // core::kMaxProgressBytes) replaces the last one. Answers kOk, kLeaseLost or kInvalidLease.
  virtual void SetProgress(std::string queue, std::string lease, std::string progress,
                           Completion<core::LeaseOutcome> done) = 0;
  // The job of a current lease appends `lines` to its log (each cut to core::kMaxLogLineBytes;
  // the last core::kKeptLogLines are kept).
  virtual void AppendJobLog(std::string queue, std::string lease, std::vector<std::string> lines,
                            Completion<core::LeaseOutcome> done) = 0;
  virtual void SetPaused(std::string queue, bool paused, Completion<Done> done) = 0;
  // A queue's own key (docs/security.md): `digest` is the SHA-256 (32 raw bytes) of the key
  // that opens this queue's data routes, kept durably and shared by every process; nullopt
  // removes it. Setting one creates the queue (within --max-queues: kLimitReached); a queue
  // with a key is never forgotten as empty.
  virtual void SetQueueKey(std::string queue, std::optional<std::string> digest,
                           Completion<Done> done) = 0;
  // The digest set for `queue`; nullopt when none is (or there is no such queue).
  virtual void GetQueueKey(std::string queue, Completion<std::optional<std::string>> done) = 0;
  // A queue's settings (limits, fairness), durably, shared by every process, applied from the
  // next call on. Setting any creates the queue (within --max-queues: kLimitReached); a queue
  // whose settings are not the defaults is never forgotten as empty.
  virtual void SetQueueSettings(std::string queue, core::QueueSettings settings,
                                Completion<Done> done) = 0;
  // The defaults for a queue nobody set them for (or that does not exist).
  virtual void GetQueueSettings(std::string queue, Completion<core::QueueSettings> done) = 0;

  // ---- schedules of repeatable jobs (core/job_schedule.h). A schedule lives with its queue
  // (its firings and its pushes are one atomic step there), and its id is unique across
  // queues. Each backend fires due schedules by itself (the memory backend's timer, every Redis
  // process's sweeper), each run key at most once.

  // Creates or changes schedule `id` (kConflict: it belongs to another queue; kLimitReached:
  // core::kMaxSchedules exist, or its queue would be one over --max-queues). Answers it stored.
  virtual void PutSchedule(std::string id, core::ScheduleSpec spec,
                           Completion<core::Schedule> done) = 0;
  // kUnknownSchedule when there is no such schedule (here and below).
  virtual void GetSchedule(std::string id, Completion<core::Schedule> done) = 0;
  // Every schedule, by id.
  virtual void ListSchedules(Completion<std::vector<core::Schedule>> done) = 0;
  virtual void PauseSchedule(std::string id, bool paused, Completion<core::Schedule> done) = 0;
  // Answers it as it was.
  virtual void DeleteSchedule(std::string id, Completion<core::Schedule> done) = 0;

  // ---- lifecycle events (store/lifecycle_event.h): the recent ones, in the order every process
  // sharing the backend sees.

  // Up to `max` events after `after` (nullopt: from the newest on); `reset` when some after it
  // are no longer kept.
  virtual void ReadEvents(std::optional<EventId> after, size_t max, Completion<EventRead> done) = 0;
  // `fn` is called (on any thread; it must not block) when this process added events. A
  // backend shared by processes does not hear of the others': readers also poll.
  virtual void WatchEvents(std::function<void()> fn) = 0;

  // ---- config entries (ConfigEntry)

  // Sets (creates or replaces) an entry.
  virtual void PutConfig(ConfigEntry entry, Completion<Done> done) = 0;
  // Removes an entry: whether there was one.
  virtual void DeleteConfig(std::string kind, std::string name, Completion<bool> done) = 0;
  // Every entry of `kind`, by name.
  virtual void ListConfig(std::string kind, Completion<std::vector<ConfigEntry>> done) = 0;

  // ---- roles: work one process does for all that share the backend (the webhook dispatcher)

  // Takes or renews `role` for `holder` for ttl_ms. Answers the position the role's holders
  // saved ("" when none) while `holder` holds it, nullopt while another does. A backend of one
  // process always grants it.
  virtual void HoldRole(std::string role, std::string holder, int64_t ttl_ms,
                        Completion<std::optional<std::string>> done) = 0;
  // Saves the role's position, if `holder` still holds it (false: it does not; nothing saved).
  virtual void SaveRolePosition(std::string role, std::string holder, std::string position,
                                Completion<bool> done) = 0;

  // Whether a change made now would be kept (a full disk, a lost or read-only Redis: not).
  virtual void CheckHealth(Completion<HealthReport> done) = 0;
};

}  // namespace anteroom::store
