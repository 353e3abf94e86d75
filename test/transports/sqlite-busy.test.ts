import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, afterEach, expect, it } from 'vitest';
import { bytesCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { Delivery } from '../../src/transport/types.js';
import { DatabaseBusyError, SqliteDeduplicationStore, SqliteTransport } from '../../src/transports/sqlite/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const holder = fileURLToPath(new URL('../fixtures/sqlite-lock-holder.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'redeliver-sqlite-busy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

/**
 * Measures the longest stretch the event loop was blocked: a 5 ms interval
 * timer notes the longest gap between its runs (and from its last run to the
 * stop), less the interval.
 */
function stallMonitor(): { stop(): number } {
  const interval = 5;
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last - interval);
    last = now;
  }, interval);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(longest, performance.now() - last - interval);
    },
  };
}

/** Starts a process that holds the file's write lock for `holdMs`; resolves once it holds it. */
async function holdWriteLock(path: string, holdMs: number): Promise<{ released: Promise<void> }> {
  const proc: ChildProcess = spawn(process.execPath, ['--import', 'tsx', holder, path, String(holdMs)], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  cleanups.push(() => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
  });
  let output = '';
  proc.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const released = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  await waitFor('the lock holder to take the lock', () => output.includes('locked'), 20_000);
  return { released };
}

it.each([
  { wait: 'within busyTimeoutMs', busyTimeoutMs: undefined },
  { wait: 'past busyTimeoutMs', busyTimeoutMs: 300 },
])('a write lock held by another process ($wait) neither stalls the event loop nor gets a handled message handled again', async ({ busyTimeoutMs }) => {
  const path = join(dir, `busy-${busyTimeoutMs ?? 'default'}.db`);
  const transport = new SqliteTransport({ path, pollIntervalMs: 20, ...(busyTimeoutMs === undefined ? {} : { busyTimeoutMs }) });
  cleanups.push(() => transport.close());
  const messages = 50;
  for (let i = 0; i < messages; i++) await transport.send('work', { id: `m-${i}`, body: new Uint8Array([i]), headers: {} });

  const handled = new Map<string, number>();
  let gateOpen!: () => void;
  const gate = new Promise<void>((resolve) => (gateOpen = resolve));
  const endpoint = new Endpoint<Uint8Array>({
    name: 'busy',
    queue: 'work',
    transport,
    codec: bytesCodec,
    concurrency: 10,
    handler: async (_body, ctx) => {
      handled.set(ctx.messageId, (handled.get(ctx.messageId) ?? 0) + 1);
      await gate;
    },
  });
  cleanups.push(() => endpoint.stop());
  const settlementErrors: unknown[] = [];
  endpoint.on('settlementFailed', (e) => settlementErrors.push(e.error));
  await endpoint.start();
  await waitFor('the first handlers to start', () => handled.size === 10, 10_000);

  // Another process takes the write lock while ten handlers are about to finish: their acks and the next claims wait for it.
  const holdMs = 1_500;
  const lock = await holdWriteLock(path, holdMs);
  const stall = stallMonitor();
  gateOpen();
  await lock.released;
  await waitFor('every message to be acked', () => {
    const db = new Database(path, { readonly: true });
    try {
      return db.prepare('SELECT count(*) FROM messages').pluck().get() === 0;
    } finally {
      db.close();
    }
  }, 20_000);
  const stallMs = stall.stop();
  console.log(`longest event-loop stall while another process held the write lock for ${holdMs} ms: ${stallMs.toFixed(0)} ms`);
  expect(stallMs).toBeLessThan(250);
  expect(handled.size).toBe(messages);
  expect([...handled.values()].every((n) => n === 1)).toBe(true);
  // Locked out past busyTimeoutMs, the acks fail as a busy database (still held, tried again), never as a lost delivery.
  if (busyTimeoutMs === undefined) expect(settlementErrors).toEqual([]);
  else {
    expect(settlementErrors.length).toBeGreaterThan(0);
    expect(settlementErrors.every((e) => e instanceof DatabaseBusyError)).toBe(true);
  }
});

