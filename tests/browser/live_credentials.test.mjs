// The session id and the admission token are bearer secrets: whoever reads one holds the place
// in line or the admission. Proxies and CDNs write every request's URL (and Referer) to their
// access logs, so anteroom.js must carry them in a header, a WebSocket subprotocol or a body,
// never in a URL. Chromium waits in a room through nginx running examples/nginx/gate.conf, with
// the access log a deployment keeps (the default `combined` format): one visitor over the
// WebSocket, one over the event stream (its WebSocket refused, as by a proxy that blocks
// upgrades), a challenge for each, both admitted through the gate. Then neither session id nor
// any token is anywhere in nginx's access log, nor in any URL the pages asked for, while the
// /ws, /events and /challenge request lines are there.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { api, artifactPath, binary, chromiumPath, eventually, launchBrowser } from './harness.mjs';
import { missing, nginxBinary, startAnteroom, startNginx, startOrigin } from './proxies.mjs';

const ROOM = 'shop';
const COOKIE = `anteroom_${ROOM}`;

// Why this test cannot run here, or null: never a silent pass.
function skipReason() {
  if (!existsSync(binary)) return `anteroom binary not found at ${binary} (build it first)`;
  return missing(chromiumPath, nginxBinary);
}

let browser;
before(async () => {
  if (!skipReason()) browser = await launchBrowser();
});
after(async () => { await browser?.close(); });

// One visitor: a browser context and its page, with every URL the page asks for (requests, and
// WebSockets, which Playwright reports apart) and the request headers of the room's live and
// challenge calls. `blockWebSocket`: each WebSocket the page opens is closed at once, before it
// reaches the proxy.
async function visitor(site, { blockWebSocket = false } = {}) {
  const context = await browser.newContext();
  if (blockWebSocket) await context.routeWebSocket(() => true, (ws) => ws.close());
  const page = await context.newPage();
  page.setDefaultTimeout(10_000);
  const urls = [];
  const calls = [];  // {path, headers} of /anteroom/v1/rooms/... requests
  page.on('request', (r) => {
    urls.push(r.url());
    const { pathname } = new URL(r.url());
    if (pathname.startsWith(`/anteroom/v1/rooms/${ROOM}/`)) {
      calls.push({ path: pathname, headers: r.headers() });
    }
  });
  page.on('websocket', (ws) => urls.push(ws.url()));
  // What this tab's anteroom.js keeps (the site's origin: anteroom is served under /anteroom/).
  const kept = () => page.evaluate((room) => ({
    session: sessionStorage.getItem(`anteroom:session:${room}`),
    token: sessionStorage.getItem(`anteroom:token:${room}`),
  }), ROOM);
  const cookie = async () => (await context.cookies(site.url)).find((c) => c.name === COOKIE)?.value;
  return { context, page, urls, calls, kept, cookie };
}

