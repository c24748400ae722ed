// The gate's return URL is no open redirect (docs/gate.md, "No open redirect"), against anteroom
// directly (`serve --memory-only --gate-host 127.0.0.1 --public-url /anteroom`): the waiting
// page, once admitted, posts {"token", "return"} to /v1/gate/shop/enter; 200 {"location"} is
// where anteroom sends the browser, 400 a refusal.
//
//  - a table of known pitfalls (look-alike hosts, userinfo, backslashes, scheme-relative and
//    javascript: URLs, tabs and newlines, percent-encoded dots and slashes) is refused
//  - the site's own URLs (http://127.0.0.1/..., the request's own host:port) are accepted and
//    sent back as asked
//  - differential: a few hundred generated URLs (IPv4/IPv6 forms, suffixed hosts, userinfo,
//    backslashes, control characters, percent-escapes, IDN and punycode, case, trailing dots,
//    odd ports, empty hosts, other schemes); for every one anteroom accepts, WHATWG's parser
//    (Node's URL, as a browser reads `location`) must see an http(s) URL on 127.0.0.1 both in
//    what was asked and in the location answered. The counts are reported as diagnostics.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';

import { api, binary } from './harness.mjs';
import { startAnteroom } from './proxies.mjs';

const ROOM = 'shop';
const HOST = '127.0.0.1';

// Why these tests cannot run here, or null: never a silent pass.
function skipReason() {
  return existsSync(binary) ? null : `anteroom binary not found at ${binary} (build it first)`;
}
const skip = skipReason() ?? false;

let anteroom;
let token;

// POST /v1/gate/shop/enter {"token", "return": url} (Host: 127.0.0.1:PORT, fetch's own):
// {accepted: true, location} or {accepted: false}; anything else is a harness failure.
async function enter(url) {
  const r = await api(anteroom, 'POST', `/v1/gate/${ROOM}/enter`, { token, return: url });
  if (r.status === 200 && typeof r.json?.location === 'string') return { accepted: true, location: r.json.location };
  if (r.status === 400 && !/admission/.test(r.json?.error?.message ?? '')) return { accepted: false };
  throw new Error(`harness: enter with return ${JSON.stringify(url)} answered ${r.status} ${r.text}`);
}

