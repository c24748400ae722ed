// web/anteroom.js in Node against a real `anteroom serve`: each "tab" is a fresh VM context
// with its own sessionStorage, location, fetch and WebSocket, running the script the server
// serves. Covers the WebSocket -> SSE -> polling fallback, polling itself (the queue moving,
// reload resuming the same place, leave, stay losing its slot; its pace, refresh_after_ms, in a
// pre-queue), a closed room, reconnects, API errors, and
// where the bearer secrets (the session id, the admission token) travel: never in a URL, which
// proxies and CDNs write to their access logs, but in a WebSocket subprotocol, a header or a
// body; and that the server reads them from there.
// Usage: node tests/web/client_test.js ANTEROOM_BINARY
//    or: ANTEROOM_BINARY=... node --test tests/web/client_test.js
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const http = require('node:http');
const crypto = require('node:crypto');
const vm = require('node:vm');

const binary = process.argv[2] ?? process.env.ANTEROOM_BINARY;
if (!binary) {
  console.error('usage: node client_test.js ANTEROOM_BINARY (or ANTEROOM_BINARY in the environment)');
  process.exit(2);
}

let server = null;  // {child, base}
let script = '';
const tabs = [];             // closed after each test, as a browser closes its tabs

function startServer() {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['serve', '--memory-only', '--listen', '127.0.0.1:0',
      '--log-level', 'warn'], {
      env: { PATH: process.env.PATH, ANTEROOM_TOKEN_SECRET: 'web-client-test' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const timer = setTimeout(() => reject(new Error('the server did not start in 10 s')), 10000);
    let out = '';
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const match = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (match) {
        clearTimeout(timer);
        resolve({ child, base: match[1] });
      }
    });
    child.on('exit', (code) => reject(new Error(`the server exited with ${code}`)));
  });
}

// The session holding a token's admission: its `sub` is opaque, the server knows the holder.
async function holderOf(token) {
  const answer = (await api('POST', '/v1/tokens/verify', { token })).body;
  return answer.valid ? answer.session : null;
}

async function api(method, path, body, headers = {}) {
  const response = await fetch(server.base + path, {
    method,
    headers: body ? { 'Content-Type': 'application/json', ...headers } : headers,
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, body: await response.json() };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const newSession = () => crypto.randomBytes(16).toString('hex');

async function eventually(what, check, timeoutMs = 8000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

const isEvents = (url) => new URL(url).pathname.endsWith('/events');

// A WebSocket that never works, as behind a proxy that blocks the upgrade.
class BlockedWebSocket {
  constructor() {
    setTimeout(() => { this.onerror?.({}); this.onclose?.({}); }, 5);
  }
  close() {}
}

// `inner` fetch, except that event-stream requests fail: as a reset connection does
// (`how` 'reset') or with a proxy's error page ('refused').
function eventsBlocked(inner = fetch, how = 'reset') {
  return (url, init) => {
    if (!isEvents(String(url))) return inner(url, init);
    if (how === 'reset') return Promise.reject(new TypeError('fetch failed'));
    return Promise.resolve(new Response('<h1>403 Forbidden</h1>',
      { status: 403, headers: { 'Content-Type': 'text/html' } }));
  };
}

// Both live transports blocked, as behind a strict proxy: the tab ends up polling.
const blocked = (how) => ({
  transports: { WebSocket: BlockedWebSocket }, fetchImpl: eventsBlocked(fetch, how),
});

// A browser's WebSocket for Node 20 (which has none), talking to the server for real: the
// opening handshake with the offered subprotocols (an answer that picks none of them, or one
// not offered, fails the connection as in a browser), then text messages in, pings answered.
// `upgradeOnly`: the connection dies right after its upgrade, before any message. Each answer
// to a handshake goes into `upgrades`: {status, protocol, body}.
class NodeWebSocket {
  constructor(url, protocols, { upgradeOnly = false, upgrades = [] } = {}) {
    const offered = [].concat(protocols ?? []);
    const target = new URL(url);
    target.protocol = 'http:';
    const key = crypto.randomBytes(16).toString('base64');
    const headers = { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
      'Sec-WebSocket-Key': key };
    if (offered.length) headers['Sec-WebSocket-Protocol'] = offered.join(', ');
    this.protocol = '';
    this.request = http.get(target, { headers, agent: false });
    this.request.on('response', (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => {
        upgrades.push({ status: res.statusCode, protocol: null, body });
        this.ended();
      });
    });
    this.request.on('upgrade', (res, socket, head) => {
      const protocol = res.headers['sec-websocket-protocol'] ?? '';
      upgrades.push({ status: res.statusCode, protocol, body: '' });
      const accept = crypto.createHash('sha1')
        .update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      const chosen = offered.length ? offered.includes(protocol) : protocol === '';
      this.socket = socket;
      if (this.closed || upgradeOnly || !chosen || res.headers['sec-websocket-accept'] !== accept) {
        socket.destroy();
        return this.ended();
      }
      this.protocol = protocol;
      this.buffer = Buffer.alloc(0);
      this.parts = [];
      socket.on('data', (d) => this.receive(d));
      socket.on('close', () => this.ended());
      socket.on('error', () => this.ended());
      this.onopen?.({});
      if (head.length) this.receive(head);
    });
    this.request.on('error', () => this.ended());
  }

  receive(chunk) {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const b = this.buffer;
      if (b.length < 2) return;
      let length = b[1] & 0x7f;
      let at = 2;
      if (length === 126) {
        if (b.length < 4) return;
        length = b.readUInt16BE(2);
        at = 4;
      } else if (length === 127) {
        if (b.length < 10) return;
        length = Number(b.readBigUInt64BE(2));
        at = 10;
      }
      if (b[1] & 0x80) return this.socket.destroy();  // a server never masks its frames
      if (b.length < at + length) return;
      const fin = b[0] & 0x80;
      const opcode = b[0] & 0x0f;
      const payload = b.subarray(at, at + length);
      this.buffer = b.subarray(at + length);
      if (opcode === 0x8) {
        this.send(0x8, payload.subarray(0, 2));
        this.socket.end();
        return this.ended();
      }
      if (opcode === 0x9) {
        this.send(0xa, payload);
        continue;
      }
      if (opcode === 0xa) continue;
      this.parts.push(payload);  // text, binary or a continuation
      if (fin) {
        const data = Buffer.concat(this.parts).toString('utf8');
        this.parts = [];
        if (!this.closed) this.onmessage?.({ data });
      }
    }
  }

  // A client's frames are masked.
  send(opcode, payload) {
    if (!this.socket || this.socket.destroyed || payload.length > 125) return;
    const mask = crypto.randomBytes(4);
    const masked = Buffer.from(payload.map((byte, i) => byte ^ mask[i % 4]));
    this.socket.write(Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | payload.length]), mask, masked]));
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    if (this.socket && !this.socket.destroyed) {
      this.send(0x8, Buffer.from([0x03, 0xe8]));  // 1000, a normal closure
      this.socket.end();
    } else {
      this.request.destroy();
    }
  }

  // The connection failed or ended: a page hears it once, unless it closed it itself.
  ended() {
    if (this.over) return;
    this.over = true;
    if (this.closed) return;
    this.closed = true;
    this.onerror?.({});
    this.onclose?.({});
  }
}

