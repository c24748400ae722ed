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
-- ARGV: 1 op  2 now ms ('' = Redis TIME)  3.. the op's arguments
-- Ids are zero-padded in members and fields, so lexical order is numeric order.
-- Invariants: pushed = acked + ready + delayed + inflight + dead + cancelled; a job is in
-- exactly one of ready, delayed, leases, dead; a lease names one delivery.

local ACK_MEMORY_MS, ACK_MEMORY_MAX = RULES.ack_memory_ms, RULES.ack_memory_max
-- Set by run() for each call, beside KEYS, ARGV and op (prelude.lua): the keys, named as
-- KEYS above lists them.
local K_META, K_JOBS, K_PAYLOADS, K_HISTORY, K_READY, K_DELAYED, K_LEASES, K_DEAD, K_DEDUPE
local K_ACKED, K_ACKED_EXPIRY, K_WORKERS, K_HEARTBEATS, K_WORKER_JOBS, K_POLL, K_QUEUE_KEY

local function pad(id) return string.format('%016d', id) end

-- The queue's scalar state: one msgpack array in KEYS[1], read once, written once.
local Q = {}
-- due: no deadline in delayed, leases or heartbeats is earlier (a lower bound: taking one out
-- leaves it early, and the next advance that reaches it reads the sets and makes it exact), so
-- most calls read none of the three sets. Absent in state written before it: read them.
-- FIELDS, the array's order: now next_id next_delivery next_order head_order paused pushed
-- acked nacked expired cancelled hint listed axmin due
-- load and save spell FIELDS out, in its order (one constructor sizes the table once; see
-- room.lua's load).
local function load()
  local v = redis.call('GET', K_META)
  if not v then return false end
  local t = cmsgpack.unpack(v)
  Q = {now = t[1], next_id = t[2], next_delivery = t[3], next_order = t[4], head_order = t[5],
       paused = t[6], pushed = t[7], acked = t[8], nacked = t[9], expired = t[10],
       cancelled = t[11], hint = t[12], listed = t[13], axmin = t[14], due = t[15]}
  return true
end
local function create(now)
  Q = {now = now, next_id = 1, next_delivery = 1, next_order = 1, head_order = 0, paused = 0,
       pushed = 0, acked = 0, nacked = 0, expired = 0, cancelled = 0, hint = NEVER, listed = 0,
       axmin = NEVER, due = NEVER}
end
local function save()
  redis.call('SET', K_META, cmsgpack.pack({Q.now, Q.next_id, Q.next_delivery, Q.next_order,
             Q.head_order, Q.paused, Q.pushed, Q.acked, Q.nacked, Q.expired, Q.cancelled, Q.hint,
             Q.listed, Q.axmin, Q.due}))
end

-- ---- jobs: {id, state, due, order, priority, max_attempts, attempt, delivery, worker,
--      failed_at, dedupe}; state r(eady) d(elayed) i(nflight) x (dead) ---------------------------
local function job(id)
  local v = redis.call('HGET', K_JOBS, pad(id))
  if not v then return nil end
  local t = cmsgpack.unpack(v)
  return {id = id, st = t[1], due = t[2], order = t[3], priority = t[4], max_attempts = t[5],
          attempt = t[6], delivery = t[7], worker = t[8], failed_at = t[9], dedupe = t[10]}
end
local function put(x)
  redis.call('HSET', K_JOBS, pad(x.id), cmsgpack.pack({x.st, x.due, x.order, x.priority,
             x.max_attempts, x.attempt, x.delivery, x.worker, x.failed_at, x.dedupe}))
end
local function ready_member(x)
  return string.format('%08x%014x', 2147483647 - x.priority, x.order + 2251799813685248) ..
         pad(x.id)
end
local function ready_id(member) return tonumber(string.sub(member, 23)) end
local function wj_member(worker, id) return worker .. '\0' .. pad(id) end
local function wj_range(worker)
  return redis.call('ZRANGEBYLEX', K_WORKER_JOBS, '[' .. worker .. '\0', '(' .. worker .. '\1')
end
-- Delivery order: higher priority first, then order (returned jobs lead), then id.
local function by_ready_key(a, b)
  if a.priority ~= b.priority then return a.priority > b.priority end
  if a.order ~= b.order then return a.order < b.order end
  return a.id < b.id
end

local function make_ready(x, at_head)
  x.st = 'r'
  if at_head then
    x.order = Q.head_order
    Q.head_order = Q.head_order - 1
  else
    x.order = Q.next_order
    Q.next_order = Q.next_order + 1
  end
  redis.call('ZADD', K_READY, 0, ready_member(x))
  put(x)
end
-- A deadline at `t` was added to delayed, leases or heartbeats.
local function deadline_at(t)
  if Q.due == nil or t < Q.due then Q.due = t end
end
local function make_delayed(x, untilms)
  x.st, x.due = 'd', untilms
  x.order = Q.next_order  -- jobs due at the same ms become ready in this order
  Q.next_order = Q.next_order + 1
  redis.call('ZADD', K_DELAYED, untilms, pad(x.id))
  deadline_at(untilms)
  put(x)
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
    redis.call('ZREM', K_WORKER_JOBS, wj_member(w, x.id))
    x.worker = false
    forget_worker_if_idle(w)
  end
end
-- The attempt's error (bounded by the caller, core::BoundedError); only the last KEPT_ATTEMPTS
-- are kept (core::kKeptAttempts).
local KEPT_ATTEMPTS = 10
local function add_history(x, err, now)
  local v = redis.call('HGET', K_HISTORY, pad(x.id))
  local h = v and cmsgpack.unpack(v) or {}
  if #h >= KEPT_ATTEMPTS then table.remove(h, 1) end
  h[#h + 1] = {x.attempt, err, now}
  redis.call('HSET', K_HISTORY, pad(x.id), cmsgpack.pack(h))
end
local function bury(x, now)
  x.st, x.failed_at = 'x', now
  redis.call('ZADD', K_DEAD, now, pad(x.id))
  put(x)
end
-- A delivery that ended without an ack: lease ran out, worker died or was released.
local function fail(x, err, now, expired)
  end_lease(x)
  add_history(x, err, now)
  if expired then Q.expired = Q.expired + 1 end
  if x.attempt >= x.max_attempts then return bury(x, now) end
  make_ready(x, true)
end
local function free_job(x)
  if x.dedupe then redis.call('HDEL', K_DEDUPE, x.dedupe) end
  local id = pad(x.id)
  redis.call('HDEL', K_JOBS, id)
  redis.call('HDEL', K_PAYLOADS, id)
  redis.call('HDEL', K_HISTORY, id)
end
local function jobs_of(ids)
  local out = {}
  for _, id in ipairs(ids) do out[#out + 1] = job(tonumber(id)) end
  return out
end
-- Each goes to the head, the last first, so together they keep their order.
local function fail_all(list, err, now)
  table.sort(list, by_ready_key)
  for i = #list, 1, -1 do fail(list[i], err, now, true) end
end
local function worker_died(w, now)
  redis.call('HSET', K_WORKERS, w, 0)
  redis.call('ZREM', K_HEARTBEATS, w)
  local ids = {}
  for _, m in ipairs(wj_range(w)) do ids[#ids + 1] = string.sub(m, #w + 2) end
  local list = jobs_of(ids)
  fail_all(list, "worker '" .. w .. "' stopped sending heartbeats", now)
  if #list == 0 then forget_worker_if_idle(w) end
end

-- ---- time -----------------------------------------------------------------------------------
local function first_score(z)
  local top = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
  if top[1] then return tonumber(top[2]), top[1] end
  return NEVER, nil
end
-- axmin: the earliest time an ack may be forgotten, so most calls skip this.
local function forget_old_acks(now)
  if now < Q.axmin then return end
  local old = redis.call('ZRANGEBYSCORE', K_ACKED_EXPIRY, '-inf', now, 'LIMIT', 0, 256)
  for _, id in ipairs(old) do redis.call('HDEL', K_ACKED, id) end
  if #old > 0 then redis.call('ZREM', K_ACKED_EXPIRY, unpack(old)) end
  local first = redis.call('ZRANGE', K_ACKED_EXPIRY, 0, 0, 'WITHSCORES')
  Q.axmin = first[1] and tonumber(first[2]) or NEVER
end
local function advance(now)
  local target = math.max(now, Q.now)
  while Q.due == nil or Q.due <= target do
    local d = first_score(K_DELAYED)
    local l = first_score(K_LEASES)
    local h, hw = first_score(K_HEARTBEATS)
    local nxt = math.min(d, l, h)
    if nxt == NEVER or nxt > target then
      Q.due = nxt
      break
    end
    local when = math.max(nxt, Q.now)
    Q.now = when
    if d == nxt then  -- every job due at this ms, in the order it was delayed
      local ids = redis.call('ZRANGEBYSCORE', K_DELAYED, nxt, nxt)
      redis.call('ZREMRANGEBYSCORE', K_DELAYED, nxt, nxt)
      local list = jobs_of(ids)
      table.sort(list, function(a, b) return a.order < b.order end)
      for _, x in ipairs(list) do make_ready(x, false) end
    elseif l == nxt then  -- every lease running out at this ms
      local ids = redis.call('ZRANGEBYSCORE', K_LEASES, nxt, nxt)
      fail_all(jobs_of(ids), 'lease expired', when)
    else
      worker_died(hw, when)
    end
  end
  Q.now = target
  forget_old_acks(Q.now)
end
local function next_deadline()
  if Q.due ~= nil then return Q.due end  -- maybe early: the sweeper then finds nothing, once
  return math.min((first_score(K_DELAYED)), (first_score(K_LEASES)), (first_score(K_HEARTBEATS)))
end
local function to_register(force) return register_deadline(Q, next_deadline(), force) end
-- Long polls elsewhere should try again: ready jobs, not paused, and someone polling.
local function wake()
  if Q.paused == 0 and redis.call('EXISTS', K_POLL) == 1 and redis.call('ZCARD', K_READY) > 0 then
    return 1
  end
  return 0
end
-- A queue that holds nothing a client put there (never pushed to, not paused, no worker, no key
-- of its own) is forgotten, as the embedded backend forgets it: a name nobody uses costs
-- nothing. (The key is looked at last: only queues never pushed to get that far.)
local function keyed() return redis.call('EXISTS', K_QUEUE_KEY) == 1 end
local function holds_nothing()
  return Q.listed == 0 and Q.pushed == 0 and Q.paused == 0 and
         redis.call('HLEN', K_WORKERS) == 0 and
         not keyed()
end
-- Shown by ListQueues and counted against --max-queues: pushed to, or holding a key.
local function counted() return Q.listed == 1 or keyed() end
-- Every answer of a queue that exists: {'ok', register, wake, payload}
local function answer(force, payload)
  if holds_nothing() then
    redis.call('DEL', K_META, K_WORKERS, K_HEARTBEATS, K_WORKER_JOBS)
    return {'ok', -1, 0, payload}
  end
  local reg = to_register(force)
  local wk = wake()
  save()
  return {'ok', reg, wk, payload}
end

-- ---- leases: (id, delivery) pairs, their MAC already checked by the backend -----------------
local OK, LOST, INVALID = 0, 1, 2
local function current(id, delivery)
  local x = job(id)
  if x then
    if x.st == 'i' and x.delivery == delivery then return OK, x, false end
    return LOST, nil, false
  end
  local a = redis.call('HGET', K_ACKED, pad(id))
  if a and tonumber(a) == delivery then return OK, nil, true end
  return LOST, nil, false
end
local function ack(id, delivery)
  local outcome, x = current(id, delivery)
  if not x then return outcome end
  end_lease(x)
  redis.call('HSET', K_ACKED, pad(id), s(delivery))
  redis.call('ZADD', K_ACKED_EXPIRY, Q.now + ACK_MEMORY_MS, pad(id))
  Q.axmin = math.min(Q.axmin, Q.now + ACK_MEMORY_MS)
  if Q.acked % 1024 == 0 then  -- bounded memory: the oldest go first
    local over = redis.call('ZCARD', K_ACKED_EXPIRY) - ACK_MEMORY_MAX
    if over > 0 then
      local oldest = redis.call('ZRANGE', K_ACKED_EXPIRY, 0, over - 1)
      for _, old in ipairs(oldest) do redis.call('HDEL', K_ACKED, old) end
      redis.call('ZREM', K_ACKED_EXPIRY, unpack(oldest))
    end
  end
  Q.acked = Q.acked + 1
  free_job(x)
  return OK
end
local function fetch(worker, max, lease_ms)
  local out = {}
  if Q.paused ~= 0 or max <= 0 then return out end
  local members = redis.call('ZRANGE', K_READY, 0, max - 1)
  if #members == 0 then return out end
  redis.call('ZREM', K_READY, unpack(members))
  if not redis.call('HGET', K_WORKERS, worker) then redis.call('HSET', K_WORKERS, worker, 0) end
  for _, m in ipairs(members) do
    local x = job(ready_id(m))
    x.st = 'i'
    x.attempt = x.attempt + 1
    x.delivery = Q.next_delivery
    Q.next_delivery = Q.next_delivery + 1
    x.due = Q.now + lease_ms
    x.worker = worker
    redis.call('ZADD', K_WORKER_JOBS, 0, wj_member(worker, x.id))
    redis.call('ZADD', K_LEASES, x.due, pad(x.id))
    deadline_at(x.due)
    put(x)
    out[#out + 1] = {x.id, redis.call('HGET', K_PAYLOADS, pad(x.id)), x.attempt, x.delivery, x.due,
                     x.priority}
  end
  return out
end

-- ---- operations -----------------------------------------------------------------------------
local function main()
  local now = now_ms()
  local exists = load()

  if op == 'push' then
    -- ARGV 3: n, then n x (payload, delay_ms, priority, dedupe ('' none, '=KEY'), max_attempts)
    if not exists then create(now) end
    advance(now)
    local first_push = Q.listed == 0
    Q.listed = 1
    local n, results = tonumber(ARGV[3]), {}
    for i = 0, n - 1 do
      local payload, delay = ARGV[4 + i * 5], tonumber(ARGV[5 + i * 5])
      local dedupe = ARGV[7 + i * 5]
      dedupe = dedupe ~= '' and string.sub(dedupe, 2) or false
      local hit = dedupe and redis.call('HGET', K_DEDUPE, dedupe)
      if hit then
        results[#results + 1] = tonumber(hit)
        results[#results + 1] = 0
      else
        local x = {id = Q.next_id, st = 'r', due = 0, order = 0, priority = tonumber(ARGV[6 + i * 5]),
                   max_attempts = tonumber(ARGV[8 + i * 5]), attempt = 0, delivery = 0,
                   worker = false, failed_at = 0, dedupe = dedupe}
        Q.next_id = Q.next_id + 1
        redis.call('HSET', K_PAYLOADS, pad(x.id), payload)
        if dedupe then redis.call('HSET', K_DEDUPE, dedupe, s(x.id)) end
        if delay > 0 then make_delayed(x, Q.now + delay) else make_ready(x, false) end
        Q.pushed = Q.pushed + 1
        results[#results + 1] = x.id
        results[#results + 1] = 1
      end
    end
    -- The first push puts the queue in the registry (ListQueues), whatever its deadlines.
    local reg = to_register(false)
    if first_push and reg == -1 then reg = Q.hint end
    local wk = wake()
    save()
    return {'ok', reg, wk, results}
  end

  if op == 'fetch' then
    -- ARGV 3 worker, 4 max, 5 lease_ms, 6 wait_ms, 7 n acks, then n x (id, delivery)
    local n, acked = tonumber(ARGV[7]), {}
    if not exists then
      -- Nothing to fetch, and a name nobody pushed to is not kept: a long poll only leaves its
      -- POLL mark (with a TTL), so a first push wakes it.
      for i = 1, n do acked[i] = INVALID end
      local wait = tonumber(ARGV[6])
      if wait > 0 and redis.call('PTTL', K_POLL) < wait + 1000 then
        redis.call('SET', K_POLL, '1', 'PX', wait + 1000)
      end
      return {'ok', -1, 0, {acked, {}}}
    end
    advance(now)
    if exists then
      for i = 0, n - 1 do acked[#acked + 1] = ack(tonumber(ARGV[8 + i * 2]), tonumber(ARGV[9 + i * 2])) end
    end
    local jobs = fetch(ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]))
    local wait = tonumber(ARGV[6])
    if #jobs == 0 and wait > 0 and redis.call('PTTL', K_POLL) < wait + 1000 then
      redis.call('SET', K_POLL, '1', 'PX', wait + 1000)  -- never shortens another poll's wait
    end
    return answer(false, {acked, jobs})
  end

  if op == 'heartbeat' then  -- ARGV 3 worker, 4 ttl
    -- A worker matters to a queue that holds jobs (its first fetch of one registers it): on a
    -- name nobody pushed to, a heartbeat keeps nothing.
    if not exists or holds_nothing() then return {'ok', -1, 0, 1} end
    advance(now)
    -- Extends the worker's deadline, never shortens it (core Queue::Heartbeat: anyone with the
    -- queue key may name any worker; ending one at once is the admin's release).
    local w = ARGV[3]
    local alive = math.max(tonumber(redis.call('HGET', K_WORKERS, w) or 0) or 0,
                           Q.now + tonumber(ARGV[4]))
    redis.call('HSET', K_WORKERS, w, s(alive))
    redis.call('ZADD', K_HEARTBEATS, alive, w)
    deadline_at(alive)
    return answer(false, 1)
  end

  if op == 'setpaused' then  -- ARGV 3: 1 or 0
    if not exists then
      if tonumber(ARGV[3]) == 0 then return {'ok', -1, 0, 1} end  -- unpausing nothing keeps nothing
      create(now)
    end
    advance(now)
    Q.paused = tonumber(ARGV[3])
    return answer(false, 1)
  end

  if op == 'setkey' then
    -- ARGV 3: the digest to keep (32 raw bytes), or '' to remove the key. Setting one creates
    -- the queue (the backend checked --max-queues first) and puts it in the registry, as a first
    -- push does. Answers 1 when the name no longer counts as a queue (its key removed, never
    -- pushed to: the backend uncounts it), else 0.
    local digest = ARGV[3]
    if digest == '' then
      if not keyed() then return {'ok', -1, 0, 0} end
      redis.call('DEL', K_QUEUE_KEY)
      if not exists then return {'ok', -1, 0, 1} end  -- (never written so: a key without a queue)
      advance(now)
      return answer(false, Q.listed == 0 and 1 or 0)
    end
    if not exists then create(now) end
    advance(now)
    local first = not counted()
    redis.call('SET', K_QUEUE_KEY, digest)
    local reg = to_register(false)
    if first and reg == -1 then reg = Q.hint end
    local wk = wake()
    save()
    return {'ok', reg, wk, 0}
  end

  if not exists then  -- reads and changes of a queue nobody pushed to: the empty answer
    if op == 'ack' or op == 'nack' or op == 'extend' then
      local out = {}
      for i = 1, tonumber(ARGV[3]) do out[i] = INVALID end
      return {'ok', -1, 0, out}
    end
    if op == 'stats' then return {'ok', -1, 0, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}} end
    if op == 'inflight' or op == 'dead' then return {'ok', -1, 0, {}} end
    if op == 'advance' or op == 'hint' then return {'ok', NEVER, 0, 0} end
    if op == 'cancel' then return {'ok', -1, 0, 1} end
    return {'ok', -1, 0, 0}  -- release, requeue, giveback, cancel (unknown)
  end

  if op == 'hint' then  -- the sweeper, after recording the next deadline: the one last reported
    return {'ok', Q.hint, 0, 0}
  end

  advance(now)

  if op == 'ack' or op == 'nack' or op == 'extend' then
    -- ARGV 3 n, then n x (id, delivery, jitter); nack: after them delay ('' backoff), error;
    -- extend: after them lease_ms
    local n, out = tonumber(ARGV[3]), {}
    local rest = 4 + n * 3
    for i = 0, n - 1 do
      local id, delivery = tonumber(ARGV[4 + i * 3]), tonumber(ARGV[5 + i * 3])
      if op == 'ack' then
        out[#out + 1] = ack(id, delivery)
      else
        local outcome, x, acked_before = current(id, delivery)
        if acked_before then outcome = LOST end
        if x and op == 'extend' then
          x.due = Q.now + tonumber(ARGV[rest])
          redis.call('ZADD', K_LEASES, x.due, pad(x.id))
          deadline_at(x.due)
          put(x)
        elseif x then  -- nack
          end_lease(x)
          Q.nacked = Q.nacked + 1
          add_history(x, ARGV[rest + 1], Q.now)
          if x.attempt >= x.max_attempts then
            bury(x, Q.now)
          else
            local delay
            if ARGV[rest] ~= '' then
              delay = tonumber(ARGV[rest])
            else
              local shift = math.min(x.attempt - 1, 22)
              local base = math.min(RULES.backoff_base_ms * 2 ^ shift, RULES.backoff_cap_ms)
              delay = math.floor(base * tonumber(ARGV[6 + i * 3]))
            end
            if delay > 0 then make_delayed(x, Q.now + delay) else make_ready(x, false) end
          end
        end
        out[#out + 1] = outcome
      end
    end
    return answer(false, out)
  elseif op == 'giveback' then
    -- ARGV 3 n, then n x (id, delivery): deliveries whose answer reached nobody (the long poll's
    -- client hung up while its fetch ran). Each job goes back to the head of the line as if it
    -- had not been fetched: its attempt is taken back, with no history, nack or expiry counted.
    local n, list = tonumber(ARGV[3]), {}
    for i = 0, n - 1 do
      local _, x = current(tonumber(ARGV[4 + i * 2]), tonumber(ARGV[5 + i * 2]))
      if x then list[#list + 1] = x end
    end
    table.sort(list, by_ready_key)
    for i = #list, 1, -1 do  -- the last first, so together they keep their order
      local x = list[i]
      end_lease(x)
      x.attempt = x.attempt - 1
      make_ready(x, true)
    end
    return answer(false, #list)
  elseif op == 'release' then  -- ARGV 3 worker
    local w = ARGV[3]
    local alive = redis.call('HGET', K_WORKERS, w)
    if not alive then return answer(false, 0) end
    local ids = {}
    for _, m in ipairs(wj_range(w)) do ids[#ids + 1] = string.sub(m, #w + 2) end
    local list = jobs_of(ids)
    if tonumber(alive) ~= 0 then
      redis.call('HSET', K_WORKERS, w, 0)
      redis.call('ZREM', K_HEARTBEATS, w)
    end
    fail_all(list, "released: worker '" .. w .. "'", Q.now)
    if #list == 0 then forget_worker_if_idle(w) end
    return answer(false, #list)
  elseif op == 'stats' then
    return answer(false, {redis.call('ZCARD', K_READY), redis.call('ZCARD', K_DELAYED),
                          redis.call('ZCARD', K_LEASES), redis.call('ZCARD', K_DEAD), Q.pushed,
                          Q.acked, Q.nacked, Q.expired, Q.cancelled, redis.call('HLEN', K_WORKERS),
                          Q.paused, counted() and 1 or 0})
  elseif op == 'inflight' then  -- ARGV 3: worker, or '' for all
    local list = {}
    if ARGV[3] ~= '' then
      local w = ARGV[3]
      local ids = {}
      for _, m in ipairs(wj_range(w)) do ids[#ids + 1] = string.sub(m, #w + 2) end
      list = jobs_of(ids)
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
  elseif op == 'dead' then  -- ARGV 3: limit
    local out = {}
    local limit = tonumber(ARGV[3])
    if limit > 0 then
      for _, id in ipairs(redis.call('ZRANGE', K_DEAD, 0, limit - 1)) do
        local x = job(tonumber(id))
        local v = redis.call('HGET', K_HISTORY, id)
        local hist = v and cmsgpack.unpack(v) or {}
        local last = hist[#hist]
        out[#out + 1] = {x.id, redis.call('HGET', K_PAYLOADS, id), x.attempt,
                         last and last[2] or '', x.failed_at, hist}
      end
    end
    return answer(false, out)
  elseif op == 'requeue' then  -- ARGV 3: '*' for all, else n ids
    local ids = {}
    if ARGV[3] == '*' then
      ids = redis.call('ZRANGE', K_DEAD, 0, -1)
    else
      for i = 4, 3 + tonumber(ARGV[3]) do ids[#ids + 1] = ARGV[i] end
    end
    local count = 0
    for _, id in ipairs(ids) do
      local x = job(tonumber(id))
      if x and x.st == 'x' then
        redis.call('ZREM', K_DEAD, pad(x.id))
        redis.call('HDEL', K_HISTORY, pad(x.id))
        x.attempt = 0
        make_ready(x, false)
        count = count + 1
      end
    end
    return answer(false, count)
  elseif op == 'cancel' then  -- ARGV 3: id. Answers 0 cancelled, 1 unknown, 2 in flight
    local x = job(tonumber(ARGV[3]))
    if not x then return answer(false, 1) end
    if x.st == 'i' then return answer(false, 2) end
    if x.st == 'r' then redis.call('ZREM', K_READY, ready_member(x))
    elseif x.st == 'd' then redis.call('ZREM', K_DELAYED, pad(x.id))
    else redis.call('ZREM', K_DEAD, pad(x.id)) end
    Q.cancelled = Q.cancelled + 1
    free_job(x)
    return answer(false, 0)
  elseif op == 'advance' then
    return answer(true, 0)
  end
  return {'invalid_argument', 'unknown queue operation ' .. tostring(op)}
end

-- The entry point, called with the keys and arguments of one call: by FCALL, as a function of
-- the library this file becomes (Redis 7), or by the EVAL script it also becomes (Redis 6).
-- See Script in src/store/redis/cluster_client.h.
local function run(keys, argv)
  KEYS, ARGV = keys, argv
  K_META, K_JOBS, K_PAYLOADS, K_HISTORY = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  K_READY, K_DELAYED, K_LEASES, K_DEAD, K_DEDUPE = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
  K_ACKED, K_ACKED_EXPIRY, K_WORKERS, K_HEARTBEATS = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
  K_WORKER_JOBS, K_POLL, K_QUEUE_KEY = KEYS[14], KEYS[15], KEYS[16]
  op = ARGV[1]
  Q = {}
  return main()
end
