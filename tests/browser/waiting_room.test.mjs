// The waiting page, the demo target page and /anteroom.js in a real browser (Debian's chromium,
// headless, through playwright-core), against the real server. Each person is a browser context
// of its own (its own sessionStorage and cookies), as five people in five browsers would be.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { api, artifactPath, eventually, launchBrowser, startServer } from './harness.mjs';

let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

// One person: a context and a page on /wait/demo.
async function arrive(server) {
  const context = await browser.newContext({ viewport: { width: 420, height: 760 } });
  const page = await context.newPage();
  await page.goto(`${server.url}/wait/demo`);
  await page.waitForFunction(
    () => ['waiting', 'active'].includes(document.body.dataset.status) ||
      location.pathname === '/demo',
    null, { timeout: 10_000 });
  return { context, page };
}

const inside = (p) => new URL(p.page.url()).pathname === '/demo';
async function isInside(p) {
  return inside(p) && (await p.page.locator('#inside').isVisible());
}
async function position(p) {
  if (inside(p)) return null;
  return (await p.page.locator('#position').textContent()).trim();
}

// What the room and a page say, for a failure message: which side lagged.
async function explain(server, p, since) {
  const room = (await api(server, 'GET', '/v1/rooms/demo')).json;
  const page = await p.page.evaluate(() => ({
    url: location.pathname, status: document.body.dataset.status,
    position: document.querySelector('#position')?.textContent?.trim(),
  })).catch((e) => String(e));
  return `${Date.now() - since} ms on: room active=${room?.active} waiting=${room?.waiting} ` +
    `admitted_total=${room?.admitted_total} dropped_total=${room?.dropped_total}; ` +
    `page ${JSON.stringify(page)}`;
}

async function demoServer(grace_ms) {
  const server = await startServer(['--demo-room', 'demo:3']);
  const r = await api(server, 'PUT', '/v1/rooms/demo',
    { capacity: 3, grace_ms, checkin_timeout_ms: 3_000, target_url: '/demo' });
  assert.equal(r.status, 200, r.text);
  return server;
}

describe('the waiting page', () => {
  test('5 pages on a capacity-3 room: 3 in, 2 waiting; a final leave and a closed page move the line', async () => {
    const server = await demoServer(3_000);
    const people = [];
    try {
      for (let i = 0; i < 5; i++) people.push(await arrive(server));
      for (let i = 0; i < 3; i++) {
        await eventually(() => isInside(people[i]), 10_000, `page ${i} on the target page`);
      }
      await eventually(async () => (await position(people[3])) === '1', 5_000, 'page 3 at 1');
      await eventually(async () => (await position(people[4])) === '2', 5_000, 'page 4 at 2');
      // Page 4 joining behind page 3 changes only page 3's counts: shown within a second.
      await eventually(async () => (await people[3].page.locator('#waiting').textContent()) === '2',
        2_000, 'page 3 shows 2 waiting');
      assert.match(await people[4].page.locator('#live').textContent(), /2/,
        'the live region says the position');
      await people[4].page.screenshot({ path: artifactPath('waiting-page.png'), fullPage: true });
      const room = (await api(server, 'GET', '/v1/rooms/demo')).json;
      assert.equal(room.active, 3);
      assert.equal(room.waiting, 2);

      // Page 0 gives its slot up for good: page 3 is admitted within 2 s, page 4 moves to 1.
      await people[0].page.locator('#leave').click();
      const left = Date.now();
      await eventually(() => isInside(people[3]), 2_000, 'page 3 admitted within 2 s');
      assert.ok(Date.now() - left <= 2_000);
      await eventually(async () => (await position(people[4])) === '1', 2_000, 'page 4 at 1');
      await people[0].page.locator('#left').waitFor({ state: 'visible', timeout: 2_000 });

      // Page 1 is closed: its slot is kept through grace (3 s), then goes to page 4.
      await people[1].context.close();
      const closed = Date.now();
      await new Promise((r) => setTimeout(r, 1_500));
      assert.equal(await position(people[4]), '1', 'still waiting during grace');
      await eventually(() => isInside(people[4]), 6_000, 'page 4 admitted after grace')
        .catch(async (e) => { throw new Error(`${e.message}; ${await explain(server, people[4], closed)}`); });
      assert.ok(Date.now() - closed >= 2_500, `admitted ${Date.now() - closed} ms after close`);
    } finally {
      for (const p of people) await p.context.close().catch(() => {});
      await server.stop();
    }
  });

  test('a reload within grace stays admitted; after grace without the page, the slot moves on', async () => {
    const server = await demoServer(2_500);
    const people = [];
    try {
      // Fill two slots with API sessions so that the page under test takes the last one.
      for (const s of ['x', 'y']) {
        assert.equal((await api(server, 'POST', '/v1/rooms/demo/check', { session: s })).status, 200);
      }
      const keep = setInterval(() => {
        for (const s of ['x', 'y']) api(server, 'POST', '/v1/rooms/demo/check', { session: s });
      }, 1_000);
      try {
        people.push(await arrive(server));
        await eventually(() => isInside(people[0]), 10_000, 'page A inside');
        people.push(await arrive(server));
        await eventually(async () => (await position(people[1])) === '1', 5_000, 'B waiting');

        await people[0].page.reload();
        await eventually(() => isInside(people[0]), 5_000, 'A still inside after reload');
        await people[0].page.waitForFunction(() => document.body.dataset.status === 'active',
          null, { timeout: 5_000 });
        await new Promise((r) => setTimeout(r, 3_500));  // longer than grace
        assert.ok(await isInside(people[0]));
        assert.equal(await position(people[1]), '1', 'the reload did not give the slot away');

        await people[0].context.close();
        const closed = Date.now();
        await eventually(() => isInside(people[1]), 7_000, 'B admitted once A\'s grace is over');
        assert.ok(Date.now() - closed >= 2_000, `admitted ${Date.now() - closed} ms after close`);
      } finally {
        clearInterval(keep);
      }
    } finally {
      for (const p of people) await p.context.close().catch(() => {});
      await server.stop();
    }
  });
});
