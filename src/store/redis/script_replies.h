#pragma once
// What room.lua and queue.lua answer, read once into named fields: one Parse function per
// operation, beside what it reads into (an engine value when the answer is one, else a struct
// of its own). Each reads the fields where its script puts them, so nothing else in the backend
// knows a position. An answer is {status word, register, ...}: a room's {'ok', register,
// payload...}, a queue's {'ok', register, wake, payload}. A field that is missing, or of another
// type, reads as a nil reply would (0, empty; Reply::at): a malformed answer is never a crash.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job_schedule.h"
#include "core/queue_types.h"
#include "core/room_pass.h"
#include "core/room_types.h"
#include "store/lifecycle_event.h"
#include "store/redis/resp_reply.h"

namespace anteroom::store::redis {

// ---- every answer --------------------------------------------------------------------------

// The status word and, for a refusal, what it says. Refusals: {'invalid_argument', message}
// (before anything was read), {'unknown_session', register}, {'rate_limited', register, retry
// ms, message}, {'challenge_required', register, message}, {'unknown_room'}; and the
// schedule's and the passes', after the room was brought to now: {'invalid' | 'conflict' |
// 'not_found' | 'limit_reached', register, message} (kInvalidArgument, kConflict, kNotFound,
// kLimitReached); a queue's batches', {'unknown_batch' | 'batch_sealed' | 'batch_exists' |
// 'too_many_batches', register...}, whose texts are the backend's.
struct ScriptStatus {
  std::string word;  // "ok", or the refusal's code
  std::string message;
  int64_t retry_after_ms = 0;  // rate_limited
};
ScriptStatus ParseStatus(const Reply& answer);

// What the backend does after any answer, whatever the operation: the deadline to register
// with the sweeper, (queues) whether long polls elsewhere should look again, and (rooms) how
// long each session the call admitted had waited, for the room wait histogram. A room's
// register is a number, or {number, wait ms...} when the call admitted anyone (room.lua reply).
struct ScriptEffects {
  std::optional<int64_t> register_deadline;  // >= 0
  bool wake = false;
  std::vector<int64_t> room_waits_ms;
};
ScriptEffects ParseEffects(const Reply& answer, bool queue);

// Both scripts' `advance` (the sweeper): the next deadline.
int64_t ParseNextDeadline(const Reply& answer);

// room.lua's `advance` and `draw`: the draw being published, if one is (room.lua draw_state()).
struct DrawState {
  std::string event;
  bool shuffled = false;  // else in arrival order: the script takes the next positions itself
  uint64_t people = 0;
  uint64_t published = 0;
  std::string seed;  // its 32 bytes; empty unshuffled
};
std::optional<DrawState> ParseDrawState(const Reply& answer);

// ---- room.lua ------------------------------------------------------------------------------

// A flow history as room.lua keeps it (flow_add): "START|BUCKET:COUNT,..." with the buckets
// ascending and only those counted; "" (or anything else) is an empty history.
core::FlowHistory ParseFlowHistory(std::string_view text);

// put, get, delete: the room object (room.lua info()): its own settings, counts and gate, then
// what is in force: the effective settings, the open event, the prequeued count, and the
// phase (core::PhaseOf of the effective settings), as core::Room answers them.
core::RoomInfo ParseRoomInfo(const std::string& room, const Reply& answer);
// check, touch, leave, evict: the session's view (room.lua view()), finished from the room's
// context (room.lua context()) with the core's formulas: the phase (core::PhaseOf), the flow
// (core::EstimateFlow of the histories), the ETA (core::EtaMs) or, in the random method, the odds
// (core::RandomOdds), starts_in/ends_in, and refresh_after (core::RefreshAfterMs), as
// core::Room::View does.
core::SessionView ParseSessionView(const std::string& session, const Reply& answer);
// present: a view of each session asked about, in order, finished alike.
std::vector<core::SessionView> ParsePresent(const std::vector<std::string>& sessions,
                                            const Reply& answer);

// line: the counts, and the line when its version moved on: the delta log's entries from the
// caller's version (an array in the answer), or else the snapshot "VER\nID\nID...".
struct LineReply {
  core::LineView counts;  // everything but `changed` and `line`
  uint64_t incarnation = 0;
  // The entries, each "INC OLD NEW K" and K lines (an entry that is not a string reads as "",
  // which applies to nothing).
  std::optional<std::vector<std::string>> deltas;
  std::string snapshot;  // without deltas; empty when the version did not move on
};
// Moves the line's text out of `answer`.
LineReply ParseLine(Reply&& answer);

// event_put, event_delete: the event (room.lua event_answer()); events: each of them, in order.
core::RoomEvent ParseRoomEvent(const Reply& answer);
std::vector<core::RoomEvent> ParseEvents(const Reply& answer);

// holder: the session holding the admission, if any.
std::optional<std::string> ParseAdmissionHolder(const Reply& answer);
// revoked: whether that admission of the session was revoked.
bool ParseIsRevoked(const Reply& answer);

// feed.lua: {reset, the position read from, entries as XRANGE gives them}; nullopt when an id
// is not one (never written so).
std::optional<EventRead> ParseEventRead(const Reply& answer);

// pass_add: when the passes were made (the room's time).
int64_t ParsePassesAdded(const Reply& answer);
// passes: every pass of the room (room.lua's records, their digests back to bytes), ordered as
// core::Room::Passes orders them: by creation, then id.
std::vector<core::RoomPass> ParsePasses(const Reply& answer);
// pass_revoke: how many passes went.
int64_t ParseRevokedPasses(const Reply& answer);

// ---- queue.lua -----------------------------------------------------------------------------

// push: each job's id, and whether it was made (false: its dedupe key's job answered).
std::vector<core::PushResult> ParsePush(const Reply& answer);

// A job fetch leased, before its lease is signed (RedisBackend::Deliveries).
struct LeasedJob {
  core::JobId id = 0;
  std::string payload;
  int32_t attempt = 0;
  uint64_t delivery = 0;
  int64_t lease_expires_ms = 0;
  int32_t priority = 0;
  std::string group;  // "": none
  // When the job became ready, and when the script leased it (both by the script's clock);
  // 0: a script that does not say.
  int64_t ready_ms = 0;
  int64_t leased_ms = 0;
};
// fetch: the outcome of each of the `acks` leases it acked first, then the jobs leased.
struct FetchReply {
  std::vector<core::LeaseOutcome> acked;
  std::vector<LeasedJob> jobs;
  size_t reclaimed = 0;  // the first `reclaimed` jobs were the worker's own, taken back
  // Nothing leased while every ready job is held back by the queue's limits: ms until one may
  // go (0: none is held back).
  int64_t retry_in_ms = 0;
};
FetchReply ParseFetch(const Reply& answer, size_t acks);
// A queue's settings: queue.lua's eleven numbers (op_get_settings).
core::QueueSettings ParseQueueSettings(const Reply& answer);

// ack, nack, extend: the outcome of each of the `leases` sent.
std::vector<core::LeaseOutcome> ParseLeaseOutcomes(const Reply& answer, size_t leases);
// progress, joblog: the outcome of the one lease sent.
core::LeaseOutcome ParseLeaseOutcome(const Reply& answer);

// getjob: job `id` as the queue shows it; nullopt when it knows no such job.
std::optional<core::JobView> ParseJobView(core::JobId id, const Reply& answer);

// jobdeps: what became of the job's dependencies, in the order it named them; nullopt when
// the queue knows no such job.
std::optional<std::vector<core::DependencyView>> ParseDependencies(const Reply& answer);

// batchcreate, batchseal, batch: the batch's view; nullopt when there is no such batch.
std::optional<core::BatchView> ParseBatchView(const Reply& answer);

// release, requeue: how many jobs it moved.
size_t ParseJobCount(const Reply& answer);

// stats: the counts, and whether the queue is counted (pushed to, or holding a key: listed).
struct StatsReply {
  core::QueueStats stats;
  bool counted = false;
};
StatsReply ParseStats(const Reply& answer);

std::vector<core::InflightJob> ParseInflight(const Reply& answer);
std::vector<core::DeadJob> ParseDead(const Reply& answer);
core::CancelOutcome ParseCancel(const Reply& answer);

// setkey, removing the key: whether the name no longer counts as a queue.
bool ParseKeyRemovalUncounts(const Reply& answer);

// ---- queue.lua's schedules -----------------------------------------------------------------

// A schedule as queue.lua keeps it (schedule_view): the schedule, and its record's exact bytes,
// which a write or a firing names so that it applies only to what it was planned from.
struct StoredSchedule {
  core::Schedule schedule;
  std::string record;
};
// schedules: the script's time, and each schedule asked about (nullopt: none, or a record that
// does not read as one); advance: the time, and the schedules due by then.
struct ScheduleRead {
  int64_t now_ms = 0;
  std::vector<std::optional<StoredSchedule>> schedules;
};
ScheduleRead ParseSchedules(const Reply& answer);
ScheduleRead ParseDueSchedules(const Reply& answer);
// schedput: whether it was written (false: the record changed since it was read).
bool ParseScheduleWritten(const Reply& answer);
// scheddelete: the schedule as it was, if there was one.
std::optional<StoredSchedule> ParseDeletedSchedule(const Reply& answer);
// schedfire: whether it fired (false: the record changed since it was read, nothing done).
bool ParseScheduleFired(const Reply& answer);

}  // namespace anteroom::store::redis
