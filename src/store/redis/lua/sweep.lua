-- The registry of rooms and queues (src/store/redis/lua/sweep.lua): which need the sweeper
-- by now. KEYS: 1 registry (zset: "r:NAME"/"q:NAME" -> next deadline ms)
-- ARGV: 1 now ms ('' = Redis TIME)  2 at most this many
-- run() is the entry point (see room.lua's).
local function run(KEYS, ARGV)
  local now
  if ARGV[1] ~= '' then
    now = tonumber(ARGV[1])
  else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
end
