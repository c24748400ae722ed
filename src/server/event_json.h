#pragma once
// TEMPORARY STUB (not committed)
#include <boost/json.hpp>
#include "common/op_status.h"
#include "core/room_event.h"
namespace anteroom::server {
OpResult<core::EventSpec> ReadEventSpec(const boost::json::object& body);
boost::json::object EventJson(const core::RoomEvent& e, int64_t now_ms);
}
