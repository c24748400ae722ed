// Worker: runs a handler for each job of a queue, at most `concurrency` at once, with the
// at-least-once rules of docs/api.md "Queues": a job is removed only by its ack, so whatever
// happens to this process (a crash, a lost network, a close) the job comes back to some worker.
//
// One loop long-polls `fetch` for as many jobs as there are free slots, with the acks (and
// results) of the jobs finished since the last fetch riding on it (one request per job instead
// of two). At most
// one fetch is in flight, and a slot is freed only when its handler has settled, so the number
// of handlers running never exceeds `concurrency`. Beside the loop: one timer extends every
// running lease at a third of the lease (one request for all of them), one heartbeats, and acks
// that cannot ride (a fetch parked in a long poll, or closing) go by `ack` after a short delay.
import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { AnteroomError, RateLimited, isRetryable } from './errors.js';
import { seg } from './http.js';
import { Queue } from './queue.js';

const MAX_ERROR_CHARS = 4000; // the server keeps 8 KiB of an error; a stack fits in this
const ACK_DELAY_MS = 50; // how long an ack waits for a fetch to ride before it goes alone
const FINAL_TRIES = 4; // tries of the acks and releases sent while closing
const CLOSED_MESSAGE = 'worker closed before the job finished';
// The server keeps a result up to 64 KiB (serialized); a larger one refuses the whole request it
// rides on, so each is measured before it is sent.
const MAX_RESULT_BYTES = 64 * 1024;
// The results one request carries at most, well inside the server's 16 MiB body limit of queue
// routes even with every slot's result at 64 KiB; the rest wait for the next request.
const RESULTS_PER_REQUEST_BYTES = 8 * 1024 * 1024;
const ACKS_PER_REQUEST = 1000;

export class Worker extends EventEmitter {
  // queue: a Queue, or a queue name with the connection in options ({url, key} or {client}).
  // handler(job) -> Promise: resolves -> ack, rejects -> nack (retried later with backoff),
  // rejects with a RateLimited -> snooze (back after its delay, no attempt used up). What it
  // resolves with is the job's result (getJob, waitForResult): a JSON value of at most 64 KiB
  // serialized; undefined or null: none. One that cannot be kept (not JSON, or larger) is not
  // dropped silently: the job fails as a rejection would, with an error saying why.
  constructor(queue, handler, options = {}) {
    super();
    if (typeof handler !== 'function') throw new TypeError('anteroom: the handler must be a function');
    this.ownsClient = !(queue instanceof Queue) && !options.client;
    this.queue = queue instanceof Queue ? queue : new Queue(queue, options);
    this.transport = this.queue.transport;
    this.path = this.queue.path;
    this.handler = handler;

    this.concurrency = intIn('concurrency', options.concurrency ?? 1, 1, 1000);
    this.leaseMs = intIn('leaseMs', options.leaseMs ?? 30_000, 100, 43_200_000);
    this.heartbeatMs = intIn('heartbeatMs', options.heartbeatMs ?? 10_000, 0, 3_600_000);
    this.shutdownGraceMs = intIn('shutdownGraceMs', options.shutdownGraceMs ?? 25_000, 0, 604_800_000);
    this.waitMs = intIn('waitMs', options.waitMs ?? 30_000, 0, 60_000);
    this.backoff = { firstMs: 100, maxMs: 10_000, ...options.backoff };
    // A stable id lets a restarted worker take back what it held before a crash (reclaim); a
    // random one names this process only.
    this.stableId = options.id !== undefined && options.id !== null;
    this.id = this.stableId
      ? String(options.id)
      : `${hostname().replace(/[^A-Za-z0-9._:-]/g, '-').slice(0, 64)}-${process.pid}-${randomBytes(4).toString('hex')}`;

    this.running = new Map(); // lease -> {job, abort, stalled, released, done}
    this.acks = []; // [{lease, job, result, size}] finished, not yet sent
    this.riding = []; // acks sent on the fetch in flight
    this.pending = new Set(); // promises of acks, nacks and releases in flight
    this.reclaimed = 0; // jobs handed back to this worker by its first fetch (reclaim)
    this.closing = false;
    this.closePromise = null;
    this.fetchController = null;
    this.wakers = []; // resolvers of the loop's wait for a free slot
    // What a handler's job does besides its fields (its prototype): report on itself.
    const reportsTo = this.queue;
    this.jobMethods = {
      async progress(value) {
        return (await reportsTo.progress(this.lease, value)).ok;
      },
      async log(...lines) {
        return (await reportsTo.log(this.lease, ...lines)).ok;
      },
    };
    this.ackTimer = null;
    this.extending = false;

    if (options.signal) {
      if (options.signal.aborted) queueMicrotask(() => this.close());
      else options.signal.addEventListener('abort', () => this.close(), { once: true });
    }
    this.signals = 0;
    this.onSignal = () => {
      // The first signal drains within the grace; a second one stops waiting and releases now.
      if (++this.signals > 1) this.endGrace?.();
      this.close();
    };
    if (options.handleSignals) {
      process.on('SIGINT', this.onSignal);
      process.on('SIGTERM', this.onSignal);
    }
    if (options.autorun ?? true) this.run();
  }

