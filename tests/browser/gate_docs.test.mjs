// docs/gate.md shows the proxy configs the gate's browser tests run (gate_proxies.test.mjs):
// each fenced block whose info string names a file (```nginx title="examples/nginx/gate.conf")
// must be that file byte for byte, and every file of examples/ must be shown, so the docs
// cannot drift from what is tested. (No browser: it runs with the browser tests it guards.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// The fenced blocks of a Markdown text that name a file: [{file, text}].
function namedBlocks(markdown) {
  const blocks = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; ++i) {
    const open = lines[i].match(/^(`{3,})\S*.*\btitle="([^"]+)"/);
    if (!open) continue;
    const body = [];
    let j = i + 1;
    while (j < lines.length && lines[j] !== open[1]) body.push(lines[j++]);
    assert.ok(j < lines.length, `docs: the block of ${open[2]} is not closed`);
    blocks.push({ file: open[2], text: `${body.join('\n')}\n` });
    i = j;
  }
  return blocks;
}

function filesUnder(dir) {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]);
}

test('docs/gate.md shows every examples/ file exactly', () => {
  const blocks = namedBlocks(readFileSync(path.join(root, 'docs/gate.md'), 'utf8'));
  const shown = new Set();
  for (const { file, text } of blocks) {
    assert.equal(text, readFileSync(path.join(root, file), 'utf8'),
      `docs/gate.md's block of ${file} differs from the file: copy the file into the docs`);
    shown.add(file);
  }
  for (const file of filesUnder('examples')) {
    assert.ok(shown.has(file), `${file} is not shown in docs/gate.md`);
  }
  assert.ok(shown.size >= 2, 'the nginx and Caddy configs are shown');
});
