/**
 * How a chart finds the running dashboard: the runtime file `redeliver
 * dashboard` writes (owner-only, removed when it stops, left alone when it
 * names another process) and `publishChart`, which shows a chart on it and
 * stays quiet when there is no dashboard.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { serveDashboard, type DashboardCommandOptions } from '../../src/cli/commands/dashboard.js';
import { deliverChart } from '../../src/cli/chart-output.js';
import { publishChart } from '../../src/dashboard/chart-feed.js';
import { MAX_CHART_BYTES } from '../../src/dashboard/charts.js';
import { readRuntimeFile, runtimeFilePath, stateDir, writeRuntimeFile } from '../../src/dashboard/runtime-file.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { operatorRequest, tokenFromFile, type request } from './support.js';

const root = mkdtempSync(join(tmpdir(), 'redeliver-chart-feed-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
/** A fresh state directory (not created yet) and the env naming it. */
function freshEnv(): { dir: string; env: Record<string, string> } {
  const dir = join(root, `state-${++n}`, '.redeliver');
  return { dir, env: { REDELIVER_STATE_DIR: dir } };
}

const SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><circle r="4" cx="5" cy="5"/></svg>\n';
const quiet = () => new Writable({ write: (_chunk, _enc, done) => done() });
const base: DashboardCommandOptions = { port: 0, host: '127.0.0.1', errorQueue: [] };

/**
 * Runs `serveDashboard` on a memory transport until it is listening; `stop()`
 * ends it; `err` is what it wrote to stderr; `request` carries its token (the
 * one given, else the one in its token file).
 */
async function serve(
  env: Record<string, string>,
  opts: Partial<DashboardCommandOptions> = {},
): Promise<{ url: string; err: string[]; request: typeof request; stop: () => Promise<void> }> {
  const abort = new AbortController();
  const err: string[] = [];
  let ready: (url: string) => void = () => undefined;
  const listening = new Promise<string>((resolve) => (ready = resolve));
  const served = serveDashboard('memory', { ...base, ...opts }, {
    out: quiet(),
    err: new Writable({ write: (chunk, _enc, done) => (err.push(String(chunk)), done()) }),
    signal: abort.signal,
    env,
    openTransport: async () => new MemoryTransport(),
    onReady: (u) => ready(u),
  });
  const url = await Promise.race([listening, served.then(() => Promise.reject(new Error('the dashboard stopped before listening')))]);
  const token = opts.token ?? tokenFromFile(env, url);
  return {
    url,
    err,
    request: operatorRequest(() => token),
    stop: async () => {
      abort.abort();
      await served;
    },
  };
}

