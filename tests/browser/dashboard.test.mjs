// The admin dashboard in a real browser: HTTP Basic auth with the admin key, live counts of
// rooms and queues, the one-hour charts (the ETA's measured error among them), changing capacity, pausing admissions, requeueing
// dead letters, and webhooks (one a 410 disabled, enabled again).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { api, artifactPath, eventually, launchBrowser, startServer } from './harness.mjs';

const KEY = 'browser-admin-key';
let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

test('the dashboard asks for the key, shows live counts and charts, and its controls work', async () => {
  const server = await startServer(['--stats-interval-ms', '200'], { ANTEROOM_ADMIN_KEY: KEY });
  try {
    assert.equal((await api(server, 'PUT', '/v1/rooms/shop', { capacity: 2 }, KEY)).status, 200);
    // Short session names are the app's own (its server holds the admin key).
    for (const s of ['a', 'b', 'c']) {
      assert.equal((await api(server, 'POST', '/v1/rooms/shop/check', { session: s }, KEY)).status, 200);
    }
    // A queue with work done and one dead letter (queue routes take the admin key when no
    // queue key is set).
    await api(server, 'POST', '/v1/queues/mail/jobs', { payload: 'ok' }, KEY);
    await api(server, 'POST', '/v1/queues/mail/jobs', { payload: 'bad', max_attempts: 1 }, KEY);
    const fetched = await api(server, 'POST', '/v1/queues/mail/fetch', { worker: 'w', max: 2 }, KEY);
    assert.equal(fetched.status, 200, fetched.text);
    for (const job of fetched.json.jobs) {
      const route = job.payload === 'ok' ? 'ack' : 'nack';
      const r = await api(server, 'POST', `/v1/queues/mail/${route}`, { leases: [job.lease] }, KEY);
      assert.equal(r.status, 200, r.text);
    }

    // Without the key the page is refused, with a Basic challenge a browser answers by asking
    // (headless chromium without credentials just fails the navigation, so this is checked
    // over plain HTTP).
    const refused = await fetch(`${server.url}/admin`);
    assert.equal(refused.status, 401);
    assert.match(refused.headers.get('www-authenticate') ?? '', /Basic/);
    const wrong = await fetch(`${server.url}/admin`,
      { headers: { authorization: `Basic ${Buffer.from('ops:nope').toString('base64')}` } });
    assert.equal(wrong.status, 401);

    const context = await browser.newContext({
      httpCredentials: { username: 'ops', password: KEY },
      viewport: { width: 1280, height: 900 },
    });
    const page = await context.newPage();
    const response = await page.goto(`${server.url}/admin`);
    assert.equal(response.status(), 200);
    const shop = page.locator('[data-room="shop"]');
    await eventually(async () => (await shop.locator('.active').textContent()).trim() === '2',
      5_000, 'the room row with its live counts');
    assert.equal((await shop.locator('.waiting').textContent()).trim(), '1');
    assert.equal((await shop.locator('.capacity').textContent()).trim(), '2');
    await page.locator('[data-queue="mail"]').waitFor({ timeout: 5_000 });

    // Live: a change made elsewhere shows up without a reload.
    await api(server, 'POST', '/v1/rooms/shop/check', { session: 'd' }, KEY);
    await eventually(async () => (await shop.locator('.waiting').textContent()).trim() === '2',
      5_000, 'the waiting count to follow');

    // Charts from the history (sampled every 200 ms here).
    await eventually(async () => (await page.locator('svg.chart').count()) >= 2, 8_000,
      'charts drawn from /v1/stats/history');
    const series = await page.locator('svg.chart').evaluateAll(
      (charts) => charts.map((c) => c.dataset.series).join(' '));
    assert.ok(series.length > 0, 'charts name their series');

    // Change capacity: the next in line is admitted.
    await shop.locator('input').fill('3');
    await shop.locator('button.set-capacity').click();
    await eventually(async () => (await api(server, 'GET', '/v1/rooms/shop')).json.active === 3,
      5_000, 'capacity 3 applied');
    await eventually(async () => (await shop.locator('.capacity').textContent()).trim() === '3',
      5_000, 'the new capacity on the page');

    // The event timeline, from the admin event stream: the change and the admission it made,
    // newest first; joins only when asked for.
    const timeline = page.locator('#events tbody tr');
    await eventually(async () => (await timeline.first().getAttribute('data-type')) === 'room.admitted',
      5_000, 'the admission on top of the timeline');
    const types = await timeline.evaluateAll((rows) => rows.map((r) => r.dataset.type));
    assert.ok(types.indexOf('room.changed') > types.indexOf('room.admitted'),
      `the change before the admission it made: ${types.join(' ')}`);
    assert.ok(!types.includes('room.joined'), 'joins are left out by default');
    assert.equal(await timeline.first().locator('td').nth(2).textContent(), 'shop');

    // Pause admissions, then resume.
    await shop.locator('button.toggle-pause').click();
    await eventually(async () => (await api(server, 'GET', '/v1/rooms/shop')).json.paused === true,
      5_000, 'paused');
    await api(server, 'POST', '/v1/rooms/shop/leave', { session: 'a', final: true }, KEY);
    const room = (await api(server, 'GET', '/v1/rooms/shop')).json;
    assert.equal(room.active, 2, 'a paused room admits nobody');
    await eventually(async () => /resume/i.test(await shop.locator('button.toggle-pause').textContent()),
      5_000, 'the button offers to resume');
    await shop.locator('button.toggle-pause').click();
    await eventually(async () => (await api(server, 'GET', '/v1/rooms/shop')).json.active === 3,
      5_000, 'resumed: the next in line is admitted');

    // Dead letters: listed, then requeued.
    await page.locator('[data-queue="mail"] button.show-dead').click();
    await page.locator('button.requeue-all').waitFor({ timeout: 5_000 });
    await page.screenshot({ path: artifactPath('dashboard.png'), fullPage: true });
    await page.locator('button.requeue-all').click();
    await eventually(async () => (await api(server, 'GET', '/v1/queues/mail', undefined, KEY)).json.dead === 0,
      5_000, 'the dead letter requeued');
    assert.equal((await api(server, 'GET', '/v1/queues/mail', undefined, KEY)).json.ready, 1);
    await context.close();
  } finally {
    await server.stop();
  }
});

