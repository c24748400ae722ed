// Queue: the producer's and the operator's side of one queue (docs/api.md "Queues"). Every
// method is one request; nothing is cached, so two Queue objects of one name are the same
// queue.
import { clientOf } from './client.js';
import { JobFailed } from './errors.js';
import { seg } from './http.js';

const LOG_LINES_PER_REQUEST = 100; // what a job's log takes in one request

export class Queue {
  // name: the queue's name (1-128 of [A-Za-z0-9._:-]); options: {client} or {url, key, ...}.
  constructor(name, options = {}) {
    this.name = String(name);
    this.client = clientOf(options);
    this.transport = this.client.transport;
    this.path = `/v1/queues/${seg(this.name)}`;
  }

  // Pushes one job; resolves with its id (a decimal string). A dedupe_key equal to that of a job
  // not yet acked answers that job's id and enqueues nothing. A group (a tenant, a customer) is
  // what per-group limits and round-robin turns are kept by (setSettings).
  //
  // dependsOn (1..100 ids of older jobs of this queue) holds the job in state waiting_deps, not
  // fetchable, until every one of them is acked; a dependency that dies, is cancelled or is not
  // known fails it at once (dead), unless onDependencyFailure is 'ignore' (default 'fail'): then
  // it stops waiting for that one. Its worker reads what they gave with getJobDependencies.
  // batch joins an open batch of this queue (createBatch); an unknown one rejects with
  // AnteroomError 404 unknown_batch, a sealed one 409 conflict, and nothing is pushed.
  async push(payload, options = {}) {
    const answer = await this.transport.json('POST', `${this.path}/jobs`, jobBody(payload, options));
    return answer.id;
  }

  // Pushes 1..1000 jobs at once, all or nothing. Each item is {payload, delayMs?, priority?,
  // dedupeKey?, maxAttempts?, group?, dependsOn?, onDependencyFailure?, batch?}. Resolves with
  // the ids in order.
  async pushBulk(jobs) {
    const body = { jobs: jobs.map((j) => jobBody(j.payload, j)) };
    const answer = await this.transport.json('POST', `${this.path}/jobs`, body);
    return answer.ids;
  }

  // {queue, ready, delayed, inflight, dead, pushed, acked, nacked, expired, cancelled, workers, paused}
  stats() {
    return this.transport.json('GET', this.path);
  }

  // Admin: a paused queue takes pushes and hands out nothing. Both answer the stats.
  pause() {
    return this.transport.json('POST', `${this.path}/pause`);
  }

  resume() {
    return this.transport.json('POST', `${this.path}/resume`);
  }

  // Dead letters, oldest failure first: [{id, payload, attempts, error, failed_at_ms, history}].
  async dead({ limit } = {}) {
    const query = limit === undefined ? '' : `?limit=${encodeURIComponent(limit)}`;
    return (await this.transport.json('GET', `${this.path}/dead${query}`)).jobs;
  }

  // One job wherever it is: {id, state, payload, priority, group?, attempts, max_attempts,
  // ready_at_ms?, lease_expires_ms?, finished_at_ms?, last_error?, history, progress?, result?,
  // log: [{at_ms, line}], log_dropped}. state: 'waiting_deps' | 'delayed' | 'ready' |
  // 'inflight' | 'acked' | 'dead' | 'cancelled'. Rejects with AnteroomError 404 unknown_job
  // for a job never pushed, or finished and no longer kept (the queue's keepAcked setting).
  getJob(id) {
    return this.transport.json('GET', `${this.path}/jobs/${seg(id)}`);
  }