/** A server that takes requests and never answers; counts them. */
async function silentServer(): Promise<{ url: string; requests: () => number; close: () => Promise<void> }> {
  let count = 0;
  const server: Server = createServer(() => {
    count++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    requests: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The id of a process that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  return child.pid!;
}

describe('the runtime file of redeliver dashboard', () => {
  it('lives in $REDELIVER_STATE_DIR, else ~/.redeliver', () => {
    expect(stateDir({ REDELIVER_STATE_DIR: '/srv/state' })).toBe('/srv/state');
    expect(runtimeFilePath({ REDELIVER_STATE_DIR: '/srv/state' })).toBe('/srv/state/dashboard.json');
    expect(stateDir({ REDELIVER_STATE_DIR: '' })).toMatch(/\/\.redeliver$/);
    expect(stateDir({})).toMatch(/\/\.redeliver$/);
  });

  it('is written owner-only while the dashboard serves, and removed when it stops', async () => {
    const { dir, env } = freshEnv();
    const { url, request, stop } = await serve(env);
    const path = join(dir, 'dashboard.json');
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const runtime = JSON.parse(readFileSync(path, 'utf8'));
    expect(runtime).toEqual({ url, pid: process.pid, chartToken: expect.stringMatching(/^[A-Za-z0-9_-]{16,}$/) });
    const posted = await request(`${url}api/charts`, { method: 'POST', headers: { Authorization: `Bearer ${runtime.chartToken}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ title: 't', svg: SVG }) });
    expect(posted.status).toBe(200);
    await stop();
    expect(existsSync(path)).toBe(false);
  });

  it('is left alone when it names another process (a dashboard started later)', async () => {
    const { dir, env } = freshEnv();
    const { stop } = await serve(env);
    const path = join(dir, 'dashboard.json');
    const other = { url: 'http://127.0.0.1:1/', pid: process.pid + 1, chartToken: 'another-dashboards-token' };
    await writeRuntimeFile(path, other);
    await stop();
    expect(await readRuntimeFile(path)).toEqual(other);
  });

  it('is not written with --no-chart-feed, and the dashboard then takes no charts', async () => {
    const { dir, env } = freshEnv();
    const { url, request, stop } = await serve(env, { chartFeed: false });
    expect(existsSync(join(dir, 'dashboard.json'))).toBe(false);
    expect((await request(`${url}api/charts`)).status).toBe(404);
    await stop();
  });

  it('warns and serves on when it cannot be written (with --token, so no token file is needed)', async () => {
    const blocked = join(root, 'a-file');
    writeFileSync(blocked, '');
    const { url, err, request, stop } = await serve({ REDELIVER_STATE_DIR: join(blocked, 'state') }, { token: 'a-token-of-the-operator-0123456789' });
    expect(err.join('')).toMatch(/^warn charts from redeliver plan and simulate will not reach this dashboard: cannot write .*a-file\/state\/dashboard\.json/);
    expect((await request(`${url}api/groups`)).status).toBe(200);
    await stop();
  });

  it('without --token, refuses to start when the token file cannot be written either', async () => {
    const blocked = join(root, 'another-file');
    writeFileSync(blocked, '');
    await expect(serve({ REDELIVER_STATE_DIR: join(blocked, 'state') })).rejects.toThrow(/cannot write the token file .*another-file\/state\/dashboard-\d+\.token.*pass --token/);
  });
});

describe('publishChart', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it('shows the chart on the running dashboard and answers its address', async () => {
    const { env } = freshEnv();
    const { url, request, stop } = await serve(env);
    cleanups.push(stop);
    const shown = await publishChart({ title: 'Outage: load over time', svg: SVG }, { env });
    expect(shown).toEqual({ url: expect.stringMatching(new RegExp(`^${url}api/charts/[A-Za-z0-9_-]+\\.svg$`)) });
    const list = (await request(`${url}api/charts`)).json();
    expect(list.charts).toEqual([expect.objectContaining({ title: 'Outage: load over time' })]);
    const served = await request((shown as { url: string }).url);
    expect(served.text).toBe(SVG);
    expect(served.headers['content-type']).toBe('image/svg+xml; charset=utf-8');
  });

  it('answers why, when the dashboard refuses the chart', async () => {
    const { dir, env } = freshEnv();
    const { url, request, stop } = await serve(env);
    cleanups.push(stop);
    expect(await publishChart({ title: 'not a chart', svg: '<p>hello</p>' }, { env })).toEqual({ refused: 'HTTP 400: svg must be an SVG document starting with <svg' });
    const big = `<svg>${' '.repeat(MAX_CHART_BYTES)}</svg>`;
    expect(await publishChart({ title: 'too big', svg: big }, { env })).toEqual({ refused: `the chart is ${MAX_CHART_BYTES + 11} bytes; the dashboard takes at most ${MAX_CHART_BYTES}` });
    expect((await request(`${url}api/charts`)).json().charts).toEqual([]);
    await writeRuntimeFile(join(dir, 'dashboard.json'), { url, pid: process.pid, chartToken: 'a-token-from-an-older-dashboard' });
    expect(await publishChart({ title: 't', svg: SVG }, { env })).toEqual({ refused: 'HTTP 403: a valid chart token is required: Authorization: Bearer <chartToken>' });
  });

  it('answers undefined when there is no runtime file', async () => {
    const { env } = freshEnv();
    expect(await publishChart({ title: 't', svg: SVG }, { env })).toBeUndefined();
  });

  it('answers undefined, without sending anything, when the process the file names is gone', async () => {
    const { dir, env } = freshEnv();
    const server = await silentServer();
    cleanups.push(server.close);
    await writeRuntimeFile(join(dir, 'dashboard.json'), { url: server.url, pid: deadPid(), chartToken: 'a-chart-token-0123456789' });
    // A timeout longer than the test's: were a request sent, the test would time out.
    expect(await publishChart({ title: 't', svg: SVG }, { env, timeoutMs: 3_600_000 })).toBeUndefined();
    expect(server.requests()).toBe(0);
  });

  it('answers undefined when the dashboard does not answer in time, or nothing listens', async () => {
    const { dir, env } = freshEnv();
    const server = await silentServer();
    cleanups.push(server.close);
    await writeRuntimeFile(join(dir, 'dashboard.json'), { url: server.url, pid: process.pid, chartToken: 'a-chart-token-0123456789' });
    expect(await publishChart({ title: 't', svg: SVG }, { env, timeoutMs: 50 })).toBeUndefined();
    expect(server.requests()).toBe(1);
    await server.close();
    expect(await publishChart({ title: 't', svg: SVG }, { env, timeoutMs: 3_600_000 })).toBeUndefined();
  });

  it('trusts no runtime file that others may read or write, that is a link, or that is another user\'s', async () => {
    const { dir, env } = freshEnv();
    const server = await silentServer();
    cleanups.push(server.close);
    const file = join(dir, 'dashboard.json');
    await writeRuntimeFile(file, { url: server.url, pid: process.pid, chartToken: 'a-chart-token-0123456789' });
    expect(await readRuntimeFile(file)).toBeDefined();
    for (const mode of [0o644, 0o620, 0o604]) {
      chmodSync(file, mode);
      expect(await readRuntimeFile(file), mode.toString(8)).toBeUndefined();
      expect(await publishChart({ title: 't', svg: SVG }, { env, timeoutMs: 3_600_000 })).toBeUndefined();
    }
    chmodSync(file, 0o600);
    const planted = join(dir, 'planted.json');
    renameSync(file, planted);
    symlinkSync(planted, file);
    expect(await readRuntimeFile(file)).toBeUndefined();
    rmSync(file);
    renameSync(planted, file);
    if (process.getuid?.() === 0) {
      chownSync(file, 65_534, 65_534); // as if another user had planted it
      expect(await readRuntimeFile(file)).toBeUndefined();
    }
    expect(server.requests()).toBe(0);
  });

  it('escapes what a dashboard answers before a command prints it', async () => {
    const { dir, env } = freshEnv();
    const hostile = createServer((_req, res) => {
      res.writeHead(403, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: '\u001b[2J\u001b]0;owned\u0007gone' }));
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => hostile.close(() => resolve())));
    const url = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}/`;
    await writeRuntimeFile(join(dir, 'dashboard.json'), { url, pid: process.pid, chartToken: 'a-chart-token-0123456789' });
    const lines = await deliverChart('t', () => SVG, { dashboard: true }, { env });
    expect(lines).toEqual(['Chart not shown on the dashboard: HTTP 403: \\x1b[2J\\x1b]0;owned\\x07gone']);
  });

  it('answers undefined when the runtime file is not one', async () => {
    const { dir, env } = freshEnv();
    await writeRuntimeFile(join(dir, 'dashboard.json'), { url: 'ftp://example.com/', pid: process.pid, chartToken: 'x' });
    expect(await publishChart({ title: 't', svg: SVG }, { env })).toBeUndefined();
  });
});
