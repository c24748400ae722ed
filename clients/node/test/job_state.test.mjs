// Job state against the real server: a handler's resolved value as its job's result, read by a
// producer's waitForResult; progress and log reported from inside a handler; dead, cancelled,
// unknown and timed-out waits; results that cannot be kept; keepAcked in the settings.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AnteroomError, JobFailed, Queue, Worker } from '../index.js';
import { eventually, routeCount, sleep, startServer, within } from '../testing/helpers.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

function worker(queue, handler, options = {}) {
  const w = new Worker(queue, handler, { waitMs: 200, heartbeatMs: 0, ...options });
  w.on('error', (e) => assert.fail(`worker error: ${e.message}`));
  return w;
}

test('a handler\'s resolved value is the result a producer waits for', { timeout: 20_000 }, async () => {
  const queue = new Queue('results', { url: server.url });
  const summed = await queue.push({ add: [1, 2, 3] });
  const silent = await queue.push({ add: null });
  const w = worker(queue, async (job) => {
    if (job.payload.add === null) return undefined; // no result
    return { sum: job.payload.add.reduce((a, b) => a + b, 0), text: 'héllo' };
  }, { concurrency: 2 });
  try {
    assert.deepEqual(await queue.waitForResult(summed, { timeoutMs: 10_000 }), { sum: 6, text: 'héllo' });
    assert.equal(await queue.waitForResult(silent, { timeoutMs: 10_000 }), undefined);
  } finally {
    await within(w.close(), 5_000, 'close');
  }
  const job = await queue.getJob(summed);
  assert.equal(job.state, 'acked');
  assert.equal(job.attempts, 1);
  assert.equal(typeof job.finished_at_ms, 'number');
  assert.equal('result' in (await queue.getJob(silent)), false);
});

test('results ride on the fetch, and go alone when the next fetch is parked', { timeout: 20_000 }, async () => {
  const queue = new Queue('ride', { url: server.url });
  const ids = await queue.pushBulk([0, 1, 2, 3].map((i) => ({ payload: i })));
  let acks = await routeCount(server.url, '/v1/queues/{q}/ack');
  // One slot: each job's ack and result ride on the fetch that frees the slot.
  let w = worker(queue, (job) => job.payload * 10, { waitMs: 5_000 });
  try {
    const results = [];
    for (const id of ids) results.push(await queue.waitForResult(id, { timeoutMs: 10_000 }));
    assert.deepEqual(results, [0, 10, 20, 30]);
    assert.equal(await routeCount(server.url, '/v1/queues/{q}/ack'), acks);
  } finally {
    await within(w.close(), 5_000, 'close');
  }
  // (The close may send the last ack again: it rode on the fetch the close hung up.)
  acks = await routeCount(server.url, '/v1/queues/{q}/ack');
  // Two slots and one job: the next fetch is parked when the job ends, so its ack goes alone.
  w = worker(queue, (job) => ({ alone: job.payload }), { concurrency: 2, waitMs: 5_000 });
  try {
    const last = await queue.push(4);
    assert.deepEqual(await queue.waitForResult(last, { timeoutMs: 10_000 }), { alone: 4 });
    await eventually(async () => (await routeCount(server.url, '/v1/queues/{q}/ack')) === acks + 1, 5_000, 'the ack alone');
  } finally {
    await within(w.close(), 5_000, 'close');
  }
});

test('progress and log from a handler show in getJob', { timeout: 20_000 }, async () => {
  const queue = new Queue('reports', { url: server.url });
  const id = await queue.push({ rows: 150 });
  let reported;
  const reportedP = new Promise((resolve) => { reported = resolve; });
  let goOn;
  const goOnP = new Promise((resolve) => { goOn = resolve; });
  const answers = [];
  const w = worker(queue, async (job) => {
    answers.push(await job.progress({ done: 40, of: 100 }));
    answers.push(await job.log('connected', 42));
    // More lines than one request takes: sent in several, the last 100 kept.
    answers.push(await job.log(...Array.from({ length: 150 }, (_, i) => `row ${i}`)));
    reported();
    await goOnP;
    return 'done';
  });
  try {
    await within(reportedP, 10_000, 'the reports');
    const running = await queue.getJob(id);
    assert.equal(running.state, 'inflight');
    assert.equal(typeof running.lease_expires_ms, 'number');
    assert.deepEqual(running.progress, { done: 40, of: 100 });
    assert.deepEqual(running.log.map((e) => e.line), Array.from({ length: 100 }, (_, i) => `row ${i + 50}`));
    assert.equal(running.log_dropped, 52);
    goOn();
    assert.equal(await queue.waitForResult(id, { timeoutMs: 10_000 }), 'done');
  } finally {
    goOn();
    await within(w.close(), 5_000, 'close');
  }
  assert.deepEqual(answers, [true, true, true]);
});

