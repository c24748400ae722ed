#pragma once
// A queue's settings on the wire (PUT and GET /v1/queues/{q}/settings):
//
//   {"fairness": "fifo" | "round_robin",
//    "limits": [{"key": "group" | null, "rate"?: {"limit", "period_ms", "burst"?},
//                "concurrency"?: N}],
//    "keep_acked": {"count"?, "age_ms"?}}
//
// A limit with key "group" holds each group (a job's "group") to it on its own; key null holds
// all of the queue's jobs together. At most one of each; each has a rate, a concurrency or
// both. A rate's burst defaults to its limit ("10 a second" lets 10 go at once after a quiet
// spell). keep_acked: how many finished (acked or cancelled) jobs are kept for
// GET /v1/queues/{q}/jobs/{id}, and how long (core::KeepFinished). A PUT replaces every setting:
// what it leaves out goes back to its default.

#include <boost/json/object.hpp>

#include "common/op_status.h"
#include "core/queue_types.h"

namespace anteroom::server {

OpResult<core::QueueSettings> ReadQueueSettings(const boost::json::object& body);
boost::json::object QueueSettingsJson(const core::QueueSettings& settings);

}  // namespace anteroom::server