  // Starts the loop (done by the constructor unless autorun is false). Idempotent.
  run() {
    if (this.loopPromise || this.closing) return;
    if (this.heartbeatMs > 0) {
      this.heartbeat();
      this.heartbeatTimer = setInterval(() => this.heartbeat(), this.heartbeatMs);
    }
    // A lease is extended at least every third of itself: two requests may fail before it ends.
    this.extendTimer = setInterval(() => this.extend(), Math.max(30, Math.floor(this.leaseMs / 3)));
    // The loop handles its own request failures; this catches a bug or a listener that threw
    // (an EventEmitter listener's exception surfaces where emit() was called).
    this.loopPromise = this.loop().catch((err) => this.emitError(err));
  }

  // How many handlers run now.
  get active() {
    return this.running.size;
  }

  async loop() {
    let failures = 0;
    let first = true;
    let reclaim = this.stableId;
    while (!this.closing) {
      const free = this.concurrency - this.running.size;
      if (free <= 0) {
        await new Promise((resolve) => this.wakers.push(resolve));
        continue;
      }
      this.riding = takeAcks(this.acks);
      const body = { worker: this.id, max: free, lease_ms: this.leaseMs, wait_ms: this.waitMs };
      if (this.riding.length) body.ack = this.riding.map((a) => a.lease);
      const results = ackResults(this.riding);
      if (results) body.ack_results = results;
      if (first && reclaim) body.reclaim = true;
      this.fetchController = new AbortController();
      let answer;
      try {
        answer = await this.transport.json('POST', `${this.path}/fetch`, body, {
          signal: this.fetchController.signal,
          timeoutMs: this.waitMs + 15_000,
        });
      } catch (err) {
        const rode = this.riding;
        this.riding = [];
        this.fetchController = null;
        if (results && isResultRefused(err)) {
          // A result the server measured over 64 KiB refused the whole fetch: each ack goes
          // alone, so only that job fails, and the loop goes on.
          await this.ackAlone(rode);
          continue;
        }
        // Acks are idempotent: those that rode on a failed fetch are simply sent again.
        this.acks.unshift(...rode);
        if (this.closing) break;
        if (body.reclaim && err instanceof AnteroomError && err.status === 400) {
          // A server that refuses the field (400): go on without it; the old leases then run out
          // by themselves. (A server from before reclaim may also just ignore the field: its
          // answer then has no "reclaimed", and nothing is reclaimed.)
          reclaim = false;
          this.emitError(new AnteroomError(400, err.code,
            `the server does not take "reclaim" (${err.message}); fetching without it`));
          continue;
        }
        this.emitError(err);
        this.scheduleAckFlush();
        await this.sleep(backoffMs(this.backoff, failures++));
        continue;
      }
      const rode = this.riding;
      this.riding = [];
      this.fetchController = null;
      failures = 0;
      first = false;
      this.settleAcks(rode, answer?.acked);
      if (typeof answer?.reclaimed === 'number' && answer.reclaimed > 0) {
        this.reclaimed += answer.reclaimed;
        this.emit('reclaimed', answer.reclaimed);
      }
      const jobs = Array.isArray(answer?.jobs) ? answer.jobs : [];
      if (jobs.length === 0) {
        this.emit('drained');
        // Without a long poll an empty queue would be asked again at once, in a tight loop.
        if (this.waitMs === 0) await this.sleep(1000);
      }
      for (const raw of jobs) this.start(raw);
    }
  }