// The ETA-error chart: a room of one whose waiting people (every one traced here:
// --eta-sample-ms 0) are admitted one after another once they waited over a second.
test('the dashboard charts the ETA error of a room whose traced people were admitted', async () => {
  const server = await startServer(['--stats-interval-ms', '200', '--eta-sample-ms', '0'],
    { ANTEROOM_ADMIN_KEY: KEY });
  try {
    assert.equal((await api(server, 'PUT', '/v1/rooms/shop', { capacity: 1 }, KEY)).status, 200);
    const line = ['w1', 'w2', 'w3', 'w4', 'w5', 'w6', 'w7'];
    for (const s of ['h', ...line]) {
      assert.equal((await api(server, 'POST', '/v1/rooms/shop/check', { session: s }, KEY)).status, 200);
    }
    // A slot freed: the outflow is measured, so the waiting answers carry an ETA.
    await api(server, 'POST', '/v1/rooms/shop/leave', { session: 'h', final: true }, KEY);
    for (const s of line.slice(1)) {
      const r = await api(server, 'POST', '/v1/rooms/shop/check', { session: s }, KEY);
      assert.equal(r.json.status, 'waiting', r.text);
      assert.equal(typeof r.json.eta_ms, 'number', r.text);
    }
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    for (const s of line.slice(0, -1)) {
      await api(server, 'POST', '/v1/rooms/shop/leave', { session: s, final: true }, KEY);
    }

    const context = await browser.newContext({ httpCredentials: { username: 'ops', password: KEY } });
    const page = await context.newPage();
    await page.goto(`${server.url}/admin`);
    const chart = page.locator('svg.chart[data-chart-room="shop"][data-chart-kind="eta-error"]');
    await chart.waitFor({ timeout: 10_000 });
    assert.equal(await chart.getAttribute('data-series'), 'eta_error_p50,eta_error_p90');
    assert.ok(await chart.locator('polyline, circle').count() >= 1, 'the error is drawn');
    assert.match(await chart.locator('xpath=..').locator('figcaption').textContent(), /ETA error/);
    // Beside the line, the active and the admissions per minute.
    const series = await page.locator('svg.chart[data-chart-room="shop"]').evaluateAll(
      (charts) => charts.map((c) => c.dataset.series));
    assert.deepEqual(series, ['waiting,active', 'admissions,departures', 'eta_error_p50,eta_error_p90']);
    await chart.screenshot({ path: artifactPath('dashboard-eta-error.png') });
    await context.close();
  } finally {
    await server.stop();
  }
});

// Webhooks on the dashboard: a receiver that answers 410 Gone disables its webhook; the panel
// shows it disabled, with its queue's counts, and its button enables it again.
test('the dashboard shows webhooks and enables one a 410 disabled', async () => {
  const http = await import('node:http');
  let hits = 0;
  const receiver = http.createServer((req, res) => {
    hits += 1;
    req.resume();
    req.on('end', () => res.writeHead(410).end());
  });
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${receiver.address().port}/hook`;
  const server = await startServer(['--webhook-allow', '127.0.0.1/32'], { ANTEROOM_ADMIN_KEY: KEY });
  try {
    const made = await api(server, 'PUT', '/v1/webhooks/shop-hook',
      { url, types: ['room.created'] }, KEY);
    assert.equal(made.status, 201, made.text);
    assert.match(made.json.secret, /^whsec_/);
    assert.equal((await api(server, 'PUT', '/v1/rooms/shop', { capacity: 1 }, KEY)).status, 200);
    await eventually(async () => (await api(server, 'GET', '/v1/webhooks/shop-hook', undefined, KEY))
      .json.disabled_at !== null, 10_000, 'the 410 disabled the webhook');
    assert.equal(hits, 1);

    const context = await browser.newContext({ httpCredentials: { username: 'ops', password: KEY } });
    const page = await context.newPage();
    await page.goto(`${server.url}/admin`);
    const row = page.locator('#webhooks tr[data-webhook="shop-hook"]');
    await eventually(async () => (await row.getAttribute('data-state')) === 'disabled',
      5_000, 'the webhook shown disabled');
    assert.match(await row.locator('.state').textContent(), /410/);
    assert.equal((await row.locator('td.url').textContent()).trim(), url);
    assert.equal((await row.locator('td.delivered').textContent()).trim(), '1');
    assert.equal(await page.locator('#webhooks').evaluate((t) => t.innerText.includes('whsec_')), false,
      'no secret on the page');
    await row.locator('button.enable').click();
    await eventually(async () => (await row.getAttribute('data-state')) === 'enabled',
      5_000, 'enabled again');
    assert.equal((await api(server, 'GET', '/v1/webhooks/shop-hook', undefined, KEY)).json.disabled_at, null);
    await context.close();
  } finally {
    await server.stop();
    receiver.close();
  }
});
