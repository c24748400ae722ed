// Attacks on the gate (docs/gate.md), through the real proxies (nginx and Caddy, run from the very
// files in examples/) where a proxy is involved, else against anteroom directly. The origin
// (proxies.mjs) is a careless site on purpose: it resolves `..`, percent-escapes, `;` path
// parameters and fragments itself, and serves /secret.html (the word SECRET), so only the gate
// stands between a visitor and it. The room `shop`: capacity 1, grace_ms 1500, bypass paths
// /static/, *.css, /favicon.ico and the header X-Partner-Token: s3cr3t-partner-9f8e; its one
// slot taken by an API session unless a test needs it free. Each numbered item of the gate's
// security fixes is its own test, per proxy:
//
//  1. bypass rules match the normalised path, and only a path that is already normal:
//     /static/../secret.html, /static/%2e%2e/secret.html, /secret.html;.css, a literal '#' and
//     the like never serve SECRET while full (the real bypasses still do); the origin never
//     sees a request for /secret.html while full
//  3. the room as anyone reads it (GET /v1/rooms[/shop], also through the site) has no `gate`;
//     the admin sees the partner header's value only as sha256:HEX; the header still passes,
//     a wrong value (or the shown hash) does not
//  4. /v1/tokens/verify names the session only to the admin; the decision route is not
//     reachable through the proxy under /anteroom/ (404/403, no X-Anteroom-Session), and
//     anteroom refuses a decision request carrying X-Forwarded-Prefix (404 + JSON error)
//  5. leaving takes a same-site POST: a cross-site GET shows a confirm page and ends nothing,
//     a cross-site POST is 403; the confirm button (Chromium) ends the admission
//  6. probes (HEAD, GET with Accept */*) take no slot; a page's visit (Accept text/html) is let
//     in, and its slot is freed after grace_ms unless the cookie comes back
//  7. rooms x.y, x_y and x:y get three different cookie names
//  8. the origin gets X-Anteroom-Session only from the gate: never the client's own, never an
//     unfilled Caddy placeholder
//
// The open-redirect checks of the return URL (item 2) are in gate_return_urls.test.mjs.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import net from 'node:net';

import { api, binary, chromiumPath, eventually, launchBrowser } from './harness.mjs';
import {
  caddyBinary, missing, nginxBinary, startAnteroom, startCaddy, startNginx, startOrigin,
} from './proxies.mjs';

const ROOM = 'shop';
const COOKIE = `anteroom_${ROOM}`;
const ADMIN_KEY = 'test-admin-key';
const PARTNER_TOKEN = 's3cr3t-partner-9f8e';
const GATE = {
  bypass: { paths: ['/static/', '*.css', '/favicon.ico'], headers: { 'X-Partner-Token': PARTNER_TOKEN } },
};
const SHOP = { capacity: 1, grace_ms: 1500, gate: GATE };
const SESSION_ID = /^[A-Za-z0-9_-]{22,}$/;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Why these tests cannot run here, or null: never a silent pass.
function skipReason(...more) {
  if (!existsSync(binary)) return `anteroom binary not found at ${binary} (build it first)`;
  return missing(...more);
}

const PROXIES = [
  ['nginx', startNginx, nginxBinary],
  ['Caddy', startCaddy, caddyBinary],
];

// --- HTTP exactly as written -------------------------------------------------------------------

// One request over a fresh TCP connection, its request line and headers sent byte for byte (no
// client normalises `..`, escapes or '#'): {status, headers: [[name, value]], header(name),
// all(name), body}. Bounded by 5 s.
function raw(port, { method = 'GET', target, headers = {}, body = '' }) {
  const lines = [`${method} ${target} HTTP/1.1`, `Host: 127.0.0.1:${port}`];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body || ['POST', 'PUT'].includes(method)) lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  lines.push('Connection: close', '', body);
  const request = lines.join('\r\n');
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`${method} ${JSON.stringify(target)}: no complete answer within 5 s`));
    }, 5_000);
    socket.on('connect', () => socket.write(request));
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', (e) => { clearTimeout(timer); reject(e); });
    socket.on('close', () => {
      clearTimeout(timer);
      try {
        resolve(parse(Buffer.concat(chunks), method));
      } catch (e) {
        reject(new Error(`${method} ${JSON.stringify(target)}: ${e.message}`));
      }
    });
  });
}

