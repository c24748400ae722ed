// The server's OpenAPI document (GET /openapi.json) from the real `anteroom serve`:
//  - valid OpenAPI 3.1, as @readme/openapi-parser (npm, pinned) judges it;
//  - every documented operation is a route of the server (not 404/405), and every other method
//    on a documented path is refused with 405 (the route table's side is
//    tests/unit/openapi_doc_test.cc, which holds the document to Router::Routes());
//  - each documented example is an instance of its own schema, and each route's example request,
//    replayed against the server in an order that makes what it names exist first, gets a
//    documented status whose schema the answer matches (ajv, JSON Schema 2020-12).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { validate } from '@readme/openapi-parser';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const here = path.dirname(fileURLToPath(import.meta.url));
const binary = process.env.ANTEROOM_BINARY ?? path.resolve(here, '../../build/release/anteroom');
const ADMIN_KEY = 'openapi-test-admin-key';
const METHODS = ['get', 'head', 'post', 'put', 'patch', 'delete', 'options'];

let server;
let doc;

function startServer() {
  return new Promise((resolve, reject) => {
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !k.startsWith('ANTEROOM_')));
    const child = spawn(binary, ['serve', '--listen', '127.0.0.1:0', '--memory-only'], {
      env: { ...env, ANTEROOM_TOKEN_SECRET: 'openapi-test-secret', ANTEROOM_ADMIN_KEY: ADMIN_KEY },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the server did not start in 10 s: ${out}`));
    }, 10_000);
    const onData = (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], child });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited (${code}): ${out}`));
    });
  });
}

before(async () => {
  server = await startServer();
  const r = await fetch(`${server.url}/openapi.json`);
  assert.equal(r.status, 200);
  doc = await r.json();
});

after(() => {
  if (server) server.child.kill('SIGTERM');
});

// Every operation: [path, method, operation].
function operations() {
  const out = [];
  for (const [p, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) out.push([p, method, op]);
  }
  return out;
}

function fillPath(pattern, op) {
  return pattern.replace(/\{([^}]+)\}/g, (_, name) => {
    const param = (op.parameters ?? []).find((x) => x.in === 'path' && x.name === name);
    assert.ok(param && param.example !== undefined, `${pattern}: no example for {${name}}`);
    return encodeURIComponent(String(param.example));
  });
}

