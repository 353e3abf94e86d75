import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { RetryJobs } from '../../src/error-store/retry-jobs.js';
import { ErrorStore } from '../../src/error-store/store.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { seededRandom } from '../../src/time/random.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import type { Transport } from '../../src/transport/types.js';
import { failureHeaders, scratchDir } from './support.js';

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function setup(options: { clock?: FakeClock } = {}) {
  const dir = scratchDir();
  const clock = options.clock;
  const transport = new SqliteTransport({ path: join(dir, 'app.db'), ...(clock ? { clock } : {}) });
  const store = ErrorStore.open(join(dir, 'errors.db'), clock ? { clock } : {});
  closers.push(() => transport.close(), () => store.close());
  // The destination exists: consuming registers it.
  await (await transport.consume('orders', () => undefined, { prefetch: 1 })).close();
  return { dir, transport, store };
}

/** Stores `n` failed entries that failed on `queue`. */
async function fill(store: ErrorStore, n: number, options: { prefix?: string; queue?: string; message?: string } = {}) {
  const prefix = options.prefix ?? 'm';
  const entries = Array.from({ length: n }, (_, i) => ({
    errorQueue: 'error',
    messageId: `${prefix}${i}`,
    headers: { ...failureHeaders({ message: options.message ?? 'db timeout', queue: options.queue ?? 'orders' }), [HEADER.entryId]: `${prefix}-entry-${i}` },
    body: Buffer.from(`{"n":${i}}`),
  }));
  for (let i = 0; i < entries.length; i += 1_000) await store.ingest(entries.slice(i, i + 1_000));
}

/** Messages on a queue of the SQLite transport, by id. */
function onQueue(transport: SqliteTransport, queue: string): Map<string, number> {
  const db = new Database(transport.path, { readonly: true });
  try {
    return new Map(db.prepare<[string], [string, number]>('SELECT id, count(*) FROM messages WHERE queue = ? GROUP BY id').raw(true).all(queue));
  } finally {
    db.close();
  }
}

