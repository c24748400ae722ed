#pragma once
// The change records of the memory backend's write-ahead log: one per call into core::Room or
// core::Queue that may change state, with the time the call was made. Replaying them in order,
// with their times, through the same core calls rebuilds the same state, because the rules are
// deterministic given the calls and their times (deadlines are processed at their own times,
// heaps order ties by member, backoff jitter comes from the queue's own seeded generator).
// Expiry follows from the times, but for one kind: a session's presence deadlines (a waiting
// session's check-in timeout, an active one's idle timeout) follow its last check-in, and
// check-ins that only refresh presence are not recorded (one record per check-in would cost
// the log a write per request). So these expiries are recorded when they happen
// (SeenExpiredRecord), and a replay applies them from the records, never from the times
// (core::Room::set_presence). A restart treats every session present as seen at restart time
// (MemoryBackend::FinishRecovery).
//
// One type per kind of record, its writer (Encode) beside its reader (Decode) in
// change_record.cc; the backend builds the type where the change happens (EncodeChange) and
// replay decodes it back into the same type before applying it (memory_replay.cc).
//
// Layout (inside a log record, which frames and checksums it; see store/log/record_format.h):
//   u8 kind | i64 now_ms | str name | body (each type's comment)
// Integers are little-endian fixed width; str is u32 length + bytes; opt-x is u8 has-value,
// then (if set) x. The layout is that of the data directory's format (record_format.h): a change
// to any body is a new format, and a directory of another format is refused, never misread.
//
// Records hold views (string_view, span) into what they were built from or decoded out of: a
// record is written or applied at once, never kept.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "core/job_schedule.h"
#include "core/queue.h"
#include "core/room_types.h"