  // Polls getJob every pollIntervalMs until the job is finished; resolves with its result
  // (undefined when its handler gave none). Rejects with JobFailed for a job that is dead (its
  // lastError says why) or cancelled, with an Error named TimeoutError when it is not finished
  // within timeoutMs, and with AnteroomError 404 unknown_job for a job the queue does not hold
  // (or no longer keeps).
  async waitForResult(id, { timeoutMs = 30_000, pollIntervalMs = 250 } = {}) {
    if (!(pollIntervalMs > 0)) throw new RangeError('anteroom: pollIntervalMs must be > 0');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = await this.getJob(id);
      if (job.state === 'acked') return job.result;
      if (job.state === 'dead' || job.state === 'cancelled') throw new JobFailed(job);
      const left = deadline - Date.now();
      if (left <= 0) {
        const err = new Error(`anteroom: job ${id} is still ${job.state} after ${timeoutMs} ms ` +
          `(attempt ${job.attempts} of ${job.max_attempts})`);
        err.name = 'TimeoutError';
        throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(pollIntervalMs, left)));
    }
  }

  // What became of each job `id` depends on, in the order named: [{id, state, result?}], state
  // 'pending' | 'acked' | 'dead' | 'cancelled' | 'missing', result what an acked one's handler
  // gave. A dependent's worker reads its inputs here: the results are kept with the dependent,
  // however few finished jobs the queue keeps. A job pushed without dependsOn resolves with [];
  // one the queue does not hold rejects with AnteroomError 404 unknown_job.
  async getJobDependencies(id) {
    return (await this.transport.json('GET', `${this.path}/jobs/${seg(id)}/dependencies`)).dependencies;
  }

  // Opens a batch of this queue (a random id without `id`); resolves with it as getBatch does.
  // Jobs join it with push(payload, {batch: id}) until sealBatch. Each callback is a job pushed
  // to this queue, once: {payload, priority?, maxAttempts?, group?}. onComplete when the sealed
  // batch has no job pending; onSuccess then too when none of its jobs died or was cancelled;
  // onDead when its first job dies. Rejects with AnteroomError 409 conflict when the id is
  // taken, 429 limit_reached past 10,000 open batches of the queue.
  createBatch(options = {}) {
    return this.transport.json('POST', `${this.path}/batches`, batchBody(options));
  }

  // No job joins the batch after (a push naming it rejects with 409 conflict); once none of its
  // jobs is pending it settles and its callbacks are pushed. Sealing a sealed batch changes
  // nothing. Resolves with the batch; AnteroomError 404 unknown_batch for one the queue does
  // not hold.
  sealBatch(id) {
    return this.transport.json('POST', `${this.path}/batches/${seg(id)}/seal`);
  }

  // {id, sealed, settled, pending, acked, dead, cancelled, created_at_ms, settled_at_ms?,
  // callbacks_pushed: {on_success?, on_complete?, on_dead?}} (the callback jobs' ids). A
  // settled batch is kept for the queue's keepAcked age, then rejects with AnteroomError 404
  // unknown_batch as an unknown one does.
  getBatch(id) {
    return this.transport.json('GET', `${this.path}/batches/${seg(id)}`);
  }

  // Admin: dead letters back into the queue from attempt 1 (all of them without ids).
  // Resolves with how many were requeued.
  async redrive(ids) {
    const body = ids === undefined ? {} : { ids: ids.map(String) };
    return (await this.transport.json('POST', `${this.path}/dead/requeue`, body)).count;
  }

  // Admin: cancels a ready, delayed or dead job. Rejects with AnteroomError 404 unknown_job,
  // or 409 conflict for a job in flight.
  async cancel(id) {
    return (await this.transport.json('DELETE', `${this.path}/jobs/${seg(id)}`)).count;
  }

  // Jobs in flight: [{id, worker, attempt, lease_expires_ms}], of one worker when given.
  async inflight({ worker } = {}) {
    const query = worker === undefined ? '' : `?worker=${encodeURIComponent(worker)}`;
    return (await this.transport.json('GET', `${this.path}/inflight${query}`)).jobs;
  }

  // Acks leases (the worker's raw call; Worker acks by itself). results, one per lease
  // (null or undefined: none), are kept with the jobs for getJob and waitForResult while the
  // queue keeps finished jobs (keepAcked): any JSON value of at most 64 KiB serialized. A
  // larger one refuses the whole call (AnteroomError 413 payload_too_large) and acks nothing.
  // Resolves with the per-lease outcomes [{lease, ok, code?}].
  async ack(leases, results) {
    const body = { leases: [...leases] };
    if (results !== undefined) body.results = resultsFor(body.leases, results);
    return (await this.transport.json('POST', `${this.path}/ack`, body)).results;
  }

  // Reports how far the job of `lease` got: any JSON value of at most 4 KiB serialized
  // (larger: AnteroomError 413), replacing the last one. Resolves with {ok: true}, or {ok:
  // false, code} ('lease_lost', 'invalid_lease') when the lease is not current. A Worker's
  // handler calls job.progress(value) instead.
  progress(lease, value) {
    const body = { lease, progress: value === undefined ? null : value };
    return this.transport.json('POST', `${this.path}/progress`, body);
  }

  // Appends lines (String() of each) to the log of the job of `lease`; the server keeps each
  // line to 1 KiB and the job's last 100 lines (log_dropped counts the older ones). More than
  // 100 lines go in several requests. Resolves as progress. A Worker's handler calls
  // job.log(...lines) instead.
  async log(lease, ...lines) {
    if (lines.length === 0) throw new TypeError('anteroom: log() needs at least one line');
    const texts = lines.map(String);
    let answer = { ok: true };
    for (let start = 0; start < texts.length && answer.ok; start += LOG_LINES_PER_REQUEST) {
      const chunk = texts.slice(start, start + LOG_LINES_PER_REQUEST);
      answer = await this.transport.json('POST', `${this.path}/log`, { lease, lines: chunk });
    }
    return answer;
  }

  // Gives jobs back because an upstream service said to slow down (nack with rate_limited):
  // each comes back after retryAfterMs (0..3,600,000) without using up an attempt, and nothing
  // else of its group is handed out before then (nothing of the queue, for a job without a
  // group). Resolves with the per-lease outcomes [{lease, ok, code?}].
  async snooze(leases, retryAfterMs) {
    const body = { leases: [...leases], rate_limited: true, retry_after_ms: retryAfterMs };
    return (await this.transport.json('POST', `${this.path}/nack`, body)).results;
  }

  // The settings in force: {queue, fairness, limits, keep_acked}; a queue nobody set them for
  // has {fairness: 'fifo', limits: [], keep_acked: {count: 1000, age_ms: 86400000}}.
  settings() {
    return this.transport.json('GET', `${this.path}/settings`);
  }

  // Admin: replaces the queue's settings; resolves with them as now in force.
  // fairness: 'fifo' | 'round_robin'. limits: at most one {key: 'group', ...} (each group held
  // on its own) and one {key: null, ...} (all of the queue's jobs together), each with
  // rate: {limit, periodMs, burst?}, concurrency, or both. keepAcked: {count?: 0..1,000,000
  // (default 1000), ageMs?: 1..2,592,000,000 (default a day)}, how many finished (acked or
  // cancelled) jobs getJob still finds, and for how long (keep_acked, as settings() answers
  // it, is taken too). What is left out goes back to its default: setSettings() clears them all.
  setSettings({ fairness, limits, keepAcked, keep_acked: keepAckedWire } = {}) {
    const body = {};
    const keep = keepAcked ?? keepAckedWire;
    if (fairness !== undefined) body.fairness = fairness;
    if (limits !== undefined) body.limits = limits.map(limitBody);
    if (keep !== undefined) body.keep_acked = keepAckedBody(keep);
    return this.transport.json('PUT', `${this.path}/settings`, body);
  }
}

