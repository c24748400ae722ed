// Launch day on the admin dashboard in a real browser: scheduling an event from the form (local
// date-times in the browser's time zone, sent as RFC 3339), its phase and countdown listed, a
// refusal shown as the server words it, suspend and resume, cancel, a switch of queueing method,
// and the emergency brake behind its confirm. Each step is checked against the API.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { api, artifactPath, eventually, launchBrowser, startServer } from './harness.mjs';

const KEY = 'browser-admin-key';
// Half an hour off UTC, so that a time sent in the wrong zone cannot pass by luck.
const ZONE = 'Asia/Kolkata';
const ZONE_OFFSET_MS = 5.5 * 3600 * 1000;

let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

// A datetime-local value in ZONE for a time in ms (whole seconds).
const localInput = (ms) => new Date(ms + ZONE_OFFSET_MS).toISOString().slice(0, 19);
const text = async (locator) => (await locator.textContent()).trim();

test('the dashboard schedules, lists, suspends and cancels events, switches the method and brakes', async () => {
  const server = await startServer([], { ANTEROOM_ADMIN_KEY: KEY });
  const get = async (route) => (await api(server, 'GET', route, undefined, KEY)).json;
  try {
    assert.equal((await api(server, 'PUT', '/v1/rooms/shop', { capacity: 2 }, KEY)).status, 200);
    for (const s of ['a', 'b', 'c']) {
      assert.equal((await api(server, 'POST', '/v1/rooms/shop/check', { session: s }, KEY)).status, 200);
    }
    const context = await browser.newContext({
      httpCredentials: { username: 'ops', password: KEY },
      viewport: { width: 1400, height: 1000 },
      timezoneId: ZONE,
    });
    const page = await context.newPage();
    const dialogs = [];
    let answer = 'accept';
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      dialog[answer]().catch(() => {});
    });
    assert.equal((await page.goto(`${server.url}/admin`)).status(), 200);
    const shop = page.locator('[data-room="shop"]');
    await eventually(async () => (await text(shop.locator('.method'))) === 'fifo', 5_000,
      'the room row with its method');

    // Schedule from the form: a pre-queue in an hour, the start in two, the end in three.
    await shop.locator('button.show-schedule').click();
    const panel = page.locator('[data-schedule-for="shop"]');
    await panel.getByText('No scheduled events.').waitFor({ timeout: 5_000 });
    const hour = 3600 * 1000;
    const base = Math.floor(Date.now() / 1000) * 1000;
    const form = panel.locator('form.schedule-form');
    await form.locator('[name=id]').fill('winter-drop');
    await form.locator('[name=name]').fill('Winter drop');
    await form.locator('[name=prequeue_at]').fill(localInput(base + hour));
    await form.locator('[name=starts_at]').fill(localInput(base + 2 * hour));
    await form.locator('[name=ends_at]').fill(localInput(base + 3 * hour));
    await form.locator('[name=shuffle_at_start]').check();
    await form.locator('[name=prequeue_scope]').selectOption('all');
    await form.locator('[name=capacity]').fill('500');
    await form.locator('[name=admit_per_minute]').fill('1200');
    await form.locator('[name=queueing_method]').selectOption('random');
    await form.locator('button.schedule-event').click();

    const drop = panel.locator('tr[data-event="winter-drop"]');
    await drop.waitFor({ timeout: 5_000 });
    const event = await get('/v1/rooms/shop/schedule/winter-drop');
    assert.equal(event.name, 'Winter drop');
    assert.equal(event.prequeue_at_ms, base + hour, 'the local time read in the browser\'s zone');
    assert.equal(event.starts_at_ms, base + 2 * hour);
    assert.equal(event.ends_at_ms, base + 3 * hour);
    assert.equal(event.shuffle_at_start, true);
    assert.equal(event.prequeue_scope, 'all');
    assert.equal(event.suspended, false);
    assert.deepEqual(event.overrides,
      { capacity: 500, admit_per_minute: 1200, queueing_method: 'random' });
    assert.equal(event.phase, 'scheduled');
    assert.equal(await text(drop.locator('.phase')), 'scheduled');
    assert.match(await text(drop.locator('.countdown')), /^pre-queue opens in (59 min|1 h 0 min)/);
    assert.match(await text(drop.locator('.overrides')), /capacity 500, 1200\/min, random/);
    assert.equal(await text(drop.locator('.draw')), 'shuffle at the start');

    // A refusal is shown as the server words it: an overlapping event names the other.
    await form.locator('[name=id]').fill('clash');
    await form.locator('[name=starts_at]').fill(localInput(base + 2.5 * hour));
    await form.locator('[name=ends_at]').fill(localInput(base + 4 * hour));
    await form.locator('button.schedule-event').click();
    const error = panel.locator('.schedule-error');
    await eventually(async () => /winter-drop/.test(await text(error)), 5_000,
      'the overlap refused, naming the other event');
    assert.match(await text(error), /^conflict: /);
    assert.equal((await api(server, 'GET', '/v1/rooms/shop/schedule/clash', undefined, KEY)).status, 404);
    await page.screenshot({ path: artifactPath('launch-dashboard-scheduled.png'), fullPage: true });

    // Suspend, then resume: the whole event is sent back, only `suspended` changed.
    await drop.locator('button.toggle-suspend').click();
    await eventually(async () => (await get('/v1/rooms/shop/schedule/winter-drop')).suspended,
      5_000, 'suspended through the API');
    const suspended = await get('/v1/rooms/shop/schedule/winter-drop');
    assert.equal(suspended.phase, 'suspended');
    assert.deepEqual({ ...suspended, suspended: false, phase: 'scheduled' },
      { ...event, starts_in_ms: suspended.starts_in_ms, prequeue_in_ms: suspended.prequeue_in_ms,
        ends_in_ms: suspended.ends_in_ms }, 'nothing else changed');
    await eventually(async () => (await text(drop.locator('.phase'))) === 'suspended', 5_000,
      'the phase on the page');
    assert.equal(await text(drop.locator('button.toggle-suspend')), 'Resume');
    await drop.locator('button.toggle-suspend').click();
    await eventually(async () => (await get('/v1/rooms/shop/schedule/winter-drop')).phase === 'scheduled',
      5_000, 'resumed through the API');
    await eventually(async () => (await text(drop.locator('.phase'))) === 'scheduled', 5_000,
      'resumed on the page');

    // Cancel, behind a confirm.
    await drop.locator('button.cancel-event').click();
    await eventually(async () =>
      (await api(server, 'GET', '/v1/rooms/shop/schedule/winter-drop', undefined, KEY)).status === 404,
    5_000, 'the event cancelled');
    assert.match(dialogs.at(-1), /Cancel event “winter-drop”/);
    await panel.getByText('No scheduled events.').waitFor({ timeout: 5_000 });

    // Switch the method.
    await shop.locator('select.method-select').selectOption('random');
    await shop.locator('button.set-method').click();
    await eventually(async () => (await get('/v1/rooms/shop')).queueing_method === 'random', 5_000,
      'the method switched');
    await eventually(async () => (await text(shop.locator('.method'))) === 'random', 5_000,
      'the method on the page');

    // The brake: dismissing its confirm changes nothing; accepting it stops admissions and
    // sends both holders back to the head of the line.
    answer = 'dismiss';
    await shop.locator('button.brake').click();
    await eventually(() => /Emergency brake on room “shop”/.test(dialogs.at(-1) ?? ''), 5_000,
      'the brake\'s confirm');
    let room = await get('/v1/rooms/shop');
    assert.equal(room.queueing_method, 'random');
    assert.equal(room.active, 2);
    answer = 'accept';
    await shop.locator('button.brake').click();
    await eventually(async () => (await get('/v1/rooms/shop')).queueing_method === 'queue_all',
      5_000, 'the brake applied');
    room = await get('/v1/rooms/shop');
    assert.equal(room.active, 0, 'the holders were sent back');
    assert.equal(room.waiting, 3);
    const a = (await api(server, 'POST', '/v1/rooms/shop/check', { session: 'a' }, KEY)).json;
    assert.equal(a.status, 'waiting');
    assert.equal(a.position, 1, 'the first holder leads the line');
    await eventually(async () => (await text(shop.locator('.method'))) === 'queue_all (brake on)',
      5_000, 'the brake shown on the page');
    assert.equal(await text(shop.locator('.row-error')), '');
    await page.screenshot({ path: artifactPath('launch-dashboard-brake.png'), fullPage: true });

    // Lifted by setting the method back.
    await shop.locator('select.method-select').selectOption('fifo');
    await shop.locator('button.set-method').click();
    await eventually(async () => (await get('/v1/rooms/shop')).active === 2, 5_000,
      'admissions again, in line order');
    await context.close();
  } finally {
    await server.stop();
  }
});

