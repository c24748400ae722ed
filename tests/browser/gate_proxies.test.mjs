// The gate behind real proxies (docs/gate.md): nginx (auth_request) and Caddy (the
// expanded forward_auth) run from the very files in examples/, in front of a small origin site,
// with anteroom served under /anteroom/ of the same site (--public-url /anteroom). Chromium
// browses the site as people would, through each proxy, in a room of capacity 2:
//
//  - two visitors are let in on the spot (the cookie set: HttpOnly, SameSite=Lax, Path=/);
//    the origin sees their session; a bypassed asset and an app's JSON answer while full
//  - a third asking for /product/42?x=1 lands on the waiting page at position 1
//  - the first follows the leave link and confirms: the third reaches exactly /product/42?x=1
//    within 2 s
//  - the third keeps browsing past its token's first lifetime: the proxy passes the renewed
//    cookie on the 200 (the cookie in the browser changes)
//  - a forged, an expired and a revoked cookie: the waiting page, the cookie cleared
//  - return=https://evil.example/: the enter call answers 400, the page shows the error
//  - nobody waiting and a free slot: a new visitor goes straight through
//  - a link with ?pass=CODE while the room is full: the waiting page redeems it (first in
//    line, ahead of one who came before), the code gone from the address bar and from the URL
//    gone back to; the next free slot is the pass holder's, at the URL asked for less the pass
//
// And the same through nginx with two anteroom processes on one Redis as one upstream.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { existsSync } from 'node:fs';

import { api, artifactPath, binary, chromiumPath, eventually, launchBrowser } from './harness.mjs';
import {
  caddyBinary, missing, nginxBinary, redisBinary, startAnteroom, startCaddy, startNginx,
  startOrigin, startRedis,
} from './proxies.mjs';

const ROOM = 'shop';
const COOKIE = `anteroom_${ROOM}`;
const TTL_MS = 4_000;  // --token-ttl-ms: renewal (past half, 2 s) and expiry within the test

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Why these tests cannot run here, or null: never a silent pass.
function skipReason(...more) {
  if (!existsSync(binary)) return `anteroom binary not found at ${binary} (build it first)`;
  return missing(chromiumPath, ...more);
}

let browser;
before(async () => {
  if (!skipReason()) browser = await launchBrowser();
});
after(async () => { await browser?.close(); });

// The JWT's claims, unverified.
function claims(token) {
  return JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString('utf8'));
}

// The same claims signed with a secret that is not the server's.
function resigned(token) {
  const [header, payload] = token.split('.');
  const sig = crypto.createHmac('sha256', 'not-the-server-secret')
    .update(`${header}.${payload}`).digest('base64url');
  return `${header}.${payload}.${sig}`;
}

// One person: a browser context and its page. `blockClient` keeps anteroom.js from loading, so
// a probe sent to the waiting page does not join the line.
async function person(site, { cookie, blockClient } = {}) {
  const context = await browser.newContext();
  if (cookie) {
    await context.addCookies([{ name: COOKIE, value: cookie, url: site.url, httpOnly: true, sameSite: 'Lax' }]);
  }
  if (blockClient) await context.route('**/anteroom/anteroom.js', (r) => r.abort());
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const cookieOf = async () => (await context.cookies(site.url)).find((c) => c.name === COOKIE);
  return { context, page, cookieOf };
}

const where = (p) => p.page.locator('#where').textContent({ timeout: 5_000 });

// Whether the page is anteroom's waiting page, sent there for `url` (the exact URL asked for).
function waitingFor(p, site, url) {
  const u = new URL(p.page.url());
  return u.origin === site.url && u.pathname === `/anteroom/wait/${ROOM}` &&
    u.searchParams.get('return') === url;
}

