// Test support: the real `anteroom serve` (a free loopback port, stopped by its PID), worker
// processes running fixtures/worker.mjs, and bounded waits. Every wait has a deadline.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const binary =
  process.env.ANTEROOM_BINARY ?? path.resolve(here, '../../../build/release/anteroom');
export const packageDir = path.resolve(here, '..');

// Starts `anteroom serve --listen 127.0.0.1:0 --memory-only ARGS...`; resolves once it prints
// the address it listens on.
export function startServer(args = [], env = {}) {
  return new Promise((resolve, reject) => {
    const cleanEnv = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('ANTEROOM_')));
    const child = spawn(binary, ['serve', '--listen', '127.0.0.1:0', '--memory-only', ...args], {
      env: { ...cleanEnv, ANTEROOM_TOKEN_SECRET: 'node-client-test-secret', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let started = false;
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server did not start in 10 s: ${out}${err}`));
    }, 10_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${binary} (set ANTEROOM_BINARY): ${e.message}`));
    });
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m && !started) {
        started = true;
        clearTimeout(timer);
        resolve({ url: m[1], pid: child.pid, logs: () => err, stop: () => stopChild(child) });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (!started) reject(new Error(`the server exited (${code}) before listening: ${err}`));
    });
  });
}

export function stopChild(child, signal = 'SIGTERM') {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => process.kill(child.pid, 'SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    process.kill(child.pid, signal);
  });
}

// A worker process: fixtures/worker.mjs with `config` (see there). Its stdout is one JSON
// object per line ({event: "ready" | "start" | "end" | "aborted" | "closed", ...}), collected
// in `lines`; waitFor(pred, ms) resolves with the first line matching.
export function spawnWorker(config) {
  const child = spawn(process.execPath, [path.join(here, 'worker.mjs'), JSON.stringify(config)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  const watchers = [];
  let buffered = '';
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  child.stdout.on('data', (d) => {
    buffered += d;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = JSON.parse(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
      line.at = Date.now();
      lines.push(line);
      for (const w of [...watchers]) if (w.pred(line)) w.resolve(line);
    }
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() })));
  return {
    child,
    pid: child.pid,
    lines,
    stderr: () => stderr,
    exited,
    waitFor(pred, ms = 10_000, what = 'a line') {
      const found = lines.find(pred);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const w = { pred, resolve: (l) => { clearTimeout(timer); watchers.splice(watchers.indexOf(w), 1); resolve(l); } };
        const timer = setTimeout(() => {
          watchers.splice(watchers.indexOf(w), 1);
          reject(new Error(`timed out after ${ms} ms waiting for ${what}; lines: ${JSON.stringify(lines)} stderr: ${stderr}`));
        }, ms);
        watchers.push(w);
      });
    },
    kill: (signal = 'SIGKILL') => stopChild(child, signal),
  };
}

// Polls `fn` until it returns a truthy value or `ms` pass.
export async function eventually(fn, ms = 10_000, what = 'condition') {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await sleep(25);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Promise `p`, or a rejection after `ms`.
export function within(p, ms, what) {
  let timer;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms); }),
  ]);
}

// The count of requests the server's /metrics saw on a route, e.g. '/v1/queues/{q}/fetch'.
export async function routeCount(url, route, method = 'POST') {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) =>
    l.startsWith('anteroom_http_request_duration_seconds_count{') &&
    l.includes(`method="${method}"`) && l.includes(`route="${route}"`));
  if (!line) throw new Error(`no series for ${method} ${route} in /metrics`);
  return Number(line.split(' ').pop());
}
