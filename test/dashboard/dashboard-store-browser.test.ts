/**
 * The store-mode dashboard in headless Chromium over an error store of
 * 100,000 entries: the first page renders (its time is printed; the
 * benchmark `errors-scale` measures it), search narrows
 * the table, the chart has bars for the groups, a group is retried at a
 * rate into a real SQLite queue with progress on the page, and an edited
 * copy is sent once however often Send is clicked.
 */
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDashboard, type Dashboard } from '../../src/dashboard/index.js';
import { ErrorStore } from '../../src/error-store/store.js';
import type { IngestEntry } from '../../src/error-store/types.js';
import type { Transport } from '../../src/transport/types.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { failureHeaders, scratchDir } from '../error-store/support.js';
import { waitFor } from './support.js';

const CHROMIUM = process.env['REDELIVER_TEST_CHROMIUM'] ?? '/usr/bin/chromium';
const CI = process.env['CI'] === 'true';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && !CI) {
  console.warn(`\n!!! ${CHROMIUM} is missing: the store dashboard browser tests are SKIPPED. Install it (apt-get install -y chromium) to run them. !!!\n`);
}

/** Entries in the store: the bulk groups, plus the small groups the retry tests send. */
const BULK = 100_000;
const BULK_GROUPS = 5;
const REFUNDS = 30;
const INGEST_BATCH = 5_000;
/**
 * A bound on the first page's render that only a page reading far more than
 * its rows would pass, ms; far above this loaded machine's noise (the
 * speed itself is the `errors-scale` benchmark's).
 */
const FIRST_PAGE_HANG_MS = 15_000;
// Set REDELIVER_STORE_SCREENSHOT=docs/dashboard-store.png to refresh the docs' picture of store mode.
const SCREENSHOT = process.env['REDELIVER_STORE_SCREENSHOT'];

