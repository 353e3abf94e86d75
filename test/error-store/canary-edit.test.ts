/**
 * Canary replay against a real SQLite transport, endpoint and ingester on a
 * fake clock; edit and retry.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { Ingester } from '../../src/error-store/ingester.js';
import { RetryJobs } from '../../src/error-store/retry-jobs.js';
import { editRequestId, listEdits } from '../../src/error-store/edit.js';
import { ErrorStore } from '../../src/error-store/store.js';
import { HEADER } from '../../src/headers/names.js';
import { UnrecoverableError } from '../../src/policy/errors.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import type { Transport } from '../../src/transport/types.js';
import { failureHeaders, scratchDir } from './support.js';

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

const OUTCOMES = 'orders.outcomes';

async function setup() {
  const dir = scratchDir();
  const clock = new FakeClock(Date.UTC(2026, 10, 23, 9));
  const transport = new SqliteTransport({ path: join(dir, 'app.db'), clock });
  const store = ErrorStore.open(join(dir, 'errors.db'), { clock });
  closers.push(() => transport.close(), () => store.close());
  await (await transport.consume('orders', () => undefined, { prefetch: 1 })).close();
  return { dir, clock, transport, store };
}

async function fill(store: ErrorStore, n: number) {
  await store.ingest(
    Array.from({ length: n }, (_, i) => ({
      errorQueue: 'error',
      messageId: `order-${i}`,
      headers: { ...failureHeaders({ message: 'payment service down', queue: 'orders' }), [HEADER.entryId]: `entry-${i}`, 'x-tenant': 'acme' },
      body: Buffer.from(JSON.stringify({ n: i })),
    })),
  );
}

describe('canary replay', () => {
  it('speeds up while sent-back messages are handled and stops by itself when they fail again; the rest stay failed', async () => {
    const { clock, transport, store } = await setup();
    await fill(store, 200);
    const HEALTHY = 12;
    let calls = 0;
    const endpoint = new Endpoint<{ n: number }>({
      name: 'orders',
      transport,
      clock,
      recoverability: { immediateRetries: 0, delayedRetries: 0 },
      replayOutcomeQueue: OUTCOMES,
      handler: () => {
        if (++calls > HEALTHY) throw new UnrecoverableError('payment service down again');
      },
    });
    await endpoint.start();
    const ingester = new Ingester({ transport, store, errorQueues: ['error'], outcomeQueue: OUTCOMES, clock, flushMs: 10 });
    await ingester.start();
    closers.push(() => ingester.stop(), () => endpoint.stop());

    const jobs = new RetryJobs({ store, transport, clock });
    const job = await jobs.create({ filter: { errorQueue: 'error' } }, { by: 'ops', canary: { startRate: 1, growth: 2, windowMs: 1_000 } });
    let view: Awaited<ReturnType<RetryJobs['run']>> | undefined;
    const progress: number[] = [];
    const lagging: string[] = [];
    const consistent = (v: NonNullable<typeof view>) => {
      // The canary's counters are read with the job's: never behind its totals.
      if (v.canary!.sent !== v.sent || v.canary!.handled + v.canary!.failedAgain > v.sent) lagging.push(`sent ${v.sent}: canary ${JSON.stringify(v.canary)}`);
    };
    void jobs
      .run(job.id, {
        onProgress: (v) => {
          progress.push(v.canary!.rate);
          consistent(v);
        },
      })
      .then((v) => (view = v));
    expect(await clock.runUntil(() => view !== undefined, 600_000)).toBe(true);

    expect(view!.state).toBe('stopped');
    expect(view!.stopReason).toMatch(/^\d+ of \d+ messages sent back failed again .*the cause is not fixed/);
    expect(view!.canary).toMatchObject({ handled: HEALTHY });
    consistent(view!);
    consistent(jobs.get(job.id)!);
    expect(lagging).toEqual([]);
    expect(view!.canary!.failedAgain).toBeGreaterThanOrEqual(1);
    // The rate grew while messages were handled.
    expect(Math.max(...progress)).toBeGreaterThanOrEqual(4);
    // Everything not sent stays failed; sent ones are retried, with their outcomes.
    const snapshot = { maxSeq: job.snapshotSeq };
    expect(view!.sent).toBeLessThan(200);
    expect(store.count({ ...snapshot, status: 'failed' })).toBe(200 - view!.sent);
    expect(store.count({ ...snapshot, status: 'retrying' })).toBe(0);
    expect(store.search({ ...snapshot, status: 'retried' }, { limit: 1000 }).entries.filter((e) => e.outcome === 'handled')).toHaveLength(HEALTHY);
  });

  it('stops when no outcome record arrives in time, and says what to check', async () => {
    const { clock, transport, store } = await setup();
    await fill(store, 20);
    const jobs = new RetryJobs({ store, transport, clock });
    const job = await jobs.create({ filter: {} }, { by: 'ops', canary: { outcomeTimeoutMs: 30_000 } });
    let view: Awaited<ReturnType<RetryJobs['run']>> | undefined;
    void jobs.run(job.id).then((v) => (view = v));
    expect(await clock.runUntil(() => view !== undefined, 120_000)).toBe(true);
    expect(view).toMatchObject({ state: 'stopped', sent: 1 });
    expect(view!.stopReason).toContain("no outcome record arrived: is an ingester running with --outcome-queue and the endpoint's replayOutcomeQueue set?");
    expect(store.count({ status: 'failed' })).toBe(19);
  });
});

describe('edit and retry', () => {
  it('sends an edited copy with the same message id, marks the original replaced, records the edit, and a repeat sends nothing', async () => {
    const { transport, store } = await setup();
    await fill(store, 2);
    const jobs = new RetryJobs({ store, transport });
    const body = Buffer.from('{"n":0,"fixed":true}');
    const headers = { 'x-tenant': 'acme-eu', 'x-note': 'hand-fixed' };
    const requestId = editRequestId('entry-0', body, headers);
    const first = await jobs.editAndRetry('entry-0', { body, headers, by: 'alice', requestId });
    expect(first).toEqual({ sentTo: 'orders', messageId: 'order-0', duplicate: false });
    const [second, third] = await Promise.all([
      jobs.editAndRetry('entry-0', { body, headers, by: 'alice', requestId }),
      jobs.editAndRetry('entry-0', { body, headers, by: 'alice', requestId }),
    ]);
    expect(second.duplicate && third.duplicate).toBe(true);
    const db = new Database(transport.path, { readonly: true });
    const rows = db.prepare<[], { id: string; body: Buffer; headers: string }>(`SELECT id, body, headers FROM messages WHERE queue = 'orders'`).all();
    db.close();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.id).toBe('order-0');
    expect(Buffer.from(rows[0]!.body).toString()).toBe('{"n":0,"fixed":true}');
    expect(JSON.parse(rows[0]!.headers)).toMatchObject({ 'x-tenant': 'acme-eu', 'x-note': 'hand-fixed', [HEADER.replayCount]: '1' });
    expect(store.get('entry-0')).toMatchObject({ status: 'replaced', lastRetriedBy: 'alice', retriedTo: 'orders' });
    const [edit] = listEdits({ store }, 'entry-0');
    expect(edit).toMatchObject({ requestId, by: 'alice', sentTo: 'orders', messageId: 'order-0', bodySizeBefore: 7, bodySizeAfter: body.length });
    expect(edit!.changedHeaders).toEqual({ 'x-tenant': ['acme', 'acme-eu'], 'x-note': [null, 'hand-fixed'] });
    expect(Buffer.from(edit!.bodyBefore!).toString()).toBe('{"n":0}');
    // Replaced is final: another edit is refused with a clear error.
    await expect(jobs.editAndRetry('entry-0', { body: Buffer.from('{}'), by: 'bob', requestId: 'other' })).rejects.toThrow(
      'entry entry-0 is replaced (by alice): only a failed entry can be edited and retried',
    );
    // A refused destination sends nothing and leaves the entry failed.
    await expect(jobs.editAndRetry('entry-1', { body: Buffer.from('{}'), by: 'bob', requestId: 'r2' }, { to: 'nowhere' })).rejects.toThrow("no queue 'nowhere' exists");
    expect(store.get('entry-1')!.status).toBe('failed');
  });

  it('the same edit submitted from two processes (two store connections) is sent once; the second answers with the first one\'s outcome', async () => {
    const { transport, store } = await setup();
    await fill(store, 1);
    const other = ErrorStore.open(store.path);
    closers.push(() => other.close());
    const body = Buffer.from('{"n":0,"fixed":true}');
    const requestId = editRequestId('entry-0', body, undefined);
    const results = await Promise.all([
      new RetryJobs({ store, transport }).editAndRetry('entry-0', { body, by: 'alice', requestId }),
      new RetryJobs({ store: other, transport }).editAndRetry('entry-0', { body, by: 'alice', requestId }),
    ]);
    expect(results.map((r) => r.duplicate).sort()).toEqual([false, true]);
    expect(results.every((r) => r.sentTo === 'orders' && r.messageId === 'order-0')).toBe(true);
    const db = new Database(transport.path, { readonly: true });
    const copies = db.prepare<[], number>(`SELECT count(*) FROM messages WHERE queue = 'orders'`).pluck(true).get();
    db.close();
    expect(copies).toBe(1);
    expect(listEdits({ store: other }, 'entry-0')).toHaveLength(1);
  });

  it('an edit whose send failed is recorded as failed; the same request id tried again sends it', async () => {
    const { transport, store } = await setup();
    await fill(store, 1);
    let down = true;
    const flaky: Transport = Object.assign(Object.create(transport) as Transport, {
      send: (queue: string, message: Parameters<Transport['send']>[1]) => (down ? Promise.reject(new Error('connection refused')) : transport.send(queue, message)),
    });
    Object.defineProperty(flaky, 'inspection', { get: () => transport.inspection });
    const jobs = new RetryJobs({ store, transport: flaky });
    const edit = { body: Buffer.from('{}'), by: 'alice', requestId: 'r-retry' };
    await expect(jobs.editAndRetry('entry-0', edit)).rejects.toThrow('connection refused');
    expect(store.database.prepare(`SELECT state, error FROM edits WHERE request_id = 'r-retry'`).get()).toEqual({ state: 'failed', error: 'connection refused' });
    expect(store.get('entry-0')!.status).toBe('failed');
    expect(listEdits({ store }, 'entry-0')).toEqual([]);
    down = false;
    expect(await jobs.editAndRetry('entry-0', edit)).toEqual({ sentTo: 'orders', messageId: 'order-0', duplicate: false });
    expect(listEdits({ store }, 'entry-0')).toHaveLength(1);
  });
});
