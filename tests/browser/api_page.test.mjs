// The API reference page (/api) in the real browser: it renders every operation of the server's
// /openapi.json, with nothing asked of any other origin (it must work on a server with no
// internet access), and the admin dashboard links it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { artifactPath, launchBrowser, startServer } from './harness.mjs';

let browser;
let server;
before(async () => {
  browser = await launchBrowser();
  server = await startServer();
});
after(async () => {
  await browser?.close();
  await server?.stop();
});

test('/api renders every operation of /openapi.json and asks nothing of another origin', async () => {
  const doc = await (await fetch(`${server.url}/openapi.json`)).json();
  let operations = 0;
  for (const item of Object.values(doc.paths)) operations += Object.keys(item).length;

  const context = await browser.newContext();
  const page = await context.newPage();
  const elsewhere = [];
  page.on('request', (r) => {
    if (new URL(r.url()).origin !== server.url) elsewhere.push(r.url());
  });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${server.url}/api`);
  await page.waitForFunction(() => /\d+ routes/.test(document.getElementById('count').textContent),
    null, { timeout: 10_000 });
  assert.equal(await page.locator('#count').textContent(), `${operations} routes`);
  assert.equal(await page.locator('details.op').count(), operations);
  assert.equal(await page.locator('#error').textContent(), '');
  // An operation opens to its parameters, request example and responses.
  const fetchOp = page.locator('details.op', { hasText: '/v1/queues/{q}/fetch' });
  await fetchOp.locator('summary').click();
  const text = await fetchOp.textContent();
  for (const word of ['Parameters', 'Request body', 'Responses', 'lease_ms', 'queueKey']) {
    assert.ok(text.includes(word), `the fetch operation shows ${word}`);
  }
  await page.screenshot({ path: artifactPath('api-page.png'), fullPage: false });
  assert.deepEqual(elsewhere, [], 'requests to other origins');
  assert.deepEqual(errors, []);
  await context.close();
});

test('the dashboard links the API reference', async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${server.url}/admin`);
  const href = await page.locator('#api-link').getAttribute('href');
  assert.equal(new URL(href, `${server.url}/admin`).href, `${server.url}/api`);
  await context.close();
});
