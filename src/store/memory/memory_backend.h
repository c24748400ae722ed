#pragma once
// The in-process backend: rooms and queues in memory, one mutex each, and one timer thread
// that processes deadlines when they fall due (not when a client next calls), so freed slots
// reach the head of the line and expired leases return their jobs within a tick of their
// deadline. Idle rooms and queues cost nothing: only those with a pending deadline are in the
// schedule. Rooms live in memory_backend.cc, queues in memory_queues.cc.
//
// Durability (memory_state.cc): with a ChangeSink attached (the log's LogJournal, attached by
// store/log/embedded_store.h), every call into the core that may
// change state is recorded (change_record.h) under the object's lock, and the answers of that
// object wait until its records are safe. Replay() applies such records; SaveState/LoadState
// write and read a snapshot of everything. Lock order: world_ (shared) -> rooms_mu_/queues_mu_
// -> a slot's mu -> the journal's own lock.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/bytes.h"
#include "common/clock.h"
#include "core/hmac.h"
#include "core/queue.h"
#include "core/room.h"
#include "store/backend.h"
#include "store/memory/change_record.h"
#include "store/memory/change_sink.h"
#include "store/memory/event_ring.h"
#include "store/memory/pause_lock.h"

namespace anteroom::store {

struct MemoryBackendOptions {
  int64_t token_ttl_ms = 600'000;                // how long revocations are remembered
  std::string lease_secret = "anteroom-leases";  // signs queue leases
  bool run_timer = true;                         // tests with a FakeClock call RunDue() themselves
  // The lifecycle events kept for the admin stream (store/memory/event_ring.h).
  EventRingLimits events = {};
  // Caps on what clients create (0: none). Beyond them a new room or queue is refused with
  // kLimitReached; existing ones work as before. Queues count once pushed to or given a key.
  size_t max_rooms = 0;
  size_t max_queues = 0;
  // Clients each room keeps per-client state for (core::Room::set_max_clients).
  size_t max_clients_per_room = core::kDefaultMaxClientsPerRoom;
  // Positions of a draw published per turn of the timer (core::Room::DrawStep): the longest a
  // draw holds its room's lock is about this many moves into the line.
  size_t draw_chunk = 50'000;
};

class MemoryBackend final : public Backend {
 public:
  MemoryBackend(const Clock& clock, MemoryBackendOptions options);
  ~MemoryBackend() override;

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
  void WatchEvents(std::function<void()> fn) override;
  void PutConfig(ConfigEntry entry, Completion<Done> done) override;
  void DeleteConfig(std::string kind, std::string name, Completion<bool> done) override;
  void ListConfig(std::string kind, Completion<std::vector<ConfigEntry>> done) override;
  // One process: the role is always its; the position is kept in memory (events are too).
  void HoldRole(std::string role, std::string holder, int64_t ttl_ms,
                Completion<std::optional<std::string>> done) override;
  void SaveRolePosition(std::string role, std::string holder, std::string position,
                        Completion<bool> done) override;
  void CheckHealth(Completion<HealthReport> done) override;

  // Processes every deadline due now. The timer thread calls it; so may tests.
  void RunDue();
  // Stops the timer thread (idempotent): before a journal the backend uses goes away.
  void StopTimer();

  // ---- durability (memory_state.cc; Replay: memory_replay.cc)

  // From now on every change is recorded in `journal` (which must outlive the backend's use).
  void AttachJournal(ChangeSink* journal);
  // Held exclusively, no state changes or is read: the moment to fork a snapshot writer.
  PauseLock& world() { return world_; }
  // Writes every room and queue. Call with world() held exclusively, or in a forked child.
  void SaveState(ByteWriter& out) const;
  // Replaces the state with a snapshot's; false if it does not decode. Before serving only.
  bool LoadState(ByteReader& in);
  // Applies one change record; an error (with what is wrong) if it does not decode or does not
  // apply. Before serving only.
  OpResult<Done> Replay(std::string_view record);
  // Before the first Replay: presence expiries are applied from their records
  // (SeenExpiredRecord), never from the times (core::Room::set_presence), until FinishRecovery.
  void StartReplay();
  // After LoadState/Replay, before serving: a restart treats every session present as seen
  // now (check-ins are not logged), then rooms go back to live presence.
  void FinishRecovery();
  // After LoadState/Replay: puts every pending deadline in the timer's schedule.
  void ScheduleAll();