describe('RetryJobs', () => {
  it('sends back what the filter selected when the job was created, never entries that arrive later', async () => {
    const { transport, store } = await setup();
    await fill(store, 300);
    const jobs = new RetryJobs({ store, transport });
    const job = await jobs.create({ filter: { errorQueue: 'error' } }, { by: 'ops' });
    expect(job).toMatchObject({ total: 300, state: 'pending', snapshotSeq: 300 });
    await fill(store, 50, { prefix: 'late' });
    const done = await jobs.run(job.id);
    expect(done).toMatchObject({ state: 'done', total: 300, sent: 300, refused: 0, alreadyHandled: 0, failed: 0 });
    const sent = onQueue(transport, 'orders');
    expect(sent.size).toBe(300);
    expect([...sent.keys()].some((id) => id.startsWith('late'))).toBe(false);
    expect(store.count({ status: 'failed' })).toBe(50);
    expect(store.count({ status: 'retried' })).toBe(300);
    const first = store.search({ status: 'retried' }, { limit: 1 }).entries[0]!;
    expect(first).toMatchObject({ lastRetriedBy: 'ops', retriedTo: 'orders', retriedCount: 1 });
    expect(jobs.items(job.id).every((item) => item.result === 'sent')).toBe(true);
    // Done is done: running again sends nothing.
    expect(await jobs.run(job.id)).toMatchObject({ state: 'done', sent: 300 });
    expect([...onQueue(transport, 'orders').values()].every((n) => n === 1)).toBe(true);
  });

  it('refuses a missing destination, an error queue and a queue not allowed; releases those entries', async () => {
    const { transport, store } = await setup();
    await fill(store, 3, { prefix: 'a', queue: 'orders' });
    await fill(store, 2, { prefix: 'b', queue: 'gone' });
    const jobs = new RetryJobs({ store, transport });
    const job = await jobs.create({ filter: {} }, { by: 'ops' });
    const done = await jobs.run(job.id);
    expect(done).toMatchObject({ state: 'done', sent: 3, refused: 2 });
    const refused = jobs.items(job.id).filter((i) => i.result === 'refused');
    expect(refused.map((i) => i.detail)).toEqual([expect.stringContaining("no queue 'gone' exists"), expect.stringContaining("no queue 'gone' exists")]);
    expect(store.count({ status: 'failed' })).toBe(2);
    const toError = await jobs.create({ filter: {} }, { by: 'ops', to: 'error' });
    expect(await jobs.run(toError.id)).toMatchObject({ refused: 2, sent: 0 });
    expect(jobs.items(toError.id)[0]!.detail).toContain('is an error queue');
    const notAllowed = await jobs.create({ filter: {} }, { by: 'ops', to: 'orders', allowedQueues: ['billing'] });
    expect(await jobs.run(notAllowed.id)).toMatchObject({ refused: 2, sent: 0 });
    expect(store.count({ status: 'failed' })).toBe(2);
  });

  it('two jobs over the same entries on two store connections send each entry once between them', async () => {
    const { transport, store } = await setup();
    await fill(store, 2_000);
    const other = ErrorStore.open(store.path);
    closers.push(() => other.close());
    const a = new RetryJobs({ store, transport });
    const b = new RetryJobs({ store: other, transport });
    const [jobA, jobB] = await Promise.all([a.create({ filter: {} }, { by: 'alice' }), b.create({ filter: {} }, { by: 'bob' })]);
    const [doneA, doneB] = await Promise.all([a.run(jobA.id), b.run(jobB.id)]);
    expect(doneA.sent + doneB.sent).toBe(2_000);
    expect(doneA.sent + doneA.alreadyHandled).toBe(2_000);
    expect(doneB.sent + doneB.alreadyHandled).toBe(2_000);
    const sent = onQueue(transport, 'orders');
    expect(sent.size).toBe(2_000);
    expect(Math.max(...sent.values())).toBe(1);
    expect(store.count({ status: 'retried' })).toBe(2_000);
  });

  it('one job run by two processes (two store connections): the second is refused while the first holds the lease; each entry is sent once', async () => {
    const { transport, store } = await setup();
    await fill(store, 300);
    const other = ErrorStore.open(store.path);
    closers.push(() => other.close());
    const job = await new RetryJobs({ store, transport }).create({ filter: {} }, { by: 'dashboard' });
    const [first, second] = await Promise.allSettled([new RetryJobs({ store, transport }).run(job.id), new RetryJobs({ store: other, transport }).run(job.id)]);
    expect(first).toMatchObject({ status: 'fulfilled', value: { state: 'done', sent: 300 } });
    expect(second.status).toBe('rejected');
    expect((second as PromiseRejectedResult).reason.message).toMatch(new RegExp(`retry job ${job.id} is already running \\(run [^)]+, lease until .+\\); wait for it to end or pause it`));
    const sent = onQueue(transport, 'orders');
    expect(sent.size).toBe(300);
    expect(Math.max(...sent.values())).toBe(1);
  });

  it('a run whose lease ran out (its process froze) is taken over: the new run sends them, the old one stops without sending', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 23));
    const { transport, store } = await setup({ clock });
    await fill(store, 100);
    const other = ErrorStore.open(store.path, { clock });
    closers.push(() => other.close());
    // The first process freezes while it checks where its first entry goes.
    let thaw!: () => void;
    const frozen = new Promise<void>((resolve) => (thaw = resolve));
    let checking = false;
    const freezing: Transport = Object.create(transport) as Transport;
    Object.defineProperty(freezing, 'inspection', {
      get: () => ({
        queueKinds: async (queues: readonly string[]) => {
          checking = true;
          await frozen;
          return transport.inspection!.queueKinds!(queues);
        },
      }),
    });
    const a = new RetryJobs({ store, transport: freezing, clock, leaseMs: 30_000 });
    const job = await a.create({ filter: {} }, { by: 'cli' });
    const runA = a.run(job.id);
    while (!checking) await new Promise((resolve) => setImmediate(resolve));
    await expect(new RetryJobs({ store: other, transport, clock }).run(job.id)).rejects.toThrow('is already running');
    // Frozen past its lease: nothing renews it.
    other.database.prepare('UPDATE retry_jobs SET lease_until = ? WHERE id = ?').run(clock.now() - 1, job.id);
    const b = await new RetryJobs({ store: other, transport, clock }).run(job.id);
    expect(b).toMatchObject({ state: 'done', sent: 100 });
    thaw();
    const a2 = await runA;
    expect(a2.state).toBe('stopped');
    expect(a2.stopReason).toMatch(/^this run's lease ran out and run \S+ took the job over/);
    expect(new RetryJobs({ store, transport, clock }).get(job.id)).toMatchObject({ state: 'done', sent: 100 });
    const sent = onQueue(transport, 'orders');
    expect(sent.size).toBe(100);
    // Thawed, the old run saw its lease gone before sending: nothing went twice.
    expect(Math.max(...sent.values())).toBe(1);
  });

  it('keeps to the rate on the injected clock: 200/s for 10 s sends 2,000 within one burst', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 23));
    const { transport, store } = await setup({ clock });
    await fill(store, 3_000);
    const jobs = new RetryJobs({ store, transport, clock });
    const job = await jobs.create({ filter: {} }, { by: 'ops', ratePerSecond: 200 });
    const abort = new AbortController();
    const running = jobs.run(job.id, { signal: abort.signal });
    for (let t = 0; t < 10_000; t += 5) await clock.advance(5);
    abort.abort();
    const paused = await running;
    expect(paused.state).toBe('paused');
    expect(paused.sent).toBeGreaterThanOrEqual(2_000 - 20);
    expect(paused.sent).toBeLessThanOrEqual(2_000 + 21);
    expect(onQueue(transport, 'orders').size).toBe(paused.sent);
    // The unsent entries were given back, and resuming sends the rest exactly once.
    expect(store.count({ status: 'retrying' })).toBe(0);
    const resumed = await new RetryJobs({ store, transport }).run(job.id);
    expect(resumed).toMatchObject({ state: 'done', sent: 3_000 });
    const sent = onQueue(transport, 'orders');
    expect(sent.size).toBe(3_000);
    expect(Math.max(...sent.values())).toBe(1);
  });

  it('a crash between a send and its record sends those entries again on resume (same message id), nothing else twice', async () => {
    const { transport, store } = await setup();
    await fill(store, 600);
    const jobs = new RetryJobs({ store, transport });
    const job = await jobs.create({ filter: {} }, { by: 'ops' });
    const real = store.markRetriedMany.bind(store);
    let calls = 0;
    const spy = vi.spyOn(store, 'markRetriedMany').mockImplementation((...args) => (++calls === 2 ? Promise.reject(new Error('disk I/O error')) : real(...args)));
    const stopped = await jobs.run(job.id);
    spy.mockRestore();
    expect(stopped.state).toBe('stopped');
    expect(stopped.stopReason).toContain('could not record the sends: disk I/O error');
    const sentBefore = onQueue(transport, 'orders').size;
    expect(stopped.sent).toBeLessThan(sentBefore);
    expect(store.count({ status: 'retrying' })).toBe(sentBefore - stopped.sent);
    const resumed = await jobs.run(job.id);
    expect(resumed).toMatchObject({ state: 'done', sent: 600, failed: 0 });
    const sent = onQueue(transport, 'orders');
    expect(sent.size).toBe(600);
    const twice = [...sent.values()].filter((n) => n === 2).length;
    expect(twice).toBe(sentBefore - stopped.sent);
    expect(Math.max(...sent.values())).toBe(2);
  });

  it('stops after sends fail in a row (broker down), gives the entries back, and resumes when the broker is back', async () => {
    const { transport, store } = await setup();
    await fill(store, 100);
    let down = true;
    const flaky: Transport = Object.assign(Object.create(transport) as Transport, {
      send: (queue: string, message: Parameters<Transport['send']>[1]) => (down ? Promise.reject(new Error('connection refused')) : transport.send(queue, message)),
    });
    Object.defineProperty(flaky, 'inspection', { get: () => transport.inspection });
    const jobs = new RetryJobs({ store, transport: flaky, maxConsecutiveFailures: 5, random: seededRandom(1) });
    const job = await jobs.create({ filter: {} }, { by: 'ops' });
    const stopped = await jobs.run(job.id);
    expect(stopped.state).toBe('stopped');
    expect(stopped.stopReason).toMatch(/sends in a row failed \(last: connection refused\); is the broker reachable/);
    expect(stopped.sent).toBe(0);
    expect(stopped.failed).toBeGreaterThanOrEqual(5);
    expect(store.count({ status: 'failed' })).toBe(100);
    down = false;
    expect(await jobs.run(job.id)).toMatchObject({ state: 'done', sent: 100, failed: 0 });
    expect(onQueue(transport, 'orders').size).toBe(100);
  });

  it('a store that refuses a claim stops the job with the reason, and it resumes', async () => {
    const { transport, store } = await setup();
    await fill(store, 300);
    const jobs = new RetryJobs({ store, transport });
    const job = await jobs.create({ filter: {} }, { by: 'ops' });
    const spy = vi.spyOn(store, 'claim').mockRejectedValueOnce(new Error('database is locked'));
    const stopped = await jobs.run(job.id);
    spy.mockRestore();
    expect(stopped).toMatchObject({ state: 'stopped', sent: 0, stopReason: 'database is locked; resume the job when this is fixed' });
    expect(jobs.get(job.id)!.state).toBe('stopped');
    expect(await jobs.run(job.id)).toMatchObject({ state: 'done', sent: 300 });
  });

  it('a job for keys reports entries handled by someone else', async () => {
    const { transport, store } = await setup();
    await fill(store, 4);
    const jobs = new RetryJobs({ store, transport });
    await store.deleteOne('m-entry-1', 'tester');
    const job = await jobs.create({ keys: ['m-entry-0', 'm-entry-1', 'm-entry-2'] }, { by: 'ops' });
    expect(await jobs.run(job.id)).toMatchObject({ total: 3, sent: 2, alreadyHandled: 1 });
    await expect(jobs.create({ keys: ['nope'] }, { by: 'ops' })).rejects.toThrow('no entry nope in the store');
    await expect(jobs.create({ filter: {} }, { by: '' })).rejects.toThrow('options.by');
    expect(jobs.list().map((j) => j.id)).toEqual([job.id]);
  });
});
