#pragma once
// Scheduled events on the wire (docs/api.md, "Scheduled events"): the body of
// PUT /v1/rooms/{room}/schedule/{id} read into a core::EventSpec, and an event written back.
//
// Times are read as RFC 3339 text or integers of ms since the epoch (common/wire_time.h), and
// written both ways: each time `t` as "t" (RFC 3339, UTC, milliseconds: fixed width, so the
// texts sort as the times do) beside "t_ms" (the integer). What is checked here is each field on
// its own (type, range, known name); the rules between fields (prequeue_at <= starts_at <
// ends_at, overlaps, how many, what a started event may still change) are core's.

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/op_status.h"
#include "core/room_event.h"

namespace anteroom::server {

// A time field's value: RFC 3339 text or an integer of ms since the epoch, in the engine's
// range; invalid_argument naming `key` otherwise (saying null is allowed when `nullable`).
OpResult<int64_t> ReadWireTime(const boost::json::value& v, std::string_view key, bool nullable);
// Writes "key" (RFC 3339) and "key_ms" (the integer), both null for no time.
void PutWireTime(boost::json::object& o, std::string_view key, const std::optional<int64_t>& ms);

// The body as PUT sends it:
//   {"name"?: string (<= core::kMaxEventNameBytes; default ""),
//    "prequeue_at"?: time or null (default: no pre-queue), "starts_at": time, "ends_at": time,
//    "shuffle_at_start"?: bool (false), "prequeue_scope"?: "new" | "all" ("new"),
//    "suspended"?: bool (false),
//    "overrides"?: {"capacity"?, "admit_per_minute"?, "grace_ms"?, "checkin_timeout_ms"? (the
//                   room settings' ranges), "queueing_method"? (core::kQueueingMethods),
//                   "page"?: object (kept as its JSON text, <= core::kMaxEventPageBytes)}}
// Any other field, at the top or in "overrides", is refused by name. invalid_argument with a
// message naming the field (common/wire_errors.h) on the first field that does not do.
OpResult<core::EventSpec> ReadEventSpec(const boost::json::object& body);

// The spec as a body: ReadEventSpec(EventSpecJson(s)) == s for every spec ReadEventSpec reads.
// Times as RFC 3339 only; "prequeue_at" null when there is none; "overrides" holds the set ones.
boost::json::object EventSpecJson(const core::EventSpec& spec);

// An event as GET answers it, in this order:
//  - "id", "name";
//  - "phase": the stage (scheduled | prequeue | running | ended), or "suspended" for a suspended
//    event that has not ended (it stays in its stage and changes nothing);
//  - "prequeue_at", "prequeue_at_ms" (both null for no pre-queue), "starts_at", "starts_at_ms",
//    "ends_at", "ends_at_ms";
//  - "shuffle_at_start", "prequeue_scope", "suspended", "overrides" (as EventSpecJson; "page"
//    as the JSON object it holds);
//  - "prequeue_in_ms", "starts_in_ms", "ends_in_ms": ms from `now_ms` to that time, each only
//    while it is in the future (a countdown, absent once its time has come);
//  - "shuffle": {"seed": 64 hex digits, "count", "at", "at_ms"} once drawn, null before.
boost::json::object EventJson(const core::RoomEvent& event, int64_t now_ms);

}  // namespace anteroom::server