namespace anteroom::store {

enum class ChangeKind : uint8_t {
  // rooms
  kCreateRoom = 1,
  kPutRoom = 2,
  kDeleteRoom = 3,
  kCheck = 4,
  kTouch = 5,
  kLeave = 6,
  kEvict = 7,
  kSeenExpired = 8,
  kPresent = 9,
  kPutEvent = 10,
  kDeleteEvent = 11,
  kDrawSeed = 12,
  kDrawStep = 13,
  kAddPasses = 14,
  kRevokePasses = 15,
  // queues
  kPush = 16,
  kFetch = 17,
  kAck = 18,
  kNack = 19,
  kExtend = 20,
  kHeartbeat = 21,
  kReleaseWorker = 22,
  kRequeueDead = 23,
  kCancel = 24,
  kSetPaused = 25,
  kSetQueueKey = 26,
  kReclaim = 27,
  // neither: a config entry (its name is the record's name)
  kSetConfig = 28,
  // queues, again
  kSnooze = 29,
  kSetQueueSettings = 30,
  kPutSchedule = 31,
  kDeleteSchedule = 32,
  kFireSchedule = 33,
  kSetProgress = 34,
  kAppendJobLog = 35,
  kCreateBatch = 36,
  kSealBatch = 37,
};

inline bool IsRoomChange(ChangeKind kind) { return static_cast<uint8_t>(kind) < 16; }

// ---- rooms ---------------------------------------------------------------------------------

// u64 incarnation | str seed (32 bytes) | room patch: a new room (tokens name its
// incarnation; the random method draws from its seed's stream).
struct CreateRoomRecord {
  static constexpr ChangeKind kKind = ChangeKind::kCreateRoom;
  uint64_t incarnation = 0;
  core::DrawSeed seed = {};
  core::RoomPatch patch = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// room patch: a change of an existing room's settings (never creates one).
struct PutRoomRecord {
  static constexpr ChangeKind kKind = ChangeKind::kPutRoom;
  core::RoomPatch patch = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// (no body)
struct DeleteRoomRecord {
  static constexpr ChangeKind kKind = ChangeKind::kDeleteRoom;
  void Encode(ByteWriter&) const {}
  bool Decode(ByteReader& r) { return !r.failed(); }
};

// str session | str client | str pass: a check-in that changed more than presence (a join, a
// claimed admission, a return from grace, a pass redeemed). A client (empty: none) is the one
// the join counted for in a room with per-client limits; replay counts it again, never refusing
// (Room::CheckRecorded). A pass (empty: none) is the id of the pass it redeemed
// (Room::RedeemRecorded).
struct CheckRecord {
  static constexpr ChangeKind kKind = ChangeKind::kCheck;
  std::string_view session = {};
  std::string_view client = {};
  std::string_view pass = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str session: a touch that brought a session back from grace.
struct TouchRecord {
  static constexpr ChangeKind kKind = ChangeKind::kTouch;
  std::string_view session = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str session | u8 final
struct LeaveRecord {
  static constexpr ChangeKind kKind = ChangeKind::kLeave;
  std::string_view session = {};
  bool final = false;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str session
struct EvictRecord {
  static constexpr ChangeKind kKind = ChangeKind::kEvict;
  std::string_view session = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// u32 n | n x (i64 when, str session): presence expiries in the order they happened
// (Room::ApplySeenExpiry); the record's now_ms is the last `when`.
struct SeenExpiredRecord {
  static constexpr ChangeKind kKind = ChangeKind::kSeenExpired;
  struct Expiry {
    int64_t when;
    std::string_view session;
  };
  std::vector<Expiry> expiries = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// u32 n | n x str session: live connections' check-ins that changed more than presence
// (Room::Present).
struct PresentRecord {
  static constexpr ChangeKind kKind = ChangeKind::kPresent;
  std::vector<std::string_view> sessions = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str id | event spec (core/event_codec.h): an event scheduled or changed (Room::PutEvent).
struct PutEventRecord {
  static constexpr ChangeKind kKind = ChangeKind::kPutEvent;
  std::string_view id = {};
  core::EventSpec spec = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str id: an event cancelled (Room::DeleteEvent).
struct DeleteEventRecord {
  static constexpr ChangeKind kKind = ChangeKind::kDeleteEvent;
  std::string_view id = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str seed (32 bytes): the seed of the draw the room's last Advance began (Room::SeedDraw),
// logged before anything else changes the room.
struct DrawSeedRecord {
  static constexpr ChangeKind kKind = ChangeKind::kDrawSeed;
  core::DrawSeed seed = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// u64 max: a chunk of a draw published (Room::DrawStep(max, now)).
struct DrawStepRecord {
  static constexpr ChangeKind kKind = ChangeKind::kDrawStep;
  uint64_t max = 0;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// u32 n | n x (str id, str digest, u8 kind, i64 uses, opt-i64 expires_at): passes minted
// (Room::AddPasses), created at the record's time with every use left.
struct AddPassesRecord {
  static constexpr ChangeKind kKind = ChangeKind::kAddPasses;
  std::vector<core::RoomPass> passes = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// opt-str id: one pass revoked, or (none) all of them (Room::RevokePasses).
struct RevokePassesRecord {
  static constexpr ChangeKind kKind = ChangeKind::kRevokePasses;
  std::optional<std::string_view> id = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// ---- queues --------------------------------------------------------------------------------

// u32 n | n x (str payload, i64 delay_ms, i32 priority, opt-str dedupe, i32 max_attempts), then
// when any job has them its groups and its dependencies (change_record.cc).
struct PushRecord {
  static constexpr ChangeKind kKind = ChangeKind::kPush;
  std::span<const core::JobSpec> jobs = {};
  std::vector<core::JobSpec> decoded = {};  // what Decode read; `jobs` then views it
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str worker | u64 max | i64 lease_ms: a fetch that found at least one job.
struct FetchRecord {
  static constexpr ChangeKind kKind = ChangeKind::kFetch;
  std::string_view worker = {};
  uint64_t max = 0;
  int64_t lease_ms = 0;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str worker | u64 max | i64 lease_ms: a fetch that took back jobs the worker held
// (core::Queue::Reclaim). Its ordinary part, if any, follows as a FetchRecord.
struct ReclaimRecord {
  static constexpr ChangeKind kKind = ChangeKind::kReclaim;
  std::string_view worker = {};
  uint64_t max = 0;
  int64_t lease_ms = 0;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// The leases a change applied to (only those that were current): u32 n | n x (u64 id,
// u64 delivery). Ack, nack and extend records start with it.
struct LeaseList {
  std::span<const core::LeaseRef> leases = {};
  std::vector<core::LeaseRef> decoded = {};  // what Decode read; `leases` then views it
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// leases | (when any has one) u32 n | n x str result: each lease's result ("": none), kept
// with the acked job (core::Queue::Ack).
struct AckRecord {
  static constexpr ChangeKind kKind = ChangeKind::kAck;
  LeaseList acked = {};
  std::vector<std::string_view> results = {};  // empty, or one per lease
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str id | 3 x callback (u8 has, then str payload, i64 delay_ms, i32 priority, opt-str dedupe,
// i32 max_attempts, str group): on_success, on_complete, on_dead (core::Queue::CreateBatch).
struct CreateBatchRecord {
  static constexpr ChangeKind kKind = ChangeKind::kCreateBatch;
  std::string_view id = {};
  core::BatchSpec spec = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str id (core::Queue::SealBatch)
struct SealBatchRecord {
  static constexpr ChangeKind kKind = ChangeKind::kSealBatch;
  std::string_view id = {};
  void Encode(ByteWriter& w) const { w.PutString(id); }
  bool Decode(ByteReader& r) {
    id = r.GetView();
    return !r.failed();
  }
};

// u64 id | u64 delivery | str progress (core::Queue::SetProgress)
struct SetProgressRecord {
  static constexpr ChangeKind kKind = ChangeKind::kSetProgress;
  core::LeaseRef lease = {};
  std::string_view progress = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// u64 id | u64 delivery | u32 n | n x str line (core::Queue::AppendLog, lines as given)
struct AppendJobLogRecord {
  static constexpr ChangeKind kKind = ChangeKind::kAppendJobLog;
  core::LeaseRef lease = {};
  std::vector<std::string_view> lines = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// leases | opt-i64 delay_ms | str error
struct NackRecord {
  static constexpr ChangeKind kKind = ChangeKind::kNack;
  LeaseList nacked = {};
  std::optional<int64_t> delay_ms = {};
  std::string_view error = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// leases | i64 delay_ms: deliveries snoozed (core::Queue::Snooze).
struct SnoozeRecord {
  static constexpr ChangeKind kKind = ChangeKind::kSnooze;
  LeaseList snoozed = {};
  int64_t delay_ms = 0;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// leases | i64 lease_ms
struct ExtendRecord {
  static constexpr ChangeKind kKind = ChangeKind::kExtend;
  LeaseList extended = {};
  int64_t lease_ms = 0;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str worker | i64 ttl_ms
struct HeartbeatRecord {
  static constexpr ChangeKind kKind = ChangeKind::kHeartbeat;
  std::string_view worker = {};
  int64_t ttl_ms = 0;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// str worker
struct ReleaseWorkerRecord {
  static constexpr ChangeKind kKind = ChangeKind::kReleaseWorker;
  std::string_view worker = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// u8 all | u32 n | n x u64 id: dead jobs put back (all of them, or those listed).
struct RequeueDeadRecord {
  static constexpr ChangeKind kKind = ChangeKind::kRequeueDead;
  bool all = false;
  std::span<const core::JobId> ids = {};
  std::vector<core::JobId> decoded = {};  // what Decode read; `ids` then views it
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// u64 id: a job cancelled.
struct CancelRecord {
  static constexpr ChangeKind kKind = ChangeKind::kCancel;
  core::JobId id = 0;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// u8 paused
struct SetPausedRecord {
  static constexpr ChangeKind kKind = ChangeKind::kSetPaused;
  bool paused = false;
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// opt-str digest: the queue's own key set (the SHA-256 of the key, 32 bytes; store/backend.h
// SetQueueKey) or removed (none). Any other length is damage (checked by replay).
struct SetQueueKeyRecord {
  static constexpr ChangeKind kKind = ChangeKind::kSetQueueKey;
  std::optional<std::string_view> digest = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// limits (core::SaveLimits) | i64 keep count | i64 keep age ms: the queue's settings
// (store/backend.h SetQueueSettings); the keep fields are absent before format 9 (defaults).
struct SetQueueSettingsRecord {
  static constexpr ChangeKind kKind = ChangeKind::kSetQueueSettings;
  core::QueueSettings settings = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// schedule (core::SaveSchedule): one of the queue's schedules as it now is (put, changed,
// paused or resumed).
struct PutScheduleRecord {
  static constexpr ChangeKind kKind = ChangeKind::kPutSchedule;
  core::Schedule schedule = {};
  void Encode(ByteWriter& w) const { core::SaveSchedule(w, schedule); }
  bool Decode(ByteReader& r) { return core::LoadSchedule(r, schedule); }
};

// str id: one of the queue's schedules deleted.
struct DeleteScheduleRecord {
  static constexpr ChangeKind kKind = ChangeKind::kDeleteSchedule;
  std::string_view id = {};
  void Encode(ByteWriter& w) const { w.PutString(id); }
  bool Decode(ByteReader& r) {
    id = r.GetView();
    return !r.failed();
  }
};

// schedule (after the firing) | u32 n | n x i64 nominal time: a schedule fired, pushing one job
// per run (core::RunJob of each time, in order) in the same step as its state moved on.
struct FireScheduleRecord {
  static constexpr ChangeKind kKind = ChangeKind::kFireSchedule;
  core::Schedule schedule = {};
  std::vector<int64_t> runs = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// ---- config entries ------------------------------------------------------------------------

// str kind | opt-str value: the entry set to `value`, or removed (none). store/backend.h's
// ConfigEntry; the record's name is the entry's.
struct SetConfigRecord {
  static constexpr ChangeKind kKind = ChangeKind::kSetConfig;
  std::string_view kind = {};
  std::optional<std::string_view> value = {};
  void Encode(ByteWriter& w) const;
  bool Decode(ByteReader& r);
};

// ---- the head, and the record as a whole ---------------------------------------------------

struct ChangeHead {
  ChangeKind kind{};
  int64_t now_ms = 0;
  std::string_view name = {};  // the room's or queue's
};

// Reads the head of `r`'s record; false when it is too short.
bool DecodeHead(ByteReader& r, ChangeHead& head);

// Writes `record` whole into `out` (cleared first): head, then body.
template <typename Record>
void EncodeChange(std::string& out, int64_t now_ms, std::string_view name, const Record& record) {
  out.clear();
  ByteWriter w(out);
  w.Put(Record::kKind);
  w.Put(now_ms);
  w.PutString(name);
  record.Encode(w);
}

// The room patch of CreateRoomRecord and PutRoomRecord. Each field: u8 named, then (for those
// that can be cleared) u8 has-value, then the value: capacity, grace_ms, checkin_timeout_ms
// (opt-i64 each), idle_timeout_ms, admit_per_minute (u8 named [opt-i64]), paused (u8 named
// [u8]), target_url (u8 named [opt-str]), joins_per_minute_per_client, places_per_client,
// challenge_difficulty (u8 named [opt-i64]), gate (u8 named [opt-str], the gate's JSON text),
// queueing_method (u8 named [u8]), include_active (u8), then from format 5 page (u8 named
// [opt-str], the page settings' JSON text), from format 6 notify_at_position (u8 named
// [opt-i64]). A patch ends its record, so format 4's patches are
// those that end after include_active.
void PutRoomPatch(ByteWriter& w, const core::RoomPatch& patch);
core::RoomPatch GetRoomPatch(ByteReader& r);

void PutOptional(ByteWriter& w, const std::optional<int64_t>& v);
std::optional<int64_t> GetOptional(ByteReader& r);
void PutOptionalString(ByteWriter& w, const std::optional<std::string_view>& v);
std::optional<std::string_view> GetOptionalView(ByteReader& r);
std::optional<std::string> GetOptionalString(ByteReader& r);

}  // namespace anteroom::store
