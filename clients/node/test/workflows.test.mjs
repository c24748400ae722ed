// Dependencies and batches against the real server: a job waiting on two others and reading
// their results; a dead dependency failing its dependent, and 'ignore' letting it run; a batch's
// callbacks pushed once, after the seal and the last ack; unknown and sealed batches refused;
// the fan-out / fan-in workflow of the README with a Worker.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AnteroomError, JobFailed, Queue, Worker } from '../index.js';
import { startServer, within } from '../testing/helpers.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

// The raw calls of a hand-written loop: what is ready now, and a failed attempt.
async function fetched(queue, max = 10) {
  return (await queue.transport.json('POST', `${queue.path}/fetch`, { worker: 'w', max, lease_ms: 60_000 })).jobs;
}

async function nack(queue, lease, error) {
  return (await queue.transport.json('POST', `${queue.path}/nack`, { leases: [lease], error })).results[0];
}

function withoutTimes(batch) {
  const { created_at_ms: created, settled_at_ms: settled, ...rest } = batch;
  assert.equal(typeof created, 'number');
  assert.equal(settled !== undefined, batch.settled);
  return rest;
}

async function refused(promise) {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof AnteroomError, `an AnteroomError, not ${err}`);
    return [err.status, err.code];
  }
  assert.fail('not refused');
}

test('a job runs only after both its dependencies are acked, and reads their results', { timeout: 20_000 }, async () => {
  const queue = new Queue('deps', { url: server.url });
  const a = await queue.push('extract a');
  const b = await queue.push('extract b');
  const c = await queue.push('load', { dependsOn: [a, b], priority: 10 });
  const job = await queue.getJob(c);
  assert.deepEqual([job.state, job.depends_on, job.waiting_on], ['waiting_deps', [a, b], 2]);
  assert.equal((await queue.stats()).waiting_deps, 1);
  assert.deepEqual(await queue.getJobDependencies(c), [{ id: a, state: 'pending' }, { id: b, state: 'pending' }]);

  // Its priority does not matter while it waits: only the dependencies are handed out.
  const first = await fetched(queue);
  assert.deepEqual(first.map((j) => j.id), [a, b]);
  const leases = Object.fromEntries(first.map((j) => [j.id, j.lease]));
  assert.equal((await queue.ack([leases[a]], [{ rows: 120 }]))[0].ok, true);
  assert.deepEqual(await fetched(queue), []);
  assert.equal((await queue.getJob(c)).waiting_on, 1);
  assert.deepEqual(await queue.getJobDependencies(c), [
    { id: a, state: 'acked', result: { rows: 120 } }, { id: b, state: 'pending' },
  ]);

  assert.equal((await queue.ack([leases[b]], [[1, 2]]))[0].ok, true);
  assert.equal((await queue.getJob(c)).state, 'ready');
  assert.deepEqual((await fetched(queue)).map((j) => [j.id, j.payload]), [[c, 'load']]);
  assert.deepEqual(await queue.getJobDependencies(c), [
    { id: a, state: 'acked', result: { rows: 120 } }, { id: b, state: 'acked', result: [1, 2] },
  ]);
  const stats = await queue.stats();
  assert.deepEqual([stats.waiting_deps, stats.inflight, stats.acked], [0, 1, 2]);
});

test('a dead dependency fails its dependent, and onDependencyFailure ignore lets it run', { timeout: 20_000 }, async () => {
  const queue = new Queue('deps-dead', { url: server.url });
  const doomed = await queue.push('doomed', { maxAttempts: 1 });
  const fine = await queue.push('fine');
  const strict = await queue.push('strict', { dependsOn: [doomed, fine] });
  const lenient = await queue.push('lenient', { dependsOn: [doomed, fine], onDependencyFailure: 'ignore' });
  // One more a level down: the strict job's failure fails it in turn.
  const below = await queue.push('below', { dependsOn: [strict] });

  const leases = Object.fromEntries((await fetched(queue)).map((j) => [j.id, j.lease]));
  assert.deepEqual(Object.keys(leases).sort(), [doomed, fine].sort());
  assert.equal((await nack(queue, leases[doomed], 'boom')).ok, true);

  assert.equal((await queue.getJob(doomed)).state, 'dead');
  const dead = await queue.getJob(strict);
  assert.deepEqual([dead.state, dead.last_error], ['dead', `dependency ${doomed} is dead`]);
  assert.equal((await queue.getJob(below)).last_error, `dependency ${strict} is dead`);
  await assert.rejects(queue.waitForResult(strict, { timeoutMs: 5_000 }), (err) => {
    assert.ok(err instanceof JobFailed);
    assert.equal(err.lastError, `dependency ${doomed} is dead`);
    return true;
  });
  // The lenient job stopped waiting for the dead one, and still waits for the other.
  const waiting = await queue.getJob(lenient);
  assert.deepEqual([waiting.state, waiting.waiting_on], ['waiting_deps', 1]);
  assert.deepEqual(await fetched(queue), []);

  assert.equal((await queue.ack([leases[fine]], ['ok']))[0].ok, true);
  assert.deepEqual((await fetched(queue)).map((j) => j.id), [lenient]);
  assert.deepEqual(await queue.getJobDependencies(lenient), [
    { id: doomed, state: 'dead' }, { id: fine, state: 'acked', result: 'ok' },
  ]);
  assert.equal((await queue.stats()).dead, 3);
});

