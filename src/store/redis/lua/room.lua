-- One waiting room, as one atomic script (src/store/redis/lua/room.lua).
-- The same rules as src/core/room.cc, over Redis structures; docs/design.md lists the keys.
--
-- KEYS: 1 meta (string: msgpack of FIELDS)  2 line (zset: session -> arrival ticket; ZRANK = exact position)
--       3 sessions (hash: session -> "st:last_seen:since:admission:claimed")
--       4 deadlines (zset: session -> when*2+kind; lazily re-keyed, never later than due)
--       5 revoked (hash: session -> admission; and '#ADMISSION' -> the session holding that
--         admission, active or in grace: tokens name admissions)  6 revoked expiry (zset:
--         session -> until)
--       7 clients (hash: client -> "places:debt:debt_at"; clients holding a place or whose
--         bucket is not full)  8 refills (zset: client -> when its bucket is full again, for
--         clients holding no place; forgotten then)
--       9 gate (string: "INC:TEXT", the room's gate settings, the JSON text as given, up to
--         16 KiB, under the incarnation that set them; absent, or of another incarnation: none).
--         Kept out of KEYS[1], which every operation reads and writes whole: only the
--         operations that answer the room's settings read it.
--       10 line snapshot (string: "VER\nID\nID..."; the line in order as of version VER, kept
--         for a minute: live channels of every process read it, see line_snapshot)
--       11 line deltas (list: one entry per call that moved the version on, "INC OLD NEW K"
--         then K lines "+ID" (joined: the end of the line) or "-ID" (left it), in the order
--         made; the last LOG_ENTRIES calls, kept a minute, reset when the room is made: log_delta)
-- ARGV: 1 op  2 now ms ('' = Redis TIME)  3 token ttl ms  4.. the op's arguments
-- Answers start with a status word: 'ok', or an error code the backend maps to OpStatus.
-- Invariants: holders <= capacity (unless lowered); nobody waits while holders < capacity
-- unless the room is paused or the rate cap forbids it; the line is admitted in arrival order.

local KIND_DROPOUT, KIND_OTHER = 0, 1
local TOKEN_UNITS = 60000  -- a join's share of a bucket; refilled at jpm units per ms
-- Set by run() for each call, beside KEYS, ARGV and op (prelude.lua).
local ttl
-- The keys, named as KEYS above lists them.
local K_META, K_LINE, K_SESSIONS, K_DEADLINES, K_REVOKED, K_REVOKED_EXPIRY, K_CLIENTS, K_REFILLS
local K_GATE, K_LINE_SNAPSHOT, K_LINE_DELTAS
-- The line's changes made by this call since its last log entry, in order (see log_delta), and
-- the version they start from (nil: the room was made by this call, and its log reset).
local call_deltas, ver0

local function key(when, kind) return when * 2 + kind end

-- ---- the room's scalar state: one msgpack array in KEYS[1], read once, written once -------
local R = {}
-- New fields go at the end, with a default for state written before they existed (below).
-- paused: 0/1; url: the target URL, '' when unset (never nil: a nil would end the array).
-- jpm, ppc, pow: joins_per_minute_per_client, places_per_client, challenge difficulty; -1 off.
-- inc: the room's incarnation (random, chosen by the creating process; 0 for older rooms).
-- FIELDS, the array's order: cap grace cto idle apm now holders adm seq admitted dropped
-- released hint rvmin aw fw paused url ver jpm ppc pow inc
local DEFAULTS = {paused = 0, url = '', ver = 0, jpm = -1, ppc = -1, pow = -1, inc = 0}
-- load and save spell FIELDS out, in its order, with DEFAULTS: a table built by one constructor
-- is sized once, where filling it in a loop over FIELDS grew it five times (2.6 us a call,
-- half of what reading and writing the state costs; scripts/bench-redis.sh).
local function load()
  local v = redis.call('GET', K_META)
  if not v then return false end
  local t = cmsgpack.unpack(v)
  local d = DEFAULTS
  R = {cap = t[1], grace = t[2], cto = t[3], idle = t[4], apm = t[5], now = t[6], holders = t[7],
       adm = t[8], seq = t[9], admitted = t[10], dropped = t[11], released = t[12], hint = t[13],
       rvmin = t[14], aw = t[15], fw = t[16], paused = t[17] or d.paused, url = t[18] or d.url,
       ver = t[19] or d.ver, jpm = t[20] or d.jpm, ppc = t[21] or d.ppc, pow = t[22] or d.pow,
       inc = t[23] or d.inc}
  ver0 = R.ver
  return true