function query(op) {
  const q = new URLSearchParams();
  for (const p of op.parameters ?? []) {
    if (p.in === 'query' && p.example !== undefined) q.set(p.name, String(p.example));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

function makeAjv() {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  addFormats(ajv);
  ajv.addSchema(doc, 'openapi.json');
  return ajv;
}

// A JSON pointer's escaping of one key.
function escapeKey(key) {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

function schemaRef(...keys) {
  return { $ref: `openapi.json#/${keys.map(escapeKey).join('/')}` };
}

test('the document is valid OpenAPI 3.1 (@readme/openapi-parser)', async () => {
  assert.equal(doc.openapi, '3.1.0');
  const result = await validate(structuredClone(doc));
  assert.ok(result.valid, JSON.stringify(result.errors ?? result, null, 2));
  assert.ok(operations().length >= 50, `only ${operations().length} operations`);
});

test('every documented operation is a route; other methods on its path are 405', async () => {
  for (const [p, method, op] of operations()) {
    if (op['x-anteroom-kind'] === 'stream') continue;  // would open a live channel
    const url = `${server.url}${fillPath(p, op)}`;
    const r = await fetch(url, { method: method.toUpperCase(), redirect: 'manual' });
    const text = await r.text();
    assert.notEqual(r.status, 405, `${method} ${p}: 405`);
    // A 404 of the route itself says `not_found`; one of a thing it names says which thing.
    assert.ok(!(r.status === 404 && text.includes('"not_found"')), `${method} ${p}: no such route`);
  }
  for (const [p, item] of Object.entries(doc.paths)) {
    const op = Object.values(item)[0];
    for (const method of METHODS) {
      if (item[method] || method === 'options' || method === 'head') continue;
      const r = await fetch(`${server.url}${fillPath(p, op)}`, { method: method.toUpperCase() });
      const text = await r.text();
      assert.equal(r.status, 405, `${method} ${p}: ${r.status} ${text}`);
    }
  }
});

test('every documented example is an instance of its schema', () => {
  const ajv = makeAjv();
  let checked = 0;
  for (const [p, method, op] of operations()) {
    const media = op.requestBody?.content?.['application/json'];
    if (media?.schema && media.example !== undefined) {
      const v = ajv.compile(schemaRef('paths', p, method, 'requestBody', 'content', 'application/json', 'schema'));
      assert.ok(v(media.example), `${method} ${p} request example: ${ajv.errorsText(v.errors)}`);
      ++checked;
    }
    for (const [status, response] of Object.entries(op.responses)) {
      for (const [type, m] of Object.entries(response.content ?? {})) {
        if (!m.schema || m.example === undefined) continue;
        const v = ajv.compile(schemaRef('paths', p, method, 'responses', status, 'content', type, 'schema'));
        assert.ok(v(m.example), `${method} ${p} ${status} example: ${ajv.errorsText(v.errors)}`);
        ++checked;
      }
    }
  }
  assert.ok(checked >= 50, `only ${checked} examples checked`);
});

// Replay order: what creates things first, what deletes them last (deepest paths first, so a
// room's sessions, events and passes go before the room).
function phase(method) {
  return { put: 0, post: 1, get: 2, head: 2, patch: 3, options: 3, delete: 4 }[method];
}

test('each route\'s example, replayed against the server, answers as documented', async () => {
  const ajv = makeAjv();
  const ops = operations().sort(([pa, ma], [pb, mb]) => {
    if (phase(ma) !== phase(mb)) return phase(ma) - phase(mb);
    const depth = (p) => p.split('/').length;
    return ma === 'delete' ? depth(pb) - depth(pa) : depth(pa) - depth(pb);
  });
  const skipped = [];
  for (const [p, method, op] of ops) {
    const replay = op['x-anteroom-replay'] ?? {};
    if (replay.skip) {
      skipped.push(`${method.toUpperCase()} ${p}: ${replay.skip}`);
      continue;
    }
    const where = `${method.toUpperCase()} ${p}`;
    const headers = { authorization: `Bearer ${ADMIN_KEY}`, ...(replay.headers ?? {}) };
    let body;
    const media = op.requestBody?.content?.['application/json'];
    if (media) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(media.example);
    }
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 10_000);
    let r;
    try {
      r = await fetch(`${server.url}${fillPath(p, op)}${query(op)}`,
        { method: method.toUpperCase(), headers, body, redirect: 'manual', signal: controller.signal });
    } finally {
      clearTimeout(timer);
    }
    const status = String(r.status);
    const documented = op.responses[status];
    const type = r.headers.get('content-type') ?? '';
    if (op['x-anteroom-kind'] === 'stream') {
      controller.abort();  // a live stream: its head is the answer
      assert.ok(documented, `${where}: ${status} is not documented`);
      continue;
    }
    const text = await r.text();
    assert.ok(documented, `${where}: ${status} is not documented: ${text.slice(0, 300)}`);
    const mediaTypes = Object.keys(documented.content ?? {});
    if (method === 'head' || mediaTypes.length === 0) continue;
    const documentedType = mediaTypes.find((t) => type.startsWith(t.split(';')[0]));
    assert.ok(documentedType, `${where}: answered ${type}, documented ${mediaTypes.join(', ')}`);
    if (!documentedType.includes('json') || !documented.content[documentedType].schema) continue;
    const v = ajv.compile(schemaRef('paths', p, method, 'responses', status, 'content', documentedType, 'schema'));
    const answer = JSON.parse(text);
    assert.ok(v(answer), `${where} ${status}: ${ajv.errorsText(v.errors)}\n${text.slice(0, 500)}`);
  }
  if (skipped.length) console.log(`not replayed:\n  ${skipped.join('\n  ')}`);
});