function parse(buffer, method) {
  const text = buffer.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`no HTTP answer: ${JSON.stringify(text.slice(0, 200))}`);
  const [statusLine, ...fieldLines] = text.slice(0, end).split('\r\n');
  const m = statusLine.match(/^HTTP\/1\.[01] (\d{3})/);
  if (!m) throw new Error(`not an HTTP status line: ${JSON.stringify(statusLine)}`);
  const headers = fieldLines.map((l) => {
    const i = l.indexOf(':');
    return [l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim()];
  });
  const all = (name) => headers.filter(([k]) => k === name.toLowerCase()).map(([, v]) => v);
  let body = method === 'HEAD' ? '' : text.slice(end + 4);
  if (all('transfer-encoding').some((v) => /chunked/i.test(v))) {
    let out = '';
    let rest = body;
    for (;;) {
      const nl = rest.indexOf('\r\n');
      const size = parseInt(rest.slice(0, nl), 16);
      if (!(size > 0)) break;
      out += rest.slice(nl + 2, nl + 2 + size);
      rest = rest.slice(nl + 2 + size + 2);
    }
    body = out;
  }
  body = Buffer.from(body, 'latin1').toString('utf8');
  return { status: Number(m[1]), headers, all, header: (name) => all(name).join(', '), body };
}

// The value of cookie `name` in an answer's Set-Cookie lines (undefined if none sets it).
function setCookie(res, name) {
  for (const line of res.all('set-cookie')) {
    const [pair, ...attrs] = line.split(';');
    const eq = pair.indexOf('=');
    if (pair.slice(0, eq).trim() !== name) continue;
    const cleared = attrs.some((a) => /^\s*max-age\s*=\s*0\s*$/i.test(a)) || pair.slice(eq + 1) === '';
    return { value: pair.slice(eq + 1).trim(), cleared, line };
  }
  return undefined;
}

const show = (res) => `${res.status} ${JSON.stringify(res.headers)} ${res.body.slice(0, 300)}`;

// What a browser sends for a page's navigation, and what curl sends.
const NAVIGATE = {
  Accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
  'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Dest': 'document', 'Sec-Fetch-Site': 'none',
  'User-Agent': 'Mozilla/5.0 (X11; Linux x86_64) gate-attacks-test',
};
const CURL = { Accept: '*/*', 'User-Agent': 'curl/7.88.1' };

// --- the stack --------------------------------------------------------------------------------

const serveArgs = ['--memory-only', '--public-url', '/anteroom', '--trusted-proxy', '127.0.0.1/32'];

async function putRoom(anteroom, name, config) {
  const put = await api(anteroom, 'PUT', `/v1/rooms/${encodeURIComponent(name)}`, config, ADMIN_KEY);
  assert.equal(put.status, 200, `PUT /v1/rooms/${name}: ${put.text}`);
}

