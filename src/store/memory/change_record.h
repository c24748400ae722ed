#pragma once
// The change records of the memory backend's write-ahead log: one per call into core::Room or
// core::Queue that may change state, with the time the call was made. Replaying them in order,
// with their times, through the same core calls rebuilds the same state, because the rules are
// deterministic given the calls and their times (deadlines are processed at their own times,
// heaps order ties by member, backoff jitter comes from the queue's own seeded generator).
// Expiry follows from the times, but for one kind: a session's presence deadlines (a waiting
// session's check-in timeout, an active one's idle timeout) follow its last check-in, and
// check-ins that only refresh presence are not recorded (one record per check-in would cost
// the log a write per request). So these expiries are recorded when they happen (kSeenExpired,
// logs of format 2: store/log/record_format.h), and a replay applies them from the records,
// never from the times (core::Room::set_presence). A restart treats every session present as
// seen at restart time (MemoryBackend::FinishRecovery).
//
// Layout (inside a log record, which frames and checksums it; see store/log/record_format.h):
//   u8 kind | i64 now_ms | str name | body by kind (below)
// Integers are little-endian fixed width; str is u32 length + bytes. Adding a kind is
// backwards compatible; changing a body needs a new kind number (old logs must still replay).
//
// History of changed bodies (the old kind is never written again, and always replayed):
//   kPutRoom (1) -> kPutRoom2 (7): the room patch gained `paused` and `target_url`.
//   kPutRoom2 (7) -> kPutRoom3 (8): it gained `joins_per_minute_per_client`,
//     `places_per_client` and `challenge_difficulty`.
//   kCheck (3) is still written for checks that count for no client; kCheck2 (9) adds the
//     client a join counts for (rooms with per-client limits).
//   kCreateRoom (10): a creation is no longer a kPutRoom3 but carries the room's incarnation
//     (tokens name it); kPutRoom3 is still written for changes, and a kPutRoom3 that creates
//     (older logs) makes a room of incarnation 0.
//   kCheck/kCheck2, kTouch and kPresent: since log format 2, written only for check-ins that
//     change more than presence (a join, a claimed admission, a return from grace); before
//     it, for every one (replayed the same way either way).
//   kPutRoom3 (8) -> kPutRoom4 (13), kCreateRoom (10) -> kCreateRoom2 (14): the room patch
//     gained `gate` (format 4: the gate's JSON text, at most core::kMaxGateBytes). Creations
//     are kCreateRoom2 (with the incarnation, as before) and changes kPutRoom4, which never
//     creates a room; a kPutRoom3 that creates (older logs) still does.
//
// opt-str is u8 has-value, then (if set) str. kSetQueueKey's digest is the SHA-256 of the
// queue's own key (32 bytes, store/backend.h SetQueueKey); any other length is damage.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "core/queue.h"
#include "core/room_types.h"

namespace anteroom::store {

enum class ChangeKind : uint8_t {
  // rooms
  kPutRoom = 1,       // RoomPatch format 1 (logs written before kPutRoom2; replay only)
  kDeleteRoom = 2,    // -
  kCheck = 3,         // str session
  kTouch = 4,         // str session
  kLeave = 5,         // str session, u8 final
  kEvict = 6,         // str session
  kPutRoom2 = 7,      // RoomPatch format 2 (logs written before kPutRoom3; replay only)
  kPutRoom3 = 8,      // RoomPatch format 3 (logs written before kPutRoom4; replay only):
                      // changes the room, or (older logs) creates it with incarnation 0
  kCheck2 = 9,        // str session, str client: a check that counts for a client
                      // (replayed by Room::CheckRecorded: never refused)
  kCreateRoom = 10,   // u64 incarnation, RoomPatch format 3 (before kCreateRoom2; replay only)
  kSeenExpired = 11,  // u32 n, n x (i64 when, str session): presence expiries, in the order
                      // they happened (Room::ApplySeenExpiry); now_ms is the last `when`
  kPresent = 12,      // u32 n, n x str session: live connections' check-ins (Room::Present)
  kPutRoom4 = 13,     // RoomPatch format 4: changes the room (never creates it)
  kCreateRoom2 = 14,  // u64 incarnation, RoomPatch format 4: creates the room
  // queues
  kPush = 16,           // u32 n, n x (str payload, i64 delay_ms, i32 priority, opt-str dedupe,
                        //             i32 max_attempts)
  kFetch = 17,          // str worker, u64 max, i64 lease_ms
  kAck = 18,            // u32 n, n x (u64 id, u64 delivery)
  kNack = 19,           // leases as kAck, opt-i64 delay_ms, str error
  kExtend = 20,         // leases as kAck, i64 lease_ms
  kHeartbeat = 21,      // str worker, i64 ttl_ms
  kReleaseWorker = 22,  // str worker
  kRequeueDead = 23,    // u8 all, u32 n, n x u64 id
  kCancel = 24,         // u64 id
  kSetPaused = 25,      // u8 paused
  kSetQueueKey = 26,    // opt-str digest: the queue's own key set (32 bytes) or removed (none)
};

inline bool IsRoomChange(ChangeKind kind) { return static_cast<uint8_t>(kind) < 16; }

// Starts a record in `out` (cleared first) and answers a writer for its body.
inline ByteWriter BeginChange(std::string& out, ChangeKind kind, int64_t now_ms,
                              std::string_view name) {
  out.clear();
  ByteWriter w(out);
  w.Put(kind);
  w.Put(now_ms);
  w.PutString(name);
  return w;
}

// A room patch in the format of `kind`: kPutRoom (format 1), kPutRoom2, kPutRoom3 or kPutRoom4
// (the formats of kCreateRoom and kCreateRoom2 are kPutRoom3's and kPutRoom4's, after the
// incarnation). anteroom writes only kPutRoom4's; the older writers are there for tests of old
// logs, and leave out the fields their format lacks.
void PutRoomPatch(ByteWriter& w, const core::RoomPatch& patch, ChangeKind kind);
core::RoomPatch GetRoomPatch(ByteReader& r, ChangeKind kind);
void PutJobs(ByteWriter& w, const std::vector<core::JobSpec>& jobs);
std::vector<core::JobSpec> GetJobs(ByteReader& r);
void PutLeases(ByteWriter& w, const std::vector<core::LeaseRef>& leases);
std::vector<core::LeaseRef> GetLeases(ByteReader& r);
void PutOptional(ByteWriter& w, const std::optional<int64_t>& v);
std::optional<int64_t> GetOptional(ByteReader& r);
void PutOptionalString(ByteWriter& w, const std::optional<std::string>& v);
std::optional<std::string> GetOptionalString(ByteReader& r);

}  // namespace anteroom::store
