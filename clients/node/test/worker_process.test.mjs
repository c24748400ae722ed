// Worker processes (testing/worker.mjs) killed and stopped: nothing lost, nothing doubled.
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

function worker(config) {
  const w = spawnWorker({ url: server.url, ...config });
  children.push(w);
  return w;
}

test('a worker killed with SIGKILL mid-job loses nothing: its jobs go to another worker and are acked once', { timeout: 30_000 }, async () => {
  const queue = new Queue('crash', { url: server.url });
  const ids = await queue.pushBulk([1, 2, 3].map((n) => ({ payload: { n } })));
  // Short lease and heartbeat ttl (3 x 300 ms), so the dead worker's jobs return quickly.
  const a = worker({ queue: 'crash', jobMs: 60_000, options: { concurrency: 2, leaseMs: 1500, heartbeatMs: 300, waitMs: 500 } });
  await a.waitFor((l) => l.event === 'start' && l.id === ids[0], 10_000, 'job 1 started');
  await a.waitFor((l) => l.event === 'start' && l.id === ids[1], 10_000, 'job 2 started');
  await a.kill('SIGKILL');
  const killedAt = Date.now();
  assert.equal((await queue.stats()).inflight, 2, 'the dead worker still holds its two jobs');

  const runs = [];
  const b = new Worker(queue, async (job) => {
    runs.push({ id: job.id, attempt: job.attempt, at: Date.now() });
  }, { concurrency: 3, waitMs: 500 });
  try {
    await eventually(async () => (await queue.stats()).acked === 3, 15_000, 'three acks');
  } finally {
    await within(b.close(), 5_000, 'close');
  }
  runs.sort((x, y) => Number(x.id) - Number(y.id));
  assert.deepEqual(runs.map((r) => [r.id, r.attempt]), [[ids[0], 2], [ids[1], 2], [ids[2], 1]],
    'each job ran once here; the killed worker\'s two as their second attempt');
  for (const r of runs.slice(0, 2)) {
    assert.ok(r.at - killedAt < 5_000, `redelivered ${r.at - killedAt} ms after the kill (heartbeat ttl 900 ms, lease 1.5 s)`);
  }
  const stats = await queue.stats();
  assert.equal(stats.pushed, 3);
  assert.equal(stats.acked, stats.pushed, 'pushed = acked');
  assert.equal(stats.inflight + stats.ready + stats.delayed + stats.dead, 0);
});

test('SIGINT drains within the grace: running jobs finish, nothing new is taken, exit 0', { timeout: 30_000 }, async () => {
  const queue = new Queue('drain', { url: server.url });
  await queue.pushBulk([1, 2, 3, 4, 5].map((n) => ({ payload: { n } })));
  const w = worker({ queue: 'drain', jobMs: 1000, options: { concurrency: 2, handleSignals: true, shutdownGraceMs: 5000, leaseMs: 30_000, waitMs: 30_000 } });
  await w.waitFor((l) => l.event === 'start' && l.id === '1', 10_000, 'job 1 started');
  await w.waitFor((l) => l.event === 'start' && l.id === '2', 10_000, 'job 2 started');
  const signalledAt = Date.now();
  process.kill(w.pid, 'SIGINT');
  const exit = await within(w.exited, 8_000, 'the worker to exit');
  assert.deepEqual([exit.code, exit.signal], [0, null], w.stderr());
  assert.ok(exit.at - signalledAt < 2_500, `exited ${exit.at - signalledAt} ms after SIGINT (jobs of 1 s, grace 5 s)`);
  const events = w.lines.map((l) => `${l.event}${l.id ? ` ${l.id}` : ''}`);
  assert.deepEqual(events.filter((e) => e.startsWith('start')), ['start 1', 'start 2'], 'nothing new taken');
  assert.ok(events.includes('end 1') && events.includes('end 2'), events.join(', '));
  assert.equal(events.at(-1), 'closed');
  const stats = await queue.stats();
  assert.deepEqual([stats.acked, stats.ready, stats.inflight], [2, 3, 0]);
});

test('SIGINT with jobs longer than the grace: they are back in the queue at once, not after the lease', { timeout: 30_000 }, async () => {
  const queue = new Queue('release', { url: server.url });
  const ids = await queue.pushBulk([1, 2].map((n) => ({ payload: { n } })));
  // Three slots for two jobs: the third parks a 30 s long poll, which close() must hang up.
  const w = worker({ queue: 'release', jobMs: 10_000, options: { concurrency: 3, handleSignals: true, shutdownGraceMs: 500, leaseMs: 30_000, waitMs: 30_000 } });
  await w.waitFor((l) => l.event === 'start' && l.id === ids[0], 10_000, 'job 1 started');
  await w.waitFor((l) => l.event === 'start' && l.id === ids[1], 10_000, 'job 2 started');
  const signalledAt = Date.now();
  process.kill(w.pid, 'SIGINT');
  const exit = await within(w.exited, 8_000, 'the worker to exit');
  assert.deepEqual([exit.code, exit.signal], [0, null], w.stderr());
  assert.ok(exit.at - signalledAt < 2_500, `exited ${exit.at - signalledAt} ms after SIGINT (grace 0.5 s)`);
  assert.deepEqual(w.lines.filter((l) => l.event === 'aborted').map((l) => l.id).sort(), [...ids].sort(),
    'the handlers saw job.signal abort');
  const stats = await queue.stats();
  assert.deepEqual([stats.ready, stats.inflight, stats.acked, stats.expired], [2, 0, 0, 0],
    'released with nack (delay 0), well before the 30 s lease');
  const res = await fetch(`${server.url}/v1/queues/release/fetch`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ worker: 'checker', max: 2 }),
  });
  const { jobs } = await res.json();
  assert.deepEqual(jobs.map((j) => j.attempt), [2, 2]);
});
