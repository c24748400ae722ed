// A page of another origin using anteroom (CORS and CSRF), in the real browser: the page is
// served on one loopback port, anteroom on another, so every call is cross-origin. Allowed by
// --cors-origin or by the room's target_url, anteroom.js waits, is admitted and leaves; not
// allowed, the browser cannot read an answer and a form-like post changes nothing.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { api, launchBrowser, startServer } from './harness.mjs';

let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

// The protected site: one page that loads anteroom.js from `anteroom` (set per test).
function startOrigin() {
  const origin = { anteroom: null };
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><title>shop</title>
<script src="${origin.anteroom}/anteroom.js"></script><p id="page">shop</p>`);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      origin.url = `http://127.0.0.1:${server.address().port}`;
      origin.stop = () => new Promise((r) => server.close(r));
      resolve(origin);
    });
  });
}

async function openPage(origin) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${origin.url}/app`);
  await page.waitForFunction(() => typeof window.Anteroom === 'object', null, { timeout: 10_000 });
  return { context, page };
}

// What a page of the origin gets from the room API: the JSON it could read, or the error.
function checkFromPage(page, server) {
  return page.evaluate(async (base) => {
    try {
      const r = await fetch(`${base}/v1/rooms/shop/check`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{}',
      });
      return { status: r.status, body: await r.json() };
    } catch (e) {
      return { error: String(e) };
    }
  }, server.url);
}

async function active(server) {
  return (await api(server, 'GET', '/v1/rooms/shop')).json.active;
}

describe('a page of another origin', () => {
  test('allowed by --cors-origin: anteroom.js is admitted over the live channel, reads answers, leaves', async () => {
    const origin = await startOrigin();
    const server = await startServer(['--cors-origin', origin.url]);
    origin.anteroom = server.url;
    const { context, page } = await openPage(origin);
    try {
      assert.equal((await api(server, 'PUT', '/v1/rooms/shop', { capacity: 1 })).status, 200);
      // A JSON post: the browser asks first (a preflight), then reads the answer.
      const checked = await checkFromPage(page, server);
      assert.equal(checked.status, 200, JSON.stringify(checked));
      assert.equal(checked.body.status, 'active');
      // anteroom.js: the live channel (a WebSocket, whose Origin the server checks) puts the
      // page second in line, then in once the first session leaves.
      const waited = page.evaluate(() => new Promise((resolve, reject) => {
        const seen = [];
        window.Anteroom.wait({ room: 'shop', onUpdate: (s) => seen.push(s.status) })
          .then((token) => resolve({ token, seen }), (e) => reject(new Error(`${e.code}: ${e.message}`)));
      }));
      const deadline = Date.now() + 5_000;
      while ((await api(server, 'GET', '/v1/rooms/shop')).json.waiting !== 1) {
        assert.ok(Date.now() < deadline, 'the page joined the line');
        await new Promise((r) => setTimeout(r, 50));
      }
      const left = await api(server, 'POST', '/v1/rooms/shop/leave',
        { session: checked.body.session, final: true });
      assert.equal(left.status, 200, left.text);
      const { token, seen } = await waited;
      assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
      assert.ok(seen.includes('waiting') && seen.includes('active'), seen.join(','));
      await page.evaluate(() => window.Anteroom.leave({ room: 'shop', final: true }));
      const until = Date.now() + 5_000;
      while (await active(server) !== 0) {
        assert.ok(Date.now() < until, 'the page left for good');
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      await context.close();
      await server.stop();
      await origin.stop();
    }
  });

  // The event stream and the challenge carry the session or token in a header, which a page of
  // another origin may send only once the server's preflight allows it. Without that, the
  // stream would be refused and the page would quietly poll.
  test('allowed, WebSockets blocked: wait() reads the event stream with its header across origins, and stay() with the token', async () => {
    const origin = await startOrigin();
    const server = await startServer(['--cors-origin', origin.url]);
    origin.anteroom = server.url;
    const contexts = [];
    const open = async (path) => {
      const context = await browser.newContext();
      contexts.push(context);
      await context.routeWebSocket(() => true, (ws) => ws.close());  // as a proxy that blocks upgrades
      const page = await context.newPage();
      const requests = [];
      page.on('request', (r) => requests.push(r));
      await page.goto(`${origin.url}${path}`);
      await page.waitForFunction(() => typeof window.Anteroom === 'object', null, { timeout: 10_000 });
      return { page, requests };
    };
    const calls = (requests, route) => requests.filter((r) => new URL(r.url()).origin === server.url &&
      new URL(r.url()).pathname === `/v1/rooms/shop/${route}`);
    try {
      assert.equal((await api(server, 'PUT', '/v1/rooms/shop',
        { capacity: 1, challenge: { type: 'pow', difficulty: 4 } })).status, 200);
      const waiting = await open('/app');
      const { token, session } = await waiting.page.evaluate(() => window.Anteroom.wait({ room: 'shop' })
        .then((t) => ({ token: t, session: sessionStorage.getItem('anteroom:session:shop') }),
          (e) => { throw new Error(`${e.code}: ${e.message}`); }));
      assert.match(token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
      const [challenge] = calls(waiting.requests, 'challenge');
      assert.equal(challenge?.headers()['anteroom-session'], session);
      const events = calls(waiting.requests, 'events');
      assert.ok(events.length >= 1, 'the event stream was asked for');
      assert.ok(events.every((r) => r.headers()['anteroom-session'] === session));
      assert.equal(calls(waiting.requests, 'check').length, 0, 'admitted over the stream, not by polling');

      // The protected page, handed the token in its address (the waiting page's hand-over).
      const staying = await open(`/app?anteroom_token=${token}`);
      const status = await staying.page.evaluate(() => new Promise((resolve) => {
        window.Anteroom.stay({ room: 'shop', onUpdate: resolve, onLost: resolve });
      }));
      assert.equal(status.status, 'active', JSON.stringify(status));
      assert.equal(status.session, null, 'a token never learns the session');
      const stayEvents = calls(staying.requests, 'events');
      assert.ok(stayEvents.length >= 1 && stayEvents.every((r) => r.headers()['anteroom-token'] === token));
      assert.equal(calls(staying.requests, 'check').length, 0);
      // Nothing anteroom.js asked for names either secret in its URL.
      for (const r of [...waiting.requests, ...staying.requests]) {
        if (new URL(r.url()).origin !== server.url) continue;  // the origin's own pages
        assert.ok(!r.url().includes(session) && !r.url().includes(token), r.url());
      }
    } finally {
      for (const c of contexts) await c.close();
      await server.stop();
      await origin.stop();
    }
  });

  test('not allowed: answers cannot be read and a form-like post changes nothing; a room target_url allows it', async () => {
    const origin = await startOrigin();
    const server = await startServer([]);
    origin.anteroom = server.url;
    const { context, page } = await openPage(origin);
    try {
      assert.equal((await api(server, 'PUT', '/v1/rooms/shop', { capacity: 5 })).status, 200);
      const refused = await checkFromPage(page, server);
      assert.match(refused.error ?? '', /TypeError/, JSON.stringify(refused));
      // What a cross-site form does: a simple post the browser sends without asking (a JSON
      // post, and a real form to an admin route). The page cannot read the answers, and the
      // server refused both before they changed anything.
      assert.equal((await api(server, 'POST', '/v1/queues/jobs/jobs', { payload: 1 })).status, 201);
      await page.evaluate(async (base) => {
        await fetch(`${base}/v1/rooms/shop/check`, {
          method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: '{}',
        });
        const frame = document.createElement('iframe');
        frame.name = 'sink';
        document.body.append(frame);
        const form = document.createElement('form');
        Object.assign(form, { method: 'POST', action: `${base}/v1/queues/jobs/pause`, target: 'sink' });
        form.enctype = 'text/plain';
        const field = Object.assign(document.createElement('input'), { name: '{"a":"', value: '"}' });
        form.append(field);
        document.body.append(form);
        const loaded = new Promise((resolve) => frame.addEventListener('load', resolve, { once: true }));
        form.submit();
        await loaded;
      }, server.url);
      assert.equal((await api(server, 'GET', '/v1/rooms/shop')).json.active, 0);
      assert.equal((await api(server, 'GET', '/v1/queues/jobs')).json.paused, false);
      // The operator makes the page the room's target: its pages may call the room API now.
      assert.equal((await api(server, 'PUT', '/v1/rooms/shop', { target_url: `${origin.url}/app` })).status, 200);
      const allowed = await checkFromPage(page, server);
      assert.equal(allowed.status, 200, JSON.stringify(allowed));
      assert.equal(await active(server), 1);
    } finally {
      await context.close();
      await server.stop();
      await origin.stop();
    }
  });
});
