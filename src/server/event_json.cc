// TEMPORARY STUB (not committed)
#include "server/event_json.h"
namespace anteroom::server {
OpResult<core::EventSpec> ReadEventSpec(const boost::json::object& body) {
  core::EventSpec s;
  if (auto* v = body.if_contains("starts_at")) s.starts_at = v->as_int64();
  if (auto* v = body.if_contains("ends_at")) s.ends_at = v->as_int64();
  if (auto* v = body.if_contains("prequeue_at")) s.prequeue_at = v->as_int64();
  if (auto* v = body.if_contains("shuffle_at_start")) s.shuffle_at_start = v->as_bool();
  return s;
}
boost::json::object EventJson(const core::RoomEvent& e, int64_t) {
  return boost::json::object{{"id", e.id}, {"phase", core::ToString(e.stage)}};
}
}