  struct Summary {
    size_t rooms = 0, sessions = 0, queues = 0, jobs = 0;
  };
  Summary Summarize();
  // Before serving only (a restore, between LoadState/Replay and a new snapshot): every queue's
  // in-flight jobs go back to ready without using up an attempt (core::Queue::ReturnInflight).
  // Not logged: the caller saves the state afterwards. Answers how many jobs.
  size_t ReturnAllInflight();

 private:
  // Work to run after every lock is released: completions may take their time. The argument
  // says whether the changes it reports are safe (false: they could not be written).
  using Deferred = std::vector<std::function<void(bool)>>;

  // What the timer schedules: a room or a queue, guarded by its own mutex.
  struct Slot {
    virtual ~Slot() = default;
    // Both called with mu held.
    virtual int64_t NextDeadline() const = 0;
    virtual void RunDue(int64_t now, Deferred& after) = 0;
    std::mutex mu;
    int64_t scheduled = INT64_MAX;  // earliest wake-up already in the schedule (guarded by mu)
    uint64_t last_lsn = 0;          // its latest change record (guarded by mu)
  };
  struct RoomSlot;
  struct QueueSlot;
  // Config entries (memory_config.cc): never due; a slot for its lock and its latest record.
  struct ConfigSlot final : Slot {
    int64_t NextDeadline() const override { return INT64_MAX; }
    void RunDue(int64_t, Deferred&) override {}
    std::map<std::pair<std::string, std::string>, std::string> entries;  // (kind, name) -> value
  };
  struct Wakeup {
    int64_t when;
    std::weak_ptr<Slot> slot;
    bool operator>(const Wakeup& o) const { return when > o.when; }
  };

  enum class Access { kRead, kChange };

