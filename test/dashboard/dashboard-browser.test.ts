/**
 * The dashboard end to end in headless Chromium: a real endpoint
 * dead-letters messages, the page shows their group, a click sends the
 * group back, the endpoint handles the messages and the group disappears.
 * Also checks that hostile bodies and error messages show as text.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDashboard, type Dashboard } from '../../src/dashboard/index.js';
import type { Endpoint } from '../../src/endpoint/endpoint.js';
import { HEADER } from '../../src/headers/names.js';
import { validationIssuesHeader } from '../../src/headers/validation-issues.js';
import type { Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { failingEndpoint, sendAll, sqliteWithErrorQueue, Switch, waitFor, type TestMessage } from './support.js';

const CHROMIUM = process.env['REDELIVER_TEST_CHROMIUM'] ?? '/usr/bin/chromium';
const CI = process.env['CI'] === 'true';
const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && !CI) {
  console.warn(`\n!!! ${CHROMIUM} is missing: the dashboard browser tests are SKIPPED. Install it (apt-get install -y chromium) to run them. !!!\n`);
}
// Set REDELIVER_SCREENSHOT=docs/dashboard.png to refresh the README's picture.
const SCREENSHOT = process.env['REDELIVER_SCREENSHOT'] ?? join(dirname(fileURLToPath(import.meta.url)), '../../test-results/dashboard.png');
const TOKEN = 'browser-test-token-0123456789';
const XSS_IMG = '<img src=x onerror=window.__xss=1>';
const XSS_SCRIPT = '<script>window.__xss=2</script>';

const sqlite = await sqliteWithErrorQueue();

describe.skipIf(!haveChromium && !CI)('dashboard in a browser', () => {
  let browser: Browser;
  let transport: Transport | undefined;
  let endpoint: Endpoint<TestMessage> | undefined;
  let dashboard: Dashboard | undefined;
  const cspViolations: string[] = [];

  beforeAll(async () => {
    if (!haveChromium) throw new Error(`${CHROMIUM} is missing, and CI=true: the dashboard browser tests must run in CI`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
  }, 60_000);

  afterEach(async () => {
    await dashboard?.close();
    await endpoint?.stop();
    await transport?.close();
    dashboard = undefined;
    endpoint = undefined;
    transport = undefined;
  });

  afterAll(async () => {
    await browser?.close();
    sqlite?.cleanup();
  });

  /** Opens the page as its operator does the first time: with `?token=`, which becomes a session cookie. */
  async function open(): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) cspViolations.push(m.text());
    });
    page.on('dialog', (d) => void d.accept());
    await page.goto(`${dashboard!.url}?token=${encodeURIComponent(dashboard!.token)}`);
    return page;
  }

  async function startEndpoint(name: string, poison: Switch): Promise<Endpoint<TestMessage>> {
    transport = sqlite ? await sqlite.create(name) : new MemoryTransport();
    endpoint = failingEndpoint(transport, poison);
    await endpoint.start();
    return endpoint;
  }

  it(`shows a failure group, retries it, and the endpoint handles the messages (${sqlite ? 'sqlite' : 'memory'})`, async () => {
    const poison = new Switch();
    const ep = await startEndpoint('e2e', poison);
    const messages: TestMessage[] = [
      ...[1, 2, 3].map((n) => ({ n, fail: { name: 'InventoryUnavailable', message: `no stock for sku ${4000 + n} in warehouse 'berlin-${n}'` } })),
      ...[4, 5].map((n) => ({ n, fail: { name: 'PaymentDeclined', message: `card ending ${1000 + n} declined: insufficient funds` } })),
      ...[6, 7, 8, 9].map((n) => ({ n })),
    ];
    await sendAll(transport!, 'orders', messages);
    await waitFor(() => ep.stats.deadLettered === 5 && ep.stats.handled === 4, 15_000, 'five dead letters');
    const handled: string[] = [];
    ep.on('handled', (e) => handled.push(e.messageId));

    dashboard = await createDashboard({ transport: transport!, endpoints: [ep] });
    const page = await open();
    const groups = page.locator('[data-testid="group-row"]');
    await expect.poll(() => groups.count(), { timeout: 10_000 }).toBe(2);
    const inventory = groups.filter({ hasText: 'InventoryUnavailable' });
    await expect.poll(() => inventory.locator('[data-testid="group-count"]').textContent()).toBe('3');
    expect(await inventory.textContent()).toContain('no stock for sku <n> in warehouse <value>');

    // The group's messages, and one message in full.
    await inventory.click();
    const rows = page.locator('[data-testid="message-row"]');
    await expect.poll(() => rows.count()).toBe(3);
    await rows.first().locator('[data-testid="view-message"]').click();
    await expect.poll(() => page.locator('[data-testid="detail-stack"]').textContent()).toContain('InventoryUnavailable');
    expect(await page.locator('#detail').textContent()).toContain("no stock for sku 4001 in warehouse 'berlin-1'");
    expect(await page.locator('[data-testid="detail-body"]').textContent()).toContain('"n": 1');

    // The dependency is fixed: send the whole group back.
    poison.poisoned = false;
    await inventory.locator('[data-testid="retry-group"]').click();
    await waitFor(() => handled.length === 3, 15_000, 'the retried messages to be handled');
    expect(handled.sort()).toEqual(['msg-1', 'msg-2', 'msg-3']);
    await expect.poll(() => groups.count(), { timeout: 10_000 }).toBe(1);
    expect(await groups.first().textContent()).toContain('PaymentDeclined');
    await expect.poll(() => page.locator('#status').textContent()).toContain('Sent back 3 messages');

    // Live counters pick the handled messages up within a refresh or two.
    const endpointRow = page.locator('[data-testid="endpoint-row"]');
    await expect.poll(() => endpointRow.locator('td').nth(3).textContent(), { timeout: 10_000 }).not.toBe('0');
    await expect.poll(() => page.locator('[data-testid="error-queue-card"]').textContent()).toContain('2');

    // The picture for the docs: the remaining group, its messages and one message in full.
    await groups.first().click();
    await expect.poll(() => rows.count()).toBe(2);
    await rows.first().locator('[data-testid="view-message"]').click();
    await expect.poll(() => page.locator('[data-testid="detail-stack"]').textContent()).toContain('PaymentDeclined');
    mkdirSync(dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    expect(cspViolations).toEqual([]);
    await page.close();
  }, 60_000);

  it('shows hostile bodies and error messages as text, running none of them', async () => {
    const poison = new Switch();
    const ep = await startEndpoint('xss', poison);
    const hostile = `${XSS_IMG} ${XSS_SCRIPT}`;
    await transport!.send('orders', {
      id: `id-${XSS_IMG}`,
      body: new TextEncoder().encode(JSON.stringify({ n: 1, note: hostile, fail: { name: '<svg onload=window.__xss=3>', message: hostile } })),
      headers: { [`x-${XSS_IMG}`]: hostile },
    });
    await waitFor(() => ep.stats.deadLettered === 1, 10_000, 'the hostile message to be dead-lettered');

    // With a token of the operator's choosing: the page is opened once with ?token=, which becomes an HttpOnly session cookie.
    dashboard = await createDashboard({ transport: transport!, endpoints: [ep], token: TOKEN });
    const page = await open();
    expect(new URL(page.url()).search).toBe('');
    const group = page.locator('[data-testid="group-row"]');
    await expect.poll(() => group.count(), { timeout: 10_000 }).toBe(1);
    expect(await group.textContent()).toContain('<svg onload=window.__xss=3><img src=x onerror=window.__xss=<n>> <script>window.__xss=<n></script>');
    await group.click();
    const row = page.locator('[data-testid="message-row"]');
    await expect.poll(() => row.count()).toBe(1);
    expect(await row.locator('[data-testid="message-text"]').textContent()).toBe(hostile);
    await row.locator('[data-testid="view-message"]').click();
    await expect.poll(() => page.locator('[data-testid="detail-message"]').textContent()).toBe(hostile);
    expect(await page.locator('[data-testid="detail-body"]').textContent()).toContain(JSON.stringify(hostile).slice(1, -1));
    expect(await page.locator('#detail').textContent()).toContain(`x-${XSS_IMG}`);
    expect(await page.locator('#detail-title').textContent()).toBe(`id-${XSS_IMG}`);

    // Nothing ran, and nothing became an element.
    await page.waitForTimeout(300);
    expect(await page.evaluate(() => (globalThis as { __xss?: unknown }).__xss)).toBeUndefined();
    expect(await page.locator('main img, main script, main svg').count()).toBe(0);
    expect(cspViolations).toEqual([]);
    await page.close();
  }, 60_000);

  it("shows a message's validation issues as path: message lines of text, running none of them", async () => {
    transport = new MemoryTransport();
    await transport.send('error', {
      id: 'invalid-order',
      body: new TextEncoder().encode('{"lines":[{"qty":0}]}'),
      headers: {
        [HEADER.failureReason]: 'validation',
        [HEADER.failureErrorName]: 'ValidationError',
        [HEADER.failureMessage]: 'the body failed its schema',
        [HEADER.validationIssues]: validationIssuesHeader([
          { path: ['lines', 0, 'qty'], message: 'Too small: expected number to be >0' },
          { path: [XSS_IMG], message: XSS_SCRIPT },
        ]),
      },
    });
    dashboard = await createDashboard({ transport });
    const page = await open();
    const group = page.locator('[data-testid="group-row"]');
    await expect.poll(() => group.count(), { timeout: 10_000 }).toBe(1);
    await group.click();
    const row = page.locator('[data-testid="message-row"]');
    await expect.poll(() => row.count()).toBe(1);
    await row.locator('[data-testid="view-message"]').click();
    const lines = page.locator('[data-testid="detail-validation-issues"] li');
    await expect.poll(() => lines.count(), { timeout: 10_000 }).toBe(2);
    expect(await lines.allTextContents()).toEqual(['lines[0].qty: Too small: expected number to be >0', `[${JSON.stringify(XSS_IMG)}]: ${XSS_SCRIPT}`]);
    await page.waitForTimeout(300);
    expect(await page.evaluate(() => (globalThis as { __xss?: unknown }).__xss)).toBeUndefined();
    expect(await page.locator('main img, main script').count()).toBe(0);
    expect(cspViolations).toEqual([]);
    await page.close();
  }, 60_000);

  it('shows a chart sent by a command line tool as an image, and a script inside it never runs', async () => {
    transport = new MemoryTransport();
    const chartToken = 'browser-chart-token-0123456789';
    dashboard = await createDashboard({ transport, token: TOKEN, chartToken });
    const page = await open();
    await expect.poll(() => page.locator('[data-testid="error-queue-card"]').count(), { timeout: 10_000 }).toBe(1);
    expect(await page.locator('[data-testid="charts-panel"]').isHidden()).toBe(true);

    const svg = '<svg xmlns="http://www.w3.org/2000/svg" width="300" height="120"><script>window.__xss=4</script><rect width="300" height="120" fill="#0072b2"/></svg>';
    const posted = await fetch(`${dashboard.url}api/charts`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${chartToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: 'Contention: calls vs clients', svg }),
    });
    expect(posted.status).toBe(200);
    const { url: chartUrl } = (await posted.json()) as { url: string };

    const image = page.locator('[data-testid="chart-image"]');
    await expect.poll(() => image.count(), { timeout: 10_000 }).toBe(1);
    expect(await page.locator('[data-testid="charts-panel"]').isVisible()).toBe(true);
    expect(await page.locator('[data-testid="chart-figure"] figcaption').textContent()).toContain('Contention: calls vs clients');
    await expect.poll(() => image.evaluate((img) => (img as unknown as { complete: boolean; naturalWidth: number }).complete && (img as unknown as { naturalWidth: number }).naturalWidth), { timeout: 10_000 }).toBe(300);
    expect(await page.evaluate(() => (globalThis as { __xss?: unknown }).__xss)).toBeUndefined();
    expect(cspViolations).toEqual([]);

    // Opened on its own, the SVG is a document of its own: its CSP keeps the script from running.
    await page.goto(chartUrl);
    expect(await page.evaluate(() => (globalThis as { __xss?: unknown }).__xss)).toBeUndefined();
    expect(await page.locator('rect').count()).toBe(1);
    await page.close();
  }, 60_000);

  it('works behind a reverse proxy that serves it under a path: logs in with the token and retries a group', async () => {
    const poison = new Switch();
    const ep = await startEndpoint('proxied', poison);
    await sendAll(transport!, 'orders', [1, 2].map((n) => ({ n, fail: { name: 'PaymentDeclined', message: `card ${n} declined` } })));
    await waitFor(() => ep.stats.deadLettered === 2, 10_000, 'two dead letters');
    const handled: string[] = [];
    ep.on('handled', (e) => handled.push(e.messageId));

    // A proxy that strips /redeliver and, like nginx's default, sends the upstream's own Host.
    const upstream = { port: 0 };
    const proxy = createServer((req, res) => {
      if (!req.url?.startsWith('/redeliver/')) return void res.writeHead(404).end();
      const forward = httpRequest(
        { host: '127.0.0.1', port: upstream.port, method: req.method, path: req.url.slice('/redeliver'.length), headers: { ...req.headers, host: `127.0.0.1:${upstream.port}` } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(forward);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const publicUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/redeliver/`;
    try {
      dashboard = await createDashboard({ transport: transport!, endpoints: [ep], token: TOKEN, publicUrl });
      upstream.port = Number(new URL(dashboard.url).port);
      const page = await browser.newPage();
      page.on('dialog', (d) => void d.accept());
      await page.goto(`${publicUrl}?token=${TOKEN}`);
      expect(page.url()).toBe(publicUrl);
      const group = page.locator('[data-testid="group-row"]');
      await expect.poll(() => group.count(), { timeout: 10_000 }).toBe(1);
      poison.poisoned = false;
      await group.locator('[data-testid="retry-group"]').click();
      await expect.poll(() => page.locator('#status').textContent(), { timeout: 10_000 }).toContain('Sent back 2 messages');
      await waitFor(() => handled.length === 2, 15_000, 'the retried messages to be handled');
      await page.close();
    } finally {
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
      proxy.closeAllConnections();
    }
  }, 60_000);
});
