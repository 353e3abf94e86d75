/**
 * The store API under a flood of searches: each kind of request has its own
 * cap (2 at once, 8 waiting, the rest refused with 503 and Retry-After), so
 * a burst of text searches over 20,000 entries does not hold up a summary.
 */
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDashboard, type Dashboard } from '../../src/dashboard/index.js';
import { ApiError } from '../../src/dashboard/api.js';
import { requestKind, StoreApi } from '../../src/dashboard/store-api.js';
import type { StoreRetries } from '../../src/dashboard/store-retries.js';
import { ErrorStore } from '../../src/error-store/store.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { scratchDir } from '../error-store/support.js';

const dir = scratchDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = promisify(execFile);

/** Sends 30 text searches that match every entry and a summary, all at once; prints every answer in the order it came. */
const BURST_CLIENT = `
const http = require('node:http');
const base = process.argv[1];
const headers = { authorization: 'Bearer ' + process.argv[2] };
const answers = [];
const get = (what, path) => new Promise((resolve) => {
  http.get(base + path, { agent: false, headers }, (res) => {
    res.resume();
    res.on('end', () => { answers.push({ what, status: res.statusCode, retryAfter: res.headers['retry-after'] ?? null }); resolve(); });
  }).on('error', (e) => { answers.push({ what, status: 0, retryAfter: String(e) }); resolve(); });
});
const all = [];
for (let i = 0; i < 30; i++) all.push(get('search', 'api/entries?text=' + encodeURIComponent('stock for sku')));
all.push(get('summary', 'api/summary'));
Promise.all(all).then(() => process.stdout.write(JSON.stringify(answers)));
`;

const NOW = Date.parse('2026-03-02T12:00:00.000Z');
const ENTRIES = 20_000;
let n = 0;

/** Stores `count` entries in one statement (the full-text index fills through its trigger), far faster than ingesting them. */
function fill(store: ErrorStore, count: number): void {
  store.database
    .prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       INSERT INTO entries (key, error_queue, message_id, original_queue, endpoint, host, reason, error_name, message, top_frame, signature,
         failed_at, ingested_at, replay_count, status, version, headers, body)
       SELECT 'key-' || i, 'error-' || (i % 3), 'order-' || i, 'orders', 'ep', 'h', 'retries-exhausted', 'StockError',
         'no stock for sku ' || i || ' in warehouse ' || (i % 50), '', printf('%08x', i % 7), ? - i * 1000, ?, 0, 'failed', 1, '{}', x''
       FROM n`,
    )
    .run(count, NOW, NOW);
}

describe('store API under a flood of searches', () => {
  let clock: FakeClock;
  let store: ErrorStore;

  beforeEach(() => {
    clock = new FakeClock(NOW);
    store = ErrorStore.open(join(dir, `store-${++n}.db`), { clock });
    fill(store, ENTRIES);
  });
  afterEach(() => store.close());

  it('names each kind of request, with unknown paths as one kind', () => {
    expect(requestKind('/api/entries')).toBe('/api/entries');
    expect(requestKind('/api/entries/key-1')).toBe('/api/entries/:key');
    expect(requestKind('/api/jobs/j-1')).toBe('/api/jobs/:id');
    expect(requestKind('/api/nonsense/1')).toBe('other');
  });

  it('answers a summary while searches wait their turn: 2 at once, 8 waiting, the rest refused with Retry-After', async () => {
    const api = new StoreApi(store, clock, 1024, {} as StoreRetries);
    const done: string[] = [];
    const searches = Array.from({ length: 12 }, (_, i) =>
      api.get('/api/entries', new URLSearchParams({ text: `warehouse ${i}` })).then(
        (page) => {
          done.push('search');
          return { page: page as { total: number } };
        },
        (error: unknown) => ({ error }),
      ),
    );
    const summary = await api.get('/api/summary', new URLSearchParams());
    done.push('summary');
    expect(summary).toMatchObject({ failed: ENTRIES });
    // The summary came while searches still waited; it did not wait for them all.
    const atSummary = api.gateCounts('/api/entries');
    expect(atSummary.finished).toBeLessThanOrEqual(2);
    expect(atSummary.waiting).toBeGreaterThan(0);
    const results = await Promise.all(searches);
    const refused = results.flatMap((r) => ('error' in r ? [r.error as ApiError] : []));
    expect(refused).toHaveLength(2);
    expect(refused.every((e) => e instanceof ApiError && e.status === 503 && e.retryAfterSeconds === 1)).toBe(true);
    const answered = results.flatMap((r) => ('page' in r ? [r.page] : []));
    expect(answered.map((page) => page.total)).toEqual(Array.from({ length: 10 }, (_, i) => store.count({ text: `warehouse ${i}` })));
    expect(answered[0]!.total).toBe(ENTRIES / 50);
    expect(answered[1]!.total).toBe(11 * (ENTRIES / 50)); // warehouses 1 and 10 to 19
    expect(done.indexOf('summary')).toBeLessThan(done.length - 1);
    expect(api.gateCounts('/api/entries')).toEqual({ running: 0, waiting: 0, peakRunning: 2, finished: 10, refused: 2 });
    expect(api.gateCounts('/api/summary')).toMatchObject({ peakRunning: 1, finished: 1, refused: 0 });
  });

  it('over HTTP, from another process: each of a burst of searches is answered or refused with 503 and Retry-After, and the summary answered', async () => {
    const dashboard: Dashboard = await createDashboard({ transport: new SqliteTransport({ path: join(dir, `t-${n}.db`) }), store, clock });
    try {
      // The client runs in its own process: in this one, the server's work would hold up the client's sends too.
      const { stdout } = await run(process.execPath, ['-e', BURST_CLIENT, dashboard.url, dashboard.token], { timeout: 60_000 });
      const answers = JSON.parse(stdout) as { what: string; status: number; retryAfter: string | null }[];
      expect(answers.find((a) => a.what === 'summary')?.status).toBe(200);
      const searches = answers.filter((a) => a.what === 'search');
      expect(searches).toHaveLength(30);
      for (const a of searches) expect(a.status === 200 || (a.status === 503 && a.retryAfter === '1')).toBe(true);
      // How many were refused, and where the summary came, depend on how the requests arrive (the order is asserted above, on the API).
      expect(searches.filter((a) => a.status === 200).length).toBeGreaterThanOrEqual(10);
    } finally {
      await dashboard.close();
    }
  });
});
