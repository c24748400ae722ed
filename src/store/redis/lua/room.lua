-- One waiting room, as one atomic script (src/store/redis/lua/room.lua).
-- The same rules as src/core/room.cc, over Redis structures; docs/design.md lists the keys.
--
-- KEYS: 1 meta (string: msgpack of FIELDS)  2 line (zset: session -> ticket, the front line's
--         below LINE_LOWEST, then arrival tickets; ZRANK = exact position: see front_add)
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
--       12 events (string: msgpack array of the room's scheduled events, in the order they open;
--         read only when the schedule is asked for or changes, or a stage change is due: what
--         every call needs of it is cached in KEYS[1], see compute_next_boundary)
--       13 pre-queue (zset: session -> arrival ticket; the sessions in status 'p' that no draw
--         holds, in arrival order)
--       14 draw (zset: the pre-queue as it stood when its event started, renamed from KEYS[13]
--         in O(1), in arrival order: a draw's rank r is its arrival number r; kept, never
--         shortened, until every position is published, then unlinked. A session in status 'p'
--         that is not in KEYS[13] is in the draw and not published yet)
--       15 passes (hash: pass id -> "KIND:USES:LEFT:CREATED:EXPIRES:DIGEST", see load_pass; read
--         only by the passes' operations and by a check that carries a pass)
--       16 page (string: "INC:TEXT", the room's waiting-page settings, kept as KEYS[9] is)
-- ARGV: 1 op  2 now ms ('' = Redis TIME)  3 token ttl ms  4 entropy (32 random bytes from the
--       calling process's CSPRNG, fresh for each call, in hex: see ENTROPY)  5.. the op's
--       arguments
-- Answers start with a status word: 'ok', or an error code the backend maps to OpStatus.
-- Invariants: holders <= capacity (unless lowered, or under passthrough); nobody waits while
-- holders < capacity unless the room is paused, braked (queue_all) or the rate cap forbids it;
-- the line is admitted in arrival order (fifo) or by a uniform draw from it (random), and a
-- method switch never reorders it; the rules read the effective settings (cfg: the room's own
-- with a running event's overrides); GetRoom answers both (info).

-- Deadline kinds, in the order deadlines at equal times go (core::Room's).
local KIND_DROPOUT, KIND_OTHER = RULES.kind_dropout, RULES.kind_other
local TOKEN_UNITS = RULES.token_units  -- a join's share of a bucket; refilled at jpm units per ms
local WINDOW_SECONDS = RULES.window_seconds  -- a minute window (core::MinuteWindow)
local METHOD, STAGE = RULES.method, RULES.stage  -- core::QueueingMethod names, EventStage codes
-- Set by run() for each call, beside KEYS and ARGV (prelude.lua): how long a revocation is kept.
local revocation_ttl
-- Set by run(): ARGV[4]. Redis has no randomness a script may use (math.random is seeded alike
-- for every call, and a script must stay a function of its keys and arguments for replication
-- and AOF), so the calling process sends 32 bytes from its CSPRNG with every call, as 64 hex
-- digits (printable in MONITOR, SLOWLOG and the benchmarks' parsers): the seed of a draw that
-- starts during the call (the bytes, as the core's DrawSeed), and the key of the random
-- method's picks (random_word). A process passes them whether or not they are used: which
-- calls will need them only the script knows.
local ENTROPY
local function entropy_bytes()
  return (string.gsub(ENTROPY, '%x%x', function(h) return string.char(tonumber(h, 16)) end))
end
-- The keys, named as KEYS above lists them.
local K_META, K_LINE, K_SESSIONS, K_DEADLINES, K_REVOKED, K_REVOKED_EXPIRY, K_CLIENTS, K_REFILLS
local K_GATE, K_LINE_SNAPSHOT, K_LINE_DELTAS, K_EVENTS, K_PREQUEUE, K_DRAW, K_PASSES, K_PAGE
-- The line's changes made by this call since its last log entry, in order (see log_delta), and
-- the version they start from (nil: the room was made by this call, and its log reset).
-- call_reordered: this call put someone ahead of the line (or emptied it at once): no entry of
-- it can be read as appends and removals, so its entry says '-' (readers take the snapshot).
local call_deltas, ver0, call_reordered

local function deadline_key(when, kind) return when * 2 + kind end

-- ---- the room's scalar state: one msgpack array in KEYS[1], read once, written once -------
local room = {}
-- The settings the rules read (core Room::effective()): the room's own (room.cap, ...) with the
-- overrides of the event running (room.ov); made by effective() whenever either changes.
local cfg = {}
-- New fields go at the end, with a default for state written before they existed (below).
-- paused: 0/1; url: the target URL, '' when unset (never nil: a nil would end the array).
-- jpm, ppc, pow: joins_per_minute_per_client, places_per_client, challenge difficulty; -1 off.
-- inc: the room's incarnation (random, chosen by the creating process; 0 for older rooms).
-- qm: the room's own queueing method (a METHOD name). Cached from KEYS[12] by
-- compute_next_boundary (core Room's next_boundary_, open_, upcoming_): nb, the next stage
-- change of an event not suspended (NEVER: none); pq, 1 while an event's pre-queue is open;
-- es, ee: starts_at and ends_at of the event statuses speak of (open, else the next scheduled;
-- -1: none); ov, the overrides of the event running (a table, false: none). dr: the draw being
-- published (false: none), {ev = event id, sh = 1 shuffled / 0 arrival order, at, n = its
-- people, pub = positions published, seed = the seed's 32 bytes ('' unshuffled)}.
-- ns: the room's count of its lifecycle events (core Room's notice_seq_; see note).
-- fw: the minute window of freed slots an older script kept (no longer written or read).
-- fo, fi: the flow histories of the ETA (flow_add): slots freed, joins to the line.
-- nap: notify_at_position (-1 off); nf: the waiting's prefix told room.position_near (see
-- settle_near).
-- FIELDS, the array's order: cap grace cto idle apm now holders adm seq admitted dropped
-- released hint rvmin aw fw paused url ver jpm ppc pow inc qm nb pq es ee ov dr ns fo fi nap nf
local DEFAULTS = {paused = 0, url = '', ver = 0, jpm = -1, ppc = -1, pow = -1, inc = 0,
                  qm = METHOD.fifo, nb = NEVER, pq = 0, es = -1, ee = -1, ov = false, dr = false,
                  ns = 1, fo = '', fi = '', nap = -1, nf = 0}
local function effective()
  local r, o = room, room.ov or {}
  -- The brake is the operator's: an event's method never lets go of it.
  local qm = r.qm
  if o.qm and r.qm ~= METHOD.queue_all then qm = o.qm end
  cfg = {cap = o.cap or r.cap, grace = o.grace or r.grace, cto = o.cto or r.cto,
         apm = o.apm or r.apm, qm = qm, idle = r.idle}
end
-- load_room and save_room spell FIELDS out, in order, with DEFAULTS: a table built by one
-- constructor is sized once, where filling it in a loop over FIELDS grew it five times (2.6 us
-- a call, half of what reading and writing the state costs; scripts/bench-redis.sh).
local function load_room()
  local v = redis.call('GET', K_META)
  if not v then return false end
  local t = cmsgpack.unpack(v)
  local d = DEFAULTS
  room = {cap = t[1], grace = t[2], cto = t[3], idle = t[4], apm = t[5], now = t[6], holders = t[7],
          adm = t[8], seq = t[9], admitted = t[10], dropped = t[11], released = t[12], hint = t[13],
          rvmin = t[14], aw = t[15], fw = t[16], paused = t[17] or d.paused, url = t[18] or d.url,
          ver = t[19] or d.ver, jpm = t[20] or d.jpm, ppc = t[21] or d.ppc, pow = t[22] or d.pow,
          inc = t[23] or d.inc, qm = t[24] or d.qm, nb = t[25] or d.nb, pq = t[26] or d.pq,
          es = t[27] or d.es, ee = t[28] or d.ee, ov = t[29] or d.ov, dr = t[30] or d.dr,
          ns = t[31] or d.ns, fo = t[32] or d.fo, fi = t[33] or d.fi, nap = t[34] or d.nap,
          nf = t[35] or d.nf}
  ver0 = room.ver
  effective()
  return true
end
local log_delta
local function save_room()
  log_delta()
  local r = room
  redis.call('SET', K_META, cmsgpack.pack({r.cap, r.grace, r.cto, r.idle, r.apm, r.now, r.holders,
             r.adm, r.seq, r.admitted, r.dropped, r.released, r.hint, r.rvmin, r.aw, r.fw,
             r.paused, r.url, r.ver, r.jpm, r.ppc, r.pow, r.inc, r.qm, r.nb, r.pq, r.es, r.ee, r.ov,
             r.dr, r.ns, r.fo, r.fi, r.nap, r.nf}))
  flush_told()
end

-- ---- lifecycle events (core Room::Note) -------------------------------------------------------
-- Counted always (room.ns), so a room's sequence is the core's; told to the feed (prelude.lua)
-- when the call's state is written. `x`: the session it is about (nil: the room's own);
-- `position`: room.position_near's.
local NOTICE = RULES.notice
local room_name
local function note(kind, at, x, detail, position)
  room.ns = room.ns + 1
  if not K_FEED then return end
  room_name = room_name or string.match(K_META, '{r:(.*)}:m$')
  local f = {'t', kind, 'at', digits(at), 'r', room_name, 'n', digits(room.ns)}
  if x then
    f[#f + 1], f[#f + 2] = 's', x.id
    if kind == NOTICE.admitted then f[#f + 1], f[#f + 2] = 'a', digits(x.admission) end
  end
  if detail then f[#f + 1], f[#f + 2] = 'd', detail end
  if position then f[#f + 1], f[#f + 2] = 'p', digits(position) end
  tell(f)
end
-- A new room's first event, numbered with the count it starts from (core: the backend tells it).
local function note_created(now)
  if not K_FEED then return end
  room_name = room_name or string.match(K_META, '{r:(.*)}:m$')
  tell({'t', NOTICE.created, 'at', digits(now), 'r', room_name, 'n', digits(room.ns)})
end

-- ---- flow histories (core::FlowHistory): "START|BUCKET:COUNT,..." -------------------------
-- Events counted in FLOW_BUCKET_MS buckets (numbered ms / FLOW_BUCKET_MS, floored), ascending,
-- only the last FLOW_BUCKETS kept; START is when the first event after a quiet window came.
-- The backend reads them (script_replies.cc ParseFlowHistory) and makes the rates with the
-- core's formula (core::EstimateFlow), so both backends give equal ETAs.
local FLOW_BUCKET_MS, FLOW_BUCKETS = RULES.flow_bucket_ms, RULES.flow_buckets
local function flow_add(w, now)
  local b = math.floor(now / FLOW_BUCKET_MS)
  -- Most events fall in the newest bucket: one match, no parse of the rest.
  local head, last, count = string.match(w, '^(.*[|,])(%-?%d+):(%d+)$')
  if last and tonumber(last) >= b then return head .. last .. ':' .. digits(tonumber(count) + 1) end
  local start, body = string.match(w, '^(%-?%d+)|(.*)$')
  local out = {}
  if start then
    for bs, bc in string.gmatch(body, '(%-?%d+):(%d+)') do
      if tonumber(bs) > b - FLOW_BUCKETS then out[#out + 1] = bs .. ':' .. bc end
    end
  end
  if #out == 0 then start = digits(now) end
  out[#out + 1] = digits(b) .. ':1'
  return start .. '|' .. table.concat(out, ',')
end

-- ---- minute windows: "TOTAL NEWEST|second:count,..." over the last WINDOW_SECONDS whole seconds
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
      if not bs or tonumber(bs) > sec - WINDOW_SECONDS then return total end
      total, at = total - tonumber(bc), next_at
    end
  end
  for bs, bc in string.gmatch(w, '(%-?%d+):(%d+)') do
    bs = tonumber(bs)
    if bs > sec - WINDOW_SECONDS and bs <= sec then total = total + tonumber(bc) end
  end
  return total
end
local function win_add(w, now)
  local sec, out, added, total = second_of(now), {}, false, 0
  local newest = sec
  for bs, bc in string.gmatch(w, '(%-?%d+):(%d+)') do
    local b = tonumber(bs)
    if b > sec - WINDOW_SECONDS then
      if b == sec then bc = digits(tonumber(bc) + 1); added = true end
      out[#out + 1] = bs .. ':' .. bc
      total, newest = total + tonumber(bc), b
    end
  end
  if not added then
    out[#out + 1] = digits(sec) .. ':1'
    total, newest = total + 1, sec
  end
  return digits(total) .. ' ' .. digits(newest) .. '|' .. table.concat(out, ',')
end
-- The earliest time >= now at which the count falls below limit.
local function win_next_below(w, now, limit)
  local count = win_count(w, now)
  if count < limit then return now end
  local sec = second_of(now)
  for bs, bc in string.gmatch(w, '(%-?%d+):(%d+)') do  -- ascending seconds
    local b = tonumber(bs)
    if b > sec - WINDOW_SECONDS and b <= sec then
      count = count - tonumber(bc)
      if count < limit then return (b + WINDOW_SECONDS) * 1000 end
    end
  end
  return (sec + 1) * 1000
end

-- ---- sessions -------------------------------------------------------------------------------
-- ver: bumped by every change of the line or of a holder's status (live channels re-read the
-- line only then). Rooms saved before it existed start from 0.
local function bump_version() room.ver = (room.ver or 0) + 1 end
-- The log keeps the last LOG_ENTRIES entries (up to 64 more between trims), until a minute after
-- every 64th: about as long as a process keeps a line it no longer reads (a minute).
local LOG_ENTRIES, LOG_MS = 1024, 60000
-- Deltas naming more sessions than this, or than a quarter of the line, are not worth reading;
-- nor, to bound the log, entries of more than DELTA_MAX_IDS.
local DELTA_MIN_IDS, DELTA_MAX_IDS = 64, 4096
-- At the end of the line (the ticket room.seq, which the caller has just taken).
local function line_add(id)
  if redis.call('ZADD', K_LINE, room.seq, id) == 1 then
    call_deltas[#call_deltas + 1] = '+' .. id
  end
end
-- Before `id` leaves KEYS[2]: the told prefix (settle_near) is the first room.nf of it, so one of
-- those leaving shortens it.
local function unprefix(id)
  if room.nf == 0 then return end
  local rank = redis.call('ZRANK', K_LINE, id)
  if rank and rank < room.nf then room.nf = room.nf - 1 end
end
local function line_remove(id)
  unprefix(id)
  if redis.call('ZREM', K_LINE, id) == 1 then call_deltas[#call_deltas + 1] = '-' .. id end
end
-- The front line (core Room::front_: waiting sessions that came with a pass, admitted before
-- the line, in the order they redeemed) is kept in KEYS[2] too, at tickets below every ordinary
-- one: the n-th of it (from 0) at FRONT_FIRST + n. So, with no key or field more, ZRANK + 1 is
-- the exact position (a rank in the front line, or its size + a rank in the line), ZRANGE reads
-- the front line then the line (the snapshot, passthrough's fill), ZCARD counts both
-- (waiting()), fifo's head is the front's, and a check that carries no pass costs what it did.
-- Ordinary tickets are room.seq, from 1 up, and tickets below the line's head for holders the
-- brake sends back (one per holder: they would need 2^51 of them to reach LINE_LOWEST); the
-- front line's n stays below 2^51 (far more than a room's passes can be used). Every ticket is
-- an integer a double holds exactly. What reads the line without its front: line_head, the
-- random pick (pick_next), the pre-queue that takes the line (open_prequeue).
local FRONT_FIRST, LINE_LOWEST = -4503599627370496, -2251799813685248  -- -2^52, -2^51
-- The first of the line behind the front line: its ticket and id (NEVER, nil: nobody).
local function line_head()
  local top = redis.call('ZRANGEBYSCORE', K_LINE, digits(LINE_LOWEST), '+inf', 'WITHSCORES',
                         'LIMIT', 0, 1)
  if top[1] then return tonumber(top[2]), top[1] end
  return NEVER, nil
end
-- At the end of the front line (core front_.PushBack), after whoever redeemed before. Ahead of
-- the line: for the line's delta log a reorder (readers take the snapshot: redemptions are
-- rare), unless nobody waits behind the front line, which makes it the end of the line.
local function front_add(id)
  local last = redis.call('ZREVRANGEBYSCORE', K_LINE, '(' .. digits(LINE_LOWEST), '-inf',
                          'WITHSCORES', 'LIMIT', 0, 1)
  local ticket = last[1] and tonumber(last[2]) + 1 or FRONT_FIRST
  redis.call('ZADD', K_LINE, digits(ticket), id)
  if line_head() == NEVER then
    call_deltas[#call_deltas + 1] = '+' .. id
  else
    call_reordered = true
  end
end
-- One entry per call that moved the version on, even with no change of the line (a holder's),
-- so that the entries chain version to version: a process that cached the line of version A
-- rebuilds version B from the entries A..B alone (line_deltas).
log_delta = function()
  if ver0 == nil or room.ver == ver0 then return end
  local head, n = digits(room.inc) .. ' ' .. digits(ver0) .. ' ' .. digits(room.ver) .. ' '
  if call_reordered then
    n = redis.call('RPUSH', K_LINE_DELTAS, head .. '-')
  elseif #call_deltas == 0 then
    n = redis.call('RPUSH', K_LINE_DELTAS, head .. '0')
  elseif #call_deltas > DELTA_MIN_IDS and
         (#call_deltas > DELTA_MAX_IDS or #call_deltas * 4 > redis.call('ZCARD', K_LINE)) then
    -- Not worth keeping: readers take a snapshot.
    n = redis.call('RPUSH', K_LINE_DELTAS, head .. '-')
  else
    n = redis.call('RPUSH', K_LINE_DELTAS,
                   head .. digits(#call_deltas) .. '\n' .. table.concat(call_deltas, '\n'))
  end
  if n > LOG_ENTRIES + 64 then redis.call('LTRIM', K_LINE_DELTAS, -LOG_ENTRIES, -1) end
  -- Expiring on each call would cost a join ~5 us.
  if n % 64 == 1 then redis.call('PEXPIRE', K_LINE_DELTAS, LOG_MS) end
  ver0, call_deltas, call_reordered = room.ver, {}, false
end
-- A session joined as a counted client carries ':CLIENT' at the end (clients contain ':').
-- The fifth field is a digit of flags: 1 claimed, 2 told room.position_near (near).
local function load_session(id)
  local v = redis.call('HGET', K_SESSIONS, id)
  if not v then return nil end
  local st, ls, since, adm, cl, client =
      string.match(v, '^(%a):(%-?%d+):(%-?%d+):(%d+):(%d):?(.*)$')
  cl = tonumber(cl)
  return {id = id, st = st, last_seen = tonumber(ls), since = tonumber(since),
          admission = tonumber(adm), claimed = cl % 2 == 1, near = cl >= 2, client = client}
end
local function save_session(x)
  local client = (x.client ~= nil and x.client ~= '') and (':' .. x.client) or ''
  local flags = (x.claimed and 1 or 0) + (x.near and 2 or 0)
  redis.call('HSET', K_SESSIONS, x.id, x.st .. ':' .. digits(x.last_seen) .. ':' ..
             digits(x.since) .. ':' .. digits(x.admission) .. ':' .. flags .. client)
end

-- ---- clients: per-client limits (the rules of src/core/room.h) ---------------------------------
local function limits_clients() return room.jpm >= 0 or room.ppc >= 0 end
local function load_client(client)
  local v = redis.call('HGET', K_CLIENTS, client)
  if not v then return nil end
  local places, debt, at = string.match(v, '^(%d+):(%d+):(%-?%d+)$')
  return {places = tonumber(places), debt = tonumber(debt), at = tonumber(at)}
end
local function save_client(client, e)
  redis.call('HSET', K_CLIENTS, client,
             digits(e.places) .. ':' .. digits(e.debt) .. ':' .. digits(e.at))
end
-- The bucket's debt at `now`: repaid at jpm units per ms since it was written.
local function debt_at(e, now)
  if room.jpm < 0 or e.debt == 0 then return 0 end
  local elapsed = now - e.at
  if elapsed >= math.ceil(e.debt / room.jpm) then return 0 end
  return e.debt - elapsed * room.jpm
end
local function full_at(e)
  if room.jpm < 0 then return e.at end
  return e.at + math.ceil(e.debt / room.jpm)
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
    local e = load_client(all[i])
    if e.places == 0 then
      redis.call('HDEL', K_CLIENTS, all[i])
    else
      e.debt, e.at = 0, now
      save_client(all[i], e)
    end
  end
end
-- A join of x made as `client`: counted, a token taken (tracked joins only).
local function count_join(x, client, now)
  if client == '' or not limits_clients() then return end
  local e = load_client(client) or {places = 0, debt = 0, at = 0}
  e.places = e.places + 1
  redis.call('ZREM', K_REFILLS, client)
  if room.jpm >= 0 then
    e.debt = debt_at(e, now) + TOKEN_UNITS
    e.at = now
  end
  save_client(client, e)
  x.client = client
end
-- x is gone: its client holds one place less.
local function count_gone(x)
  if x.client == nil or x.client == '' then return end
  local e = load_client(x.client)
  if not e then return end
  e.places = e.places - 1
  if e.places > 0 then return save_client(x.client, e) end
  if debt_at(e, room.now) == 0 then return forget_client(x.client) end
  save_client(x.client, e)
  redis.call('ZADD', K_REFILLS, full_at(e), x.client)
end
-- Why a join must be refused now: {code, [retry ms,] message}, or nil.
local function join_refusal(client, bits, max_clients)
  if room.pow >= 0 and bits < room.pow then
    return {'challenge_required', MSG.join_needs_challenge(digits(room.pow))}
  end
  if client == '' or not limits_clients() then return nil end
  local e = load_client(client)
  if e and e.places == 0 and debt_at(e, room.now) == 0 then  -- due to be forgotten: it is new
    forget_client(client)
    e = nil
  end
  if not e then
    if redis.call('HLEN', K_CLIENTS) >= max_clients then forget_full_buckets(room.now, nil) end
    if redis.call('HLEN', K_CLIENTS) < max_clients then return nil end
    return {'rate_limited', RULES.table_full_retry_ms, MSG.client_table_full(digits(max_clients))}
  end
  if room.ppc >= 0 and e.places >= room.ppc then
    return {'rate_limited', math.max(cfg.cto, RULES.places_retry_min_ms),
            MSG.places_per_client_used(digits(room.ppc))}
  end
  if room.jpm >= 0 then
    local over = debt_at(e, room.now) + TOKEN_UNITS - TOKEN_UNITS * room.jpm
    if over > 0 then
      return {'rate_limited', math.ceil(over / room.jpm),
              MSG.joins_per_minute_used(digits(room.jpm))}
    end
  end
  return nil
end
local function due_key(x)
  -- A pre-queued session keeps its place by checking in, as one waiting (core DueKey).
  if x.st == 'w' or x.st == 'p' then return deadline_key(x.last_seen + cfg.cto, KIND_DROPOUT) end
  if x.st == 'a' then
    local t = NEVER
    if room.idle >= 0 then t = x.last_seen + room.idle end
    if not x.claimed then t = math.min(t, x.since + cfg.cto) end
    if t == NEVER then return nil end
    return deadline_key(t, KIND_OTHER)
  end
  if x.st == 'g' then return deadline_key(x.since, KIND_OTHER) end
  return nil
end
local function set_deadline(x)
  local k = due_key(x)
  if k then redis.call('ZADD', K_DEADLINES, k, x.id) else redis.call('ZREM', K_DEADLINES, x.id) end
end
-- Every session's deadline keyed exactly again (core RekeyAll): after the settings they follow
-- changed. O(sessions) in one call, as the settings' change that asks for it.
-- With `seen_at`, everyone counts as seen then (core ApplyEffective's fresh presence).
local function rekey_all(seen_at)
  local all = redis.call('HGETALL', K_SESSIONS)
  for i = 1, #all, 2 do
    local x = load_session(all[i])
    if seen_at and x.last_seen < seen_at then
      x.last_seen = seen_at
      save_session(x)
    end
    set_deadline(x)
  end
end
-- Lowers the heap key if the true deadline moved earlier (a later one is re-keyed lazily).
local function reschedule(x)
  local k = due_key(x)
  local cur = redis.call('ZSCORE', K_DEADLINES, x.id)
  if k and (not cur or k < tonumber(cur)) then redis.call('ZADD', K_DEADLINES, k, x.id) end
  if not k and cur then redis.call('ZREM', K_DEADLINES, x.id) end
end
local function free_session(x)
  bump_version()
  count_gone(x)
  redis.call('HDEL', K_SESSIONS, x.id)
  redis.call('ZREM', K_DEADLINES, x.id)
end
local function revoke(x, now)
  redis.call('HSET', K_REVOKED, x.id, digits(x.admission))
  redis.call('ZADD', K_REVOKED_EXPIRY, now + revocation_ttl, x.id)
  room.rvmin = math.min(room.rvmin, now + revocation_ttl)
end
local function release(x, now, dropped)
  room.holders = room.holders - 1
  room.released = room.released + 1
  if dropped then room.dropped = room.dropped + 1 end
  room.fo = flow_add(room.fo, now)
  redis.call('HDEL', K_REVOKED, '#' .. digits(x.admission))
  revoke(x, now)
  free_session(x)
end
-- Out of the line it waits in (core Room::Unline): the line, or the pre-queue. One the draw
-- holds stays in KEYS[14]: publishing skips it when its place comes (it is gone by then).
local function unline(x)
  if x.st == 'w' then
    line_remove(x.id)
  elseif x.st == 'p' then
    redis.call('ZREM', K_PREQUEUE, x.id)
  end
end
local function drop_waiting(x)
  unline(x)
  free_session(x)
end
-- How long each session admitted in this call had waited in line (joined or sent back -> now),
-- for the calling process's room wait histogram: answered with the register (reply), so each
-- admission is counted once, by the process whose call made it. A session saved before join
-- times were kept (since 0) is not counted.
local waits
local function admit(id, now)
  local x = load_session(id)
  if x.since > 0 then waits[#waits + 1] = now - x.since end
  line_remove(id)
  bump_version()
  x.st, x.claimed, x.since, x.last_seen = 'a', false, now, now
  room.adm = room.adm + 1
  x.admission = room.adm
  redis.call('HSET', K_REVOKED, '#' .. digits(x.admission), id)
  room.holders = room.holders + 1
  room.admitted = room.admitted + 1
  note(NOTICE.admitted, now, x)
  room.aw = win_add(room.aw, now)
  save_session(x)
  set_deadline(x)
end
local function waiting() return redis.call('ZCARD', K_LINE) end

-- ---- queueing methods (core Room::Fill, PickNext) --------------------------------------------
-- The random method's words: the first 32 bits of SHA-1 over this call's ENTROPY and a counter,
-- a keyed stream as unpredictable as the entropy and as uniform as SHA-1's output. (Not the
-- core's DrawStream: no ChaCha20 in Redis's Lua, and no picks to replay here: the core's room
-- replays its log, a Redis room is never replayed.)
local picks_used
local TWO_32 = 4294967296
local function random_word()
  picks_used = picks_used + 1
  return tonumber(string.sub(redis.sha1hex('pick:' .. ENTROPY .. digits(picks_used)), 1, 8), 16)
end
-- Uniform in [0, bound), unbiased by rejection exactly as core DrawStream::Below: words at or
-- above 2^32 - (2^32 mod bound) are drawn again.
local function below(bound)
  while true do
    local word = random_word()
    if word < TWO_32 - TWO_32 % bound then return word % bound end
  end
end
-- Who is admitted next (core NextToAdmit): the front line's first, else the head of the line,
-- or in the random method someone drawn uniformly from it (ZRANGE by a random rank). The line
-- itself stays in arrival order under every method.
local function pick_next()
  if cfg.qm ~= METHOD.random then return redis.call('ZRANGE', K_LINE, 0, 0)[1] end
  local top = redis.call('ZRANGE', K_LINE, 0, 0, 'WITHSCORES')
  if not top[1] then return nil end
  if tonumber(top[2]) < LINE_LOWEST then return top[1] end  -- the front line goes first
  local n = waiting()  -- nobody in the front line: all of them are the line
  local rank = below(n)
  return redis.call('ZRANGE', K_LINE, rank, rank)[1]
end
-- ---- notify when near (core Room, "notify when near") ------------------------------------------
-- room.position_near is told once per session (near) when its position first is <= room.nap.
-- The first room.nf of KEYS[2] (front line, then line) were all told; after every change the
-- prefix is extended to nap (or everyone), telling those not told before. Not under random.
local function settle_near(now)
  if room.nap < 0 or cfg.qm == METHOD.random then return end
  local upto = math.min(room.nap, waiting())
  if room.nf >= upto then return end
  for _, id in ipairs(redis.call('ZRANGE', K_LINE, room.nf, upto - 1)) do
    room.nf = room.nf + 1
    local x = load_session(id)
    if not x.near then
      x.near = true
      save_session(x)
      note(NOTICE.position_near, now, x, nil, room.nf)
    end
  end
end
-- x came into KEYS[2] at `position`, inside the prefix or behind it (core PrefixArrival): told
-- before, the prefix grows over it; else it is told at once when position <= nap, or ends the
-- prefix there.
local function prefix_arrival(x, position, now)
  if position > room.nf then return end
  if not x.near and position <= room.nap then
    x.near = true
    save_session(x)
    note(NOTICE.position_near, now, x, nil, position)
  end
  if x.near then room.nf = room.nf + 1 else room.nf = position - 1 end
end
local function front_size()
  return redis.call('ZCOUNT', K_LINE, '-inf', '(' .. digits(LINE_LOWEST))
end
-- `block` came to the head of the line, behind the front line (holders sent back; core
-- PrefixArrivals): inside the prefix, it grows over them when all were told, else it ends before
-- them (the next settle_near tells them at their positions).
local function prefix_arrivals(block)
  if #block == 0 then return end
  local first = front_size() + 1
  if first > room.nf then return end
  local all = true
  for _, x in ipairs(block) do if not x.near then all = false end end
  if all then room.nf = room.nf + #block else room.nf = first - 1 end
end
local function admit_while_free(now)
  if room.paused == 1 then return end  -- freed slots stay free until an admin resumes
  if cfg.qm == METHOD.queue_all then return end  -- the brake: letting go of it fills them
  if cfg.qm == METHOD.passthrough then  -- nobody waits, whatever the capacity
    for _, id in ipairs(redis.call('ZRANGE', K_LINE, 0, -1)) do admit(id, now) end
    return
  end
  while room.holders < cfg.cap do
    if cfg.apm >= 0 and win_count(room.aw, now) >= cfg.apm then return end
    local next = pick_next()
    if not next then return end
    admit(next, now)
  end
end
local function fill(now)
  admit_while_free(now)
  settle_near(now)
end
local function rate_open_key(now)
  if room.paused == 1 or cfg.apm < 0 or room.holders >= cfg.cap or cfg.qm == METHOD.queue_all or
     cfg.qm == METHOD.passthrough or redis.call('ZCARD', K_LINE) == 0 then
    return NEVER
  end
  return deadline_key(win_next_below(room.aw, now, cfg.apm), KIND_OTHER)
end
-- The holders, active and in grace, in admission order.
local function holders_by_admission()
  local out = {}
  local all = redis.call('HGETALL', K_SESSIONS)
  for i = 1, #all, 2 do
    local st = string.sub(all[i + 1], 1, 1)
    if st == 'a' or st == 'g' then out[#out + 1] = load_session(all[i]) end
  end
  table.sort(out, function(a, b) return a.admission < b.admission end)
  return out
end
-- Every holder gives back its slot, its tokens revoked, and keeps its head start (core
-- SendHoldersBack): ahead of the line in admission order, or first into the pre-queue. A full
-- check-in timeout to come back.
local function send_holders_back(to_prequeue, now)
  local holders = holders_by_admission()
  for _, x in ipairs(holders) do
    note(NOTICE.revoked, now, x)
    revoke(x, now)
    redis.call('HDEL', K_REVOKED, '#' .. digits(x.admission))
    room.holders = room.holders - 1
    x.admission, x.claimed, x.since, x.last_seen = 0, false, now, now  -- its wait starts again
    x.st = to_prequeue and 'p' or 'w'
    save_session(x)
    set_deadline(x)
  end
  local head = line_head()  -- behind the front line, as the core's line_.PushFront
  if to_prequeue or head == NEVER then
    for _, x in ipairs(holders) do
      room.seq = room.seq + 1
      if to_prequeue then redis.call('ZADD', K_PREQUEUE, room.seq, x.id) else line_add(x.id) end
    end
  else  -- tickets below the head's, the earliest admission first
    for k = #holders, 1, -1 do
      head = head - 1
      redis.call('ZADD', K_LINE, digits(head), holders[k].id)
    end
    if #holders > 0 then call_reordered = true end
  end
  prefix_arrivals(to_prequeue and {} or holders)
  bump_version()
end

-- ---- launch day: the pre-queue and the schedule (core room_events.cc) -------------------------
-- Arrivals go to the pre-queue while an event's is open, and while a draw is published (they
-- follow the drawn).
local function prequeue_open() return room.pq == 1 or room.dr ~= false end
-- The pre-queue joins the line in arrival order (core ReleasePrequeue); not while a draw is
-- published (those who came during it follow the drawn when it is over). O(pre-queue).
-- Pre-queued sessions `ids` (`records`: their records as HGET answered them) join the end of
-- the line in this order, waiting: a record changes only in its status letter (a waiting
-- session's drop-out deadline is a pre-queued one's), and the writes go as one ZADD and one HSET
-- per LINE_BATCH sessions rather than two calls each: a draw's chunk moves thousands.
local LINE_BATCH = 1000
local function prequeued_to_line(ids, records)
  local zadd, hset = {}, {}
  local function flush()
    if #zadd == 0 then return end
    redis.call('ZADD', K_LINE, unpack(zadd))
    redis.call('HSET', K_SESSIONS, unpack(hset))
    zadd, hset = {}, {}
  end
  for k, id in ipairs(ids) do
    room.seq = room.seq + 1
    zadd[#zadd + 1], zadd[#zadd + 2] = room.seq, id
    hset[#hset + 1], hset[#hset + 2] = id, 'w' .. string.sub(records[k], 2)
    call_deltas[#call_deltas + 1] = '+' .. id  -- as line_add: none of them was in the line
    if #zadd >= 2 * LINE_BATCH then flush() end
  end
  flush()
end
local function release_prequeue()
  if room.dr then return end
  local ids = redis.call('ZRANGE', K_PREQUEUE, 0, -1)
  redis.call('DEL', K_PREQUEUE)
  local records = {}
  for k, id in ipairs(ids) do records[k] = redis.call('HGET', K_SESSIONS, id) end
  prequeued_to_line(ids, records)
  bump_version()
end
-- The settings the rules read changed, or may have (core ApplyEffective): deadlines follow
-- them, and freed or added slots are filled. With `fresh_presence` (an event's stage or its
-- schedule changed the timeouts, not the operator's own settings) nobody is dropped by a
-- shorter timeout before they could check in under it: everyone counts as seen now.
local creating  -- a room being made: its method is not a change (core: no notice then)
local function apply_effective(now, fresh_presence)
  local before = cfg
  effective()
  bump_version()
  if before.qm ~= cfg.qm and not creating then note(NOTICE.method_changed, now, nil, cfg.qm) end
  if before.grace ~= cfg.grace or before.cto ~= cfg.cto or before.idle ~= cfg.idle then
    rekey_all(fresh_presence and room.now or nil)
  end
  fill(now)
end

-- Events as KEYS[12] keeps them (msgpack maps; a field left out is absent): id, name, pq
-- (prequeue_at), st, en (starts_at, ends_at), sh (shuffle_at_start), sc (prequeue_scope: 'all'
-- or 'new'), su (suspended), o (overrides: cap apm grace cto qm), page (JSON text), stage (a
-- STAGE code), and once drawn with a shuffle seed (32 bytes), cnt, at (core ShuffleOutcome).
local function load_events()
  local v = redis.call('GET', K_EVENTS)
  if not v then return {} end
  return cmsgpack.unpack(v)
end
local function save_events(events)
  if #events == 0 then return redis.call('DEL', K_EVENTS) end
  redis.call('SET', K_EVENTS, cmsgpack.pack(events))
end
local function opens_at(e) return e.pq or e.st end
local function find_event(events, id)
  for k, e in ipairs(events) do if e.id == id then return k end end
  return nil
end
-- The open event (core Room::OpenEvent): the last one not suspended in its pre-queue or
-- running (no two overlap, so at most one is); nil when none. The one rule of it, read by
-- compute_next_boundary and by the room object (open_event_id).
local function open_of(events)
  local open = nil
  for _, e in ipairs(events) do
    if not e.su and (e.stage == STAGE.prequeue or e.stage == STAGE.running) then open = e end
  end
  return open
end
-- What every call needs of the schedule, cached in the room's state (see FIELDS; core
-- ComputeNextBoundary): a suspended event stays where it is and counts for nothing.
local function compute_next_boundary(events)
  local nb, upcoming, open = NEVER, nil, open_of(events)
  for _, e in ipairs(events) do
    if not e.su then
      local t = NEVER
      if e.stage == STAGE.scheduled then
        t = opens_at(e)
        upcoming = upcoming or e
      elseif e.stage == STAGE.prequeue then
        t = e.st
      elseif e.stage == STAGE.running then
        t = e.en
      end
      nb = math.min(nb, t)
    end
  end
  room.nb = nb
  room.pq = (open and open.stage == STAGE.prequeue) and 1 or 0
  room.ov = (open and open.stage == STAGE.running) and (open.o or {}) or false
  local shown = open or upcoming
  room.es, room.ee = shown and shown.st or -1, shown and shown.en or -1
end
-- Stage changes wait while a draw is published (core BoundaryKey).
local function boundary_key()
  if room.dr or room.nb == NEVER then return NEVER end
  return deadline_key(room.nb, KIND_OTHER)
end
-- The pre-queue opens (core OpenPrequeue); with scope 'all' everyone goes to it: the holders
-- first, in admission order (their tokens revoked), then the line in order. The front line
-- (those who came with a pass) stays ahead, waiting. O(line) then.
local function open_prequeue(e, now)
  note(NOTICE.prequeue, now, nil, e.id)
  bump_version()
  if e.sc ~= 'all' then return end
  send_holders_back(true, now)
  local ids = redis.call('ZRANGEBYSCORE', K_LINE, digits(LINE_LOWEST), '+inf')
  if #ids > 0 then
    redis.call('ZREMRANGEBYSCORE', K_LINE, digits(LINE_LOWEST), '+inf')
    call_reordered = true
    room.nf = math.min(room.nf, waiting())  -- what is left of the prefix: the front line
  end
  for _, id in ipairs(ids) do
    local x = load_session(id)
    x.st = 'p'
    save_session(x)
    room.seq = room.seq + 1
    redis.call('ZADD', K_PREQUEUE, room.seq, id)
  end
end
-- Publishing is over: the draw's key goes (UNLINK: freed off Redis's main thread), and those
-- who came during it follow the drawn (core FinishDraw).
local function finish_draw()
  room.dr = false
  redis.call('UNLINK', K_DRAW)
  release_prequeue()
  bump_version()
end
-- The event starts (core StartEvent): its pre-queue is drawn. The draw takes the pre-queue
-- whole, in O(1) (RENAME to KEYS[14]); with shuffle_at_start its seed is this call's entropy,
-- kept with the event (its "shuffle"). A shuffle of nobody is over at once. Its positions are
-- published by the draw op, in chunks the processes' sweepers send (RedisBackend::SweepOne).
local function start_event(e, events, now)
  note(NOTICE.started, now, nil, e.id)
  e.stage = STAGE.running
  compute_next_boundary(events)
  local n = redis.call('ZCARD', K_PREQUEUE)
  if n > 0 or e.sh then
    if e.sh then e.seed, e.cnt, e.at = entropy_bytes(), n, now end
    if n > 0 then
      redis.call('UNLINK', K_DRAW)  -- none is left behind; a RENAME onto one would free it here
      redis.call('RENAME', K_PREQUEUE, K_DRAW)
      room.dr = {ev = e.id, sh = e.sh and 1 or 0, at = now, n = n, pub = 0, seed = e.seed or ''}
    end
  end
  apply_effective(now, true)
end
-- The earliest stage change, due at `when` (core ProcessBoundary): the first event, in time
-- order, whose next stage begins at room.nb.
local function process_boundary(when)
  local events = load_events()
  for _, e in ipairs(events) do
    if not e.su then
      if e.stage == STAGE.scheduled and opens_at(e) == room.nb then
        if e.pq then
          e.stage = STAGE.prequeue
          compute_next_boundary(events)
          open_prequeue(e, when)
        else
          start_event(e, events, when)
        end
        return save_events(events)
      elseif e.stage == STAGE.prequeue and e.st == room.nb then
        start_event(e, events, when)
        return save_events(events)
      elseif e.stage == STAGE.running and e.en == room.nb then
        e.stage = STAGE.ended
        note(NOTICE.ended, when, nil, e.id)
        compute_next_boundary(events)
        apply_effective(when, true)
        return save_events(events)
      end
    end
  end
  compute_next_boundary(events)  -- not reached while the cache is right
end

-- ---- time -----------------------------------------------------------------------------------
-- `at`: the deadline's own time (when is the room's, later if a reconfiguration moved it into the
-- past); an idle expiry keyed before the claim deadline is an idle expiry (as core/room.cc).
local function process_due(x, when, at)
  if x.st == 'w' or x.st == 'p' then  -- a drop-out from the pre-queue loses its draw
    room.dropped = room.dropped + 1
    note(NOTICE.dropped, when, x)
    drop_waiting(x)
  elseif x.st == 'a' then
    if not x.claimed and x.since + cfg.cto <= at then
      note(NOTICE.dropped, when, x)
      release(x, when, true)
    else  -- idle: as if it had left at this moment
      bump_version()
      x.st, x.since = 'g', when + cfg.grace
      save_session(x)
      set_deadline(x)
    end
  elseif x.st == 'g' then
    note(NOTICE.expired, when, x)
    release(x, when, false)
  end
end

-- rvmin: the earliest time a revocation may be forgotten, so most calls skip this.
local function forget_old_revocations(now)
  if now >= room.rvmin then room.rvmin = forget_expired(K_REVOKED, K_REVOKED_EXPIRY, now) end
end

-- Every deadline up to `now` in key order (core ProcessBefore): at equal keys a session's
-- deadline, then an event's stage change, then the rate cap; each followed by a fill, and
-- notify when near settled once a millisecond's deadlines are done (their tie order is the
-- zset's, not the core heap's).
local function advance(now)
  local target = math.max(now, room.now)
  local unsettled
  while true do
    local heap_key, first = first_score(K_DEADLINES)
    local rate_key = rate_open_key(room.now)
    local stage_key = boundary_key()
    local k = math.min(heap_key, rate_key, stage_key)
    if k == NEVER or math.floor(k / 2) > target then break end
    local when = math.max(math.floor(k / 2), room.now)
    if unsettled and unsettled ~= when then
      settle_near(unsettled)
      unsettled = nil
    end
    local again = false
    if heap_key > k and stage_key == k then
      room.now = when
      process_boundary(when)
    elseif heap_key == k then
      local x = load_session(first)
      local due = x and due_key(x)
      if due ~= heap_key then  -- a lazy key: the session was seen since
        if due then
          redis.call('ZADD', K_DEADLINES, due, first)
        else
          redis.call('ZREM', K_DEADLINES, first)
        end
        again = true
      else
        room.now = when
        process_due(x, when, math.floor(heap_key / 2))
      end
    end
    if not again then
      room.now = when
      admit_while_free(when)
      unsettled = when
    end
  end
  if unsettled then settle_near(unsettled) end
  room.now = target
  forget_old_revocations(room.now)
  -- Refills pend only while a rate is set (changing it empties them): most rooms skip this.
  -- 256 at most here; a join refused for a full table forgets all that are due first.
  if room.jpm >= 0 then forget_full_buckets(room.now, 256) end
end

-- While a draw is published the room is due at once: each sweep publishes a chunk.
local function next_deadline()
  if room.dr then return room.now end
  local k = math.min((first_score(K_DEADLINES)), rate_open_key(room.now), boundary_key())
  if k == NEVER then return NEVER end
  return math.floor(k / 2)
end
-- The backend keeps a registry of when each room next needs the sweeper. `hint` is the
-- deadline last reported; a script answers a lower one so the registry is lowered too.
local function to_register(force) return register_deadline(room, next_deadline(), force) end

-- ---- answers --------------------------------------------------------------------------------
-- A session's part of its view: {status, position, waiting, active, capacity, admission,
-- incarnation}. No position in the random method (odds instead: made by the backend from
-- context()), none in the pre-queue.
local function view(x)
  if not x then return {'gone', 0, waiting(), room.holders, cfg.cap, 0, 0} end
  if x.st == 'w' then
    local pos = 0
    if cfg.qm ~= METHOD.random then pos = redis.call('ZRANK', K_LINE, x.id) + 1 end
    return {'waiting', pos, waiting(), room.holders, cfg.cap, 0, 0}
  end
  if x.st == 'p' then return {'prequeue', 0, waiting(), room.holders, cfg.cap, 0, 0} end
  local st = x.st == 'a' and 'active' or 'grace'
  return {st, 0, waiting(), room.holders, cfg.cap, x.admission, room.inc}
end
-- A join the room does not take (queueing method reject): nothing of it is kept.
local function closed_view() return {'closed', 0, waiting(), room.holders, cfg.cap, 0, 0} end
-- The room's part of every view, answered once beside them (script_replies.h ViewContext):
-- {now, method, pre-queue open (0/1), paused, the outflow's history, apm, cto, idle,
-- starts_at and ends_at of the event statuses speak of (-1: none), the inflow's history}. The
-- backend makes the phase, the flow, the ETA or odds, starts_in/ends_in and refresh_after from
-- it with the core's formulas.
local function context()
  return {room.now, cfg.qm, prequeue_open() and 1 or 0, room.paused, room.fo, cfg.apm,
          cfg.cto, room.idle, room.es, room.ee, room.fi}
end
-- A check-in of a known session: now present; grace ends, an admission is claimed.
local function claim_presence(x)
  x.last_seen = room.now
  if x.st == 'g' or (x.st == 'a' and not x.claimed) then
    if x.st == 'g' then bump_version() end
    x.st, x.claimed = 'a', true
    save_session(x)
    reschedule(x)
  else
    save_session(x)
  end
end
-- The gate's text, or false (a nil reply) when there is none. A gate of another incarnation was
-- left behind by a process whose script predates KEYS[9]: it deleted the room without it (and
-- may have made it again), so that gate is not this room's.
local function gate_text(key)
  local v = redis.call('GET', key or K_GATE)
  if not v then return false end
  local colon = string.find(v, ':', 1, true)
  if not colon or string.sub(v, 1, colon - 1) ~= digits(room.inc) then return false end
  return string.sub(v, colon + 1)
end
-- Those waiting for a draw (core Room::prequeued()): in the pre-queue, and those of the draw
-- being published not yet published (counted by position, as the core counts them: one who
-- left since still holds a place until it comes). Both are empty unless prequeue_open() (the
-- pre-queue goes to the line or the draw when it closes): a room without one asks Redis nothing.
local function prequeued()
  if not prequeue_open() then return 0 end
  local d = room.dr
  return redis.call('ZCARD', K_PREQUEUE) + (d and d.n - d.pub or 0)
end
-- The id of the open event (core Room::open_event()), or false. The state caches that one is
-- open (pq: in its pre-queue, ov: running), not which: KEYS[12] is read only then, so a room
-- without an open event asks Redis nothing more.
local function open_event_id()
  if room.pq ~= 1 and not room.ov then return false end
  local open = open_of(load_events())
  return open and open.id or false
end
-- What is in force beside the room's own settings (core RoomInfo), while an event is open or a
-- draw is published: the effective settings (cfg: capacity, grace, cto, apm, method; idle is the
-- room's own), pre-queue open (0/1, for the phase, which the backend makes with core::PhaseOf),
-- prequeued(), and the open event's id (nil: none). Otherwise nothing: the room's own settings
-- are in force, nobody is pre-queued and no event is open, and a plain room's answer stays as
-- short as it was (answered always, these 8 fields cost a plain room's get ~1 us of Redis
-- time, 1-6%: docs/benchmarks.md, "The room object on Redis").
local function in_force()
  if not room.ov and not prequeue_open() then return end
  local c = cfg
  return c.cap, c.grace, c.cto, c.apm, c.qm, prequeue_open() and 1 or 0, prequeued(),
         open_event_id()
end
-- The room object (script_replies.h ParseRoomInfo): the room's own settings and counts, the
-- gate, the page settings (KEYS[16], kept as the gate is), then in_force() (all its values:
-- last in the constructor).
local function info()
  local r = room
  return {r.cap, r.grace, r.cto, r.idle, r.apm, r.holders, waiting(), r.admitted, r.dropped,
          r.released, r.paused, r.url, r.jpm, r.ppc, r.pow, r.qm, gate_text(),
          gate_text(K_PAGE), r.nap, in_force()}
end
-- An event as answered (script_replies.h ParseRoomEvent): {id, name, prequeue_at, starts_at,
-- ends_at, shuffle_at_start, prequeue_scope, suspended, capacity, apm, grace, cto (-1: none),
-- method ('': none), page (nil: none), stage, then the shuffle: seed (nil: none), count, at}.
local function event_answer(e)
  local o = e.o or {}
  return {e.id, e.name, e.pq or -1, e.st, e.en, e.sh and 1 or 0, e.sc, e.su and 1 or 0,
          o.cap or -1, o.apm or -1, o.grace or -1, o.cto or -1, o.qm or '', e.page or false,
          e.stage, e.seed or false, e.cnt or 0, e.at or 0}
end
-- What the draw being published is, for the process that publishes its next chunk
-- (script_replies.h ParseDrawState): {} when none, else {event, shuffled (0/1), people,
-- positions published, seed ('' unshuffled)}.
local function draw_state()
  local d = room.dr
  if not d then return {} end
  return {d.ev, d.sh, d.n, d.pub, d.seed}
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
-- room.ver, oldest first; nil when the log no longer holds them all, or when they name more
-- sessions than a quarter of the line (then the snapshot is the cheaper read). Read from the
-- newest back, a few entries at a time: a process one change behind reads one entry.
local function line_deltas(from, inc)
  if not from or inc ~= room.inc or from <= 0 or from > room.ver then return nil end
  local out = {}
  if from == room.ver then return out end
  local limit = math.max(DELTA_MIN_IDS, math.floor(waiting() / 4))
  local want, ids, got = room.ver, 0, 0
  local span = math.min(room.ver - from, LOG_ENTRIES)  -- each entry moves the version on by >= 1
  local chunk = math.min(span, 4)
  while chunk > 0 do
    local part = redis.call('LRANGE', K_LINE_DELTAS, -(got + chunk), -(got + 1))
    for i = #part, 1, -1 do
      local e = part[i]
      local ei, eo, en, ek = string.match(e, '^(%d+) (%d+) (%d+) (%d+)')
      if not ek or tonumber(ei) ~= room.inc or tonumber(en) ~= want then return nil end
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
-- An answer that ends the call: the state written back, then {word, register, payload...}.
-- When the call admitted anyone, the register is {register, wait ms...} (admit's waits).
local function reply(word, register, ...)
  save_room()
  if #waits > 0 then
    local both = {register}
    for i = 1, #waits do both[i + 1] = waits[i] end
    register = both
  end
  return {word, register, ...}
end
-- Every answer of an operation that went through: {'ok', register, payload...}
local function answer(register, ...) return reply('ok', register, ...) end
-- What every operation but put answers on a room that does not exist (nothing written).
local function no_room() return {'unknown_room'} end

-- ---- operations -----------------------------------------------------------------------------
-- One function per call of the backend (RedisBackend, store/backend.h), named as the core::Room
-- operation it mirrors. Each is given the time of the call; its arguments are ARGV 5.., and it
-- answers its own refusals.

-- A new room with the core's defaults (RoomConfig), as of `now`, of incarnation `inc`.
local function create_room(now, inc)
  local d = DEFAULTS
  room = {cap = RULES.capacity, grace = RULES.grace_ms, cto = RULES.checkin_timeout_ms,
       idle = RULES.idle_timeout_ms, apm = -1, now = now, holders = 0,
       adm = 0, seq = 0, admitted = 0, dropped = 0, released = 0, hint = NEVER, rvmin = NEVER,
       aw = '', fw = '', paused = 0, url = '', ver = now * 1000, jpm = -1, ppc = -1, pow = -1,
       inc = inc, qm = d.qm, nb = d.nb, pq = d.pq, es = d.es, ee = d.ee, ov = d.ov, dr = d.dr,
       ns = d.ns, fo = d.fo, fi = d.fi, nap = d.nap, nf = d.nf}
  -- Left by a process whose script predates these keys (it deleted the room without them).
  redis.call('DEL', K_LINE_DELTAS, K_EVENTS, K_PREQUEUE)
  redis.call('UNLINK', K_DRAW, K_PASSES)
  effective()
end
-- The gate's argument ('' = keep, '-' = clear, '=TEXT' = set). A new room starts without a gate
-- (one left behind, see gate_text, is removed).
-- The page settings (KEYS[16]) are kept the same way.
local function set_gate(gate, exists, key)
  key = key or K_GATE
  if gate == '-' or (not exists and gate == '') then
    redis.call('DEL', key)
  elseif gate ~= '' then
    redis.call('SET', key, digits(room.inc) .. ':' .. string.sub(gate, 2))
  end
end
-- PutRoom: creates the room, or changes its own settings (core Room::Reconfigure).
-- ARGV 5..9: capacity grace cto idle apm ('' = keep; idle/apm -1 = none)
-- ARGV 10: paused ('' = keep, '0', '1')  11: target URL ('' = keep, '-' = clear, '=URL' = set)
-- ARGV 12..14: jpm ppc pow ('' = keep, -1 = none)  15: the incarnation, if this creates it
-- ARGV 16: gate ('' = keep, '-' = clear, '=TEXT' = set)  17: queueing method ('' = keep, or a
-- METHOD name)  18: '1': include_active (with queue_all taking effect: the holders go back to
-- the head of the line, core SendHoldersBack)  19: page settings ('' = keep, '-' = clear,
-- '=TEXT' = set)
local function op_put_room(now)
  local patch = {cap = ARGV[5], grace = ARGV[6], cto = ARGV[7], idle = ARGV[8], apm = ARGV[9],
                 paused = ARGV[10], jpm = ARGV[12] or '', ppc = ARGV[13] or '', pow = ARGV[14] or '',
                 nap = ARGV[20] or ''}
  local url, method = ARGV[11] or '', ARGV[17] or ''
  local exists = load_room()
  if not exists then
    if patch.cap == '' then return {'invalid_argument', MSG.capacity_required} end
    create_room(now, tonumber(ARGV[15] or '0') or 0)
    note_created(now)
  else
    advance(now)
  end
  -- Debts are in units of the old rate: every bucket starts full rather than be converted.
  local new_rate = patch.jpm ~= '' and tonumber(patch.jpm) ~= room.jpm
  for f, v in pairs(patch) do if v ~= '' then room[f] = tonumber(v) end end
  if method ~= '' then room.qm = method end
  if new_rate then refill_all_buckets(room.now) end
  if url == '-' then room.url = '' elseif url ~= '' then room.url = string.sub(url, 2) end
  set_gate(ARGV[16] or '', exists)
  set_gate(ARGV[19] or '', exists, K_PAGE)
  bump_version()
  if exists then note(NOTICE.changed, room.now) end
  creating = not exists
  apply_effective(room.now)
  creating = false
  if ARGV[18] == '1' and cfg.qm == METHOD.queue_all then send_holders_back(false, room.now) end
  settle_near(room.now)
  return answer(to_register(true), info())
end
local function op_get_room(now)
  if not load_room() then return no_room() end
  advance(now)
  return answer(to_register(false), info())
end
-- The room's last settings and counts, then every key of it gone.
local function op_delete_room(now)
  if not load_room() then return no_room() end
  advance(now)
  local out = info()
  note(NOTICE.deleted, room.now)
  flush_told()
  -- UNLINK: a large line or draw is freed off Redis's main thread.
  redis.call('UNLINK', K_META, K_LINE, K_SESSIONS, K_DEADLINES, K_REVOKED, K_REVOKED_EXPIRY,
             K_CLIENTS, K_REFILLS, K_GATE, K_LINE_SNAPSHOT, K_LINE_DELTAS, K_EVENTS, K_PREQUEUE,
             K_DRAW, K_PASSES, K_PAGE)
  return {'ok', NOTHING_TO_REGISTER, out}
end
-- The sweeper (RedisBackend::SweepOne): answers the next deadline (and records it), and the
-- draw being published, if one is (draw_state).
local function op_advance(now)
  if not load_room() then return no_room() end
  advance(now)
  return answer(to_register(true), draw_state())
end
-- The sweeper, after recording that: the deadline last reported.
local function op_hint()
  if not load_room() then return no_room() end
  return {'ok', room.hint}
end

-- ---- passes (core room_passes.cc, core/room_pass.h) -------------------------------------------
-- KEYS[15]: pass id -> "KIND:USES:LEFT:CREATED:EXPIRES:DIGEST": KIND admit or front (core
-- ToString(PassKind)), USES as minted, LEFT the uses left, CREATED ms, EXPIRES ms ('': never),
-- DIGEST the SHA-256 of the code in hex. The process mints each code and hashes it (Redis's Lua
-- has neither SHA-256 nor randomness of its own): no code reaches Redis, at minting or
-- redemption, only ids and digests.
local function load_pass(pid)
  local v = redis.call('HGET', K_PASSES, pid)
  if not v then return nil end
  local kind, uses, left, created, expires, digest =
      string.match(v, '^(%a+):(%d+):(%d+):(%-?%d+):(%-?%d*):(%x+)$')
  if not kind then return nil end
  return {kind = kind, uses = uses, left = tonumber(left), created = created,
          expires = tonumber(expires), digest = digest}
end
local function save_pass(pid, p)
  redis.call('HSET', K_PASSES, pid, p.kind .. ':' .. p.uses .. ':' .. digits(p.left) .. ':' ..
             p.created .. ':' .. (p.expires and digits(p.expires) or '') .. ':' .. p.digest)
end
-- Why pass `pid`, shown with a code of SHA-256 `digest`, cannot be used now (core PassRefusal,
-- its checks in its order, its messages); else nil and the pass. Digests are compared with ==,
-- which in Lua 5.1 compares two interned strings' addresses; and how much of a SHA-256 digest
-- matches says nothing of a code that would hash to it.
local function pass_refusal(pid, digest)
  local p = load_pass(pid)
  if not p or p.digest ~= digest then return MSG.pass_not_valid end
  if p.left <= 0 then return MSG.pass_used_up end
  if p.expires and room.now >= p.expires then return MSG.pass_expired end
  return nil, p
end
local join
-- One use of pass `pid` (p) by session `id` (x: nil when unknown, else waiting or pre-queued:
-- a holder's pass is not used), as core UsePass: it joins if new, goes to the end of the front
-- line (out of the line or the pre-queue; one the draw holds is skipped by it, no longer 'p'),
-- and an admit pass lets it in at once when a slot is free, whatever the method, pre-queue,
-- pause or brake; then the room fills as after any change.
local function use_pass(x, id, client, pid, p)
  p.left = p.left - 1
  save_pass(pid, p)
  if not x then x = join(id, client, true) end
  note(NOTICE.pass_used, room.now, x, pid)
  unline(x)
  x.st, x.last_seen = 'w', room.now
  front_add(id)
  prefix_arrival(x, front_size(), room.now)
  bump_version()
  save_session(x)
  set_deadline(x)
  if p.kind == 'admit' and room.holders < cfg.cap then
    admit(id, room.now)
    x = load_session(id)
    x.claimed = true  -- it is here: it claimed its admission
    save_session(x)
  end
  fill(room.now)
end
-- MintPasses (core Room::AddPasses): keeps passes the process minted. ARGV 5: kind (admit,
-- front)  6: uses  7: expires_at ('' = never)  8..: each pass's id and its code's SHA-256 in
-- hex. Refused whole past RULES.max_passes, or when an id is taken. Answers their creation time
-- (the room's now).
local function op_add_passes(now)
  if not load_room() then return no_room() end
  advance(now)
  if redis.call('HLEN', K_PASSES) + (#ARGV - 7) / 2 > RULES.max_passes then
    return reply('limit_reached', to_register(false), MSG.too_many_passes)
  end
  for i = 8, #ARGV, 2 do
    if redis.call('HEXISTS', K_PASSES, ARGV[i]) == 1 then
      return reply('conflict', to_register(false), MSG.pass_id_taken(ARGV[i]))
    end
  end
  local tail = ':' .. ARGV[6] .. ':' .. ARGV[6] .. ':' .. digits(room.now) .. ':' .. ARGV[7] .. ':'
  local fields = {}
  for i = 8, #ARGV, 2 do
    fields[#fields + 1], fields[#fields + 2] = ARGV[i], ARGV[5] .. tail .. ARGV[i + 1]
  end
  if #fields > 0 then redis.call('HSET', K_PASSES, unpack(fields)) end
  return answer(to_register(false), room.now)
end
-- ListPasses: every pass as KEYS[15] keeps it, {id, record, id, record, ...} (HGETALL). The
-- process reads the records and orders them as core Passes (by creation, then id): 100,000
-- passes sort faster there, and off Redis's one thread.
local function op_list_passes(now)
  if not load_room() then return no_room() end
  advance(now)
  return answer(to_register(false), redis.call('HGETALL', K_PASSES))
end
-- RevokePasses (core Room::RevokePasses): ARGV 5: '=ID' one ('not_found' when unknown), ''
-- every pass. Answers how many went.
local function op_revoke_passes(now)
  if not load_room() then return no_room() end
  advance(now)
  local one = ARGV[5] or ''
  if one == '' then
    local n = redis.call('HLEN', K_PASSES)
    redis.call('UNLINK', K_PASSES)  -- up to 100,000: freed off Redis's main thread
    return answer(to_register(false), n)
  end
  local pid = string.sub(one, 2)
  if redis.call('HDEL', K_PASSES, pid) == 0 then
    return reply('not_found', to_register(false), MSG.unknown_pass(pid))
  end
  return answer(to_register(false), 1)
end

-- A new session at the end of the line, or of the pre-queue while one is open, made by `client`
-- (as core Room::Join, CountJoin): admitted at once when a place is free, unless `held` (a pass
-- moves it first, core UsePass: the room fills after that).
join = function(id, client, held)
  room.seq = room.seq + 1
  local st = 'w'
  if prequeue_open() then
    st = 'p'
    redis.call('ZADD', K_PREQUEUE, room.seq, id)
  else
    line_add(id)
    room.fi = flow_add(room.fi, room.now)
  end
  bump_version()
  local x = {id = id, st = st, last_seen = room.now, since = room.now, admission = 0,
             claimed = false}
  count_join(x, client, room.now)
  save_session(x)
  set_deadline(x)
  note(NOTICE.joined, room.now, x)
  if held then return x end
  fill(room.now)
  return load_session(id)
end
-- Joins (unknown session), or checks in: a join may be refused (join_refusal), a check-in never.
-- ARGV 5: session  6: the client ('' = none)  7: proof bits  8: clients the room may keep
-- state for  9: a pass the arrival carries (absent or '': none; '=ID': the id its code names)
-- 10: the SHA-256 of the pass's code, in hex ('' for a code too long to be one)
-- With a pass, a session that holds no slot redeems it (core Room::Check): refused as the pass
-- says (pass_refusal), then as a join when it is new, else it takes one use (use_pass).
local function op_check(now)
  if not load_room() then return no_room() end
  local id, client = ARGV[5], ARGV[6] or ''
  advance(now)
  local x = load_session(id)
  local pass = ARGV[9]
  if pass and pass ~= '' and not (x and (x.st == 'a' or x.st == 'g')) then
    local pid = string.sub(pass, 2)
    local refusal, p = pass_refusal(pid, ARGV[10] or '')
    if refusal then return reply('invalid', to_register(false), refusal) end
    if not x then
      local no = join_refusal(client, tonumber(ARGV[7] or '0'), tonumber(ARGV[8] or '0'))
      if no then return reply(no[1], to_register(false), unpack(no, 2)) end
    end
    use_pass(x, id, client, pid, p)
    return answer(to_register(false), view(load_session(id)), context())
  end
  if not x then
    if cfg.qm == METHOD.reject then return answer(to_register(false), closed_view(), context()) end
    local refusal = join_refusal(client, tonumber(ARGV[7] or '0'), tonumber(ARGV[8] or '0'))
    if refusal then return reply(refusal[1], to_register(false), unpack(refusal, 2)) end
    x = join(id, client)
  end
  claim_presence(x)
  return answer(to_register(false), view(x), context())
end
-- Live connections: a check-in of each known session (ARGV 5..), no joins.
local function op_present(now)
  if not load_room() then return no_room() end
  advance(now)
  local views = {}
  for i = 5, #ARGV do
    local x = load_session(ARGV[i])
    if x then claim_presence(x) end
    views[#views + 1] = view(x)
  end
  return answer(to_register(false), views, context())
end
-- Live channels: the counts, and the line when ver moved on (ARGV 5: the caller's version).
-- ARGV 6, 7: the version and incarnation of the line the calling process keeps ('' or 0:
-- none). The line is then answered as the entries of KEYS[11] from that version on (an
-- array) when the log holds them and they are few, else as the snapshot (a string).
local function op_read_line(now)
  if not load_room() then return no_room() end
  advance(now)
  log_delta()  -- this call's own changes (advance) first: the entries reach room.ver
  local ver = room.ver or 0
  local line = ''
  if digits(ver) ~= ARGV[5] then
    line = line_deltas(tonumber(ARGV[6] or ''), tonumber(ARGV[7] or '')) or
           line_snapshot(digits(ver))
  end
  local r = room
  return answer(to_register(false), {ver, r.holders, waiting(), cfg.cap, r.fo, cfg.apm, cfg.cto,
                                     r.idle, r.paused, r.inc, cfg.qm, prequeue_open() and 1 or 0,
                                     r.es, r.ee, r.fi, r.now}, line)
end

-- The session ARGV 5 names, in the room brought to now; else nil and the refusal to answer.
local function load_session_or_refuse(now)
  if not load_room() then return nil, no_room() end
  advance(now)
  local x = load_session(ARGV[5])
  if not x then return nil, reply('unknown_session', to_register(false)) end
  return x
end
-- x leaves the room for good (core Room::End): out of the line, or its place freed for the next.
local function end_session(x, why)
  note(why, room.now, x)
  if x.st == 'w' or x.st == 'p' then
    drop_waiting(x)
    settle_near(room.now)
  else
    release(x, room.now, false)
    fill(room.now)
  end
  return answer(to_register(false), view(nil), context())
end
local function op_touch(now)
  local x, refusal = load_session_or_refuse(now)
  if not x then return refusal end
  x.last_seen = room.now
  if x.st == 'g' then x.st = 'a'; bump_version() end
  save_session(x)
  reschedule(x)
  return answer(to_register(false), view(x), context())
end
-- ARGV 6: '1' final (the place is given up at once), else a holder keeps it for the grace time.
local function op_leave(now)
  local x, refusal = load_session_or_refuse(now)
  if not x then return refusal end
  if x.st == 'w' or x.st == 'p' or ARGV[6] == '1' then return end_session(x, NOTICE.left) end
  if x.st == 'a' then
    bump_version()
    x.st, x.since = 'g', room.now + cfg.grace
    save_session(x)
    reschedule(x)
  end
  return answer(to_register(false), view(x), context())
end
local function op_evict(now)
  local x, refusal = load_session_or_refuse(now)
  if not x then return refusal end
  return end_session(x, NOTICE.revoked)
end

-- The holder of admission `adm` in a room from before the '#ADMISSION' index (incarnation 0):
-- found once by a scan, then indexed.
local function holder_by_scan(adm)
  local id
  local all = redis.call('HGETALL', K_SESSIONS)
  for i = 1, #all, 2 do
    local x = load_session(all[i])
    if (x.st == 'a' or x.st == 'g') and digits(x.admission) == adm then
      redis.call('HSET', K_REVOKED, '#' .. adm, x.id)
      id = x.id
    end
  end
  return id
end
-- ARGV 5: incarnation  6: admission. Answers the session holding it, '' when none.
local function op_admission_holder(now)
  if not load_room() then return no_room() end
  advance(now)
  if tonumber(ARGV[5]) ~= room.inc then return answer(to_register(false), '') end
  local id = redis.call('HGET', K_REVOKED, '#' .. ARGV[6])
  if not id and room.inc == 0 then id = holder_by_scan(ARGV[6]) end
  return answer(to_register(false), id or '')
end
-- ARGV 5: session  6: admission. Answers 1 when that admission of the session was revoked.
local function op_is_revoked(now)
  if not load_room() then return no_room() end
  local id, adm = ARGV[5], tonumber(ARGV[6])
  advance(now)
  local r = redis.call('HGET', K_REVOKED, id)
  return answer(to_register(false), (r and adm <= tonumber(r)) and 1 or 0)
end

-- ---- launch day: the schedule and the draw ----------------------------------------------------
-- Whether event `spec` may be stored (core::CheckEventChange, core/schedule.h: the same rules,
-- in the same order, with the core's messages): nil, or {refusal word, message}.
local function event_refusal(events, spec, now)
  if spec.pq and spec.pq > spec.st then return {'invalid', MSG.prequeue_after_start} end
  if spec.st >= spec.en then return {'invalid', MSG.ends_before_start} end
  if spec.o.cto and spec.o.cto < RULES.min_event_cto then
    return {'invalid', MSG.event_checkin_timeout_zero}
  end
  local at = find_event(events, spec.id)
  if not at then
    if spec.en <= now then return {'invalid', MSG.event_over} end
    if #events >= RULES.max_events then return {'conflict', MSG.too_many_events} end
  else
    local was = events[at]
    if was.stage == STAGE.ended then return {'conflict', MSG.event_ended(spec.id)} end
    if was.stage ~= STAGE.scheduled and spec.pq ~= was.pq then
      return {'conflict', MSG.prequeue_opened(spec.id)}
    end
    if was.stage == STAGE.running and (spec.st ~= was.st or spec.en > was.en) then
      return {'conflict', MSG.event_started(spec.id)}
    end
  end
  for _, other in ipairs(events) do
    if other.id ~= spec.id and
       math.max(opens_at(spec), opens_at(other)) < math.min(spec.en, other.en) then
      return {'conflict', MSG.events_overlap(other.id)}
    end
  end
  return nil
end
-- The event of a put: ARGV 5: id  6: name  7: prequeue_at ('' = none)  8: starts_at  9: ends_at
-- 10: shuffle_at_start ('1'/'0')  11: prequeue_scope ('all'/'new')  12: suspended ('1'/'0')
-- 13..16: the overrides capacity, admit_per_minute, grace_ms, checkin_timeout_ms ('' = none)
-- 17: the queueing method override ('' = none)  18: page ('' = none, '=TEXT')
-- The HTTP layer checked every value's range (core InRange(EventSpec)).
local function event_of_args()
  local function opt(v) if v == nil or v == '' then return nil end return tonumber(v) end
  local e = {id = ARGV[5], name = ARGV[6], pq = opt(ARGV[7]), st = tonumber(ARGV[8]),
             en = tonumber(ARGV[9]), sh = ARGV[10] == '1', sc = ARGV[11], su = ARGV[12] == '1',
             o = {cap = opt(ARGV[13]), apm = opt(ARGV[14]), grace = opt(ARGV[15]),
                  cto = opt(ARGV[16])}}
  if (ARGV[17] or '') ~= '' then e.o.qm = ARGV[17] end
  if (ARGV[18] or '') ~= '' then e.page = string.sub(ARGV[18], 2) end
  return e
end
-- PutEvent: adds or changes event ARGV 5 (core Room::PutEvent); answers it as stored, after a
-- time it names that has already come took effect.
local function op_put_event(now)
  if not load_room() then return no_room() end
  advance(now)
  local e = event_of_args()
  local events = load_events()
  local refusal = event_refusal(events, e, room.now)
  if refusal then return reply(refusal[1], to_register(false), refusal[2]) end
  local at = find_event(events, e.id)
  if not at then
    e.stage = STAGE.scheduled
    events[#events + 1] = e
  else
    local was = events[at]
    -- Suspending an open pre-queue lets it into the line, in arrival order.
    if e.su and not was.su and was.stage == STAGE.prequeue then release_prequeue() end
    e.stage, e.seed, e.cnt, e.at = was.stage, was.seed, was.cnt, was.at
    events[at] = e
  end
  -- No two events overlap, so no two open at the same time: the order is total.
  table.sort(events, function(a, b) return opens_at(a) < opens_at(b) end)
  compute_next_boundary(events)
  save_events(events)
  apply_effective(room.now, true)
  advance(room.now)
  events = load_events()
  return answer(to_register(false), event_answer(events[find_event(events, e.id)]))
end
-- ListEvents: every event of the room, in time order.
local function op_list_events(now)
  if not load_room() then return no_room() end
  advance(now)
  local out = {}
  for _, e in ipairs(load_events()) do out[#out + 1] = event_answer(e) end
  return answer(to_register(false), out)
end
-- DeleteEvent: cancels event ARGV 5 (core Room::DeleteEvent); answers it as it was. A pre-queue
-- it held joins the line in arrival order; its overrides end.
local function op_delete_event(now)
  if not load_room() then return no_room() end
  advance(now)
  local events = load_events()
  local at = find_event(events, ARGV[5])
  if not at then return reply('not_found', to_register(false), MSG.unknown_event(ARGV[5])) end
  local gone = table.remove(events, at)
  if gone.stage == STAGE.prequeue and not gone.su then release_prequeue() end
  compute_next_boundary(events)
  save_events(events)
  apply_effective(room.now, true)
  return answer(to_register(false), event_answer(gone))
end
-- Publishes the next positions of the draw (core Room::DrawStep), at most once each: only when
-- ARGV 5 (`from`) is the count published so far, so a chunk sent twice, by two processes or
-- by one that retried, moves nobody twice; a crash between chunks loses nothing (any process
-- sends the next). ARGV 6: at most this many positions (arrival order)  7: the seed (shuffled:
-- must be the draw's)  8..: shuffled, the draw's ranks (arrival numbers) at positions from,
-- from+1, ... as core::FisherYates over the seed orders them: the script cannot run ChaCha20,
-- the process does, and every process computes the same. Whoever no longer waits in the draw
-- (dropped out, left, came back into the pre-queue) is skipped. Answers draw_state().
local function op_draw_step(now)
  if not load_room() then return no_room() end
  advance(now)
  local d, from = room.dr, tonumber(ARGV[5])
  if d and d.pub == from and (d.sh == 0 or ARGV[7] == d.seed) then
    local ids, count
    if d.sh == 1 then
      ids, count = {}, #ARGV - 7
      if count > d.n - from then
        return reply('invalid', to_register(true), 'draw: more positions than are left')
      end
      for i = 8, #ARGV do
        local rank = tonumber(ARGV[i])
        if not rank or rank < 0 or rank >= d.n or rank % 1 ~= 0 then
          return reply('invalid', to_register(true), 'draw: a rank out of range')
        end
        ids[#ids + 1] = redis.call('ZRANGE', K_DRAW, rank, rank)[1]
      end
    else
      ids = redis.call('ZRANGE', K_DRAW, from, math.min(from + tonumber(ARGV[6]), d.n) - 1)
      count = #ids
    end
    -- Those still pre-queued (status 'p', the record's first letter) and not back in the
    -- pre-queue since (only asked when anyone is in it: latecomers are few).
    local latecomers = redis.call('EXISTS', K_PREQUEUE) == 1
    local moved, records = {}, {}
    for _, id in ipairs(ids) do
      local v = redis.call('HGET', K_SESSIONS, id)
      if v and string.sub(v, 1, 1) == 'p' and
         not (latecomers and redis.call('ZSCORE', K_PREQUEUE, id)) then
        moved[#moved + 1], records[#records + 1] = id, v
      end
    end
    prequeued_to_line(moved, records)
    d.pub = from + count
    bump_version()
    if d.pub >= d.n then finish_draw() end
    fill(room.now)
  end
  return answer(to_register(true), draw_state())
end

-- ARGV[1] names the operation.
local OPS = {put = op_put_room, get = op_get_room, delete = op_delete_room,
             advance = op_advance, hint = op_hint, check = op_check, present = op_present,
             line = op_read_line, touch = op_touch, leave = op_leave, evict = op_evict,
             holder = op_admission_holder, revoked = op_is_revoked, event_put = op_put_event,
             events = op_list_events, event_delete = op_delete_event, draw = op_draw_step,
             pass_add = op_add_passes, passes = op_list_passes, pass_revoke = op_revoke_passes}

-- The entry point, called with the keys and arguments of one call: by FCALL, as a function of
-- the library this file becomes (Redis 7), or by the EVAL script it also becomes (Redis 6).
-- See Script in src/store/redis/cluster_client.h.
local function run(keys, argv)
  KEYS, ARGV = keys, argv
  K_META, K_LINE, K_SESSIONS, K_DEADLINES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  K_REVOKED, K_REVOKED_EXPIRY, K_CLIENTS, K_REFILLS = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
  K_GATE, K_LINE_SNAPSHOT, K_LINE_DELTAS = KEYS[9], KEYS[10], KEYS[11]
  K_EVENTS, K_PREQUEUE, K_DRAW, K_PASSES = KEYS[12], KEYS[13], KEYS[14], KEYS[15]
  K_PAGE = KEYS[16]
  K_FEED, K_FEED_HORIZON, told, room_name = KEYS[17], KEYS[18], {}, nil
  revocation_ttl = tonumber(ARGV[3])
  ENTROPY = ARGV[4] or ''
  if #ENTROPY ~= 64 or string.find(ENTROPY, '[^%x]') then
    return {'invalid_argument', 'room.lua: ARGV[4] must be 32 random bytes in hex'}
  end
  room, cfg, call_deltas, ver0, call_reordered = {}, {}, {}, nil, false
  picks_used, waits = 0, {}
  return dispatch(OPS, 'room')
end
