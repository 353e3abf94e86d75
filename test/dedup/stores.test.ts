/**
 * Both deduplication stores fence their claims with a token (a slow copy's
 * abandon cannot delete the claim a second copy holds) and forget ids once
 * their window has passed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MemoryDeduplicationStore } from '../../src/dedup/memory-store.js';
import { SqliteDeduplicationStore } from '../../src/dedup/sqlite-store.js';
import type { DedupClaim, DeduplicationStore } from '../../src/dedup/types.js';

const outcome = (c: DedupClaim) => c.outcome;
const token = (c: DedupClaim) => (c.outcome === 'claimed' ? c.token : 'none');

const stores: [string, (windowMs: number) => { store: DeduplicationStore; done: () => void }][] = [
  ['memory', (windowMs) => ({ store: new MemoryDeduplicationStore(windowMs), done: () => undefined })],
  [
    'sqlite',
    (windowMs) => {
      const dir = mkdtempSync(join(tmpdir(), 'redeliver-dedup-'));
      const store = new SqliteDeduplicationStore({ path: join(dir, 'dedup.db'), windowMs });
      return {
        store,
        done: () => {
          store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  ],
];

describe.each(stores)('the %s deduplication store', (_name, make) => {
  it("a slow copy's abandon does not delete the claim a second copy took after the first claim expired", async () => {
    const { store, done } = make(60_000);
    const slow = await store.begin('x', 0, 100);
    const second = await store.begin('x', 200, 100);
    expect(outcome(slow)).toBe('claimed');
    expect(outcome(second)).toBe('claimed');
    expect(token(second)).not.toBe(token(slow));
    await store.abandon('x', token(slow));
    expect(outcome(await store.begin('x', 201, 100))).toBe('busy');
    await store.abandon('x', token(second));
    expect(outcome(await store.begin('x', 202, 100))).toBe('claimed');
    done();
  });

  it('a copy that completes remembers the id for the window, and a stale abandon does not undo it', async () => {
    const { store, done } = make(1_000);
    const a = await store.begin('y', 0, 100);
    await store.complete('y', token(a), 10);
    await store.abandon('y', token(a));
    expect(outcome(await store.begin('y', 500, 100))).toBe('duplicate');
    expect(outcome(await store.begin('y', 1_011, 100))).toBe('claimed');
    done();
  });
});

describe('eviction', () => {
  it('the memory store forgets handled ids once their window has passed', async () => {
    const store = new MemoryDeduplicationStore(1_000);
    for (let i = 0; i < 5_000; i++) await store.complete(`old-${i}`, token(await store.begin(`old-${i}`, 0, 100)), 0);
    for (let i = 0; i < 5_000; i++) await store.complete(`new-${i}`, token(await store.begin(`new-${i}`, 10_000, 100)), 10_000);
    expect(store.size).toBeLessThanOrEqual(5_000);
    expect(outcome(await store.begin('new-1', 10_500, 100))).toBe('duplicate');
  });

  it('the memory store forgets claims that expired without being completed', async () => {
    const store = new MemoryDeduplicationStore(1_000);
    for (let i = 0; i < 5_000; i++) await store.begin(`lost-${i}`, 0, 100);
    for (let i = 0; i < 5_000; i++) await store.begin(`live-${i}`, 10_000, 100);
    expect(store.size).toBeLessThanOrEqual(5_000);
  });

  it('the SQLite store deletes handled ids older than the window', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'redeliver-dedup-'));
    const path = join(dir, 'dedup.db');
    const store = new SqliteDeduplicationStore({ path, windowMs: 1_000 });
    for (let i = 0; i < 1_500; i++) await store.complete(`old-${i}`, token(await store.begin(`old-${i}`, 0, 100)), 0);
    for (let i = 0; i < 1_500; i++) await store.begin(`new-${i}`, 10_000, 100);
    store.close();
    const db = new Database(path, { readonly: true });
    const { n } = db.prepare("SELECT count(*) AS n FROM redeliver_dedup WHERE id LIKE 'old-%'").get() as { n: number };
    db.close();
    rmSync(dir, { recursive: true, force: true });
    expect(n).toBe(0);
  });

  it('the SQLite store prunes across processes: many short runs of fewer than 1 000 ids each leave no expired rows behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'redeliver-dedup-'));
    const path = join(dir, 'dedup.db');
    const windowMs = 1_000;
    const runs = 20;
    const last = (runs - 1) * 10_000;
    for (let run = 0; run < runs; run++) {
      // Each run is a process of its own, opening the file, handling 999 ids, and exiting.
      const store = new SqliteDeduplicationStore({ path, windowMs });
      const now = run * 10_000;
      for (let i = 0; i < 999; i++) await store.complete(`r${run}-${i}`, token(await store.begin(`r${run}-${i}`, now, 100)), now);
      store.close();
    }
    const db = new Database(path, { readonly: true });
    const expired = db.prepare('SELECT count(*) FROM redeliver_dedup WHERE at < ?').pluck().get(last - windowMs);
    db.close();
    rmSync(dir, { recursive: true, force: true });
    expect(expired).toBe(0);
  });
});
