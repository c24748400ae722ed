#pragma once
// What a room's schedule may hold (the rules PUT /v1/rooms/{room}/schedule/{id} is held to, on
// every backend): times in order, no two events overlapping, at most kMaxEventsPerRoom, and an
// event that has begun changing only in ways that do not rewrite what already happened.

#include <string_view>
#include <vector>

#include "common/op_status.h"
#include "core/room_event.h"

namespace anteroom::core {

// An event's check-in timeout, at least 1 ms: presence deadlines an event's start moves are then
// strictly later than the start (Room::ApplyEffective), which keeps a replay's order.
// (Left open: a room whose own checkin_timeout_ms is 0 and whose pre-queue takes everyone
// (prequeue_scope all) drops them at the very time the pre-queue opens; a replay may apply those
// drops before the opening rather than after. Such a room can hold nobody waiting anyway.)
inline constexpr int64_t kMinEventCheckinTimeoutMs = 1;

// Whether event `id` may become `spec` (added when the schedule has no `id`) at `now_ms`:
//  - prequeue_at <= starts_at < ends_at, an overriding check-in timeout >= 1 ms
//    (kInvalidArgument);
//  - a new event must not be over already: ends_at > now (kInvalidArgument);
//  - a new event needs a free place: at most kMaxEventsPerRoom (kConflict);
//  - no other event's [OpensAt, ends_at) meets this one's (kConflict, naming it);
//  - an ended event changes no more; once its pre-queue opened prequeue_at stays; once it
//    started, starts_at stays and ends_at may only come earlier (kConflict).
OpResult<Done> CheckEventChange(const std::vector<RoomEvent>& events, std::string_view id,
                                const EventSpec& spec, int64_t now_ms);

// Whether every value lies in what the HTTP layer accepts: times in [0, kLatestTimeMs] and in
// order, overrides in the room settings' ranges, a page within kMaxEventPageBytes. The log's
// records and snapshots are held to it on reading.
bool InRange(const EventSpec& spec);

}  // namespace anteroom::core