end
local log_delta
local function save()
  log_delta()
  redis.call('SET', K_META, cmsgpack.pack({R.cap, R.grace, R.cto, R.idle, R.apm, R.now, R.holders,
             R.adm, R.seq, R.admitted, R.dropped, R.released, R.hint, R.rvmin, R.aw, R.fw,
             R.paused, R.url, R.ver, R.jpm, R.ppc, R.pow, R.inc}))
end

-- ---- minute windows: "TOTAL NEWEST|second:count,..." over the last 60 whole seconds ----------
-- Buckets ascend. TOTAL is the sum of every bucket written and NEWEST the last one's second, so
-- a count is TOTAL less the few expired buckets at the front: a check in a room admitting every
-- second no longer parses up to 60 buckets (~1 us each). Windows written without the prefix (by
-- an older script) are counted whole; an older script reading this one skips the prefix (it has
-- no ':'), and rewrites the window without it.
local function second_of(ms) return math.floor(ms / 1000) end
local function win_count(w, now)
  local sec, total = second_of(now), 0
  local t, newest, at = string.match(w, '^(%d+) (%-?%d+)|()')
  if t and tonumber(newest) <= sec then
    total = tonumber(t)
    while true do  -- the expired buckets at the front
      local bs, bc, next_at = string.match(w, '^(%-?%d+):(%d+),?()', at)
      if not bs or tonumber(bs) > sec - 60 then return total end
      total, at = total - tonumber(bc), next_at
    end
  end
  for bs, bc in string.gmatch(w, '(%-?%d+):(%d+)') do
    bs = tonumber(bs)
    if bs > sec - 60 and bs <= sec then total = total + tonumber(bc) end
  end
  return total
