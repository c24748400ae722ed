// A worker with a stable id restarted after a crash takes back what it held at once (its first
// fetch sends "reclaim": true), instead of waiting for the old leases to run out.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Queue, Worker } from '../index.js';
import { eventually, spawnWorker, startServer, within } from '../testing/helpers.mjs';

let server;
const children = [];
before(async () => { server = await startServer(); });
after(async () => {
  for (const c of children) await c.kill('SIGKILL');
  await server?.stop();
});

async function post(path, body) {
  const res = await fetch(server.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

// Whether this server knows `reclaim`: null if it does, else why not. A server from before it
// refuses the field (400 invalid_argument); one that ignores unknown fields answers without
// `reclaimed`.
async function reclaimUnsupported() {
  await post('/v1/queues/reclaim-probe/jobs', { payload: 'probe' });
  await post('/v1/queues/reclaim-probe/fetch', { worker: 'probe', max: 1, lease_ms: 60_000 });
  const r = await post('/v1/queues/reclaim-probe/fetch', { worker: 'probe', max: 1, reclaim: true });
  if (r.status === 400) {
    return `the server answers 400 ${r.json?.error?.code} to "reclaim" (${r.json?.error?.message}): this binary predates it`;
  }
  if (r.status !== 200) return `the probe fetch answered ${r.status}: ${JSON.stringify(r.json)}`;
  if (!('reclaimed' in r.json)) return 'the server ignored "reclaim" (its answer has no "reclaimed"): this binary predates it';
  return null;
}

test('a worker restarted with its stable id reclaims its jobs at once, as new attempts', { timeout: 30_000 }, async (t) => {
  const why = await reclaimUnsupported();
  if (why) return t.skip(why);

  const queue = new Queue('reclaim', { url: server.url });
  const ids = await queue.pushBulk([1, 2, 3].map((n) => ({ payload: { n } })));
  // A 60 s lease and no heartbeat: only reclaim can bring the jobs back within the test.
  const a = spawnWorker({ url: server.url, queue: 'reclaim', jobMs: 60_000,
    options: { id: 'stable-worker', concurrency: 2, leaseMs: 60_000, heartbeatMs: 0, waitMs: 500 } });
  children.push(a);
  await a.waitFor((l) => l.event === 'start' && l.id === ids[0], 10_000, 'job 1 started');
  await a.waitFor((l) => l.event === 'start' && l.id === ids[1], 10_000, 'job 2 started');
  await a.kill('SIGKILL');
  assert.equal((await queue.inflight({ worker: 'stable-worker' })).length, 2);

  const runs = [];
  const reclaimedEvents = [];
  const b = new Worker(queue, async (job) => { runs.push([job.id, job.attempt]); },
    { id: 'stable-worker', concurrency: 1, leaseMs: 60_000, waitMs: 500 });
  b.on('reclaimed', (n) => reclaimedEvents.push(n));
  b.on('error', (e) => assert.fail(`worker error: ${e.message}`));
  try {
    await eventually(async () => (await queue.stats()).acked === 3, 10_000, 'three acks, long before the 60 s leases');
  } finally {
    await within(b.close(), 5_000, 'close');
  }
  // One slot: the first fetch is handed one of the two old jobs; the other went back to the
  // queue and comes next, both as attempt 2; then the job nobody had taken.
  assert.equal(b.reclaimed, 1);
  assert.deepEqual(reclaimedEvents, [1]);
  assert.equal(runs[0][1], 2, 'the first job run is a reclaimed one');
  assert.deepEqual(runs.sort((x, y) => Number(x[0]) - Number(y[0])), [[ids[0], 2], [ids[1], 2], [ids[2], 1]]);
  // Each taken-back delivery ended without an ack: counted as expired, as a release would be.
  const stats = await queue.stats();
  assert.deepEqual([stats.pushed, stats.acked, stats.inflight, stats.expired], [3, 3, 0, 2]);
});
