// A whole drop in a real browser: five people (each a browser context of its own) open the
// waiting page while an event's pre-queue is open and its start a few seconds away. They see
// the countdown; at the start the pre-queue is drawn, and each page shows its drawn position:
// distinct, 1..5, the session's position by the API, and the order recomputed from the draw's
// seed (docs/design.md, "Recomputing a draw from its seed") with Node's ChaCha20 (OpenSSL).
// The room is paused through the start so that every page shows its drawn place; resumed, the
// first two are let in and the others move up. Then the page's other launch-day states: the
// random method (odds and percentile waits, no place) and a closed room. Last, a pass skips
// the line.
import crypto from 'node:crypto';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { api, artifactPath, eventually, launchBrowser, startServer } from './harness.mjs';

const KEY = 'browser-admin-key';
const PEOPLE = 5;
const START_IN_MS = 9_000;  // time enough to open the pages, one after the other

let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

// The draw's order from its seed: position p holds the arrival number of the p-th person.
function draw(seedHex, n) {
  const cipher = crypto.createCipheriv('chacha20', Buffer.from(seedHex, 'hex'), Buffer.alloc(16));
  let block = Buffer.alloc(0);
  let at = 0;
  const word = () => {
    if (at === block.length) {
      block = cipher.update(Buffer.alloc(64));
      at = 0;
    }
    const w = block.readUInt32LE(at);
    at += 4;
    return w;
  };
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = 0; i < n - 1; i++) {
    const bound = n - i;
    const limit = 2 ** 32 - (2 ** 32 % bound);
    let w = word();
    while (w >= limit) w = word();
    const j = i + (w % bound);
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

test('draw recomputation matches design.md\'s known answer', () => {
  const seed = Buffer.from(Array.from({ length: 32 }, (_, i) => i)).toString('hex');
  assert.deepEqual(draw(seed, 10), [3, 9, 7, 2, 6, 5, 8, 1, 0, 4]);
});

const pageState = (p) => p.page.evaluate(() => ({
  status: document.body.dataset.status,
  phase: document.body.dataset.phase,
  drawing: document.body.dataset.drawing,
  position: document.querySelector('#position').textContent.trim(),
  countdown: document.querySelector('#countdown').textContent.trim(),
  text: document.querySelector('#status-text').textContent.trim(),
  live: document.querySelector('#live').textContent.trim(),
  turn: !document.querySelector('#turn').hidden,
  session: sessionStorage.getItem('anteroom:session:drop'),
}));

const seconds = (countdown) => {
  const m = /^(\d+):(\d\d)$/.exec(countdown);
  return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
};

test('a drop: pre-queue with a countdown, a fair draw at the start, drawn positions, admissions', async () => {
  const server = await startServer([], { ANTEROOM_ADMIN_KEY: KEY });
  const people = [];
  try {
    let r = await api(server, 'PUT', '/v1/rooms/drop', { capacity: 2, paused: true }, KEY);
    assert.equal(r.status, 200, r.text);
    const now = Date.now();
    const startsAt = now + START_IN_MS;
    r = await api(server, 'PUT', '/v1/rooms/drop/schedule/launch', {
      name: 'Launch', prequeue_at: now, starts_at: startsAt, ends_at: now + 600_000,
      shuffle_at_start: true,
    }, KEY);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.phase, 'prequeue');

    // One after the other, so that their arrival order is known: 0, 1, 2, ...
    for (let i = 0; i < PEOPLE; i++) {
      const context = await browser.newContext({ viewport: { width: 420, height: 760 } });
      const page = await context.newPage();
      const p = { context, page };
      people.push(p);
      await page.goto(`${server.url}/wait/drop`);
      await page.waitForFunction(() => document.body.dataset.status === 'prequeue', null,
        { timeout: 5_000 });
      p.session = (await pageState(p)).session;
      assert.match(p.session ?? '', /^[0-9a-f]{32}$/);
    }
    assert.ok(Date.now() < startsAt - 1_000,
      `the pages took ${Date.now() - now} ms to open: too slow for a start ${START_IN_MS} ms away`);

    // The countdown runs by itself (the live channel sends nothing while only time passes).
    const first = await pageState(people[0]);
    assert.equal(first.phase, 'prequeue');
    assert.equal(first.drawing, 'false');
    const left = seconds(first.countdown);
    assert.ok(left > 0 && left <= START_IN_MS / 1000, `countdown ${first.countdown}`);
    assert.match(first.text, /drawn at the start/);
    assert.match(first.live, /pre-queue/, 'the pre-queue announced');
    assert.equal(first.position, '–');
    await eventually(async () => seconds((await pageState(people[0])).countdown) < left, 2_500,
      'the countdown ticking');
    await people[PEOPLE - 1].page.screenshot({ path: artifactPath('launch-prequeue.png'), fullPage: true });
    // Every session is in the pre-queue, by the API too.
    for (const p of people) {
      const status = (await api(server, 'POST', '/v1/rooms/drop/check', { session: p.session })).json;
      assert.equal(status.status, 'prequeue');
      assert.equal(status.position, null);
      assert.ok(status.starts_in_ms > 0 && status.starts_in_ms <= START_IN_MS);
    }

    // The start: each page shows its drawn position.
    const positions = [];
    for (const [i, p] of people.entries()) {
      await eventually(async () => {
        const s = await pageState(p);
        return s.status === 'waiting' && /^\d+$/.test(s.position);
      }, START_IN_MS + 8_000, `page ${i} showing its drawn position`);
      positions.push(Number((await pageState(p)).position));
    }
    assert.deepEqual([...positions].sort((a, b) => a - b),
      Array.from({ length: PEOPLE }, (_, k) => k + 1), `distinct places 1..${PEOPLE}: ${positions}`);
    const drawn = await pageState(people[0]);
    assert.match(drawn.live, /The order has been drawn\. You are number \d+ in line\./);
    await people[0].page.screenshot({ path: artifactPath('launch-drawn.png'), fullPage: true });

    // The same places by the API, and by recomputing the draw from its seed.
    const event = (await api(server, 'GET', '/v1/rooms/drop/schedule/launch', undefined, KEY)).json;
    assert.equal(event.phase, 'running');
    assert.equal(event.shuffle.count, PEOPLE);
    assert.match(event.shuffle.seed, /^[0-9a-f]{64}$/);
    const order = draw(event.shuffle.seed, PEOPLE);
    for (const [i, p] of people.entries()) {
      const status = (await api(server, 'POST', '/v1/rooms/drop/check', { session: p.session })).json;
      assert.equal(status.status, 'waiting');
      assert.equal(status.position, positions[i], `page ${i}: the API's position`);
      assert.equal(positions[i], order.indexOf(i) + 1, `page ${i}: the recomputed draw`);
    }

    // Admissions resume: the first two drawn are let in, the others move up by two.
    r = await api(server, 'PUT', '/v1/rooms/drop', { paused: false }, KEY);
    assert.equal(r.status, 200, r.text);
    for (const [i, p] of people.entries()) {
      if (positions[i] <= 2) {
        await eventually(async () => {
          const s = await pageState(p);
          return s.status === 'active' && s.turn;
        }, 5_000, `page ${i} (drawn ${positions[i]}) let in`);
      } else {
        await eventually(async () => (await pageState(p)).position === String(positions[i] - 2),
          5_000, `page ${i} moved up to ${positions[i] - 2}`);
      }
    }
    const room = (await api(server, 'GET', '/v1/rooms/drop')).json;
    assert.equal(room.active, 2);
    assert.equal(room.waiting, PEOPLE - 2);
    const admitted = people.find((_, i) => positions[i] === 1);
    await admitted.page.screenshot({ path: artifactPath('launch-admitted.png'), fullPage: true });

    // A pass skips the line: its holder comes last and is first in line, the others move
    // down one; the next free slot is the holder's. A wrong code is said so, and its page
    // waits at the end like anyone.
    r = await api(server, 'POST', '/v1/rooms/drop/passes', { kind: 'admit' }, KEY);
    assert.equal(r.status, 201, r.text);
    const { code } = r.json.passes[0];
    const open = async (query) => {
      const context = await browser.newContext({ viewport: { width: 420, height: 760 } });
      const page = await context.newPage();
      const p = { context, page };
      people.push(p);
      await page.goto(`${server.url}/wait/drop?${query}`);
      return p;
    };
    const holder = await open(`pass=${encodeURIComponent(code)}`);
    await eventually(async () => (await pageState(holder)).position === '1', 5_000,
      'the pass holder first in line');
    assert.equal(new URL(holder.page.url()).search, '', 'the code is gone from the address bar');
    for (const [i, p] of people.slice(0, PEOPLE).entries()) {
      if (positions[i] > 2) {
        await eventually(async () => (await pageState(p)).position === String(positions[i] - 1),
          5_000, `page ${i} moved down to ${positions[i] - 1}`);
      }
    }
    const wrong = await open(`pass=${encodeURIComponent(code.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')))}`);
    await eventually(async () => (await pageState(wrong)).position === String(PEOPLE),
      5_000, 'a wrong code waits at the end');
    assert.match(await wrong.page.locator('#pass-note').textContent(),
      /Your pass was not accepted \(this pass is not valid for this room\)/);
    await holder.page.screenshot({ path: artifactPath('launch-pass.png'), fullPage: true });
    r = await api(server, 'POST', '/v1/rooms/drop/leave',
      { session: (await pageState(admitted)).session, final: true }, KEY);
    assert.equal(r.status, 200, r.text);
    await eventually(async () => {
      const s = await pageState(holder);
      return s.status === 'active' && s.turn;
    }, 5_000, 'the pass holder let in at the next free slot');
    const passes = (await api(server, 'GET', '/v1/rooms/drop/passes', undefined, KEY)).json.passes;
    assert.equal(passes[0].uses_left, 0);
  } finally {
    for (const p of people) await p.context.close().catch(() => {});
    await server.stop();
  }
});

