// Real proxies for the gate's browser tests (docs/gate.md): nginx and Caddy run from the very
// config files in examples/ (their {{PLACEHOLDERS}} filled with free loopback ports), a small
// origin site, anteroom processes (memory or Redis), and redis-server. Each process is started
// here, writes only under its own temporary directory, and is stopped by its PID. Every wait is
// bounded.
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { binary } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const examples = path.resolve(here, '../../examples');
export const nginxBinary = process.env.ANTEROOM_NGINX ?? '/usr/sbin/nginx';
export const caddyBinary = process.env.ANTEROOM_CADDY ?? '/usr/bin/caddy';
export const redisBinary = process.env.ANTEROOM_REDIS ?? '/usr/bin/redis-server';

// Why a proxy test cannot run here (a missing binary), or null.
export function missing(...binaries) {
  const absent = binaries.filter((b) => !existsSync(b));
  return absent.length ? `not installed: ${absent.join(', ')} (scripts/setup.sh installs them)` : null;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A port free on 127.0.0.1 now. nginx and Caddy cannot report a port they chose, so the port is
// picked here; a start that finds it taken after all is retried on another (startWithRetry).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Resolves once 127.0.0.1:port accepts a connection; rejects after `ms` or when `exited()`.
async function waitForPort(port, ms, exited) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (exited()) throw new Error('exited before listening');
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, '127.0.0.1');
      c.once('connect', () => { c.destroy(); resolve(true); });
      c.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`nothing listened on ${port} within ${ms} ms`);
}

// A child process, its output kept for failure messages, stopped by its PID: SIGTERM, then
// SIGKILL after 5 s.
function launch(command, args, options = {}) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  let output = '';
  child.stdout.on('data', (d) => { output += d; });
  child.stderr.on('data', (d) => { output += d; });
  const proc = {
    child,
    pid: child.pid,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    output: () => output,
    stop: () => new Promise((resolve) => {
      if (proc.exited()) return resolve();
      const kill = setTimeout(() => { try { process.kill(child.pid, 'SIGKILL'); } catch { /* gone */ } }, 5_000);
      child.once('exit', () => { clearTimeout(kill); resolve(); });
      try { process.kill(child.pid, 'SIGTERM'); } catch { clearTimeout(kill); resolve(); }
    }),
  };
  child.on('error', (e) => { output += `\nspawn failed: ${e.message}`; });
  return proc;
}

async function startWithRetry(what, start) {
  let last;
  for (let attempt = 0; attempt < 3; ++attempt) {
    try {
      return await start();
    } catch (e) {
      last = e;  // most likely the port picked was taken meanwhile: another port
    }
  }
  throw new Error(`${what} did not start: ${last?.message}`);
}

// An example config with its placeholders filled: {{NAME}} -> vars.NAME. Placeholders left
// unfilled are an error (the example and the test disagree).
export function fillTemplate(file, vars) {
  const text = readFileSync(file, 'utf8').replace(/\{\{([A-Z_]+)\}\}/g, (whole, name) => {
    if (!(name in vars)) throw new Error(`${file}: no value for ${whole}`);
    return String(vars[name]);
  });
  return text;
}

// --- anteroom -------------------------------------------------------------------------------

// `anteroom serve --listen 127.0.0.1:0 ARGS...` (add --memory-only or --store yourself);
// resolves once it says where it listens.
export function startAnteroom(args, env = {}) {
  const cleanEnv = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('ANTEROOM_')));
  const proc = launch(binary, ['serve', '--listen', '127.0.0.1:0', ...args], {
    env: { ...cleanEnv, ANTEROOM_TOKEN_SECRET: 'browser-test-secret', ...env },
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.stop();
      reject(new Error(`anteroom did not start in 10 s: ${proc.output()}`));
    }, 10_000);
    proc.child.stdout.on('data', () => {
      const m = proc.output().match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m && timer) {
        clearTimeout(timer);
        resolve({ ...proc, port: Number(m[1]), url: `http://127.0.0.1:${m[1]}` });
      }
    });
    proc.child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`anteroom exited (${code}) before listening: ${proc.output()}`));
    });
  });
}

// --- redis-server ---------------------------------------------------------------------------

export async function startRedis() {
  return startWithRetry('redis-server', async () => {
    const port = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'anteroom-gate-redis-'));
    const proc = launch(redisBinary, ['--port', String(port), '--bind', '127.0.0.1',
      '--save', '', '--appendonly', 'no', '--dir', dir]);
    try {
      await waitForPort(port, 5_000, proc.exited);
    } catch (e) {
      await proc.stop();
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`${e.message}: ${proc.output()}`);
    }
    return {
      ...proc,
      port,
      url: `redis://127.0.0.1:${port}`,
      stop: async () => { await proc.stop(); rmSync(dir, { recursive: true, force: true }); },
    };
  });
}

// --- the origin site ------------------------------------------------------------------------

// The path a naive site serves for a request target: the fragment, the query and `;` path
// parameters dropped, percent-escapes decoded and dot segments resolved (as a careless static
// file server or framework router might). The gate must not count on the site being stricter
// (gate_attacks.test.mjs sends /static/../secret.html and the like).
export function originPath(url) {
  let p = url.split('#')[0].split('?')[0].split(';')[0];
  try { p = decodeURIComponent(p); } catch { /* left as it is */ }
  return path.posix.normalize(p.replace(/\\/g, '/'));
}

