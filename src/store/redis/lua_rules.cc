#include "store/redis/lua_rules.h"

#include <fmt/format.h>

#include "common/wire_errors.h"
#include "core/queue_types.h"
#include "core/room_types.h"

namespace anteroom::store::redis {

std::string LuaRules() {
  const core::RoomConfig room;  // a new room's settings
  // Long brackets: a message is taken as it is, quotes and all.
  return fmt::format(
      "local RULES = {{capacity = {}, grace_ms = {}, checkin_timeout_ms = {}, idle_timeout_ms = "
      "{},\n"
      "  backoff_base_ms = {}, backoff_cap_ms = {}, ack_memory_ms = {}, ack_memory_max = {}}}\n"
      "local MSG = {{capacity_required = [==[{}]==]}}\n",
      room.capacity, room.grace_ms, room.checkin_timeout_ms, room.idle_timeout_ms.value_or(-1),
      core::kBackoffBaseMs, core::kBackoffCapMs, core::kAckMemoryMs, core::kAckMemoryMax,
      wire::kCapacityRequired);
}

}  // namespace anteroom::store::redis
