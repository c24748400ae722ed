// Browser-test support: the real `anteroom serve` (started on a free loopback port, stopped by
// its PID) and Debian's chromium, headless, driven by playwright-core. Every wait is bounded.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const binary =
  process.env.ANTEROOM_BINARY ?? path.resolve(here, '../../build/release/anteroom');
export const artifacts =
  process.env.ANTEROOM_ARTIFACTS ?? path.resolve(here, '../../build/browser-artifacts');
export const chromiumPath = process.env.ANTEROOM_CHROMIUM ?? '/usr/bin/chromium';

// Starts `anteroom serve --listen 127.0.0.1:0 --memory-only ARGS...`; resolves once it prints
// the address it listens on.
export function startServer(args = [], env = {}) {
  return new Promise((resolve, reject) => {
    const cleanEnv = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('ANTEROOM_')));
    const child = spawn(binary, ['serve', '--listen', '127.0.0.1:0', '--memory-only', ...args], {
      env: { ...cleanEnv, ANTEROOM_TOKEN_SECRET: 'browser-test-secret', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server did not start in 10 s: ${out}${err}`));
    }, 10_000);
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m && timer) {
        clearTimeout(timer);
        resolve({
          url: m[1],
          pid: child.pid,
          logs: () => err,
          stop: () => stopChild(child),
        });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}) before listening: ${err}`));
    });
  });
}

function stopChild(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => process.kill(child.pid, 'SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(kill);
      resolve();
    });
    process.kill(child.pid, 'SIGTERM');
  });
}

export async function launchBrowser() {
  // --no-sandbox: CI runs as root, where chromium's sandbox cannot start.
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
  });
}

export function artifactPath(name) {
  mkdirSync(artifacts, { recursive: true });
  return path.join(artifacts, name);
}

// JSON over HTTP to the server (Node's fetch), with an optional admin key.
export async function api(server, method, route, body, key) {
  const headers = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const res = await fetch(server.url + route, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

// Polls `fn` until it returns a truthy value or `ms` pass.
export async function eventually(fn, ms = 5_000, what = 'condition') {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what} (last: ${last})`);
}
