#pragma once
// Lifecycle events: what happened to rooms, sessions and queues, told to the admin event stream
// (GET /v1/admin/events) and to webhooks. Every backend keeps the recent ones in one order that
// every process shares (the embedded backend: store/memory/event_ring.h; Redis: one capped
// stream), and answers reads after a position (an EventId, the SSE stream's Last-Event-ID).

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace anteroom::store {

// A position in the event order: "<ms>-<n>", as a Redis Stream's ids are (n from 1 within a ms).
// Ordered, and unique across the processes that share a backend.
struct EventId {
  int64_t ms = 0;
  uint64_t n = 0;
  auto operator<=>(const EventId&) const = default;
  std::string ToString() const;
  // nullopt unless exactly two decimal numbers joined by '-', each within its type.
  static std::optional<EventId> Parse(std::string_view text);
};

// What the event order keeps (the embedded backend's ring, the Redis feed): every event of the
// last kEventsKeepMs, or the last kEventsKeepCount if that is more, never more than
// kEventsMaxCount.
inline constexpr size_t kEventsKeepCount = 100'000;
inline constexpr int64_t kEventsKeepMs = 600'000;
inline constexpr size_t kEventsMaxCount = 1'000'000;

// The types of a queue's events (a room's are core::ToWire(NoticeKind)).
inline constexpr std::string_view kJobDead = "job.dead";
inline constexpr std::string_view kQueuePaused = "queue.paused";
inline constexpr std::string_view kQueueResumed = "queue.resumed";

// Whether `type` is one of the types above or a room's (the stream's and webhooks' filters).
bool IsEventType(std::string_view type);

struct LifecycleEvent {
  EventId id;
  std::string type;  // "room.admitted", "queue.paused", ...
  int64_t at_ms = 0;
  std::string room;   // the room's events; empty for a queue's
  std::string queue;  // the queue's events; empty for a room's
  uint64_t seq = 0;   // the room's own count of its events (0 for a queue's)
  std::string session;
  std::optional<int64_t> position;    // room.position_near
  std::optional<uint64_t> admission;  // room.admitted
  std::optional<uint64_t> job;        // job.dead
  std::string detail;                 // an event id, a method's name, a pass id, an error
};

// What a read after a position answers: the events after it in order (at most the number asked),
// and whether events after it were already forgotten (then `events` starts at the oldest kept).
struct EventRead {
  std::vector<LifecycleEvent> events;
  bool reset = false;
  EventId last;  // the newest event's position, or the position read from when none is newer
};

}  // namespace anteroom::store
