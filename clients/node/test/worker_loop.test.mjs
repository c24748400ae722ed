// The worker loop in process against the real server: concurrency held strictly, leases kept
// by extension, acks riding on fetches.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Queue, Worker } from '../index.js';
import { eventually, routeCount, sleep, startServer, within } from '../testing/helpers.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

test('concurrency is never exceeded: 200 jobs, concurrency 7, at most 7 handlers at once', { timeout: 30_000 }, async () => {
  const queue = new Queue('concurrency', { url: server.url });
  await queue.pushBulk(Array.from({ length: 200 }, (_, i) => ({ payload: { i } })));
  let running = 0;
  let maxSeen = 0;
  const seen = new Map();
  const worker = new Worker(queue, async (job) => {
    running++;
    maxSeen = Math.max(maxSeen, running);
    seen.set(job.id, (seen.get(job.id) ?? 0) + 1);
    // Uneven durations, so slots free at different times and fetches ask for 1..7 jobs.
    await sleep(1 + (job.payload.i * 7) % 13);
    running--;
  }, { concurrency: 7, waitMs: 1000 });
  worker.on('error', (e) => assert.fail(`worker error: ${e.message}`));
  try {
    await eventually(async () => (await queue.stats()).acked === 200, 20_000, '200 acks');
  } finally {
    await within(worker.close(), 5_000, 'close');
  }
  assert.equal(maxSeen, 7, 'the worker should fill its 7 slots, and never more');
  assert.equal(seen.size, 200);
  assert.ok([...seen.values()].every((n) => n === 1), 'each job ran once');
  const stats = await queue.stats();
  assert.equal(stats.pushed, 200);
  assert.equal(stats.acked, 200);
  assert.equal(stats.inflight, 0);
});

test('a handler that outlives its lease keeps it by extension', { timeout: 20_000 }, async () => {
  const queue = new Queue('extension', { url: server.url });
  await queue.push({ slow: true });
  const runs = [];
  let stalled = 0;
  const worker = new Worker(queue, async (job) => {
    runs.push(job.attempt);
    await sleep(3500); // more than two leases
    assert.equal(job.signal.aborted, false, 'the lease was never lost');
    // A lease long enough that a loaded machine's scheduling stalls do not outlast it.
  }, { leaseMs: 1500, heartbeatMs: 0, waitMs: 200, concurrency: 2 });
  worker.on('stalled', () => stalled++);
  worker.on('error', (e) => assert.fail(`worker error: ${e.message}`));
  try {
    await eventually(async () => (await queue.stats()).acked === 1, 10_000, 'the ack');
    await sleep(300); // a redelivery, if the lease had run out, would show now
  } finally {
    await within(worker.close(), 5_000, 'close');
  }
  assert.deepEqual(runs, [1], 'delivered once, as attempt 1');
  assert.equal(stalled, 0);
  const stats = await queue.stats();
  assert.equal(stats.expired, 0, 'no lease ran out');
  assert.equal(stats.acked, 1);
  assert.equal(stats.pushed, 1);
});

test('the ack rides on the next fetch: N jobs cost about N fetches and no separate acks', { timeout: 20_000 }, async () => {
  const own = await startServer(); // a fresh server: /metrics counts this test's requests only
  try {
    const n = 40;
    const queue = new Queue('riding', { url: own.url });
    await queue.pushBulk(Array.from({ length: n }, (_, i) => ({ payload: i })));
    const fetchesBefore = await routeCount(own.url, '/v1/queues/{q}/fetch');
    let done = 0;
    const worker = new Worker(queue, async () => { done++; }, { concurrency: 1, waitMs: 500, heartbeatMs: 0 });
    worker.on('error', (e) => assert.fail(`worker error: ${e.message}`));
    let fetches;
    let acks;
    try {
      await eventually(async () => (await queue.stats()).acked === n, 10_000, `${n} acks`);
      // Counted before close(): closing hangs up the parked poll that carried the last ack, and
      // sends that ack again on its own (the client cannot know the server read it).
      fetches = (await routeCount(own.url, '/v1/queues/{q}/fetch')) - fetchesBefore;
      acks = await routeCount(own.url, '/v1/queues/{q}/ack');
    } finally {
      await within(worker.close(), 5_000, 'close');
    }
    assert.equal(done, n);
    // One fetch per job (the one carrying the last job's ack is still parked, and /metrics
    // counts a request when it is answered), and maybe a few parked polls that came back
    // empty while the test looked at the stats.
    assert.ok(fetches >= n && fetches <= n + 6, `fetches: ${fetches} for ${n} jobs`);
    assert.equal(acks, 0, 'every ack rode on a fetch');
  } finally {
    await own.stop();
  }
});

test('a rejected handler nacks with its error; max attempts lead to the dead letters', { timeout: 20_000 }, async () => {
  const queue = new Queue('failing', { url: server.url });
  const id = await queue.push({ bad: true }, { maxAttempts: 1 });
  const failed = [];
  const worker = new Worker(queue, async () => { throw new Error('no good'); }, { waitMs: 200 });
  worker.on('failed', (job, err) => failed.push([job.id, err.message]));
  try {
    await eventually(async () => (await queue.stats()).dead === 1, 10_000, 'a dead letter');
  } finally {
    await within(worker.close(), 5_000, 'close');
  }
  assert.deepEqual(failed, [[id, 'no good']]);
  const [dead] = await queue.dead({ limit: 10 });
  assert.equal(dead.id, id);
  assert.match(dead.error, /Error: no good\n\s+at /, 'the stack is kept');
  assert.equal(await queue.redrive([id]), 1);
  assert.equal((await queue.stats()).ready, 1);
  assert.equal(await queue.cancel(id), 1);
  await assert.rejects(queue.cancel(id), { name: 'AnteroomError', status: 404, code: 'unknown_job' });
});

test('a lease lost while the handler runs is reported as stalled and aborts job.signal', { timeout: 20_000 }, async () => {
  const queue = new Queue('lost', { url: server.url });
  const id = await queue.push('x');
  const attempts = [];
  const stalled = [];
  let abortedFirst = false;
  const worker = new Worker(queue, async (job) => {
    attempts.push(job.attempt);
    if (job.attempt > 1) return;
    // The first run waits until its lease is taken away (bounded by the test's timeout).
    await new Promise((resolve) => job.signal.addEventListener('abort', resolve, { once: true }));
    abortedFirst = true;
  }, { id: 'loses-leases', concurrency: 2, leaseMs: 600, heartbeatMs: 0, waitMs: 200 });
  worker.on('stalled', (job) => stalled.push([job.id, job.attempt]));
  await eventually(() => attempts.length === 1, 5_000, 'the first run');
  // The admin hands the worker's jobs back: its lease is void, the next extension says so.
  const res = await fetch(`${server.url}/v1/queues/lost/workers/loses-leases/release`, { method: 'POST' });
  assert.equal(res.status, 200, await res.text());
  try {
    await eventually(async () => (await queue.stats()).acked === 1, 10_000, 'the second run acked');
  } finally {
    await within(worker.close(), 5_000, 'close');
  }
  assert.ok(abortedFirst, 'job.signal aborted in the first run');
  assert.deepEqual(stalled, [[id, 1]]);
  assert.deepEqual(attempts, [1, 2]);
  const stats = await queue.stats();
  assert.deepEqual([stats.pushed, stats.acked, stats.inflight], [1, 1, 0]);
});
