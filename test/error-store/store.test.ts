import { existsSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorStore } from '../../src/error-store/store.js';
import { HEADER } from '../../src/headers/names.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { failureHeaders, scratchDir } from './support.js';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');
const stores: ErrorStore[] = [];
afterEach(() => {
  for (const s of stores.splice(0)) s.close();
});

function open(clock = new FakeClock(T0)): { store: ErrorStore; clock: FakeClock } {
  const store = ErrorStore.open(join(scratchDir(), 'errors.db'), { clock });
  stores.push(store);
  return { store, clock };
}

function entry(id: string, message: string, minute: number, extra: Record<string, string | number> = {}) {
  const at = new Date(T0 - 60 * 60_000 + minute * 60_000).toISOString();
  const { replayCount, ...rest } = extra;
  return {
    errorQueue: 'error',
    messageId: id,
    headers: { ...failureHeaders({ message, at, ...(replayCount === undefined ? {} : { replayCount: Number(replayCount) }) }), [HEADER.entryId]: `e-${id}-${minute}`, ...(rest as Record<string, string>) },
    body: Buffer.from(`{"id":"${id}"}`),
  };
}

describe('ErrorStore', () => {
  it('stores an entry once however often it is ingested, keyed by its entry id', async () => {
    const { store } = open();
    const batch = [entry('m1', 'db down', 1), entry('m2', 'db down', 2)];
    expect(await store.ingest(batch)).toEqual({ stored: 2, duplicates: 0, failedAgain: 0 });
    expect(await store.ingest([...batch, entry('m3', 'db down', 3)])).toEqual({ stored: 1, duplicates: 2, failedAgain: 0 });
    expect(store.count()).toBe(3);
    const one = store.get('e-m1-1')!;
    expect(one.messageId).toBe('m1');
    expect(Buffer.from(one.body).toString()).toBe('{"id":"m1"}');
    expect(one.headers[HEADER.failureMessage]).toBe('db down');
    expect(one.failedAt).toBe(T0 - 59 * 60_000);
    expect(one.status).toBe('failed');
  });

  it('derives a stable key for copies without an entry id, so a redelivered copy is a duplicate', async () => {
    const { store } = open();
    const copy = { errorQueue: 'error', messageId: 'plain', headers: failureHeaders({ message: 'x', at: '2026-11-23T09:00:00.000Z' }), body: Buffer.from('b') };
    await store.ingest([copy]);
    expect(await store.ingest([copy])).toMatchObject({ stored: 0, duplicates: 1 });
    expect(store.search().entries[0]!.key).toMatch(/^plain#[0-9a-f]{16}$/);
  });

  it('groups by failure signature with counts and first and last failure', async () => {
    const { store } = open();
    await store.ingest([entry('a', 'timeout after 30 ms', 5), entry('b', 'timeout after 45 ms', 9), entry('c', 'order 17 not found', 7)]);
    const groups = store.groups();
    expect(groups.map((g) => g.count)).toEqual([2, 1]);
    expect(groups[0]!.signature.message).toBe('timeout after <n> ms');
    expect(groups[0]!.firstFailedAt).toBe(T0 - 55 * 60_000);
    expect(groups[0]!.lastFailedAt).toBe(T0 - 51 * 60_000);
    expect(store.count({ signature: groups[1]!.signature.id })).toBe(1);
  });

  it('filters by text, error name, queue, endpoint and time, and pages by keyset in both orders', async () => {
    const { store } = open();
    const many = Array.from({ length: 25 }, (_, i) => entry(`m${i}`, i % 2 ? `card ${i} declined` : `db timeout ${i}`, i, i % 5 === 0 ? { [HEADER.failureErrorName]: 'TypeError' } : {}));
    await store.ingest(many);
    expect(store.count({ text: 'DECLINED' })).toBe(12);
    expect(store.count({ text: '%' })).toBe(0);
    expect(store.count({ errorName: 'TypeError' })).toBe(5);
    expect(store.count({ originalQueue: 'orders', endpoint: 'orders-endpoint' })).toBe(25);
    expect(store.count({ since: T0 - 50 * 60_000, until: T0 - 40 * 60_000 })).toBe(10);
    const seen: string[] = [];
    let after: string | undefined;
    do {
      const page = store.search({}, { limit: 7, ...(after ? { after } : {}) });
      seen.push(...page.entries.map((e) => e.messageId));
      after = page.next;
    } while (after);
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => `m${24 - i}`));
    expect(store.search({}, { sort: 'failed-asc', limit: 3 }).entries.map((e) => e.messageId)).toEqual(['m0', 'm1', 'm2']);
    expect(() => store.search({}, { after: 'nonsense' })).toThrow(/earlier call/);
    expect(() => store.count({ signature: 'zz' })).toThrow(/signature/);
  });

  it('counts failures per minute per group over the last hour', async () => {
    const { store } = open();
    await store.ingest([entry('a', 'timeout 1', 10), entry('b', 'timeout 2', 10), entry('c', 'timeout 3', 11), entry('d', 'bad input', 59)]);
    const rate = store.failureRate();
    expect(rate.bucketMs).toBe(60_000);
    expect(rate.series).toHaveLength(2);
    const [timeouts, bad] = rate.series;
    expect(timeouts!.total).toBe(3);
    expect(timeouts!.counts).toHaveLength(60);
    expect(timeouts!.counts[10]).toBe(2);
    expect(timeouts!.counts[11]).toBe(1);
    expect(bad!.counts[59]).toBe(1);
    expect(() => store.failureRate({ bucketMs: 1_000, since: 0, until: T0 })).toThrow(/1440/);
  });

  it('lets one claimant at a time hold an entry, and records the retry for history', async () => {
    const { store, clock } = open();
    await store.ingest([entry('a', 'x', 1), entry('b', 'x', 2)]);
    const keys = ['e-a-1', 'e-b-2'];
    expect(await store.claim(keys, 'op-1', clock.now() + 60_000)).toEqual(keys);
    expect(await store.claim(keys, 'op-2', clock.now() + 60_000)).toEqual([]);
    expect(await store.markRetried('e-a-1', 'op-2', { queue: 'orders', by: 'bob' })).toBe(false);
    expect(await store.markRetried('e-a-1', 'op-1', { queue: 'orders', by: 'alice' })).toBe(true);
    await store.releaseClaim('e-b-2', 'op-1');
    expect(store.get('e-b-2')!.status).toBe('failed');
    const retried = store.get('e-a-1')!;
    expect(retried).toMatchObject({ status: 'retried', retriedCount: 1, lastRetriedBy: 'alice', retriedTo: 'orders', lastRetriedAt: T0 });
    // A claim that ran out may be taken over.
    await store.claim(['e-b-2'], 'op-1', clock.now() + 1_000);
    await clock.advance(1_000);
    expect(await store.claim(['e-b-2'], 'op-2', clock.now() + 1_000)).toEqual(['e-b-2']);
  });

  it('marks a sent-back entry failed-again when its message comes back, and handled when told', async () => {
    const { store, clock } = open();
    await store.ingest([entry('a', 'x', 1), entry('b', 'x', 2)]);
    for (const key of ['e-a-1', 'e-b-2']) {
      await store.claim([key], 'op', clock.now() + 60_000);
      await store.markRetried(key, 'op', { queue: 'orders', by: 'cli' });
    }
    expect(await store.ingest([entry('a', 'x', 30, { replayCount: 1 })])).toEqual({ stored: 1, duplicates: 0, failedAgain: 1 });
    expect(await store.recordHandled(['b'])).toBe(1);
    expect(store.get('e-a-1')!.outcome).toBe('failed-again');
    expect(store.get('e-b-2')!.outcome).toBe('handled');
    const [group] = store.groups();
    expect(group).toMatchObject({ count: 1, retried: 2, handledAfterRetry: 1, failedAgainAfterRetry: 1 });
    expect(store.count({ status: 'any' })).toBe(3);
  });

  it('deletes by filter in chunks, keeping the story and dropping the body', async () => {
    const { store } = open();
    await store.ingest(Array.from({ length: 2_500 }, (_, i) => entry(`m${i}`, i < 2_100 ? 'gone' : 'keep', i % 60)));
    const before = store.changes().cursor;
    expect(await store.delete({ text: 'gone' })).toBe(2_100);
    expect(store.count()).toBe(400);
    const deleted = store.get('e-m0-0')!;
    expect(deleted.status).toBe('deleted');
    expect(deleted.body.byteLength).toBe(0);
    expect(await store.deleteOne('e-m0-0')).toBe(false);
    expect(await store.deleteOne('e-m2100-0')).toBe(true);
    const changes = store.changes(before, 1_000);
    expect(changes.entries).toHaveLength(1_000);
    expect(changes.more).toBe(true);
    const rest = store.changes(changes.cursor, 1_000);
    const last = store.changes(rest.cursor, 1_000);
    expect(changes.entries.length + rest.entries.length + last.entries.length).toBe(2_101);
    expect(last.more).toBe(false);
    expect(store.changes(last.cursor).entries).toEqual([]);
  });

  it('exports every selected entry in failure order, a page at a time', async () => {
    const { store } = open();
    await store.ingest(Array.from({ length: 1_203 }, (_, i) => entry(`m${i}`, 'x', i % 60)));
    const ids = [...store.export({}, 100)].map((e) => e.messageId);
    expect(ids).toHaveLength(1_203);
    expect(new Set(ids).size).toBe(1_203);
  });

  it('refuses a SQLite file that holds something else', () => {
    const file = join(scratchDir(), 'other.db');
    const other = new Database(file);
    other.exec('CREATE TABLE messages (seq INTEGER PRIMARY KEY)');
    other.close();
    expect(() => ErrorStore.open(file)).toThrow(/something else/);
    const junk = join(scratchDir(), 'junk.db');
    writeFileSync(junk, 'not a database at all, just text '.repeat(200));
    expect(() => ErrorStore.open(junk)).toThrow();
  });

  it('creates its file 0600 and refuses a symbolic link, which it never follows', () => {
    const dir = scratchDir();
    const file = join(dir, 'private.db');
    ErrorStore.open(file).close();
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const target = join(dir, 'elsewhere.db');
    const link = join(dir, 'planted.db');
    symlinkSync(target, link);
    expect(() => ErrorStore.open(link)).toThrow(/symbolic link/);
    expect(existsSync(target)).toBe(false);
  });
});