// Transports that reach the server for real: WebSockets through NodeWebSocket, and (the tab's
// own fetch) event streams. `upgrades`: the server's answers to the WebSocket handshakes.
function networked({ upgradeOnly = false } = {}) {
  const upgrades = [];
  class WebSocket extends NodeWebSocket {
    constructor(url, protocols) { super(url, protocols, { upgradeOnly, upgrades }); }
  }
  return { transports: { WebSocket }, upgrades };
}

// What a browser's WebSocket constructor refuses (WHATWG): a subprotocol that is not an HTTP
// token, or one offered twice.
function checkProtocols(protocols) {
  const list = protocols === undefined ? [] : [].concat(protocols);
  const token = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  if (list.some((p) => !token.test(p)) || new Set(list).size !== list.length) {
    throw new SyntaxError(`invalid subprotocols: ${JSON.stringify(list)}`);
  }
  return list;
}

// A browser tab: the served anteroom.js in a context of its own, with the browser APIs it uses.
// Its timers are its own, and closing it (after each test) stops everything it would still do:
// its timers, its fetches (aborted) and its WebSockets. Everything it sends goes into `sent`, as
// a browser's network panel shows it: {kind: 'fetch', url, method, headers, body} and
// {kind: 'ws', url, protocols}. `transports` may also take browser APIs away (ReadableStream:
// undefined).
function tab({ storage = new Map(), transports = {}, search = '', base = server.base,
               fetchImpl = fetch } = {}) {
  const location = { href: `${base}/page${search}`, origin: base, search, protocol: 'http:' };
  const timers = new Set();
  const sockets = [];
  const sent = [];
  const gone = new AbortController();
  let closed = false;
  const tabSetTimeout = (fn, ms, ...args) => {
    if (closed) return 0;
    const handle = setTimeout(() => { timers.delete(handle); fn(...args); }, ms);
    timers.add(handle);
    return handle;
  };
  const tabClearTimeout = (handle) => { timers.delete(handle); clearTimeout(handle); };
  tabs.push({
    close: () => {
      closed = true;
      timers.forEach(clearTimeout);
      gone.abort();
      for (const s of sockets) s.close?.();
    },
  });
  const tabFetch = (url, init = {}) => {
    if (closed) return Promise.reject(new TypeError('the tab is closed'));
    let body = init.body;
    try { body = JSON.parse(body); } catch (_) { /* not JSON */ }
    sent.push({ kind: 'fetch', url: String(url), method: init.method ?? 'GET',
      headers: Object.fromEntries(new Headers(init.headers ?? {})), body });
    const signal = init.signal ? AbortSignal.any([init.signal, gone.signal]) : gone.signal;
    return fetchImpl(url, { ...init, signal });
  };
  const context = {
    console, setTimeout: tabSetTimeout, clearTimeout: tabClearTimeout, URL, URLSearchParams, atob,
    btoa, ReadableStream, AbortController, TextDecoder,
    fetch: tabFetch, crypto: globalThis.crypto, location, document: { currentScript: { src: `${base}/anteroom.js` }, cookie: '' },
    sessionStorage: {
      getItem: (k) => (storage.has(k) ? storage.get(k) : null),
      setItem: (k, v) => storage.set(k, String(v)),
      removeItem: (k) => storage.delete(k),
    },
    ...transports,
  };
  if (transports.WebSocket) {
    const Given = transports.WebSocket;
    context.WebSocket = class extends Given {
      constructor(url, protocols) {
        if (closed) throw new Error('the tab is closed');
        const offered = checkProtocols(protocols);
        sent.push({ kind: 'ws', url: String(url), protocols: offered });
        super(url, protocols);
        sockets.push(this);
      }
    };
  }
  context.window = context;
  vm.createContext(context);
  vm.runInContext(script, context, { filename: 'anteroom.js' });
  // The live connections tried, in order: {kind: 'ws', url, protocols} and {kind: 'sse', url,
  // headers}.
  const attempts = () => sent.filter((s) => s.kind === 'ws' || isEvents(s.url))
    .map((s) => (s.kind === 'ws' ? s : { kind: 'sse', url: s.url, headers: s.headers }));
  const fetched = (suffix) => sent.filter((s) => s.kind === 'fetch' &&
    new URL(s.url).pathname.endsWith(suffix));
  return { Anteroom: context.Anteroom, storage, location, sent, attempts, fetched };
}