end
local function win_add(w, now)
  local sec, out, added, total = second_of(now), {}, false, 0
  local newest = sec
  for bs, bc in string.gmatch(w, '(%-?%d+):(%d+)') do
    local b = tonumber(bs)
    if b > sec - 60 then
      if b == sec then bc = s(tonumber(bc) + 1); added = true end
      out[#out + 1] = bs .. ':' .. bc
      total, newest = total + tonumber(bc), b
    end
  end
  if not added then
    out[#out + 1] = s(sec) .. ':1'
    total, newest = total + 1, sec
  end
  return s(total) .. ' ' .. s(newest) .. '|' .. table.concat(out, ',')
end
-- The earliest time >= now at which the count falls below limit.
local function win_next_below(w, now, limit)
  local count = win_count(w, now)
  if count < limit then return now end
  local sec = second_of(now)
  for bs, bc in string.gmatch(w, '(%-?%d+):(%d+)') do  -- ascending seconds
    local b = tonumber(bs)
    if b > sec - 60 and b <= sec then
      count = count - tonumber(bc)
      if count < limit then return (b + 60) * 1000 end
    end
  end
  return (sec + 1) * 1000
end

-- ---- sessions -------------------------------------------------------------------------------
-- ver: bumped by every change of the line or of a holder's status (live channels re-read the
-- line only then). Rooms saved before it existed start from 0.
local function bump() R.ver = (R.ver or 0) + 1 end
-- The log keeps the last LOG_ENTRIES entries (up to 64 more between trims), until a minute after
-- every 64th: about as long as a process keeps a line it no longer reads (a minute).
local LOG_ENTRIES, LOG_MS = 1024, 60000
-- Deltas naming more sessions than this, or than a quarter of the line, are not worth reading;
-- nor, to bound the log, entries of more than DELTA_MAX_IDS.
local DELTA_MIN_IDS, DELTA_MAX_IDS = 64, 4096
local function line_add(id)
  if redis.call('ZADD', K_LINE, R.seq, id) == 1 then call_deltas[#call_deltas + 1] = '+' .. id end
end
local function line_remove(id)
  if redis.call('ZREM', K_LINE, id) == 1 then call_deltas[#call_deltas + 1] = '-' .. id end
end
-- One entry per call that moved the version on, even with no change of the line (a holder's),
-- so that the entries chain version to version: a process that cached the line of version A
-- rebuilds version B from the entries A..B alone (line_deltas).
log_delta = function()
  if ver0 == nil or R.ver == ver0 then return end
  local head, n = s(R.inc) .. ' ' .. s(ver0) .. ' ' .. s(R.ver) .. ' '
  if #call_deltas == 0 then
    n = redis.call('RPUSH', K_LINE_DELTAS, head .. '0')
  elseif #call_deltas > DELTA_MIN_IDS and
         (#call_deltas > DELTA_MAX_IDS or #call_deltas * 4 > redis.call('ZCARD', K_LINE)) then
    -- Not worth keeping: readers take a snapshot.
    n = redis.call('RPUSH', K_LINE_DELTAS, head .. '-')
  else
    n = redis.call('RPUSH', K_LINE_DELTAS,
                   head .. s(#call_deltas) .. '\n' .. table.concat(call_deltas, '\n'))
  end
  if n > LOG_ENTRIES + 64 then redis.call('LTRIM', K_LINE_DELTAS, -LOG_ENTRIES, -1) end
  -- Expiring on each call would cost a join ~5 us.
  if n % 64 == 1 then redis.call('PEXPIRE', K_LINE_DELTAS, LOG_MS) end
  ver0, call_deltas = R.ver, {}
end
-- A session joined as a counted client carries ':CLIENT' at the end (clients contain ':').
local function get(id)
  local v = redis.call('HGET', K_SESSIONS, id)
  if not v then return nil end
  local st, ls, since, adm, cl, client = string.match(v, '^(%a):(%-?%d+):(%-?%d+):(%d+):(%d):?(.*)$')
  return {id = id, st = st, last_seen = tonumber(ls), since = tonumber(since),
          admission = tonumber(adm), claimed = cl == '1', client = client}
end
local function put(x)
  local client = (x.client ~= nil and x.client ~= '') and (':' .. x.client) or ''
  redis.call('HSET', K_SESSIONS, x.id, x.st .. ':' .. s(x.last_seen) .. ':' .. s(x.since) .. ':' ..
             s(x.admission) .. ':' .. (x.claimed and '1' or '0') .. client)
end

-- ---- clients: per-client limits (the rules of src/core/room.h) ---------------------------------
local function limits_clients() return R.jpm >= 0 or R.ppc >= 0 end
local function cget(client)
  local v = redis.call('HGET', K_CLIENTS, client)
  if not v then return nil end
  local places, debt, at = string.match(v, '^(%d+):(%d+):(%-?%d+)$')
  return {places = tonumber(places), debt = tonumber(debt), at = tonumber(at)}
end
local function cput(client, e)
  redis.call('HSET', K_CLIENTS, client, s(e.places) .. ':' .. s(e.debt) .. ':' .. s(e.at))
end
-- The bucket's debt at `now`: repaid at jpm units per ms since it was written.
local function debt_at(e, now)
  if R.jpm < 0 or e.debt == 0 then return 0 end
  local elapsed = now - e.at
  if elapsed >= math.ceil(e.debt / R.jpm) then return 0 end
  return e.debt - elapsed * R.jpm
end
local function full_at(e)
  if R.jpm < 0 then return e.at end
  return e.at + math.ceil(e.debt / R.jpm)
end
local function forget_client(client)
  redis.call('HDEL', K_CLIENTS, client)
  redis.call('ZREM', K_REFILLS, client)
end
-- Clients holding no place whose bucket is full by `now` (at most `limit` of them, nil: all).
local function forget_full_buckets(now, limit)
  while true do
    local due
    if limit then
      due = redis.call('ZRANGEBYSCORE', K_REFILLS, '-inf', now, 'LIMIT', 0, limit)
    else
      due = redis.call('ZRANGEBYSCORE', K_REFILLS, '-inf', now, 'LIMIT', 0, 1000)
    end
    for _, client in ipairs(due) do redis.call('HDEL', K_CLIENTS, client) end
    if #due > 0 then redis.call('ZREM', K_REFILLS, unpack(due)) end
    if limit or #due < 1000 then return end
  end
end
local function refill_all_buckets(now)
  redis.call('DEL', K_REFILLS)
  local all = redis.call('HGETALL', K_CLIENTS)
  for i = 1, #all, 2 do
    local e = cget(all[i])
    if e.places == 0 then
      redis.call('HDEL', K_CLIENTS, all[i])
    else
      e.debt, e.at = 0, now
      cput(all[i], e)
    end
  end
end
-- A join of x made as `client`: counted, a token taken (tracked joins only).
local function count_join(x, client, now)
  if client == '' or not limits_clients() then return end
  local e = cget(client) or {places = 0, debt = 0, at = 0}
  e.places = e.places + 1
  redis.call('ZREM', K_REFILLS, client)
  if R.jpm >= 0 then
    e.debt = debt_at(e, now) + TOKEN_UNITS
    e.at = now
  end
  cput(client, e)
  x.client = client
end
-- x is gone: its client holds one place less.
local function count_gone(x)
  if x.client == nil or x.client == '' then return end
  local e = cget(x.client)
  if not e then return end
  e.places = e.places - 1
  if e.places > 0 then return cput(x.client, e) end
  if debt_at(e, R.now) == 0 then return forget_client(x.client) end
  cput(x.client, e)
  redis.call('ZADD', K_REFILLS, full_at(e), x.client)
end
-- Why a join must be refused now: {code, [retry ms,] message}, or nil.
local function join_refusal(client, bits, max_clients)
  if R.pow >= 0 and bits < R.pow then
    return {'challenge_required', 'joining this room takes a solved challenge of ' .. s(R.pow) ..
            " bits (room setting 'challenge')"}
  end
  if client == '' or not limits_clients() then return nil end
  local e = cget(client)
  if e and e.places == 0 and debt_at(e, R.now) == 0 then  -- due to be forgotten: it is new
    forget_client(client)
    e = nil
  end
  if not e then
    if redis.call('HLEN', K_CLIENTS) >= max_clients then forget_full_buckets(R.now, nil) end
    if redis.call('HLEN', K_CLIENTS) < max_clients then return nil end
    return {'rate_limited', 60000, 'this room keeps per-client limits for as many clients as it ' ..
            'can (' .. s(max_clients) .. '); retry later'}
  end
  if R.ppc >= 0 and e.places >= R.ppc then
    return {'rate_limited', math.max(R.cto, 1000), 'places_per_client: this client already ' ..
            'holds as many places in this room as it may (' .. s(R.ppc) .. '); give one up ' ..
            '(leave, or let it drop out) first'}
  end
  if R.jpm >= 0 then
    local over = debt_at(e, R.now) + TOKEN_UNITS - TOKEN_UNITS * R.jpm
    if over > 0 then
      return {'rate_limited', math.ceil(over / R.jpm), 'joins_per_minute_per_client: this ' ..
              'client has used up its ' .. s(R.jpm) .. ' joins a minute in this room'}
    end
  end
  return nil
end
local function due_key(x)
  if x.st == 'w' then return key(x.last_seen + R.cto, KIND_DROPOUT) end
  if x.st == 'a' then
    local t = NEVER
    if R.idle >= 0 then t = x.last_seen + R.idle end
    if not x.claimed then t = math.min(t, x.since + R.cto) end
    if t == NEVER then return nil end
    return key(t, KIND_OTHER)
  end
  if x.st == 'g' then return key(x.since, KIND_OTHER) end
  return nil
end
local function set_deadline(x)
  local k = due_key(x)
  if k then redis.call('ZADD', K_DEADLINES, k, x.id) else redis.call('ZREM', K_DEADLINES, x.id) end
end
-- Lowers the heap key if the true deadline moved earlier (a later one is re-keyed lazily).
local function reschedule(x)
  local k = due_key(x)
  local cur = redis.call('ZSCORE', K_DEADLINES, x.id)
  if k and (not cur or k < tonumber(cur)) then redis.call('ZADD', K_DEADLINES, k, x.id) end
  if not k and cur then redis.call('ZREM', K_DEADLINES, x.id) end
end
local function free(x)
  bump()
  count_gone(x)
  redis.call('HDEL', K_SESSIONS, x.id)
  redis.call('ZREM', K_DEADLINES, x.id)
end
local function revoke(x, now)
  redis.call('HSET', K_REVOKED, x.id, s(x.admission))
  redis.call('ZADD', K_REVOKED_EXPIRY, now + ttl, x.id)
  R.rvmin = math.min(R.rvmin, now + ttl)
end
local function release(x, now, dropped)
  R.holders = R.holders - 1
  R.released = R.released + 1
  if dropped then R.dropped = R.dropped + 1 end
  R.fw = win_add(R.fw, now)
  redis.call('HDEL', K_REVOKED, '#' .. s(x.admission))
  revoke(x, now)
  free(x)
end
local function drop_waiting(x)
  line_remove(x.id)
  free(x)
end
local function admit(id, now)
  local x = get(id)
  line_remove(id)
  bump()
  x.st, x.claimed, x.since, x.last_seen = 'a', false, now, now
  R.adm = R.adm + 1
  x.admission = R.adm
  redis.call('HSET', K_REVOKED, '#' .. s(x.admission), id)
  R.holders = R.holders + 1
  R.admitted = R.admitted + 1
  R.aw = win_add(R.aw, now)
  put(x)
  set_deadline(x)
end
local function fill(now)
  if R.paused == 1 then return end  -- freed slots stay free until an admin resumes
  while R.holders < R.cap do
    if R.apm >= 0 and win_count(R.aw, now) >= R.apm then return end
    local first = redis.call('ZRANGE', K_LINE, 0, 0)[1]
    if not first then return end
    admit(first, now)
  end
end
local function rate_open_key(now)
  if R.paused == 1 or R.apm < 0 or R.holders >= R.cap or redis.call('ZCARD', K_LINE) == 0 then
    return NEVER
  end
  return key(win_next_below(R.aw, now, R.apm), KIND_OTHER)
end

-- ---- time -----------------------------------------------------------------------------------
-- `at`: the deadline's own time (when is the room's, later if a reconfiguration moved it into the
-- past); an idle expiry keyed before the claim deadline is an idle expiry (as core/room.cc).
local function process_due(x, when, at)
  if x.st == 'w' then
    R.dropped = R.dropped + 1
    drop_waiting(x)
  elseif x.st == 'a' then
    if not x.claimed and x.since + R.cto <= at then
      release(x, when, true)
    else  -- idle: as if it had left at this moment
      bump()
      x.st, x.since = 'g', when + R.grace
      put(x)
      set_deadline(x)
    end
  elseif x.st == 'g' then
    release(x, when, false)
  end
end

-- rvmin: the earliest time a revocation may be forgotten, so most calls skip this.
local function forget_old_revocations(now)
  if now < R.rvmin then return end
  local old = redis.call('ZRANGEBYSCORE', K_REVOKED_EXPIRY, '-inf', now, 'LIMIT', 0, 256)
  for _, id in ipairs(old) do redis.call('HDEL', K_REVOKED, id) end
  if #old > 0 then redis.call('ZREM', K_REVOKED_EXPIRY, unpack(old)) end
  local first = redis.call('ZRANGE', K_REVOKED_EXPIRY, 0, 0, 'WITHSCORES')
  R.rvmin = first[1] and tonumber(first[2]) or NEVER
end

local function advance(now)
  local target = math.max(now, R.now)
  while true do
    local top = redis.call('ZRANGE', K_DEADLINES, 0, 0, 'WITHSCORES')
    local heap_key = top[1] and tonumber(top[2]) or NEVER
    local rate_key = rate_open_key(R.now)
    local k = math.min(heap_key, rate_key)
    if k == NEVER or math.floor(k / 2) > target then break end
    local when = math.max(math.floor(k / 2), R.now)
    local again = false
    if heap_key <= rate_key then
      local x = get(top[1])
      local due = x and due_key(x)
      if due ~= heap_key then  -- a lazy key: the session was seen since
        if due then
          redis.call('ZADD', K_DEADLINES, due, top[1])
        else
          redis.call('ZREM', K_DEADLINES, top[1])
        end
        again = true
      else
        R.now = when
        process_due(x, when, math.floor(heap_key / 2))
      end
    end
    if not again then
      R.now = when
      fill(when)
    end
  end
  R.now = target
  forget_old_revocations(R.now)
  -- Refills pend only while a rate is set (changing it empties them): most rooms skip this.
  -- 256 at most here; a join refused for a full table forgets all that are due first.
  if R.jpm >= 0 then forget_full_buckets(R.now, 256) end
end

local function next_deadline()
  local top = redis.call('ZRANGE', K_DEADLINES, 0, 0, 'WITHSCORES')
  local k = math.min(top[1] and tonumber(top[2]) or NEVER, rate_open_key(R.now))
  if k == NEVER then return NEVER end
  return math.floor(k / 2)
end
-- The backend keeps a registry of when each room next needs the sweeper. `hint` is the
-- deadline last reported; a script answers a lower one so the registry is lowered too.
local function to_register(force) return register_deadline(R, next_deadline(), force) end

-- ---- answers --------------------------------------------------------------------------------
-- The freed count of the window as of `now`, counted once per call for a given window and second:
-- a `present` answers up to 2,000 waiting sessions, each with an ETA from the same count.
local freed_w, freed_sec, freed_n
local function freed_now(now)
  local sec = second_of(now)
  if freed_w ~= R.fw or freed_sec ~= sec then
    freed_w, freed_sec, freed_n = R.fw, sec, win_count(R.fw, now)
  end
  return freed_n
end
local function eta(position, now)
  if R.paused == 1 then return -1 end
  local freed = freed_now(now)
  if freed == 0 then return -1 end
  local e = math.ceil(position * 60000 / freed)
  if R.apm >= 0 then e = math.max(e, math.ceil(position * 60000 / R.apm)) end
  return e
end
local function waiting() return redis.call('ZCARD', K_LINE) end
-- {status, position, waiting, active, capacity, eta (-1: unknown), admission}
local function view(x)
  if not x then return {'gone', 0, waiting(), R.holders, R.cap, -1, 0} end
  if x.st == 'w' then
    local pos = redis.call('ZRANK', K_LINE, x.id) + 1
    return {'waiting', pos, waiting(), R.holders, R.cap, eta(pos, R.now), 0}
  end
  local st = x.st == 'a' and 'active' or 'grace'
  return {st, 0, waiting(), R.holders, R.cap, 0, x.admission, R.inc}
end
-- A check-in of a known session: now present; grace ends, an admission is claimed.
local function claim_presence(x)
  x.last_seen = R.now
  if x.st == 'g' or (x.st == 'a' and not x.claimed) then
    if x.st == 'g' then bump() end
    x.st, x.claimed = 'a', true
    put(x)
    reschedule(x)
  else
    put(x)
  end
end
-- The gate's text, or false (a nil reply) when there is none. A gate of another incarnation was
-- left behind by a process whose script predates KEYS[9]: it deleted the room without it (and
-- may have made it again), so that gate is not this room's.
local function gate_text()
  local v = redis.call('GET', K_GATE)
  if not v then return false end
  local colon = string.find(v, ':', 1, true)
  if not colon or string.sub(v, 1, colon - 1) ~= s(R.inc) then return false end
  return string.sub(v, colon + 1)
end
-- The room's settings and counts; the gate last.
local function info()
  return {R.cap, R.grace, R.cto, R.idle, R.apm, R.holders, waiting(), R.admitted, R.dropped,
          R.released, R.paused, R.url, R.jpm, R.ppc, R.pow, gate_text()}
end
-- The line as one string, "VER\nID\nID...", built once per version and kept (KEYS[10], for a
-- minute): every process's live channels poll the line, and a GET of one string costs Redis a
-- copy where a ZRANGE of the whole line (per process, per version) built one reply element per
-- session. Ids never hold '\n' (names are [A-Za-z0-9._:-]).
local function line_snapshot(ver)
  local kept = redis.call('GET', K_LINE_SNAPSHOT)
  if kept and string.sub(kept, 1, #ver + 1) == ver .. '\n' then return kept end
  local out = ver .. '\n' .. table.concat(redis.call('ZRANGE', K_LINE, 0, -1), '\n')
  redis.call('SET', K_LINE_SNAPSHOT, out, 'PX', 60000)
  return out
end
-- The entries of KEYS[11] that take the line of version `from` (of incarnation `inc`) to
-- R.ver, oldest first; nil when the log no longer holds them all, or when they name more
-- sessions than a quarter of the line (then the snapshot is the cheaper read). Read from the
-- newest back, a few entries at a time: a process one change behind reads one entry.
local function line_deltas(from, inc)
  if not from or inc ~= R.inc or from <= 0 or from > R.ver then return nil end
  local out = {}
  if from == R.ver then return out end
  local limit = math.max(DELTA_MIN_IDS, math.floor(waiting() / 4))
  local want, ids, got = R.ver, 0, 0
  local span = math.min(R.ver - from, LOG_ENTRIES)  -- each entry moves the version on by >= 1
  local chunk = math.min(span, 4)
  while chunk > 0 do
    local part = redis.call('LRANGE', K_LINE_DELTAS, -(got + chunk), -(got + 1))
    for i = #part, 1, -1 do
      local e = part[i]
      local ei, eo, en, ek = string.match(e, '^(%d+) (%d+) (%d+) (%d+)')
      if not ek or tonumber(ei) ~= R.inc or tonumber(en) ~= want then return nil end
      ids = ids + tonumber(ek)
      if ids > limit then return nil end
      out[#out + 1] = e
      want = tonumber(eo)
      if want <= from then
        if want < from then return nil end
        local n = #out
        for j = 1, math.floor(n / 2) do out[j], out[n + 1 - j] = out[n + 1 - j], out[j] end
        return out
      end
    end
    if #part < chunk then return nil end  -- the log ends before `from`
    got = got + chunk
    chunk = math.min(chunk * 4, span - got)
  end
  return nil
end
-- Every answer: {'ok', register, payload...}
local function answer(register, ...)
  save()
  return {'ok', register, ...}
end

-- ---- operations -----------------------------------------------------------------------------
local function main()
  local now = now_ms()

  if op == 'put' then
    -- ARGV 4..8: capacity grace cto idle apm ('' = keep; idle/apm -1 = none)
    -- ARGV 9: paused ('' = keep, '0', '1')  10: target URL ('' = keep, '-' = clear, '=URL' = set)
    -- ARGV 11..13: jpm ppc pow ('' = keep, -1 = none)  14: the incarnation, if this creates it
    -- ARGV 15: gate ('' = keep, '-' = clear, '=TEXT' = set)
    local patch = {cap = ARGV[4], grace = ARGV[5], cto = ARGV[6], idle = ARGV[7], apm = ARGV[8],
                   paused = ARGV[9], jpm = ARGV[11] or '', ppc = ARGV[12] or '', pow = ARGV[13] or ''}
    local url = ARGV[10] or ''
    local gate = ARGV[15] or ''
    local exists = load()
    if not exists then
      if patch.cap == '' then return {'invalid_argument', MSG.capacity_required} end
      R = {cap = RULES.capacity, grace = RULES.grace_ms, cto = RULES.checkin_timeout_ms,
           idle = RULES.idle_timeout_ms, apm = -1, now = now, holders = 0,
           adm = 0, seq = 0, admitted = 0, dropped = 0, released = 0, hint = NEVER, rvmin = NEVER,
           aw = '', fw = '', paused = 0, url = '', ver = now * 1000, jpm = -1, ppc = -1, pow = -1,
           inc = tonumber(ARGV[14] or '0') or 0}
      redis.call('DEL', K_LINE_DELTAS)  -- one left by a process whose script predates KEYS[11]
    else
      advance(now)
    end
    -- Debts are in units of the old rate: every bucket starts full rather than be converted.
    local new_rate = patch.jpm ~= '' and tonumber(patch.jpm) ~= R.jpm
    for f, v in pairs(patch) do if v ~= '' then R[f] = tonumber(v) end end
    if new_rate then refill_all_buckets(R.now) end
    if url == '-' then R.url = '' elseif url ~= '' then R.url = string.sub(url, 2) end
    -- A new room starts without a gate (one left behind, see gate_text, is removed).
    if gate == '-' or (not exists and gate == '') then
      redis.call('DEL', K_GATE)
    elseif gate ~= '' then
      redis.call('SET', K_GATE, s(R.inc) .. ':' .. string.sub(gate, 2))
    end
    bump()
    if exists and (patch.grace ~= '' or patch.cto ~= '' or patch.idle ~= '') then
      local all = redis.call('HGETALL', K_SESSIONS)
      for i = 1, #all, 2 do set_deadline(get(all[i])) end
    end
    fill(R.now)
    return answer(to_register(true), info())
  end

  if not load() then return {'unknown_room'} end

  if op == 'get' then
    advance(now)
    return answer(to_register(false), info())
  elseif op == 'advance' then  -- the sweeper: answers the next deadline (and records it)
    advance(now)
    return answer(to_register(true))
  elseif op == 'hint' then  -- the sweeper, after recording that: the deadline last reported
    return {'ok', R.hint}
  elseif op == 'delete' then
    advance(now)
    local out = info()
    redis.call('DEL', K_META, K_LINE, K_SESSIONS, K_DEADLINES, K_REVOKED, K_REVOKED_EXPIRY,
               K_CLIENTS, K_REFILLS, K_GATE, K_LINE_SNAPSHOT, K_LINE_DELTAS)
    return {'ok', -1, out}
  elseif op == 'check' then
    -- ARGV 5: the client ('' = none)  6: proof bits  7: clients the room may keep state for
    local id, client = ARGV[4], ARGV[5] or ''
    advance(now)
    local x = get(id)
    if not x then
      local refusal = join_refusal(client, tonumber(ARGV[6] or '0'), tonumber(ARGV[7] or '0'))
      if refusal then
        local reg = to_register(false)
        save()
        if refusal[1] == 'challenge_required' then return {refusal[1], reg, refusal[2]} end
        return {refusal[1], reg, refusal[2], refusal[3]}
      end
      R.seq = R.seq + 1
      line_add(id)
      bump()
      x = {id = id, st = 'w', last_seen = R.now, since = 0, admission = 0, claimed = false}
      count_join(x, client, R.now)
      put(x)
      set_deadline(x)
      fill(R.now)
      x = get(id)
    end
    claim_presence(x)
    return answer(to_register(false), view(x))
  elseif op == 'present' then  -- live connections: a check-in of each known session, no joins
    advance(now)
    local views = {}
    for i = 4, #ARGV do
      local x = get(ARGV[i])
      if x then claim_presence(x) end
      views[#views + 1] = view(x)
    end
    return answer(to_register(false), views)
  elseif op == 'line' then
    -- Live channels: the counts, and the line when ver moved on (ARGV 4: the caller's version).
    -- ARGV 5, 6: the version and incarnation of the line the calling process keeps ('' or 0:
    -- none). The line is then answered as the entries of KEYS[11] from that version on (an
    -- array) when the log holds them and they are few, else as the snapshot (a string).
    advance(now)
    log_delta()  -- this call's own changes (advance) first: the entries reach R.ver
    local ver = R.ver or 0
    local line = ''
    if s(ver) ~= ARGV[4] then
      line = line_deltas(tonumber(ARGV[5] or ''), tonumber(ARGV[6] or '')) or line_snapshot(s(ver))
    end
    return answer(to_register(false), {ver, R.holders, waiting(), R.cap, win_count(R.fw, R.now),
                                       R.apm, R.cto, R.idle, R.paused, R.inc}, line)
  elseif op == 'touch' or op == 'leave' or op == 'evict' then
    local id = ARGV[4]
    advance(now)
    local x = get(id)
    if not x then
      local reg = to_register(false)
      save()
      return {'unknown_session', reg}
    end
    if op == 'touch' then
      x.last_seen = R.now
      if x.st == 'g' then x.st = 'a'; bump() end
      put(x)
      reschedule(x)
      return answer(to_register(false), view(x))
    end
    if op == 'leave' and x.st ~= 'w' and ARGV[5] ~= '1' then
      if x.st == 'a' then
        bump()
        x.st, x.since = 'g', R.now + R.grace
        put(x)
        reschedule(x)
      end
      return answer(to_register(false), view(x))
    end
    if x.st == 'w' then
      drop_waiting(x)
    else
      release(x, R.now, false)
      fill(R.now)
    end
    return answer(to_register(false), view(nil))
  elseif op == 'holder' then
    -- ARGV 4: incarnation  5: admission. Answers the session holding it, '' when none.
    advance(now)
    if tonumber(ARGV[4]) ~= R.inc then return answer(to_register(false), '') end
    local id = redis.call('HGET', K_REVOKED, '#' .. ARGV[5])
    if not id and R.inc == 0 then
      -- A room from before this index: its holders are found once by a scan, then indexed.
      local all = redis.call('HGETALL', K_SESSIONS)
      for i = 1, #all, 2 do
        local x = get(all[i])
        if x.st ~= 'w' and s(x.admission) == ARGV[5] then
          redis.call('HSET', K_REVOKED, '#' .. ARGV[5], x.id)
          id = x.id
        end
      end
    end
    return answer(to_register(false), id or '')
  elseif op == 'revoked' then
    local id, adm = ARGV[4], tonumber(ARGV[5])
    advance(now)
    local r = redis.call('HGET', K_REVOKED, id)
    return answer(to_register(false), (r and adm <= tonumber(r)) and 1 or 0)
  end
  return {'invalid_argument', 'unknown room operation ' .. tostring(op)}
end

-- The entry point, called with the keys and arguments of one call: by FCALL, as a function of
-- the library this file becomes (Redis 7), or by the EVAL script it also becomes (Redis 6).
-- See Script in src/store/redis/cluster_client.h.
local function run(keys, argv)
  KEYS, ARGV = keys, argv
  K_META, K_LINE, K_SESSIONS, K_DEADLINES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  K_REVOKED, K_REVOKED_EXPIRY, K_CLIENTS, K_REFILLS = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
  K_GATE, K_LINE_SNAPSHOT, K_LINE_DELTAS = KEYS[9], KEYS[10], KEYS[11]
  op, ttl = ARGV[1], tonumber(ARGV[3])
  R, call_deltas, ver0 = {}, {}, nil
  freed_w, freed_sec, freed_n = nil, nil, nil
  return main()
end
