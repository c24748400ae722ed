// web/anteroom.js in Node against a real `anteroom serve`: each "tab" is a fresh VM context
// with its own sessionStorage, location and transports, running the script the server serves.
// Covers the WebSocket -> SSE -> polling fallback, polling itself (the queue moving, reload
// resuming the same place, leave, stay losing its slot), reconnects and API errors.
// Usage: node tests/web/client_test.js ANTEROOM_BINARY
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const http = require('node:http');
const crypto = require('node:crypto');
const vm = require('node:vm');

const binary = process.argv[2];
if (!binary) {
  console.error('usage: node client_test.js ANTEROOM_BINARY');
  process.exit(2);
}

let server = null;  // {child, base}
let script = '';
const tabs = [];             // closed after each test, as a browser closes its tabs
const openConnections = new Set();

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

async function api(method, path, body) {
  const response = await fetch(server.base + path, {
    method,
    headers: body ? { 'Content-Type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: response.status, body: await response.json() };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(what, check, timeoutMs = 8000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

// Transports that never work, as behind a proxy that blocks them; they record each attempt.
function blockedTransports(attempts) {
  class BlockedWebSocket {
    constructor(url) {
      attempts.push(['ws', url]);
      setTimeout(() => { this.onerror?.({}); this.onclose?.({}); }, 5);
    }
    close() {}
  }
  class BlockedEventSource {
    constructor(url) {
      attempts.push(['sse', url]);
      setTimeout(() => this.onerror?.({}), 5);
    }
    close() {}
  }
  return { WebSocket: BlockedWebSocket, EventSource: BlockedEventSource };
}

// Transports that reach the server for real: a WebSocket handshake (Node 20 has no client;
// any answer but a usable socket counts as failure) and an EventSource over fetch.
function networkTransports(attempts) {
  class HandshakeWebSocket {
    constructor(url) {
      attempts.push(['ws', url]);
      const target = new URL(url);
      target.protocol = 'http:';
      openConnections.add(this);
      this.request = http.get(target, { headers: {
        Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': crypto.randomBytes(16).toString('base64') } });
      this.request.on('response', (res) => { this.status = res.statusCode; res.resume(); this.fail(); });
      this.request.on('upgrade', (res, socket) => { socket.destroy(); this.fail(); });
      this.request.on('error', () => this.fail());
    }
    fail() {
      if (this.done) return;
      this.done = true;
      this.onerror?.({});
      this.onclose?.({});
    }
    close() { this.done = true; this.request.destroy(); }
  }
  class FetchEventSource {
    constructor(url) {
      attempts.push(['sse', url]);
      openConnections.add(this);
      this.abort = new AbortController();
      this.run(url);
    }
    async run(url) {
      try {
        const res = await fetch(url, { signal: this.abort.signal });
        const type = res.headers.get('content-type') || '';
        if (!res.ok || !type.startsWith('text/event-stream')) {
          await res.body?.cancel();
          return this.fail();
        }
        const decoder = new TextDecoder();
        let buffer = '';
        for await (const chunk of res.body) {
          buffer += decoder.decode(chunk, { stream: true });
          for (let end; (end = buffer.indexOf('\n\n')) >= 0;) {
            const data = buffer.slice(0, end).split('\n').filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
            buffer = buffer.slice(end + 2);
            if (data) this.onmessage?.({ data });
          }
        }
      } catch (_) { /* aborted or failed */ }
      this.fail();
    }
    fail() {
      if (this.closed) return;
      this.closed = true;
      this.onerror?.({});
    }
    close() { this.closed = true; this.abort.abort(); }
  }
  return { WebSocket: HandshakeWebSocket, EventSource: FetchEventSource };
}

// A browser tab: the served anteroom.js in a context of its own. Its timers are its own, so
// closing it (after each test) stops everything it would still do.
function tab({ storage = new Map(), transports = {}, search = '', base = server.base,
               fetchImpl = fetch } = {}) {
  const location = { href: `${base}/page${search}`, origin: base, search, protocol: 'http:' };
  const timers = new Set();
  let closed = false;
  const tabSetTimeout = (fn, ms, ...args) => {
    if (closed) return 0;
    const handle = setTimeout(() => { timers.delete(handle); fn(...args); }, ms);
    timers.add(handle);
    return handle;
  };
  const tabClearTimeout = (handle) => { timers.delete(handle); clearTimeout(handle); };
  tabs.push({ close: () => { closed = true; timers.forEach(clearTimeout); } });
  const context = {
    console, setTimeout: tabSetTimeout, clearTimeout: tabClearTimeout, URL, URLSearchParams, atob,
    fetch: fetchImpl, crypto: globalThis.crypto, location, document: { currentScript: { src: `${base}/anteroom.js` }, cookie: '' },
    sessionStorage: {
      getItem: (k) => (storage.has(k) ? storage.get(k) : null),
      setItem: (k, v) => storage.set(k, String(v)),
      removeItem: (k) => storage.delete(k),
    },
    ...transports,
  };
  context.window = context;
  vm.createContext(context);
  vm.runInContext(script, context, { filename: 'anteroom.js' });
  return { Anteroom: context.Anteroom, storage, location };
}

// Wraps wait() to expose every status and the outcome.
function waitIn(t, room) {
  const updates = [];
  const outcome = { token: null, error: null };
  t.Anteroom.wait({ room, onUpdate: (s) => updates.push(s) })
    .then((token) => { outcome.token = token; }, (err) => { outcome.error = err; });
  return { updates, outcome, last: () => updates[updates.length - 1] };
}

test.before(async () => {
  server = await startServer();
  const response = await fetch(`${server.base}/anteroom.js`);
  assert.equal(response.status, 200);
  script = await response.text();
});

test.afterEach(() => {
  for (const t of tabs.splice(0)) t.close();
  for (const c of openConnections) c.close();
  openConnections.clear();
});

test.after(() => {
  if (server) server.child.kill('SIGTERM');
});

test('blocked WebSocket and SSE fall back to polling, in that order', async () => {
  await api('PUT', '/v1/rooms/fallback', { capacity: 1 });
  const attempts = [];
  const t = tab({ transports: blockedTransports(attempts) });
  const w = waitIn(t, 'fallback');
  await eventually('admission', () => w.outcome.token);
  assert.deepEqual(attempts.map(([kind]) => kind), ['ws', 'sse']);
  // The tab names its session before the first connection, and every transport carries it.
  const session = t.storage.get('anteroom:session:fallback');
  assert.match(session, /^[0-9a-f]{32}$/);
  assert.equal(attempts[0][1], `${server.base.replace('http', 'ws')}/v1/rooms/fallback/ws?session=${session}`);
  assert.equal(attempts[1][1], `${server.base}/v1/rooms/fallback/events?session=${session}`);
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
  // checkin_timeout_ms 900: polls every 300 ms.
  await api('PUT', '/v1/rooms/line', { capacity: 1, checkin_timeout_ms: 900, grace_ms: 60000 });
  const attempts = [];
  const first = tab({ transports: blockedTransports(attempts) });
  const a = waitIn(first, 'line');
  await eventually('the first admission', () => a.outcome.token);
  // Both live transports were tried first, in order (blocked, as behind a strict proxy).
  assert.deepEqual(attempts.slice(0, 2).map(([kind]) => kind), ['ws', 'sse']);

  const second = tab({ transports: blockedTransports(attempts) });
  const b = waitIn(second, 'line');
  const waiting = await eventually('a waiting status', () => b.last()?.status === 'waiting' && b.last());
  assert.equal(waiting.position, 1);
  const session = second.storage.get('anteroom:session:line');
  assert.equal(session, waiting.session);

  // Three polls within about a second: the interval follows checkin_timeout_ms / 3.
  const seen = b.updates.length;
  await sleep(1000);
  assert.ok(b.updates.length - seen >= 2, `${b.updates.length - seen} updates in 1 s`);

  // A reload: a new tab with the same sessionStorage is the same place in line. (The old
  // tab's connection would die with it; here it keeps polling the same session, harmlessly.)
  const reloaded = tab({ storage: second.storage, transports: blockedTransports(attempts) });
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
  const page = tab({ transports: blockedTransports([]), search: `?anteroom_token=${token}` });
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
  const unknown = waitIn(tab({ transports: blockedTransports([]) }), 'no-such-room');
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
  const sockets = [];
  class ScriptedWebSocket {
    constructor(url) {
      sockets.push(url);
      const n = sockets.length;
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
  const t = tab({ transports: { WebSocket: ScriptedWebSocket, EventSource: undefined } });
  const w = waitIn(t, 'ws');
  await eventually('admission', () => w.outcome.token);
  assert.equal(sockets.length, 2);
  assert.match(sockets[1], /\/v1\/rooms\/ws\/ws\?session=s1$/);
  assert.deepEqual(w.updates.map((s) => s.status), ['waiting', 'active']);
  assert.equal(t.Anteroom.decodeToken(w.outcome.token).sub, 's1');  // the scripted token
});

test('a WebSocket lost right after its upgrade leaves no second session behind', async () => {
  // The server answers the upgrade (the session joins and is admitted) and the connection dies
  // before the first message: the SSE fallback goes on as the same session, so the room holds
  // one person, and the next tab waits at position 1 instead of behind a session nobody knows.
  await api('PUT', '/v1/rooms/lost', { capacity: 1, grace_ms: 60000 });
  const attempts = [];
  const first = tab({ transports: networkTransports(attempts) });
  const a = waitIn(first, 'lost');
  await eventually('the first admission', () => a.outcome.token);
  assert.deepEqual(attempts.map(([kind]) => kind), ['ws', 'sse']);
  const session = first.storage.get('anteroom:session:lost');
  assert.ok(attempts.every(([, url]) => url.endsWith(`?session=${session}`)), String(attempts));
  assert.equal(await holderOf(a.outcome.token), session);
  const room = (await api('GET', '/v1/rooms/lost')).body;
  assert.equal(room.active, 1);
  assert.equal(room.waiting, 0);

  const second = tab({ transports: networkTransports([]) });
  const b = waitIn(second, 'lost');
  await eventually('position 1', () => b.last()?.position === 1);
  await first.Anteroom.leave({ final: true });
  await eventually('the second admission', () => b.outcome.token);
  await second.Anteroom.leave({});
});

test('SSE is used when WebSockets never work', async () => {
  await api('PUT', '/v1/rooms/sse', { capacity: 1 });
  const attempts = [];
  class ScriptedEventSource {
    constructor(url) {
      attempts.push(['sse', url]);
      setTimeout(() => this.onmessage?.({ data: JSON.stringify({ type: 'status',
        session: 'e1', status: 'active', token: 'x.eyJzdWIiOiJlMSJ9.y' }) }), 5);
    }
    close() {}
  }
  let checks = 0;
  const counting = (url, init) => {
    if (String(url).endsWith('/check')) checks++;
    return fetch(url, init);
  };
  const t = tab({ fetchImpl: counting, transports: {
    WebSocket: blockedTransports(attempts).WebSocket, EventSource: ScriptedEventSource } });
  const w = waitIn(t, 'sse');
  assert.equal(await eventually('admission', () => w.outcome.token), 'x.eyJzdWIiOiJlMSJ9.y');
  assert.deepEqual(attempts.map(([kind]) => kind), ['ws', 'sse']);
  assert.equal(checks, 0);
});

test('an unreachable server is retried with growing delays', async () => {
  let calls = 0;
  const refusing = () => {
    calls++;
    return Promise.reject(new TypeError('fetch failed'));
  };
  const t = tab({ base: 'http://127.0.0.1:9', fetchImpl: refusing,
                  transports: blockedTransports([]) });
  t.Anteroom.wait({ room: 'any' }).catch(() => {});
  await sleep(3000);
  t.Anteroom.leave({}).catch(() => {});  // closes the connection
  // 250 ms doubling (with jitter, at least half of each step): at most ~8 tries in 3 s.
  assert.ok(calls >= 3 && calls <= 10, `${calls} requests in 3 s`);
  const after = calls;
  await sleep(1500);
  assert.equal(calls, after, 'nothing is sent after leave');
});

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

test('a room with a challenge: wait() solves its puzzle, then joins with the proof', async () => {
  await api('PUT', '/v1/rooms/pow', { capacity: 1, challenge: { type: 'pow', difficulty: 8 } });
  const refused = await api('POST', '/v1/rooms/pow/check', { session: 'no-proof' });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.error.code, 'challenge_required');

  const attempts = [];
  const puzzles = [];
  const counting = (url, init) => {
    if (String(url).includes('/challenge')) puzzles.push(String(url));
    return fetch(url, init);
  };
  const t = tab({ fetchImpl: counting, transports: networkTransports(attempts) });
  const w = waitIn(t, 'pow');
  await eventually('admission', () => w.outcome.token);
  const session = t.storage.get('anteroom:session:pow');
  assert.deepEqual(puzzles, [`${server.base}/v1/rooms/pow/challenge?session=${session}`]);
  // Every transport carried the session's proof (the WebSocket's upgrade joined; SSE went on
  // as the same session), and the proof is right.
  assert.deepEqual(attempts.map(([kind]) => kind), ['ws', 'sse']);
  for (const [, url] of attempts) {
    const params = new URL(url).searchParams;
    assert.equal(params.get('session'), session);
    assert.match(params.get('solution'), /^\d+$/);
    assert.ok(proofShows(params.get('challenge'), params.get('solution'), 8), url);
  }
  assert.equal(await holderOf(w.outcome.token), session);
  assert.equal((await api('GET', '/v1/rooms/pow')).body.active, 1);
  await t.Anteroom.leave({});
});

test('polling joins a room with a challenge with the proof in the body', async () => {
  await api('PUT', '/v1/rooms/pow-poll',
    { capacity: 1, checkin_timeout_ms: 900, challenge: { type: 'pow', difficulty: 6 } });
  const bodies = [];
  const recording = (url, init) => {
    if (String(url).endsWith('/check')) bodies.push(JSON.parse(init.body));
    return fetch(url, init);
  };
  const t = tab({ fetchImpl: recording, transports: blockedTransports([]) });
  const w = waitIn(t, 'pow-poll');
  await eventually('admission', () => w.outcome.token);
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
  const t = tab({ fetchImpl: counting, transports: blockedTransports([]) });
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
