import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bytesCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { Delivery, Subscription } from '../../src/transport/types.js';
import {
  AlreadySettledError,
  LeaseLostError,
  SqliteTransport,
  type SqliteTransportOptions,
} from '../../src/transports/sqlite/index.js';
import { SCHEMA_VERSION } from '../../src/transports/sqlite/schema.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-sqlite-'));
let files = 0;
const newPath = () => join(dir, `t-${++files}.db`);
const text = (s: string) => new TextEncoder().encode(s);
const decode = (b: Uint8Array) => new TextDecoder().decode(b);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

const open: SqliteTransport[] = [];
const readers: Database.Database[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close();
  for (const r of readers.splice(0)) r.close();
});

function transport(options: SqliteTransportOptions): SqliteTransport {
  const t = new SqliteTransport(options);
  open.push(t);
  return t;
}

/** A second connection on the same file, as another process or the CLI would open it. */
function reader(path: string): Database.Database {
  const db = new Database(path, { timeout: 5_000 });
  readers.push(db);
  return db;
}

function count(db: Database.Database, table: 'messages' | 'error_messages'): number {
  return db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
}

/** Lets I/O and promise callbacks run until `done()` holds. */
async function until(done: () => boolean, turns = 200): Promise<void> {
  for (let i = 0; i < turns && !done(); i++) await new Promise<void>((r) => setImmediate(r));
  if (!done()) throw new Error('condition not reached');
}

class Inbox {
  readonly items: Delivery[] = [];
  readonly at: number[] = [];
  constructor(private readonly clock?: FakeClock) {}
  readonly listener = (d: Delivery) => {
    this.items.push(d);
    this.at.push(this.clock ? this.clock.now() : Date.now());
  };
}

async function consume(t: SqliteTransport, queue: string, inbox: Inbox, prefetch = 10, leaseMs?: number): Promise<Subscription> {
  return t.consume(queue, inbox.listener, leaseMs === undefined ? { prefetch } : { prefetch, leaseMs });
}

