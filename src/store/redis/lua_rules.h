#pragma once
// The core's rule constants and the engine's messages as a Lua chunk, put before the scripts
// (prelude.lua, room.lua, queue.lua): a room's defaults, the retry backoff, how long acks are
// remembered, are written once, in core/, and the scripts read them from RULES and MSG.

#include <string>

namespace anteroom::store::redis {

std::string LuaRules();

}  // namespace anteroom::store::redis