// The credential a live attempt carried: {session} or {token}, from its subprotocol offer (a
// WebSocket, which must offer plain "anteroom" too, the one the server answers) or its header
// (an event stream); null when it carried none.
function carried(attempt) {
  if (attempt.kind === 'ws') {
    const offers = attempt.protocols.filter((p) => p.startsWith('anteroom.'));
    if (offers.length === 0) return null;
    assert.ok(attempt.protocols.includes('anteroom'), JSON.stringify(attempt.protocols));
    assert.equal(offers.length, 1, JSON.stringify(attempt.protocols));
    const [, kind, value] = offers[0].match(/^anteroom\.(session|token)\.([A-Za-z0-9_-]+)$/) ?? [];
    assert.ok(kind, `a credential subprotocol that is not base64url: ${offers[0]}`);
    return { [kind]: Buffer.from(value, 'base64url').toString('utf8') };
  }
  const { 'anteroom-session': session, 'anteroom-token': token } = attempt.headers;
  assert.ok(!(session && token), 'a session and a token at once');
  if (session) return { session };
  return token ? { token } : null;
}

// The URLs (each as sent, and decoded) that contain one of `secrets`.
function leaking(urls, secrets) {
  return urls.filter((url) => {
    let decoded = url;
    try { decoded = decodeURIComponent(url); } catch (_) { /* as it is */ }
    return secrets.some((s) => s && (url.includes(s) || decoded.includes(s)));
  });
}

// Wraps wait() to expose every status and the outcome.
function waitIn(t, room) {
  const updates = [];
  const outcome = { token: null, error: null };
  t.Anteroom.wait({ room, onUpdate: (s) => updates.push(s) })
    .then((token) => { outcome.token = token; }, (err) => { outcome.error = err; });
  return { updates, outcome, last: () => updates[updates.length - 1] };
}

// SHA-256(nonce || solution) has at least `bits` leading zero bits.
function proofShows(nonce, solution, bits) {
  const digest = crypto.createHash('sha256').update(nonce + solution).digest();
  let zeros = 0;
  for (const byte of digest) {
    if (byte === 0) { zeros += 8; continue; }
    zeros += Math.clz32(byte) - 24;
    break;
  }
  return zeros >= bits;
}

// Joins `room` as `session` with a solved proof of work, the puzzle asked for with the
// Anteroom-Session header.
async function joinWithProof(room, session) {
  const puzzle = await api('GET', `/v1/rooms/${room}/challenge`, undefined,
    { 'Anteroom-Session': session });
  assert.equal(puzzle.status, 200, JSON.stringify(puzzle.body));
  assert.equal(puzzle.body.session, session);
  let solution = 0;
  while (!proofShows(puzzle.body.nonce, String(solution), puzzle.body.difficulty)) solution++;
  const joined = await api('POST', `/v1/rooms/${room}/check`,
    { session, challenge: puzzle.body.nonce, solution: String(solution) });
  assert.equal(joined.status, 200, JSON.stringify(joined.body));
  return joined.body;
}

test.before(async () => {
  server = await startServer();
  const response = await fetch(`${server.base}/anteroom.js`);
  assert.equal(response.status, 200);
  script = await response.text();
});

test.afterEach(() => {
  for (const t of tabs.splice(0)) t.close();
});

test.after(() => {
  if (server) server.child.kill('SIGTERM');
});

test('blocked WebSocket and SSE fall back to polling, in that order', async () => {
  await api('PUT', '/v1/rooms/fallback', { capacity: 1 });
  const t = tab(blocked('reset'));
  const w = waitIn(t, 'fallback');
  await eventually('admission', () => w.outcome.token);
  const attempts = t.attempts();
  assert.deepEqual(attempts.map((a) => a.kind), ['ws', 'sse']);
  // The tab names its session before the first connection, and every transport carries it:
  // the WebSocket in a subprotocol, the event stream in a header, the check in its body. The
  // URLs name only the room.
  const session = t.storage.get('anteroom:session:fallback');
  assert.match(session, /^[0-9a-f]{32}$/);
  assert.equal(attempts[0].url, `${server.base.replace('http', 'ws')}/v1/rooms/fallback/ws`);
  assert.deepEqual(attempts[0].protocols,
    ['anteroom', `anteroom.session.${Buffer.from(session).toString('base64url')}`]);
  assert.equal(attempts[1].url, `${server.base}/v1/rooms/fallback/events`);
  assert.equal(attempts[1].headers['anteroom-session'], session);
  assert.equal(attempts[1].headers.accept, 'text/event-stream');
  const checks = t.fetched('/check');
  assert.ok(checks.length >= 1);
  assert.ok(checks.every((c) => c.method === 'POST' && c.body.session === session &&
    c.url === `${server.base}/v1/rooms/fallback/check`), JSON.stringify(checks));
  assert.equal(w.last().type, 'status');
  assert.equal(w.last().status, 'active');
  assert.equal(t.storage.get('anteroom:session:fallback'), w.last().session);
  assert.equal(t.storage.get('anteroom:token:fallback'), w.outcome.token);
  const claims = t.Anteroom.decodeToken(w.outcome.token);
  assert.equal(claims.room, 'fallback');
  assert.equal(typeof claims.sub, 'string');
  assert.notEqual(claims.sub, w.last().session);  // opaque: never the session id
  assert.equal(await holderOf(w.outcome.token), w.last().session);
  await t.Anteroom.leave({});
});

