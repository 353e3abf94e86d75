import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, expect, it } from 'vitest';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { Delivery } from '../../src/transport/types.js';
import { LeaseLostError, SqliteTransport } from '../../src/transports/sqlite/index.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-sqlite-leases-'));
let files = 0;
const newPath = () => join(dir, `l-${++files}.db`);
const text = (s: string) => new TextEncoder().encode(s);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const open: SqliteTransport[] = [];
const readers: Database.Database[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close();
  for (const r of readers.splice(0)) r.close();
});

function transport(path: string, clock: FakeClock, leaseMs: number): SqliteTransport {
  const t = new SqliteTransport({ path, clock, leaseMs, pollIntervalMs: 50 });
  open.push(t);
  return t;
}

function remaining(path: string): number {
  const db = new Database(path, { readonly: true });
  readers.push(db);
  return db.prepare('SELECT count(*) FROM messages').pluck().get() as number;
}

/** Lets I/O and promise callbacks run until `done()` holds. */
async function until(done: () => boolean, turns = 200): Promise<void> {
  for (let i = 0; i < turns && !done(); i++) await new Promise<void>((r) => setImmediate(r));
  if (!done()) throw new Error('condition not reached');
}

/** Advances the fake clock in steps, so consumers' polls run along the way. */
async function advanceInSteps(clock: FakeClock, ms: number, step = 50): Promise<void> {
  for (let done = 0; done < ms; done += step) await clock.advance(Math.min(step, ms - done));
}

it('a row that waited in the consumer buffer is handed out with its full lease', async () => {
  const path = newPath();
  const clock = new FakeClock(0);
  const a = transport(path, clock, 1_000);
  const b = transport(path, clock, 1_000);
  await a.send('work', { id: 'm-1', body: text('x'), headers: {} });
  await a.send('work', { id: 'm-2', body: text('x'), headers: {} });

  // Prefetch 1: the consumer claims both rows, hands out m-1 and buffers m-2.
  const first: Delivery[] = [];
  await a.consume('work', (d) => first.push(d), { prefetch: 1 });
  await until(() => first.length === 1);

  // An 800 ms handler: m-2 waits in the buffer all that time.
  await advanceInSteps(clock, 800);
  await first[0]!.ack();
  await until(() => first.length === 2);
  expect(first[1]!.id).toBe('m-2');
  const handedOutAt = clock.now();

  // Another consumer must not take m-2 while its holder's handler could still run within the lease.
  const second: Delivery[] = [];
  await b.consume('work', (d) => second.push(d), { prefetch: 1 });
  await advanceInSteps(clock, 999);
  expect(clock.now() - handedOutAt).toBe(999);
  expect(second).toHaveLength(0);
  await first[1]!.ack();
  expect(remaining(path)).toBe(0);
});

it('extendLease keeps a long handler\'s message from other consumers, and fails once the lease is lost', async () => {
  const path = newPath();
  const clock = new FakeClock(0);
  const a = transport(path, clock, 1_000);
  const b = transport(path, clock, 1_000);
  await a.send('work', { id: 'long', body: text('x'), headers: {} });
  await a.send('work', { id: 'lost', body: text('x'), headers: {} });

  const first: Delivery[] = [];
  await a.consume('work', (d) => first.push(d), { prefetch: 2 });
  await until(() => first.length === 2);
  const [long, lost] = first as [Delivery, Delivery];

  await advanceInSteps(clock, 900);
  await long.extendLease!(1_000);
  const second: Delivery[] = [];
  await b.consume('work', (d) => second.push(d), { prefetch: 2 });
  // At 1000 ms the lease of `lost` has run out and `b` takes it; `long` stays leased until 1900 ms.
  await advanceInSteps(clock, 999);
  expect(second.map((d) => d.id)).toEqual(['lost']);
  await expect(lost.extendLease!(1_000)).rejects.toBeInstanceOf(LeaseLostError);
  await long.ack();
  await second[0]!.ack();
  expect(remaining(path)).toBe(0);
});

it('extendLease refuses a length that is not a positive whole number of milliseconds', async () => {
  const path = newPath();
  const clock = new FakeClock(0);
  const a = transport(path, clock, 1_000);
  await a.send('work', { id: 'm', body: text('x'), headers: {} });
  const got: Delivery[] = [];
  await a.consume('work', (d) => got.push(d), { prefetch: 1 });
  await until(() => got.length === 1);
  for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 31]) {
    await expect(got[0]!.extendLease!(bad)).rejects.toBeInstanceOf(RangeError);
  }
  await got[0]!.ack();
});