describe.skipIf(!haveChromium && !CI)('store-mode dashboard in a browser (100,000 entries)', () => {
  const dir = scratchDir();
  let browser: Browser;
  let store: ErrorStore;
  let transport: Transport;
  let dashboard: Dashboard;
  let page: Page | undefined;
  const edited: string[] = [];
  const cspViolations: string[] = [];

  beforeAll(async () => {
    if (!haveChromium) throw new Error(`${CHROMIUM} is missing, and CI=true: the dashboard browser tests must run in CI`);
    store = ErrorStore.open(join(dir, 'errors.db'));
    const now = Date.now();
    const started = performance.now();
    for (let from = 0; from < BULK; from += INGEST_BATCH) {
      const batch: IngestEntry[] = [];
      for (let i = from; i < from + INGEST_BATCH; i++) {
        const g = i % BULK_GROUPS;
        const at = new Date(now - 60_000 - ((i * 37) % 3_500_000)).toISOString();
        batch.push({
          errorQueue: 'error',
          messageId: `m-${i}`,
          headers: failureHeaders({ errorName: `BulkError${g}`, message: `bulk failure ${g} for order ${i}`, queue: 'orders', endpoint: `ep-${g}`, at }),
          body: Buffer.from(`{"order":${i}}`),
        });
      }
      await store.ingest(batch);
    }
    await store.ingest([
      ...Array.from({ length: REFUNDS }, (_, i) => ({
        errorQueue: 'error',
        messageId: `refund-${i}`,
        headers: failureHeaders({ errorName: 'RefundRejected', message: `refund ${i} rejected`, queue: 'refunds', at: new Date(now - 120_000).toISOString() }),
        body: Buffer.from(`{"refund":${i}}`),
      })),
      { errorQueue: 'error', messageId: 'edit-me-1', headers: failureHeaders({ errorName: 'BadAddress', message: 'no street', queue: 'addresses' }), body: Buffer.from('{"street":""}') },
    ]);
    console.log(`ingested ${BULK + REFUNDS + 1} entries in ${Math.round(performance.now() - started)} ms`);

    transport = new SqliteTransport({ path: join(dir, 'broker.db'), pollIntervalMs: 20 });
    // The destinations exist as work queues: 'refunds' has no consumer (its depth is counted), 'addresses' is consumed.
    await (await transport.consume('refunds', (d) => void d.release(), { prefetch: 1 })).close();
    await transport.consume(
      'addresses',
      (d) => {
        edited.push(Buffer.from(d.body).toString('utf8'));
        void d.ack();
      },
      { prefetch: 1 },
    );
    dashboard = await createDashboard({ transport, store });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 180_000);

  afterEach(async () => {
    await page?.close();
    page = undefined;
  });

  afterAll(async () => {
    await browser?.close();
    await dashboard?.close();
    await transport?.close();
    store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Opens the page and waits for the first entry row. `firstRowMs` is read in the browser: the page's
   * performance mark at the first row, from navigation start. (A clock in this process would also count
   * the time the dashboard, in the same event loop, spends on the aggregates the page asks for next.)
   */
  async function open(): Promise<{ page: Page; firstRowMs: number }> {
    const p = (page = await browser.newPage({ viewport: { width: 1440, height: 1000 } }));
    p.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) cspViolations.push(m.text());
    });
    p.on('dialog', (d) => void d.accept());
    await p.goto(`${dashboard.url}?token=${encodeURIComponent(dashboard.token)}`); // signs in: the token becomes a session cookie
    await p.locator('[data-testid="entry-row"]').first().waitFor({ timeout: 10_000 });
    const firstRowMs = await p.evaluate(() => (globalThis as unknown as { performance: { getEntriesByName(name: string): { startTime: number }[] } }).performance.getEntriesByName('redeliver:first-entry-row')[0]!.startTime);
    return { page: p, firstRowMs };
  }

  it('renders the first page, and search narrows the table', async () => {
    // The first navigation also warms the browser; the figure is the best of three. Each page is closed only
    // once its chart is drawn, so the next one does not wait behind the aggregates of the one before.
    const times: number[] = [];
    for (let i = 0; i < 3; i++) {
      const { page: p, firstRowMs } = await open();
      times.push(Math.round(firstRowMs));
      await p.locator('[data-testid="chart-legend"]').first().waitFor({ timeout: 20_000 });
      await p.close();
    }
    const best = Math.min(...times);
    console.log(`first page (navigation to the first entry row) over ${BULK + REFUNDS + 1} entries: ${times.join(', ')} ms; best ${best} ms`);
    expect(best).toBeLessThan(FIRST_PAGE_HANG_MS);

    const { page: p } = await open();
    const rows = p.locator('[data-testid="entry-row"]');
    expect(await rows.count()).toBe(50);
    await expect.poll(() => p.locator('[data-testid="page-info"]').textContent()).toBe(`1–50 of ${(BULK + REFUNDS + 1).toLocaleString('en-US')}`);
    await p.locator('[data-testid="next-page"]').click();
    await expect.poll(() => p.locator('[data-testid="page-info"]').textContent()).toContain('51–100 of');

    await p.locator('[data-testid="search"]').fill('m-77777');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().getAttribute('data-key')).toBe(store.search({ text: 'm-77777' }).entries[0]!.key);
    expect(await p.locator('[data-testid="page-info"]').textContent()).toBe('1–1 of 1');
    expect(cspViolations).toEqual([]);
  }, 60_000);

  it('charts failures per minute with bars for each group', async () => {
    const { page: p } = await open();
    const bars = p.locator('#chart rect[data-testid="chart-bar"]');
    await expect.poll(() => bars.count(), { timeout: 10_000 }).toBeGreaterThan(BULK_GROUPS);
    const groups = await bars.evaluateAll((nodes) => [...new Set(nodes.map((n) => n.getAttribute('data-group')))]);
    expect(groups.length).toBe(BULK_GROUPS + 2);
    expect(await p.locator('[data-testid="chart-legend"]').count()).toBe(BULK_GROUPS + 2);
    expect(await p.locator('[data-testid="chart-legend"]').allTextContents()).toContain(`RefundRejected: refund <n> rejected (${REFUNDS})`);
    await p.locator('[data-testid="chart-range"]').selectOption('day');
    await expect.poll(() => p.locator('#chart svg').getAttribute('viewBox')).toBe('0 0 1100 170');
    await expect.poll(() => bars.count()).toBeGreaterThan(BULK_GROUPS);
    if (SCREENSHOT) {
      mkdirSync(dirname(SCREENSHOT), { recursive: true });
      await p.screenshot({ path: SCREENSHOT });
    }
  }, 60_000);

  it('retries a group at a rate into its queue, showing the progress', async () => {
    const { page: p } = await open();
    const refunds = p.locator('[data-testid="group-row"]').filter({ hasText: 'RefundRejected' });
    await expect.poll(() => refunds.locator('[data-testid="group-count"]').textContent(), { timeout: 10_000 }).toBe(String(REFUNDS));
    await refunds.locator('[data-testid="retry-group"]').click();
    await expect.poll(() => p.locator('#retry-count').textContent()).toContain(`${REFUNDS} waiting entries`);
    await p.locator('[data-testid="retry-rate"]').fill('20');
    const depth = async () => (await transport.inspection!.queueDepths(['refunds']))[0]!.ready;
    expect(await depth()).toBe(0);
    await p.locator('[data-testid="retry-start"]').click();

    // At 20 a second with a burst of 2, 30 entries take at least 1.4 s to arrive.
    await waitFor(async () => (await depth()) > 0, 10_000, 'the first retried entry');
    const firstArrived = performance.now();
    await waitFor(async () => (await depth()) === REFUNDS, 20_000, 'every retried entry');
    expect(performance.now() - firstArrived).toBeGreaterThan(1_200);

    const job = p.locator('[data-testid="job"]');
    await expect.poll(() => job.locator('[data-testid="job-text"]').textContent(), { timeout: 10_000 }).toBe(`done: sent ${REFUNDS} of ${REFUNDS} at 20/s`);
    expect(await job.locator('[data-testid="job-progress"]').getAttribute('value')).toBe(String(REFUNDS));
    // Live updates take the group off the waiting list, and the store records who sent each entry where.
    await expect.poll(() => refunds.count(), { timeout: 10_000 }).toBe(0);
    expect(store.count({ errorName: 'RefundRejected', status: 'retried' })).toBe(REFUNDS);
    expect(store.search({ errorName: 'RefundRejected', status: 'retried' }, { limit: 1 }).entries[0]).toMatchObject({ retriedTo: 'refunds', lastRetriedBy: expect.stringMatching(/^dashboard session-[0-9a-f]{8}$/) });
    expect(await depth()).toBe(REFUNDS);
  }, 60_000);

  it('sends an edited body once even when Send is clicked twice', async () => {
    const { page: p } = await open();
    await p.locator('[data-testid="search"]').fill('edit-me-1');
    const row = p.locator('[data-testid="entry-row"]');
    await expect.poll(() => row.count()).toBe(1);
    await row.first().click();
    await expect.poll(() => p.locator('[data-testid="detail-body"]').textContent()).toContain('"street": ""');
    await p.locator('[data-testid="detail-edit"]').click();
    await p.locator('[data-testid="edit-body"]').fill('{"street":"Main Street 1"}');
    const posts: string[] = [];
    p.on('request', (r) => {
      if (r.url().endsWith('/api/edit-retry')) posts.push(r.postData() ?? '');
    });
    // Two clicks in one go, as a double click delivers them.
    await p.locator('[data-testid="edit-send"]').evaluate((b) => {
      const button = b as unknown as { click(): void };
      button.click();
      button.click();
    });
    await expect.poll(() => p.locator('#status').textContent(), { timeout: 10_000 }).toBe('Sent the edited message to addresses.');
    await waitFor(() => edited.length === 1, 10_000, 'the edited copy');
    expect(edited).toEqual(['{"street":"Main Street 1"}']);
    expect(posts).toHaveLength(1);

    // The same request sent again (a retried POST) sends nothing more: the request id was made when the dialog opened.
    const again = await p.evaluate(async (body) => {
      const { document } = globalThis as unknown as { document: { querySelector(s: string): { getAttribute(name: string): string } } };
      const csrf = document.querySelector('meta[name="redeliver-csrf"]').getAttribute('content');
      const res = await fetch('api/edit-retry', { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Redeliver-CSRF': csrf }, body });
      return res.json();
    }, posts[0]!);
    expect(again).toMatchObject({ sentTo: 'addresses', duplicate: true });
    await new Promise((r) => setTimeout(r, 200));
    expect(edited).toHaveLength(1);
    const replaced = store.search({ text: 'edit-me-1', status: 'replaced' }).entries;
    expect(replaced).toHaveLength(1);
    const detail = (await p.evaluate(async (key) => (await fetch('api/entries/' + encodeURIComponent(key))).json(), replaced[0]!.key)) as { edits: unknown[] };
    expect(detail.edits).toEqual([expect.objectContaining({ sentTo: 'addresses', bodySizeBefore: 13, bodySizeAfter: 26 })]);
    expect(cspViolations).toEqual([]);
  }, 60_000);
});