  // Runs fn(slot, now) under the room's lock and answers its result, or unknown_room.
  template <typename T, typename Fn>
  void OnRoom(const std::string& name, Access access, Completion<T> done, Fn&& fn);
  // Runs fn(slot, now, after) under the queue's lock (creating the queue if `create`),
  // then serves long polls, reschedules, and answers outside the lock.
  template <typename T, typename Fn>
  void OnQueue(const std::string& name, Access access, bool create, Completion<T> done, Fn&& fn);
  std::shared_ptr<QueueSlot> FindQueue(const std::string& name, bool create);
  // Forgets a queue that holds nothing (a long poll's name nobody pushed to, a worker that
  // expired there): names that hold nothing cost nothing. Takes queues_mu_, then the slot's mu:
  // call with neither held.
  void DropIfEmpty(const std::shared_ptr<QueueSlot>& slot);
  // The queue is pushed to for the first time: counted against max_queues unless its key
  // counted it already (false: over max_queues). With the slot's mu held.
  bool MarkListed(QueueSlot& slot);
  // One more queue counted against max_queues (false, and nothing counted: over it).
  bool CountQueue();
  // Counts the listed queues and drops the empty ones, after a snapshot and the log were read.
  void RecountQueues();
  // A parked fetch whose client hung up (`key`: its Hangup) leaves the line, answered at once
  // with an error and no job. Any thread; no lock held.
  void DropWaiter(const std::shared_ptr<QueueSlot>& slot, const Hangup* key);
  // 503 when the journal cannot take changes (checked before a change is made).
  std::optional<std::string> Refusal(Access access) const;
  // Answers `result` (and runs `after`) once the slot's records up to `lsn` are safe.
  template <typename T>
  void Answer(uint64_t lsn, Access access, Completion<T> done, OpResult<T> result, Deferred after);
  // Records a change of `slot` (under its lock). The record is built only with a journal.
  // Called under the world lock, which AttachJournal takes exclusively.
  bool Logging() const { return journal_.load(std::memory_order_relaxed) != nullptr; }
  void Log(Slot& slot, const std::string& record);
  // Logs the room's presence expiries not logged yet (core::Room::seen_expiries), so they
  // precede the next change's record. Under the room's lock, after anything that advances it.
  void LogSeenExpiries(RoomSlot& slot);
  // LogSeenExpiries, then seeds (and logs the seed of) any draw the time began.
  void LogTimeEffects(RoomSlot& slot, int64_t now);
  static core::DrawSeed NewDrawSeed();
  // The room's notices, told as lifecycle events (under the room's lock, after each call).
  void TellNotices(RoomSlot& slot);
  void TellRoom(RoomSlot& slot, const core::RoomNotice& notice);
  // The queue's jobs that went dead, told as job.dead (under the queue's lock).
  void TellQueue(QueueSlot& slot);
  void TellQueueEvent(const std::string& queue, std::string type, int64_t now);
  void PublishDraw(RoomSlot& slot, int64_t now);
  // What a room made or loaded now does with presence deadlines.
  core::Room::Presence LivePresence() const;
  static thread_local std::string scratch_;
  // Records `record`, a change of `slot` made at `now` (under the slot's lock); built only
  // with a journal.
  template <typename SlotType, typename Record>
  void LogChange(SlotType& slot, int64_t now, const Record& record) {
    if (!Logging()) return;
    EncodeChange(scratch_, now, slot.name, record);
    Log(slot, scratch_);
  }
  std::vector<core::LeaseOutcome> AckLeases(QueueSlot* q, const std::vector<std::string>& leases,
                                            const std::vector<std::string>& results, int64_t now);
  template <typename Apply>
  std::vector<core::LeaseOutcome> EachLease(QueueSlot* q, const std::vector<std::string>& leases,
                                            std::vector<core::LeaseRef>& applied, Apply&& apply);
  // Touch, leave and evict: `apply` and, when it changed more than presence, `record`.
  template <typename Record, typename Apply>
  OpResult<core::SessionView> SessionChange(RoomSlot& slot, int64_t now, const Record& record,
                                            Apply&& apply);
  friend class ChangeReplayer;  // applies decoded records to the rooms and queues
  static uint64_t SeedFor(std::string_view queue);
  std::shared_ptr<RoomSlot> MakeRoomSlot(const std::string& name, const core::RoomConfig& config,
                                         int64_t now) const;
  static core::RoomInfo Info(const RoomSlot& slot);
  // The queue schedule `id` lives with (memory_schedules.cc), and the index of them rebuilt
  // from the queues after a snapshot and the log were read.
  std::optional<std::string> ScheduleQueue(std::string_view id);
  void IndexSchedules();
  // Call with slot.mu held, after any change.
  void Schedule(const std::shared_ptr<Slot>& slot);
  void TimerLoop();

  const Clock& clock_;
  MemoryBackendOptions options_;
  EventRing events_;  // its own lock: taken under a room's
  core::Hmac lease_key_;
  std::atomic<ChangeSink*> journal_{nullptr};
  bool replaying_ = false;  // between StartReplay and FinishRecovery
  PauseLock world_;

  std::shared_mutex rooms_mu_;
  std::unordered_map<std::string, std::shared_ptr<RoomSlot>> rooms_;
  std::shared_mutex queues_mu_;
  std::unordered_map<std::string, std::shared_ptr<QueueSlot>> queues_;
  std::atomic<size_t> listed_queues_{0};  // queues QueueSlot::Counted() (what max_queues counts)
  std::shared_ptr<ConfigSlot> config_ = std::make_shared<ConfigSlot>();
  std::mutex schedules_mu_;
  std::map<std::string, std::string, std::less<>> schedule_queues_;  // schedule id -> queue
  std::mutex roles_mu_;
  std::map<std::string, std::string> role_positions_;

  std::mutex schedule_mu_;
  std::condition_variable schedule_cv_;
  std::priority_queue<Wakeup, std::vector<Wakeup>, std::greater<>> schedule_;
  bool stopping_ = false;
  std::thread timer_;
};

}  // namespace anteroom::store
