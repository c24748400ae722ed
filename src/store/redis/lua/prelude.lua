-- The head of room.lua and queue.lua (the build puts this file before each, after the core's
-- RULES and MSG from store/redis/lua_rules.cc): what both scripts mean the same way, written
-- once.

local NEVER = 9007199254740991  -- no deadline: 2^53 - 1, the largest integer a double holds exactly
-- An answer's register field when the sweeper's registry is left as it is.
local NOTHING_TO_REGISTER = -1
-- Set by run() for each call (the functions below are made once, when the library loads).
local KEYS, ARGV

-- The time of the call: the caller's clock when it sends one (ARGV[2]), else Redis's.
local function now_ms()
  if ARGV[2] ~= '' then return tonumber(ARGV[2]) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- An integer as Redis wants it in a command: no exponent, no fraction.
local function digits(x) return string.format('%d', x) end

-- The deadline `n` to register with the sweeper, or NOTHING_TO_REGISTER when the one registered
-- (`state.hint`) comes no later; `force` registers it whatever it is (the sweeper asked).
local function register_deadline(state, n, force)
  if force or n < state.hint then
    state.hint = n
    return n
  end
  return NOTHING_TO_REGISTER
end

-- The lowest score of sorted set `z` and its member; NEVER when it is empty.
local function first_score(z)
  local top = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  if top[1] then return tonumber(top[2]), top[1] end
  return NEVER, nil
end
-- Forgets what a hash remembers (`memory`: revocations, acks) whose time in sorted set `expiry`
-- has come by `now`, 256 at most per call; answers when the next may be forgotten.
local function forget_expired(memory, expiry, now)
  local old = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, 256)
  for _, id in ipairs(old) do redis.call('HDEL', memory, id) end
  if #old > 0 then redis.call('ZREM', expiry, unpack(old)) end
  return (first_score(expiry))
end

-- Runs the operation ARGV[1] names in `ops` (name -> function(now)); one the script does not
-- know (`kind`: 'room', 'queue') is refused before anything is read.
local function dispatch(ops, kind)
  local op = ops[ARGV[1]]
  if not op then
    return {'invalid_argument', 'unknown ' .. kind .. ' operation ' .. tostring(ARGV[1])}
  end
  return op(now_ms())
end

-- ---- the feed: lifecycle events (store/lifecycle_event.h) -----------------------------------
-- One capped stream (K_FEED) holds the recent events of every room and queue on this Redis, in
-- the order they happened, each entry's id its position (what GET /v1/admin/events resumes from).
-- K_FEED_HORIZON (a string "MS-N") is the newest id trimmed away: a reader after an older
-- position has missed events (core's EventRing has the same invariant: every event after the
-- horizon that was ever added is kept). Both are absent from KEYS on Redis Cluster, where a
-- script may only touch its own slot: nothing is told there (docs/api.md says so).
-- Kept: every event of the last RULES.feed_keep_ms, or the last RULES.feed_keep_count if that
-- is more, never more than RULES.feed_max_count. Entries: t type, at ms, r room | q queue,
-- n the room's sequence, s session, a admission, j job, d detail, p position.
local K_FEED, K_FEED_HORIZON
local told = {}  -- this call's events, as XADD field lists, written when its state is
local function tell(fields) if K_FEED then told[#told + 1] = fields end end

local function parse_id(id)
  local ms, n = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(n)
end
-- Trims the oldest entries past what is kept (at most 64 a call: a call adds far fewer), and
-- records the newest trimmed as the horizon.
local function trim_feed()
  local excess = redis.call('XLEN', K_FEED) - RULES.feed_keep_count
  if excess <= 0 then return end
  local t = redis.call('TIME')
  local cutoff = tonumber(t[1]) * 1000 - RULES.feed_keep_ms
  local over = redis.call('XLEN', K_FEED) - RULES.feed_max_count
  local oldest = redis.call('XRANGE', K_FEED, '-', '+', 'COUNT', math.min(excess, 64))
  local last
  for k, e in ipairs(oldest) do
    local ms = parse_id(e[1])
    if ms >= cutoff and k > over then break end
    last = e[1]
  end
  if not last then return end
  local ms, n = parse_id(last)
  redis.call('XTRIM', K_FEED, 'MINID', digits(ms) .. '-' .. digits(n + 1))
  redis.call('SET', K_FEED_HORIZON, last)
end
-- Writes this call's events, and wakes the readers of every process (the feed's name is also
-- the channel they listen on).
local function flush_told()
  if #told == 0 then return end
  for _, f in ipairs(told) do redis.call('XADD', K_FEED, '*', unpack(f)) end
  told = {}
  trim_feed()
  redis.call('PUBLISH', K_FEED, '')
end
