#pragma once
// Launch day as plain data: how a room lets people in (its queueing method), and the scheduled
// events that change it for a while (a pre-queue, a fair draw at the start, overrides of the
// room's settings). The rules that use them are in core/room.cc ("events") and
// core/schedule.cc (what a schedule may hold); the wire names are here, written once.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace anteroom::core {

// How a room admits (RoomConfig::queueing_method, EventOverrides::queueing_method):
//  - kFifo:        the line in arrival order (the default);
//  - kRandom:      a freed slot goes to someone drawn uniformly among those waiting;
//  - kPassthrough: nobody waits: every arrival is admitted at once and counted, whatever the
//                  capacity (to measure demand before a drop);
//  - kReject:      nobody new joins (status closed); those waiting still move up as slots free;
//  - kQueueAll:    the brake: nobody is admitted, arrivals wait even with free slots.
enum class QueueingMethod : uint8_t { kFifo, kRandom, kPassthrough, kReject, kQueueAll };
inline constexpr std::string_view kQueueingMethods = "fifo, random, passthrough, reject, queue_all";
const char* ToString(QueueingMethod method);
std::optional<QueueingMethod> ParseQueueingMethod(std::string_view name);

// Who an event's pre-queue takes when it opens: new arrivals only, or also everyone already
// waiting or admitted (their tokens revoked), so a drop starts from an empty room.
enum class PrequeueScope : uint8_t { kNew, kAll };
const char* ToString(PrequeueScope scope);
std::optional<PrequeueScope> ParsePrequeueScope(std::string_view name);

// Schedule bounds, enforced by the HTTP layer (names, page) and core/schedule.cc (the count).
inline constexpr size_t kMaxEventsPerRoom = 100;
inline constexpr size_t kMaxEventNameBytes = 256;
inline constexpr size_t kMaxEventPageBytes = 16 * 1024;  // EventOverrides::page, JSON text

// What an event changes while it runs; absent fields keep the room's own setting.
struct EventOverrides {
  std::optional<int64_t> capacity;
  std::optional<int64_t> admit_per_minute;
  std::optional<int64_t> grace_ms;
  std::optional<int64_t> checkin_timeout_ms;
  std::optional<QueueingMethod> queueing_method;
  // The waiting page's settings for the event, as JSON text the HTTP layer validated. Plain
  // data: the rules never read it.
  std::optional<std::string> page;
  bool operator==(const EventOverrides&) const = default;
};

// What PUT /v1/rooms/{room}/schedule/{id} says. Times are ms since the epoch.
struct EventSpec {
  std::string name;
  std::optional<int64_t> prequeue_at;  // nullopt: no pre-queue
  int64_t starts_at = 0;
  int64_t ends_at = 0;
  bool shuffle_at_start = false;
  PrequeueScope prequeue_scope = PrequeueScope::kNew;
  bool suspended = false;  // ignored while true: the room runs on its own settings
  EventOverrides overrides;

  // When the event first changes anything: its pre-queue opens, or it starts.
  int64_t OpensAt() const { return prequeue_at.value_or(starts_at); }
  bool operator==(const EventSpec&) const = default;
};

// The seed of a draw: 256 bits drawn when the draw starts and logged, from which the order
// follows (core/draw.h), so a replay, and an operator checking the draw afterwards, get the
// same order.
using DrawSeed = std::array<uint8_t, 32>;

// A draw that happened: shown by GET of the event as "shuffle": {"seed", "count", "at"}.
struct ShuffleOutcome {
  DrawSeed seed{};
  int64_t count = 0;  // people in the pre-queue when it was drawn
  int64_t at = 0;     // when (starts_at, or the room's time if that was later)
  bool operator==(const ShuffleOutcome&) const = default;
};

// Where an event is in its life. Stages only move forward, at their times, whenever the room
// is next advanced; a suspended event stays where it is and changes nothing.
enum class EventStage : uint8_t {
  kScheduled,  // before prequeue_at (or starts_at)
  kPrequeue,   // from prequeue_at to starts_at: new arrivals wait for the draw
  kRunning,    // from starts_at to ends_at: the overrides apply
  kEnded,      // after ends_at (or cancelled while running)
};
const char* ToString(EventStage stage);

struct RoomEvent {
  std::string id;
  EventSpec spec;
  EventStage stage = EventStage::kScheduled;
  std::optional<ShuffleOutcome> shuffle;
  bool operator==(const RoomEvent&) const = default;
};

// The phase a status reports (SessionView::phase): what a page should show.
//  - kPrequeue: an event's pre-queue is open (or its draw is being published);
//  - kClosed:   the room takes nobody new (kReject);
//  - kQueue:    people wait for a slot;
//  - kOpen:     otherwise (an arrival would get in at once).
enum class RoomPhase : uint8_t { kOpen, kQueue, kPrequeue, kClosed };
const char* ToString(RoomPhase phase);

}  // namespace anteroom::core