// The protected site, which knows nothing of anteroom: each page shows the path and query it
// was asked for (#where), the session the gate named (#session), and a leave link; one
// stylesheet (/static/site.css, and anything else under /static/), and /secret.html, a page
// that says SECRET (what a gate bypass must never serve while the room is full). `seen` holds
// each request: {url (as received), path (as served, see originPath), session}.
export function startOrigin(room) {
  const seen = [];
  const server = http.createServer((req, res) => {
    const served = originPath(req.url);
    seen.push({ url: req.url, path: served, session: req.headers['x-anteroom-session'] ?? '' });
    if (served.startsWith('/static/')) {
      res.writeHead(200, { 'content-type': 'text/css' });
      res.end('#where { font-weight: bold; }\n');
      return;
    }
    const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    if (served === '/secret.html') {
      res.end('<!doctype html><meta charset=utf-8><title>secret</title><p id=secret>SECRET</p>');
      return;
    }
    res.end(`<!doctype html><meta charset=utf-8><title>shop</title>
<link rel=stylesheet href="/static/site.css">
<p id=where>${esc(req.url)}</p>
<p id=session>${esc(req.headers['x-anteroom-session'] ?? '')}</p>
<a id=leave href="/anteroom/v1/gate/${esc(room)}/leave">Leave the shop</a>`);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({
        port,
        seen,
        stop: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
      });
    });
  });
}

// --- nginx ----------------------------------------------------------------------------------

// nginx running examples/nginx/gate.conf, included in a main config whose pid, logs and
// temporary files are all in a temporary directory. `anteroomPorts`: several make one upstream
// of several servers (the Redis backend). `accessLog`: nginx keeps an access log in the
// default `combined` format (each request line, with its full URL, and its Referer), as a
// deployment does; read it with accessLog() before stop(). Without it, no access log.
export async function startNginx({ originPort, anteroomPorts, room, accessLog = false }) {
  return startWithRetry('nginx', async () => {
    const port = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'anteroom-gate-nginx-'));
    chmodSync(dir, 0o755);  // nginx's workers (not root) reach their temporary files through it
    let gate = fillTemplate(path.join(examples, 'nginx/gate.conf'), {
      LISTEN_PORT: port, ORIGIN_PORT: originPort, ANTEROOM_PORT: anteroomPorts[0], ROOM: room,
    });
    if (anteroomPorts.length > 1) {
      const one = `server 127.0.0.1:${anteroomPorts[0]};`;
      if (!gate.includes(one)) throw new Error('gate.conf: no anteroom server line to multiply');
      gate = gate.replace(one, anteroomPorts.map((p) => `server 127.0.0.1:${p};`).join('\n    '));
    }
    writeFileSync(path.join(dir, 'gate.conf'), gate);
    for (const t of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) mkdirSync(path.join(dir, t));
    writeFileSync(path.join(dir, 'nginx.conf'), `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 512; }
http {
    access_log ${accessLog ? `${dir}/access.log combined` : 'off'};
    client_body_temp_path ${dir}/body;
    proxy_temp_path ${dir}/proxy;
    fastcgi_temp_path ${dir}/fastcgi;
    uwsgi_temp_path ${dir}/uwsgi;
    scgi_temp_path ${dir}/scgi;
    include ${dir}/gate.conf;
}
`);
    const proc = launch(nginxBinary, ['-c', path.join(dir, 'nginx.conf'), '-p', dir,
      '-e', path.join(dir, 'error.log'), '-g', 'daemon off;']);
    const log = () => {
      try { return readFileSync(path.join(dir, 'error.log'), 'utf8'); } catch { return ''; }
    };
    try {
      await waitForPort(port, 10_000, proc.exited);
    } catch (e) {
      await proc.stop();
      const why = `${e.message}: ${proc.output()}${log()}`;
      rmSync(dir, { recursive: true, force: true });
      throw new Error(why);
    }
    return {
      ...proc,
      name: 'nginx',
      port,
      url: `http://127.0.0.1:${port}`,
      output: () => proc.output() + log(),
      accessLog: () => {
        try { return readFileSync(path.join(dir, 'access.log'), 'utf8'); } catch { return ''; }
      },
      stop: async () => { await proc.stop(); rmSync(dir, { recursive: true, force: true }); },
    };
  });
}

// --- Caddy ----------------------------------------------------------------------------------

// Caddy running examples/caddy/Caddyfile, its home, config and data directories in a temporary
// directory (it writes nothing outside; the Caddyfile turns its admin endpoint off).
export async function startCaddy({ originPort, anteroomPorts, room }) {
  return startWithRetry('caddy', async () => {
    const port = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), 'anteroom-gate-caddy-'));
    const file = path.join(dir, 'Caddyfile');
    writeFileSync(file, fillTemplate(path.join(examples, 'caddy/Caddyfile'), {
      LISTEN_PORT: port, ORIGIN_PORT: originPort, ANTEROOM_PORT: anteroomPorts[0], ROOM: room,
    }));
    const proc = launch(caddyBinary, ['run', '--config', file, '--adapter', 'caddyfile'], {
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        XDG_CONFIG_HOME: path.join(dir, 'config'),
        XDG_DATA_HOME: path.join(dir, 'data'),
      },
    });
    try {
      await waitForPort(port, 10_000, proc.exited);
    } catch (e) {
      await proc.stop();
      const why = `${e.message}: ${proc.output()}`;
      rmSync(dir, { recursive: true, force: true });
      throw new Error(why);
    }
    return {
      ...proc,
      name: 'caddy',
      port,
      url: `http://127.0.0.1:${port}`,
      stop: async () => { await proc.stop(); rmSync(dir, { recursive: true, force: true }); },
    };
  });
}