// A limit in the server's spelling: the rate's periodMs becomes period_ms (which is taken as
// well, so the limits settings() answered can be sent back as they are). Every other field
// goes as given, so the server's refusal of an unknown one still catches a misspelling.
function limitBody(limit) {
  if (limit?.rate?.periodMs === undefined) return limit;
  const { periodMs, ...rate } = limit.rate;
  return { ...limit, rate: { ...rate, period_ms: periodMs } };
}

// keepAcked in the server's spelling: ageMs becomes age_ms (which is taken as well, so what
// settings() answered can be sent back as it is); any other field goes as given, for the server
// to refuse.
function keepAckedBody(keep) {
  if (keep?.ageMs === undefined) return keep;
  const { ageMs, ...rest } = keep;
  return { ...rest, age_ms: ageMs };
}

// One result per lease, undefined sent as null (none).
function resultsFor(leases, results) {
  const out = [...results].map((r) => (r === undefined ? null : r));
  if (out.length !== leases.length) {
    throw new RangeError(`anteroom: one result per lease: ${leases.length} lease(s), ${out.length} result(s)`);
  }
  return out;
}

function jobBody(payload, {
  delayMs, priority, dedupeKey, maxAttempts, group, dependsOn, onDependencyFailure, batch,
} = {}) {
  // The server refuses a job without a payload; undefined is sent as null rather than dropped.
  const body = { payload: payload === undefined ? null : payload };
  if (delayMs !== undefined) body.delay_ms = delayMs;
  if (priority !== undefined) body.priority = priority;
  if (dedupeKey !== undefined) body.dedupe_key = dedupeKey;
  if (maxAttempts !== undefined) body.max_attempts = maxAttempts;
  if (group !== undefined) body.group = group;
  // Ids are decimal strings; anything but an array goes as given, for the server to refuse.
  if (dependsOn !== undefined) body.depends_on = Array.isArray(dependsOn) ? dependsOn.map(String) : dependsOn;
  if (onDependencyFailure !== undefined) body.on_dependency_failure = onDependencyFailure;
  if (batch !== undefined) body.batch = batch;
  return body;
}

// createBatch's options and their names on the wire.
const BATCH_CALLBACKS = { onSuccess: 'on_success', onComplete: 'on_complete', onDead: 'on_dead' };

// The body of createBatch. An option this client does not know throws a TypeError: renamed to
// the server's spelling, a misspelt one would otherwise vanish unseen instead of being refused by
// name as the server refuses unknown fields.
function batchBody(options) {
  const body = {};
  for (const [name, value] of Object.entries(options ?? {})) {
    if (value === undefined) continue;
    if (name === 'id') {
      body.id = value;
    } else if (name in BATCH_CALLBACKS) {
      body[BATCH_CALLBACKS[name]] = callbackBody(value);
    } else {
      throw new TypeError(`anteroom: '${name}' is not an option of createBatch (its options: id, ${
        Object.keys(BATCH_CALLBACKS).join(', ')})`);
    }
  }
  return body;
}

// A batch's callback job in the server's spelling: maxAttempts becomes max_attempts (which is
// taken as well); every other field goes as given, so the server's refusal of an unknown one
// still catches a misspelling. An undefined payload is sent as null, as a push's.
function callbackBody(job) {
  if (job === null || typeof job !== 'object') return job;
  const { maxAttempts, ...rest } = job;
  const body = { ...rest, payload: job.payload === undefined ? null : job.payload };
  if (maxAttempts !== undefined) body.max_attempts = maxAttempts;
  return body;
}