describe('bearer secrets stay out of URLs', () => {
  test('through nginx: a wait over WebSocket and one over SSE leave no session or token in the access log',
    { skip: skipReason() ?? false }, async () => {
      let origin;
      let anteroom;
      let proxy;
      const people = [];
      let step = 'start';
      try {
        origin = await startOrigin(ROOM);
        anteroom = await startAnteroom(['--memory-only', '--public-url', '/anteroom',
          '--trusted-proxy', '127.0.0.1/32']);
        proxy = await startNginx({ originPort: origin.port, anteroomPorts: [anteroom.port], room: ROOM,
          accessLog: true });
        // A challenge: every visitor goes by the waiting page (the gate cannot solve it), and
        // asks for a puzzle for its session.
        const put = await api(anteroom, 'PUT', `/v1/rooms/${ROOM}`,
          { capacity: 1, challenge: { type: 'pow', difficulty: 4 }, gate: {} });
        assert.equal(put.status, 200, put.text);

        step = 'A waits over the WebSocket and is admitted';
        const a = await visitor(proxy);
        people.push(a);
        await a.page.goto(`${proxy.url}/product/1`);
        await a.page.waitForURL(`${proxy.url}/product/1`);
        const aKept = await a.kept();
        assert.match(aKept.session ?? '', /^[0-9a-f]{32}$/, JSON.stringify(aKept));
        assert.ok(aKept.token, 'A was given a token');
        assert.ok(a.urls.some((u) => new URL(u).pathname === `/anteroom/v1/rooms/${ROOM}/ws`),
          a.urls.join('\n'));
        assert.ok(!a.calls.some((c) => c.path.endsWith('/events')), 'A did not need the event stream');
        const aChallenge = a.calls.find((c) => c.path.endsWith('/challenge'));
        assert.equal(aChallenge?.headers['anteroom-session'], aKept.session,
          'the puzzle asked for with the header');

        step = 'B, its WebSocket refused, waits over the event stream';
        const b = await visitor(proxy, { blockWebSocket: true });
        people.push(b);
        await b.page.goto(`${proxy.url}/product/2`);
        await eventually(async () => (await b.page.locator('#position').textContent()) === '1',
          10_000, 'B at position 1');
        const events = b.calls.filter((c) => c.path.endsWith('/events'));
        assert.ok(events.length >= 1, 'B reads the event stream');
        const bSession = (await b.kept()).session;
        assert.match(bSession ?? '', /^[0-9a-f]{32}$/);
        assert.ok(events.every((c) => c.headers['anteroom-session'] === bSession),
          JSON.stringify(events.map((c) => c.headers)));
        assert.ok(!b.calls.some((c) => c.path.endsWith('/check')), 'B did not poll');

        step = 'A leaves: B is admitted over the event stream';
        const aCookie = await a.cookie();
        assert.ok(aCookie, 'A has the gate cookie');
        await a.page.click('#leave');
        await a.page.click('#leave-confirm');
        await a.page.getByText('You have left').waitFor({ timeout: 5_000 });
        await b.page.waitForURL(`${proxy.url}/product/2`, { timeout: 10_000 });
        const bKept = await b.kept();
        assert.equal(bKept.session, bSession);
        assert.ok(bKept.token, 'B was given a token');
        const bCookie = await b.cookie();
        assert.ok(bCookie, 'B has the gate cookie');

        step = 'the access log';
        // nginx writes a request's line when it ends: the live channels end with their pages.
        for (const p of people.splice(0)) await p.context.close();
        const wanted = [
          new RegExp(`"GET /anteroom/v1/rooms/${ROOM}/ws\\?[^" ]+ HTTP/1\\.1" 101 `),
          new RegExp(`"GET /anteroom/v1/rooms/${ROOM}/events\\?[^" ]+ HTTP/1\\.1" 200 `),
          new RegExp(`"GET /anteroom/v1/rooms/${ROOM}/challenge HTTP/1\\.1" 200 `),
          new RegExp(`"GET /anteroom/wait/${ROOM}\\?return=`),
          new RegExp(`"POST /anteroom/v1/gate/${ROOM}/enter HTTP/1\\.1" 200 `),
        ];
        const log = await eventually(() => {
          const text = proxy.accessLog();
          return wanted.every((re) => re.test(text)) && text;
        }, 5_000, 'the request lines in the access log').catch((e) => {
          throw new Error(`${e.message}\n${proxy.accessLog()}`);
        });
        const secrets = [aKept.session, aKept.token, aCookie, bSession, bKept.token, bCookie,
          ...origin.seen.map((s) => s.session)].filter(Boolean);
        for (const secret of secrets) {
          assert.ok(!log.includes(secret) && !log.includes(encodeURIComponent(secret)),
            `the access log holds a secret (${secret.slice(0, 12)}...):\n${log}`);
        }
        const urls = [...a.urls, ...b.urls];
        assert.ok(urls.length > 10, urls.join('\n'));
        for (const url of urls) {
          assert.ok(!secrets.some((s) => url.includes(s) || decodeURIComponent(url).includes(s)),
            `a URL the page asked for holds a secret: ${url}`);
        }
      } catch (e) {
        for (const [i, p] of people.entries()) {
          const file = artifactPath(`credentials-${i}.png`);
          await p.page.screenshot({ path: file }).catch(() => {});
        }
        e.message = `${step}: ${e.message}\nproxy: ${proxy?.output().slice(-3000)}`;
        throw e;
      } finally {
        for (const p of people) await p.context.close().catch(() => {});
        await proxy?.stop();
        await anteroom?.stop();
        await origin?.stop();
      }
    });
});
