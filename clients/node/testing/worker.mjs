// A worker process for the tests: node testing/worker.mjs '{"url", "queue", "jobMs", ...options}'.
// Runs the client's Worker with the given options; each job sleeps payload.ms (or jobMs), and
// honours job.signal. Writes one JSON line per event to stdout, so the test sees what happened
// in which order: ready, start, end, aborted, stalled, closed.
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from '../index.js';

const config = JSON.parse(process.argv[2]);
const say = (event, fields = {}) => process.stdout.write(`${JSON.stringify({ event, ...fields })}\n`);

const worker = new Worker(config.queue, async (job) => {
  say('start', { id: job.id, attempt: job.attempt });
  try {
    await sleep(job.payload?.ms ?? config.jobMs ?? 0, undefined, { signal: job.signal });
  } catch (err) {
    say('aborted', { id: job.id });
    throw err;
  }
  say('end', { id: job.id });
}, { url: config.url, ...config.options });

worker.on('stalled', (job) => say('stalled', { id: job.id }));
worker.on('error', (err) => say('error', { message: err.message }));
worker.on('closed', () => say('closed'));
say('ready', { worker: worker.id });
