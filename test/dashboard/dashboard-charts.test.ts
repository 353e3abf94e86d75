/**
 * Charts on the dashboard: `POST /api/charts` with the chart token, the
 * list, each chart served as SVG under a CSP that runs no script, the
 * refusals (wrong token, browsers, oversize, not SVG), the page's charts
 * section in both modes, and the limit of kept charts.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createDashboard, DashboardOptionError, type Dashboard } from '../../src/dashboard/index.js';
import { MAX_CHART_BYTES, MAX_CHARTS } from '../../src/dashboard/charts.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { scratchDir } from '../error-store/support.js';
import { bearer, csrfOf, operatorRequest, postHeaders, signIn, wrongToken } from './support.js';

const CHART_TOKEN = 'chart-token-0123456789abcdef';
const TOKEN = 'a-test-token-0123456789abcdef';
const NOW = Date.parse('2026-03-02T12:00:00.000Z');
const SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>\n';

const dir = scratchDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('charts on the dashboard', () => {
  let dashboard: Dashboard | undefined;
  /** Requests of the dashboard's operator, who has its token. */
  const request = operatorRequest(() => dashboard!.token);
  let transport: MemoryTransport | SqliteTransport | undefined;
  let clock: FakeClock;

  afterEach(async () => {
    await dashboard?.close();
    dashboard = undefined;
    await transport?.close();
    transport = undefined;
  });

  async function start(options: Partial<Parameters<typeof createDashboard>[0]> = {}): Promise<string> {
    clock = new FakeClock(NOW);
    transport = new MemoryTransport();
    dashboard = await createDashboard({ transport, clock, chartToken: CHART_TOKEN, ...options });
    return dashboard.url;
  }

  const chartHeaders = (token = CHART_TOKEN): Record<string, string> => ({ Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' });
  const post = (url: string, body: unknown, headers = chartHeaders()) => request(`${url}api/charts`, { method: 'POST', headers, body: JSON.stringify(body) });

  it('keeps a posted chart, lists it and serves it as SVG under a CSP that runs no script', async () => {
    const url = await start();
    const posted = await post(url, { title: 'Contention: calls vs clients', svg: SVG });
    expect(posted.status).toBe(200);
    const { id, url: chartUrl } = posted.json();
    expect(id).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(chartUrl).toBe(`${url}api/charts/${id}.svg`);

    const list = await request(`${url}api/charts`);
    expect(list.status).toBe(200);
    expect(list.json()).toEqual({ charts: [{ id, title: 'Contention: calls vs clients', at: '2026-03-02T12:00:00.000Z' }] });

    const served = await request(chartUrl);
    expect(served.status).toBe(200);
    expect(served.text).toBe(SVG);
    expect(served.headers['content-type']).toBe('image/svg+xml; charset=utf-8');
    // The chart's policy keeps every guard of the default one: no framing, no base, no form.
    expect(served.headers['content-security-policy']).toBe("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'");
    expect(served.headers['x-content-type-options']).toBe('nosniff');
    expect((await request(`${url}api/charts/${id}.svg`, { method: 'HEAD' })).status).toBe(200);
    expect((await request(`${url}api/charts/no-such-chart.svg`)).status).toBe(404);
    expect((await request(`${url}api/charts/${id}`)).status).toBe(404);
    expect((await request(`${url}api/charts`, { method: 'DELETE' })).status).toBe(405);
  });

  it('lists the newest first and keeps only the newest charts', async () => {
    const url = await start();
    const ids: string[] = [];
    for (let i = 1; i <= MAX_CHARTS + 1; i++) {
      await clock.advance(1_000);
      ids.push((await post(url, { title: `chart ${i}`, svg: SVG })).json().id);
    }
    const { charts } = (await request(`${url}api/charts`)).json();
    expect(charts).toHaveLength(MAX_CHARTS);
    expect(charts[0]).toMatchObject({ id: ids[MAX_CHARTS], title: `chart ${MAX_CHARTS + 1}`, at: new Date(NOW + (MAX_CHARTS + 1) * 1_000).toISOString() });
    expect(charts.at(-1)).toMatchObject({ id: ids[1], title: 'chart 2' });
    expect((await request(`${url}api/charts/${ids[0]}.svg`)).status).toBe(404);
    expect((await request(`${url}api/charts/${ids[1]}.svg`)).status).toBe(200);
  });

  it('admits a chart only with the chart token in Authorization', async () => {
    const url = await start();
    expect((await post(url, { title: 't', svg: SVG }, { 'Content-Type': 'application/json' })).status).toBe(403);
    expect((await post(url, { title: 't', svg: SVG }, chartHeaders(wrongToken(CHART_TOKEN)))).status).toBe(403);
    expect((await post(url, { title: 't', svg: SVG }, { ...chartHeaders(), 'Content-Type': 'text/plain' })).status).toBe(415);
    expect((await request(`${url}api/charts`)).json().charts).toEqual([]);
  });

  it("refuses the page's CSRF token and cookie, and any request a browser made", async () => {
    const url = await start({ token: TOKEN });
    const cookie = await signIn(url, TOKEN);
    const csrf = await csrfOf(url, { Cookie: cookie });
    const fromPage = await post(url, { title: 't', svg: SVG }, { ...postHeaders(url, csrf), Cookie: cookie, 'Sec-Fetch-Site': 'same-origin' });
    expect(fromPage.status).toBe(403);
    const withDashboardToken = await post(url, { title: 't', svg: SVG }, chartHeaders(TOKEN));
    expect(withDashboardToken.status).toBe(403);

    const crossSite = await post(url, { title: 't', svg: SVG }, { ...chartHeaders(), 'Sec-Fetch-Site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    expect(crossSite.json().error).toContain('not from web pages');
    expect((await post(url, { title: 't', svg: SVG }, { ...chartHeaders(), 'Sec-Fetch-Site': 'same-origin' })).status).toBe(403);
    expect((await post(url, { title: 't', svg: SVG }, { ...chartHeaders(), Origin: new URL(url).origin })).status).toBe(403);
    expect((await post(url, { title: 't', svg: SVG }, { ...chartHeaders(), 'Sec-Fetch-Site': 'none' })).status).toBe(200);
    // The chart token opens nothing else; the list and the charts need the dashboard token like every other read.
    expect((await request(`${url}api/charts`, { headers: { Authorization: `Bearer ${CHART_TOKEN}` } })).status).toBe(403);
    expect((await request(`${url}api/groups`, { headers: { Authorization: `Bearer ${CHART_TOKEN}` } })).status).toBe(403);
    const list = await request(`${url}api/charts`, { headers: bearer(TOKEN) });
    expect(list.json().charts).toHaveLength(1);
  });

  it('refuses an oversize chart, something other than SVG, and a missing or long title', async () => {
    const url = await start();
    const oversize = await post(url, { title: 'big', svg: `<svg>${'x'.repeat(MAX_CHART_BYTES)}</svg>` });
    expect(oversize.status).toBe(413);
    const escaped = await post(url, { title: 'big', svg: `<svg>${'"'.repeat(MAX_CHART_BYTES)}</svg>` });
    expect(escaped.status).toBe(413);
    expect((await post(url, { title: 'html', svg: '<html><script>alert(1)</script></html>' })).status).toBe(400);
    expect((await post(url, { title: 'svgish', svg: '<svgfoo/>' })).status).toBe(400);
    expect((await post(url, { svg: SVG })).status).toBe(400);
    expect((await post(url, { title: 'x'.repeat(201), svg: SVG })).status).toBe(400);
    expect((await post(url, [SVG])).status).toBe(400);
    expect((await request(`${url}api/charts`, { method: 'POST', headers: chartHeaders(), body: '{not json' })).status).toBe(400);
    expect((await post(url, { title: 'x'.repeat(200), svg: `  ${SVG}` })).status).toBe(200);
    expect((await request(`${url}api/charts`)).json().charts).toHaveLength(1);
  });

  it('answers 404 on every chart path without a chart token, and its page has no charts section', async () => {
    const url = await start({ chartToken: undefined });
    expect((await post(url, { title: 't', svg: SVG })).status).toBe(404);
    expect((await request(`${url}api/charts`)).status).toBe(404);
    expect((await request(`${url}api/charts/x.svg`)).status).toBe(404);
    expect((await request(url)).text).not.toContain('charts-panel');
  });

  it('puts a hidden charts section on the page in place and in store mode', async () => {
    const url = await start();
    const page = (await request(url)).text;
    expect(page).toContain('<section id="charts-panel" data-testid="charts-panel" hidden>');
    expect(page).toContain("api('api/charts')");
    await dashboard!.close();
    await transport!.close();
    transport = new SqliteTransport({ path: join(dir, 'charts-store-transport.db') });
    dashboard = await createDashboard({ transport, store: join(dir, 'charts-store.db'), chartToken: CHART_TOKEN, clock });
    const storePage = (await request(dashboard.url)).text;
    expect(storePage).toContain('<section id="charts-panel" data-testid="charts-panel" hidden>');
    const posted = await post(dashboard.url, { title: 'in store mode', svg: SVG });
    expect(posted.status).toBe(200);
    expect((await request(posted.json().url)).text).toBe(SVG);
  });

  it('refuses a short chart token', async () => {
    await expect(start({ chartToken: 'short' })).rejects.toThrow(DashboardOptionError);
  });
});
