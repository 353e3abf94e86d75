/**
 * The dashboard API in store mode, against a real error store file: groups
 * with retry history, filters, keyset pages, entry detail with every
 * failure of the message, failure rates, live changes, delete with
 * confirmation, and the dashboard ingesting a SQLite transport's error
 * queue itself.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createDashboard, DashboardOptionError, type Dashboard } from '../../src/dashboard/index.js';
import { ErrorStore } from '../../src/error-store/store.js';
import type { IngestEntry } from '../../src/error-store/types.js';
import { HEADER } from '../../src/headers/names.js';
import { validationIssuesHeader } from '../../src/headers/validation-issues.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { deadLetter, failureHeaders, scratchDir } from '../error-store/support.js';
import { bearer, csrfOf, operatorRequest, postHeaders, request as rawRequest, signIn, waitFor } from './support.js';

const dir = scratchDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const NOW = Date.parse('2026-03-02T12:00:00.000Z');
let n = 0;

function entry(id: string, failure: Parameters<typeof failureHeaders>[0], body = `{"id":"${id}"}`): IngestEntry {
  return { errorQueue: 'error', messageId: id, headers: failureHeaders(failure), body: Buffer.from(body) };
}

describe('dashboard in store mode', () => {
  let store: ErrorStore;
  let clock: FakeClock;
  let dashboard: Dashboard;
  /** Requests of the dashboard's operator, who has its token. */
  const request = operatorRequest(() => dashboard.token);

  beforeEach(async () => {
    clock = new FakeClock(NOW);
    store = ErrorStore.open(join(dir, `store-${++n}.db`), { clock });
    const minute = (m: number) => new Date(NOW - m * 60_000).toISOString();
    await store.ingest([
      ...[1, 2, 3, 4, 5].map((i) => entry(`stock-${i}`, { errorName: 'StockError', message: `no stock for sku ${i}`, at: minute(i), queue: 'orders', endpoint: 'orders-ep' })),
      ...[1, 2].map((i) => entry(`pay-${i}`, { errorName: 'PaymentDeclined', message: `card ${i} declined`, at: minute(30 + i), queue: 'payments', endpoint: 'pay-ep' })),
    ]);
    dashboard = await createDashboard({ transport: new SqliteTransport({ path: join(dir, `t-${n}.db`) }), store, clock });
  });

  afterEach(async () => {
    await dashboard.close();
    store.close();
  });

  const get = async (path: string) => {
    const res = await request(`${dashboard.url}${path}`);
    return { status: res.status, body: res.json() };
  };

  it('lists groups with their retry history, largest first', async () => {
    const stock = store.search({ errorName: 'StockError' }, { limit: 1 }).entries[0]!;
    const [claimed] = await store.claim([stock.key], 'test', NOW + 60_000);
    await store.markRetried(claimed!, 'test', { queue: 'orders', by: 'tester' });
    await store.recordHandled([stock.messageId]);
    const { status, body } = await get('api/groups');
    expect(status).toBe(200);
    expect(body.groups.map((g: any) => [g.signature.errorName, g.count, g.retried, g.handledAfterRetry, g.failedAgainAfterRetry])).toEqual([
      ['StockError', 4, 1, 1, 0],
      ['PaymentDeclined', 2, 0, 0, 0],
    ]);
  });

  it('filters, searches and pages by keyset', async () => {
    expect((await get('api/entries?text=SKU%203')).body.entries.map((e: any) => e.messageId)).toEqual(['stock-3']);
    expect((await get('api/entries?originalQueue=payments')).body.total).toBe(2);
    expect((await get('api/entries?endpoint=orders-ep&errorName=StockError')).body.total).toBe(5);
    const since = new Date(NOW - 3.5 * 60_000).toISOString();
    expect((await get(`api/entries?since=${since}`)).body.entries.map((e: any) => e.messageId)).toEqual(['stock-1', 'stock-2', 'stock-3']);
    const group = (await get('api/groups')).body.groups[1].signature.id;
    expect((await get(`api/entries?group=${group}`)).body.entries.map((e: any) => e.messageId)).toEqual(['pay-1', 'pay-2']);

    const seen: string[] = [];
    let after = '';
    for (;;) {
      const page = (await get(`api/entries?limit=3&sort=failed-asc${after ? `&after=${after}` : ''}`)).body;
      expect(page.total).toBe(7);
      seen.push(...page.entries.map((e: any) => e.messageId));
      if (!page.next) break;
      after = encodeURIComponent(page.next);
    }
    expect(seen).toEqual(['pay-2', 'pay-1', 'stock-5', 'stock-4', 'stock-3', 'stock-2', 'stock-1']);

    expect(await get('api/entries?status=lost')).toMatchObject({ status: 400, body: { error: expect.stringContaining('status') } });
    expect(await get('api/entries?since=yesterday')).toMatchObject({ status: 400, body: { error: expect.stringContaining('since') } });
    expect(await get('api/entries?after=nonsense')).toMatchObject({ status: 400 });
  });

  it('shows one entry with its store history and every failure of the message', async () => {
    const first = store.search({ text: 'stock-2' }).entries[0]!;
    const [key] = await store.claim([first.key], 'test', NOW + 60_000);
    await store.markRetried(key!, 'test', { queue: 'orders', by: 'alice' });
    clock.advance(60_000);
    await store.ingest([entry('stock-2', { errorName: 'StockError', message: 'no stock for sku 2', replayCount: 1, at: new Date(NOW + 30_000).toISOString() })]);
    const latest = store.search({ text: 'stock-2' }).entries[0]!;
    const { body } = await get(`api/entries/${encodeURIComponent(first.key)}`);
    expect(body.entry).toMatchObject({ messageId: 'stock-2', status: 'retried' });
    expect(body.store).toMatchObject({ retriedCount: 1, lastRetriedBy: 'alice', retriedTo: 'orders', outcome: 'failed-again' });
    expect(body.occurrences.map((o: any) => o.key)).toEqual([first.key, latest.key]);
    // Opening one entry reads that entry's body only, not those of its other occurrences.
    const reads: string[] = [];
    const get1 = store.get.bind(store);
    store.get = (k: string) => (reads.push(k), get1(k));
    try {
      expect((await get(`api/entries/${encodeURIComponent(first.key)}`)).status).toBe(200);
    } finally {
      store.get = get1;
    }
    expect(reads).toEqual([first.key]);
    expect(body.body.text).toBe('{"id":"stock-2"}');
    expect(body.failure.message).toBe('no stock for sku 2');
    expect((await get('api/entries/no-such-key')).status).toBe(404);
  });

  it("shows an entry's validation issues, one path: message line each, and none for an entry without them", async () => {
    const issues = [{ path: ['lines', 0, 'qty'], message: 'Too small: expected number to be >0' }, { path: [], message: '<b>not bold</b>' }];
    const invalid = entry('invalid-1', { errorName: 'ValidationError', message: 'the body failed its schema' });
    await store.ingest([{ ...invalid, headers: { ...invalid.headers, [HEADER.validationIssues]: validationIssuesHeader(issues) } }]);
    const keyOf = (id: string) => encodeURIComponent(store.search({ text: id }).entries[0]!.key);
    expect((await get(`api/entries/${keyOf('invalid-1')}`)).body.validationIssues).toEqual(['lines[0].qty: Too small: expected number to be >0', '(body): <b>not bold</b>']);
    expect((await get(`api/entries/${keyOf('stock-1')}`)).body.validationIssues).toEqual([]);
  });

  it('charts failures per minute per group over the last hour and day', async () => {
    const hour = (await get('api/failure-rate')).body;
    expect(hour.bucketMs).toBe(60_000);
    expect(hour.series.map((s: any) => [s.errorName, s.total, s.counts.length])).toEqual([
      ['StockError', 5, 60],
      ['PaymentDeclined', 2, 60],
    ]);
    // Five stock failures, one a minute, in the last five minutes of the hour (the last bucket holds the one a minute ago).
    expect(hour.series[0].counts.slice(-6)).toEqual([0, 1, 1, 1, 1, 1]);
    const day = (await get('api/failure-rate?range=day&errorName=PaymentDeclined')).body;
    expect(day.series.map((s: any) => [s.errorName, s.total, s.counts.length])).toEqual([['PaymentDeclined', 2, 1440]]);
    expect((await get('api/failure-rate?range=week')).status).toBe(400);
  });

  it('reports changes after a cursor, so the page updates rows without reading everything again', async () => {
    const { cursor } = (await get('api/changes')).body;
    expect((await get(`api/changes?cursor=${encodeURIComponent(cursor)}`)).body.entries).toEqual([]);
    await store.ingest([entry('late-1', { errorName: 'StockError', message: 'no stock for sku 9' })]);
    const victim = store.search({ text: 'pay-1' }).entries[0]!;
    await store.deleteOne(victim.key, 'tester');
    const changes = (await get(`api/changes?cursor=${encodeURIComponent(cursor)}`)).body;
    expect(changes.entries.map((e: any) => [e.messageId, e.status])).toEqual([
      ['late-1', 'failed'],
      ['pay-1', 'deleted'],
    ]);
    expect((await get(`api/changes?cursor=${encodeURIComponent(changes.cursor)}`)).body.entries).toEqual([]);
    expect((await get('api/summary')).body.failed).toBe(7);
  });

  it('deletes one entry (recording who and when), and a selection only with a matching confirmation, held to its snapshot', async () => {
    const csrf = await csrfOf(dashboard.url, bearer(dashboard.token));
    const post = async (body: unknown) => {
      const res = await request(`${dashboard.url}api/delete`, { method: 'POST', headers: postHeaders(dashboard.url, csrf), body: JSON.stringify(body) });
      return { status: res.status, body: res.json() };
    };
    const one = store.search({ text: 'pay-2' }).entries[0]!;
    expect(await post({ key: one.key })).toEqual({ status: 200, body: { deleted: 1 } });
    expect(await post({ key: one.key })).toEqual({ status: 200, body: { deleted: 0 } });
    expect((await get(`api/entries/${encodeURIComponent(one.key)}`)).body.store).toMatchObject({ deletedAt: new Date(NOW).toISOString(), deletedBy: expect.stringMatching(/^dashboard (token|session-[0-9a-f]{8})$/) });

    const count = (await get('api/count?errorName=StockError')).body;
    expect(count.count).toBe(5);
    // An entry that arrives after the operator saw the count is not deleted with the rest.
    await store.ingest([entry('late-2', { errorName: 'StockError', message: 'no stock for sku 7' })]);
    expect((await post({ filter: { errorName: 'StockError' }, maxSeq: count.maxSeq })).status).toBe(400);
    expect((await post({ filter: { errorName: 'StockError' }, maxSeq: count.maxSeq, confirm: 4 })).status).toBe(409);
    expect(await post({ filter: { errorName: 'StockError' }, maxSeq: count.maxSeq, confirm: 5 })).toEqual({ status: 200, body: { deleted: 5 } });
    expect(store.search({ errorName: 'StockError' }).entries.map((e) => e.messageId)).toEqual(['late-2']);
    // Without the page's CSRF token, nothing is deleted.
    const refused = await request(`${dashboard.url}api/delete`, { method: 'POST', headers: { ...postHeaders(dashboard.url, csrf), 'X-Redeliver-CSRF': 'wrong' }, body: JSON.stringify({ key: 'x' }) });
    expect(refused.status).toBe(403);
  });
});