test('reports and acks by hand: a lease no longer current answers lease_lost', { timeout: 10_000 }, async () => {
  const queue = new Queue('by-hand', { url: server.url });
  const [a, b] = await queue.pushBulk([{ payload: 'a' }, { payload: 'b' }]);
  const body = { worker: 'w', max: 2 };
  const { jobs } = await queue.transport.json('POST', `${queue.path}/fetch`, body);
  const [first, second] = jobs;
  assert.deepEqual(await queue.ack([first.lease], [{ by: 'hand' }]), [{ lease: first.lease, ok: true }]);
  assert.deepEqual((await queue.getJob(a)).result, { by: 'hand' });
  assert.deepEqual(await queue.progress(first.lease, 100), { ok: false, code: 'lease_lost' });
  assert.deepEqual(await queue.log(first.lease, 'late'), { ok: false, code: 'lease_lost' });
  assert.deepEqual(await queue.log('forged', 'x'), { ok: false, code: 'invalid_lease' });
  await assert.rejects(queue.log(second.lease), TypeError);
  await assert.rejects(queue.ack([second.lease], [1, 2]), RangeError);
  await assert.rejects(queue.ack([second.lease], ['x'.repeat(65 * 1024)]),
    { name: 'AnteroomError', status: 413, code: 'payload_too_large' });
  assert.equal((await queue.getJob(b)).state, 'inflight', 'a refused ack acks nothing');
  assert.deepEqual(await queue.ack([second.lease], [undefined]), [{ lease: second.lease, ok: true }]);
  assert.equal('result' in (await queue.getJob(b)), false);
});

test('waitForResult rejects for a job that dies, with its last error', { timeout: 20_000 }, async () => {
  const queue = new Queue('dies', { url: server.url });
  const id = await queue.push({ x: 1 }, { maxAttempts: 1 });
  const w = new Worker(queue, async () => { throw new Error('the upstream said no'); }, { waitMs: 200, heartbeatMs: 0 });
  w.on('error', () => {});
  let err;
  try {
    err = await queue.waitForResult(id, { timeoutMs: 10_000 }).then(() => null, (e) => e);
  } finally {
    await within(w.close(), 5_000, 'close');
  }
  assert.ok(err instanceof JobFailed, String(err));
  assert.equal(err.name, 'JobFailed');
  assert.equal(err.state, 'dead');
  assert.equal(err.jobId, id);
  assert.match(err.lastError, /the upstream said no/);
  assert.match(err.message, /dead after 1 attempt\(s\).*the upstream said no/s);
  assert.equal(err.job.attempts, 1);
});

test('waitForResult rejects for a cancelled job', async () => {
  const queue = new Queue('cancelled', { url: server.url });
  const id = await queue.push('later', { delayMs: 60_000 });
  const job = await queue.getJob(id);
  assert.equal(job.state, 'delayed');
  assert.equal(typeof job.ready_at_ms, 'number');
  await queue.cancel(id);
  await assert.rejects(queue.waitForResult(id, { timeoutMs: 5_000 }),
    (e) => e instanceof JobFailed && e.state === 'cancelled' && /cancelled/.test(e.message));
});

test('waitForResult times out', async () => {
  const queue = new Queue('nobody-works', { url: server.url });
  const id = await queue.push('waits');
  const started = Date.now();
  await assert.rejects(queue.waitForResult(id, { timeoutMs: 300, pollIntervalMs: 50 }),
    { name: 'TimeoutError', message: /still ready after 300 ms/ });
  assert.ok(Date.now() - started < 2_000);
  await assert.rejects(queue.waitForResult(id, { pollIntervalMs: 0 }), RangeError);
});

test('getJob of an unknown job rejects with 404 unknown_job', async () => {
  const queue = new Queue('unknown', { url: server.url });
  for (const id of ['999', 'not-a-number']) {
    await assert.rejects(queue.getJob(id),
      (e) => e instanceof AnteroomError && e.status === 404 && e.code === 'unknown_job');
  }
  await assert.rejects(queue.waitForResult('999', { timeoutMs: 1_000 }), { status: 404 });
});

