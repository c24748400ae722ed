// The package as npm would publish it: `npm pack --dry-run` lists exactly the intended files,
// and the manifest says what a consumer needs (ESM, types, Node >= 20, no dependencies).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { packageDir } from '../testing/helpers.mjs';

const manifest = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8'));

test('package.json: ESM, exports with types, engines, no dependencies', () => {
  assert.equal(manifest.name, 'anteroom');
  assert.equal(manifest.type, 'module');
  assert.equal(manifest.types, './index.d.ts');
  assert.deepEqual(manifest.exports['.'], { types: './index.d.ts', default: './index.js' });
  assert.equal(manifest.engines.node, '>=20');
  for (const field of ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies']) {
    assert.equal(manifest[field], undefined, `no ${field}`);
  }
});

let npm = null;
try {
  execFileSync('npm', ['--version'], { stdio: 'ignore', timeout: 20_000 });
  npm = 'npm';
} catch { /* npm is not installed: the pack test is skipped */ }

test('npm pack --dry-run lists only the intended files', { skip: npm ? false : 'npm is not installed', timeout: 60_000 }, () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: packageDir,
    encoding: 'utf8',
    timeout: 50_000,
    env: { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false' },
  });
  const [{ files }] = JSON.parse(out);
  assert.deepEqual(files.map((f) => f.path).sort(), [
    'README.md',
    'index.d.ts',
    'index.js',
    'package.json',
    'src/client.js',
    'src/errors.js',
    'src/feed.js',
    'src/http.js',
    'src/queue.js',
    'src/room.js',
    'src/schedules.js',
    'src/sse.js',
    'src/worker.js',
  ]);
});

test('every module the package exports loads, and the types name each export', async () => {
  const mod = await import(path.join(packageDir, 'index.js'));
  const types = readFileSync(path.join(packageDir, 'index.d.ts'), 'utf8');
  for (const name of Object.keys(mod)) {
    assert.match(types, new RegExp(`export (declare )?(class|function|const) ${name}\\b`), `index.d.ts declares ${name}`);
  }
});
