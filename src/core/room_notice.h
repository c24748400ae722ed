#pragma once
// What happened in a room, as the rules decided it: the raw material of lifecycle events (the
// admin event stream and webhooks, store/event_ring.h). The room numbers its notices itself
// (seq, saved with the room), so a replay counts the same and a sequence never repeats across a
// restart; the room keeps them only while noting is on (set_noting), and the backend takes them
// after each call. Room-level changes made by PUT and DELETE (created, changed, deleted) are
// the backend's to announce: the rules never see a room come or go.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace anteroom::core {

// Each kind's wire type (ToWire) is "room.<name>" or "event.<name>".
enum class NoticeKind : uint8_t {
  kJoined,          // a new session: in line, in the pre-queue, or let in at once
  kAdmitted,        // given a slot (admission number in `admission`)
  kLeft,            // left of its own accord: out of the line, or a final leave of its slot
  kDropped,         // stopped checking in: out of the line, or an admission never claimed
  kExpired,         // an admitted session's grace ran out: its slot freed
  kRevoked,         // its slot taken back by the app (evicted) or sent back by the brake
  kPassUsed,        // joined or moved up with a pass (`detail`: the pass id)
  kPositionNear,    // reached position notify_at_position (`position`) for the first time
  kMethodChanged,   // the queueing method in force changed (`detail`: the new method)
  kPrequeueOpened,  // an event's pre-queue opened (`detail`: the event id)
  kEventStarted,    // an event started (`detail`: the event id)
  kEventEnded,      // an event ended (`detail`: the event id)
  kChanged,         // its settings changed (a PUT)
  kCreated,         // told by the backend: the room's first notice (seq 1)
  kDeleted,         // told by the backend: the room's last notice (DeletionNotice)
};
inline constexpr int kNoticeKinds = 15;
std::string_view ToWire(NoticeKind kind);
std::optional<NoticeKind> ParseNoticeKind(std::string_view wire);

struct RoomNotice {
  NoticeKind kind{};
  uint64_t seq = 0;      // the room's count of notices, 1 for its first
  int64_t at = 0;        // the room's time
  std::string session;   // empty for the room's own notices
  int64_t position = 0;  // kPositionNear: the position reached
  uint64_t admission = 0;
  int64_t waited_ms = -1;  // kAdmitted: from joining the line to admission; -1 when not known
  std::string detail;
};

}  // namespace anteroom::core