test('a dependency the queue does not know fails the job at once; the server judges the options', { timeout: 20_000 }, async () => {
  const queue = new Queue('deps-missing', { url: server.url });
  const known = await queue.push('known');
  // Numbers are sent as the decimal strings ids are.
  const job = await queue.push('needs both', { dependsOn: [Number(known), 99] });
  assert.deepEqual((await queue.getJob(job)).depends_on, [known, '99']);
  assert.equal((await queue.getJob(job)).last_error, 'dependency 99 is missing');
  assert.deepEqual(await queue.getJobDependencies(job), [
    { id: known, state: 'pending' }, { id: '99', state: 'missing' },
  ]);
  assert.deepEqual(await refused(queue.getJobDependencies('12345')), [404, 'unknown_job']);
  assert.deepEqual(await refused(queue.push('x', { dependsOn: [known], onDependencyFailure: 'sometimes' })),
    [400, 'invalid_argument']);
  assert.deepEqual(await refused(queue.push('x', { dependsOn: [] })), [400, 'invalid_argument']);
  assert.deepEqual(await refused(queue.push('x', { dependsOn: known })), [400, 'invalid_argument']);
});

test('a batch pushes each callback once, after the seal and the last ack', { timeout: 20_000 }, async () => {
  const queue = new Queue('batches', { url: server.url });
  const opened = await queue.createBatch({
    id: 'import-42',
    onSuccess: { payload: { notify: 'success' } },
    onComplete: { payload: { notify: 'complete' }, priority: 5, maxAttempts: 2 },
  });
  assert.deepEqual(withoutTimes(opened), {
    id: 'import-42', sealed: false, settled: false, pending: 0, acked: 0, dead: 0, cancelled: 0,
    callbacks_pushed: {},
  });
  const ids = await queue.pushBulk([0, 1, 2].map((i) => ({ payload: i, batch: 'import-42' })));
  ids.push(await queue.push(3, { batch: 'import-42' }));
  const jobs = await fetched(queue);
  assert.deepEqual(jobs.map((j) => j.id), ids);
  assert.ok((await queue.ack(jobs.slice(0, 3).map((j) => j.lease))).every((r) => r.ok));

  // All but one acked and not sealed: nothing pushed yet.
  assert.deepEqual(withoutTimes(await queue.getBatch('import-42')), {
    id: 'import-42', sealed: false, settled: false, pending: 1, acked: 3, dead: 0, cancelled: 0,
    callbacks_pushed: {},
  });
  const sealed = withoutTimes(await queue.sealBatch('import-42'));
  assert.deepEqual([sealed.sealed, sealed.settled, sealed.pending], [true, false, 1]);
  assert.equal((await queue.stats()).pushed, 4);

  // The last ack settles it: both callbacks pushed, onComplete first (its priority).
  assert.equal((await queue.ack([jobs[3].lease]))[0].ok, true);
  const { callbacks_pushed: pushed, ...settled } = withoutTimes(await queue.getBatch('import-42'));
  assert.deepEqual(settled, {
    id: 'import-42', sealed: true, settled: true, pending: 0, acked: 4, dead: 0, cancelled: 0,
  });
  assert.deepEqual(Object.keys(pushed).sort(), ['on_complete', 'on_success']);
  const callbacks = await fetched(queue);
  assert.deepEqual(callbacks.map((j) => [j.id, j.payload, j.priority]), [
    [pushed.on_complete, { notify: 'complete' }, 5],
    [pushed.on_success, { notify: 'success' }, 0],
  ]);
  assert.equal((await queue.getJob(pushed.on_complete)).max_attempts, 2);

  // Sealing again, and acking again, push nothing more.
  assert.deepEqual((await queue.sealBatch('import-42')).callbacks_pushed, pushed);
  assert.equal((await queue.ack([jobs[3].lease]))[0].ok, true);
  assert.ok((await queue.ack(callbacks.map((j) => j.lease))).every((r) => r.ok));
  assert.deepEqual(await fetched(queue), []);
  const stats = await queue.stats();
  assert.deepEqual([stats.pushed, stats.acked, stats.ready], [6, 6, 0]);
});

