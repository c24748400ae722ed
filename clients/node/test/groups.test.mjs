// Groups, snoozes and queue settings against the real server: a job's group on its way in and
// out, a handler's RateLimited as a snooze (no attempt used up), per-group limits holding a
// group back, bad settings refused.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AnteroomError, Queue, RateLimited, Worker } from '../index.js';
import { eventually, sleep, startServer, within } from '../testing/helpers.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

// A raw fetch, as a hand-written loop would make it.
async function fetchJobs(queue, body) {
  const res = await fetch(`${server.url}/v1/queues/${queue.name}/fetch`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ worker: 'w', max: 10, ...body }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).jobs;
}

test('a job pushed with a group is delivered with it', { timeout: 20_000 }, async () => {
  const queue = new Queue('grouped', { url: server.url });
  const a = await queue.push({ n: 1 }, { group: 'acme' });
  const [b, c] = await queue.pushBulk([{ payload: { n: 2 }, group: 'globex' }, { payload: { n: 3 } }]);
  const jobs = [];
  const worker = new Worker(queue, async (job) => { jobs.push([job.id, job.group]); }, { waitMs: 200, heartbeatMs: 0 });
  worker.on('error', (e) => assert.fail(`worker error: ${e.message}`));
  try {
    await eventually(async () => (await queue.stats()).acked === 3, 10_000, '3 acks');
  } finally {
    await within(worker.close(), 5_000, 'close');
  }
  assert.deepEqual(jobs, [[a, 'acme'], [b, 'globex'], [c, undefined]]);
});

test('a handler throwing RateLimited gets its job again after the delay, as the same attempt', { timeout: 20_000 }, async () => {
  const queue = new Queue('snoozed', { url: server.url });
  const id = await queue.push({ x: 1 }, { group: 'acme', maxAttempts: 1 });
  const runs = [];
  const snoozed = [];
  const failed = [];
  const worker = new Worker(queue, async (job) => {
    runs.push({ attempt: job.attempt, group: job.group, at: Date.now() });
    if (runs.length === 1) throw new RateLimited(400);
  }, { waitMs: 200, heartbeatMs: 0 });
  worker.on('snoozed', (job, ms) => snoozed.push([job.id, ms]));
  worker.on('failed', (job) => failed.push(job.id));
  worker.on('error', (e) => assert.fail(`worker error: ${e.message}`));
  try {
    await eventually(async () => (await queue.stats()).acked === 1, 10_000, "the second run's ack");
  } finally {
    await within(worker.close(), 5_000, 'close');
  }
  // maxAttempts 1: a nack would have made it a dead letter; the snooze used up nothing.
  assert.deepEqual(runs.map((r) => [r.attempt, r.group]), [[1, 'acme'], [1, 'acme']]);
  assert.ok(runs[1].at - runs[0].at >= 350, `back after ${runs[1].at - runs[0].at} ms`);
  assert.deepEqual(snoozed, [[id, 400]]);
  assert.deepEqual(failed, []);
  const stats = await queue.stats();
  assert.deepEqual([stats.nacked, stats.dead, stats.expired, stats.acked], [0, 0, 0, 1]);
});

test('snooze() holds the group and keeps the attempt', { timeout: 20_000 }, async () => {
  const queue = new Queue('snooze-call', { url: server.url });
  const first = await queue.push(1, { group: 'acme' });
  const second = await queue.push(2, { group: 'acme' });
  const other = await queue.push(3, { group: 'globex' });
  const [job] = await fetchJobs(queue, { max: 1 });
  assert.equal(job.id, first);
  assert.deepEqual(await queue.snooze([job.lease], 300), [{ lease: job.lease, ok: true }]);
  // acme waits for the snooze; globex does not.
  assert.deepEqual((await fetchJobs(queue, {})).map((j) => j.id), [other]);
  const again = [];
  await eventually(async () => {
    again.push(...await fetchJobs(queue, { wait_ms: 200 }));
    return again.length === 2;
  }, 5_000, "acme's jobs after the snooze");
  assert.deepEqual(again.map((j) => [j.id, j.attempt]).sort(), [[first, 1], [second, 1]]);
  assert.equal((await queue.stats()).nacked, 0);
  await assert.rejects(queue.snooze([again[0].lease], 3_600_001),
    { name: 'AnteroomError', status: 400, code: 'invalid_argument' });
});

