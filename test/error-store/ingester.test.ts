import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { Ingester } from '../../src/error-store/ingester.js';
import { ErrorStore } from '../../src/error-store/store.js';
import { encodeReplayOutcome } from '../../src/operations/replay-outcome.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { recordingLogger } from '../support/recording-logger.js';
import { deadLetter, failureHeaders, scratchDir } from './support.js';

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

function setup() {
  const dir = scratchDir();
  const transport = new SqliteTransport({ path: join(dir, 'app.db') });
  const store = ErrorStore.open(join(dir, 'errors.db'));
  closers.push(() => transport.close(), () => store.close());
  return { dir, transport, store };
}

const messages = (n: number, prefix = 'm') =>
  Array.from({ length: n }, (_, i) => ({ id: `${prefix}${i}`, headers: failureHeaders({ message: i % 3 === 0 ? `card ${i} declined` : 'db timeout', at: new Date(Date.UTC(2026, 10, 23, 9, i % 60)).toISOString() }) }));

describe('Ingester', () => {
  it('moves every entry of an error queue into the store and empties the queue', async () => {
    const { transport, store } = setup();
    await deadLetter(transport, 'orders', 'error', messages(300));
    expect(await transport.errorQueue.count('error')).toBe(300);
    const ingester = new Ingester({ transport, store, batchSize: 64 });
    await ingester.start();
    await ingester.untilIdle({ idleMs: 100, pollMs: 50 });
    await ingester.stop();
    expect(await transport.errorQueue.count('error')).toBe(0);
    expect(store.count()).toBe(300);
    expect(ingester.stats).toMatchObject({ stored: 300, duplicates: 0 });
    expect(store.groups().map((g) => g.count)).toEqual([200, 100]);
    const [one] = store.search({ text: 'card 3 ' }).entries;
    expect(one).toMatchObject({ messageId: 'm3', originalQueue: 'orders', errorQueue: 'error' });
  });

  it('recognises copies it stored before a crash (committed, never acknowledged) and stores them once', async () => {
    const { transport, store } = setup();
    await deadLetter(transport, 'orders', 'error', messages(50));
    // The crash: the store committed a batch whose copies were never acknowledged.
    const held: Parameters<ErrorStore['ingest']>[0][number][] = [];
    const sub = await transport.consume('error', (d) => void held.push({ errorQueue: d.queue, messageId: d.id, headers: d.headers, body: d.body }), { prefetch: 20, leaseMs: 300 });
    while (held.length < 20) await new Promise((r) => setTimeout(r, 10));
    await store.ingest(held.slice(0, 20));
    await sub.close();
    await transport.close();
    // A fresh process ingests the whole queue again.
    const again = new SqliteTransport({ path: transport.path });
    closers.push(() => again.close());
    const ingester = new Ingester({ transport: again, store, batchSize: 16 });
    await ingester.start();
    await ingester.untilIdle({ idleMs: 100, pollMs: 50 });
    await ingester.stop();
    expect(store.count()).toBe(50);
    expect(ingester.stats.duplicates).toBe(20);
    expect(ingester.stats.stored).toBe(30);
    expect(await again.errorQueue.count('error')).toBe(0);
  }, 20_000);

  it('keeps the copies and tries again while the store is locked, losing nothing', async () => {
    const { transport, store } = setup();
    await deadLetter(transport, 'orders', 'error', messages(40));
    const logger = recordingLogger();
    const blocker = new Database(store.path);
    blocker.pragma('busy_timeout = 0');
    blocker.exec('BEGIN IMMEDIATE');
    const locked = ErrorStore.open(store.path, { busyTimeoutMs: 100 });
    closers.push(() => locked.close());
    const ingester = new Ingester({ transport, store: locked, batchSize: 40, logger });
    await ingester.start();
    await new Promise((r) => setTimeout(r, 600));
    expect(ingester.stats.commitFailures).toBeGreaterThan(0);
    expect(store.count()).toBe(0);
    blocker.exec('COMMIT');
    blocker.close();
    await ingester.untilIdle({ idleMs: 100, pollMs: 50 });
    await ingester.stop();
    expect(store.count()).toBe(40);
    expect(await transport.errorQueue.count('error')).toBe(0);
    expect(logger.lines.some((r) => r.level === 'error' && /trying again/.test(r.message))).toBe(true);
  }, 20_000);

  it('marks sent-back entries handled from the outcome records endpoints send, and drops records it cannot read', async () => {
    const { transport, store } = setup();
    await deadLetter(transport, 'orders', 'error', messages(3));
    const logger = recordingLogger();
    const first = new Ingester({ transport, store, batchSize: 10 });
    await first.start();
    await first.untilIdle({ idleMs: 100, pollMs: 50 });
    await first.stop();
    const keys = store.search().entries.map((e) => e.key);
    await store.claim(keys, 'op', Date.now() + 60_000);
    for (const key of keys) await store.markRetried(key, 'op', { queue: 'orders', by: 'test' });
    await transport.send('outcomes', encodeReplayOutcome({ kind: 'handled', messageId: 'm1', replayCount: 1, queue: 'orders', endpoint: 'orders', at: new Date().toISOString() }));
    await transport.send('outcomes', { id: 'junk', body: Buffer.from('not json'), headers: {} });
    const ingester = new Ingester({ transport, store, outcomeQueue: 'outcomes', logger });
    await ingester.start();
    while (ingester.stats.handled + ingester.stats.badOutcomes < 2) await new Promise((r) => setTimeout(r, 20));
    await ingester.stop();
    expect(ingester.stats).toMatchObject({ handled: 1, badOutcomes: 1 });
    expect(store.search({ status: 'retried' }).entries.filter((e) => e.outcome === 'handled').map((e) => e.messageId)).toEqual(['m1']);
    expect(logger.lines.some((l) => l.level === 'warn' && /outcome record/.test(l.message))).toBe(true);
    expect((await transport.inspection.queueDepths(['outcomes']))[0]!.ready).toBe(0);
    expect(() => new Ingester({ transport, store, outcomeQueue: 'error' })).toThrow(/outcomeQueue/);
  });

  it('validates its options', () => {
    const { transport, store } = setup();
    expect(() => new Ingester({ transport, store, errorQueues: [] })).toThrow(/errorQueues/);
    expect(() => new Ingester({ transport, store, batchSize: 0 })).toThrow(/batchSize/);
  });
});