  start(raw) {
    // The job's AbortSignal is made when a handler first reads it: an AbortController per job
    // was 7% of a busy worker's CPU, and most handlers never look.
    let controller = null;
    const job = {
      __proto__: this.jobMethods,
      id: raw.id,
      payload: raw.payload,
      attempt: raw.attempt,
      lease: raw.lease,
      leaseExpiresMs: raw.lease_expires_ms,
      priority: raw.priority,
      group: raw.group,
      get signal() {
        controller ??= new AbortController();
        if (ctx.aborted && !controller.signal.aborted) controller.abort(ctx.aborted);
        return controller.signal;
      },
    };
    if (this.closing) {
      // Arrived after close() began: not ours to start. Back to the queue at once.
      this.track(this.release([job], 'worker closed before the job started'));
      return;
    }
    const ctx = {
      job,
      stalled: false,
      released: false,
      aborted: null, // the reason, once the job is no longer this worker's
      abort(reason) {
        ctx.aborted ??= reason;
        if (controller && !controller.signal.aborted) controller.abort(reason);
      },
    };
    this.running.set(job.lease, ctx);
    this.emit('active', job);
    ctx.done = (async () => this.handler(job))().then(
      (result) => this.finished(ctx, null, result),
      (err) => this.finished(ctx, err ?? new Error('the handler rejected without a reason')),
    );
  }

  finished(ctx, err, result) {
    this.running.delete(ctx.job.lease);
    for (const wake of this.wakers.splice(0)) wake();
    // A lease lost or given back: the job is someone else's now, nothing to report to the server.
    if (ctx.stalled || ctx.released) return;
    let size = 0;
    if (err === null) {
      try {
        size = resultSize(result);
      } catch (unkept) {
        err = unkept;
      }
    }
    if (err === null) {
      this.acks.push({ lease: ctx.job.lease, job: ctx.job, result, size });
      this.scheduleAckFlush();
      this.emit('completed', ctx.job, result);
    } else if (err instanceof RateLimited) {
      this.emit('snoozed', ctx.job, err.retryAfterMs);
      this.track(this.snooze(ctx.job, err.retryAfterMs));
    } else {
      this.emit('failed', ctx.job, err);
      this.track(this.nack(ctx.job, err));
    }
  }