test('keepAcked round-trips, and bounds what getJob finds', async () => {
  const queue = new Queue('keep', { url: server.url });
  assert.deepEqual((await queue.settings()).keep_acked, { count: 1000, age_ms: 86_400_000 });
  const answer = await queue.setSettings({ fairness: 'round_robin', keepAcked: { count: 5, ageMs: 60_000 } });
  assert.deepEqual(answer.keep_acked, { count: 5, age_ms: 60_000 });
  assert.equal(answer.fairness, 'round_robin');
  assert.deepEqual(await queue.settings(), answer);
  // What settings() answered can be sent back as it is.
  assert.deepEqual(await queue.setSettings(answer), answer);
  // Left out, it goes back to its default (a PUT replaces every setting).
  assert.deepEqual((await queue.setSettings({ keepAcked: { count: 0 } })).keep_acked, { count: 0, age_ms: 86_400_000 });
  const id = await queue.push(1);
  const { jobs } = await queue.transport.json('POST', `${queue.path}/fetch`, { worker: 'w' });
  await queue.ack([jobs[0].lease], ['kept?']);
  await assert.rejects(queue.getJob(id), { status: 404 }, 'count 0 keeps no finished job');
  for (const bad of [{ count: -1 }, { ageMs: 0 }, { count: 2_000_000 }, { cuont: 5 }]) {
    await assert.rejects(queue.setSettings({ keepAcked: bad }),
      { name: 'AnteroomError', status: 400, code: 'invalid_argument' }, JSON.stringify(bad));
  }
  assert.equal((await queue.settings()).keep_acked.count, 0);
});

test('a result that cannot be kept fails its job with an error saying why', { timeout: 20_000 }, async () => {
  const queue = new Queue('unkept', { url: server.url });
  const tooBig = await queue.push('big', { maxAttempts: 1 });
  const notJson = await queue.push('bigint', { maxAttempts: 1 });
  // Just under 64 KiB as JSON.stringify writes it (64,001 bytes): kept, its numbers as sent
  // (the server stores a result's text, not what its parser makes of 1.5).
  const floats = await queue.push('floats', { maxAttempts: 1 });
  const fine = await queue.push('fine');
  const results = {
    big: 'x'.repeat(64 * 1024),
    bigint: { n: 10n },
    floats: Array(16_000).fill(1.5),
    fine: 'ok',
  };
  const failed = [];
  const w = worker(queue, (job) => results[job.payload]);
  w.on('failed', (job, err) => failed.push([job.payload, err.message]));
  try {
    for (const [id, words] of [[tooBig, 'over 64 KiB (65538 bytes as JSON)'], [notJson, 'not JSON']]) {
      const err = await queue.waitForResult(id, { timeoutMs: 10_000 }).then(() => null, (e) => e);
      assert.ok(err instanceof JobFailed, String(err));
      assert.ok(err.lastError.includes(words), err.lastError);
      assert.ok(err.lastError.startsWith("Error: the handler's result cannot be kept"), err.lastError);
    }
    assert.equal(await queue.waitForResult(fine, { timeoutMs: 10_000 }), 'ok');
    assert.deepEqual(await queue.waitForResult(floats, { timeoutMs: 10_000 }), Array(16_000).fill(1.5));
  } finally {
    await within(w.close(), 5_000, 'close');
  }
  assert.deepEqual(failed.map(([payload]) => payload).sort(), ['big', 'bigint']);
});

test('a handler\'s job has progress and log beside its fields; a report after its ack answers false', async () => {
  const queue = new Queue('methods', { url: server.url });
  await queue.push(1);
  let seen;
  const w = worker(queue, (job) => { seen = job; });
  try {
    for (let i = 0; i < 200 && !seen; i++) await sleep(25);
  } finally {
    await within(w.close(), 5_000, 'close');
  }
  assert.equal(typeof seen.progress, 'function');
  assert.equal(typeof seen.log, 'function');
  assert.deepEqual(Object.keys(seen).filter((k) => k !== 'signal').sort(),
    ['attempt', 'group', 'id', 'lease', 'leaseExpiresMs', 'payload', 'priority']);
  assert.equal(await seen.progress(1), false, 'the job was acked: its lease is no longer current');
});