// What a queue nobody set anything for keeps of its finished jobs.
const DEFAULT_KEEP = { count: 1000, age_ms: 86_400_000 };

test('a group concurrency of 1 holds its second job back until the first is acked', { timeout: 20_000 }, async () => {
  const queue = new Queue('limited', { url: server.url });
  assert.deepEqual(await queue.settings(), { queue: 'limited', fairness: 'fifo', limits: [], keep_acked: DEFAULT_KEEP });
  const answer = await queue.setSettings({
    fairness: 'round_robin',
    limits: [{ key: 'group', concurrency: 1 }, { key: null, rate: { limit: 1000, periodMs: 1000 } }],
  });
  assert.deepEqual(answer, {
    queue: 'limited',
    fairness: 'round_robin',
    limits: [{ key: 'group', concurrency: 1 }, { key: null, rate: { limit: 1000, period_ms: 1000, burst: 1000 } }],
    keep_acked: DEFAULT_KEEP,
  });
  assert.deepEqual(await queue.settings(), answer);
  // What settings() answered can be sent back as it is.
  assert.deepEqual(await queue.setSettings(answer), answer);

  await queue.pushBulk([{ payload: 'a1', group: 'a' }, { payload: 'a2', group: 'a' }, { payload: 'b1', group: 'b' }]);
  const started = [];
  const finish = new Map(); // payload -> resolve
  const worker = new Worker(queue, (job) => new Promise((resolve) => {
    started.push(job.payload);
    finish.set(job.payload, resolve);
  }), { concurrency: 3, waitMs: 200, heartbeatMs: 0 });
  worker.on('error', (e) => assert.fail(`worker error: ${e.message}`));
  try {
    await eventually(() => started.length === 2, 5_000, 'a1 and b1 started');
    assert.deepEqual([...started].sort(), ['a1', 'b1']);
    await sleep(500); // a2 would start now if the limit did not hold it
    assert.deepEqual([...started].sort(), ['a1', 'b1'], "a's second job is held back");
    assert.equal((await queue.stats()).ready, 1);
    finish.get('a1')();
    await eventually(() => started.includes('a2'), 5_000, 'a2 started after a1 was acked');
    finish.get('b1')();
    finish.get('a2')();
    await eventually(async () => (await queue.stats()).acked === 3, 5_000, '3 acks');
  } finally {
    for (const resolve of finish.values()) resolve();
    await within(worker.close(), 5_000, 'close');
  }
  // A PUT replaces every setting: nothing sent is back to the defaults.
  assert.deepEqual(await queue.setSettings(), { queue: 'limited', fairness: 'fifo', limits: [], keep_acked: DEFAULT_KEEP });
});

test('bad settings are refused with 400 invalid_argument', async () => {
  const queue = new Queue('refused', { url: server.url });
  for (const settings of [
    { fairness: 'lifo' },
    { limits: [{ key: 'group' }] }, // neither a rate nor a concurrency
    { limits: [{ key: 'tenant', concurrency: 1 }] },
    { limits: [{ key: 'group', concurency: 1 }] }, // a misspelling reaches the server
    { limits: [{ key: null, rate: { limit: 0, periodMs: 1000 } }] },
  ]) {
    await assert.rejects(queue.setSettings(settings), (err) => {
      assert.ok(err instanceof AnteroomError, `${JSON.stringify(settings)}: ${err}`);
      assert.deepEqual([err.status, err.code], [400, 'invalid_argument'], JSON.stringify(settings));
      return true;
    });
  }
  assert.deepEqual((await queue.settings()).limits, []);
});

test('RateLimited checks its delay', () => {
  assert.equal(new RateLimited(1.2).retryAfterMs, 2);
  assert.equal(new RateLimited(0).retryAfterMs, 0);
  assert.equal(new RateLimited(5).name, 'RateLimited');
  for (const bad of [-1, 3_600_001, Number.NaN, undefined]) {
    assert.throws(() => new RateLimited(bad), RangeError);
  }
});
