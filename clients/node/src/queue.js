// Queue: the producer's and the operator's side of one queue (docs/api.md "Queues"). Every
// method is one request; nothing is cached, so two Queue objects of one name are the same
// queue.
import { clientOf } from './client.js';
import { seg } from './http.js';

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
  async push(payload, options = {}) {
    const answer = await this.transport.json('POST', `${this.path}/jobs`, jobBody(payload, options));
    return answer.id;
  }

  // Pushes 1..1000 jobs at once, all or nothing. Each item is {payload, delayMs?, priority?,
  // dedupeKey?, maxAttempts?, group?}. Resolves with the ids in order.
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

  // Gives jobs back because an upstream service said to slow down (nack with rate_limited):
  // each comes back after retryAfterMs (0..3,600,000) without using up an attempt, and nothing
  // else of its group is handed out before then (nothing of the queue, for a job without a
  // group). Resolves with the per-lease outcomes [{lease, ok, code?}].
  async snooze(leases, retryAfterMs) {
    const body = { leases: [...leases], rate_limited: true, retry_after_ms: retryAfterMs };
    return (await this.transport.json('POST', `${this.path}/nack`, body)).results;
  }

  // The limits and fairness in force: {queue, fairness, limits}; a queue nobody set them for
  // has {fairness: 'fifo', limits: []}.
  settings() {
    return this.transport.json('GET', `${this.path}/settings`);
  }

  // Admin: replaces the queue's limits and fairness; resolves with them as now in force.
  // fairness: 'fifo' | 'round_robin'. limits: at most one {key: 'group', ...} (each group held
  // on its own) and one {key: null, ...} (all of the queue's jobs together), each with
  // rate: {limit, periodMs, burst?}, concurrency, or both. What is left out goes back to its
  // default: setSettings() clears them all.
  setSettings({ fairness, limits } = {}) {
    const body = {};
    if (fairness !== undefined) body.fairness = fairness;
    if (limits !== undefined) body.limits = limits.map(limitBody);
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

function jobBody(payload, { delayMs, priority, dedupeKey, maxAttempts, group } = {}) {
  // The server refuses a job without a payload; undefined is sent as null rather than dropped.
  const body = { payload: payload === undefined ? null : payload };
  if (delayMs !== undefined) body.delay_ms = delayMs;
  if (priority !== undefined) body.priority = priority;
  if (dedupeKey !== undefined) body.dedupe_key = dedupeKey;
  if (maxAttempts !== undefined) body.max_attempts = maxAttempts;
  if (group !== undefined) body.group = group;
  return body;
}
