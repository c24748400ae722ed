-- One reliable queue, as one atomic script (src/store/redis/lua/queue.lua).
-- The same rules as src/core/queue.cc, over Redis structures; docs/design.md lists the keys.
--
-- KEYS: 1 meta (string: msgpack of FIELDS)  2 jobs (hash: id -> msgpack record)  3 payloads (hash)
--       4 history (hash: id -> msgpack list)  5 ready (zset, all scores 0, ordered by member:
--       priority, then order, then id)  6 delayed (zset: id -> ready at)  7 leases (zset: id ->
--       lease expiry)  8 dead (zset: id -> failed at)  9 dedupe (hash: key -> id)
--       10 acked (hash: id -> delivery)  11 acked expiry (zset)  12 workers (hash: name ->
--       alive until, 0 = no heartbeat)  13 heartbeats (zset: name -> alive until)
--       14 worker jobs (zset, lex: name NUL id)  15 poll (string with a TTL: long polls wait)
--       16 key (string: the SHA-256 digest of the queue's own key, 32 raw bytes; absent: none)
--       17 groups (hash: group name -> msgpack record, GROUP below)  18 grouped ready (zset, all
--       scores 0: the ready jobs that name a group, by member: len(group) group, then as ready)
--       19 fifo (zset, all scores 0: each active group's head, by member: the head's ready key,
--       then the group)  20 rotation (list of group names: round robin's turns)  21 parked
--       (zset: group -> when its rate or hold lets it go)  22 schedules (hash: id -> msgpack
--       record, SCHEDULE below)  23 schedule times (zset: id -> next nominal time, the schedules
--       not paused that have one)  24 finished (hash: id -> msgpack record, FINISHED below)
--       25 finished order (list of 'ID:AT:FLAGS', oldest first)  26 progress (hash: id -> the
--       progress's JSON text)  27 job logs (hash: id -> msgpack {dropped, at, line, at, line...})
--       28 dependencies (hash: id -> msgpack DEPS below, for a job pushed with depends_on)
--       29 dependents (zset, all scores 0, lex: padded dependency id then padded id of a job
--       waiting on it)  30 batches (hash: id -> msgpack BATCH below)  31 settled batches (zset:
--       id -> settled at)
--       A job's payload, history, progress, log and dependencies stay under its id from its
--       push until its finished record goes (or until it finishes, when the queue keeps none).
-- ARGV: 1 op  2 now ms ('' = Redis TIME)  3.. the op's arguments
-- Ids are zero-padded in members and fields, so lexical order is numeric order.
-- Invariants: pushed = acked + waiting + ready + delayed + inflight + dead + cancelled; a job
-- is in exactly one of ready, delayed, leases, dead, or waits for its dependencies (state w,
-- listed in dependents under each one still pending, and counted in `waiting`); a lease names
-- one delivery.

local ACK_MEMORY_MS, ACK_MEMORY_MAX = RULES.ack_memory_ms, RULES.ack_memory_max
-- What a queue keeps of its finished jobs until its settings say otherwise (core::KeepFinished).
local KEEP_COUNT, KEEP_AGE_MS = RULES.keep_count, RULES.keep_age_ms
-- Set by run() for each call, beside KEYS and ARGV (prelude.lua): the keys, named as KEYS
-- above lists them.
local K_META, K_JOBS, K_PAYLOADS, K_HISTORY, K_READY, K_DELAYED, K_LEASES, K_DEAD, K_DEDUPE
local K_ACKED, K_ACKED_EXPIRY, K_WORKERS, K_HEARTBEATS, K_WORKER_JOBS, K_POLL, K_QUEUE_KEY
local K_GROUPS, K_GREADY, K_GFIFO, K_ROTATION, K_PARKED, K_SCHEDULES, K_SCHEDULE_TIMES
local K_FINISHED, K_FINISHED_ORDER, K_PROGRESS, K_JOB_LOGS
-- Dependencies and batches: their keys (K_DEPS, K_DEPENDENTS, K_BATCHES, K_BATCHES_SETTLED),
-- state and functions, in one table. Lua allows a function (this file's main chunk) 200 local
-- variables, and the chunk is close to them: what is added goes in tables.
local flow = {}

local function pad(id) return string.format('%016d', id) end

-- The queue's scalar state: one msgpack array in KEYS[1], read once, written once.
local queue = {}
-- due: no deadline in delayed, leases or heartbeats is earlier (a lower bound: taking one out
-- leaves it early, and the next advance that reaches it reads the sets and makes it exact), so
-- most calls read none of the three sets. Absent in state written before it: read them.
-- FIELDS, the array's order: now next_id next_delivery next_order head_order paused pushed
-- acked nacked expired cancelled hint listed axmin due, then LIMITS: false while every one of
-- its fields is at its default (most queues: one byte more to read and write), else the array
-- lim qtat_ms qtat_rem qheld gready gact, then sched: the earliest time in schedule times (absent:
-- NEVER, none), kept exact by every operation on a schedule, so that the sweeper comes then and
-- no other call reads the set; then FINISHED's state (absent: the default keep_acked, none
-- kept), the array kc ka fseq fhead fmin ffloor tfloor (see finished jobs below); then FLOW
-- (absent while all three are at their defaults) the array waiting bopen bsmin: the jobs
-- waiting for their dependencies, the batches not yet settled, and no later than the earliest
-- time in settled batches (NEVER: none; a lower bound, as `due`).
-- lim: the queue's settings (core::QueueLimits), false for the defaults: {fairness (0 fifo, 1
-- round robin), per group: rate limit, period, burst (0 0 0: no rate), concurrency (0: none),
-- queue-wide: the same four}. qtat_ms, qtat_rem: the queue-wide rate's TAT (core::Gcra); qheld:
-- a snooze of an ungrouped job holds the whole queue until then; gready: jobs in grouped ready;
-- gact: groups active (in the choice), the ungrouped jobs aside (active when ready holds any).
-- load_queue and save_queue spell FIELDS out, in its order (one constructor sizes the table
-- once; see room.lua's load_room).
local function load_queue()
  local v = redis.call('GET', K_META)
  if not v then return false end
  local t = cmsgpack.unpack(v)
  queue = {now = t[1], next_id = t[2], next_delivery = t[3], next_order = t[4], head_order = t[5],
       paused = t[6], pushed = t[7], acked = t[8], nacked = t[9], expired = t[10],
       cancelled = t[11], hint = t[12], listed = t[13], axmin = t[14], due = t[15],
       lim = false, qtat_ms = 0, qtat_rem = 0, qheld = 0, gready = 0, gact = 0,
       sched = t[17] or NEVER, kc = KEEP_COUNT, ka = KEEP_AGE_MS, fseq = 0, fhead = 1,
       fmin = NEVER, ffloor = 0, tfloor = -1, waiting = 0, bopen = 0, bsmin = NEVER}
  local l = t[16]
  if l then
    queue.lim, queue.qtat_ms, queue.qtat_rem, queue.qheld, queue.gready, queue.gact =
        l[1], l[2], l[3], l[4], l[5], l[6]
  end
  local f = t[18]
  if f then
    queue.kc, queue.ka, queue.fseq, queue.fhead, queue.fmin, queue.ffloor, queue.tfloor =
        f[1], f[2], f[3], f[4], f[5], f[6], f[7]
  end
  local w = t[19]
  if w then queue.waiting, queue.bopen, queue.bsmin = w[1], w[2], w[3] end
  return true
end
local function create_queue(now)
  queue = {now = now, next_id = 1, next_delivery = 1, next_order = 1, head_order = 0, paused = 0,
       pushed = 0, acked = 0, nacked = 0, expired = 0, cancelled = 0, hint = NEVER, listed = 0,
       axmin = NEVER, due = NEVER, lim = false, qtat_ms = 0, qtat_rem = 0, qheld = 0, gready = 0,
       gact = 0, sched = NEVER, kc = KEEP_COUNT, ka = KEEP_AGE_MS, fseq = 0, fhead = 1,
       fmin = NEVER, ffloor = 0, tfloor = -1, waiting = 0, bopen = 0, bsmin = NEVER}
end

-- ---- limits: the settings, and GCRA (core/rate_limit.cc, integer arithmetic in doubles) -----
-- A rate is {limit, period_ms, burst}; a TAT is ms + rem / limit, 0 <= rem < limit. Every value
-- stays below 2^52 (core::RateLimit's bounds), so these doubles hold the core's integers.
local FIFO, ROUND_ROBIN = 0, 1
local function fairness() return queue.lim and queue.lim[1] or FIFO end
local function rate_at(k)
  local s = queue.lim
  if s and s[k] > 0 then return {s[k], s[k + 1], s[k + 2]} end
  return nil
end
local function group_rate() return rate_at(2) end
local function group_concurrency() return queue.lim and queue.lim[5] or 0 end
local function queue_rate() return rate_at(6) end
local function queue_concurrency() return queue.lim and queue.lim[9] or 0 end
-- num / limit as whole ms and a remainder (num >= 0).
local function split(num, limit)
  local rem = num % limit
  return (num - rem) / limit, rem
end
-- The earliest ms >= now at which a take is allowed (Gcra::AllowedAtMs): TAT less the
-- tolerance, (burst - 1) intervals, rounded up to a whole ms.
local function gcra_allowed_at(ms, rem, r, now)
  local whole, part = split((r[3] - 1) * r[2], r[1])
  ms, rem = ms - whole, rem - part
  if rem < 0 then rem, ms = rem + r[1], ms - 1 end
  return math.max(now, ms + (rem > 0 and 1 or 0))
end
-- Gcra::Take: TAT moves one interval on from max(TAT, now).
local function gcra_take(ms, rem, r, now)
  if ms < now then ms, rem = now, 0 end
  local whole, part = split(r[2], r[1])
  ms, rem = ms + whole, rem + part
  if rem >= r[1] then rem, ms = rem - r[1], ms + 1 end
  return ms, rem
end
-- Gcra::Rescale: the remainder in the new limit's units, rounded up (TAT never moves earlier).
local function gcra_rescale(ms, rem, from, to)
  if from[1] == to[1] or rem == 0 then return ms, rem end
  local r = split(rem * to[1] + from[1] - 1, from[1])
  if r >= to[1] then return ms + 1, 0 end
  return ms, r
end

-- ---- groups: one record per group a job names (core::GroupLine's Group) ----------------------
-- GROUP, the msgpack array's order: refs (jobs naming it, in any state), inflight, tat_ms,
-- tat_rem (its rate's TAT), held (a snooze holds it until then), active (in the choice: in fifo
-- under `key`, or listed in the rotation), in_rot (listed in the rotation: an entry may outlive
-- `active`), pconc (at its concurrency: back when one of its jobs finishes), puntil (in parked
-- under this time, NEVER when not), key (its member in fifo while active). Records are read
-- once per call (`groups` caches them) and written back with the queue's state. The ungrouped
-- jobs ('') have a record only for their place in the rotation: they are never held back by
-- per-group limits, and are active exactly when ready holds any.
local groups = {}
local function load_group(g)
  local G = groups[g]
  if G then return G end
  local v = redis.call('HGET', K_GROUPS, g)
  if v then
    local t = cmsgpack.unpack(v)
    G = {refs = t[1], inflight = t[2], tat_ms = t[3], tat_rem = t[4], held = t[5], active = t[6],
         in_rot = t[7], pconc = t[8], puntil = t[9], key = t[10]}
  else
    G = {refs = 0, inflight = 0, tat_ms = 0, tat_rem = 0, held = 0, active = 0, in_rot = 0,
         pconc = 0, puntil = NEVER, key = ''}
  end
  groups[g] = G
  return G
end
-- A group no job names, whose rate owes nothing, not held and not listed in the rotation is the
-- same as a fresh one: its record goes (GroupLine::Sweep; a rate owing something keeps it, or
-- it would get a fresh burst).
local function save_groups()
  local now = queue.now
  for g, G in pairs(groups) do
    if G.refs <= 0 and G.inflight <= 0 and G.in_rot == 0 and G.active == 0 and
       G.puntil == NEVER and G.held <= now and G.tat_ms < now + (G.tat_rem > 0 and 0 or 1) then
      redis.call('HDEL', K_GROUPS, g)
    else
      redis.call('HSET', K_GROUPS, g, cmsgpack.pack({G.refs, G.inflight, G.tat_ms, G.tat_rem,
                 G.held, G.active, G.in_rot, G.pconc, G.puntil, G.key}))
    end
  end
  groups = {}
end

-- ---- batches (core::Queue's batches_): one record per batch --------------------------------
-- BATCH, the msgpack array's order: sealed (0/1), settled (0/1), pending, acked, dead,
-- cancelled, created, settled_at (0 while open), the callback jobs pushed so far (0: none):
-- on_success, on_complete, on_dead; then the callbacks (false: none), each the push arguments
-- of one job (op_push's eight). Records are read once per call (`batches` caches them, false
-- for none) and the changed ones written back with the queue's state, so that a push made
-- while a batch settles sees the batch as it is then. A settled batch is kept until its
-- settled_at plus keep_acked's age, and past it for as long as a job of it is dead or pending
-- (core::Queue::ForgetSettledBatches, BatchForgettable): settled batches lists them by that
-- time, and a forgettable record reads as none whether or not it is removed yet.
flow.batches = {}
function flow.load_batch(id, now)
  local b = flow.batches[id]
  if b == nil then
    local v = redis.call('HGET', flow.K_BATCHES, id)
    b = false
    if v then
      local t = cmsgpack.unpack(v)
      b = {sealed = t[1], settled = t[2], pending = t[3], acked = t[4], dead = t[5],
           cancelled = t[6], created = t[7], settled_at = t[8], success_job = t[9],
           complete_job = t[10], dead_job = t[11], on_success = t[12], on_complete = t[13],
           on_dead = t[14], changed = false}
    end
    flow.batches[id] = b
  end
  if not b or flow.batch_forgettable(b, now) then return nil end
  return b
end
-- Settled, past its age (at `now`, a call's time before the queue advances to it; nil: the
-- queue's time), none of its jobs left (core::Queue::BatchForgettable).
function flow.batch_forgettable(b, now)
  now = now and math.max(now, queue.now) or queue.now
  return b.settled == 1 and b.settled_at + queue.ka <= now and b.pending == 0 and b.dead == 0
end
function flow.save_batches()
  for id, b in pairs(flow.batches) do
    if b and b.changed then
      redis.call('HSET', flow.K_BATCHES, id, cmsgpack.pack({b.sealed, b.settled, b.pending, b.acked,
                 b.dead, b.cancelled, b.created, b.settled_at, b.success_job, b.complete_job,
                 b.dead_job, b.on_success, b.on_complete, b.on_dead}))
    end
  end
  flow.batches = {}
end

local function save_queue()
  local q = queue
  local sched, fin, waits = q.sched ~= NEVER and q.sched or nil, nil, nil
  if q.waiting ~= 0 or q.bopen ~= 0 or q.bsmin ~= NEVER then
    waits = {q.waiting, q.bopen, q.bsmin}
    fin = false  -- no hole before it (set below when there is one)
  end
  if q.kc ~= KEEP_COUNT or q.ka ~= KEEP_AGE_MS or q.fhead <= q.fseq then
    fin = {q.kc, q.ka, q.fseq, q.fhead, q.fmin, q.ffloor, q.tfloor}
  end
  if fin ~= nil then sched = sched or false end  -- no hole before it: an array still
  redis.call('SET', K_META, cmsgpack.pack({q.now, q.next_id, q.next_delivery, q.next_order,
             q.head_order, q.paused, q.pushed, q.acked, q.nacked, q.expired, q.cancelled, q.hint,
             q.listed, q.axmin, q.due,
             (q.lim or q.qtat_ms ~= 0 or q.qtat_rem ~= 0 or q.qheld ~= 0 or q.gready ~= 0 or
              q.gact ~= 0) and {q.lim, q.qtat_ms, q.qtat_rem, q.qheld, q.gready, q.gact},
             sched, fin, waits}))
  if next(groups) ~= nil then save_groups() end
  if next(flow.batches) ~= nil then flow.save_batches() end
  flush_told()
end

-- ---- jobs: {id, state, due, order, priority, max_attempts, attempt, delivery, worker,
--      failed_at, dedupe, group, notes, batch}; state r(eady) d(elayed) i(nflight) x (dead)
--      w (waiting for its dependencies: due is when it may run, its push's time plus its
--      delay); group false when none; notes: NOTE flags of what the job has in progress, job
--      logs and dependencies (absent: 0); batch: the batch it joined (absent: none) ----------
local NOTE_PROGRESS, NOTE_LOG, NOTE_HISTORY = 1, 2, 4
flow.NOTE_DEPS = 8
local function has(flags, note) return math.floor(flags / note) % 2 == 1 end
local function load_job(id)
  local v = redis.call('HGET', K_JOBS, pad(id))
  if not v then return nil end
  local t = cmsgpack.unpack(v)
  return {id = id, st = t[1], due = t[2], order = t[3], priority = t[4], max_attempts = t[5],
          attempt = t[6], delivery = t[7], worker = t[8], failed_at = t[9], dedupe = t[10],
          group = t[11] or false, notes = t[12] or 0, batch = t[13] or false}
end
local function save_job(x)
  redis.call('HSET', K_JOBS, pad(x.id), cmsgpack.pack({x.st, x.due, x.order, x.priority,
             x.max_attempts, x.attempt, x.delivery, x.worker, x.failed_at, x.dedupe, x.group,
             (x.notes ~= 0 or x.batch) and x.notes or nil, x.batch or nil}))
end
local function ready_member(x)
  return string.format('%08x%014x', 2147483647 - x.priority, x.order + 2251799813685248) ..
         pad(x.id)
end
local function ready_id(member) return tonumber(string.sub(member, 23)) end
local function worker_job_member(worker, id) return worker .. '\0' .. pad(id) end
local function worker_job_range(worker)
  return redis.call('ZRANGEBYLEX', K_WORKER_JOBS, '[' .. worker .. '\0', '(' .. worker .. '\1')
end
-- Delivery order: higher priority first, then order (returned jobs lead), then id.
local function by_ready_key(a, b)
  if a.priority ~= b.priority then return a.priority > b.priority end
  if a.order ~= b.order then return a.order < b.order end
  return a.id < b.id
end

-- ---- the group line (core::GroupLine): which ready job a fetch takes -------------------------
-- The ungrouped jobs are ready's; each group's are in grouped ready under the prefix
-- len(group) group (no group's prefix starts another's), in the same order. A group is in
-- exactly one of: active (fifo or the rotation), parked (its rate or a hold: a time), at its
-- concurrency (pconc), or none (no ready job). Fifo's member for a group is its head's exact
-- ready key (the core keeps one that may be early and corrects it when it leads: the same
-- choice). Names are compared byte by byte, never with Lua's `<` (Redis sets the locale's
-- collation, so `<` on strings need not be byte order).
local function bytes_less(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local function gprefix(g) return string.char(#g) .. g end
local function grouped_member(x) return gprefix(x.group) .. ready_member(x) end
local function line_first(g)
  local p = gprefix(g)
  return redis.call('ZRANGEBYLEX', K_GREADY, '[' .. p, '(' .. p .. '\255', 'LIMIT', 0, 1)[1]
end
local function ungrouped_active() return redis.call('EXISTS', K_READY) == 1 end
local function rate_unpark(g, G)
  if G.puntil == NEVER then return end
  redis.call('ZREM', K_PARKED, g)
  G.puntil = NEVER
end
local function activate(g, G, key)
  if G.active == 1 then return end
  G.active = 1
  queue.gact = queue.gact + 1
  if fairness() == FIFO then
    G.key = key
    redis.call('ZADD', K_GFIFO, 0, key)
  elseif G.in_rot == 0 then
    G.in_rot = 1
    redis.call('RPUSH', K_ROTATION, g)
  end
end
-- Round robin: its entry in the rotation stays, passed over when reached (choose_in_turn).
local function deactivate(G)
  if G.active == 0 then return end
  G.active = 0
  queue.gact = queue.gact - 1
  if fairness() == FIFO then redis.call('ZREM', K_GFIFO, G.key) end
  G.key = ''
end
-- The ungrouped jobs became active (ready was empty): round robin lists them, unless listed.
local function ungrouped_activated()
  local G = load_group('')
  if G.in_rot == 0 then
    G.in_rot = 1
    redis.call('RPUSH', K_ROTATION, '')
  end
end
-- GroupLine::Reassess: puts group g where its state says at `now`.
local function reassess(g, now)
  local G = load_group(g)
  local conc = group_concurrency()
  G.pconc = (conc > 0 and G.inflight >= conc) and 1 or 0
  local first = G.pconc == 0 and line_first(g)
  if not first then
    rate_unpark(g, G)
    return deactivate(G)
  end
  local at = G.held  -- a hold parks it as a rate does, until the later of the two
  local r = group_rate()
  if r then at = math.max(at, gcra_allowed_at(G.tat_ms, G.tat_rem, r, now)) end
  if at > now then
    if G.puntil ~= at then
      rate_unpark(g, G)
      G.puntil = at
      redis.call('ZADD', K_PARKED, digits(at), g)
    end
    return deactivate(G)
  end
  rate_unpark(g, G)
  local key = string.sub(first, #g + 2, #g + 23) .. g
  if G.active == 0 then return activate(g, G, key) end
  if fairness() == FIFO and key ~= G.key then
    redis.call('ZREM', K_GFIFO, G.key)
    G.key = key
    redis.call('ZADD', K_GFIFO, 0, key)
  end
end
-- A job became ready (its state and order set): into its group's line.
local function line_push(x)
  if x.group then
    redis.call('ZADD', K_GREADY, 0, grouped_member(x))
    queue.gready = queue.gready + 1
    return reassess(x.group, queue.now)
  end
  local was_empty = fairness() == ROUND_ROBIN and not ungrouped_active()
  redis.call('ZADD', K_READY, 0, ready_member(x))
  if was_empty then ungrouped_activated() end
end
-- A ready job leaves its line other than by a take (cancelled): GroupLine::Forget, which looks
-- at the group again only when its line is empty (a group parked until a time already past
-- stays parked until a take unparks it). Fifo's member is kept exact.
local function line_forget(x)
  if not x.group then return redis.call('ZREM', K_READY, ready_member(x)) end
  local g = x.group
  redis.call('ZREM', K_GREADY, grouped_member(x))
  queue.gready = queue.gready - 1
  local first = line_first(g)
  if not first then return reassess(g, queue.now) end
  local G = load_group(g)
  local key = string.sub(first, #g + 2, #g + 23) .. g
  if G.active == 1 and fairness() == FIFO and key ~= G.key then
    redis.call('ZREM', K_GFIFO, G.key)
    G.key = key
    redis.call('ZADD', K_GFIFO, 0, key)
  end
end
-- Groups whose time in parked has come are looked at again, in (time, name) order.
local function unpark(now)
  for _, g in ipairs(redis.call('ZRANGEBYSCORE', K_PARKED, '-inf', digits(now))) do
    rate_unpark(g, load_group(g))
    reassess(g, now)
  end
end
-- The queue-wide limits and hold allow a take at `now`, with `inflight` jobs in flight (nil:
-- as many as hold leases).
local function queue_allows(now, inflight)
  if now < queue.qheld then return false end
  local c = queue_concurrency()
  if c > 0 and (inflight or redis.call('ZCARD', K_LEASES)) >= c then return false end
  local r = queue_rate()
  return not r or gcra_allowed_at(queue.qtat_ms, queue.qtat_rem, r, now) <= now
end
-- Fifo: the active group whose head comes first ('' the ungrouped jobs), nil when none.
local function choose_fifo()
  local u = redis.call('ZRANGE', K_READY, 0, 0)[1]
  local f = queue.gact > 0 and redis.call('ZRANGE', K_GFIFO, 0, 0)[1]
  if u and (not f or bytes_less(string.sub(u, 1, 22), string.sub(f, 1, 22))) then return '' end
  if f then return string.sub(f, 23) end
  return nil
end
-- Round robin: the rotation's first active group; entries of groups no longer active go.
local function choose_in_turn()
  while true do
    local g = redis.call('LINDEX', K_ROTATION, 0)
    if not g then return nil end
    if g == '' then
      if ungrouped_active() then return g end
    elseif load_group(g).active == 1 then
      return g
    end
    redis.call('LPOP', K_ROTATION)
    load_group(g).in_rot = 0
  end
end
-- The first job of group g's line, out of it.
local function take_first(g)
  local m
  if g == '' then
    m = redis.call('ZRANGE', K_READY, 0, 0)[1]
    redis.call('ZREM', K_READY, m)
    return load_job(ready_id(m))
  end
  m = line_first(g)
  redis.call('ZREM', K_GREADY, m)
  queue.gready = queue.gready - 1
  return load_job(tonumber(string.sub(m, -16)))
end
-- After a take from g: counted in flight and against the rates; `in_turn` (a fetch's take, not
-- a reclaim's) ends g's turn in round robin, and g goes to the back if still active.
local function took(g, now, in_turn)
  local r = queue_rate()
  if r then queue.qtat_ms, queue.qtat_rem = gcra_take(queue.qtat_ms, queue.qtat_rem, r, now) end
  local rr = in_turn and fairness() == ROUND_ROBIN
  local G
  if rr then
    G = load_group(g)
    redis.call('LPOP', K_ROTATION)  -- g: choose_in_turn answered the front
    G.in_rot = 0
  end
  if g ~= '' then
    G = load_group(g)
    G.inflight = G.inflight + 1
    local gr = group_rate()
    if gr then G.tat_ms, G.tat_rem = gcra_take(G.tat_ms, G.tat_rem, gr, now) end
    reassess(g, now)
  end
  if rr and G.in_rot == 0 and (g == '' and ungrouped_active() or g ~= '' and G.active == 1) then
    G.in_rot = 1
    redis.call('RPUSH', K_ROTATION, g)
  end
end
-- GroupLine::TakeThis's test: whether group g (and the queue) allow a take at `now`, though it
-- is not g's turn.
local function allows_now(g, now, inflight)
  if not queue_allows(now, inflight) then return false end
  if not g then return true end
  local G = load_group(g)
  local conc = group_concurrency()
  if conc > 0 and G.inflight >= conc then return false end
  if now < G.held then return false end
  local r = group_rate()
  return not r or gcra_allowed_at(G.tat_ms, G.tat_rem, r, now) <= now
end
-- A job of x's group is no longer in flight (GroupLine::Finished).
local function finished(x)
  local g = x.group
  if not g then return end
  local G = load_group(g)
  if G.inflight > 0 then G.inflight = G.inflight - 1 end
  if G.pconc == 1 then reassess(g, queue.now) end
end
-- A snooze holds x's group (the whole queue for an ungrouped job) until `untilms`.
local function hold(g, untilms, now)
  if not g then
    queue.qheld = math.max(queue.qheld, untilms)
    return
  end
  local G = load_group(g)
  G.held = math.max(G.held, untilms)
  reassess(g, now)
end
-- Whether a take at `now` would find a job (long polls elsewhere are then woken).
local function can_take(now)
  if not queue_allows(now) then return false end
  if queue.gact > 0 or ungrouped_active() then return true end
  return queue.gready > 0 and first_score(K_PARKED) <= now
end
-- When a job held back by a rate or a hold may be taken (GroupLine::NextAllowedAt): NEVER when
-- none is, or only concurrency holds them (a finish frees them, and wakes).
local function next_allowed_at(now)
  local at = now
  if queue.gact == 0 and not ungrouped_active() then
    local p = first_score(K_PARKED)
    if p == NEVER then return NEVER end
    at = math.max(now, p)
  end
  local c = queue_concurrency()
  if c > 0 and redis.call('ZCARD', K_LEASES) >= c then return NEVER end
  local r = queue_rate()
  if r then at = math.max(at, gcra_allowed_at(queue.qtat_ms, queue.qtat_rem, r, now)) end
  return math.max(at, queue.qheld)
end
-- New settings (GroupLine::Configure): rates kept rescaled, or forgotten when removed; fifo and
-- parked made again, each group looked at again in name order (so groups activated join the
-- rotation's back in that order); the rotation is kept while the fairness stays.
local function configure(lim, now)
  local old_q, old_g, old_fair = queue_rate(), group_rate(), fairness()
  queue.lim = lim
  local new_q, new_g = queue_rate(), group_rate()
  if old_q and new_q then
    queue.qtat_ms, queue.qtat_rem = gcra_rescale(queue.qtat_ms, queue.qtat_rem, old_q, new_q)
  elseif not new_q then
    queue.qtat_ms, queue.qtat_rem = 0, 0
  end
  local turns_kept = old_fair == fairness()  -- another fairness starts the rotation afresh
  redis.call('DEL', K_GFIFO, K_PARKED)
  if not turns_kept then redis.call('DEL', K_ROTATION) end
  queue.gact = 0
  local names = redis.call('HKEYS', K_GROUPS)
  table.sort(names, bytes_less)
  for _, g in ipairs(names) do
    local G = load_group(g)
    if not turns_kept then G.in_rot = 0 end
    if old_g and new_g then
      G.tat_ms, G.tat_rem = gcra_rescale(G.tat_ms, G.tat_rem, old_g, new_g)
    elseif not new_g then
      G.tat_ms, G.tat_rem = 0, 0
    end
    G.active, G.pconc, G.puntil, G.key = 0, 0, NEVER, ''
  end
  if fairness() == ROUND_ROBIN and ungrouped_active() then ungrouped_activated() end
  for _, g in ipairs(names) do
    if g ~= '' and load_group(g).refs > 0 then reassess(g, now) end
  end
end

-- `since`: when it became ready (ready jobs keep it in due; a fetch answers it, for the wait).
local function make_ready(x, at_head, since)
  x.st, x.due, x.failed_at = 'r', since, nil
  if at_head then
    x.order = queue.head_order
    queue.head_order = queue.head_order - 1
  else
    x.order = queue.next_order
    queue.next_order = queue.next_order + 1
  end
  line_push(x)
  save_job(x)
end
-- A deadline at `t` was added to delayed, leases or heartbeats.
local function deadline_at(t)
  if queue.due == nil or t < queue.due then queue.due = t end
end
local function make_delayed(x, untilms)
  x.st, x.due = 'd', untilms
  x.order = queue.next_order  -- jobs due at the same ms become ready in this order
  queue.next_order = queue.next_order + 1
  redis.call('ZADD', K_DELAYED, untilms, pad(x.id))
  deadline_at(untilms)
  save_job(x)
end
local function forget_worker_if_idle(w)
  local alive = redis.call('HGET', K_WORKERS, w)
  if alive and tonumber(alive) == 0 and #redis.call('ZRANGEBYLEX', K_WORKER_JOBS, '[' .. w .. '\0',
      '(' .. w .. '\1', 'LIMIT', 0, 1) == 0 then
    redis.call('HDEL', K_WORKERS, w)
  end
end
local function end_lease(x)
  redis.call('ZREM', K_LEASES, pad(x.id))
  if x.worker then
    local w = x.worker
    redis.call('ZREM', K_WORKER_JOBS, worker_job_member(w, x.id))
    x.worker = false
    forget_worker_if_idle(w)
  end
  finished(x)
end
-- The attempt's error (bounded by the caller, core::BoundedError); only the last KEPT_ATTEMPTS
-- are kept.
local KEPT_ATTEMPTS = RULES.kept_attempts
local function add_history(x, err, now)
  local v = redis.call('HGET', K_HISTORY, pad(x.id))
  local h = v and cmsgpack.unpack(v) or {}
  if #h >= KEPT_ATTEMPTS then table.remove(h, 1) end
  h[#h + 1] = {x.attempt, err, now}
  redis.call('HSET', K_HISTORY, pad(x.id), cmsgpack.pack(h))
end
-- core::Queue::Bury: dead, then its batch learns it (flow.batch_job_moved), then the jobs
-- waiting on it (flow.settled); both are defined below, as they push jobs in turn.
local function bury(x, now, err)
  if K_FEED then
    tell({'t', RULES.job_dead, 'at', digits(now), 'q', string.match(K_META, '{q:(.*)}:m$'), 'j',
          digits(x.id), 'd', err or ''})
  end
  x.st, x.failed_at = 'x', now
  redis.call('ZADD', K_DEAD, now, pad(x.id))
  save_job(x)
  if x.batch then flow.batch_job_moved(x.batch, 'dead') end
  flow.settled(x.id, 'dead', false)
end
-- A delivery that ended without an ack: lease ran out, worker died or was released.
local function fail(x, err, now, expired)
  end_lease(x)
  add_history(x, err, now)
  if expired then queue.expired = queue.expired + 1 end
  if x.attempt >= x.max_attempts then return bury(x, now, err) end
  -- Ready since its lease ran out, or now when it was taken back before that.
  make_ready(x, true, math.min(x.due, now))
end
-- Removes what a job keeps under its id beside its record: its payload, and what `flags` (NOTE
-- flags) say it has of history, progress, log and dependencies.
local function drop_job_data(id, flags)
  redis.call('HDEL', K_PAYLOADS, id)
  if has(flags, NOTE_HISTORY) then redis.call('HDEL', K_HISTORY, id) end
  if has(flags, NOTE_PROGRESS) then redis.call('HDEL', K_PROGRESS, id) end
  if has(flags, NOTE_LOG) then redis.call('HDEL', K_JOB_LOGS, id) end
  if has(flags, flow.NOTE_DEPS) then redis.call('HDEL', flow.K_DEPS, id) end
end

-- ---- finished jobs (core::Queue::Finish, ForgetFinished): acked and cancelled jobs kept for
--      lookup -----------------------------------------------------------------------------------
-- FINISHED, the record's array: state ('acked', 'cancelled'), at (finished at), seq, priority,
-- group (false: none), attempts, max_attempts, flags (NOTE flags: what it keeps under its id in
-- history, progress and job logs; its payload is always kept), result (absent or false: none),
-- batch (absent: none). Records
-- are numbered in the order they finish (seq, from 1), and finished order lists them so, with
-- each one's time and flags: both seq and at grow along it (queue.now never goes back), so
-- the records a queue no longer keeps are always the list's front.
-- The queue's state: kc, ka its keep_acked (count, age_ms); fseq the last record's seq, fhead
-- the front's (fhead > fseq: none kept); fmin no later than the front's time (as `due`: a
-- lower bound, made exact when reached); ffloor, tfloor: a record whose seq is below ffloor, or
-- that finished at or before tfloor, is no longer kept whatever the settings say now (settings
-- changed after it was gone by the old ones: the core trims by the old settings before it
-- applies new ones). A record is kept (shown) exactly while finished_kept() says so, whether or
-- not it was trimmed yet: trimming is bounded per call (FINISHED_TRIM_MAX), and the sweeper
-- comes back for the rest.
local FINISHED_TRIM_MAX = 256
-- The sweeper trims an idle queue's expired records this long after the first expires, so that
-- records finished over a while go in a few sweeps rather than one sweep each.
local FINISHED_SWEEP_SLACK_MS = 60000
local function finished_kept(seq, at, now)
  local q = queue
  return seq >= q.fhead and seq >= q.ffloor and seq > q.fseq - q.kc and at > q.tfloor and
         at + q.ka > now
end
-- Whether the front record goes by its seq alone (the count or ffloor).
local function front_over()
  return queue.fhead < queue.ffloor or queue.fhead <= queue.fseq - queue.kc
end
local function front_entry(e)
  local id, at, flags = string.match(e, '^(%d+):(%-?%d+):(%d+)$')
  return id, tonumber(at), tonumber(flags)
end
local function drop_finished_front()
  local e = redis.call('LPOP', K_FINISHED_ORDER)
  queue.fhead = queue.fhead + 1
  if not e then return end
  local id, _, flags = front_entry(e)
  if not id then return end
  redis.call('HDEL', K_FINISHED, id)
  drop_job_data(id, flags)
end
-- Trims the records no longer kept at `now`, at most FINISHED_TRIM_MAX.
local function forget_finished(now)
  local q, n = queue, 0
  while q.fhead <= q.fseq and n < FINISHED_TRIM_MAX do
    if not front_over() then
      if q.fmin > q.tfloor and q.fmin + q.ka > now then break end  -- (fmin: maybe early)
      local _, at = front_entry(redis.call('LINDEX', K_FINISHED_ORDER, 0) or '')
      q.fmin = at or NEVER
      if at and at > q.tfloor and at + q.ka > now then break end
    end
    drop_finished_front()
    n = n + 1
  end
  if q.fhead > q.fseq then  -- none kept: the numbering and floors start again
    q.fseq, q.fhead, q.fmin, q.ffloor, q.tfloor = 0, 1, NEVER, 0, -1
  end
end
-- When the sweeper should trim next (NEVER: nothing kept; now: a trim was cut short).
local function finished_due()
  local q = queue
  if q.fhead > q.fseq then return NEVER end
  if front_over() or q.fmin <= q.tfloor then return q.now end
  return q.fmin + q.ka + FINISHED_SWEEP_SLACK_MS
end
-- New keep_acked settings, after the old ones had their say at queue.now.
local function keep_finished(count, age_ms)
  local q = queue
  q.ffloor = math.max(q.ffloor, q.fseq - q.kc + 1)
  q.tfloor = math.max(q.tfloor, q.now - q.ka)
  q.kc, q.ka = count, age_ms
  forget_finished(q.now)
end

-- Job x is done (acked or cancelled, `state`), with `result` (nil: none): it leaves the live
-- jobs and, while the queue keeps any, becomes a finished record, its payload, history,
-- progress and log staying where they are until the record goes.
local function finish(x, state, result)
  if x.dedupe then redis.call('HDEL', K_DEDUPE, x.dedupe) end
  if x.group then
    local G = load_group(x.group)
    G.refs = G.refs - 1
  end
  local id = pad(x.id)
  redis.call('HDEL', K_JOBS, id)
  local q = queue
  if q.kc <= 0 then return drop_job_data(id, x.notes + NOTE_HISTORY) end
  -- Each delivery before an ack's, and each before a cancel, failed (a snooze or a give-back
  -- takes its attempt back), and a dead job has the failure that buried it (a dependency's
  -- has attempt 0): a job has a history exactly when this says so. Read the state, not the
  -- hash, so that most acks do not touch it.
  local flags = x.notes
  if x.attempt > (state == 'acked' and 1 or 0) or x.st == 'x' then
    flags = flags + NOTE_HISTORY
  else
    redis.call('HDEL', K_HISTORY, id)
  end
  q.fseq = q.fseq + 1
  local record = {state, q.now, q.fseq, x.priority, x.group, x.attempt, x.max_attempts, flags,
                  result}
  if x.batch then record[9], record[10] = result or false, x.batch end
  redis.call('HSET', K_FINISHED, id, cmsgpack.pack(record))
  local entry = id .. ':' .. digits(q.now) .. ':' .. flags
  if redis.call('RPUSH', K_FINISHED_ORDER, entry) == 1 then q.fhead, q.fmin = q.fseq, q.now end
  forget_finished(q.now)
end
local function jobs_of(ids)
  local out = {}
  for _, id in ipairs(ids) do out[#out + 1] = load_job(tonumber(id)) end
  return out
end
-- Each goes to the head, the last first, so together they keep their order.
local function fail_all(list, err, now)
  table.sort(list, by_ready_key)
  for i = #list, 1, -1 do fail(list[i], err, now, true) end
end
-- The jobs worker `w` holds, in id order.
local function jobs_of_worker(w)
  local ids = {}
  for _, m in ipairs(worker_job_range(w)) do ids[#ids + 1] = string.sub(m, #w + 2) end
  return jobs_of(ids)
end
local function worker_died(w, now)
  redis.call('HSET', K_WORKERS, w, 0)
  redis.call('ZREM', K_HEARTBEATS, w)
  local list = jobs_of_worker(w)
  fail_all(list, "worker '" .. w .. "' stopped sending heartbeats", now)
  if #list == 0 then forget_worker_if_idle(w) end
end

-- ---- time -----------------------------------------------------------------------------------
-- axmin: the earliest time an ack may be forgotten, so most calls skip this.
local function forget_old_acks(now)
  if now >= queue.axmin then queue.axmin = forget_expired(K_ACKED, K_ACKED_EXPIRY, now) end
end
local function advance(now)
  local target = math.max(now, queue.now)
  while queue.due == nil or queue.due <= target do
    local d = first_score(K_DELAYED)
    local l = first_score(K_LEASES)
    local h, hw = first_score(K_HEARTBEATS)
    local nxt = math.min(d, l, h)
    if nxt == NEVER or nxt > target then
      queue.due = nxt
      break
    end
    local when = math.max(nxt, queue.now)
    queue.now = when
    if d == nxt then  -- every job due at this ms, in the order it was delayed
      local ids = redis.call('ZRANGEBYSCORE', K_DELAYED, nxt, nxt)
      redis.call('ZREMRANGEBYSCORE', K_DELAYED, nxt, nxt)
      local list = jobs_of(ids)
      table.sort(list, function(a, b) return a.order < b.order end)
      for _, x in ipairs(list) do make_ready(x, false, x.due) end
    elseif l == nxt then  -- every lease running out at this ms
      local ids = redis.call('ZRANGEBYSCORE', K_LEASES, nxt, nxt)
      fail_all(jobs_of(ids), 'lease expired', when)
    else
      worker_died(hw, when)
    end
  end
  queue.now = target
  forget_old_acks(queue.now)
  forget_finished(queue.now)
  flow.forget_settled_batches(queue.now)
end
-- Whether ready jobs may be held back at all: settings, a grouped job, or a hold on the queue.
-- Without any (most queues), every ready job is ungrouped and a fetch takes ready's first, as
-- it did before groups, reading nothing more.
local function plain()
  return not queue.lim and queue.gready == 0 and queue.qheld <= queue.now
end
-- Someone long-polls here, and the queue is not paused.
local function polled()
  return queue.paused == 0 and redis.call('EXISTS', K_POLL) == 1
end
-- Long polls parked while every ready job was held back must look again when one may go: then
-- the sweeper runs `advance`, whose answer wakes them (a concurrency freed by a finish wakes
-- them from that call's answer).
local function next_deadline()
  local n
  if queue.due ~= nil then
    n = queue.due  -- maybe early: the sweeper then finds nothing
  else
    n = math.min((first_score(K_DELAYED)), (first_score(K_LEASES)), (first_score(K_HEARTBEATS)))
  end
  if queue.sched < n then n = queue.sched end  -- a schedule to fire (RedisBackend::FireDue)
  local f = finished_due()  -- finished records to trim, though nobody calls
  if f < n then n = f end
  if queue.bsmin ~= NEVER then  -- settled batches to forget, as finished records
    local b = queue.bsmin + queue.ka
    b = b <= queue.now and queue.now or b + FINISHED_SWEEP_SLACK_MS
    if b < n then n = b end
  end
  if not plain() and polled() then
    local at = next_allowed_at(queue.now)
    if at > queue.now and at < n then n = at end
  end
  return n
end
local function to_register(force) return register_deadline(queue, next_deadline(), force) end
-- Long polls elsewhere should try again: someone polling, and a fetch would find a job.
local function wake()
  if not polled() then return 0 end
  if plain() then return ungrouped_active() and 1 or 0 end
  return can_take(queue.now) and 1 or 0
end
-- A queue that holds nothing a client put there (never pushed to, not paused, no worker, no key
-- of its own) is forgotten, as the embedded backend forgets it: a name nobody uses costs
-- nothing. (The key is looked at last: only queues never pushed to get that far.)
local function keyed() return redis.call('EXISTS', K_QUEUE_KEY) == 1 end
local function holds_nothing()
  return queue.listed == 0 and queue.pushed == 0 and queue.paused == 0 and
         redis.call('HLEN', K_WORKERS) == 0 and
         not keyed()
end
-- Shown by ListQueues and counted against --max-queues: pushed to (or given settings), or
-- holding a key.
local function counted() return queue.listed == 1 or keyed() end
-- Every answer of a queue that exists: {'ok', register, wake, payload}
local function answer(force, payload)
  if holds_nothing() then
    redis.call('DEL', K_META, K_WORKERS, K_HEARTBEATS, K_WORKER_JOBS)
    flush_told()  -- a resume that left nothing behind is still told
    return {'ok', NOTHING_TO_REGISTER, 0, payload}
  end
  local reg = to_register(force)
  local wk = wake()
  save_queue()
  return {'ok', reg, wk, payload}
end

-- ---- leases: (id, delivery) pairs, their MAC already checked by the backend -----------------
local OK, LOST, INVALID = 0, 1, 2
-- An ack that finished its job answers RAN + the ms its delivery ran (the caller reads it as
-- OK; script_replies.cc's kRanBase).
flow.RAN = 3
local function current(id, delivery)
  local x = load_job(id)
  if x then
    if x.st == 'i' and x.delivery == delivery then return OK, x, false end
    return LOST, nil, false
  end
  local a = redis.call('HGET', K_ACKED, pad(id))
  if a and tonumber(a) == delivery then return OK, nil, true end
  return LOST, nil, false
end
-- `result`: the JSON text the worker gave ('' or nil: none), kept with the finished job; a
-- repeated ack changes nothing, its result included.
local function ack(id, delivery, result)
  local outcome, x = current(id, delivery)
  if not x then return outcome end
  end_lease(x)
  redis.call('HSET', K_ACKED, pad(id), digits(delivery))
  redis.call('ZADD', K_ACKED_EXPIRY, queue.now + ACK_MEMORY_MS, pad(id))
  queue.axmin = math.min(queue.axmin, queue.now + ACK_MEMORY_MS)
  if queue.acked % 1024 == 0 then  -- bounded memory: the oldest go first
    local over = redis.call('ZCARD', K_ACKED_EXPIRY) - ACK_MEMORY_MAX
    if over > 0 then
      local oldest = redis.call('ZRANGE', K_ACKED_EXPIRY, 0, over - 1)
      for _, old in ipairs(oldest) do redis.call('HDEL', K_ACKED, old) end
      redis.call('ZREM', K_ACKED_EXPIRY, unpack(oldest))
    end
  end
  queue.acked = queue.acked + 1
  result = result ~= '' and result or nil
  local leased_at = x.failed_at
  finish(x, 'acked', result)
  if x.batch then flow.batch_job_moved(x.batch, 'acked') end
  flow.settled(id, 'acked', result or false)
  -- 0 or absent: leased by a version that did not keep its lease's start.
  if not leased_at or leased_at == 0 then return OK end
  return flow.RAN + math.max(0, queue.now - leased_at)
end
-- Leases up to `max` ready jobs to `worker`: {id, payload, attempt, delivery, lease expiry,
-- priority, group ('' none), ready since, leased at} each. A job in flight keeps its lease's
-- start in failed_at, for the run time its ack answers.
local function lease_jobs(worker, list, lease_ms)
  local out = {}
  if #list == 0 then return out end
  if not redis.call('HGET', K_WORKERS, worker) then redis.call('HSET', K_WORKERS, worker, 0) end
  for _, x in ipairs(list) do
    x.st = 'i'
    x.attempt = x.attempt + 1
    x.delivery = queue.next_delivery
    queue.next_delivery = queue.next_delivery + 1
    local ready_since = x.due
    x.due = queue.now + lease_ms
    x.failed_at = queue.now
    x.worker = worker
    redis.call('ZADD', K_WORKER_JOBS, 0, worker_job_member(worker, x.id))
    redis.call('ZADD', K_LEASES, x.due, pad(x.id))
    deadline_at(x.due)
    save_job(x)
    out[#out + 1] = {x.id, redis.call('HGET', K_PAYLOADS, pad(x.id)), x.attempt, x.delivery, x.due,
                     x.priority, x.group or '', ready_since, queue.now}
  end
  return out
end
-- Up to `max` jobs, one GroupLine::Take each, stopping at the first that finds none.
local function lease_ready(worker, max, lease_ms)
  if queue.paused ~= 0 or max <= 0 then return {} end
  local list = {}
  if plain() then  -- nothing held back, only ungrouped jobs: ready's first, in one read
    local members = redis.call('ZRANGE', K_READY, 0, max - 1)
    if #members == 0 then return {} end
    redis.call('ZREM', K_READY, unpack(members))
    for _, m in ipairs(members) do list[#list + 1] = load_job(ready_id(m)) end
    return lease_jobs(worker, list, lease_ms)
  end
  local now = queue.now
  if not can_take(now) then return {} end  -- (and parked groups stay as they are)
  local inflight = queue_concurrency() > 0 and redis.call('ZCARD', K_LEASES) or 0
  while #list < max do
    unpark(now)
    if not queue_allows(now, inflight) then break end
    local g
    if fairness() == FIFO then g = choose_fifo() else g = choose_in_turn() end
    if not g then break end
    list[#list + 1] = take_first(g)
    took(g, now, true)
    inflight = inflight + 1
  end
  return lease_jobs(worker, list, lease_ms)
end
-- A restarted worker takes back what it held (core::Queue::Reclaim): its jobs are released as
-- op_release_worker does (a failed attempt each), though the worker is alive (its heartbeat
-- deadline stands); then up to `max` of them that are ready (none while paused), and whose group
-- and queue allow a take now (out of turn: the rotation stays as it is), leave the line and are
-- leased to it again, in delivery order, before any other job. The others stay ready.
local function reclaim(worker, max, lease_ms)
  if not redis.call('HGET', K_WORKERS, worker) then return {} end
  local list = jobs_of_worker(worker)
  if #list == 0 then return {} end
  local now = queue.now
  fail_all(list, "reclaimed: worker '" .. worker .. "' started again", now)
  local take = {}
  if queue.paused == 0 then
    local inflight = queue_concurrency() > 0 and redis.call('ZCARD', K_LEASES) or 0
    for _, x in ipairs(list) do  -- fail_all sorted it in delivery order
      if #take >= max then break end
      if x.st == 'r' and allows_now(x.group, now, inflight) then
        if x.group then
          redis.call('ZREM', K_GREADY, grouped_member(x))
          queue.gready = queue.gready - 1
        else
          redis.call('ZREM', K_READY, ready_member(x))
        end
        took(x.group or '', now, false)
        inflight = inflight + 1
        take[#take + 1] = x
      end
    end
  end
  return lease_jobs(worker, take, lease_ms)
end
-- A nack of x: `delay` ms ('' = the backoff, spread by `jitter`), and the attempt's error.
local function nack(x, delay, err, jitter)
  end_lease(x)
  queue.nacked = queue.nacked + 1
  add_history(x, err, queue.now)
  if x.attempt >= x.max_attempts then return bury(x, queue.now, err) end
  if delay ~= '' then
    delay = tonumber(delay)
  else
    local shift = math.min(x.attempt - 1, RULES.backoff_max_shift)
    local base = math.min(RULES.backoff_base_ms * 2 ^ shift, RULES.backoff_cap_ms)
    delay = math.floor(base * jitter)
  end
  if delay > 0 then make_delayed(x, queue.now + delay) else make_ready(x, false, queue.now) end
end

-- ---- dependencies (core::Queue's depends_on: DependencyNow, StopWaiting, Settled) -----------
-- DEPS, the msgpack array of a job pushed with depends_on: ignore (1: it goes on when one
-- fails), unresolved (how many are still pending), then per dependency as named (repeats
-- once) id (its decimal text, as the backend sent it), state (pending, acked, dead, cancelled,
-- missing: core::ToString's names) and result (false: none). Kept under the job's id, with
-- NOTE_DEPS in its notes, for as long as its payload. A waiting job is listed in dependents
-- under each dependency still pending, and nowhere else: so a settle reads exactly the jobs
-- waiting on it, in id order, and a queue where nobody waits (`waiting` 0) reads nothing.
function flow.load_deps(id)
  local t = cmsgpack.unpack(redis.call('HGET', flow.K_DEPS, pad(id)))
  return t
end
function flow.save_deps(id, t) redis.call('HSET', flow.K_DEPS, pad(id), cmsgpack.pack(t)) end
function flow.dependent_member(dep, id) return pad(dep) .. pad(id) end
-- Removes waiting job `id` from dependents under each of its dependencies still pending.
function flow.unlist_dependent(id, d)
  for k = 3, #d, 3 do
    if d[k + 1] == 'pending' then
      redis.call('ZREM', flow.K_DEPENDENTS, flow.dependent_member(tonumber(d[k]), id))
    end
  end
end
-- What job `dep` (older than the job asking) is now: its state, and an acked one's result.
function flow.dependency_now(dep)
  local key = pad(dep)
  local v = redis.call('HGET', K_JOBS, key)
  if v then return cmsgpack.unpack(v)[1] == 'x' and 'dead' or 'pending', false end
  v = redis.call('HGET', K_FINISHED, key)
  local f = v and cmsgpack.unpack(v)
  if f and finished_kept(f[3], f[2], queue.now) then
    if f[1] == 'acked' then return 'acked', f[9] or false end
    return 'cancelled', false
  end
  -- Acked, and still remembered as such (an hour) though no longer kept: its result is gone.
  local until_ms = redis.call('ZSCORE', K_ACKED_EXPIRY, key)
  if until_ms and tonumber(until_ms) > queue.now then return 'acked', false end
  return 'missing', false
end
-- Job x waited for its dependencies and may go on: ready, or delayed until its due time.
function flow.stop_waiting(x)
  queue.waiting = queue.waiting - 1
  if x.due > queue.now then make_delayed(x, x.due) else make_ready(x, false, queue.now) end
end
-- Job `id` settled as `state` (acked with `result`, false for none; dead; cancelled): the jobs
-- waiting on it learn it, in id order, and stop waiting or fail in turn. Settles are taken in
-- the order they happened, each after those before it (a worklist: a failed dependent's own
-- dependents are told after the settles already queued), as the core takes them.
flow.settling = {}
function flow.settled(id, state, result)
  if queue.waiting == 0 then return end  -- the common case: nobody waits on anything
  flow.settling[#flow.settling + 1] = {id, state, result}
  if #flow.settling > 1 then return end  -- the loop below is running: it will come to it
  local k = 1
  while k <= #flow.settling do
    local dep, st, res = flow.settling[k][1], flow.settling[k][2], flow.settling[k][3]
    k = k + 1
    local lo, hi = '[' .. pad(dep), '(' .. pad(dep) .. ':'
    local members = redis.call('ZRANGEBYLEX', flow.K_DEPENDENTS, lo, hi)
    if #members > 0 then redis.call('ZREMRANGEBYLEX', flow.K_DEPENDENTS, lo, hi) end
    local name = digits(dep)
    for _, m in ipairs(members) do
      local x = load_job(tonumber(string.sub(m, 17)))
      if x and x.st == 'w' then
        local d = flow.load_deps(x.id)
        for j = 3, #d, 3 do
          if d[j] == name and d[j + 1] == 'pending' then d[j + 1], d[j + 2] = st, res end
        end
        d[2] = d[2] - 1
        if st ~= 'acked' and d[1] == 0 then
          queue.waiting = queue.waiting - 1
          flow.unlist_dependent(x.id, d)
          flow.save_deps(x.id, d)
          local err = 'dependency ' .. name .. ' is ' .. st
          add_history(x, err, queue.now)
          bury(x, queue.now, err)  -- its own dependents are told next
        else
          flow.save_deps(x.id, d)
          if d[2] == 0 then flow.stop_waiting(x) end
        end
      end
    end
  end
  flow.settling = {}
end

-- ---- operations -----------------------------------------------------------------------------
-- One function per call of the backend (RedisBackend, store/backend.h), named as the
-- core::Queue operation it mirrors. Each is given the time of the call; its arguments are
-- ARGV 3.., and it answers its own refusals. A queue nobody pushed to does not exist: an
-- operation on it answers what an empty queue would (no_queue) and keeps nothing, unless it
-- is one that makes the queue (push, setpaused 1, setkey).

-- The answer on a queue that does not exist: nothing to register, nothing to wake.
local function no_queue(payload) return {'ok', NOTHING_TO_REGISTER, 0, payload} end
-- The answer of a change that may count the queue for the first time (`first`: a first push, a
-- first key): the registry then holds it (ListQueues), whatever its deadlines.
local function answer_counted(first, payload)
  local reg = to_register(false)
  if first and reg == NOTHING_TO_REGISTER then reg = queue.hint end
  local wk = wake()
  save_queue()
  return {'ok', reg, wk, payload}
end
-- A long poll that found nothing leaves its mark (POLL, with a TTL) for `wait` ms and a second
-- more, so that a push elsewhere wakes it; never shortening another poll's wait.
local function mark_poll(wait)
  if wait > 0 and redis.call('PTTL', K_POLL) < wait + 1000 then
    redis.call('SET', K_POLL, '1', 'PX', wait + 1000)
  end
end

-- One job of a push (core::Queue::PushJob): answers its id and 1, or, a dedupe key's job
-- already there, that id and 0. `batch` ('' or nil: none) is joined when it is open (the
-- caller checked a client's push; a callback's may name any); `deps` ('' or nil: none) is
-- depends_on as the backend sends it: the ignore flag (0/1), then the ids, each after a
-- space. A dependency the new job cannot wait on (its own id or a later one: no cycle can
-- form) is missing.
local function push_one(payload, delay, priority, dedupe, max_attempts, group, batch, deps)
  dedupe = dedupe ~= '' and string.sub(dedupe, 2) or false
  local hit = dedupe and redis.call('HGET', K_DEDUPE, dedupe)
  if hit then return tonumber(hit), 0 end
  local x = {id = queue.next_id, st = 'r', due = 0, order = 0, priority = priority,
             max_attempts = max_attempts, attempt = 0, delivery = 0, worker = false,
             failed_at = 0, dedupe = dedupe, group = group ~= '' and group or false, notes = 0,
             batch = false}
  queue.next_id = queue.next_id + 1
  if x.group then
    local G = load_group(x.group)
    G.refs = G.refs + 1
  end
  redis.call('HSET', K_PAYLOADS, pad(x.id), payload)
  if dedupe then redis.call('HSET', K_DEDUPE, dedupe, digits(x.id)) end
  queue.pushed = queue.pushed + 1
  if batch and batch ~= '' then
    local b = flow.load_batch(batch)
    if b and b.sealed == 0 then
      x.batch = batch
      b.pending, b.changed = b.pending + 1, true
    end
  end
  if deps and deps ~= '' then
    local d, seen, flag, failed, failed_state = {0, 0}, {}, true, nil, nil
    for word in string.gmatch(deps, '%d+') do
      if flag then
        d[1], flag = tonumber(word), false
      elseif not seen[word] then
        seen[word] = true
        local st, res = 'missing', false
        if #word <= 16 and tonumber(word) < x.id then
          st, res = flow.dependency_now(tonumber(word))
        end
        d[#d + 1], d[#d + 2], d[#d + 3] = word, st, res
        if st == 'pending' then
          d[2] = d[2] + 1
        elseif st ~= 'acked' and not failed then
          failed, failed_state = word, st
        end
      end
    end
    x.notes = flow.NOTE_DEPS
    flow.save_deps(x.id, d)
    if failed and d[1] == 0 then
      local err = 'dependency ' .. failed .. ' is ' .. failed_state
      add_history(x, err, queue.now)
      bury(x, queue.now, err)
      return x.id, 1
    end
    if d[2] > 0 then
      x.st, x.due = 'w', queue.now + delay
      queue.waiting = queue.waiting + 1
      for k = 3, #d, 3 do
        if d[k + 1] == 'pending' then
          redis.call('ZADD', flow.K_DEPENDENTS, 0, flow.dependent_member(tonumber(d[k]), x.id))
        end
      end
      save_job(x)
      return x.id, 1
    end
  end
  if delay > 0 then make_delayed(x, queue.now + delay) else make_ready(x, false, queue.now) end
  return x.id, 1
end
-- The eight arguments of one job of a push (op_push), from `at` in `args`: its id and whether
-- it was made, as push_one answers.
function flow.push_args(args, at)
  return push_one(args[at], tonumber(args[at + 1]), tonumber(args[at + 2]), args[at + 3],
                  tonumber(args[at + 4]), args[at + 5], args[at + 6], args[at + 7])
end
-- Why a push that names batches is refused whole (nil: it is not), before anything is pushed:
-- a batch not known ('unknown_batch'), or sealed ('batch_sealed'). As the core's CanJoin, a
-- batch the call's advance to `now` forgets is not known.
function flow.batch_refusal(n, now)
  for i = 0, n - 1 do
    local name = ARGV[4 + i * 8 + 6]
    if name ~= '' then
      local b = flow.load_batch(name, now)
      if not b then return 'unknown_batch' end
      if b.sealed == 1 then return 'batch_sealed' end
    end
  end
  return nil
end
-- ARGV 3: n, then n x (payload, delay_ms, priority, dedupe ('' none, '=KEY'), max_attempts,
-- group ('' none), batch ('' none), depends_on ('' none, else the ignore flag 0/1 and the ids,
-- each after a space)). A push naming a batch not known, or sealed, is refused whole, with
-- nothing read or written but the batches.
local function op_push(now)
  local n = tonumber(ARGV[3])
  local loaded = load_queue()
  if loaded then
    local refusal = flow.batch_refusal(n, now)
    if refusal then return {refusal, NOTHING_TO_REGISTER} end
  else
    for i = 0, n - 1 do
      if ARGV[4 + i * 8 + 6] ~= '' then return {'unknown_batch', NOTHING_TO_REGISTER} end
    end
    create_queue(now)
  end
  advance(now)
  local first_push = queue.listed == 0
  queue.listed = 1
  local results = {}
  for i = 0, n - 1 do
    local id, created = flow.push_args(ARGV, 4 + i * 8)
    results[#results + 1] = id
    results[#results + 1] = created
  end
  return answer_counted(first_push, results)
end

-- ---- batches (core::Queue::CreateBatch, SealBatch, GetBatch, BatchJobMoved) -----------------
-- What the backend reads of a batch: {id, sealed, settled, pending, acked, dead, cancelled,
-- created, settled_at, on_success job, on_complete job, on_dead job}.
function flow.batch_view(id, b)
  return {id, b.sealed, b.settled, b.pending, b.acked, b.dead, b.cancelled, b.created,
          b.settled_at, b.success_job, b.complete_job, b.dead_job}
end
-- A callback job pushed now: its id.
function flow.push_callback(spec) return (flow.push_args(spec, 1)) end
-- Sealed with none pending: settled, on_complete pushed, then on_success if none died or was
-- cancelled.
function flow.settle_batch_if_done(id, b)
  if b.settled == 1 or b.sealed == 0 or b.pending > 0 then return end
  b.settled, b.settled_at, b.changed = 1, queue.now, true
  queue.bopen = queue.bopen - 1
  redis.call('ZADD', flow.K_BATCHES_SETTLED, queue.now, id)
  if queue.now < queue.bsmin then queue.bsmin = queue.now end
  if b.on_complete then b.complete_job = flow.push_callback(b.on_complete) end
  if b.on_success and b.dead == 0 and b.cancelled == 0 then
    b.success_job = flow.push_callback(b.on_success)
  end
end
-- A job of batch `id` settled as `state` (acked, dead, cancelled) or, with 'ready', came back
-- from the dead. A batch no longer kept learns nothing (a requeued job of it, acked later).
function flow.batch_job_moved(id, state)
  local b = flow.load_batch(id)
  if not b then return end
  b.changed = true
  if state == 'ready' then
    b.dead, b.pending = b.dead - 1, b.pending + 1
    return
  end
  b.pending = b.pending - 1
  if state == 'acked' then
    b.acked = b.acked + 1
  elseif state == 'cancelled' then
    b.cancelled = b.cancelled + 1
  else
    b.dead = b.dead + 1
    if b.on_dead and b.dead_job == 0 then b.dead_job = flow.push_callback(b.on_dead) end
  end
  if b.settled == 1 then
    -- A job requeued from the dead after the batch settled: past its age with nothing left,
    -- it goes now (forget_settled_batches let it stay for this job).
    if flow.batch_forgettable(b) then
      redis.call('HDEL', flow.K_BATCHES, id)
      redis.call('ZREM', flow.K_BATCHES_SETTLED, id)
      flow.batches[id] = false
    end
    return
  end
  flow.settle_batch_if_done(id, b)
end
-- Drops the settled batches kept past keep_acked's age, at most 256 a call (load_batch reads
-- the rest as gone; the sweeper comes back for them).
function flow.forget_settled_batches(now)
  local q = queue
  if q.bsmin == NEVER or q.bsmin + q.ka > now then return end
  local old = redis.call('ZRANGEBYSCORE', flow.K_BATCHES_SETTLED, '-inf', digits(now - q.ka),
                         'LIMIT', 0, 256)
  for _, id in ipairs(old) do
    -- One with a job left stays (out of settled batches: its last job removes it).
    flow.load_batch(id)
    local b = flow.batches[id]
    if not b or flow.batch_forgettable(b) then
      redis.call('HDEL', flow.K_BATCHES, id)
      flow.batches[id] = false
    end
  end
  if #old > 0 then redis.call('ZREM', flow.K_BATCHES_SETTLED, unpack(old)) end
  q.bsmin = (first_score(flow.K_BATCHES_SETTLED))
end
-- ARGV 3 id, then on_success, on_complete, on_dead each as '0' (none) or '1' and a job's eight
-- push arguments (op_push). Creates the queue (the backend checked --max-queues first) and
-- lists it. Refused: 'batch_exists' when the id is taken (open, or settled and still kept at
-- `now`, as the core's CanJoin), 'too_many_batches' past RULES.max_open_batches.
function flow.op_create_batch(now)
  local id = ARGV[3]
  if load_queue() then
    if flow.load_batch(id, now) then return {'batch_exists', NOTHING_TO_REGISTER} end
  else
    create_queue(now)
  end
  advance(now)
  local first = queue.listed == 0
  queue.listed = 1
  if queue.bopen >= RULES.max_open_batches then
    local a = answer_counted(first, false)
    a[1] = 'too_many_batches'
    return a
  end
  local specs, at = {}, 4
  for k = 1, 3 do
    if ARGV[at] == '1' then
      specs[k] = {unpack(ARGV, at + 1, at + 8)}
      at = at + 9
    else
      specs[k] = false
      at = at + 1
    end
  end
  -- A record past its keep (not yet removed) is replaced: out of settled batches first.
  redis.call('ZREM', flow.K_BATCHES_SETTLED, id)
  local b = {sealed = 0, settled = 0, pending = 0, acked = 0, dead = 0, cancelled = 0,
             created = queue.now, settled_at = 0, success_job = 0, complete_job = 0,
             dead_job = 0, on_success = specs[1], on_complete = specs[2], on_dead = specs[3],
             changed = true}
  flow.batches[id] = b
  queue.bopen = queue.bopen + 1
  return answer_counted(first, flow.batch_view(id, b))
end
-- ARGV 3 id. No job joins it after; it settles now if none is pending. Answers its view, or
-- false when there is no such batch.
function flow.op_seal_batch(now)
  if not load_queue() then return no_queue(false) end
  advance(now)
  local id = ARGV[3]
  local b = flow.load_batch(id)
  if not b then return answer(false, false) end
  if b.sealed == 0 then
    b.sealed, b.changed = 1, true
    flow.settle_batch_if_done(id, b)
  end
  return answer(false, flow.batch_view(id, b))
end
-- ARGV 3 id. Answers its view, or false when there is no such batch.
function flow.op_get_batch(now)
  if not load_queue() then return no_queue(false) end
  advance(now)
  local id = ARGV[3]
  local b = flow.load_batch(id)
  return answer(false, b and flow.batch_view(id, b) or false)
end
-- Acks, then (with reclaim) takes back the worker's own jobs, then leases ready jobs: up to
-- `max` in all. ARGV 3 worker, 4 max, 5 lease_ms, 6 wait_ms, 7 n acks, then n x (id,
-- delivery, result ('' none)), then reclaim ('1', or absent). Answers {acked, jobs, how many
-- jobs were reclaimed}.
local function op_fetch(now)
  local n, wait, acked = tonumber(ARGV[7]), tonumber(ARGV[6]), {}
  if not load_queue() then
    for i = 1, n do acked[i] = INVALID end
    mark_poll(wait)
    return no_queue({acked, {}, 0})
  end
  advance(now)
  for i = 0, n - 1 do
    local at = 8 + i * 3
    acked[#acked + 1] = ack(tonumber(ARGV[at]), tonumber(ARGV[at + 1]), ARGV[at + 2])
  end
  local worker, max, lease_ms = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
  local jobs = {}
  if ARGV[8 + n * 3] == '1' then jobs = reclaim(worker, max, lease_ms) end
  local reclaimed = #jobs
  for _, j in ipairs(lease_ready(worker, max - reclaimed, lease_ms)) do jobs[#jobs + 1] = j end
  local retry = 0
  if #jobs == 0 then
    mark_poll(wait)
    -- Jobs held back by the limits: when one may go, so the waiter's process looks again then.
    if wait > 0 and queue.paused == 0 and not plain() then
      local at = next_allowed_at(queue.now)
      if at > queue.now and at < NEVER then retry = at - queue.now end
    end
  end
  return answer(false, {acked, jobs, reclaimed, retry})
end

-- ack, nack, extend: ARGV 3 n, then n x (id, delivery, jitter), then the operation's own
-- arguments (tail_arg). `each(id, delivery, jitter, k)` answers the outcome of the k-th lease
-- (from 1).
local function each_lease(now, each)
  local n, out = tonumber(ARGV[3]), {}
  if not load_queue() then
    for i = 1, n do out[i] = INVALID end
    return no_queue(out)
  end
  advance(now)
  for i = 0, n - 1 do
    local at = 4 + i * 3
    out[#out + 1] = each(tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]),
                         i + 1)
  end
  return answer(false, out)
end
-- The k-th argument after the leases of an ack, nack or extend.
local function tail_arg(k) return ARGV[3 + tonumber(ARGV[3]) * 3 + k] end
-- The job a nack or an extend names, in flight under that delivery; a delivery acked already is
-- lost to them.
local function current_unacked(id, delivery)
  local outcome, x, acked_before = current(id, delivery)
  if acked_before then outcome = LOST end
  return outcome, x
end
-- ARGV after the leases: each one's result ('' none), or nothing (none has one).
local function op_ack(now)
  return each_lease(now, function(id, delivery, _, k) return ack(id, delivery, tail_arg(k)) end)
end
-- ARGV after the leases: the delay ('' = the backoff), the error.
local function op_nack(now)
  local delay, err = tail_arg(1), tail_arg(2)
  return each_lease(now, function(id, delivery, jitter)
    local outcome, x = current_unacked(id, delivery)
    if x then nack(x, delay, err, jitter) end
    return outcome
  end)
end
-- A worker told to slow down (core::Queue::Snooze): each delivery ends without using up its
-- attempt (no history, no nack counted), the job waits `delay` ms (0: ready at the head of its
-- priority, as after a failed delivery), and its group (an ungrouped job: the whole queue) is
-- held as long. ARGV after the leases: delay_ms.
local function op_snooze(now)
  local delay = tonumber(tail_arg(1))
  return each_lease(now, function(id, delivery)
    local outcome, x = current_unacked(id, delivery)
    if x then
      end_lease(x)
      x.attempt = x.attempt - 1  -- this delivery was never tried
      hold(x.group, queue.now + delay, queue.now)
      if delay > 0 then make_delayed(x, queue.now + delay) else make_ready(x, true, queue.now) end
    end
    return outcome
  end)
end
-- ARGV after the leases: lease_ms.
local function op_extend(now)
  local lease_ms = tonumber(tail_arg(1))
  return each_lease(now, function(id, delivery)
    local outcome, x = current_unacked(id, delivery)
    if x then
      x.due = queue.now + lease_ms
      redis.call('ZADD', K_LEASES, x.due, pad(x.id))
      deadline_at(x.due)
      save_job(x)
    end
    return outcome
  end)
end
-- Deliveries whose answer reached nobody (the long poll's client hung up while its fetch ran;
-- RedisBackend::GiveBack). Each job goes back to the head of the line as if it had not been
-- fetched: its attempt is taken back, with no history, nack or expiry counted.
-- ARGV 3 n, then n x (id, delivery)
local function op_give_back(now)
  if not load_queue() then return no_queue(0) end
  advance(now)
  local list = {}
  for i = 0, tonumber(ARGV[3]) - 1 do
    local _, x = current(tonumber(ARGV[4 + i * 2]), tonumber(ARGV[5 + i * 2]))
    if x then list[#list + 1] = x end
  end
  table.sort(list, by_ready_key)
  for i = #list, 1, -1 do  -- the last first, so together they keep their order
    local x = list[i]
    end_lease(x)
    x.attempt = x.attempt - 1
    make_ready(x, true, queue.now)
  end
  return answer(false, #list)
end

-- A worker matters to a queue that holds jobs (its first fetch of one registers it): on a name
-- nobody pushed to, a heartbeat keeps nothing. Extends the worker's deadline, never shortens it
-- (anyone with the queue key may name any worker; ending one at once is the admin's release).
-- ARGV 3 worker, 4 ttl
local function op_heartbeat(now)
  if not load_queue() or holds_nothing() then return no_queue(1) end
  advance(now)
  local w = ARGV[3]
  local alive = math.max(tonumber(redis.call('HGET', K_WORKERS, w) or 0) or 0,
                         queue.now + tonumber(ARGV[4]))
  redis.call('HSET', K_WORKERS, w, digits(alive))
  redis.call('ZADD', K_HEARTBEATS, alive, w)
  deadline_at(alive)
  return answer(false, 1)
end
-- ARGV 3 worker. Answers how many jobs it held.
local function op_release_worker(now)
  if not load_queue() then return no_queue(0) end
  advance(now)
  local w = ARGV[3]
  local alive = redis.call('HGET', K_WORKERS, w)
  if not alive then return answer(false, 0) end
  local list = jobs_of_worker(w)
  if tonumber(alive) ~= 0 then
    redis.call('HSET', K_WORKERS, w, 0)
    redis.call('ZREM', K_HEARTBEATS, w)
  end
  fail_all(list, "released: worker '" .. w .. "'", queue.now)
  if #list == 0 then forget_worker_if_idle(w) end
  return answer(false, #list)
end

-- {ready, delayed, inflight, dead, pushed, acked, nacked, expired, cancelled, workers, paused,
-- counted, waiting}
local function op_stats(now)
  if not load_queue() then return no_queue({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}) end
  advance(now)
  local q = queue
  return answer(false, {redis.call('ZCARD', K_READY) + q.gready, redis.call('ZCARD', K_DELAYED),
                        redis.call('ZCARD', K_LEASES), redis.call('ZCARD', K_DEAD), q.pushed,
                        q.acked, q.nacked, q.expired, q.cancelled, redis.call('HLEN', K_WORKERS),
                        q.paused, counted() and 1 or 0, q.waiting})
end
-- ARGV 3: worker, or '' for all. Answers {id, worker, attempt, lease expiry} by expiry, then id.
local function op_inflight(now)
  if not load_queue() then return no_queue({}) end
  advance(now)
  local list
  if ARGV[3] ~= '' then
    list = jobs_of_worker(ARGV[3])
  else
    list = jobs_of(redis.call('ZRANGE', K_LEASES, 0, -1))
  end
  table.sort(list, function(a, b)
    if a.due ~= b.due then return a.due < b.due end
    return a.id < b.id
  end)
  local out = {}
  for _, x in ipairs(list) do out[#out + 1] = {x.id, x.worker, x.attempt, x.due} end
  return answer(false, out)
end
-- ARGV 3: limit. Answers {id, payload, attempts, last error, failed at, history} oldest first.
local function op_dead(now)
  if not load_queue() then return no_queue({}) end
  advance(now)
  local out = {}
  local limit = tonumber(ARGV[3])
  if limit > 0 then
    for _, id in ipairs(redis.call('ZRANGE', K_DEAD, 0, limit - 1)) do
      local x = load_job(tonumber(id))
      local v = redis.call('HGET', K_HISTORY, id)
      local hist = v and cmsgpack.unpack(v) or {}
      local last = hist[#hist]
      out[#out + 1] = {x.id, redis.call('HGET', K_PAYLOADS, id), x.attempt,
                       last and last[2] or '', x.failed_at, hist}
    end
  end
  return answer(false, out)
end
-- ARGV 3: '*' for all, else n ids. Answers how many went back to the line.
local function op_requeue_dead(now)
  if not load_queue() then return no_queue(0) end
  advance(now)
  local ids = {}
  if ARGV[3] == '*' then
    ids = redis.call('ZRANGE', K_DEAD, 0, -1)
  else
    for i = 4, 3 + tonumber(ARGV[3]) do ids[#ids + 1] = ARGV[i] end
  end
  local count = 0
  for _, id in ipairs(ids) do
    local x = load_job(tonumber(id))
    if x and x.st == 'x' then
      redis.call('ZREM', K_DEAD, pad(x.id))
      redis.call('HDEL', K_HISTORY, pad(x.id))
      x.attempt = 0
      make_ready(x, false, queue.now)
      if x.batch then flow.batch_job_moved(x.batch, 'ready') end
      count = count + 1
    end
  end
  return answer(false, count)
end
-- ARGV 3: id. Answers 0 cancelled, 1 unknown, 2 in flight.
local function op_cancel(now)
  if not load_queue() then return no_queue(1) end
  advance(now)
  local x = load_job(tonumber(ARGV[3]))
  if not x then return answer(false, 1) end
  if x.st == 'i' then return answer(false, 2) end
  if x.st == 'r' then line_forget(x)
  elseif x.st == 'd' then redis.call('ZREM', K_DELAYED, pad(x.id))
  elseif x.st == 'w' then
    queue.waiting = queue.waiting - 1
    flow.unlist_dependent(x.id, flow.load_deps(x.id))
  else redis.call('ZREM', K_DEAD, pad(x.id)) end
  queue.cancelled = queue.cancelled + 1
  finish(x, 'cancelled', nil)
  if x.batch then
    -- A dead job's batch counted it pending no more: it leaves dead, then is cancelled.
    if x.st == 'x' then flow.batch_job_moved(x.batch, 'ready') end
    flow.batch_job_moved(x.batch, 'cancelled')
  end
  flow.settled(x.id, 'cancelled', false)
  return answer(false, 0)
end
-- ---- job state: a job looked up, its progress and its log (core::Queue::Lookup, SetProgress,
--      AppendLog) -----------------------------------------------------------------------------
local STATE_NAMES = {r = 'ready', d = 'delayed', i = 'inflight', x = 'dead', w = 'waiting_deps'}
local function unpacked(hash, id)
  local v = redis.call('HGET', hash, id)
  return v and cmsgpack.unpack(v) or false
end
-- What a job keeps under its id that `flags` says it has: history ({} when none), progress and
-- log (false when none).
local function job_data(id, flags)
  return has(flags, NOTE_HISTORY) and unpacked(K_HISTORY, id) or {},
         has(flags, NOTE_PROGRESS) and redis.call('HGET', K_PROGRESS, id),
         has(flags, NOTE_LOG) and unpacked(K_JOB_LOGS, id)
end
-- A job's dependencies as GetJob shows them: the ids as named ({} when none), and how many are
-- still pending.
function flow.depends_on(key, flags)
  if not has(flags, flow.NOTE_DEPS) then return {}, 0 end
  local d = unpacked(flow.K_DEPS, key)
  local ids = {}
  for k = 3, #d, 3 do ids[#ids + 1] = d[k] end
  return ids, d[2]
end
-- ARGV 3: id. Answers false when the queue knows no such job (never pushed, or finished and no
-- longer kept), else {state, payload, priority, group ('' none), attempts, max_attempts, due,
-- finished, history ({attempt, error, at}...), progress, result, log ({dropped, at, line, at,
-- line...}), depends_on (ids' texts), waiting_on, batch ('' none)}, false for progress, result
-- and log when there is none. due: a delayed job's ready time, an in-flight one's lease
-- expiry, else 0; finished: when it went dead, was acked or cancelled, else 0.
local function op_get_job(now)
  if not load_queue() then return no_queue(false) end
  advance(now)
  local id = tonumber(ARGV[3])
  local key = pad(id)
  local x = load_job(id)
  if x then
    local st = x.st
    -- A live job's history is read whatever its flags (a read, not worth the invariant).
    local history, progress, log = job_data(key, x.notes + NOTE_HISTORY)
    local deps, waiting_on = flow.depends_on(key, x.notes)
    return answer(false, {STATE_NAMES[st], redis.call('HGET', K_PAYLOADS, key), x.priority,
                          x.group or '', x.attempt, x.max_attempts,
                          (st == 'd' or st == 'i') and x.due or 0, st == 'x' and x.failed_at or 0,
                          history, progress, false, log, deps, waiting_on, x.batch or ''})
  end
  local f = unpacked(K_FINISHED, key)
  if not f or not finished_kept(f[3], f[2], queue.now) then return answer(false, false) end
  local history, progress, log = job_data(key, f[8])
  local deps, waiting_on = flow.depends_on(key, f[8])
  return answer(false, {f[1], redis.call('HGET', K_PAYLOADS, key), f[4], f[5] or '', f[6], f[7],
                        0, f[2], history, progress, f[9] or false, log, deps, waiting_on,
                        f[10] or ''})
end
-- ARGV 3: id. What became of the job's dependencies (core::Queue::Dependencies), from its own
-- record, live or finished: {id, state, result (false: none)...} flat, in the order named ({}
-- when it named none); false when the queue knows no such job.
function flow.op_get_dependencies(now)
  if not load_queue() then return no_queue(false) end
  advance(now)
  local key = pad(tonumber(ARGV[3]))
  local flags
  local x = load_job(tonumber(ARGV[3]))
  if x then
    flags = x.notes
  else
    local f = unpacked(K_FINISHED, key)
    if not f or not finished_kept(f[3], f[2], queue.now) then return answer(false, false) end
    flags = f[8]
  end
  if not has(flags, flow.NOTE_DEPS) then return answer(false, {}) end
  local d = unpacked(flow.K_DEPS, key)
  return answer(false, {unpack(d, 3)})
end
-- Progress and log come from the job's current delivery, ARGV 3 id, 4 delivery (an acked one
-- is lost to them, as to a nack); a queue nobody pushed to has no lease to check (INVALID).
-- ARGV 5: the progress's JSON text, replacing the last. Answers OK, LOST or INVALID.
local function op_set_progress(now)
  if not load_queue() then return no_queue(INVALID) end
  advance(now)
  local outcome, x = current_unacked(tonumber(ARGV[3]), tonumber(ARGV[4]))
  if x then
    redis.call('HSET', K_PROGRESS, pad(x.id), ARGV[5])
    if not has(x.notes, NOTE_PROGRESS) then
      x.notes = x.notes + NOTE_PROGRESS
      save_job(x)
    end
  end
  return answer(false, outcome)
end
-- ARGV 5..: the lines, each cut by the backend (core::BoundedLogLine), appended at queue.now;
-- the last KEPT_LOG_LINES are kept and the rest counted as dropped. Answers OK, LOST or
-- INVALID.
local KEPT_LOG_LINES = RULES.kept_log_lines
local function op_append_job_log(now)
  if not load_queue() then return no_queue(INVALID) end
  advance(now)
  local outcome, x = current_unacked(tonumber(ARGV[3]), tonumber(ARGV[4]))
  if x then
    local key = pad(x.id)
    local old = has(x.notes, NOTE_LOG) and unpacked(K_JOB_LOGS, key) or {0}
    local kept, added = (#old - 1) / 2, #ARGV - 4
    local drop = math.max(0, kept + added - KEPT_LOG_LINES)
    local log = {old[1] + drop}
    for k = drop + 1, kept do  -- the old lines still kept
      log[#log + 1] = old[2 * k]
      log[#log + 1] = old[2 * k + 1]
    end
    for k = math.max(1, drop - kept + 1), added do
      log[#log + 1] = queue.now
      log[#log + 1] = ARGV[4 + k]
    end
    redis.call('HSET', K_JOB_LOGS, key, cmsgpack.pack(log))
    if not has(x.notes, NOTE_LOG) then
      x.notes = x.notes + NOTE_LOG
      save_job(x)
    end
  end
  return answer(false, outcome)
end

-- ARGV 3: 1 or 0.
local function op_set_paused(now)
  local paused = tonumber(ARGV[3])
  if not load_queue() then
    if paused == 0 then return no_queue(1) end  -- unpausing nothing keeps nothing
    create_queue(now)
  end
  advance(now)
  if (queue.paused ~= 0) ~= (paused ~= 0) and K_FEED then
    tell({'t', paused ~= 0 and RULES.queue_paused or RULES.queue_resumed, 'at', digits(queue.now),
          'q', string.match(K_META, '{q:(.*)}:m$')})
  end
  queue.paused = paused
  return answer(false, 1)
end

-- Removing the key answers 1 when the name no longer counts as a queue (never pushed to: the
-- backend uncounts it), else 0.
local function remove_queue_key(now)
  if not keyed() then return no_queue(0) end
  redis.call('DEL', K_QUEUE_KEY)
  if not load_queue() then return no_queue(1) end  -- (never written so: a key without a queue)
  advance(now)
  return answer(false, queue.listed == 0 and 1 or 0)
end
-- ARGV 3: the digest to keep (32 raw bytes), or '' to remove the key. Setting one creates the
-- queue (the backend checked --max-queues first) and puts it in the registry, as a first push
-- does; answers 0.
local function op_set_queue_key(now)
  local digest = ARGV[3]
  if digest == '' then return remove_queue_key(now) end
  if not load_queue() then create_queue(now) end
  advance(now)
  local first = not counted()
  redis.call('SET', K_QUEUE_KEY, digest)
  return answer_counted(first, 0)
end

-- The queue's limits (core::QueueLimits), as nine numbers: fairness (0 fifo, 1 round robin),
-- then per group and queue-wide each: rate limit, period_ms, burst (0 0 0: no rate),
-- concurrency (0: none).
local DEFAULT_LIMITS = {0, 0, 0, 0, 0, 0, 0, 0, 0}
-- ARGV 3..11: the limits, 12 keep_acked's count, 13 its age_ms (core::QueueSettings). Setting
-- any (the defaults too) creates the queue (the backend checked --max-queues first) and lists
-- it, as a first push does, so that a queue with settings is never forgotten as empty; settings
-- equal to those in force change nothing else. Answers 0.
local function op_set_settings(now)
  local lim, defaults, same = {}, true, true
  if not load_queue() then create_queue(now) end
  advance(now)
  local old = queue.lim or DEFAULT_LIMITS
  for i = 1, 9 do
    lim[i] = tonumber(ARGV[2 + i])
    if lim[i] ~= 0 then defaults = false end
    if lim[i] ~= old[i] then same = false end
  end
  local first = queue.listed == 0
  queue.listed = 1
  if not same then configure(not defaults and lim, queue.now) end
  local count, age_ms = tonumber(ARGV[12]) or queue.kc, tonumber(ARGV[13]) or queue.ka
  if count ~= queue.kc or age_ms ~= queue.ka then keep_finished(count, age_ms) end
  return answer_counted(first, 0)
end
-- Answers the settings, as op_set_settings takes them (eleven numbers), without changing
-- anything.
local function op_get_settings()
  local loaded = load_queue()
  local out = {unpack(loaded and queue.lim or DEFAULT_LIMITS)}
  out[10], out[11] = KEEP_COUNT, KEEP_AGE_MS
  if not loaded then return no_queue(out) end
  out[10], out[11] = queue.kc, queue.ka
  return {'ok', NOTHING_TO_REGISTER, 0, out}
end

-- ---- schedules of repeatable jobs (core/job_schedule.h) --------------------------------------
-- The backend plans (cron, time zones and misfires are the core's: RedisBackend computes
-- core::Placed, core::SetPaused and core::PlanFire) and these functions apply a plan atomically
-- with the pushes it makes. Every write names the record it was planned from (its exact bytes)
-- and changes nothing when the record is no longer those bytes: another process changed or
-- fired the schedule since, and the backend reads it again. So a firing moves handled_through
-- past its runs in the same call as it pushes them, once, whichever process planned it.
-- SCHEDULE, the msgpack array's order: spec (core::SaveSchedule of the schedule with an empty
-- state: only the backend reads it), created, updated, handled (handled_through_ms), runs
-- (runs_done), paused (0/1), last_run, last_job, next (false: none), as core::ScheduleState.
-- Invariant: schedule times holds exactly the schedules not paused whose next is set, at next,
-- and queue.sched is its lowest score.
-- The schedules' operations, and inside their block what only they use: the block's own
-- names are gone at its end, as Lua allows a function (this file's main chunk) 200 local
-- variables at a time.
local op_get_schedules, op_put_schedule, op_delete_schedule, op_fire_schedule, op_advance
local op_hint
do
  local function load_schedule(id)
    local raw = redis.call('HGET', K_SCHEDULES, id)
    if not raw then return nil end
    local t = cmsgpack.unpack(raw)
    return {spec = t[1], created = t[2], updated = t[3], handled = t[4], runs = t[5], paused = t[6],
            last_run = t[7], last_job = t[8], next = t[9]}, raw
  end
  -- Writes s; answers its bytes.
  local function save_schedule(id, s)
    local raw = cmsgpack.pack({s.spec, s.created, s.updated, s.handled, s.runs, s.paused,
                               s.last_run, s.last_job, s.next})
    redis.call('HSET', K_SCHEDULES, id, raw)
    if s.paused == 0 and s.next then
      redis.call('ZADD', K_SCHEDULE_TIMES, digits(s.next), id)
    else
      redis.call('ZREM', K_SCHEDULE_TIMES, id)
    end
    queue.sched = (first_score(K_SCHEDULE_TIMES))
    return raw
  end
  -- What the backend reads of a schedule: {id, its bytes, then SCHEDULE's fields}.
  local function schedule_view(id, s, raw)
    return {id, raw, s.spec, s.created, s.updated, s.handled, s.runs, s.paused, s.last_run,
            s.last_job, s.next}
  end
  -- Queue::Pending: the job is waiting, ready, delayed or in flight (not acked, cancelled or
  -- dead).
  local function pending(id)
    if not id then return false end
    local x = load_job(id)
    return x ~= nil and x.st ~= 'x'
  end
  -- core::FiringRuns: the indexes of `due` that fire.
  local function firing_runs(overlap, due_count, previous_pending)
    local runs = {}
    if overlap == 'allow' then
      for i = 1, due_count do runs[i] = i end
    elseif due_count > 0 and not previous_pending then
      runs[1] = due_count
    end
    return runs
  end
  -- core::Fired: the state once `pushed` runs were pushed, the latest at `last_run` as job
  -- `last_job`. `plan` holds handled (after the firing), next_if_runs_left (false: none),
  -- max_runs (false: none).
  local function fired(s, plan, pushed, last_run, last_job, now)
    s.updated = math.max(s.updated, now)
    s.handled = plan.handled
    s.runs = s.runs + pushed
    if pushed > 0 then s.last_run, s.last_job = last_run, last_job end
    local runs_left = not plan.max_runs or s.runs < plan.max_runs
    s.next = runs_left and plan.next_if_runs_left or false
  end
  local function opt_arg(v) return v ~= '' and tonumber(v) or false end

  -- ARGV 3..: ids. Answers {now, each schedule's view or false}, reading nothing else.
  function op_get_schedules(now)
    local out = {}
    for i = 3, #ARGV do
      local s, raw = load_schedule(ARGV[i])
      out[#out + 1] = s and schedule_view(ARGV[i], s, raw) or false
    end
    return {'ok', NOTHING_TO_REGISTER, 0, {now, out}}
  end
  -- A schedule put or paused (core::Placed, core::SetPaused: computed by the backend from the
  -- record it read). ARGV 3 id, 4 the record read ('': none), 5 spec, 6 created, 7 updated,
  -- 8 handled, 9 runs, 10 paused, 11 last_run, 12 last_job, 13 next ('' none, for the three).
  -- Answers 1 when written, 0 when the record is no longer the one read (nothing changed).
  -- Puts the queue in the registry at its earliest schedule, and lists it (created within
  -- --max-queues by the backend), as setting its settings does.
  function op_put_schedule(now)
    local id = ARGV[3]
    if (redis.call('HGET', K_SCHEDULES, id) or '') ~= ARGV[4] then return no_queue(0) end
    if not load_queue() then create_queue(now) end
    advance(now)
    local first = queue.listed == 0
    queue.listed = 1
    save_schedule(id, {spec = ARGV[5], created = tonumber(ARGV[6]), updated = tonumber(ARGV[7]),
                       handled = tonumber(ARGV[8]), runs = tonumber(ARGV[9]),
                       paused = tonumber(ARGV[10]), last_run = opt_arg(ARGV[11]),
                       last_job = opt_arg(ARGV[12]), next = opt_arg(ARGV[13])})
    return answer_counted(first, 1)
  end
  -- ARGV 3 id. Answers the schedule's view as it was, or false when there is none.
  function op_delete_schedule(now)
    local id = ARGV[3]
    local s, raw = load_schedule(id)
    if not s then return no_queue(false) end
    redis.call('HDEL', K_SCHEDULES, id)
    redis.call('ZREM', K_SCHEDULE_TIMES, id)
    if not load_queue() then return no_queue(schedule_view(id, s, raw)) end
    advance(now)
    queue.sched = (first_score(K_SCHEDULE_TIMES))
    return answer(false, schedule_view(id, s, raw))
  end
  -- A due schedule's firing, as core::PlanFire planned it from the record named: the runs that
  -- fire (core::FiringRuns: the previous run's job looked at now, in this call) are pushed as
  -- op_push pushes jobs, then the state moves on (core::Fired). ARGV 3 id, 4 the record read,
  -- 5 the time planned at, 6 handled after, 7 next_if_runs_left, 8 max_runs ('' none, both),
  -- 9 overlap ('allow', 'skip'), 10 payload, 11 priority, 12 max_attempts, 13 group, 14 n, then
  -- n x (nominal ms, delay ms, dedupe key): the due runs, oldest first. Answers {fired (0: the
  -- record changed, nothing done), the jobs pushed}, and the next deadline (as advance does).
  function op_fire_schedule(now)
    local id = ARGV[3]
    local s, raw = load_schedule(id)
    local queued = load_queue()
    if not s or raw ~= ARGV[4] or s.paused ~= 0 or not queued then
      if not queued then return {'ok', NEVER, 0, {0, {}}} end
      advance(now)
      return answer(true, {0, {}})
    end
    advance(now)
    queue.listed = 1
    local n = tonumber(ARGV[14])
    local ids = {}
    local last_run, last_job = false, false
    for _, k in ipairs(firing_runs(ARGV[9], n, pending(s.last_job))) do
      local at = 15 + (k - 1) * 3
      local job_id = push_one(ARGV[10], tonumber(ARGV[at + 1]), tonumber(ARGV[11]),
                              '=' .. ARGV[at + 2], tonumber(ARGV[12]), ARGV[13])
      ids[#ids + 1] = job_id
      last_run, last_job = tonumber(ARGV[at]), job_id
    end
    fired(s, {handled = tonumber(ARGV[6]), next_if_runs_left = opt_arg(ARGV[7]),
              max_runs = opt_arg(ARGV[8])}, #ids, last_run, last_job, tonumber(ARGV[5]))
    save_schedule(id, s)
    return answer(true, {1, ids})
  end

  -- The sweeper (RedisBackend::SweepOne): answers the next deadline (and records it), and
  -- {now, the views of up to 64 schedules due by now} for the backend to fire.
  function op_advance(now)
    if not load_queue() then return {'ok', NEVER, 0, {now, {}}} end
    advance(now)
    local due = {}
    if queue.sched <= now then
      for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_SCHEDULE_TIMES, '-inf', digits(now),
                                     'LIMIT', 0, 64)) do
        local s, raw = load_schedule(id)
        due[#due + 1] = schedule_view(id, s, raw)
      end
    end
    return answer(true, {now, due})
  end
  -- The sweeper, after recording the next deadline: the one last reported.
  function op_hint()
    if not load_queue() then return {'ok', NEVER, 0, 0} end
    return {'ok', queue.hint, 0, 0}
  end
end

-- ARGV[1] names the operation.
local OPS = {push = op_push, fetch = op_fetch, ack = op_ack, nack = op_nack, extend = op_extend,
             giveback = op_give_back, heartbeat = op_heartbeat, release = op_release_worker,
             stats = op_stats, inflight = op_inflight, dead = op_dead,
             requeue = op_requeue_dead, cancel = op_cancel, setpaused = op_set_paused,
             setkey = op_set_queue_key, snooze = op_snooze, setsettings = op_set_settings,
             settings = op_get_settings, schedules = op_get_schedules,
             schedput = op_put_schedule, scheddelete = op_delete_schedule,
             schedfire = op_fire_schedule, advance = op_advance, hint = op_hint,
             getjob = op_get_job, progress = op_set_progress, joblog = op_append_job_log,
             jobdeps = flow.op_get_dependencies, batchcreate = flow.op_create_batch,
             batchseal = flow.op_seal_batch, batch = flow.op_get_batch}

-- The entry point, called with the keys and arguments of one call: by FCALL, as a function of
-- the library this file becomes (Redis 7), or by the EVAL script it also becomes (Redis 6).
-- See Script in src/store/redis/cluster_client.h.
local function run(keys, argv)
  KEYS, ARGV = keys, argv
  K_META, K_JOBS, K_PAYLOADS, K_HISTORY = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  K_READY, K_DELAYED, K_LEASES, K_DEAD, K_DEDUPE = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
  K_ACKED, K_ACKED_EXPIRY, K_WORKERS, K_HEARTBEATS = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
  K_WORKER_JOBS, K_POLL, K_QUEUE_KEY = KEYS[14], KEYS[15], KEYS[16]
  K_GROUPS, K_GREADY, K_GFIFO, K_ROTATION, K_PARKED = KEYS[17], KEYS[18], KEYS[19], KEYS[20],
                                                      KEYS[21]
  K_SCHEDULES, K_SCHEDULE_TIMES = KEYS[22], KEYS[23]
  K_FINISHED, K_FINISHED_ORDER, K_PROGRESS, K_JOB_LOGS = KEYS[24], KEYS[25], KEYS[26], KEYS[27]
  flow.K_DEPS, flow.K_DEPENDENTS = KEYS[28], KEYS[29]
  flow.K_BATCHES, flow.K_BATCHES_SETTLED = KEYS[30], KEYS[31]
  K_FEED, K_FEED_HORIZON, told = KEYS[32], KEYS[33], {}
  queue = {}
  -- Left by a call that wrote nothing back (a refusal), or stopped by an error.
  if next(groups) ~= nil then groups = {} end
  if next(flow.batches) ~= nil then flow.batches = {} end
  if #flow.settling > 0 then flow.settling = {} end
  return dispatch(OPS, 'queue')
end