test('the line moves by polling: reload resumes the place, leave admits the next', async () => {
  // checkin_timeout_ms 900: refresh_after_ms 450 while waiting, so a poll every 450 ms. The
  // event stream gets a proxy's error page.
  await api('PUT', '/v1/rooms/line', { capacity: 1, checkin_timeout_ms: 900, grace_ms: 60000 });
  const first = tab(blocked('refused'));
  const a = waitIn(first, 'line');
  await eventually('the first admission', () => a.outcome.token);
  // Both live transports were tried first, in order (blocked, as behind a strict proxy).
  assert.deepEqual(first.attempts().map((x) => x.kind), ['ws', 'sse']);

  const second = tab(blocked('refused'));
  const b = waitIn(second, 'line');
  const waiting = await eventually('a waiting status', () => b.last()?.status === 'waiting' && b.last());
  assert.equal(waiting.position, 1);
  const session = second.storage.get('anteroom:session:line');
  assert.equal(session, waiting.session);

  // Two polls more within 1.2 s: the interval follows refresh_after_ms (half the check-in
  // timeout here).
  assert.equal(waiting.refresh_after_ms, 450);
  const seen = b.updates.length;
  await sleep(1200);
  assert.ok(b.updates.length - seen >= 2, `${b.updates.length - seen} updates in 1.2 s`);

  // A reload: a new tab with the same sessionStorage is the same place in line. (The old
  // tab's connection would die with it; here it keeps polling the same session, harmlessly.)
  const reloaded = tab({ storage: second.storage, ...blocked('refused') });
  const c = waitIn(reloaded, 'line');
  const resumed = await eventually('the resumed status', () => c.last());
  assert.equal(resumed.session, session);
  assert.equal(resumed.position, 1);

  const left = await first.Anteroom.leave({ final: true });
  assert.equal(left.status, 'gone');
  assert.equal(first.storage.size, 0);
  await eventually('the second admission', () => c.outcome.token);
  assert.equal(await holderOf(c.outcome.token), session);
  assert.equal(reloaded.storage.get('anteroom:token:line'), c.outcome.token);
  await reloaded.Anteroom.leave({});
  await second.Anteroom.leave({ room: 'line' });
});

test('stay keeps the slot and calls onLost once the slot is gone', async () => {
  await api('PUT', '/v1/rooms/stay', { capacity: 1, checkin_timeout_ms: 900, grace_ms: 60000 });
  const { token } = (await api('POST', '/v1/rooms/stay/check', { session: 'visitor' })).body;
  assert.ok(token);

  // The protected page, in a tab that only has the token in its address.
  const page = tab({ ...blocked('reset'), search: `?anteroom_token=${token}` });
  const statuses = [];
  let lost = null;
  page.Anteroom.stay({ room: 'stay', onUpdate: (s) => statuses.push(s), onLost: (s) => { lost = s; } });
  await eventually('active statuses', () => statuses.filter((s) => s.status === 'active').length >= 2);
  // The page keeps the slot with the token alone: the session id (the session's credential)
  // is never told to it, and each fresh token replaces the one kept.
  assert.ok(statuses.every((s) => s.session === null), JSON.stringify(statuses[0]));
  assert.ok(!page.storage.get('anteroom:session:stay'), 'no session id kept');
  assert.ok(statuses.at(-1).token);
  assert.equal(page.storage.get('anteroom:token:stay'), statuses.at(-1).token);
  // Each live attempt named the token (a subprotocol, a header), none in its URL; the checks
  // carry it in their body.
  const attempts = page.attempts();
  assert.deepEqual(attempts.map((a) => a.kind), ['ws', 'sse']);
  for (const a of attempts) {
    assert.deepEqual(carried(a), { token }, a.url);
    assert.equal(new URL(a.url).search, '', a.url);
  }
  assert.equal(page.fetched('/check')[0].body.token, token);

  // The app ends the session and someone else takes the slot: the admission is over, and
  // stay() never joins anew.
  assert.equal((await api('DELETE', '/v1/rooms/stay/sessions/visitor')).status, 200);
  assert.equal((await api('POST', '/v1/rooms/stay/check', { session: 'intruder' })).body.status,
    'active');
  await eventually('onLost', () => lost);
  assert.equal(lost.status, 'gone');
  assert.equal(lost.session, null);
  const count = statuses.length;
  await sleep(800);
  assert.equal(statuses.length, count, 'no more updates after onLost');
  await api('POST', '/v1/rooms/stay/leave', { session: 'intruder', final: true });
  await page.Anteroom.leave({});
});

test('stay without a session sends the person to the waiting page', async () => {
  const t = tab();
  t.Anteroom.stay({ room: 'stay' });
  await eventually('the redirect', () => t.location.href.endsWith('/wait/stay'));
  assert.equal(t.location.href, `${server.base}/wait/stay`);
});

test('API refusals reject wait()', async () => {
  const unknown = waitIn(tab(blocked('reset')), 'no-such-room');
  await eventually('the rejection', () => unknown.outcome.error);
  assert.equal(unknown.outcome.error.name, 'ApiError');
  assert.equal(unknown.outcome.error.status, 404);
  assert.equal(unknown.outcome.error.code, 'unknown_room');

  const bad = waitIn(tab(), 'bad name');
  await eventually('the rejection', () => bad.outcome.error);
  assert.equal(bad.outcome.error.status, 400);
});

test('a working WebSocket is reconnected, not abandoned', async () => {
  await api('PUT', '/v1/rooms/ws', { capacity: 1 });
  let opened = 0;
  class ScriptedWebSocket {
    constructor() {
      const n = ++opened;
      setTimeout(() => {
        if (n === 1) {
          this.onmessage?.({ data: JSON.stringify({ type: 'heartbeat', time_ms: 1 }) });
          this.onmessage?.({ data: JSON.stringify({ type: 'status', session: 's1',
            status: 'waiting', position: 2, waiting: 2, active: 1, capacity: 1, eta_ms: null,
            token: null }) });
          this.onclose?.({});  // the connection drops
        } else {
          this.onmessage?.({ data: JSON.stringify({ type: 'status', session: 's1',
            status: 'active', position: null, waiting: 0, active: 1, capacity: 1, eta_ms: 0,
            token: 'x.eyJzdWIiOiJzMSJ9.y' }) });
        }
      }, 5);
    }
    close() {}
  }
  const t = tab({ transports: { WebSocket: ScriptedWebSocket } });
  const w = waitIn(t, 'ws');
  await eventually('admission', () => w.outcome.token);
  const sockets = t.attempts();
  assert.deepEqual(sockets.map((a) => a.kind), ['ws', 'ws']);
  // The reconnect names the session the first connection was told, in its subprotocol.
  assert.equal(sockets[1].url, `${server.base.replace('http', 'ws')}/v1/rooms/ws/ws`);
  assert.deepEqual(carried(sockets[1]), { session: 's1' });
  assert.deepEqual(w.updates.map((s) => s.status), ['waiting', 'active']);
  assert.equal(t.Anteroom.decodeToken(w.outcome.token).sub, 's1');  // the scripted token
});

