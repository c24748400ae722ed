// Interop: tokens of the real `anteroom serve` (HS256, EdDSA, ES256) verified by verifiers from
// outside the project: jose (npm, createLocalJWKSet + jwtVerify) and PyJWT (Debian's
// python3-jwt, PyJWKClient on GET /.well-known/jwks.json). A tampered token is refused by both.
// Needs ANTEROOM_BINARY; PYTHON (default /usr/bin/python3, where Debian's python3-jwt lives).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLocalJWKSet, jwtVerify, decodeProtectedHeader } from 'jose';

const here = dirname(fileURLToPath(import.meta.url));
const binary = process.env.ANTEROOM_BINARY;
const python = process.env.PYTHON || '/usr/bin/python3';
const secret = 'interop-shared-secret-0123456789abcdef';

function startServer(args) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !k.startsWith('ANTEROOM_')));
  env.ANTEROOM_TOKEN_SECRET = secret;
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['serve', '--memory-only', '--listen', '127.0.0.1:0', ...args],
                        { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`no start: ${err}`)); },
                             10000);
    child.stderr.on('data', (d) => { err += d; });
    child.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve({ child, base: m[1], errors: () => err }); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`exited ${code}: ${err}`)); });
  });
}

function stop(server) {
  server.child.removeAllListeners('exit');
  server.child.kill('SIGKILL');
}

async function api(server, method, path, body) {
  const res = await fetch(server.base + path, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

async function admittedToken(server, room) {
  assert.equal((await api(server, 'PUT', `/v1/rooms/${room}`, { capacity: 5 })).status, 200);
  const check = await api(server, 'POST', `/v1/rooms/${room}/check`,
                          { session: 'interop-session-0123456789abc' });
  assert.equal(check.body.status, 'active');
  assert.ok(check.body.token);
  return check.body.token;
}

function pyjwt(...args) {
  const r = spawnSync(python, [join(here, 'pyjwt_verify.py'), ...args], { encoding: 'utf8' });
  return { ok: r.status === 0, out: (r.stdout || '') + (r.stderr || '') };
}

// Changes one character in the middle of the claims: the signature no longer covers them.
function tamper(token) {
  const [h, p, s] = token.split('.');
  const i = Math.floor(p.length / 2);
  const c = p[i] === 'A' ? 'B' : 'A';
  return [h, p.slice(0, i) + c + p.slice(i + 1), s].join('.');
}

function checkClaims(claims, room) {
  assert.equal(claims.room, room);
  assert.equal(typeof claims.sub, 'string');
  assert.notEqual(claims.sub, 'interop-session-0123456789abc');  // opaque, not the session id
  assert.ok(Number.isSafeInteger(claims.inc) && claims.inc > 0);
  assert.equal(claims.adm, 1);
  assert.ok(claims.exp > claims.iat);
}

for (const alg of ['EdDSA', 'ES256']) {
  test(`${alg} tokens verify with jose and PyJWT from the JWKS`, async () => {
    const server = await startServer(['--token-alg', alg]);
    try {
      const token = await admittedToken(server, 'shop');
      const jwksRes = await api(server, 'GET', '/.well-known/jwks.json');
      assert.equal(jwksRes.status, 200);
      assert.match(jwksRes.headers.get('cache-control'), /max-age=300/);
      const jwks = jwksRes.body;
      assert.equal(jwks.keys.length, 1);
      assert.equal(jwks.keys[0].kty, alg === 'EdDSA' ? 'OKP' : 'EC');
      assert.equal(jwks.keys[0].d, undefined);
      assert.equal(decodeProtectedHeader(token).kid, jwks.keys[0].kid);

      const { payload, protectedHeader } =
          await jwtVerify(token, createLocalJWKSet(jwks), { algorithms: [alg] });
      assert.equal(protectedHeader.alg, alg);
      checkClaims(payload, 'shop');
      await assert.rejects(jwtVerify(tamper(token), createLocalJWKSet(jwks), { algorithms: [alg] }));

      const py = pyjwt('jwks', `${server.base}/.well-known/jwks.json`, alg, token);
      assert.ok(py.ok, py.out);
      checkClaims(JSON.parse(py.out), 'shop');
      const bad = pyjwt('jwks', `${server.base}/.well-known/jwks.json`, alg, tamper(token));
      assert.ok(!bad.ok, bad.out);
      assert.match(bad.out, /refused/);

      // And anteroom's own verification agrees.
      const mine = await api(server, 'POST', '/v1/tokens/verify', { token });
      assert.equal(mine.body.valid, true);
      assert.equal(mine.body.session, 'interop-session-0123456789abc');
      assert.equal((await api(server, 'POST', '/v1/tokens/verify', { token: tamper(token) }))
                       .body.valid, false);
    } finally {
      stop(server);
    }
  });
}

test('HS256 tokens verify with jose and PyJWT with the shared secret; JWKS stays empty',
     async () => {
  const server = await startServer([]);
  try {
    const token = await admittedToken(server, 'hs');
    assert.deepEqual((await api(server, 'GET', '/.well-known/jwks.json')).body, { keys: [] });
    const key = new TextEncoder().encode(secret);
    const { payload } = await jwtVerify(token, key, { algorithms: ['HS256'] });
    checkClaims(payload, 'hs');
    await assert.rejects(jwtVerify(tamper(token), key, { algorithms: ['HS256'] }));
    const py = pyjwt('secret', secret, token);
    assert.ok(py.ok, py.out);
    checkClaims(JSON.parse(py.out), 'hs');
    assert.ok(!pyjwt('secret', secret, tamper(token)).ok);
  } finally {
    stop(server);
  }
});

test('rotation: the old key still verifies (JWKS lists both) until it is removed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'anteroom-interop-'));
  try {
    const keyFile = (name) => {
      const r = spawnSync('openssl', ['genpkey', '-algorithm', 'ed25519'], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      writeFileSync(join(dir, name), r.stdout, { mode: 0o600 });
      return join(dir, name);
    };
    const oldKey = keyFile('old.pem');
    const newKey = keyFile('new.pem');
    const first = await startServer(['--token-alg', 'EdDSA', '--token-key', oldKey]);
    let oldToken;
    try {
      oldToken = await admittedToken(first, 'rot');
    } finally {
      stop(first);
    }
    const second = await startServer(
        ['--token-alg', 'EdDSA', '--token-key', newKey, '--token-verify-key', oldKey]);
    try {
      const jwks = (await api(second, 'GET', '/.well-known/jwks.json')).body;
      assert.equal(jwks.keys.length, 2);
      await jwtVerify(oldToken, createLocalJWKSet(jwks), { algorithms: ['EdDSA'] });
      const py = pyjwt('jwks', `${second.base}/.well-known/jwks.json`, 'EdDSA', oldToken);
      assert.ok(py.ok, py.out);
      const newToken = await admittedToken(second, 'rot');
      assert.notEqual(decodeProtectedHeader(newToken).kid, decodeProtectedHeader(oldToken).kid);
      await jwtVerify(newToken, createLocalJWKSet(jwks), { algorithms: ['EdDSA'] });
    } finally {
      stop(second);
    }
    const third = await startServer(['--token-alg', 'EdDSA', '--token-key', newKey]);
    try {
      const jwks = (await api(third, 'GET', '/.well-known/jwks.json')).body;
      assert.equal(jwks.keys.length, 1);
      await assert.rejects(jwtVerify(oldToken, createLocalJWKSet(jwks), { algorithms: ['EdDSA'] }));
      assert.ok(!pyjwt('jwks', `${third.base}/.well-known/jwks.json`, 'EdDSA', oldToken).ok);
    } finally {
      stop(third);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