it('a purge of many error entries lets other writes commit between its chunks, and leaves entries that arrive meanwhile', async () => {
  const path = join(dir, 'purge.db');
  const transport = new SqliteTransport({ path });
  cleanups.push(() => transport.close());
  const db = new Database(path);
  cleanups.push(() => void db.close());
  db.exec(`INSERT INTO queues (name, kind) VALUES ('error', 'error')`);
  db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)
    INSERT INTO error_messages (queue, id, body, headers, visible_at, deliveries, enqueued_at) SELECT 'error', 'e-' || i, x'00', '{}', 0, 0, 0 FROM n`);

  const order: string[] = [];
  const purged = transport.errorQueue.purge('error').then((n) => {
    order.push('purge');
    return n;
  });
  const sent = transport.send('other', { id: 'o', body: new Uint8Array([1]), headers: {} }).then(() => order.push('send'));
  const arrived = transport.send('error', { id: 'late', body: new Uint8Array([1]), headers: {} });
  expect(await purged).toBe(3_000);
  await Promise.all([sent, arrived]);
  expect(order).toEqual(['send', 'purge']);
  expect(db.prepare(`SELECT id FROM error_messages`).pluck().all()).toEqual(['late']);
});

it('a long sendBatch is written in chunks: a settlement requested meanwhile commits before the batch ends', async () => {
  const path = join(dir, 'batch.db');
  const transport = new SqliteTransport({ path });
  cleanups.push(() => transport.close());
  await transport.send('work', { id: 'first', body: new Uint8Array([1]), headers: {} });
  const got: Delivery[] = [];
  await transport.consume('work', (d) => got.push(d), { prefetch: 1 });
  await waitFor('the first delivery', () => got.length === 1, 5_000);

  const order: string[] = [];
  const batch = Array.from({ length: 2_500 }, (_, i) => ({ id: `b-${i}`, body: new Uint8Array([i % 256]), headers: {} }));
  const sent = transport.sendBatch('bulk', batch).then(() => order.push('batch'));
  const acked = got[0]!.ack().then(() => order.push('ack'));
  await Promise.all([sent, acked]);
  expect(order).toEqual(['ack', 'batch']);
  const db = new Database(path, { readonly: true });
  cleanups.push(() => void db.close());
  expect(db.prepare(`SELECT count(*) FROM messages WHERE queue = 'bulk'`).pluck().get()).toBe(2_500);
  expect(db.prepare(`SELECT id FROM messages WHERE queue = 'bulk' ORDER BY seq LIMIT 1 OFFSET 2499`).pluck().get()).toBe('b-2499');
});

it('the deduplication store waits out another process\'s write lock without stalling the event loop', async () => {
  const path = join(dir, 'dedup.db');
  const store = new SqliteDeduplicationStore({ path });
  cleanups.push(() => store.close());
  const first = await store.begin('a', 1_000, 30_000);
  expect(first.outcome).toBe('claimed');

  const lock = await holdWriteLock(path, 1_000);
  const stall = stallMonitor();
  await store.complete('a', first.outcome === 'claimed' ? first.token : '', 2_000);
  const claimed = await store.begin('b', 2_000, 30_000);
  const stallMs = stall.stop();
  await lock.released;
  console.log(`longest event-loop stall in the deduplication store while another process held the write lock: ${stallMs.toFixed(0)} ms`);
  expect(stallMs).toBeLessThan(250);
  expect(claimed.outcome).toBe('claimed');
  expect((await store.begin('a', 3_000, 30_000)).outcome).toBe('duplicate');
});

it('consume() on a queue new to the file waits out another connection\'s write lock, as a send does', async () => {
  const path = join(dir, 'consume-new-queue.db');
  const clock = new FakeClock(1_000);
  const transport = new SqliteTransport({ path, clock, pollIntervalMs: 60_000 });
  cleanups.push(() => transport.close());
  const other = new Database(path);
  cleanups.push(() => void other.close());

  // Another connection holds the write lock for 300 ms of the transport's clock.
  other.exec('BEGIN IMMEDIATE');
  const sent = transport.send('sent', { id: 's', body: new Uint8Array([1]), headers: {} });
  const consumed = transport.consume('fresh', () => undefined, { prefetch: 1 });
  const outcomes: string[] = [];
  sent.then(() => outcomes.push('sent'), (e) => outcomes.push(`send failed: ${e}`));
  consumed.then(() => outcomes.push('consumed'), (e) => outcomes.push(`consume failed: ${e}`));
  await clock.advance(300);
  expect(outcomes).toEqual([]);
  other.exec('COMMIT');
  await clock.advance(100);

  expect(outcomes.sort()).toEqual(['consumed', 'sent']);
  expect(other.prepare(`SELECT kind FROM queues WHERE name = 'fresh'`).pluck().get()).toBe('queue');
});