  // Acks wait a moment for the next fetch to carry them; a parked long poll or a close means
  // none is coming, and they go alone.
  scheduleAckFlush() {
    if (this.closing) return this.track(this.flushAcks());
    if (this.ackTimer) return;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = null;
      this.track(this.flushAcks());
    }, ACK_DELAY_MS);
  }

  async flushAcks(tries = 1) {
    for (let attempt = 0; attempt < tries && this.acks.length; attempt++) {
      const batch = takeAcks(this.acks);
      try {
        const body = { leases: batch.map((a) => a.lease) };
        const results = ackResults(batch);
        if (results) body.results = results;
        const answer = await this.transport.json('POST', `${this.path}/ack`, body);
        this.settleAcks(batch, answer?.results);
        attempt = -1; // a success: the next batch gets its own tries
      } catch (err) {
        if (isResultRefused(err)) {
          await this.ackAlone(batch);
          attempt = -1;
          continue;
        }
        this.acks.unshift(...batch);
        this.emitError(err);
        if (!this.closing) {
          // Not closing: the next fetch or a later flush sends them again.
          this.ackTimer ??= setTimeout(() => {
            this.ackTimer = null;
            this.track(this.flushAcks());
          }, backoffMs(this.backoff, 3));
          return;
        }
        if (attempt + 1 < tries) await delay(backoffMs(this.backoff, attempt));
      }
    }
  }

  // Acks one at a time those of a request refused for a result over 64 KiB (as the server
  // measured it, which may differ from JSON.stringify by a few bytes a number): the job whose
  // result it was fails with an error saying so, the others are acked with theirs.
  async ackAlone(acks) {
    for (const a of acks) {
      const body = { leases: [a.lease] };
      if (a.result !== undefined && a.result !== null) body.results = [a.result];
      try {
        const answer = await this.transport.json('POST', `${this.path}/ack`, body);
        this.settleAcks([a], answer?.results);
      } catch (err) {
        if (isResultRefused(err)) {
          const unkept = resultTooLarge();
          this.emit('failed', a.job, unkept);
          await this.nack(a.job, unkept);
        } else {
          // The lease runs out and the job comes back by itself.
          this.emitError(err);
        }
      }
    }
  }

  // Reads the per-lease outcomes of an ack (on a fetch or alone): a lease lost means the job
  // ran out of time and was (or will be) delivered again, so this run did not count.
  settleAcks(sent, results) {
    if (!sent.length || !Array.isArray(results)) return;
    const byLease = new Map(results.map((r) => [r.lease, r]));
    for (const { lease, job } of sent) {
      const r = byLease.get(lease);
      if (!r || r.ok) continue;
      if (r.code === 'lease_lost') this.emit('stalled', job);
      else this.emitError(new AnteroomError(200, r.code ?? 'ack_refused', `job ${job.id}: the ack was refused (${r.code})`));
    }
  }

  async nack(job, err) {
    const error = errorText(err);
    for (let attempt = 0; attempt < FINAL_TRIES; attempt++) {
      try {
        const answer = await this.transport.json('POST', `${this.path}/nack`, { leases: [job.lease], error });
        const r = answer?.results?.[0];
        if (r && !r.ok && r.code === 'lease_lost') this.emit('stalled', job);
        return;
      } catch (e) {
        this.emitError(e);
        if (!isRetryable(e)) return;
        await delay(backoffMs(this.backoff, attempt));
      }
    }
    // Given up: the lease runs out and the job comes back by itself.
  }

  async snooze(job, retryAfterMs) {
    for (let attempt = 0; attempt < FINAL_TRIES; attempt++) {
      try {
        const r = (await this.queue.snooze([job.lease], retryAfterMs))?.[0];
        if (r && !r.ok && r.code === 'lease_lost') this.emit('stalled', job);
        return;
      } catch (e) {
        this.emitError(e);
        if (!isRetryable(e)) return;
        await delay(backoffMs(this.backoff, attempt));
      }
    }
    // Given up: the lease runs out and the job comes back by itself (as a failed attempt).
  }

  // Hands jobs back at once (nack, no delay), so another worker need not wait for the lease.
  async release(jobs, error) {
    if (!jobs.length) return;
    for (let attempt = 0; attempt < FINAL_TRIES; attempt++) {
      try {
        await this.transport.json('POST', `${this.path}/nack`, {
          leases: jobs.map((j) => j.lease),
          delay_ms: 0,
          error,
        });
        return;
      } catch (e) {
        this.emitError(e);
        if (!isRetryable(e)) return;
        await delay(backoffMs(this.backoff, attempt));
      }
    }
  }

  // Extends every running lease in one request. A lease lost (it ran out before the extension
  // came, e.g. the process was stopped for a while) aborts the job's signal: its handler's
  // work will not count, and another worker may be running it already.
  async extend() {
    if (this.extending) return;
    const ctxs = [...this.running.values()].filter((c) => !c.stalled && !c.released);
    if (!ctxs.length) return;
    this.extending = true;
    const sentAt = Date.now();
    try {
      const answer = await this.transport.json('POST', `${this.path}/extend`, {
        leases: ctxs.map((c) => c.job.lease),
        lease_ms: this.leaseMs,
      });
      const byLease = new Map((answer?.results ?? []).map((r) => [r.lease, r]));
      for (const ctx of ctxs) {
        const r = byLease.get(ctx.job.lease);
        if (!r) continue;
        if (r.ok) {
          ctx.job.leaseExpiresMs = sentAt + this.leaseMs;
        } else if (!ctx.stalled && !ctx.released) {
          ctx.stalled = true;
          ctx.abort(new Error(`the lease of job ${ctx.job.id} was lost (${r.code})`));
          this.emit('stalled', ctx.job);
        }
      }
    } catch (err) {
      this.emitError(err); // the next tick tries again, well before the lease ends
    } finally {
      this.extending = false;
    }
  }

  async heartbeat() {
    try {
      await this.transport.json('POST', `${this.path}/workers/${seg(this.id)}/heartbeat`, {
        ttl_ms: this.heartbeatMs * 3,
      });
    } catch (err) {
      this.emitError(err);
    }
  }

  // Stops fetching, lets running handlers finish for up to shutdownGraceMs, then hands back what
  // is left (nack, delay 0) and aborts those jobs' signals. Resolves when every ack and release
  // is settled; emits `closed`. Idempotent: every call returns the same promise.
  close() {
    this.closePromise ??= this.shutdown();
    return this.closePromise;
  }

  async shutdown() {
    this.closing = true;
    // The parked long poll is hung up: the server takes it out of the line at once.
    this.fetchController?.abort();
    this.wakeSleep?.();
    for (const wake of this.wakers.splice(0)) wake();
    await this.loopPromise;
    clearTimeout(this.ackTimer);
    this.ackTimer = null;
    this.track(this.flushAcks(FINAL_TRIES));

    if (this.running.size) {
      let timer;
      await Promise.race([
        Promise.allSettled([...this.running.values()].map((c) => c.done)),
        new Promise((resolve) => {
          this.endGrace = resolve;
          timer = setTimeout(resolve, this.shutdownGraceMs);
        }),
      ]);
      clearTimeout(timer);
    }
    const left = [...this.running.values()].filter((c) => !c.stalled && !c.released);
    for (const ctx of left) {
      ctx.released = true;
      ctx.abort(new Error(CLOSED_MESSAGE));
    }
    this.track(this.release(left.map((c) => c.job), CLOSED_MESSAGE));
    // Acks of handlers that finished during the grace were sent as they came; wait for all.
    while (this.pending.size) await Promise.allSettled([...this.pending]);
    if (this.acks.length) await this.flushAcks(FINAL_TRIES);

    clearInterval(this.heartbeatTimer);
    clearInterval(this.extendTimer);
    process.removeListener('SIGINT', this.onSignal);
    process.removeListener('SIGTERM', this.onSignal);
    if (this.ownsClient) this.transport.close();
    this.emit('closed');
  }

  track(promise) {
    if (!promise) return;
    this.pending.add(promise);
    promise.finally(() => this.pending.delete(promise));
  }

  sleep(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeSleep = done;
    });
  }

  // An `error` event with nobody listening would throw and end the process over a passing 503;
  // the loop keeps going, so it becomes a warning instead.
  emitError(err) {
    if (this.listenerCount('error') > 0) this.emit('error', err);
    else process.emitWarning(`anteroom worker ${this.id}: ${err?.message ?? err}`);
  }
}