describe('dashboard store mode: retries', () => {
  it('runs a retry job in the background and refuses a destination that does not exist', async () => {
    const store = ErrorStore.open(join(dir, 'jobs.db'));
    const transport = new SqliteTransport({ path: join(dir, 'jobs-transport.db'), pollIntervalMs: 20 });
    await (await transport.consume('orders', (d) => void d.release(), { prefetch: 1 })).close();
    await store.ingest([
      ...[1, 2, 3].map((i) => entry(`o-${i}`, { message: `boom ${i}`, queue: 'orders' })),
      entry('lost-1', { message: 'nowhere', queue: 'no-such-queue' }),
    ]);
    const dashboard = await createDashboard({ transport, store });
    const request = operatorRequest(() => dashboard.token);
    try {
      const csrf = await csrfOf(dashboard.url, bearer(dashboard.token));
      const post = async (path: string, body: unknown) => {
        const res = await request(`${dashboard.url}${path}`, { method: 'POST', headers: postHeaders(dashboard.url, csrf), body: JSON.stringify(body) });
        return { status: res.status, body: res.json() };
      };
      const { count, maxSeq } = (await request(`${dashboard.url}api/count?originalQueue=orders`)).json();
      expect(count).toBe(3);
      const started = await post('api/jobs', { filter: { originalQueue: 'orders' }, maxSeq, ratePerSecond: 1000 });
      expect(started).toMatchObject({ status: 200, body: { total: 3, done: false } });
      await waitFor(async () => (await request(`${dashboard.url}api/jobs/${started.body.id}`)).json().done === true, 10_000, 'the job to finish');
      expect((await request(`${dashboard.url}api/jobs/${started.body.id}`)).json()).toMatchObject({ state: 'done', sent: 3, total: 3 });
      // GET /api/jobs lists the latest jobs, as documented; other methods than GET, HEAD and POST are refused.
      const listed = await request(`${dashboard.url}api/jobs`);
      expect(listed.status).toBe(200);
      expect(listed.json().jobs).toEqual([expect.objectContaining({ id: started.body.id, state: 'done', sent: 3 })]);
      const put = await request(`${dashboard.url}api/jobs`, { method: 'PUT' });
      expect([put.status, put.headers.allow]).toEqual([405, 'GET, HEAD, POST']);
      expect((await transport.inspection!.queueDepths(['orders']))[0]!.ready).toBe(3);

      const lost = store.search({ text: 'lost-1' }).entries[0]!;
      const edit = await post('api/edit-retry', { key: lost.key, requestId: 'r-1', body: '{}' });
      expect(edit.status).toBe(409);
      expect(edit.body.error).toContain('no-such-queue');
      expect(store.get(lost.key)!.status).toBe('failed');
      expect((await post('api/jobs', { filter: { text: 'x' } })).status).toBe(400);
      expect((await request(`${dashboard.url}api/jobs/no-such-job`)).status).toBe(404);
    } finally {
      await dashboard.close();
      await transport.close();
      store.close();
    }
  });

  it('records who sent an entry back: the signed-in session (a name that gives nothing away), or the token', async () => {
    const store = ErrorStore.open(join(dir, 'who.db'));
    const transport = new SqliteTransport({ path: join(dir, 'who-transport.db'), pollIntervalMs: 20 });
    await (await transport.consume('orders', (d) => void d.release(), { prefetch: 1 })).close();
    await store.ingest([1, 2, 3].map((i) => entry(`w-${i}`, { message: `boom ${i}`, queue: 'orders' })));
    const [first, second, third] = [1, 2, 3].map((i) => store.search({ text: `w-${i}` }).entries[0]!.key);
    const dashboard = await createDashboard({ transport, store });
    try {
      const retryAs = async (headers: Record<string, string>, key: string) => {
        const csrf = await csrfOf(dashboard.url, headers);
        const res = await rawRequest(`${dashboard.url}api/jobs`, { method: 'POST', headers: { ...postHeaders(dashboard.url, csrf), ...headers }, body: JSON.stringify({ key }) });
        expect(res.status).toBe(200);
        await waitFor(() => store.get(key)!.status === 'retried', 10_000, 'the entry to be sent back');
        return store.get(key)!.lastRetriedBy;
      };
      const alice = { Cookie: await signIn(dashboard.url, dashboard.token) };
      const bob = { Cookie: await signIn(dashboard.url, dashboard.token) };
      const byAlice = await retryAs(alice, first!);
      expect(byAlice).toMatch(/^dashboard session-[0-9a-f]{8}$/);
      const byBob = await retryAs(bob, second!);
      expect(byBob).toMatch(/^dashboard session-[0-9a-f]{8}$/);
      expect(byBob).not.toBe(byAlice);
      expect(await retryAs(bearer(dashboard.token), third!)).toBe('dashboard token');
    } finally {
      await dashboard.close();
      await transport.close();
      store.close();
    }
  });
});