test('the waiting page in the random method shows odds, not a place; a closed room says so and stays calm', async () => {
  const server = await startServer([], { ANTEROOM_ADMIN_KEY: KEY });
  const people = [];
  try {
    // Random: one slot, held by an API session; two pages wait with even odds.
    let r = await api(server, 'PUT', '/v1/rooms/lottery', { capacity: 1, queueing_method: 'random' }, KEY);
    assert.equal(r.status, 200, r.text);
    assert.equal((await api(server, 'POST', '/v1/rooms/lottery/check', { session: 'holder' }, KEY)).status, 200);
    for (let i = 0; i < 2; i++) {
      const context = await browser.newContext({ viewport: { width: 420, height: 760 } });
      const page = await context.newPage();
      people.push({ context, page });
      await page.goto(`${server.url}/wait/lottery`);
      await page.waitForFunction(() => document.body.dataset.status === 'waiting', null,
        { timeout: 5_000 });
    }
    const odds = (p) => p.page.evaluate(() => ({
      method: document.body.dataset.method,
      positionShown: !document.querySelector('#position-box').hidden,
      chance: document.querySelector('#chance').textContent.trim(),
      note: document.querySelector('#odds').textContent.trim(),
      progressShown: !document.querySelector('#progress').hidden,
      status: document.body.dataset.status,
    }));
    await eventually(async () => (await odds(people[0])).chance === '1 in 2', 5_000,
      'the first page\'s odds with two waiting');
    const shown = await odds(people[0]);
    assert.equal(shown.method, 'random');
    assert.equal(shown.positionShown, false, 'no place in line in the random method');
    assert.equal(shown.progressShown, false);
    assert.match(shown.note, /drawn at random/);
    await people[0].page.screenshot({ path: artifactPath('launch-random.png'), fullPage: true });
    // The holder leaves: one of the two is drawn and let in, the other's odds become 1 in 1.
    await api(server, 'POST', '/v1/rooms/lottery/leave', { session: 'holder', final: true }, KEY);
    await eventually(async () => {
      const states = await Promise.all(people.map(odds));
      // A slot freed in the last minute: the waits by percentile are known now.
      return states.some((s) => s.status === 'active') &&
        states.some((s) => s.status === 'waiting' && s.chance === '1 in 1' &&
          /a quarter of those waiting now will be in within .*, half within .*, three quarters within/i.test(s.note));
    }, 5_000, 'one page drawn and let in, the other alone in the draw, with its percentile waits');

    // Closed: a room that takes nobody new. The page says so, opens one connection and keeps
    // the sentence (no "place lost", no reconnects), and nothing of it is kept.
    r = await api(server, 'PUT', '/v1/rooms/sold-out', { capacity: 1, queueing_method: 'reject' }, KEY);
    assert.equal(r.status, 200, r.text);
    const context = await browser.newContext({ viewport: { width: 420, height: 760 } });
    const page = await context.newPage();
    people.push({ context, page });
    let sockets = 0;
    page.on('websocket', () => { sockets++; });
    await page.goto(`${server.url}/wait/sold-out`);
    await page.waitForFunction(() => document.body.dataset.status === 'closed', null,
      { timeout: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    assert.equal(await page.evaluate(() => document.body.dataset.status), 'closed');
    assert.equal((await page.locator('#title').textContent()).trim(), 'The waiting room is closed');
    assert.match(await page.locator('#status-text').textContent(), /not letting anyone new in/);
    assert.match(await page.locator('#live').textContent(), /closed/);
    assert.equal(await page.locator('#line').isVisible(), false);
    assert.equal(sockets, 1, 'one connection, not a reconnect storm');
    assert.equal((await api(server, 'GET', '/v1/rooms/sold-out')).json.waiting, 0);
    await page.screenshot({ path: artifactPath('launch-closed.png'), fullPage: true });
  } finally {
    for (const p of people) await p.context.close().catch(() => {});
    await server.stop();
  }
});
