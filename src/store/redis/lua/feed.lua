-- Reads the feed of lifecycle events (src/store/redis/lua/feed.lua; prelude.lua writes it), as
-- core's EventRing::ReadAfter answers: atomically, so a trim cannot slip between finding the
-- horizon and reading after it.
-- KEYS: 1 feed (stream)  2 horizon (string "MS-N": the newest id trimmed away)
-- ARGV: 1 after ('' = from the newest on, so nothing yet)  2 at most this many
-- Answers {reset (0/1), the position read from, entries as XRANGE gives them}. Reset: `after`
-- is older than the horizon (events after it are gone), or newer than anything written (not a
-- position of this feed): then the read is from the horizon, so everything kept is new.
local function parse(id)
  local ms, n = string.match(id or '', '^(%d+)-(%d+)$')
  return {tonumber(ms) or 0, tonumber(n) or 0}
end
local function before(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end
local function run(KEYS, ARGV)
  local horizon_id = redis.call('GET', KEYS[2]) or '0-0'
  local newest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  local last_id = newest[1] and newest[1][1] or horizon_id
  local from_id = ARGV[1] ~= '' and ARGV[1] or last_id
  local from, horizon, last = parse(from_id), parse(horizon_id), parse(last_id)
  local reset = 0
  if before(from, horizon) or before(last, from) then
    reset, from_id = 1, horizon_id
  end
  return {reset, from_id,
          redis.call('XRANGE', KEYS[1], '(' .. from_id, '+', 'COUNT', tonumber(ARGV[2]))}
end