// The room as anteroom counts it.
async function room(anteroom) {
  const r = await api(anteroom, 'GET', `/v1/rooms/${ROOM}`);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

async function leaveSession(anteroom, session) {
  const r = await api(anteroom, 'POST', `/v1/rooms/${ROOM}/leave`, { session, final: true });
  assert.equal(r.status, 200, r.text);
}

// The whole visit, through `site` (a started proxy) to `anteroom` (one of its anteroom
// processes, for the admin API).
async function scenario(site, anteroom, label) {
  const people = [];
  const arrive = async (options) => { const p = await person(site, options); people.push(p); return p; };
  let step = 'start';
  try {
    step = 'room';
    const put = await api(anteroom, 'PUT', `/v1/rooms/${ROOM}`, {
      capacity: 2, gate: { bypass: { paths: ['/static/'] } },
    });
    assert.equal(put.status, 200, put.text);

    // --- Two visitors in on the spot ---
    step = 'two visitors in on the spot';
    const a = await arrive();
    await a.page.goto(`${site.url}/`);
    assert.equal(await where(a), '/');
    const aCookie = await a.cookieOf();
    assert.ok(aCookie, 'A got the cookie');
    assert.equal(aCookie.httpOnly, true);
    assert.equal(aCookie.sameSite, 'Lax');
    assert.equal(aCookie.path, '/');
    assert.match(await a.page.locator('#session').textContent(), /^[A-Za-z0-9_-]{22,}$/,
      'the origin was told the session');
    const b = await arrive();
    await b.page.goto(`${site.url}/cart`);
    assert.equal(await where(b), '/cart');
    assert.ok(await b.cookieOf(), 'B got the cookie');
    const bSession = await b.page.locator('#session').textContent();
    assert.equal((await room(anteroom)).active, 2);

    step = 'bypass and JSON while full';
    const asset = await fetch(`${site.url}/static/site.css`, { redirect: 'manual' });
    assert.equal(asset.status, 200, 'a bypassed asset passes without a slot');
    const app = await fetch(`${site.url}/api/cart`, {
      redirect: 'manual', headers: { accept: 'application/json' },
    });
    assert.equal(app.status, 429);
    assert.equal(app.headers.get('retry-after'), '2');
    const appBody = await app.json();
    assert.equal(appBody.status, 'waiting');
    assert.ok(appBody.wait_url.startsWith(`/anteroom/wait/${ROOM}?return=`), appBody.wait_url);
    // A client naming another request (a bypassed path) in its own X-Forwarded-* headers: the
    // proxy replaces them, the gate judges the real one.
    const spoof = await fetch(`${site.url}/secret`, {
      redirect: 'manual',
      headers: { 'x-forwarded-uri': '/static/x', 'x-original-uri': '/static/x' },
    });
    assert.ok([302, 401].includes(spoof.status), `spoofed URI: ${spoof.status}`);
    assert.ok(spoof.headers.get('location').includes(encodeURIComponent('/secret')),
      spoof.headers.get('location'));
    assert.equal((await room(anteroom)).active, 2, 'none took a slot');

    // --- The third waits, keeping the URL asked for ---
    step = 'the third waits at position 1';
    const asked = `${site.url}/product/42?x=1`;
    const c = await arrive();
    await c.page.goto(asked);
    assert.ok(waitingFor(c, site, asked), `on the waiting page: ${c.page.url()}`);
    await eventually(async () => (await c.page.locator('#position').textContent()) === '1',
      5_000, 'position 1');
    assert.equal((await room(anteroom)).waiting, 1);
    assert.equal(await c.cookieOf(), undefined, 'no cookie while waiting');

    // --- The first leaves by the link: the third is in, at the very URL ---
    step = 'leave link lets the third in';
    const left = Date.now();
    await a.page.click('#leave');  // the leave page only asks (a GET ends nothing) ...
    await a.page.click('#leave-confirm');  // ... the visitor's click posts
    await c.page.waitForURL(asked, { timeout: 2_000 });
    assert.equal(await where(c), '/product/42?x=1');
    const elapsed = Date.now() - left;
    assert.ok(elapsed <= 2_000, `in ${elapsed} ms`);
    const cCookie = await c.cookieOf();
    assert.ok(cCookie, 'C has the cookie');
    assert.equal(cCookie.httpOnly, true);
    await a.page.getByText('You have left').waitFor({ timeout: 5_000 });
    assert.equal(await a.cookieOf(), undefined, 'the leave link cleared the cookie');
    const counts = await room(anteroom);
    assert.equal(counts.active, 2);
    assert.equal(counts.waiting, 0);

    // --- Browsing past the token's first lifetime: renewed through the proxy ---
    step = 'renewal';
    const firstExpMs = claims(cCookie.value).exp * 1000;
    const browseUntil = firstExpMs + 1_500;
    assert.ok(browseUntil - Date.now() < TTL_MS + 3_000, 'the token is fresh');
    let renewals = 0;
    let last = cCookie.value;
    while (Date.now() < browseUntil) {
      await sleep(500);
      await c.page.reload();
      assert.equal(await where(c), '/product/42?x=1', `still browsing at ${c.page.url()}`);
      const now = (await c.cookieOf())?.value;
      if (now !== last) { renewals += 1; last = now; }
    }
    assert.ok(renewals >= 1, 'the browser got a renewed cookie');
    assert.ok(claims(last).exp * 1000 > firstExpMs, 'the renewed token lives longer');
    const [was, is] = [claims(cCookie.value), claims(last)];
    assert.deepEqual([is.room, is.inc, is.adm], [was.room, was.inc, was.adm], 'the same admission');

    // --- Cookies that are not admissions, while the room is full (B and C) ---
    step = 'forged cookie';
    const bToken = (await b.cookieOf()).value;
    const forged = await arrive({ cookie: resigned(bToken), blockClient: true });
    await forged.page.goto(`${site.url}/product/1`);
    assert.ok(waitingFor(forged, site, `${site.url}/product/1`), forged.page.url());
    assert.equal(await forged.cookieOf(), undefined, 'the forged cookie was cleared');

    step = 'expired cookie';
    assert.ok(claims(aCookie.value).exp * 1000 < Date.now(), 'A\'s old token has expired');
    const expired = await arrive({ cookie: aCookie.value, blockClient: true });
    await expired.page.goto(`${site.url}/product/2`);
    assert.ok(waitingFor(expired, site, `${site.url}/product/2`), expired.page.url());
    assert.equal(await expired.cookieOf(), undefined, 'the expired cookie was cleared');

    step = 'revoked cookie';
    await leaveSession(anteroom, bSession);
    // Its slot is taken again at once (an API session), so the room stays full.
    const filler = await api(anteroom, 'POST', `/v1/rooms/${ROOM}/check`, {});
    assert.equal(filler.json?.status, 'active', filler.text);
    await b.context.route('**/anteroom/anteroom.js', (r) => r.abort());
    await b.page.goto(`${site.url}/cart`);
    assert.ok(waitingFor(b, site, `${site.url}/cart`), b.page.url());
    assert.equal(await b.cookieOf(), undefined, 'the revoked cookie was cleared');
    assert.equal((await room(anteroom)).waiting, 0, 'the probes joined no line');

    // --- No open redirect ---
    step = 'return=https://evil.example/';
    await leaveSession(anteroom, filler.json.session);  // a slot for the page to be admitted to
    const evil = await arrive();
    const entered = evil.page.waitForResponse((r) => r.url().endsWith(`/anteroom/v1/gate/${ROOM}/enter`),
      { timeout: 10_000 });
    await evil.page.goto(`${site.url}/anteroom/wait/${ROOM}?return=${encodeURIComponent('https://evil.example/')}`);
    const enter = await entered;
    assert.equal(enter.status(), 400);
    await evil.page.waitForFunction(() => document.body.dataset.status === 'error', null, { timeout: 5_000 });
    assert.match(await evil.page.locator('#status-text').textContent(), /'return' must be/);
    await sleep(300);
    assert.equal(new URL(evil.page.url()).pathname, `/anteroom/wait/${ROOM}`, 'no redirect');
    assert.equal(await evil.cookieOf(), undefined);
    // The refused page gives its slot back at once (and shows its error still).
    await eventually(async () => (await room(anteroom)).active === 1, 3_000, 'the slot given back');
    assert.match(await evil.page.locator('#status-text').textContent(), /'return' must be/);

    // --- Nobody waiting and a free slot: straight through ---
    step = 'a new visitor straight through';
    const counts2 = await room(anteroom);
    assert.equal(counts2.active, 1, JSON.stringify(counts2));
    assert.equal(counts2.waiting, 0);
    await sleep(1_100);  // the gate's room counts are up to 1 s old (docs/gate.md)
    const f = await arrive();
    await f.page.goto(`${site.url}/product/7`);
    assert.equal(await where(f), '/product/7');
    assert.ok(await f.cookieOf(), 'F got the cookie');
    assert.equal((await room(anteroom)).active, 2);

    // --- A link with a pass skips the line ---
    step = 'a pass skips the line';
    const g = await arrive();
    await g.page.goto(`${site.url}/product/8`);
    assert.ok(waitingFor(g, site, `${site.url}/product/8`), g.page.url());
    await eventually(async () => (await g.page.locator('#position').textContent()) === '1',
      5_000, 'G at position 1');
    const minted = await api(anteroom, 'POST', `/v1/rooms/${ROOM}/passes`, { kind: 'front' });
    assert.equal(minted.status, 201, minted.text);
    const { id, code } = minted.json.passes[0];
    const h = await arrive();
    await h.page.goto(`${site.url}/product/9?y=2&pass=${encodeURIComponent(code)}`);
    assert.ok(waitingFor(h, site, `${site.url}/product/9?y=2`),
      `on the waiting page, the pass not in the return URL: ${h.page.url()}`);
    await eventually(async () => (await h.page.locator('#position').textContent()) === '1',
      5_000, 'H (with the pass) at position 1');
    assert.equal(new URL(h.page.url()).searchParams.get('pass'), null,
      'the code is gone from the address bar');
    await eventually(async () => (await g.page.locator('#position').textContent()) === '2',
      5_000, 'G moved to position 2');
    const listed = await api(anteroom, 'GET', `/v1/rooms/${ROOM}/passes`);
    assert.equal(listed.json.passes.find((p) => p.id === id).uses_left, 0, listed.text);
    // A slot frees: it is the pass holder's, at the page asked for (less the pass).
    await leaveSession(anteroom, await f.page.locator('#session').textContent());
    await h.page.waitForURL(`${site.url}/product/9?y=2`, { timeout: 5_000 });
    assert.equal(await where(h), '/product/9?y=2');
    await eventually(async () => (await g.page.locator('#position').textContent()) === '1',
      5_000, 'G next');
  } catch (e) {
    const shots = [];
    for (const [i, p] of people.entries()) {
      const file = artifactPath(`gate-${label}-${i}.png`);
      await p.page.screenshot({ path: file }).then(() => shots.push(`${p.page.url()} -> ${file}`), () => {});
    }
    e.message = `${label}, ${step}: ${e.message}\npages: ${shots.join('\n  ')}\nproxy: ${site.output().slice(-3000)}`;
    throw e;
  } finally {
    for (const p of people) await p.context.close().catch(() => {});
  }
}

const serveArgs = ['--public-url', '/anteroom', '--token-ttl-ms', String(TTL_MS),
  '--trusted-proxy', '127.0.0.1/32'];

describe('the gate behind real proxies', () => {
  for (const [name, start, proxyBinary] of [
    ['nginx (auth_request)', startNginx, nginxBinary],
    ['Caddy (forward_auth, expanded)', startCaddy, caddyBinary],
  ]) {
    test(`${name}: on the spot, wait, leave, renew, refuse`, { skip: skipReason(proxyBinary) ?? false },
      async () => {
        let origin;
        let anteroom;
        let proxy;
        try {
          origin = await startOrigin(ROOM);
          anteroom = await startAnteroom(['--memory-only', ...serveArgs]);
          proxy = await start({ originPort: origin.port, anteroomPorts: [anteroom.port], room: ROOM });
          await scenario(proxy, anteroom, name.split(' ')[0]);
        } finally {
          await proxy?.stop();
          await anteroom?.stop();
          await origin?.stop();
        }
      });
  }

  test('nginx with two anteroom processes on one Redis as one upstream',
    { skip: skipReason(nginxBinary, redisBinary) ?? false }, async () => {
      let origin;
      let redis;
      const anterooms = [];
      let proxy;
      try {
        origin = await startOrigin(ROOM);
        redis = await startRedis();
        for (let i = 0; i < 2; ++i) {
          anterooms.push(await startAnteroom(['--store', redis.url, ...serveArgs]));
        }
        proxy = await startNginx({
          originPort: origin.port, anteroomPorts: anterooms.map((a) => a.port), room: ROOM,
        });
        await scenario(proxy, anterooms[0], 'nginx-redis');
        // Both processes answered the gate (nginx spreads the subrequests over the upstream).
        for (const [i, a] of anterooms.entries()) {
          const metrics = await (await fetch(`${a.url}/metrics`)).text();
          const m = metrics.match(/^anteroom_http_request_duration_seconds_count\{method="GET",route="\/v1\/gate\/\{room\}"\} (\d+)/m);
          assert.ok(m && Number(m[1]) > 0, `process ${i} answered no gate request`);
        }
      } finally {
        await proxy?.stop();
        for (const a of anterooms) await a.stop();
        await redis?.stop();
        await origin?.stop();
      }
    });
});