test('a WebSocket lost right after its upgrade leaves no second session behind', async () => {
  // The server answers the upgrade (the session joins and is admitted) and the connection dies
  // before the first message: the SSE fallback goes on as the same session, so the room holds
  // one person, and the next tab waits at position 1 instead of behind a session nobody knows.
  // Only a server that reads the session from the subprotocol and the header passes.
  await api('PUT', '/v1/rooms/lost', { capacity: 1, grace_ms: 60000 });
  const net = networked({ upgradeOnly: true });
  const first = tab(net);
  const a = waitIn(first, 'lost');
  await eventually('the first admission', () => a.outcome.token);
  const attempts = first.attempts();
  assert.deepEqual(attempts.map((x) => x.kind), ['ws', 'sse']);
  const session = first.storage.get('anteroom:session:lost');
  for (const x of attempts) {
    assert.deepEqual(carried(x), { session }, x.url);
    assert.ok(!x.url.includes('?'), x.url);
  }
  // The server took the upgrade and answered the plain subprotocol (a browser fails a
  // handshake whose answer picks none of those offered).
  assert.deepEqual(net.upgrades.map((u) => [u.status, u.protocol]), [[101, 'anteroom']]);
  assert.equal(await holderOf(a.outcome.token), session);
  const room = (await api('GET', '/v1/rooms/lost')).body;
  assert.equal(room.active, 1);
  assert.equal(room.waiting, 0);

  const second = tab(networked({ upgradeOnly: true }));
  const b = waitIn(second, 'lost');
  await eventually('position 1', () => b.last()?.position === 1);
  await first.Anteroom.leave({ final: true });
  await eventually('the second admission', () => b.outcome.token);
  await second.Anteroom.leave({});
});

