// The waiting page on a phone (390 px) and a desktop (1280 px), in each state, in two languages,
// through the admin's preview (GET /v1/rooms/{room}/page/preview): no horizontal scrolling, every
// string translated, text contrast at least WCAG AA, usable with the keyboard alone; position
// changes announced in the live region of a real wait; script injection through the room's page
// settings inert in a real browser. With ANTEROOM_UPDATE_SCREENSHOTS=1 the screenshots are
// written to docs/screenshots/ (committed); otherwise to the build's artifacts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { api, artifactPath, eventually, launchBrowser, startServer } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const KEY = 'page-screens-admin-key';
const STATES = {
  prequeue: 'prequeue', waiting: 'waiting', random: 'waiting', active: 'active',
  closed: 'closed', error: 'error',
};
const SIZES = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 800 } };
const LANGUAGES = ['en', 'de'];

function screenshotPath(name) {
  if (process.env.ANTEROOM_UPDATE_SCREENSHOTS !== '1') return artifactPath(name);
  const dir = path.resolve(here, '../../docs/screenshots');
  mkdirSync(dir, { recursive: true });
  return path.join(dir, name);
}

// The contrast ratio (WCAG 2.x) of every visible text element against the page's background.
function contrasts() {
  const rgb = (css) => {
    const m = css.match(/rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?/);
    return m ? [Number(m[1]), Number(m[2]), Number(m[3]), m[4] === undefined ? 1 : Number(m[4])] : null;
  };
  const luminance = ([r, g, b]) => {
    const lin = (c) => { const s = c / 255; return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  // The background behind an element: the nearest ancestor with an opaque one.
  const backgroundOf = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c && c[3] === 1) return c;
    }
    return [255, 255, 255, 1];
  };
  const out = [];
  for (const el of document.querySelectorAll('h1, p, dt, dd, strong, span, time, button, .token')) {
    if (!el.offsetParent && getComputedStyle(el).position !== 'fixed') continue;
    if (el.closest('.visually-hidden') || !el.textContent.trim()) continue;
    const fg = rgb(getComputedStyle(el).color);
    const bg = backgroundOf(el);
    const [a, b] = [luminance(fg), luminance(bg)].sort((x, y) => y - x);
    out.push({ what: `${el.tagName.toLowerCase()}#${el.id}.${el.className}`, ratio: (a + 0.05) / (b + 0.05) });
  }
  return out;
}

let browser;
let server;
before(async () => {
  browser = await launchBrowser();
  server = await startServer([], { ANTEROOM_ADMIN_KEY: KEY });
  const r = await api(server, 'PUT', '/v1/rooms/drop', { capacity: 100 }, KEY);
  assert.equal(r.status, 200, r.text);
});
after(async () => {
  await server?.stop();
  await browser?.close();
});

async function preview(size, lang, state, colorScheme = 'light') {
  const context = await browser.newContext({
    viewport: SIZES[size], locale: lang, timezoneId: 'UTC', colorScheme,
    extraHTTPHeaders: { authorization: `Bearer ${KEY}` },
  });
  const page = await context.newPage();
  const response = await page.goto(`${server.url}/v1/rooms/drop/page/preview?state=${state}&lang=${lang}`);
  assert.equal(response.status(), 200);
  await page.waitForFunction((want) => document.body.dataset.status === want, STATES[state]);
  return { context, page };
}