// Why WHATWG (Node's URL) does not read `url` as an http(s) URL on 127.0.0.1, or null.
function offSite(url) {
  let u;
  try {
    u = new URL(url);
  } catch {
    return 'WHATWG cannot parse it';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return `protocol ${u.protocol}`;
  if (u.hostname !== HOST) return `host ${JSON.stringify(u.host)}`;
  if (u.username || u.password) return `userinfo ${JSON.stringify(u.username)}`;
  return null;
}

describe('the gate\'s return URL (no open redirect)', () => {
  before(async () => {
    if (skip) return;
    anteroom = await startAnteroom(['--memory-only', '--gate-host', HOST, '--public-url', '/anteroom']);
    const put = await api(anteroom, 'PUT', `/v1/rooms/${ROOM}`, { capacity: 100000 });
    assert.equal(put.status, 200, put.text);
    const c = await api(anteroom, 'POST', `/v1/rooms/${ROOM}/check`, {});
    assert.equal(c.json?.status, 'active', c.text);
    token = c.json.token;
  });
  after(async () => { await anteroom?.stop(); });

  test('2. known pitfalls are refused (400)', { skip }, async (t) => {
    const pitfalls = [
      'https://127.0.0.1.evil.example/x',
      'http://127.0.0.1.evil.example/phish',
      'http://127.0.0.1@evil.example/',
      'http://evil.example\\@127.0.0.1/',
      'http://127.0.0.1\\evil.example/',
      'http://127.0.0.1\\\\evil.example/',
      'http:/\\evil.example',
      'http:/\\\\evil.example',
      'http:\\\\evil.example/',
      '//evil.example/',
      'javascript:alert(1)',
      'JavaScript:alert(1)//http://127.0.0.1/',
      'http://127.0.0.1:80@evil.example/',
      'http://127.0.0.1\t.evil.example/',
      'http://127.0.0.1\r.evil.example/',
      'http://127.0.0.1\n.evil.example/',
      'http://127.0.0.1/\tx',
      'http://127.0.0.1/x\r\nSet-Cookie: a=b',
      'http://evil.example%2f127.0.0.1/',
      'http://127.0.0.1%2eevil.example/',
    ];
    for (const url of pitfalls) {
      await t.test(`refuses ${JSON.stringify(url)}`, async () => {
        const r = await enter(url);
        assert.equal(r.accepted, false, `anteroom accepted ${JSON.stringify(url)}: location ${JSON.stringify(r.location)}`);
      });
    }
  });

  test('2. the site\'s own URLs are accepted, and sent back as asked', { skip }, async () => {
    for (const url of [`http://${HOST}/`, `http://${HOST}/product/42?x=1`, `http://${HOST}:${anteroom.port}/path`]) {
      const r = await enter(url);
      assert.equal(r.accepted, true, `anteroom refused ${url}`);
      assert.equal(new URL(r.location).href, new URL(url).href, `the location answered for ${url}`);
    }
  });

  test('2. differential: every return URL accepted is, to WHATWG, http(s) on 127.0.0.1', { skip }, async (t) => {
    const urls = generated(anteroom.port);
    let accepted = 0;
    const wrong = [];
    for (const url of urls) {
      const r = await enter(url);
      if (!r.accepted) continue;
      accepted += 1;
      const why = offSite(url) ?? offSite(r.location);
      if (why) wrong.push(`${JSON.stringify(url)} -> ${JSON.stringify(r.location)}: ${why}`);
    }
    t.diagnostic(`${urls.length} URLs: ${accepted} accepted, ${urls.length - accepted} refused, ${wrong.length} accepted off-site`);
    // The generator reaches both sides (else the differential proves nothing).
    assert.ok(accepted >= 20, `only ${accepted} of ${urls.length} generated URLs accepted`);
    assert.ok(urls.length - accepted >= 100, `only ${urls.length - accepted} refused`);
    assert.deepEqual(wrong, [], `${wrong.length} of ${accepted} accepted return URLs go elsewhere than http(s)://127.0.0.1 ` +
      `to a browser:\n  ${wrong.slice(0, 25).join('\n  ')}`);
  });
});

// A few hundred tricky URLs around 127.0.0.1, deterministic (no randomness: a failure repeats).
function generated(port) {
  const out = new Set();
  const schemes = ['http', 'https', 'HTTP', 'HtTpS', 'ftp', 'javascript', 'data', 'ws'];
  const hosts = [
    '127.0.0.1', '127.0.0.1.', '127.0.0.1..', '127.0.0.1.evil.example', '127.0.0.1evil.example',
    '127.0.0.1-evil.example', 'evil.example', 'evil.example.127.0.0.1', '[::1]', '[::ffff:127.0.0.1]',
    '[::ffff:7f00:1]', '[127.0.0.1]', '127.1', '127.0.1', '0x7f.0.0.1', '0177.0.0.1', '2130706433',
    '127.000.000.001', 'localhost', 'LOCALHOST', '127%2e0%2e0%2e1', '127.0.0.1%2eevil.example',
    '127.0.0.1%00.evil.example', 'evil.example%2f127.0.0.1', '127.0.0.1%2f.evil.example',
    '127.0.0.1%40evil.example', 'xn--127-0-0-1.evil.example', '127.0.0.1.xn--80ak6aa92e.com',
    '\u0127.0.0.1', '127\u30020\u30020\u30021', '\uff11\uff12\uff17.\uff10.\uff10.\uff11', '127.0.0.1\u200b',
    'ev\u0456l.example', '', ' 127.0.0.1',
  ];
  const userinfos = ['', 'user@', 'user:pass@', '127.0.0.1@', 'evil.example@', ':@', '@'];
  const ports = ['', ':', ':0', ':80', ':443', `:${port}`, ':65535', ':65536', ':99999', ':+80', ':080', ':8a'];
  const paths = ['/', '/x?y=1', '', '\\evil.example', '//evil.example', '/..//evil.example',
    '#@evil.example', '?@evil.example', '/\t/evil.example', '@evil.example'];

  // Every scheme x host, the usual shape.
  for (const s of schemes) for (const h of hosts) out.add(`${s}://${h}/`);
  // The allowed host and its look-alikes x userinfo x port.
  for (const h of ['127.0.0.1', '127.0.0.1.', 'evil.example', '127.0.0.1.evil.example', '[::1]']) {
    for (const u of userinfos) for (const p of ports) out.add(`http://${u}${h}${p}/x`);
  }
  // What follows the host.
  for (const h of ['127.0.0.1', `127.0.0.1:${port}`]) {
    for (const p of paths) for (const s of ['http', 'https']) out.add(`${s}://${h}${p}`);
  }
  // Separators between the scheme and the host.
  for (const sep of ['://', ':/', ':', ':\\\\', ':/\\', ':\\/', ':///', '://\\', ': //', ':/\t/', '\t://']) {
    for (const h of ['127.0.0.1', 'evil.example', '127.0.0.1.evil.example']) {
      out.add(`http${sep}${h}/`);
      out.add(`https${sep}${h}/x`);
    }
  }
  // Control characters and spaces at every position of one allowed URL.
  const base = 'http://127.0.0.1/x';
  for (const c of ['\t', '\n', '\r', '\0', ' ', '\x7f', '\u00a0']) {
    for (let i = 0; i <= base.length; i += 3) out.add(base.slice(0, i) + c + base.slice(i));
  }
  // Scheme-relative, path-only and empty.
  for (const h of ['127.0.0.1', 'evil.example', '\\evil.example', '/evil.example']) {
    out.add(`//${h}/`);
    out.add(`///${h}/`);
    out.add(`/\\${h}/`);
  }
  for (const u of ['http://', 'https://', 'http:///', 'http://:80/', 'http:', 'https:127.0.0.1']) out.add(u);
  return [...out];
}
