// Schedules of repeatable jobs against the real server: an interval schedule's runs pushed to
// its queue, what GET tells of them, pause, resume and delete, cron fire times across a spring
// forward, and the refusals (400, 404, 409). One server for the file: each test has its own
// schedule ids and queues.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AnteroomError, Client } from '../index.js';
import { eventually, sleep, startServer } from '../testing/helpers.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new Client({ url: server.url });
});
after(async () => {
  client?.close();
  await server?.stop();
});

function rejectsWith(promise, status, code, what) {
  return assert.rejects(promise, (err) => {
    assert.ok(err instanceof AnteroomError, `${what}: ${err}`);
    assert.deepEqual([err.status, err.code], [status, code], what);
    return true;
  });
}

test('an interval schedule pushes a job per run', { timeout: 20_000 }, async () => {
  const queue = client.queue('ticks');
  const put = await client.putSchedule('tick', 'ticks', {
    everyMs: 1000, payload: { report: 'daily' }, priority: 3, group: 'acme', maxAttempts: 2,
  });
  assert.deepEqual([put.id, put.queue, put.every_ms, put.paused, put.runs], ['tick', 'ticks', 1000, false, 0]);
  assert.deepEqual(put.job, { payload: { report: 'daily' }, priority: 3, group: 'acme', max_attempts: 2 });
  assert.equal(put.cron, undefined);
  assert.deepEqual([put.overlap, put.misfire], ['allow', 'skip']);

  const jobs = [];
  await eventually(async () => {
    jobs.push(...(await fetchJobs('ticks')));
    return jobs.length >= 2;
  }, 5_000, "two runs' jobs");
  for (const job of jobs) {
    assert.deepEqual([job.payload, job.priority, job.group], [{ report: 'daily' }, 3, 'acme']);
  }

  const got = await client.schedule('tick');
  assert.ok(got.runs >= jobs.length, `runs ${got.runs}, jobs ${jobs.length}`);
  // A run may have come due since the fetch: the latest job is then one not fetched yet.
  assert.ok(jobs.some((j) => j.id === got.last_job_id) || got.runs > jobs.length);
  const times = got.next_fire_times.map(Date.parse);
  assert.equal(times.length, 5);
  assert.deepEqual(times.slice(1).map((t, i) => t - times[i]), [1000, 1000, 1000, 1000]);
  assert.equal(times[0], got.next_run_at_ms);
  assert.ok(got.next_run_at_ms > got.last_run_at_ms);
  assert.ok((await client.schedules()).some((s) => s.id === 'tick'));
  assert.equal((await queue.stats()).queue, 'ticks');
  await client.deleteSchedule('tick');
});

test('pause, resume and delete', { timeout: 20_000 }, async () => {
  const queue = client.queue('paused-ticks');
  await client.putSchedule('paused-tick', 'paused-ticks', { everyMs: 1000, payload: null });
  await eventually(async () => (await client.schedule('paused-tick')).runs >= 1, 5_000, 'a first run');

  const paused = await client.pauseSchedule('paused-tick');
  assert.equal(paused.paused, true);
  const { pushed } = await queue.stats();
  await sleep(1_500); // a run or more falls due meanwhile, and is not pushed
  assert.equal((await queue.stats()).pushed, pushed);
  assert.equal((await client.schedule('paused-tick')).runs, paused.runs);

  const resumed = await client.resumeSchedule('paused-tick');
  assert.equal(resumed.paused, false);
  // Going on from now: the times passed while paused are not caught up.
  assert.ok(resumed.next_run_at_ms >= resumed.updated_at_ms);
  await eventually(async () => (await queue.stats()).pushed > pushed, 5_000, 'a run after resume');

  const gone = await client.deleteSchedule('paused-tick');
  assert.deepEqual([gone.id, gone.deleted], ['paused-tick', true]);
  assert.ok(!(await client.schedules()).some((s) => s.id === 'paused-tick'));
  for (const call of ['schedule', 'deleteSchedule', 'pauseSchedule', 'resumeSchedule']) {
    await rejectsWith(client[call]('paused-tick'), 404, 'unknown_schedule', call);
  }
  assert.ok((await queue.stats()).ready >= 2, 'the jobs it pushed stay');
});

test('cron fire times in a time zone, and a change', async () => {
  // Europe/Berlin springs forward on 2030-03-31 at 02:00: that day's 02:30 does not exist
  // and runs at the first instant after the gap, 03:00 CEST (01:00 UTC).
  const put = await client.putSchedule('berlin', 'reports', {
    cron: '30 2 * * *', tz: 'Europe/Berlin', startAt: new Date(Date.UTC(2030, 2, 29)),
    endAt: Date.UTC(2030, 3, 3), payload: 1,
  });
  assert.deepEqual([put.cron, put.tz, put.start_at], ['30 2 * * *', 'Europe/Berlin', '2030-03-29T00:00:00.000Z']);
  assert.deepEqual(put.next_fire_times, [
    '2030-03-29T01:30:00.000Z',
    '2030-03-30T01:30:00.000Z',
    '2030-03-31T01:00:00.000Z',
    '2030-04-01T00:30:00.000Z',
    '2030-04-02T00:30:00.000Z',
  ]);
  // A change keeps the schedule's place; maxRuns shortens what is left to come.
  const changed = await client.putSchedule('berlin', 'reports', {
    cron: '30 2 * * *', tz: 'Europe/Berlin', startAt: '2030-03-29T00:00:00Z', maxRuns: 2, payload: 2,
  });
  assert.deepEqual([changed.max_runs, changed.job.payload], [2, 2]);
  assert.deepEqual(changed.next_fire_times, put.next_fire_times.slice(0, 2));
  assert.equal(changed.created_at_ms, put.created_at_ms);
  await client.deleteSchedule('berlin');
});

test('bad schedules are refused', async () => {
  for (const bad of [
    { cron: '61 * * * *' },
    { cron: '* * * * *', tz: 'Mars/Olympus_Mons' },
    { cron: '@hourly', everyMs: 1000 },
    {},
    { everyMs: 999 },
    { everyMs: 1000, misfire: 'sometimes' },
  ]) {
    await rejectsWith(client.putSchedule('bad', 'q', { ...bad, payload: 1 }), 400, 'invalid_argument', JSON.stringify(bad));
  }
  await rejectsWith(client.schedule('bad'), 404, 'unknown_schedule', 'never created');
  // A misspelt option is refused before anything is sent, as the server refuses its own.
  assert.throws(() => client.putSchedule('bad', 'q', { everyMS: 1000, payload: 1 }), TypeError);

  await client.putSchedule('nightly', 'q', { cron: '0 3 * * *', payload: 1 });
  await rejectsWith(client.putSchedule('nightly', 'other-queue', { cron: '0 3 * * *', payload: 1 }),
    409, 'conflict', 'another queue');
  assert.equal((await client.schedule('nightly')).queue, 'q');
  await client.deleteSchedule('nightly');
});

// A raw fetch, as a hand-written loop would make it.
async function fetchJobs(queue) {
  const res = await fetch(`${server.url}/v1/queues/${queue}/fetch`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ worker: 'w', max: 10 }),
  });
  assert.equal(res.status, 200);
  return (await res.json()).jobs;
}