test('a batch with a dead job pushes onDead and onComplete, not onSuccess', { timeout: 20_000 }, async () => {
  const queue = new Queue('batches-dead', { url: server.url });
  await queue.createBatch({
    id: 'b', onSuccess: { payload: 'success' }, onComplete: { payload: 'complete' }, onDead: { payload: 'dead' },
  });
  const ok = await queue.push('ok', { batch: 'b' });
  const doomed = await queue.push('doomed', { batch: 'b', maxAttempts: 1 });
  const sealed = await queue.sealBatch('b');
  assert.deepEqual([sealed.pending, sealed.settled], [2, false]);
  const leases = Object.fromEntries((await fetched(queue)).map((j) => [j.id, j.lease]));
  await nack(queue, leases[doomed], 'boom');
  // The first death pushes onDead at once; the batch waits for the other job.
  let batch = await queue.getBatch('b');
  assert.deepEqual([batch.pending, batch.dead, batch.settled], [1, 1, false]);
  assert.deepEqual(Object.keys(batch.callbacks_pushed), ['on_dead']);
  await queue.ack([leases[ok]]);
  batch = withoutTimes(await queue.getBatch('b'));
  assert.deepEqual(Object.keys(batch.callbacks_pushed).sort(), ['on_complete', 'on_dead']);
  assert.deepEqual([batch.acked, batch.dead, batch.settled], [1, 1, true]);
  assert.deepEqual((await fetched(queue)).map((j) => j.payload).sort(), ['complete', 'dead']);
});

test('unknown and sealed batches are refused', { timeout: 20_000 }, async () => {
  const queue = new Queue('batches-refused', { url: server.url });
  assert.deepEqual(await refused(queue.push(1, { batch: 'nope' })), [404, 'unknown_batch']);
  assert.deepEqual(await refused(queue.getBatch('nope')), [404, 'unknown_batch']);
  assert.deepEqual(await refused(queue.sealBatch('nope')), [404, 'unknown_batch']);
  await queue.createBatch({ id: 'once' });
  assert.deepEqual(await refused(queue.createBatch({ id: 'once' })), [409, 'conflict']);
  await queue.sealBatch('once');
  assert.deepEqual(await refused(queue.push(1, { batch: 'once' })), [409, 'conflict']);
  // A bulk push with one job naming it stores none of them.
  assert.deepEqual(await refused(queue.pushBulk([{ payload: 1 }, { payload: 2, batch: 'once' }])), [409, 'conflict']);
  assert.equal((await queue.stats()).pushed, 0);
  // A callback's fields other than maxAttempts go as given, for the server to refuse.
  assert.deepEqual(await refused(queue.createBatch({ onSuccess: { payload: 1, bogus: 2 } })), [400, 'invalid_argument']);
  // Sealed with no job pending, it settled at once.
  const once = await queue.getBatch('once');
  assert.deepEqual([once.settled, once.pending], [true, 0]);

  const first = (await queue.createBatch()).id;
  const second = (await queue.createBatch({})).id;
  assert.ok(first && second && first !== second);
  assert.throws(() => queue.createBatch({ onSucess: { payload: 1 } }), /'onSucess' is not an option of createBatch/);
});

test('fan out in a batch, then fan in reading the results', { timeout: 20_000 }, async () => {
  const queue = new Queue('fan', { url: server.url });
  await queue.createBatch({ id: 'report', onSuccess: { payload: { step: 'notify' } } });
  const parts = await queue.pushBulk([1, 2, 3, 4].map((n) => ({ payload: { step: 'part', n }, batch: 'report' })));
  const merge = await queue.push({ step: 'merge' }, { dependsOn: parts });
  await queue.sealBatch('report');

  const w = new Worker(queue, async (job) => {
    if (job.payload.step === 'part') return { part: job.payload.n, rows: job.payload.n * 10 };
    if (job.payload.step === 'merge') {
      const deps = await queue.getJobDependencies(job.id);
      return { rows: deps.reduce((sum, d) => sum + d.result.rows, 0), from: deps.length };
    }
    return undefined; // the batch's callback
  }, { concurrency: 3, waitMs: 200, heartbeatMs: 0 });
  w.on('error', (e) => assert.fail(`worker error: ${e.message}`));
  let notify;
  try {
    assert.deepEqual(await queue.waitForResult(merge, { timeoutMs: 10_000 }), { rows: 100, from: 4 });
    notify = (await queue.getBatch('report')).callbacks_pushed.on_success;
    assert.equal(await queue.waitForResult(notify, { timeoutMs: 10_000 }), undefined);
  } finally {
    await within(w.close(), 5_000, 'close');
  }
  assert.deepEqual((await queue.getJob(notify)).payload, { step: 'notify' });
  const stats = await queue.stats();
  assert.deepEqual([stats.pushed, stats.acked, stats.dead], [6, 6, 0]);
});