// An event stream scripted chunk by chunk: events split across chunks, CRLF line ends, a
// comment, a heartbeat, a multi-line data field. The stream stays open after the last chunk.
function scriptedEvents(chunks) {
  const encoder = new TextEncoder();
  return new Response(new ReadableStream({
    async start(controller) {
      for (const chunk of chunks) {
        await sleep(5);
        controller.enqueue(encoder.encode(chunk));
      }
    },
  }), { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
}

test('SSE (read with fetch) is used when WebSockets never work', async () => {
  await api('PUT', '/v1/rooms/sse', { capacity: 1 });
  let checks = 0;
  const scripted = (url, init) => {
    if (String(url).endsWith('/check')) checks++;
    if (!isEvents(String(url))) return fetch(url, init);
    return Promise.resolve(scriptedEvents([
      'retry: 1000\r\n\r\n: a comment\r\n\r\n',
      'data: {"type":"status","session":"e1","sta',
      'tus":"waiting","position":1,"token":null}\r\n\r\n',
      // A CRLF split between two chunks is one line end: the event goes on.
      'data: {"type":"status","session":"e1",\r',
      '\n',
      'data: "status":"waiting","position":1,\r',
      '\ndata: "waiting":2,"token":null}\r\n\r\n',
      'data: {"type":"heartbeat","time_ms":1}\n\n',
      'data: {"type":"status",\ndata: "session":"e1","status":"active",',
      '"token":"x.eyJzdWIiOiJlMSJ9.y"}\n\n',
    ]));
  };
  const t = tab({ fetchImpl: scripted, transports: { WebSocket: BlockedWebSocket } });
  const w = waitIn(t, 'sse');
  const named = t.storage.get('anteroom:session:sse');  // before the scripted 'e1' replaces it
  assert.equal(await eventually('admission', () => w.outcome.token), 'x.eyJzdWIiOiJlMSJ9.y');
  assert.deepEqual(w.updates.map((s) => [s.status, s.position ?? null]),
    [['waiting', 1], ['waiting', 1], ['active', null]]);
  const attempts = t.attempts();
  assert.deepEqual(attempts.map((a) => a.kind), ['ws', 'sse']);
  assert.equal(attempts[1].url, `${server.base}/v1/rooms/sse/events`);
  assert.deepEqual(carried(attempts[1]), { session: named });
  assert.equal(checks, 0);
});

test('without streaming fetch (no ReadableStream), SSE is skipped for polling', async () => {
  // EventSource could not carry the credential but in the URL, so a browser that cannot read
  // a stream with fetch polls instead.
  await api('PUT', '/v1/rooms/no-streams', { capacity: 1 });
  let eventSources = 0;
  const t = tab({ transports: { WebSocket: BlockedWebSocket, ReadableStream: undefined,
    EventSource: class { constructor() { eventSources++; } close() {} } } });
  const w = waitIn(t, 'no-streams');
  await eventually('admission', () => w.outcome.token);
  assert.deepEqual(t.attempts().map((a) => a.kind), ['ws']);
  assert.equal(eventSources, 0, 'an EventSource, which could carry the session only in its URL');
  assert.ok(t.fetched('/check').length >= 1);
  await t.Anteroom.leave({});
});

test('an unreachable server is retried with growing delays', async () => {
  let calls = 0;
  const refusing = () => {
    calls++;
    return Promise.reject(new TypeError('fetch failed'));
  };
  const t = tab({ base: 'http://127.0.0.1:9', fetchImpl: refusing,
                  transports: { WebSocket: BlockedWebSocket } });
  t.Anteroom.wait({ room: 'any' }).catch(() => {});
  await sleep(3000);
  t.Anteroom.leave({}).catch(() => {});  // closes the connection
  // 250 ms doubling (with jitter, at least half of each step): at most ~8 tries in 3 s.
  assert.ok(calls >= 3 && calls <= 10, `${calls} requests in 3 s`);
  const after = calls;
  await sleep(1500);
  assert.equal(calls, after, 'nothing is sent after leave');
});

test('a room with a challenge: wait() solves its puzzle, then joins with the proof', async () => {
  await api('PUT', '/v1/rooms/pow', { capacity: 1, challenge: { type: 'pow', difficulty: 8 } });
  const refused = await api('POST', '/v1/rooms/pow/check', { session: 'no-proof' });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.error.code, 'challenge_required');

  const t = tab(networked({ upgradeOnly: true }));
  const w = waitIn(t, 'pow');
  await eventually('admission', () => w.outcome.token);
  const session = t.storage.get('anteroom:session:pow');
  // One puzzle, asked for the session in a header.
  const puzzles = t.fetched('/challenge');
  assert.deepEqual(puzzles.map((p) => p.url), [`${server.base}/v1/rooms/pow/challenge`]);
  assert.equal(puzzles[0].headers['anteroom-session'], session);
  // Every transport carried the session's proof in its URL (no secret: it only works for the
  // session) and the session beside it (the WebSocket's upgrade joined; SSE went on as the same
  // session), and the proof is right.
  const attempts = t.attempts();
  assert.deepEqual(attempts.map((a) => a.kind), ['ws', 'sse']);
  for (const a of attempts) {
    const params = new URL(a.url).searchParams;
    assert.deepEqual([...params.keys()].sort(), ['challenge', 'solution'], a.url);
    assert.deepEqual(carried(a), { session }, a.url);
    assert.match(params.get('solution'), /^\d+$/);
    assert.ok(proofShows(params.get('challenge'), params.get('solution'), 8), a.url);
  }
  assert.equal(await holderOf(w.outcome.token), session);
  assert.equal((await api('GET', '/v1/rooms/pow')).body.active, 1);
  await t.Anteroom.leave({});
});

test('polling joins a room with a challenge with the proof in the body', async () => {
  await api('PUT', '/v1/rooms/pow-poll',
    { capacity: 1, checkin_timeout_ms: 900, challenge: { type: 'pow', difficulty: 6 } });
  const t = tab(blocked('reset'));
  const w = waitIn(t, 'pow-poll');
  await eventually('admission', () => w.outcome.token);
  const bodies = t.fetched('/check').map((c) => c.body);
  assert.ok(bodies.length >= 1);
  const [first] = bodies;
  assert.equal(first.session, t.storage.get('anteroom:session:pow-poll'));
  assert.ok(proofShows(first.challenge, first.solution, 6));
  await t.Anteroom.leave({});
});

test('a refused join (429) is retried no sooner than its Retry-After', async () => {
  // One place per client (every tab here is 127.0.0.1); a place left behind drops out after
  // 5 s, which is what Retry-After says.
  await api('PUT', '/v1/rooms/limited',
    { capacity: 5, checkin_timeout_ms: 5000, places_per_client: 1 });
  const holder = (await api('POST', '/v1/rooms/limited/check', { session: 'holder' }));
  assert.equal(holder.status, 200);
  let checks = 0;
  let retryAfter = null;
  const counting = async (url, init) => {
    const response = await fetch(url, init);
    if (String(url).endsWith('/check')) {
      checks++;
      retryAfter = response.headers.get('Retry-After');
    }
    return response;
  };
  const t = tab({ fetchImpl: eventsBlocked(counting), transports: { WebSocket: BlockedWebSocket } });
  const w = waitIn(t, 'limited');
  await sleep(3000);
  assert.equal(retryAfter, '5');
  assert.equal(checks, 1, 'asked again before Retry-After');
  assert.equal(w.outcome.error, null, 'a 429 is not fatal');
  // The holder gives its place up: the tab gets in once Retry-After has passed.
  await api('POST', '/v1/rooms/limited/leave', { session: 'holder', final: true });
  await eventually('admission', () => w.outcome.token, 10000);
  await t.Anteroom.leave({});
});

// Proxies and CDNs keep every URL in their access logs, so the secrets must not be in one.
// --- Launch day: pre-queues and closed rooms -----------------------------------------------------

test('polling asks again after refresh_after_ms: a pre-queue at its start, not every 2 s', async () => {
  // The pre-queue is open and the start 6 s away: refresh_after_ms is the time to the start
  // (less than half the check-in timeout, 15 s), where the old interval was 2 s.
  await api('PUT', '/v1/rooms/prequeue', { capacity: 1 });
  const now = Date.now();
  const put = await api('PUT', '/v1/rooms/prequeue/schedule/drop',
    { prequeue_at: now, starts_at: now + 6000, ends_at: now + 60000 });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  const t = tab(blocked('refused'));
  const seen = [];
  const outcome = {};
  t.Anteroom.wait({ room: 'prequeue', onUpdate: (s) => seen.push({ at: Date.now(), s }) })
    .then((token) => { outcome.token = token; }, (err) => { outcome.error = err; });
  await eventually('the pre-queue', () => seen.length > 0);
  const first = seen[0];
  assert.equal(first.s.status, 'prequeue');
  assert.equal(first.s.phase, 'prequeue');
  assert.equal(first.s.position, null);
  assert.ok(first.s.starts_in_ms > 0 && first.s.starts_in_ms <= 6000, JSON.stringify(first.s));
  assert.equal(first.s.refresh_after_ms, first.s.starts_in_ms);
  // startsAt: the start by this clock, for a countdown between messages.
  assert.ok(Math.abs(first.s.startsAt - (now + 6000)) < 300, `${first.s.startsAt - now}`);
  assert.equal(typeof first.s.endsAt, 'number');
  await eventually('admission at the start', () => outcome.token, 10000);
  assert.ok(seen[1].at - first.at >= first.s.starts_in_ms - 100,
    `asked again ${seen[1].at - first.at} ms later, the start ${first.s.starts_in_ms} ms away`);
  assert.ok(Date.now() - (now + 6000) < 2000, 'admitted soon after the start');
  assert.equal(seen.at(-1).s.status, 'active');
  await t.Anteroom.leave({});
});

test('a closed room is no refusal: one connection, then the room asked again after refresh_after_ms', async () => {
  await api('PUT', '/v1/rooms/shut', { capacity: 1, queueing_method: 'reject' });
  // Live: the WebSocket's first status says closed; the client closes it and waits.
  const live = tab(networked());
  const w = waitIn(live, 'shut');
  const closed = await eventually('closed', () => w.last()?.status === 'closed' && w.last());
  assert.equal(closed.phase, 'closed');
  assert.equal(closed.refresh_after_ms, 30000);
  assert.equal(closed.position, null);
  // Polling: one check, the next one 30 s away.
  const polling = tab(blocked('refused'));
  const p = waitIn(polling, 'shut');
  await eventually('closed by polling', () => p.last()?.status === 'closed');
  await sleep(1500);
  assert.equal(live.attempts().length, 1, 'no reconnects');
  assert.deepEqual(w.updates.map((s) => s.status), ['closed']);
  assert.equal(polling.fetched('/check').length, 1);
  assert.equal(w.outcome.error, null);
  assert.equal(p.outcome.error, null);
  assert.equal((await api('GET', '/v1/rooms/shut')).body.waiting, 0, 'nothing kept');
});

test('no URL the client requests names the session or a token, over each transport', async (t) => {
  const setups = {
    ws: () => networked(),
    sse: () => ({ transports: { WebSocket: BlockedWebSocket } }),
    poll: () => blocked('reset'),
  };
  for (const [kind, setup] of Object.entries(setups)) {
    await t.test(`${kind}: wait() in line with a challenge, admitted, then stay() with the token`, async () => {
      const room = `secrets-${kind}`;
      // checkin_timeout_ms 4000: a polling waiter asks every 2 s (refresh_after_ms).
      await api('PUT', `/v1/rooms/${room}`, { capacity: 1, grace_ms: 60000, checkin_timeout_ms: 4000,
        challenge: { type: 'pow', difficulty: 4 } });
      const holder = newSession();
      await joinWithProof(room, holder);

      // wait(): asks for a puzzle, waits in line behind the holder, is admitted.
      const waiter = tab(setup());
      const w = waitIn(waiter, room);
      await eventually('a waiting status', () => w.last()?.status === 'waiting');
      await api('POST', `/v1/rooms/${room}/leave`, { session: holder, final: true });
      const token = await eventually('admission', () => w.outcome.token);
      const session = waiter.storage.get(`anteroom:session:${room}`);
      assert.equal(await holderOf(token), session, 'the server got the session named');
      const used = waiter.attempts().map((a) => a.kind);
      assert.deepEqual(used, { ws: ['ws'], sse: ['ws', 'sse'], poll: ['ws', 'sse'] }[kind]);
      assert.equal(waiter.fetched('/check').length > 0, kind === 'poll', 'polled only when both failed');
      assert.equal(waiter.fetched('/challenge').length, 1);

      // stay() on the protected page, handed the token only.
      const page = tab({ ...setup(), search: `?anteroom_token=${token}` });
      const statuses = [];
      page.Anteroom.stay({ room, onUpdate: (s) => statuses.push(s), onLost: () => {} });
      await eventually('an active status', () => statuses.some((s) => s.status === 'active'));
      assert.ok(statuses.every((s) => s.session === null));

      // Each credential went where it should, so the check below is not met by sending none.
      for (const a of waiter.attempts()) assert.deepEqual(carried(a), { session }, a.url);
      assert.equal(waiter.fetched('/challenge')[0].headers['anteroom-session'], session);
      for (const a of page.attempts()) assert.deepEqual(carried(a), { token }, a.url);
      if (kind === 'poll') assert.equal(page.fetched('/check')[0].body.token, token);

      const secrets = [session, token, ...w.updates.map((s) => s.token),
        ...statuses.map((s) => s.token)].filter(Boolean);
      const urls = [...waiter.sent, ...page.sent].map((s) => s.url);
      assert.ok(urls.some((u) => u.includes(`/v1/rooms/${room}/challenge`)));
      const live = { ws: '/ws', sse: '/events', poll: '/check' }[kind];
      assert.ok(urls.some((u) => new URL(u).pathname.endsWith(live)), urls.join('\n'));
      assert.deepEqual(leaking(urls, secrets), []);
      await waiter.Anteroom.leave({});
    });
  }
});

// --- The server's side of the credential --------------------------------------------------------

// The first event of an event stream (or the refusal): {status, body | event}.
async function firstEvent(path, headers = {}) {
  const abort = new AbortController();
  const response = await fetch(server.base + path, { headers, signal: abort.signal });
  if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    return { status: response.status, body: await response.json() };
  }
  const decoder = new TextDecoder();
  let text = '';
  try {
    for await (const chunk of response.body) {
      text += decoder.decode(chunk, { stream: true });
      const data = text.split('\n\n').find((e) => e.startsWith('data:'));
      if (data && text.includes(`${data}\n\n`)) {
        return { status: response.status, event: JSON.parse(data.slice(5)) };
      }
    }
  } finally {
    abort.abort();
  }
  throw new Error(`no event: ${text}`);
}