describe('SqliteTransport', () => {
  it('keeps sent messages across close and reopen', async () => {
    const path = newPath();
    const first = new SqliteTransport({ path });
    await first.send('orders', { id: 'o-1', body: text('kept'), headers: { k: 'v' } });
    await first.close();

    const second = transport({ path });
    const inbox = new Inbox();
    await consume(second, 'orders', inbox);
    await until(() => inbox.items.length === 1);
    const d = inbox.items[0]!;
    expect(d.id).toBe('o-1');
    expect(decode(d.body)).toBe('kept');
    expect(d.headers).toEqual({ k: 'v' });
    expect(d.deliveryCount).toBe(1);
    await d.ack();
    expect(count(reader(path), 'messages')).toBe(0);
  });

  it('brings back a message whose lease expired, with a higher delivery count, and rejects the stale ack', async () => {
    const path = newPath();
    const clock = new FakeClock(1_000_000);
    const a = transport({ path, clock, leaseMs: 500 });
    const b = transport({ path, clock, leaseMs: 500 });
    await a.send('work', { id: 'w-1', body: text('x'), headers: {} });

    const first = new Inbox(clock);
    await consume(a, 'work', first, 1);
    await until(() => first.items.length === 1);
    expect(first.items[0]!.deliveryCount).toBe(1);

    // A delivery handed out with its claim keeps the claim's lease: leaseMs plus the claim-ahead allowance of a tenth.
    const second = new Inbox(clock);
    await consume(b, 'work', second, 1);
    await clock.advance(549);
    expect(second.items).toHaveLength(0);
    await clock.advance(1);
    await until(() => second.items.length === 1);
    expect(second.items[0]!.id).toBe('w-1');
    expect(second.items[0]!.deliveryCount).toBe(2);

    const stale = first.items[0]!;
    await expect(stale.ack()).rejects.toBeInstanceOf(LeaseLostError);
    await expect(stale.retryLater(10, {})).rejects.toBeInstanceOf(AlreadySettledError);
    const db = reader(path);
    expect(count(db, 'messages')).toBe(1);

    await second.items[0]!.ack();
    expect(count(db, 'messages')).toBe(0);
  });

  it('a settlement with a lost lease changes nothing, whatever the verb', async () => {
    const path = newPath();
    const clock = new FakeClock(0);
    const t = transport({ path, clock, leaseMs: 100 });
    await t.send('q', { id: 'm', body: text('x'), headers: { h: '1' } });
    const inbox = new Inbox(clock);
    await consume(t, 'q', inbox, 1);
    await until(() => inbox.items.length === 1);
    const stale = inbox.items[0]!;
    // The lease runs out and another consumer claims the message.
    const other = new Inbox(clock);
    await consume(t, 'q', other, 1);
    await clock.advance(110);
    await until(() => other.items.length === 1);

    const db = reader(path);
    const before = db.prepare('SELECT seq, headers, visible_at, deliveries, lease FROM messages').all();
    await expect(stale.retryLater(0, { changed: 'yes' })).rejects.toBeInstanceOf(LeaseLostError);
    expect(db.prepare('SELECT seq, headers, visible_at, deliveries, lease FROM messages').all()).toEqual(before);
    expect(count(db, 'error_messages')).toBe(0);
    await other.items[0]!.ack();
  });

  it('acks of one claim committed together delete every row still leased, and reject only the one whose lease was lost', async () => {
    const path = newPath();
    const t = transport({ path });
    await t.sendBatch('q', ['a', 'b', 'c'].map((id) => ({ id, body: text(id), headers: {} })));
    const inbox = new Inbox();
    await consume(t, 'q', inbox, 3);
    await until(() => inbox.items.length === 3);
    const db = reader(path);
    // Another consumer took 'b' meanwhile: its lease token is no longer this claim's.
    expect(db.prepare(`UPDATE messages SET lease = lease + 1000 WHERE id = 'b'`).run().changes).toBe(1);
    const results = await Promise.allSettled(inbox.items.map((d) => d.ack()));
    const byId = Object.fromEntries(inbox.items.map((d, i) => [d.id, results[i]!]));
    expect(byId['a']!.status).toBe('fulfilled');
    expect(byId['c']!.status).toBe('fulfilled');
    expect(byId['b']!.status).toBe('rejected');
    expect((byId['b'] as PromiseRejectedResult).reason).toBeInstanceOf(LeaseLostError);
    expect(db.prepare('SELECT id FROM messages').pluck().all()).toEqual(['b']);
  });

  it('retryLater rewrites the same row: one copy, new headers, due after the delay, lease cleared', async () => {
    const path = newPath();
    const clock = new FakeClock(5_000);
    const t = transport({ path, clock });
    await t.send('q', { id: 'r-1', body: text('body'), headers: { old: '1' } });
    const inbox = new Inbox(clock);
    await consume(t, 'q', inbox);
    await until(() => inbox.items.length === 1);
    const db = reader(path);
    const seq = db.prepare('SELECT seq FROM messages').pluck().get();

    await inbox.items[0]!.retryLater(2_000, { 'redeliver-delayed-attempts': '1' });
    const rows = db.prepare('SELECT seq, id, body, headers, visible_at, deliveries, lease FROM messages').all() as {
      seq: number; id: string; body: Buffer; headers: string; visible_at: number; deliveries: number; lease: number | null;
    }[];
    expect(rows).toHaveLength(1);
    expect(rows[0]!.seq).toBe(seq);
    expect(rows[0]!.id).toBe('r-1');
    expect(decode(rows[0]!.body)).toBe('body');
    expect(JSON.parse(rows[0]!.headers)).toEqual({ 'redeliver-delayed-attempts': '1' });
    expect(rows[0]!.visible_at).toBe(7_000);
    expect(rows[0]!.lease).toBeNull();

    await expect(inbox.items[0]!.retryLater(1, {})).rejects.toBeInstanceOf(AlreadySettledError);
    await expect(inbox.items[0]!.ack()).rejects.toBeInstanceOf(AlreadySettledError);
    expect(count(db, 'messages')).toBe(1);

    await clock.advance(1_999);
    expect(inbox.items).toHaveLength(1);
    await clock.advance(1);
    await until(() => inbox.items.length === 2);
    expect(inbox.items[1]!.headers).toEqual({ 'redeliver-delayed-attempts': '1' });
    expect(inbox.items[1]!.deliveryCount).toBe(1);
    await inbox.items[1]!.ack();
    expect(count(db, 'messages')).toBe(0);
  });

  it('deadLetter moves the row into error_messages with the failure facts in columns', async () => {
    const path = newPath();
    const t = transport({ path });
    await t.send('billing', { id: 'd-1', body: text('poison'), headers: { a: '1' } });
    const inbox = new Inbox();
    await consume(t, 'billing', inbox);
    await until(() => inbox.items.length === 1);
    await inbox.items[0]!.deadLetter('billing.error', {
      a: '1',
      'redeliver-failure-reason': 'retries-exhausted',
      'redeliver-failure-error-name': 'TypeError',
      'redeliver-failure-time': '2024-05-01T10:00:00.000Z',
      'redeliver-failure-queue': 'billing',
    });
    const db = reader(path);
    expect(count(db, 'messages')).toBe(0);
    const rows = db
      .prepare('SELECT queue, id, body, original_queue, failed_at, reason, error_name, lease, deliveries FROM error_messages')
      .all() as Record<string, unknown>[];
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      queue: 'billing.error',
      id: 'd-1',
      original_queue: 'billing',
      failed_at: '2024-05-01T10:00:00.000Z',
      reason: 'retries-exhausted',
      error_name: 'TypeError',
      lease: null,
      deliveries: 0,
    });
    expect(decode(rows[0]!['body'] as Buffer)).toBe('poison');
    expect(db.prepare('SELECT kind FROM queues WHERE name = ?').pluck().get('billing.error')).toBe('error');

    // Failure facts missing from the headers are NULL.
    await t.send('billing', { id: 'd-2', body: text('x'), headers: {} });
    await until(() => inbox.items.length === 2);
    await inbox.items[1]!.deadLetter('billing.error', {});
    expect(db.prepare(`SELECT original_queue, failed_at, reason, error_name FROM error_messages WHERE id = 'd-2'`).get()).toEqual({
      original_queue: null, failed_at: null, reason: null, error_name: null,
    });
  });

  it('deadLetter is one transaction: when the insert fails, the delete is rolled back', async () => {
    const path = newPath();
    const t = transport({ path });
    await t.send('q', { id: 'atomic', body: text('x'), headers: {} });
    const inbox = new Inbox();
    await consume(t, 'q', inbox);
    await until(() => inbox.items.length === 1);

    const db = reader(path);
    db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON error_messages BEGIN SELECT RAISE(ABORT, 'refused by test'); END`);
    await expect(inbox.items[0]!.deadLetter('q.error', {})).rejects.toThrow(/refused by test/);
    expect(count(db, 'messages')).toBe(1);
    expect(count(db, 'error_messages')).toBe(0);
    expect(db.prepare('SELECT lease IS NOT NULL FROM messages').pluck().get()).toBe(1);

    // Nothing took effect, so the delivery may still be settled.
    db.exec('DROP TRIGGER refuse');
    await inbox.items[0]!.deadLetter('q.error', {});
    expect(count(db, 'messages')).toBe(0);
    expect(count(db, 'error_messages')).toBe(1);
  });

  it('a dead-letter that rolled back leaves its error queue unregistered, in memory as in the file', async () => {
    const path = newPath();
    const t = transport({ path });
    await t.send('q', { id: 'first', body: text('x'), headers: {} });
    const inbox = new Inbox();
    await consume(t, 'q', inbox);
    await until(() => inbox.items.length === 1);
    const db = reader(path);
    db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON error_messages BEGIN SELECT RAISE(ABORT, 'refused by test'); END`);
    await expect(inbox.items[0]!.deadLetter('q.error', {})).rejects.toThrow(/refused by test/);
    expect(db.prepare(`SELECT kind FROM queues WHERE name = 'q.error'`).pluck().get()).toBeUndefined();

    // The name is still no error queue: a send to it is a work-queue message.
    await t.send('q.error', { id: 'plain', body: text('y'), headers: {} });
    expect(db.prepare(`SELECT kind FROM queues WHERE name = 'q.error'`).pluck().get()).toBe('queue');
    expect(db.prepare(`SELECT id FROM messages WHERE queue = 'q.error'`).pluck().all()).toEqual(['plain']);

    // Once a dead-letter commits, the name is an error queue in the file, with the earlier row moved along.
    db.exec('DROP TRIGGER refuse');
    await inbox.items[0]!.deadLetter('q.error', {});
    expect(db.prepare(`SELECT kind FROM queues WHERE name = 'q.error'`).pluck().get()).toBe('error');
    expect(db.prepare(`SELECT id FROM error_messages WHERE queue = 'q.error' ORDER BY seq`).pluck().all()).toEqual(['plain', 'first']);
  });

  it('one refused write in a group commit fails alone; the others commit', async () => {
    const path = newPath();
    const t = transport({ path });
    await t.send('q', { id: 'refused', body: text('x'), headers: {} });
    await t.send('q', { id: 'fine', body: text('y'), headers: {} });
    const inbox = new Inbox();
    await consume(t, 'q', inbox);
    await until(() => inbox.items.length === 2);
    const db = reader(path);
    db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON error_messages BEGIN SELECT RAISE(ABORT, 'refused by test'); END`);
    const byId = new Map(inbox.items.map((d) => [d.id, d]));
    // Requested in the same turn, so they share a commit.
    const results = await Promise.allSettled([byId.get('refused')!.deadLetter('q.error', {}), byId.get('fine')!.ack()]);
    expect(results[0]!.status).toBe('rejected');
    expect(results[1]!.status).toBe('fulfilled');
    expect(db.prepare('SELECT id FROM messages').pluck().all()).toEqual(['refused']);
  });

  it('a send in this process wakes an idle consumer at once, without waiting for the poll', async () => {
    const t = transport({ path: newPath(), pollIntervalMs: 60_000 });
    const inbox = new Inbox();
    await consume(t, 'wake', inbox);
    await new Promise((r) => setTimeout(r, 50));
    const sentAt = Date.now();
    await t.send('wake', { id: 'now', body: text('x'), headers: {} });
    const deadline = Date.now() + 2_000;
    while (inbox.items.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(inbox.items.map((d) => d.id)).toEqual(['now']);
    expect(inbox.at[0]! - sentAt).toBeLessThan(500);
  });

  it('a name used as a work queue that becomes an error queue takes its rows along', async () => {
    const path = newPath();
    const t = transport({ path });
    await t.send('failed', { id: 'early', body: text('x'), headers: { 'redeliver-failure-reason': 'manual' } });
    await t.send('work', { id: 'w', body: text('y'), headers: {} });
    const inbox = new Inbox();
    await consume(t, 'work', inbox);
    await until(() => inbox.items.length === 1);
    await inbox.items[0]!.deadLetter('failed', {});
    const db = reader(path);
    expect(db.prepare(`SELECT count(*) FROM messages WHERE queue = 'failed'`).pluck().get()).toBe(0);
    expect(db.prepare(`SELECT id, reason FROM error_messages WHERE queue = 'failed' ORDER BY seq`).all()).toEqual([
      { id: 'early', reason: 'manual' },
      { id: 'w', reason: null },
    ]);
  });

  it('an error queue is consumed like any queue, and can send back to the original queue', async () => {
    const path = newPath();
    const t = transport({ path });
    await t.send('in', { id: 'e-1', body: text('x'), headers: {} });
    const inbox = new Inbox();
    await consume(t, 'in', inbox);
    await until(() => inbox.items.length === 1);
    await inbox.items[0]!.deadLetter('in.error', { 'redeliver-failure-queue': 'in' });

    const errors = new Inbox();
    await consume(t, 'in.error', errors);
    await until(() => errors.items.length === 1);
    const e = errors.items[0]!;
    expect(e.deliveryCount).toBe(1);
    await t.send(e.headers['redeliver-failure-queue']!, { id: e.id, body: e.body, headers: {} });
    await e.ack();
    await until(() => inbox.items.length === 2);
    expect(inbox.items[1]!.id).toBe('e-1');
    const db = reader(path);
    expect(count(db, 'error_messages')).toBe(0);
    expect(count(db, 'messages')).toBe(1);
  });

  it('sending to an error queue writes error_messages', async () => {
    const path = newPath();
    const t = transport({ path });
    await t.send('src', { id: 'a', body: text('x'), headers: {} });
    const inbox = new Inbox();
    await consume(t, 'src', inbox);
    await until(() => inbox.items.length === 1);
    await inbox.items[0]!.deadLetter('errors', {});
    await t.send('errors', { id: 'b', body: text('y'), headers: { 'redeliver-failure-reason': 'manual' } });
    const db = reader(path);
    expect(db.prepare('SELECT id, reason FROM error_messages ORDER BY seq').all()).toEqual([
      { id: 'a', reason: null },
      { id: 'b', reason: 'manual' },
    ]);
  });

  it('hands out due messages in due order, never early, with one wake-up per consumer', async () => {
    const path = newPath();
    const clock = new FakeClock(10_000);
    const t = transport({ path, clock, pollIntervalMs: 60_000 });
    const delays = [3_000, 1_000, 2_000, 1_000, 500];
    for (let i = 0; i < delays.length; i++) await t.send('due', { id: `m-${i}`, body: text(String(i)), headers: {} });
    const inbox = new Inbox(clock);
    await consume(t, 'due', inbox, 10);
    await until(() => inbox.items.length === delays.length);
    const scheduled = inbox.items.splice(0);
    inbox.at.splice(0);
    await Promise.all(scheduled.map((d, i) => d.retryLater(delays[i]!, { due: String(10_000 + delays[i]!) })));
    await until(() => clock.pending === 1);

    await clock.runUntil(() => inbox.items.length === delays.length, 10_000);
    expect(inbox.items.map((d) => d.id)).toEqual(['m-4', 'm-1', 'm-3', 'm-2', 'm-0']);
    // Each one at its due time exactly: never early, and not late on a fake clock.
    inbox.items.forEach((d, i) => expect(inbox.at[i]).toBe(Number(d.headers['due'])));
    expect(clock.pending).toBe(1);
  });

  it('a forward step of the wall clock wakes a consumer for a message it made due, without waiting for the poll', async () => {
    const clock = new FakeClock(10_000);
    const t = transport({ path: newPath(), clock, pollIntervalMs: 60_000 });
    const inbox = new Inbox(clock);
    await consume(t, 'stepped', inbox);
    await t.send('stepped', { id: 'later', body: text('x'), headers: {}, delayMs: 30_000 });
    await until(() => clock.pending === 1);

    // The wall clock is set 30 s forward: the message is due now, by the clock that decides due-ness.
    clock.stepWall(30_000);
    await clock.advance(1_000);
    await until(() => inbox.items.length > 0);
    expect(inbox.items.map((d) => d.id)).toEqual(['later']);
  });

  it('waits on one timer however many messages are delayed', async () => {
    const clock = new FakeClock(0);
    const t = transport({ path: ':memory:', clock });
    const inbox = new Inbox(clock);
    await consume(t, 'many', inbox, 2_000);
    const n = 1_000;
    for (let i = 0; i < n; i++) void t.send('many', { id: `x-${i}`, body: text('x'), headers: {} });
    await until(() => inbox.items.length === n);
    await Promise.all(inbox.items.map((d, i) => d.retryLater(1_000 + i * 10, {})));
    await until(() => clock.pending > 0);
    expect(clock.pending).toBe(1);
    await clock.advance(1_000 + (n - 1) * 10);
    await until(() => inbox.items.length === 2 * n);
    expect(new Set(inbox.items.slice(n).map((d) => d.id)).size).toBe(n);
  });

  it('a second connection can read while a consumer works, and writes from another process are picked up by polling', async () => {
    const path = newPath();
    const worker = transport({ path, pollIntervalMs: 50 });
    const inbox = new Inbox();
    let handled = 0;
    const db = reader(path);
    const seen: number[] = [];
    await worker.consume(
      'busy',
      (d) => {
        seen.push(count(db, 'messages'));
        void d.ack().then(() => handled++);
        inbox.listener(d);
      },
      { prefetch: 5 },
    );
    const other = transport({ path });
    for (let i = 0; i < 50; i++) await other.send('busy', { id: `b-${i}`, body: text('x'), headers: {} });
    const deadline = Date.now() + 5_000;
    while (handled < 50 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(handled).toBe(50);
    expect(seen.length).toBe(50);
    expect(seen.every((n) => n >= 1)).toBe(true);
    expect(count(db, 'messages')).toBe(0);
  });

  it('returns claimed but undelivered rows on close and on pause, restoring their delivery count', async () => {
    const path = newPath();
    const clock = new FakeClock(0);
    const t = transport({ path, clock });
    for (let i = 0; i < 3; i++) await t.send('buf', { id: `b-${i}`, body: text('x'), headers: {} });
    const inbox = new Inbox(clock);
    const sub = await consume(t, 'buf', inbox, 1);
    await until(() => inbox.items.length === 1);
    const db = reader(path);
    // With prefetch 1 the consumer claims two rows: one handed out, one buffered.
    expect(db.prepare('SELECT count(*) FROM messages WHERE lease IS NOT NULL').pluck().get()).toBe(2);
    await sub.pause();
    expect(db.prepare('SELECT id, deliveries, lease FROM messages ORDER BY seq').all()).toEqual([
      { id: 'b-0', deliveries: 1, lease: expect.any(Number) },
      { id: 'b-1', deliveries: 0, lease: null },
      { id: 'b-2', deliveries: 0, lease: null },
    ]);
    await inbox.items[0]!.ack();
    await sub.resume();
    await until(() => inbox.items.length === 2);
    expect(inbox.items[1]!.id).toBe('b-1');
    await sub.close();
    expect(db.prepare('SELECT id, deliveries, lease IS NULL AS free FROM messages ORDER BY seq').all()).toEqual([
      { id: 'b-1', deliveries: 1, free: 0 },
      { id: 'b-2', deliveries: 0, free: 1 },
    ]);
    // A delivery handed out before close may still be settled.
    await inbox.items[1]!.ack();
    expect(count(db, 'messages')).toBe(1);
  });

  it('delivers a row whose headers are not valid JSON with empty headers', async () => {
    const path = newPath();
    const t = transport({ path });
    const db = reader(path);
    db.prepare(
      `INSERT INTO messages (queue, id, body, headers, visible_at, deliveries, enqueued_at) VALUES ('raw', 'bad', x'00', '{not json', 0, 0, 0)`,
    ).run();
    db.prepare(
      `INSERT INTO messages (queue, id, body, headers, visible_at, deliveries, enqueued_at) VALUES ('raw', 'mixed', x'01', '{"a":"1","n":2}', 0, 0, 0)`,
    ).run();
    const inbox = new Inbox();
    await consume(t, 'raw', inbox);
    await until(() => inbox.items.length === 2);
    expect(inbox.items[0]!.id).toBe('bad');
    expect(inbox.items[0]!.headers).toEqual({});
    expect(inbox.items[1]!.headers).toEqual({ a: '1' });
    await Promise.all(inbox.items.map((d) => d.ack()));
    expect(count(db, 'messages')).toBe(0);
  });

  it('rejects bad options in the constructor, naming the option', () => {
    const path = newPath();
    const cases: [Partial<SqliteTransportOptions>, RegExp][] = [
      [{}, /`path`/],
      [{ path: '' }, /`path`/],
      [{ path, durability: 'OFF' as 'FULL' }, /`durability`/],
      [{ path, busyTimeoutMs: -1 }, /`busyTimeoutMs`/],
      [{ path, pollIntervalMs: 0 }, /`pollIntervalMs`/],
      [{ path, pollIntervalMs: 2 ** 31 }, /`pollIntervalMs`/],
      [{ path, batchSize: 0 }, /`batchSize`/],
      [{ path, batchSize: 1.5 }, /`batchSize`/],
      [{ path, leaseMs: Number.NaN }, /`leaseMs`/],
      [{ path, clock: {} as never }, /`clock`/],
    ];
    for (const [options, message] of cases) {
      expect(() => new SqliteTransport(options as SqliteTransportOptions)).toThrow(message);
    }
  });

  it('rejects bad arguments without taking the message', async () => {
    const t = transport({ path: ':memory:' });
    await expect(t.send('', { id: 'x', body: text('x'), headers: {} })).rejects.toThrow(/queue/);
    await expect(t.send('q', { id: 'x', body: 'text' as never, headers: {} })).rejects.toThrow(/body/);
    await expect(t.send('q', { id: 'x', body: text('x'), headers: { n: 1 as never } })).rejects.toThrow(/header "n"/);
    await expect(t.consume('q', () => undefined, { prefetch: 0 })).rejects.toThrow(/prefetch/);
    await t.send('q', { id: 'ok', body: text('x'), headers: {} });
    const inbox = new Inbox();
    await consume(t, 'q', inbox);
    await until(() => inbox.items.length === 1);
    const d = inbox.items[0]!;
    await expect(d.retryLater(-1, {})).rejects.toBeInstanceOf(RangeError);
    await expect(d.retryLater(2 ** 31, {})).rejects.toBeInstanceOf(RangeError);
    await expect(d.deadLetter('', {})).rejects.toBeInstanceOf(TypeError);
    // The rejected calls did not settle it.
    await d.ack();
    await expect(d.ack()).rejects.toBeInstanceOf(AlreadySettledError);
  });

  /** Moves message `id` to error queue `errors` through a consumer, as an endpoint would. */
  async function deadLetter(t: SqliteTransport, id: string): Promise<void> {
    await t.send('work', { id, body: text(id), headers: {} });
    const inbox = new Inbox();
    const sub = await consume(t, 'work', inbox, 1);
    await until(() => inbox.items.length === 1);
    await inbox.items[0]!.deadLetter('errors', { 'redeliver-failure-queue': 'work' });
    await sub.close();
  }

  it('never gives a new error-queue entry the key of one deleted: a stale key acts on nothing', async () => {
    const t = transport({ path: newPath() });
    await deadLetter(t, 'm1');
    const [m1] = await t.errorQueue.browse('errors');
    expect(await t.errorQueue.delete('errors', m1!.key)).toBe(true);
    await deadLetter(t, 'm2');
    const [m2] = await t.errorQueue.browse('errors');
    expect(m2!.key).not.toBe(m1!.key);
    expect(await t.errorQueue.get('errors', m1!.key)).toBeUndefined();
    expect(await t.errorQueue.delete('errors', m1!.key)).toBe(false);
    expect(await t.errorQueue.sendBack('errors', m1!.key)).toBeUndefined();
    expect((await t.errorQueue.browse('errors')).map((e) => e.messageId)).toEqual(['m2']);
  });

  it('drain deletes only what it stored, while another ingester takes the same entry and a new failure arrives', async () => {
    const path = newPath();
    const t = transport({ path });
    const other = transport({ path });
    await deadLetter(t, 'm1');
    const stored: string[] = [];
    await t.errorQueue.drain!('errors', 10, async (entries) => {
      stored.push(...entries.map((e) => e.messageId));
      // Another ingester stores and deletes m1 meanwhile, and m2 fails.
      await other.errorQueue.drain!('errors', 10, async (again) => void stored.push(...again.map((e) => e.messageId)));
      await deadLetter(t, 'm2');
    });
    expect(stored).toEqual(['m1', 'm1']);
    expect((await t.errorQueue.browse('errors')).map((e) => e.messageId)).toEqual(['m2']);
  });

  it('opens a file made with schema version 1, keeping its entries and never reusing their keys', async () => {
    const path = newPath();
    const old = reader(path);
    old.exec(SCHEMA_V1);
    old.pragma('user_version = 1');
    const insert = old.prepare(
      "INSERT INTO error_messages (seq, queue, id, body, headers, visible_at, enqueued_at, original_queue, failed_at, reason, error_name) VALUES (?, 'errors', ?, ?, '{}', 0, 0, 'work', 'then', 'retries-exhausted', 'Error')",
    );
    insert.run(1, 'old-1', Buffer.from('one'));
    insert.run(7, 'old-7', Buffer.from('seven'));
    old.prepare("INSERT INTO queues (name, kind) VALUES ('errors', 'error')").run();
    const t = transport({ path });
    const kept = await t.errorQueue.browse('errors');
    expect(kept.map((e) => [e.key, e.messageId, new TextDecoder().decode(e.body)])).toEqual([['1', 'old-1', 'one'], ['7', 'old-7', 'seven']]);
    expect(await t.errorQueue.delete('errors', '7')).toBe(true);
    await deadLetter(t, 'new');
    const [, latest] = await t.errorQueue.browse('errors');
    expect(latest!.messageId).toBe('new');
    expect(Number(latest!.key)).toBeGreaterThan(7);
    expect(count(old, 'error_messages')).toBe(2);
    expect(old.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(old.prepare('SELECT count(*) FROM sqlite_master WHERE tbl_name = ? AND type = ?').pluck().get('error_messages', 'index')).toBe(2);
  });

  it('refuses a file written by a newer schema', () => {
    const path = newPath();
    const db = reader(path);
    db.pragma('user_version = 99');
    expect(() => new SqliteTransport({ path })).toThrow(/schema version 99/);
  });

  it('reopening is idempotent and keeps the schema version', async () => {
    const path = newPath();
    await new SqliteTransport({ path }).close();
    await new SqliteTransport({ path, durability: 'FULL' }).close();
    const db = reader(path);
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
  });
});

describe('SqliteTransport leases', () => {
  /** Two transports on one file with a fake clock and a 1 s lease, and two messages sent. */
  async function twoConsumersAndTwoMessages(ids: [string, string]) {
    const path = newPath();
    const clock = new FakeClock(0);
    const a = transport({ path, clock, leaseMs: 1_000, pollIntervalMs: 50 });
    const b = transport({ path, clock, leaseMs: 1_000, pollIntervalMs: 50 });
    for (const id of ids) await a.send('work', { id, body: text('x'), headers: {} });
    return { path, clock, a, b, first: new Inbox(clock), second: new Inbox(clock) };
  }

  /** Advances the fake clock in steps, so consumers' polls run along the way. */
  async function advanceInSteps(clock: FakeClock, ms: number, step = 50): Promise<void> {
    for (let done = 0; done < ms; done += step) await clock.advance(Math.min(step, ms - done));
  }

  it('a row that waited in the consumer buffer is handed out with its full lease', async () => {
    const { path, clock, a, b, first, second } = await twoConsumersAndTwoMessages(['m-1', 'm-2']);
    // Prefetch 1: the consumer claims both rows, hands out m-1 and buffers m-2.
    await consume(a, 'work', first, 1);
    await until(() => first.items.length === 1);

    // An 800 ms handler: m-2 waits in the buffer all that time.
    await advanceInSteps(clock, 800);
    await first.items[0]!.ack();
    await until(() => first.items.length === 2);
    expect(first.items[1]!.id).toBe('m-2');
    const handedOutAt = clock.now();

    // Another consumer must not take m-2 while its holder's handler could still run within the lease.
    await consume(b, 'work', second, 1);
    await advanceInSteps(clock, 999);
    expect(clock.now() - handedOutAt).toBe(999);
    expect(second.items).toHaveLength(0);
    await first.items[1]!.ack();
    expect(count(reader(path), 'messages')).toBe(0);
  });

  it("extendLease keeps a long handler's message from other consumers, and fails once the lease is lost", async () => {
    const { path, clock, a, b, first, second } = await twoConsumersAndTwoMessages(['long', 'lost']);
    await consume(a, 'work', first, 2);
    await until(() => first.items.length === 2);
    const [long, lost] = first.items as [Delivery, Delivery];

    await advanceInSteps(clock, 900);
    await long.extendLease!(1_000);
    await consume(b, 'work', second, 2);
    // The lease of `lost` (1.1 s from its claim) runs out and `b` takes it; `long` stays leased until 1900 ms.
    await advanceInSteps(clock, 999);
    expect(second.items.map((d) => d.id)).toEqual(['lost']);
    await expect(lost.extendLease!(1_000)).rejects.toBeInstanceOf(LeaseLostError);
    await long.ack();
    await second.items[0]!.ack();
    await expect(long.extendLease!(1_000)).rejects.toBeInstanceOf(AlreadySettledError);
    expect(count(reader(path), 'messages')).toBe(0);
  });

  it('leaseExpired turns true when the lease runs out, and later after extendLease', async () => {
    const { clock, a, first } = await twoConsumersAndTwoMessages(['short', 'extended']);
    await consume(a, 'work', first, 2);
    await until(() => first.items.length === 2);
    const [short, extended] = first.items as [Delivery, Delivery];
    expect(short.leaseExpired!()).toBe(false);
    await advanceInSteps(clock, 500);
    await extended.extendLease!(2_000);
    await advanceInSteps(clock, 600);
    expect(short.leaseExpired!()).toBe(true);
    expect(extended.leaseExpired!()).toBe(false);
    await advanceInSteps(clock, 1_400);
    expect(extended.leaseExpired!()).toBe(true);
  });

  it('extendLease never shortens the lease', async () => {
    const { path, clock, a, b, first, second } = await twoConsumersAndTwoMessages(['held', 'other']);
    await consume(a, 'work', first, 2);
    await until(() => first.items.length === 2);
    const [held, other] = first.items as [Delivery, Delivery];
    await other.ack();
    // The lease runs to 1000 ms; asking for 10 ms more must not bring it forward.
    await held.extendLease!(10);
    await consume(b, 'work', second, 1);
    await advanceInSteps(clock, 900);
    expect(second.items).toHaveLength(0);
    await held.ack();
    expect(count(reader(path), 'messages')).toBe(0);
  });

  it('a handler keeps its message with ctx.extendLease past the lease', async () => {
    const { path, clock, a, b, second } = await twoConsumersAndTwoMessages(['slow', 'other']);
    let extend!: () => void;
    const extendNow = new Promise<void>((resolve) => (extend = resolve));
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const runs: string[] = [];
    const endpoint = new Endpoint<Uint8Array>({
      name: 'slow',
      queue: 'work',
      transport: a,
      clock,
      codec: bytesCodec,
      concurrency: 2,
      leaseMs: 1_000,
      handler: async (_body, ctx) => {
        runs.push(ctx.messageId);
        if (ctx.messageId !== 'slow') return;
        await extendNow;
        await ctx.extendLease(2_000);
        await finished;
      },
    });
    await endpoint.start();
    await until(() => runs.length === 2);
    await advanceInSteps(clock, 900);
    extend();
    await consume(b, 'work', second, 1);
    await advanceInSteps(clock, 1_500);
    expect(second.items).toHaveLength(0);
    finish();
    const db = reader(path);
    await until(() => count(db, 'messages') === 0);
    await endpoint.stop();
    expect(runs.sort()).toEqual(['other', 'slow']);
  });

  it('extendLease refuses a length that is not a positive whole number of milliseconds', async () => {
    const t = transport({ path: newPath() });
    await t.send('work', { id: 'm', body: text('x'), headers: {} });
    const inbox = new Inbox();
    await consume(t, 'work', inbox, 1);
    await until(() => inbox.items.length === 1);
    for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 31]) {
      await expect(inbox.items[0]!.extendLease!(bad)).rejects.toBeInstanceOf(RangeError);
    }
    await inbox.items[0]!.ack();
  });
});

/** The store's schema as redeliver 0.1 wrote it (user_version 1): error-queue keys without AUTOINCREMENT. */
const SCHEMA_V1 = `
CREATE TABLE queues (name TEXT PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('queue', 'error'))) WITHOUT ROWID;
CREATE TABLE messages (
  seq INTEGER PRIMARY KEY, queue TEXT NOT NULL, id TEXT NOT NULL, body BLOB NOT NULL, headers TEXT NOT NULL,
  visible_at INTEGER NOT NULL, deliveries INTEGER NOT NULL DEFAULT 0, lease INTEGER, enqueued_at INTEGER NOT NULL
);
CREATE INDEX messages_due ON messages (queue, visible_at);
CREATE TABLE error_messages (
  seq INTEGER PRIMARY KEY, queue TEXT NOT NULL, id TEXT NOT NULL, body BLOB NOT NULL, headers TEXT NOT NULL,
  visible_at INTEGER NOT NULL, deliveries INTEGER NOT NULL DEFAULT 0, lease INTEGER, enqueued_at INTEGER NOT NULL,
  original_queue TEXT, failed_at TEXT, reason TEXT, error_name TEXT
);
CREATE INDEX error_messages_due ON error_messages (queue, visible_at);
CREATE INDEX error_messages_reason ON error_messages (queue, reason, error_name);
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('lease_token', 0);
`;