test('the dashboard shows a drawn event\'s seed and count, and the brake holds over a running event\'s method', async () => {
  const server = await startServer([], { ANTEROOM_ADMIN_KEY: KEY });
  try {
    assert.equal((await api(server, 'PUT', '/v1/rooms/drop', { capacity: 1 }, KEY)).status, 200);
    // The pre-queue opens with the start far off (a loaded machine may take seconds to open the
    // page); once it is listed, the start is brought near (a start not reached may move).
    const now = Date.now();
    const spec = (startsAt) => ({
      prequeue_at: now, starts_at: startsAt, ends_at: now + 600_000, shuffle_at_start: true,
      overrides: { queueing_method: 'fifo' },
    });
    const r = await api(server, 'PUT', '/v1/rooms/drop/schedule/launch', spec(now + 300_000), KEY);
    assert.equal(r.status, 200, r.text);
    for (const s of ['a', 'b', 'c']) {
      const joined = (await api(server, 'POST', '/v1/rooms/drop/check', { session: s }, KEY)).json;
      assert.equal(joined.status, 'prequeue');
    }
    const context = await browser.newContext({
      httpCredentials: { username: 'ops', password: KEY },
      viewport: { width: 1400, height: 1000 },
    });
    const page = await context.newPage();
    page.on('dialog', (dialog) => dialog.accept().catch(() => {}));
    await page.goto(`${server.url}/admin`);
    const room = page.locator('[data-room="drop"]');
    await room.locator('button.show-schedule').click();
    const launch = page.locator('[data-schedule-for="drop"] tr[data-event="launch"]');
    await eventually(async () => (await text(launch.locator('.phase'))) === 'prequeue', 5_000,
      'the pre-queue listed');
    assert.match(await text(launch.locator('.countdown')), /^starts in [45] min/);
    const moved = await api(server, 'PUT', '/v1/rooms/drop/schedule/launch', spec(Date.now() + 1_500), KEY);
    assert.equal(moved.status, 200, moved.text);

    // After the start: running, with the draw's seed and count as the API has them.
    await eventually(async () => (await launch.getAttribute('data-phase')) === 'running' &&
      (await launch.locator('.draw').getAttribute('data-seed')) !== null, 8_000, 'the draw listed');
    const event = (await api(server, 'GET', '/v1/rooms/drop/schedule/launch', undefined, KEY)).json;
    assert.equal(event.shuffle.count, 3);
    assert.equal(await launch.locator('.draw').getAttribute('data-seed'), event.shuffle.seed);
    assert.equal(await launch.locator('.draw').getAttribute('data-count'), '3');
    assert.match(await text(launch.locator('.draw')), new RegExp(`^3 drawn, .*${event.shuffle.seed}$`));
    assert.match(await text(launch.locator('.countdown')), /^ends in 9 min/);
    assert.match(await text(page.locator('[data-schedule-for="drop"] .effective')),
      /Event “launch” is running; while it runs: fifo/);

    // The brake while the event sets the method: the operator's brake wins, the holder goes
    // back to the head of the line.
    await room.locator('button.brake').click();
    await eventually(async () => (await api(server, 'GET', '/v1/rooms/drop')).json.active === 0,
      5_000, 'the holder sent back');
    const after = (await api(server, 'GET', '/v1/rooms/drop')).json;
    assert.equal(after.queueing_method, 'queue_all');
    assert.equal(after.effective.queueing_method, 'queue_all', 'the brake holds over the event');
    await eventually(async () => (await text(room.locator('.method'))) === 'queue_all (brake on)',
      5_000, 'the method in effect');
    await page.screenshot({ path: artifactPath('launch-dashboard-drawn.png'), fullPage: true });
    await context.close();
  } finally {
    await server.stop();
  }
});