// A WebSocket handshake offering `protocols` (and sending `headers`): {status, protocol, event
// (the first message)} once upgraded, {status, body} when refused.
function handshake(path, protocols, headers = {}) {
  return new Promise((resolve, reject) => {
    const request = http.get(new URL(path, server.base), { agent: false, headers: {
      Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
      'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64'),
      ...(protocols.length ? { 'Sec-WebSocket-Protocol': protocols.join(', ') } : {}),
      ...headers } });
    request.on('upgrade', (res, socket, head) => {
      let buffer = head;
      // The first frame: a text message, unmasked, shorter than 64 KiB.
      const frame = () => {
        if (buffer.length < 4) return;
        const short = buffer[1] & 0x7f;
        const [at, size] = short === 126 ? [4, buffer.readUInt16BE(2)] : [2, short];
        if (buffer.length < at + size) return;
        socket.destroy();
        resolve({ status: res.statusCode, protocol: res.headers['sec-websocket-protocol'],
          event: JSON.parse(buffer.subarray(at, at + size).toString('utf8')) });
      };
      socket.on('data', (d) => { buffer = Buffer.concat([buffer, d]); frame(); });
      socket.on('error', reject);
      frame();
    });
    request.on('response', async (res) => {
      let body = '';
      for await (const d of res) body += d;
      resolve({ status: res.statusCode, body: JSON.parse(body) });
    });
    request.on('error', reject);
  });
}