describe('dashboard store options', () => {
  it('refuses ingest without a store, and a store of the wrong type', async () => {
    const transport = new SqliteTransport({ path: join(dir, 'options.db') });
    try {
      await expect(createDashboard({ transport, ingest: true })).rejects.toThrow(DashboardOptionError);
      await expect(createDashboard({ transport, store: 42 as never })).rejects.toThrow(/store must be/);
    } finally {
      await transport.close();
    }
  });

  it('ingests the error queue itself when asked, and stops ingesting on close', async () => {
    const transport = new SqliteTransport({ path: join(dir, 'ingest-transport.db'), pollIntervalMs: 20 });
    const path = join(dir, 'ingest-store.db');
    const dashboard = await createDashboard({ transport, store: path, ingest: true });
    const request = operatorRequest(() => dashboard.token);
    try {
      await deadLetter(transport, 'orders', 'error', [1, 2, 3].map((i) => ({ id: `m-${i}`, headers: failureHeaders({ message: `boom ${i}` }) })));
      await waitFor(async () => (await request(`${dashboard.url}api/summary`)).json().failed === 3, 15_000, 'three entries ingested');
      expect(await transport.errorQueue!.count('error')).toBe(0);
    } finally {
      await dashboard.close();
    }
    // Closed: the store file was opened by the dashboard and is closed; entries sent now stay in the queue.
    await deadLetter(transport, 'orders', 'error', [{ id: 'm-4', headers: failureHeaders({ message: 'boom 4' }) }]);
    await new Promise((r) => setTimeout(r, 300));
    expect(await transport.errorQueue!.count('error')).toBe(1);
    const store = ErrorStore.open(path);
    expect(store.count()).toBe(3);
    store.close();
    await transport.close();
  });
});
