// Room: check, touch, leave, and the live channel over SSE (and WebSocket when Node has one).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { AnteroomError, Room, SseParser } from '../index.js';
import { startServer, within } from '../testing/helpers.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

const newSession = () => randomBytes(16).toString('base64url'); // 128 bits, as the API asks

async function createRoom(name, capacity) {
  const res = await fetch(`${server.url}/v1/rooms/${name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ capacity }),
  });
  assert.equal(res.status, 200, await res.text());
}

// The next status of an updates() iterator, within `ms`.
async function next(updates, ms = 5_000) {
  const { value, done } = await within(updates.next(), ms, 'a status on the live channel');
  assert.equal(done, false, 'the stream ended early');
  return value;
}

// Node 20 has a WebSocket only with --experimental-websocket: there the WebSocket case runs in a
// child Node given the flag (this file again, that test only), so it is covered on every Node.
const hasWebSocket = typeof globalThis.WebSocket === 'function';
if (!hasWebSocket) {
  test('updates() over websocket, in a Node with --experimental-websocket', { timeout: 30_000 }, async () => {
    const child = spawn(process.execPath, ['--experimental-websocket', '--test',
      '--test-name-pattern=updates\\(\\) over websocket sees', fileURLToPath(import.meta.url)],
    // NODE_TEST_CONTEXT would make the child report to this runner instead of running.
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_TEST_CONTEXT: undefined } });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    const code = await within(new Promise((resolve) => child.on('exit', resolve)), 25_000, 'the child test')
      .finally(() => child.kill('SIGKILL'));
    if (/bad option|not allowed in NODE_OPTIONS|unknown option/i.test(out)) return; // a Node without the flag
    assert.equal(code, 0, out);
    assert.match(out, /^# pass 1$/m, out);
  });
}

for (const transport of ['sse', 'websocket']) {
  const skip = transport === 'websocket' && !hasWebSocket ? 'run in a child Node (the test above)' : false;
  test(`check, touch, leave; updates() over ${transport} sees the line move`, { timeout: 20_000, skip }, async () => {
    const name = `lobby-${transport}`;
    await createRoom(name, 1);
    const room = new Room(name, { url: server.url });
    const [ann, bob, cat] = [newSession(), newSession(), newSession()];
    assert.equal((await room.check(ann)).status, 'active');
    assert.deepEqual(await room.check(bob).then((s) => [s.status, s.position]), ['waiting', 1]);
    assert.deepEqual(await room.check(cat).then((s) => [s.status, s.position]), ['waiting', 2]);
    assert.equal((await room.touch(ann)).status, 'active');

    const updates = room.updates(cat, { transport });
    const first = await next(updates);
    assert.deepEqual([first.type, first.session, first.status, first.position], ['status', cat, 'waiting', 2]);

    // Bob, ahead of Cat, leaves the line: Cat moves up.
    assert.equal((await room.leave(bob)).status, 'gone');
    let status = await next(updates);
    while (status.position === 2) status = await next(updates); // a waiting-count change may come first
    assert.deepEqual([status.status, status.position], ['waiting', 1]);

    // Ann leaves for good: her slot goes to Cat at once, with a token.
    assert.equal((await room.leave(ann, { final: true })).status, 'gone');
    do status = await next(updates); while (status.status === 'waiting');
    assert.equal(status.status, 'active');
    assert.match(status.token, /^[\w-]+\.[\w-]+\.[\w-]+$/);

    // Breaking off closes the stream, at once, even with no message coming.
    assert.deepEqual(await within(updates.return(), 1_000, 'return()'), { value: undefined, done: true });
    assert.deepEqual(await updates.next(), { value: undefined, done: true });
  });
}

test('updates() of a room that does not exist rejects with the API error', { timeout: 10_000 }, async () => {
  const updates = new Room('nowhere', { url: server.url }).updates(newSession(), { transport: 'sse' });
  await assert.rejects(within(updates.next(), 5_000, 'the refusal'),
    (err) => err instanceof AnteroomError && err.status === 404 && err.code === 'unknown_room');
});

test('updates() ends after the last status of a session that is gone', { timeout: 10_000 }, async () => {
  await createRoom('ending', 1);
  const room = new Room('ending', { url: server.url });
  const s = newSession();
  const updates = room.updates(s, { transport: 'sse' });
  assert.equal((await next(updates)).status, 'active');
  await room.leave(s, { final: true });
  let last;
  for (;;) {
    const r = await within(updates.next(), 5_000, 'the stream to end');
    if (r.done) break;
    last = r.value;
  }
  assert.equal(last.status, 'gone');
});

test('SseParser: data lines, multi-line data, comments, CRLF split across chunks, no-data events', () => {
  const p = new SseParser();
  const events = [];
  for (const chunk of ['retry: 1000\r', '\n\r\n', ': keepalive\n\n', 'data: {"a"', ':1}\r\n\r', '\n',
    'event: x\ndata:one\ndata: two\nid: 7\n\n', 'data: tail']) {
    events.push(...p.push(chunk));
  }
  assert.deepEqual(events, [
    { type: 'message', data: '{"a":1}', id: '' },
    { type: 'x', data: 'one\ntwo', id: '7' },
  ]);
  assert.equal(p.retryMs, 1000);
  assert.deepEqual(p.push('\n\n'), [{ type: 'message', data: 'tail', id: '7' }]);
});
