import { existsSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { listEdits } from '../../src/error-store/edit.js';
import { RetryJobs } from '../../src/error-store/retry-jobs.js';
import { SHORT_TEXT_WINDOW } from '../../src/error-store/filter.js';
import { ERROR_STORE_SCHEMA_VERSION } from '../../src/error-store/schema.js';
import { ErrorStore } from '../../src/error-store/store.js';
import type { Transport } from '../../src/transport/types.js';
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

  it('finds text through the full-text index as a case-insensitive substring, and short text among the newest entries only', async () => {
    const { store } = open();
    await store.ingest([
      entry('order-0042', 'card "visa" declined by issuer', 1),
      entry('order-0043', 'db timeout after 30 ms', 2, { [HEADER.failureErrorName]: 'GatewayTimeout' }),
      entry('order-0044', '100% of quota used', 3),
    ]);
    const found = (text: string) => store.search({ text }).entries.map((e) => e.messageId).sort();
    expect(found('DECLINED BY')).toEqual(['order-0042']); // message, across a space
    expect(found('"visa"')).toEqual(['order-0042']); // quotes are text, not query syntax
    expect(found('waytime')).toEqual(['order-0043']); // error name
    expect(found('der-004')).toEqual(['order-0042', 'order-0043', 'order-0044']); // message id
    expect(found('e-order-0044')).toEqual(['order-0044']); // key
    expect(found('0% o')).toEqual(['order-0044']);
    expect(found('visa declined')).toEqual([]);
    expect(found('ms')).toEqual(['order-0043']); // two characters: LIKE over the newest entries
    expect(found('%')).toEqual(['order-0044']);
    expect(store.count({ text: 'order' })).toBe(3);
    // Short text reads only the newest SHORT_TEXT_WINDOW entries: an older match is not found; long text is.
    fill(store, SHORT_TEXT_WINDOW, 'filler');
    expect(found('ms')).toEqual([]);
    expect(store.count({ text: 'db timeout', status: 'any' })).toBe(1);
    expect(store.count({ text: 'ms', maxSeq: 3 })).toBe(1); // counted back from the snapshot of a bulk action
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

  it('deletes by filter in chunks, keeping the story, dropping the body, and recording who deleted when', async () => {
    const { store, clock } = open();
    await store.ingest(Array.from({ length: 2_500 }, (_, i) => entry(`m${i}`, i < 2_100 ? 'gone' : 'keep', i % 60)));
    const before = store.changes().cursor;
    await expect(store.delete({ text: 'gone' }, ' ')).rejects.toThrow(/by must name who/);
    expect(await store.delete({ text: 'gone' }, 'cli:alice')).toBe(2_100);
    expect(store.count()).toBe(400);
    const deleted = store.get('e-m0-0')!;
    expect(deleted).toMatchObject({ status: 'deleted', deletedAt: T0, deletedBy: 'cli:alice' });
    expect(deleted.body.byteLength).toBe(0);
    await clock.advance(1_000);
    expect(await store.deleteOne('e-m0-0', 'dashboard')).toBe(false);
    expect(store.get('e-m0-0')).toMatchObject({ deletedAt: T0, deletedBy: 'cli:alice' });
    expect(await store.deleteOne('e-m2100-0', 'dashboard')).toBe(true);
    expect(store.get('e-m2100-0')).toMatchObject({ status: 'deleted', deletedAt: T0 + 1_000, deletedBy: 'dashboard' });
    expect(store.get('e-m2101-1')).not.toHaveProperty('deletedBy');
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

  it('opens a store made by the first layout (schema version 1): migrates it, keeping entries, jobs and edits', async () => {
    const file = join(scratchDir(), 'v1.db');
    const old = new Database(file);
    old.exec(V1_LAYOUT);
    old.pragma('user_version = 1');
    old.close();
    const store = ErrorStore.open(file, { clock: new FakeClock(T0) });
    stores.push(store);
    expect(store.database.pragma('user_version', { simple: true })).toBe(ERROR_STORE_SCHEMA_VERSION);
    const columns = (table: string) => store.database.prepare<[string], string>('SELECT name FROM pragma_table_info(?)').pluck(true).all(table);
    expect(columns('retry_jobs')).toEqual(expect.arrayContaining(['run_id', 'lease_until']));
    expect(columns('edits')).toEqual(expect.arrayContaining(['state', 'until', 'error']));
    expect(columns('entries')).toEqual(expect.arrayContaining(['deleted_at', 'deleted_by']));
    expect(store.get('e-1')).toMatchObject({ messageId: 'm-1', status: 'failed' });
    const jobs = new RetryJobs({ store, transport: {} as Transport });
    expect(jobs.get('job-old')).toMatchObject({ state: 'stopped', total: 1 });
    expect(listEdits({ store })).toMatchObject([{ requestId: 'r-1', key: 'e-0', sentTo: 'orders' }]);
    // A store without the retry tables (never retried from) migrates too, and reopening changes nothing.
    const bare = join(scratchDir(), 'v1-bare.db');
    const db = new Database(bare);
    db.exec(V1_LAYOUT.slice(0, V1_LAYOUT.indexOf('CREATE TABLE retry_jobs')));
    db.pragma('user_version = 1');
    db.close();
    ErrorStore.open(bare).close();
    const again = ErrorStore.open(bare);
    stores.push(again);
    expect(new RetryJobs({ store: again, transport: {} as Transport }).list()).toEqual([]);
  });

  it('opens a store of schema version 2: fills the full-text index from the entries it holds, keeps it in step after, and records deletions', async () => {
    const file = join(scratchDir(), 'v2.db');
    const made = ErrorStore.open(file, { clock: new FakeClock(T0) });
    await made.ingest([entry('m1', 'card declined', 1)]);
    // Back to version 2: no index, no triggers; an entry stored by that build.
    made.database.exec(`DROP TRIGGER entries_text_delete; DROP TRIGGER entries_text_update; DROP TABLE entries_text; DELETE FROM meta WHERE key = 'text_indexed';
      ALTER TABLE entries DROP COLUMN deleted_at; ALTER TABLE entries DROP COLUMN deleted_by`);
    made.database.pragma('user_version = 2');
    made.close();
    const v2 = new Database(file);
    v2.prepare(`INSERT INTO entries SELECT NULL, 'e-m2', error_queue, 'm2', original_queue, endpoint, host, reason, error_name, 'db timeout', top_frame, signature,
      failed_at, ingested_at, replay_count, status, retried_count, last_retried_at, last_retried_by, retried_to, outcome, outcome_at, claim, claim_until, version, headers, body FROM entries`).run();
    v2.close();
    const store = ErrorStore.open(file, { clock: new FakeClock(T0) });
    stores.push(store);
    expect(store.database.pragma('user_version', { simple: true })).toBe(ERROR_STORE_SCHEMA_VERSION);
    expect(store.search({ text: 'declined' }).entries.map((e) => e.messageId)).toEqual(['m1']);
    expect(store.search({ text: 'timeout' }).entries.map((e) => e.messageId)).toEqual(['m2']);
    await store.ingest([entry('m3', 'card declined again', 3)]);
    expect(store.count({ text: 'declined' })).toBe(2);
    expect(await store.deleteOne('e-m2', 'cli:alice')).toBe(true);
    expect(store.get('e-m2')).toMatchObject({ deletedAt: T0, deletedBy: 'cli:alice' });
  });

  it('refuses a store from a newer redeliver, saying which version it has', () => {
    const file = join(scratchDir(), 'v99.db');
    const db = new Database(file);
    db.exec('CREATE TABLE entries (seq INTEGER PRIMARY KEY)');
    db.pragma('user_version = 99');
    db.close();
    expect(() => ErrorStore.open(file)).toThrow(`ErrorStore: ${file} has schema version 99, newer than this redeliver's ${ERROR_STORE_SCHEMA_VERSION}; upgrade redeliver`);
  });
});

/** Stores `count` entries of `message` in one statement, far faster than ingesting them. */
function fill(store: ErrorStore, count: number, message: string): void {
  store.database
    .prepare(
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
       INSERT INTO entries (key, error_queue, message_id, original_queue, endpoint, host, reason, error_name, message, top_frame, signature,
         failed_at, ingested_at, replay_count, status, version, headers, body)
       SELECT 'fill-' || i, 'error', 'fill-' || i, 'orders', 'ep', 'h', 'retries-exhausted', 'Error', ?, '', '0000000' || (i % 2), ?, ?, 0, 'failed', 1, '{}', x''
       FROM n`,
    )
    .run(count, message, T0 - 30 * 60_000, T0);
}

/** The tables as the first layout (schema version 1) made them, with one entry, one job and one edit. */
const V1_LAYOUT = `
CREATE TABLE entries (
  seq INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, error_queue TEXT NOT NULL, message_id TEXT NOT NULL, original_queue TEXT NOT NULL,
  endpoint TEXT NOT NULL, host TEXT NOT NULL, reason TEXT NOT NULL, error_name TEXT NOT NULL, message TEXT NOT NULL, top_frame TEXT NOT NULL,
  signature TEXT NOT NULL, failed_at INTEGER NOT NULL, ingested_at INTEGER NOT NULL, replay_count INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('failed', 'retrying', 'retried', 'replaced', 'deleted')),
  retried_count INTEGER NOT NULL DEFAULT 0, last_retried_at INTEGER, last_retried_by TEXT, retried_to TEXT,
  outcome TEXT CHECK (outcome IN ('handled', 'failed-again')), outcome_at INTEGER, claim TEXT, claim_until INTEGER,
  version INTEGER NOT NULL, headers TEXT NOT NULL, body BLOB NOT NULL
);
CREATE INDEX entries_by_time ON entries (status, failed_at);
CREATE INDEX entries_by_group ON entries (status, signature, failed_at);
CREATE INDEX entries_by_queue ON entries (error_queue, status, failed_at);
CREATE INDEX entries_by_message ON entries (message_id);
CREATE INDEX entries_by_version ON entries (version);
CREATE INDEX entries_retried ON entries (signature, outcome) WHERE retried_count > 0;
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('version', 2);
INSERT INTO entries (key, error_queue, message_id, original_queue, endpoint, host, reason, error_name, message, top_frame, signature,
  failed_at, ingested_at, replay_count, status, version, headers, body)
VALUES ('e-0', 'error', 'm-0', 'orders', 'ep', 'h', 'retries-exhausted', 'Error', 'x', '', 'sig', 1, 1, 0, 'replaced', 1, '{}', x''),
       ('e-1', 'error', 'm-1', 'orders', 'ep', 'h', 'retries-exhausted', 'Error', 'x', '', 'sig', 1, 1, 0, 'failed', 2, '{}', x'7b7d');
CREATE TABLE retry_jobs (
  id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, by TEXT NOT NULL, selection TEXT NOT NULL, options TEXT NOT NULL,
  snapshot_seq INTEGER NOT NULL, total INTEGER NOT NULL, sent INTEGER NOT NULL DEFAULT 0, refused INTEGER NOT NULL DEFAULT 0,
  already_handled INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0, state TEXT NOT NULL, stop_reason TEXT, canary TEXT
) WITHOUT ROWID;
CREATE INDEX retry_jobs_by_time ON retry_jobs (created_at);
CREATE TABLE retry_job_items (
  job_id TEXT NOT NULL, seq INTEGER NOT NULL, key TEXT NOT NULL,
  result TEXT CHECK (result IN ('sent', 'already-handled', 'refused', 'failed')), detail TEXT, PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE edits (
  request_id TEXT PRIMARY KEY, key TEXT NOT NULL, by TEXT NOT NULL, at INTEGER NOT NULL, sent_to TEXT NOT NULL, message_id TEXT NOT NULL,
  body_size_before INTEGER NOT NULL, body_size_after INTEGER NOT NULL, changed_headers TEXT NOT NULL, body_before BLOB, body_after BLOB
) WITHOUT ROWID;
CREATE INDEX edits_by_key ON edits (key);
INSERT INTO retry_jobs (id, created_at, by, selection, options, snapshot_seq, total, state, stop_reason)
VALUES ('job-old', 1, 'cli', '{"keys":["e-1"]}', '{}', 2, 1, 'stopped', 'paused: resume with the job id');
INSERT INTO retry_job_items (job_id, seq, key) VALUES ('job-old', 2, 'e-1');
INSERT INTO edits VALUES ('r-1', 'e-0', 'alice', 1, 'orders', 'm-0', 2, 2, '{}', NULL, NULL);
`;