describe('the waiting page in every state', () => {
  for (const lang of LANGUAGES) {
    for (const size of Object.keys(SIZES)) {
      test(`${lang}, ${size}: fits, translated, AA contrast, screenshots`, async () => {
        const en = (await api(server, 'GET', '/v1/rooms/drop/page/preview?state=waiting&lang=en', undefined, KEY)).text;
        assert.match(en, /Your position/);
        for (const state of Object.keys(STATES)) {
          const { context, page } = await preview(size, lang, state);
          try {
            const layout = await page.evaluate(() => ({
              scroll: document.documentElement.scrollWidth, width: innerWidth,
              lang: document.documentElement.lang, title: document.querySelector('#title').textContent,
              status: document.querySelector('#status-text').textContent,
            }));
            assert.ok(layout.scroll <= layout.width, `${state}: ${layout.scroll} px wide in ${layout.width}`);
            assert.equal(layout.lang, lang);
            if (lang === 'de') {
              assert.doesNotMatch(`${layout.title} ${layout.status}`, /\b(You|line|turn|waiting room)\b/, state);
            }
            for (const c of await page.evaluate(contrasts)) {
              assert.ok(c.ratio >= 4.5, `${lang} ${size} ${state}: ${c.what} contrast ${c.ratio.toFixed(2)} < 4.5`);
            }
            await page.screenshot({ path: screenshotPath(`wait-${state}-${lang}-${SIZES[size].width}.png`) });
          } finally {
            await context.close();
          }
        }
      });
    }
  }

  test('the dark default theme keeps AA contrast too', async () => {
    for (const state of ['waiting', 'error']) {
      const { context, page } = await preview('phone', 'en', state, 'dark');
      try {
        for (const c of await page.evaluate(contrasts)) {
          assert.ok(c.ratio >= 4.5, `dark ${state}: ${c.what} contrast ${c.ratio.toFixed(2)}`);
        }
      } finally {
        await context.close();
      }
    }
  });

  test('usable with the keyboard alone: Tab reaches the one control, with a visible focus ring', async () => {
    const { context, page } = await preview('phone', 'de', 'error');
    try {
      assert.equal(await page.locator('[tabindex]:not([tabindex="-1"]):not([tabindex="0"])').count(), 0,
        'no positive tabindex');
      await page.keyboard.press('Tab');
      const focused = await page.evaluate(() => {
        const el = document.activeElement;
        const style = getComputedStyle(el);
        return { id: el.id, text: el.textContent, outline: style.outlineStyle, width: style.outlineWidth };
      });
      assert.equal(focused.id, 'reload');
      assert.equal(focused.text, 'Neu laden');
      assert.notEqual(focused.outline, 'none');
      assert.notEqual(focused.width, '0px');
      const reloaded = page.waitForEvent('load');
      await page.keyboard.press('Enter');
      await reloaded;
    } finally {
      await context.close();
    }
  });
});

describe('the live page', () => {
  test('position changes are announced in the live region, in the page language', async () => {
    const live = await startServer([]);
    const context = await browser.newContext({ viewport: SIZES.phone, locale: 'de-DE' });
    try {
      const put = await api(live, 'PUT', '/v1/rooms/r', { capacity: 1, checkin_timeout_ms: 60_000 });
      assert.equal(put.status, 200, put.text);
      const holder = 'holder-UXVpY2tCcm93bkZveA';
      const ahead = 'ahead-UXVpY2tCcm93bkZveA';
      assert.equal((await api(live, 'POST', '/v1/rooms/r/check', { session: holder })).json.status, 'active');
      assert.equal((await api(live, 'POST', '/v1/rooms/r/check', { session: ahead })).json.status, 'waiting');
      const page = await context.newPage();
      await page.goto(`${live.url}/wait/r`);
      assert.equal(await page.locator('#live').getAttribute('aria-live'), 'polite');
      await page.waitForFunction(() => document.querySelector('#position').textContent === '2');
      await eventually(async () => /Nummer 2/.test(await page.locator('#live').textContent()), 5_000, 'announced 2');
      await api(live, 'POST', '/v1/rooms/r/leave', { session: ahead, final: true });
      await page.waitForFunction(() => document.querySelector('#position').textContent === '1', null, { timeout: 10_000 });
      await eventually(async () => /Nummer 1/.test(await page.locator('#live').textContent()), 5_000, 'announced 1');
    } finally {
      await context.close();
      await live.stop();
    }
  });

  test('script injection through the page settings stays text', async () => {
    const attack = '</script><script>window.pwned=1</script><img src=x onerror="window.pwned=2">';
    const r = await api(server, 'PUT', '/v1/rooms/evil', {
      capacity: 1,
      page: { title: attack, message: attack, logo_url: "/logo.svg?a=1&b='x'" },
    }, KEY);
    assert.equal(r.status, 200, r.text);
    const context = await browser.newContext({ viewport: SIZES.desktop });
    const page = await context.newPage();
    const dialogs = [];
    page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss(); });
    try {
      await page.goto(`${server.url}/wait/evil`);
      await page.waitForFunction(() => ['active', 'waiting'].includes(document.body.dataset.status));
      assert.equal(await page.evaluate(() => window.pwned), undefined);
      assert.equal(await page.locator('#brand-title').textContent(), attack);
      assert.equal(await page.title(), attack);
      assert.equal(await page.locator('img').count(), 1, 'only the logo');
      assert.deepEqual(dialogs, []);
    } finally {
      await context.close();
    }
  });
});
