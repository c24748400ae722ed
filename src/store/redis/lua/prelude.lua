-- The head of room.lua and queue.lua (the build puts this file before each, after the core's
-- RULES and MSG from store/redis/lua_rules.cc): what both scripts mean the same way, written
-- once.

local NEVER = 9007199254740991  -- no deadline: 2^53 - 1, the largest integer a double holds exactly
-- Set by run() for each call (the functions below are made once, when the library loads).
local KEYS, ARGV, op

-- The time of the call: the caller's clock when it sends one (ARGV[2]), else Redis's.
local function now_ms()
  if ARGV[2] ~= '' then return tonumber(ARGV[2]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- An integer as Redis wants it in a command: no exponent, no fraction.
local function s(x) return string.format('%d', x) end

-- The deadline `n` to register with the sweeper, or -1 when the one registered (`state.hint`)
-- comes no later; `force` registers it whatever it is (the sweeper asked).
local function register_deadline(state, n, force)
  if force or n < state.hint then
    state.hint = n
    return n
  end
  return -1
end