// The room as anteroom counts it (read directly, with the admin key).
async function counts(anteroom) {
  const r = await api(anteroom, 'GET', `/v1/rooms/${ROOM}`, undefined, ADMIN_KEY);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

// Takes the room's free slot with an API session: the room is full.
async function fill(anteroom) {
  const c = await api(anteroom, 'POST', `/v1/rooms/${ROOM}/check`, {});
  assert.equal(c.json?.status, 'active', `the API session that fills the room: ${c.text}`);
  assert.equal((await counts(anteroom)).active, 1, 'the room is full');
  return c.json;
}

// The room afresh (deleted and put again: nobody in), seen as such by the gate (whose counts
// are up to 1 s old).
async function resetRoom(anteroom, config) {
  const del = await api(anteroom, 'DELETE', `/v1/rooms/${ROOM}`, undefined, ADMIN_KEY);
  assert.ok([200, 204, 404].includes(del.status), `DELETE /v1/rooms/${ROOM}: ${del.status} ${del.text}`);
  await putRoom(anteroom, ROOM, config);
  await sleep(1_100);
  const c = await counts(anteroom);
  assert.deepEqual([c.active, c.waiting], [0, 0], `the room afresh: ${JSON.stringify(c)}`);
}

// The session an admission token's admission is held by (the admin's verify).
async function sessionOf(anteroom, token) {
  const v = await api(anteroom, 'POST', '/v1/tokens/verify', { token }, ADMIN_KEY);
  assert.equal(v.status, 200, v.text);
  return v.json;
}

// origin + anteroom (admin key set) + the proxy from examples/, the room `shop` put with
// `config`; full (its slot taken by an API session) when `full`. Everything stopped by PID.
async function withStack(startProxy, { config = SHOP, full = true } = {}, fn) {
  let origin;
  let anteroom;
  let proxy;
  try {
    origin = await startOrigin(ROOM);
    anteroom = await startAnteroom(serveArgs, { ANTEROOM_ADMIN_KEY: ADMIN_KEY });
    proxy = await startProxy({ originPort: origin.port, anteroomPorts: [anteroom.port], room: ROOM });
    await putRoom(anteroom, ROOM, config);
    const filler = full ? await fill(anteroom) : null;
    await fn({ origin, anteroom, proxy, filler });
  } catch (e) {
    const out = proxy && !(e instanceof assert.AssertionError) ? proxy.output().trim() : '';
    if (out) e.message += `\nproxy output: ${out.slice(-2000)}`;
    throw e;
  } finally {
    await proxy?.stop();
    await anteroom?.stop();
    await origin?.stop();
  }
}

// A visitor let in on the spot through the proxy (the room has a free slot), who came back
// once with the cookie: {cookie (name=value), token, session}.
async function admitVisitor(proxy, anteroom, target = '/') {
  const first = await raw(proxy.port, { target, headers: NAVIGATE });
  const set = setCookie(first, COOKIE);
  assert.equal(first.status, 200, `a page's visit with a free slot is let in: ${show(first)}`);
  assert.ok(set && !set.cleared, `it gets the cookie: ${show(first)}`);
  const cookie = `${COOKIE}=${set.value}`;
  const again = await raw(proxy.port, { target, headers: { ...NAVIGATE, Cookie: cookie } });
  assert.equal(again.status, 200, `it comes back with its cookie: ${show(again)}`);
  const held = await sessionOf(anteroom, set.value);
  assert.equal(held.valid, true, JSON.stringify(held));
  assert.match(String(held.session), SESSION_ID, `the admin's verify names the session: ${JSON.stringify(held)}`);
  return { cookie, token: set.value, session: held.session };
}

// ================================================================================================

describe('the gate under attack, through real proxies', () => {
  for (const [name, start, proxyBinary] of PROXIES) {
    // --- 1 ---------------------------------------------------------------------------------------
    test(`${name}: 1. bypass rules match the normalised path only`,
      { skip: skipReason(proxyBinary) ?? false }, async (t) => {
        await withStack(start, {}, async ({ origin, proxy }) => {
          const attacks = [
            '/static/../secret.html',
            '/static/%2e%2e/secret.html',
            '/static/..%2fsecret.html',
            '/static/%2E%2E/secret.html',
            '/secret.html;.css',
            '/secret.html#.css',
          ];
          // The origin on its own serves SECRET for each (it is careless on purpose): only the
          // gate can keep them out.
          for (const target of attacks) {
            const direct = await raw(origin.port, { target, headers: NAVIGATE });
            assert.ok(direct.status === 200 && direct.body.includes('SECRET'),
              `harness: the origin itself serves SECRET for ${target} (${show(direct)})`);
          }
          origin.seen.length = 0;

          const plain = await raw(proxy.port, { target: '/secret.html', headers: NAVIGATE });
          assert.notEqual(plain.status, 200, `the room is full: /secret.html waits (${show(plain)})`);

          for (const target of attacks) {
            await t.test(`GET ${target} while full is not served`, async () => {
              const res = await raw(proxy.port, { target, headers: NAVIGATE });
              assert.ok(!res.body.includes('SECRET'),
                `${name} served SECRET for GET ${target} while the room is full: ${show(res)}`);
              assert.notEqual(res.status, 200,
                `${name} let GET ${target} through to the origin (200) while the room is full: ${show(res)}`);
              if ([302, 401].includes(res.status)) {
                // nginx makes the gate's relative Location absolute; Caddy passes it as it is.
                const wait = new URL(res.header('location'), proxy.url);
                assert.equal(`${wait.origin}${wait.pathname}`, `${proxy.url}/anteroom/wait/${ROOM}`, show(res));
                assert.ok(wait.searchParams.get('return')?.startsWith(`${proxy.url}/`), show(res));
              }
            });
          }

          await t.test('the real bypasses still pass while full', async () => {
            for (const target of ['/static/site.css', '/x.css', '/favicon.ico']) {
              const res = await raw(proxy.port, { target, headers: CURL });
              assert.equal(res.status, 200, `GET ${target} (a bypass) while full: ${show(res)}`);
            }
          });

          await t.test('the origin saw nothing but the real bypasses while full', () => {
            const secret = origin.seen.filter((s) => s.path === '/secret.html');
            assert.deepEqual(secret, [], `the origin was asked for the secret while full: ${JSON.stringify(secret)}`);
            const legit = ['/static/site.css', '/x.css', '/favicon.ico'];
            const other = origin.seen.filter((s) => !legit.includes(s.url));
            assert.deepEqual(other, [], `the origin got other requests while full: ${JSON.stringify(other)}`);
          });
        });
      });

    // --- 3 ---------------------------------------------------------------------------------------
    test(`${name}: 3. the partner header passes; its value is never shown`,
      { skip: skipReason(proxyBinary) ?? false }, async (t) => {
        await withStack(start, {}, async ({ anteroom, proxy }) => {
          await t.test('X-Partner-Token with the right value passes while full', async () => {
            for (const header of ['X-Partner-Token', 'x-partner-token']) {
              const res = await raw(proxy.port, { target: '/secret.html', headers: { ...CURL, [header]: PARTNER_TOKEN } });
              assert.equal(res.status, 200, `${header}: ${PARTNER_TOKEN}: ${show(res)}`);
              assert.ok(res.body.includes('SECRET'), show(res));
            }
          });

          // What the admin sees of the header rule (the secret itself today, its hash after).
          const admin = await api(anteroom, 'GET', `/v1/rooms/${ROOM}`, undefined, ADMIN_KEY);
          const shown = Object.entries(admin.json?.gate?.bypass?.headers ?? {})
            .find(([k]) => k.toLowerCase() === 'x-partner-token')?.[1];
          const wrong = ['s3cr3t-partner-9f8f', 'S3CR3T-PARTNER-9F8E-x', '*', ''];
          if (shown && shown !== PARTNER_TOKEN) wrong.push(shown);
          await t.test('a wrong value does not pass (nor the value the admin is shown)', async () => {
            for (const value of wrong) {
              const res = await raw(proxy.port, { target: '/secret.html', headers: { ...CURL, 'X-Partner-Token': value } });
              assert.ok(res.status !== 200 && !res.body.includes('SECRET'),
                `X-Partner-Token: ${JSON.stringify(value)} let the secret through: ${show(res)}`);
            }
          });

          await t.test('the room read through the site carries no gate and no partner token', async () => {
            for (const target of [`/anteroom/v1/rooms/${ROOM}`, '/anteroom/v1/rooms']) {
              const res = await raw(proxy.port, { target, headers: { Accept: 'application/json' } });
              assert.equal(res.status, 200, `GET ${target}: ${show(res)}`);
              assert.ok(!res.body.includes(PARTNER_TOKEN), `GET ${target} shows the partner token: ${res.body}`);
              const body = JSON.parse(res.body);
              for (const r of body.rooms ?? [body]) {
                assert.ok(!('gate' in r), `GET ${target} (no admin key) has a gate member: ${JSON.stringify(r.gate)}`);
              }
            }
          });
        });
      });

    // --- 4 ---------------------------------------------------------------------------------------
    test(`${name}: 4. the decision route is not reachable through the site`,
      { skip: skipReason(proxyBinary) ?? false }, async (t) => {
        await withStack(start, { full: false }, async ({ anteroom, proxy }) => {
          const visitor = await admitVisitor(proxy, anteroom);
          const forwarded = { 'X-Forwarded-Uri': '/', 'X-Original-URI': '/' };
          const asks = [
            ['GET', `/anteroom/v1/gate/${ROOM}`, {}],
            ['GET', `/anteroom/v1/gate/${ROOM}`, forwarded],
            ['GET', `/anteroom/v1/gate/${ROOM}?proxy=nginx`, forwarded],
            ['HEAD', `/anteroom/v1/gate/${ROOM}`, forwarded],
            ['POST', `/anteroom/v1/gate/${ROOM}`, forwarded],
            ['GET', `/anteroom//v1/gate/${ROOM}`, forwarded],
            ['GET', `/anteroom/v1/./gate/${ROOM}`, forwarded],
            ['GET', `/anteroom/v1/gate/x/../${ROOM}`, forwarded],
          ];
          for (const [method, target, extra] of asks) {
            const label = `${method} ${target}${Object.keys(extra).length ? ' + X-Forwarded-Uri/X-Original-URI' : ''}`;
            await t.test(`${label} with an admitted visitor's cookie: no decision, no session`, async () => {
              const res = await raw(proxy.port, {
                method, target, headers: { Accept: '*/*', Cookie: visitor.cookie, ...extra },
              });
              assert.equal(res.header('x-anteroom-session'), '', `${label} names the session: ${show(res)}`);
              assert.ok(!res.body.includes(visitor.session) && !JSON.stringify(res.headers).includes(visitor.session),
                `${label} shows the session id: ${show(res)}`);
              assert.ok([403, 404].includes(res.status), `${label}: expected 404 or 403, got ${show(res)}`);
            });
          }
        });
      });

    // --- 5 ---------------------------------------------------------------------------------------
    test(`${name}: 5. leaving takes a same-site POST (a confirm page)`,
      { skip: skipReason(proxyBinary, chromiumPath) ?? false }, async (t) => {
        await withStack(start, { full: false }, async ({ anteroom, proxy }) => {
          const browser = await launchBrowser();
          try {
            const context = await browser.newContext();
            const page = await context.newPage();
            page.setDefaultTimeout(10_000);
            const cookieOf = async () => (await context.cookies(proxy.url)).find((c) => c.name === COOKIE);
            const leavePath = `/anteroom/v1/gate/${ROOM}/leave`;
            // The browser holds the room's one slot (visiting the site again if an earlier step
            // ended its admission): its cookie, name=value.
            const admitted = async () => {
              if ((await counts(anteroom)).active === 0) {
                await sleep(1_100);  // the gate's counts are up to 1 s old (docs/gate.md)
                await visit();
              }
              const c = await cookieOf();
              assert.ok(c, 'the browser was let in on the spot (it has the cookie)');
              assert.equal((await sessionOf(anteroom, c.value)).valid, true, 'its admission is held');
              assert.equal((await counts(anteroom)).active, 1);
              return c;
            };
            // In on the spot, then back with the cookie (a slot let in on the spot and never
            // claimed is freed after grace_ms).
            const visit = async () => {
              await page.goto(`${proxy.url}/`);
              await page.goto(`${proxy.url}/cart`);
              assert.equal(new URL(page.url()).pathname, '/cart', `the browser browses the site: ${page.url()}`);
            };
            await visit();

            await t.test('a cross-site GET of the leave link ends nothing: a confirm page', async () => {
              const c = await admitted();
              const get = await raw(proxy.port, {
                target: leavePath,
                headers: { ...NAVIGATE, 'Sec-Fetch-Site': 'cross-site', Referer: 'https://evil.example/', Cookie: `${COOKIE}=${c.value}` },
              });
              await sleep(300);
              assert.equal((await counts(anteroom)).active, 1,
                `a cross-site GET of ${leavePath} ended the admission (answer: ${show(get)})`);
              assert.equal((await sessionOf(anteroom, c.value)).valid, true, 'the token still holds');
              assert.equal(get.status, 200, `the cross-site GET: ${show(get)}`);
              assert.match(get.header('content-type'), /^text\/html/, show(get));
              assert.match(get.body, /leave-confirm/, `the GET answers a confirm page (#leave-confirm): ${show(get)}`);
              assert.ok(!setCookie(get, COOKIE)?.cleared, `the GET cleared the cookie: ${show(get)}`);
            });

            // A <form method=post> on evil.example (a form's content type), and the same with no
            // body at all (what the confirm page itself sends), so that the Sec-Fetch-Site rule is
            // seen on its own.
            const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
            for (const [what, headers] of [
              ['Origin: http://evil.example (a form)', { ...form, Origin: 'http://evil.example' }],
              ['Sec-Fetch-Site: cross-site (a form)', { ...form, 'Sec-Fetch-Site': 'cross-site' }],
              ['Sec-Fetch-Site: cross-site (no body)', { 'Sec-Fetch-Site': 'cross-site' }],
            ]) {
              await t.test(`a POST with ${what} is refused`, async () => {
                const c = await admitted();
                const post = await raw(proxy.port, {
                  method: 'POST', target: leavePath, headers: { Cookie: `${COOKIE}=${c.value}`, ...headers },
                });
                await sleep(300);
                assert.equal((await counts(anteroom)).active, 1, `POST with ${what} ended the admission: ${show(post)}`);
                // A form's body is refused before its origin is looked at (the router takes JSON
                // only: 415); either way nothing changed.
                const refused = what.endsWith('(a form)') ? [403, 415] : [403];
                assert.ok(refused.includes(post.status), `POST ${leavePath} with ${what}: ${show(post)}`);
              });
            }

            await t.test('the visitor\'s own click on #leave-confirm ends the admission', async () => {
              const c = await admitted();
              const back = `${proxy.url}/static/left.html`;  // bypassed: the way back takes no slot
              await page.goto(`${proxy.url}${leavePath}?return=${encodeURIComponent(back)}`);
              await sleep(300);
              assert.equal((await counts(anteroom)).active, 1, 'showing the leave page (a GET) ended the admission');
              await page.click('#leave-confirm', { timeout: 5_000 });
              await eventually(async () => (await counts(anteroom)).active === 0, 2_000, 'active 0 after the confirm');
              await eventually(async () => page.url() === back ||
                (await page.getByText('You have left').count()) > 0, 5_000, `the return URL or "You have left" (at ${page.url()})`);
              assert.equal(await cookieOf(), undefined, 'the confirmed leave cleared the cookie');
              assert.equal((await sessionOf(anteroom, c.value)).valid, false, 'the old token is revoked');
            });
          } finally {
            await browser.close();
          }
        });
      });

    // --- 6 ---------------------------------------------------------------------------------------
    test(`${name}: 6. probes (HEAD, GET Accept */*) take no slot`,
      { skip: skipReason(proxyBinary) ?? false }, async (t) => {
        const config = { ...SHOP, capacity: 3 };
        await withStack(start, { config, full: false }, async ({ anteroom, proxy }) => {
          for (const [method, headers] of [['HEAD', CURL], ['GET', CURL]]) {
            await t.test(`10 x ${method} / (Accept */*, no cookie, no Sec-Fetch-Mode)`, async () => {
              await resetRoom(anteroom, config);
              for (let i = 1; i <= 10; ++i) {
                const res = await raw(proxy.port, { method, target: '/', headers });
                assert.ok([302, 401].includes(res.status),
                  `${method} / #${i} (a probe): expected the waiting answer (302/401), got ${show(res)}`);
                assert.equal(setCookie(res, COOKIE), undefined, `${method} / #${i} set a cookie: ${show(res)}`);
              }
              const c = await counts(anteroom);
              assert.deepEqual([c.active, c.waiting], [0, 0], `after 10 ${method} probes: active ${c.active}, waiting ${c.waiting}`);
            });
          }
        });
      });

    test(`${name}: 6. a page's visit is let in; an unclaimed slot is freed after grace_ms`,
      { skip: skipReason(proxyBinary) ?? false }, async () => {
        await withStack(start, { config: { ...SHOP, capacity: 3 }, full: false }, async ({ anteroom, proxy }) => {
          // A: Accept text/html, never comes back.
          const a = await raw(proxy.port, { target: '/', headers: { Accept: 'text/html', 'User-Agent': 'visitor-a' } });
          const aCookie = setCookie(a, COOKIE);
          assert.equal(a.status, 200, `GET / Accept: text/html with free slots: ${show(a)}`);
          assert.ok(aCookie && !aCookie.cleared, `it gets the cookie: ${show(a)}`);
          const aAt = Date.now();
          assert.equal((await counts(anteroom)).active, 1, 'A holds a slot');
          await eventually(async () => (await counts(anteroom)).active === 0, 4_000,
            'A\'s unclaimed slot freed after grace_ms 1500');
          const freedIn = Date.now() - aAt;

          // B: a browser's navigation, back with the cookie within the grace: keeps the slot.
          const b = await raw(proxy.port, { target: '/', headers: NAVIGATE });
          const bCookie = setCookie(b, COOKIE);
          assert.equal(b.status, 200, `B: ${show(b)}`);
          assert.ok(bCookie && !bCookie.cleared, `B gets the cookie: ${show(b)}`);
          const bAt = Date.now();
          await sleep(500);
          const again = await raw(proxy.port, {
            target: '/product/1', headers: { ...NAVIGATE, Cookie: `${COOKIE}=${bCookie.value}` },
          });
          assert.equal(again.status, 200, `B back with its cookie within the grace: ${show(again)}`);
          while (Date.now() - bAt < 3_500) {
            assert.equal((await counts(anteroom)).active, 1,
              `B came back within the grace and lost its slot ${Date.now() - bAt} ms after arriving`);
            await sleep(250);
          }
          assert.equal((await sessionOf(anteroom, bCookie.value)).valid, true, 'B\'s token holds');
          assert.ok(freedIn >= 1_000, `A's slot was freed after ${freedIn} ms, before its grace`);
        });
      });

    // --- 8 ---------------------------------------------------------------------------------------
    test(`${name}: 8. the origin gets X-Anteroom-Session from the gate only`,
      { skip: skipReason(proxyBinary) ?? false }, async (t) => {
        await withStack(start, { full: false }, async ({ origin, anteroom, proxy }) => {
          const lastSeen = (url) => origin.seen.filter((s) => s.url === url).at(-1);
          await t.test('a bypassed request reaches the origin with no X-Anteroom-Session', async () => {
            for (const headers of [CURL, { ...CURL, 'X-Anteroom-Session': 'forged' }]) {
              const res = await raw(proxy.port, { target: '/static/site.css', headers });
              assert.equal(res.status, 200, show(res));
              const seen = lastSeen('/static/site.css');
              assert.ok(seen, 'the origin got the bypassed request');
              assert.equal(seen.session, '',
                `the origin got X-Anteroom-Session: ${JSON.stringify(seen.session)} on a bypassed request` +
                `${headers['X-Anteroom-Session'] ? ' (the client sent "forged")' : ''}`);
            }
          });
          await t.test('an admitted request reaches it with the real session, never the client\'s', async () => {
            const visitor = await admitVisitor(proxy, anteroom);
            const res = await raw(proxy.port, {
              target: '/product/1', headers: { ...NAVIGATE, Cookie: visitor.cookie, 'X-Anteroom-Session': 'forged' },
            });
            assert.equal(res.status, 200, show(res));
            const seen = lastSeen('/product/1');
            assert.ok(seen, 'the origin got the admitted request');
            assert.match(seen.session, SESSION_ID, `the origin got X-Anteroom-Session: ${JSON.stringify(seen.session)}`);
            assert.equal(seen.session, visitor.session, 'the session the admission is held by');
            // The visitor's first request (let in on the spot) named its session too.
            const first = origin.seen.find((s) => s.url === '/');
            assert.match(first?.session ?? '', SESSION_ID, `on the spot: ${JSON.stringify(first)}`);
          });
        });
      });
  }
});

// ================================================================================================

describe('the gate under attack, anteroom directly', () => {
  // A room's admin view, public view, and the visitor's cookie (direct decision requests, as a
  // proxy would send them).
  async function withAnteroom(fn) {
    const anteroom = await startAnteroom(serveArgs, { ANTEROOM_ADMIN_KEY: ADMIN_KEY });
    try {
      await fn(anteroom);
    } finally {
      await anteroom.stop();
    }
  }
  const decide = (anteroom, room, headers = {}) => raw(anteroom.port, {
    target: `/v1/gate/${room}`,
    headers: {
      'X-Forwarded-Uri': '/', 'X-Forwarded-Host': 'shop.example', 'X-Forwarded-Proto': 'http',
      Accept: 'text/html', ...headers,
    },
  });

  test('3. the public room object carries no gate; the admin sees the header rule hashed',
    { skip: skipReason() ?? false }, async (t) => {
      await withAnteroom(async (anteroom) => {
        await putRoom(anteroom, ROOM, SHOP);
        await t.test('without the admin key: no gate member', async () => {
          const one = await api(anteroom, 'GET', `/v1/rooms/${ROOM}`);
          assert.equal(one.status, 200, one.text);
          assert.ok(!('gate' in one.json), `GET /v1/rooms/${ROOM} without the admin key has gate: ${JSON.stringify(one.json.gate)}`);
          assert.ok(!one.text.includes(PARTNER_TOKEN), `GET /v1/rooms/${ROOM} shows the partner token`);
          const list = await api(anteroom, 'GET', '/v1/rooms');
          assert.equal(list.status, 200, list.text);
          const listed = list.json.rooms.find((r) => r.room === ROOM);
          assert.ok(listed, list.text);
          assert.ok(!('gate' in listed), `GET /v1/rooms without the admin key has gate: ${JSON.stringify(listed.gate)}`);
          assert.ok(!list.text.includes(PARTNER_TOKEN), 'GET /v1/rooms shows the partner token');
        });

        await t.test('with the admin key: the gate, the header value as sha256:HEX', async () => {
          for (const route of [`/v1/rooms/${ROOM}`, '/v1/rooms']) {
            const admin = await api(anteroom, 'GET', route, undefined, ADMIN_KEY);
            assert.equal(admin.status, 200, admin.text);
            const room = admin.json.rooms ? admin.json.rooms.find((r) => r.room === ROOM) : admin.json;
            assert.ok(room?.gate, `${route} with the admin key has the gate: ${admin.text}`);
            assert.deepEqual(room.gate.bypass.paths, GATE.bypass.paths);
            const rules = Object.entries(room.gate.bypass.headers);
            assert.equal(rules.length, 1, JSON.stringify(room.gate));
            assert.equal(rules[0][0].toLowerCase(), 'x-partner-token');
            assert.match(rules[0][1], /^sha256:[0-9a-f]{64}$/, `${route} (admin) shows the header value as ${JSON.stringify(rules[0][1])}`);
            assert.ok(!admin.text.includes(PARTNER_TOKEN), `${route} (admin) shows the partner token`);
          }
        });
      });
    });

  test('4. verify names the session only to the admin; a decision with X-Forwarded-Prefix is refused',
    { skip: skipReason() ?? false }, async (t) => {
      await withAnteroom(async (anteroom) => {
        await putRoom(anteroom, ROOM, { ...SHOP, capacity: 5 });
        const c = await api(anteroom, 'POST', `/v1/rooms/${ROOM}/check`, {});
        assert.equal(c.json?.status, 'active', c.text);

        await t.test('verify: the session to the admin only', async () => {
          const anyone = await api(anteroom, 'POST', '/v1/tokens/verify', { token: c.json.token });
          assert.equal(anyone.status, 200, anyone.text);
          assert.equal(anyone.json.valid, true, anyone.text);
          assert.ok(typeof anyone.json.sub === 'string' && anyone.json.sub.length > 0, `sub: ${anyone.text}`);
          assert.ok(anyone.json.session === undefined || anyone.json.session === null,
            `verify without the admin key names the session: ${anyone.text}`);
          assert.ok(!anyone.text.includes(c.json.session), `verify without the admin key shows the session id: ${anyone.text}`);
          const admin = await api(anteroom, 'POST', '/v1/tokens/verify', { token: c.json.token }, ADMIN_KEY);
          assert.equal(admin.json?.valid, true, admin.text);
          assert.equal(admin.json.session, c.json.session, `verify with the admin key: ${admin.text}`);
        });

        await t.test('a decision request with X-Forwarded-Prefix: 404', async () => {
          // A visitor let in on the spot by a decision request, as a proxy sends it.
          const spot = await decide(anteroom, ROOM);
          const set = setCookie(spot, COOKIE);
          assert.equal(spot.status, 200, show(spot));
          assert.ok(set && !set.cleared, show(spot));
          const cookie = `${COOKIE}=${set.value}`;
          const control = await decide(anteroom, ROOM, { Cookie: cookie });
          assert.equal(control.status, 200, `harness: the same decision without X-Forwarded-Prefix passes: ${show(control)}`);
          assert.match(control.header('x-anteroom-session'), SESSION_ID, show(control));

          for (const prefix of ['/anteroom', '/']) {
            const res = await decide(anteroom, ROOM, { Cookie: cookie, 'X-Forwarded-Prefix': prefix });
            assert.equal(res.header('x-anteroom-session'), '', `X-Forwarded-Prefix: ${prefix}: the session named: ${show(res)}`);
            assert.equal(res.status, 404, `X-Forwarded-Prefix: ${prefix}: ${show(res)}`);
            let body = null;
            try { body = JSON.parse(res.body); } catch { /* checked below */ }
            assert.ok(typeof body?.error?.code === 'string' && typeof body.error.message === 'string',
              `X-Forwarded-Prefix: ${prefix}: the JSON error object: ${show(res)}`);
          }
        });
      });
    });

  test('7. rooms x.y, x_y and x:y get different cookie names',
    { skip: skipReason() ?? false }, async () => {
      await withAnteroom(async (anteroom) => {
        const names = [];
        for (const room of ['x.y', 'x_y', 'x:y']) {
          await putRoom(anteroom, room, { capacity: 5, gate: {} });
          const res = await decide(anteroom, room);
          assert.equal(res.status, 200, `${room}: let in on the spot: ${show(res)}`);
          const lines = res.all('set-cookie');
          assert.equal(lines.length, 1, `${room}: one Set-Cookie: ${show(res)}`);
          const cookieName = lines[0].slice(0, lines[0].indexOf('='));
          // RFC 6265: a cookie name is an RFC 2616 token (no separators such as ':' or '/').
          assert.match(cookieName, /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/, `${room}: cookie name ${cookieName}`);
          names.push([room, cookieName]);
        }
        const distinct = new Set(names.map(([, n]) => n));
        assert.equal(distinct.size, 3, `the rooms' cookie names collide: ${JSON.stringify(names)}`);
      });
    });
});
