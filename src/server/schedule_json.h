#pragma once
// Schedules of repeatable jobs as JSON (PUT /v1/schedules/{id} and its answers). The rules of a
// schedule are the core's (core/job_schedule.h); this reads a body into a core::ScheduleSpec,
// refusing unknown fields and out-of-range values, and writes a schedule back.
//
// Body: {"queue", "cron" + "tz"? | "every_ms", "start_at"?, "end_at"?, "max_runs"?,
// "overlap"?, "misfire"?, "misfire_grace_ms"?, "max_catchup"?, "jitter_ms"?,
// "job": {"payload", "priority"?, "group"?, "max_attempts"?}}. Times are RFC 3339 text or ms
// since the epoch (server/event_json.h ReadWireTime).

#include <boost/json.hpp>

#include <cstdint>

#include "common/op_status.h"
#include "common/wire_errors.h"
#include "core/job_schedule.h"

namespace anteroom::server {

// The largest payload a schedule's job may carry, as a pushed job's.
inline constexpr size_t kMaxSchedulePayloadBytes = 1024 * 1024;

// `raw`: the body's text, whose job payload is stored as sent (PayloadTexts).
OpResult<core::ScheduleSpec> ReadScheduleSpec(const boost::json::object& body,
                                              std::string_view raw);

// A job to push later (a schedule's, a batch's callback): {"payload", "priority"?, "group"?,
// "max_attempts"?}, at the top-level member `key` of a body whose text is `raw` (its payload
// is stored as sent); `fields` names it in errors, `not_object` is the error when it is no
// object.
OpResult<core::ScheduleJob> ReadJobTemplate(const boost::json::object& body, std::string_view raw,
                                            std::string_view key, const wire::FieldSet& fields,
                                            std::string_view not_object);

// The schedule as stored, its state, and its next core::kFireTimesShown fire times after now.
boost::json::object ScheduleJson(const core::Schedule& schedule, int64_t now_ms);

}  // namespace anteroom::server