const b64 = (text) => Buffer.from(text).toString('base64url');

test('the server reads the credential from a header, a subprotocol, or the query', async () => {
  await api('PUT', '/v1/rooms/cred', { capacity: 5, target_url: 'https://shop.example/app' });
  const session = newSession();
  const other = newSession();

  // Headers: the event stream and the challenge.
  const byHeader = await firstEvent('/v1/rooms/cred/events', { 'Anteroom-Session': session });
  assert.equal(byHeader.event.session, session);
  assert.equal(byHeader.event.status, 'active');
  const token = byHeader.event.token;
  assert.ok(token);
  const puzzle = await api('GET', '/v1/rooms/cred/challenge', undefined, { 'Anteroom-Session': session });
  assert.equal(puzzle.body.session, session);
  const byTokenHeader = await firstEvent('/v1/rooms/cred/events', { 'Anteroom-Token': token });
  assert.equal(byTokenHeader.event.status, 'active');
  assert.equal(byTokenHeader.event.session, null, 'a token never learns the session');

  // Subprotocols: a real handshake; the server answers the plain "anteroom".
  const bySub = await handshake('/v1/rooms/cred/ws', ['anteroom', `anteroom.session.${b64(session)}`]);
  assert.equal(bySub.status, 101);
  assert.equal(bySub.protocol, 'anteroom');
  assert.equal(bySub.event.session, session);
  const byTokenSub = await handshake('/v1/rooms/cred/ws', ['anteroom', `anteroom.token.${b64(token)}`]);
  assert.equal(byTokenSub.status, 101);
  assert.equal(byTokenSub.protocol, 'anteroom');
  assert.equal(byTokenSub.event.session, null);
  assert.equal(byTokenSub.event.status, 'active');
  // Offering "anteroom" alone: a new session the server names.
  const fresh = await handshake('/v1/rooms/cred/ws', ['anteroom']);
  assert.equal(fresh.status, 101);
  assert.equal(fresh.protocol, 'anteroom');
  assert.ok(fresh.event.session && fresh.event.session !== session);

  // The query still works (it is what lands in access logs).
  const byQuery = await firstEvent(`/v1/rooms/cred/events?session=${session}`);
  assert.equal(byQuery.event.session, session);

  // The first present counts: header, then subprotocol, then query.
  assert.equal((await firstEvent(`/v1/rooms/cred/events?session=${other}`,
    { 'Anteroom-Session': session })).event.session, session);
  assert.equal((await handshake(`/v1/rooms/cred/ws?session=${other}`,
    ['anteroom', `anteroom.session.${b64(session)}`])).event.session, session);
  assert.equal((await handshake('/v1/rooms/cred/ws',
    ['anteroom', `anteroom.session.${b64(other)}`], { 'Anteroom-Session': session })).event.session,
  session);

  // Refusals: a session and a token at once (wherever each is), a subprotocol value that is
  // not base64url.
  for (const [what, answer] of [
    ['both headers', await firstEvent('/v1/rooms/cred/events',
      { 'Anteroom-Session': session, 'Anteroom-Token': token })],
    ['a header and the query', await firstEvent(`/v1/rooms/cred/events?token=${token}`,
      { 'Anteroom-Session': session })],
    ['both subprotocols', await handshake('/v1/rooms/cred/ws',
      ['anteroom', `anteroom.session.${b64(session)}`, `anteroom.token.${b64(token)}`])],
    ['not base64url', await handshake('/v1/rooms/cred/ws', ['anteroom', 'anteroom.session.a*b'])],
    ['padded base64url', await handshake('/v1/rooms/cred/ws',
      ['anteroom', `anteroom.session.${Buffer.from('ab').toString('base64')}`])],
  ]) {
    assert.equal(answer.status, 400, `${what}: ${JSON.stringify(answer)}`);
    assert.equal(answer.body.error.code, 'invalid_argument', what);
  }

  // A page of another origin (here the room's target) may send the headers: the preflight
  // allows them.
  for (const route of ['events', 'challenge']) {
    const preflight = await new Promise((resolve, reject) => {
      http.request(new URL(`/v1/rooms/cred/${route}`, server.base), { method: 'OPTIONS', headers: {
        Origin: 'https://shop.example', 'Access-Control-Request-Method': 'GET',
        'Access-Control-Request-Headers': 'anteroom-session,anteroom-token' } }, (res) => {
        res.resume();
        resolve(res);
      }).on('error', reject).end();
    });
    assert.equal(preflight.statusCode, 204, route);
    assert.equal(preflight.headers['access-control-allow-origin'], 'https://shop.example');
    const allowed = preflight.headers['access-control-allow-headers'].toLowerCase().split(/,\s*/);
    assert.ok(allowed.includes('anteroom-session') && allowed.includes('anteroom-token'), allowed.join());
  }
  await api('POST', '/v1/rooms/cred/leave', { session, final: true });
});
