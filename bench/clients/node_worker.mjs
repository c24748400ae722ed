// The Node client's Worker on the worker-loop workload: one producer pushes N jobs in batches
// (pushBulk) while one Worker with a no-op handler and concurrency C takes them, its acks riding
// on its fetches. Prints one JSON line with `rate` (jobs acked per second, from the first push
// to the last ack confirmed by close()). scripts/bench-clients.sh runs it beside the C load
// generator and BullMQ.
//
//   node bench/clients/node_worker.mjs --url http://127.0.0.1:PORT [--n 50000]
//        [--concurrency 50] [--push-batch 100] [--queue NAME]
import { parseArgs } from 'node:util';
import { Queue, Worker } from '../../clients/node/index.js';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    n: { type: 'string', default: '50000' },
    concurrency: { type: 'string', default: '50' },
    'push-batch': { type: 'string', default: '100' },
    queue: { type: 'string', default: `node-bench-${process.pid}` },
    'limit-ms': { type: 'string', default: '120000' },
  },
});
const n = Number(values.n);
const batch = Number(values['push-batch']);
const concurrency = Number(values.concurrency);
if (!values.url || !(n > 0) || !(batch > 0) || !(concurrency > 0)) {
  console.error('usage: node_worker.mjs --url URL [--n N] [--concurrency C] [--push-batch B]');
  process.exit(2);
}

const queue = new Queue(values.queue, { url: values.url });
let completed = 0;
let allDone;
const done = new Promise((resolve) => { allDone = resolve; });
const limit = setTimeout(() => {
  console.log(JSON.stringify({ ok: false, client: 'node', why: 'time limit', completed }));
  process.exit(1);
}, Number(values['limit-ms']));

const start = performance.now();
const worker = new Worker(queue, async () => {}, { concurrency, waitMs: 1000, heartbeatMs: 0 });
worker.on('completed', () => { if (++completed === n) allDone(); });
worker.on('error', (e) => console.error(`worker error: ${e.message}`));
for (let pushed = 0; pushed < n; pushed += batch) {
  const size = Math.min(batch, n - pushed);
  await queue.pushBulk(Array.from({ length: size }, (_, i) => ({ payload: { i: pushed + i } })));
}
await done;
await worker.close();  // the last acks go out before it resolves
const seconds = (performance.now() - start) / 1000;
clearTimeout(limit);
const stats = await queue.stats();
queue.client.close();
console.log(JSON.stringify({
  ok: stats.acked === n, client: 'node', n, concurrency, push_batch: batch,
  seconds: Number(seconds.toFixed(3)), rate: Math.round(n / seconds), acked: stats.acked,
}));
