// Job state on the admin dashboard in a real browser: jobs worked over HTTP by a worker flow
// (push, fetch, progress, log, ack with a result, nack), one depending on another, batches; then
// looked up in a queue's lookup panel: state, attempts, last error, progress, result, log (a
// hostile line shown as text), dependencies with their results (links that look them up), a
// batch's counts and callbacks, a dead letter's link, an unknown id, and the panel kept across
// the dashboard's refreshes. Each value shown is checked against what the worker sent.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { api, artifactPath, eventually, launchBrowser, startServer } from './harness.mjs';

const KEY = 'browser-admin-key';
const HOSTILE = '<img src=x onerror="window.__pwned = 1">';
const GONE = 'no such job (never pushed, or finished and no longer kept)';

let browser;
before(async () => { browser = await launchBrowser(); });
after(async () => { await browser?.close(); });

const text = async (locator) => (await locator.textContent()).trim();
const pretty = (value) => JSON.stringify(value, null, 2);

test('the dashboard looks jobs and batches up: state, result, progress, log, dependencies', async () => {
  const server = await startServer([], { ANTEROOM_ADMIN_KEY: KEY });
  const call = async (method, route, body, status = 200) => {
    const r = await api(server, method, route, body, KEY);
    assert.equal(r.status, status, `${method} ${route}: ${r.text}`);
    return r.json;
  };
  // One job handed to worker w1; it must be `id`.
  const fetchOne = async (queue, id) => {
    const { jobs } = await call('POST', `/v1/queues/${queue}/fetch`, { worker: 'w1', max: 1 });
    assert.equal(jobs.length, 1);
    assert.equal(jobs[0].id, id);
    return jobs[0].lease;
  };
  try {
    // A batch whose job waits on another job, and a batch with callbacks that settles.
    await call('POST', '/v1/queues/etl/batches', { id: 'nightly', on_complete: { payload: 'report' } }, 201);
    await call('POST', '/v1/queues/etl/batches',
      { id: 'small', on_success: { payload: 'yay' }, on_complete: { payload: 'done' } }, 201);
    const extract = (await call('POST', '/v1/queues/etl/jobs', { payload: { step: 'extract' } }, 201)).id;
    const load = (await call('POST', '/v1/queues/etl/jobs',
      { payload: { step: 'load' }, depends_on: [extract], batch: 'nightly' }, 201)).id;
    const listed = (await call('GET', '/v1/queues')).queues.find((q) => q.queue === 'etl');
    assert.equal(listed.waiting_deps, 1, 'the list answers the waiting count');

    const context = await browser.newContext({
      httpCredentials: { username: 'ops', password: KEY },
      viewport: { width: 1400, height: 1000 },
    });
    const page = await context.newPage();
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(e.message));
    assert.equal((await page.goto(`${server.url}/admin`)).status(), 200);
    const etl = page.locator('[data-queue="etl"]');
    await eventually(async () => (await text(etl.locator('td.waiting_deps'))) === '1', 5_000,
      'the queue row with its Waiting count');
    assert.equal(await text(etl.locator('td.ready')), '1');

    // Nothing looked up yet: the panel is closed, and a lookup of the waiting job shows it so.
    const panel = page.locator('[data-jobs-for="etl"]');
    assert.equal(await panel.isHidden(), true);
    await etl.locator('button.show-lookup').click();
    await panel.locator('input.job-id').fill(load);
    await panel.locator('button.lookup-job').click();
    const view = panel.locator('section.job-view');
    await eventually(async () => (await view.getAttribute('data-job')) === load, 5_000, 'job view');
    assert.equal(await text(view.locator('tr.state td')), 'waiting_deps');
    assert.equal(await text(view.locator('tr.waiting-on td')), '1 of 1 dependencies not settled yet');
    assert.equal(await text(view.locator('tr.attempts td')), '0 of 5');
    assert.equal(await text(view.locator('table.dependencies tr[data-dependency] td.state')), 'pending');

    // The worker: the extract job, with progress, log lines (one hostile) and a result.
    const lease = await fetchOne('etl', extract);
    assert.equal((await call('POST', '/v1/queues/etl/progress',
      { lease, progress: { done: 40, of: 100 } })).ok, true);
    assert.equal((await call('POST', '/v1/queues/etl/log',
      { lease, lines: ['fetched 120 rows', HOSTILE] })).ok, true);
    assert.equal((await call('POST', '/v1/queues/etl/log', { lease, lines: ['done'] })).ok, true);
    await call('POST', '/v1/queues/etl/ack', { leases: [lease], results: [{ rows: 120 }] });
    await eventually(async () => (await text(etl.locator('td.waiting_deps'))) === '0', 5_000,
      'the Waiting count back to 0');

    // The open view is kept over the refreshes (the same element), until its Refresh.
    await view.evaluate((node) => { node.dataset.marker = 'kept'; });
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    assert.equal(await view.getAttribute('data-marker'), 'kept', 'a refresh left the panel alone');
    assert.equal(await panel.isVisible(), true);
    await view.locator('button.reload-job').click();
    await eventually(async () => (await text(view.locator('tr.state td'))) === 'ready', 5_000,
      'the job ready after its dependency was acked');
    assert.equal(await text(view.locator('tr.waiting-on td')), '0 of 1 dependencies not settled yet');
    const dep = view.locator(`table.dependencies tr[data-dependency="${extract}"]`);
    assert.equal(await text(dep.locator('td.state')), 'acked');
    assert.equal(await dep.locator('pre.result').textContent(), pretty({ rows: 120 }));

    // The dependency's link looks it up: acked, its progress, result and log, the hostile line
    // as text.
    await dep.locator('a.job-link').click();
    await eventually(async () => (await view.getAttribute('data-job')) === extract, 5_000,
      'the dependency looked up');
    assert.equal(await panel.locator('input.job-id').inputValue(), extract);
    assert.equal(await text(view.locator('tr.state td')), 'acked');
    assert.equal(await text(view.locator('tr.attempts td')), '1 of 5');
    assert.equal(await view.locator('pre.progress').textContent(), pretty({ done: 40, of: 100 }));
    assert.equal(await view.locator('pre.result').textContent(), pretty({ rows: 120 }));
    assert.equal(await view.locator('pre.job-payload').textContent(), pretty({ step: 'extract' }));
    assert.equal(await view.locator('tr.finished').count(), 1);
    assert.equal(await view.locator('tr.last-error').count(), 0, 'no error: it never failed');
    assert.equal(await view.locator('tr.batch').count(), 0, 'no batch: it joined none');
    assert.deepEqual(await view.locator('ol.log .line').allTextContents(),
      ['fetched 120 rows', HOSTILE, 'done']);
    assert.equal(await view.locator('.log-dropped').count(), 0);
    assert.equal(await panel.locator('img').count(), 0, 'no element made of the log line');
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    await panel.screenshot({ path: artifactPath('dashboard-job-lookup.png') });

    // The load job fails once: back in line later, with its error and due time.
    const lease2 = await fetchOne('etl', load);
    await call('POST', '/v1/queues/etl/nack',
      { leases: [lease2], delay_ms: 600_000, error: 'upstream timeout <b>503</b>' });
    await panel.locator('input.job-id').fill(load);
    await panel.locator('input.job-id').press('Enter');
    await eventually(async () => (await view.getAttribute('data-job')) === load
      && (await text(view.locator('tr.state td'))) === 'delayed', 5_000, 'the failed job delayed');
    assert.equal(await text(view.locator('tr.attempts td')), '1 of 5');
    assert.equal(await text(view.locator('tr.last-error td')), 'upstream timeout <b>503</b>');
    assert.equal(await view.locator('tr.due').count(), 1);
    assert.equal(await view.locator('table.history tbody tr').count(), 1);
    assert.equal(await text(view.locator('table.history tbody td.error-text')),
      'upstream timeout <b>503</b>');
    assert.equal(await text(view.locator('.no-log')), 'No log lines.');
    assert.equal(await text(view.locator('tr.batch td')), 'nightly');

    // Batches: one still pending (through the job's link), one settled with its callbacks
    // (by id, linked).
    await call('POST', '/v1/queues/etl/batches/nightly/seal', {});
    const batch = panel.locator('section.batch-view');
    await view.locator('tr.batch a.batch-link').click();
    await eventually(async () => (await batch.getAttribute('data-batch')) === 'nightly', 5_000,
      'the batch looked up');
    const fact = (cls) => text(batch.locator(`tr.${cls} td`));
    assert.deepEqual([await fact('pending'), await fact('acked'), await fact('dead'),
      await fact('cancelled'), await fact('sealed'), await fact('settled'), await fact('callbacks')],
    ['1', '0', '0', '0', 'yes', 'no', 'none yet']);

    const small = (await call('POST', '/v1/queues/etl/jobs', { payload: 'c', batch: 'small' }, 201)).id;
    await call('POST', '/v1/queues/etl/batches/small/seal', {});
    const lease3 = await fetchOne('etl', small);
    await call('POST', '/v1/queues/etl/ack', { leases: [lease3], results: ['ok'] });
    const settled = await call('GET', '/v1/queues/etl/batches/small');
    assert.equal(settled.settled, true);
    await panel.locator('input.batch-id').fill('small');
    await panel.locator('button.lookup-batch').click();
    await eventually(async () => (await batch.getAttribute('data-batch')) === 'small', 5_000,
      'the settled batch');
    assert.deepEqual([await fact('pending'), await fact('acked'), await fact('sealed'),
      await fact('settled')], ['0', '1', 'yes', 'yes']);
    assert.equal(await batch.locator('tr.settled-at').count(), 1);
    assert.equal(await fact('callbacks'),
      `on_success ${settled.callbacks_pushed.on_success}, on_complete ${settled.callbacks_pushed.on_complete}`);
    await batch.locator(`a.job-link[data-job-id="${settled.callbacks_pushed.on_complete}"]`).click();
    await eventually(async () => (await view.getAttribute('data-job'))
      === settled.callbacks_pushed.on_complete, 5_000, 'the callback job looked up');
    assert.equal(await text(view.locator('tr.state td')), 'ready');
    assert.equal(await view.locator('pre.job-payload').textContent(), pretty('done'));

    // Unknown ids: the job's and the batch's not-found messages.
    await panel.locator('input.job-id').fill('999999');
    await panel.locator('button.lookup-job').click();
    await eventually(async () => (await panel.locator('.job-out .not-found').count()) === 1, 5_000,
      'the not-found message');
    assert.equal(await text(panel.locator('.job-out .not-found')), `Job 999999: ${GONE}`);
    assert.equal(await view.count(), 0);
    await panel.locator('input.batch-id').fill('nope');
    await panel.locator('button.lookup-batch').click();
    await eventually(async () => (await panel.locator('.batch-out .not-found').count()) === 1, 5_000,
      'the batch not-found message');
    // The row goes on following the queue with the panel open: the failed job delayed, the
    // callbacks pushed.
    await eventually(async () => (await text(etl.locator('td.delayed'))) === '1'
      && (await text(etl.locator('td.pushed'))) === '5', 5_000, 'the row to follow');
    await page.screenshot({ path: artifactPath('dashboard-job-state.png'), fullPage: true });

    // A dead letter's id looks it up (in a queue whose lookup panel was never opened).
    const doomed = (await call('POST', '/v1/queues/mail/jobs', { payload: 'x', max_attempts: 1 }, 201)).id;
    const lease4 = await fetchOne('mail', doomed);
    await call('POST', '/v1/queues/mail/nack', { leases: [lease4], error: 'mailbox full' });
    const mail = page.locator('[data-queue="mail"]');
    await eventually(async () => (await mail.count()) === 1
      && (await text(mail.locator('td.dead'))) === '1', 5_000, 'the mail queue with its dead letter');
    await mail.locator('button.show-dead').click();
    const deadLink = page.locator(`[data-dead-for="mail"] tr[data-job="${doomed}"] a.job-link`);
    await deadLink.click();
    const mailPanel = page.locator('[data-jobs-for="mail"]');
    const mailView = mailPanel.locator('section.job-view');
    await eventually(async () => (await mailView.getAttribute('data-job')) === doomed, 5_000,
      'the dead letter looked up');
    assert.equal(await mailPanel.isVisible(), true);
    assert.equal(await mail.locator('button.show-lookup').getAttribute('aria-expanded'), 'true');
    assert.equal(await text(mailView.locator('tr.state td')), 'dead');
    assert.equal(await text(mailView.locator('tr.last-error td')), 'mailbox full');
    assert.equal(await text(mailView.locator('tr.attempts td')), '1 of 1');

    // The etl panel is still as it was.
    assert.equal(await text(panel.locator('.job-out .not-found')), `Job 999999: ${GONE}`);
    assert.deepEqual(pageErrors, []);
    await context.close();
  } finally {
    await server.stop();
  }
});