// The size of a handler's result as the server keeps it (JSON, UTF-8), 0 for none (undefined or
// null). Throws, with a message for the job's error, when it cannot be kept.
function resultSize(value) {
  if (value === undefined || value === null) return 0;
  let text;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw unkeptResult(`it is not JSON (${err.message}); resolve with a JSON value, or undefined for no result`);
  }
  if (text === undefined) {
    throw unkeptResult(`a ${typeof value} is not JSON; resolve with a JSON value, or undefined for no result`);
  }
  const size = Buffer.byteLength(text);
  if (size > MAX_RESULT_BYTES) throw resultTooLarge(size);
  return size;
}

function resultTooLarge(size) {
  const measured = size === undefined ? '' : ` (${size} bytes as JSON)`;
  return unkeptResult(`it is over 64 KiB${measured}, the most the server keeps; store it elsewhere and resolve with a reference to it`);
}

// The error of a job whose result cannot be kept. Its stack would be the worker's own, of no use
// in the job's error (what the nack sends): the message alone is.
function unkeptResult(why) {
  const err = new Error(`the handler's result cannot be kept: ${why}`);
  err.stack = `Error: ${err.message}`;
  return err;
}

// Removes from `acks` those one request carries: up to 1000, and results of at most
// RESULTS_PER_REQUEST_BYTES together (one ack at least).
function takeAcks(acks) {
  let total = 0;
  let n = 0;
  while (n < acks.length && n < ACKS_PER_REQUEST) {
    if (n > 0 && total + acks[n].size > RESULTS_PER_REQUEST_BYTES) break;
    total += acks[n].size;
    n++;
  }
  return acks.splice(0, n);
}

// The results of a request carrying `acks`: null when no job has one, so a worker whose
// handlers resolve with nothing sends what older servers take.
function ackResults(acks) {
  if (acks.every((a) => a.result === undefined || a.result === null)) return null;
  return acks.map((a) => (a.result === undefined ? null : a.result));
}

function isResultRefused(err) {
  return err instanceof AnteroomError && err.status === 413;
}

function errorText(err) {
  const text = String(err?.stack || err?.message || err);
  return text.length > MAX_ERROR_CHARS ? `${text.slice(0, MAX_ERROR_CHARS)} [cut by the worker]` : text;
}

// Full jitter over an exponential ceiling: workers that failed together do not retry together.
function backoffMs({ firstMs, maxMs }, failures) {
  const ceiling = Math.min(maxMs, firstMs * 2 ** Math.min(failures, 20));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function intIn(name, value, min, max) {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`anteroom: ${name} must be an integer from ${min} to ${max}, not ${value}`);
  }
  return value;
}
