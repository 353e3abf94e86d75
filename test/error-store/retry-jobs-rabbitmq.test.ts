/**
 * Retry jobs from a SQLite error store to the shared RabbitMQ: two jobs over
 * the same 10,000 entries on two store connections send each entry once
 * between them (confirmed publishes, up to 64 in flight each), and a
 * destination that does not exist is refused without being created.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RetryJobs } from '../../src/error-store/retry-jobs.js';
import { ErrorStore } from '../../src/error-store/store.js';
import { HEADER } from '../../src/headers/names.js';
import { rabbitSkipReason } from '../support/brokers.js';
import { rabbitScratch } from '../support/rabbit-scratch.js';
import { failureHeaders, scratchDir } from './support.js';

const skip = await rabbitSkipReason();
const scratch = rabbitScratch('rjobs');
afterAll(() => scratch.cleanup());

describe.skipIf(Boolean(skip))('retry jobs to RabbitMQ', () => {
  it('two concurrent jobs send 10,000 stored entries once between them, fast', async () => {
    const work = scratch.queueName('work');
    const missing = scratch.queueName('missing');
    const channel = await scratch.channel();
    await channel.assertQueue(work, { durable: true });
    const dir = scratchDir();
    const store = ErrorStore.open(join(dir, 'errors.db'));
    const other = ErrorStore.open(store.path);
    const N = 10_000;
    const entries = Array.from({ length: N + 5 }, (_, i) => ({
      errorQueue: 'error',
      messageId: `msg-${i}`,
      headers: { ...failureHeaders({ message: 'db timeout', queue: i < N ? work : missing }), [HEADER.entryId]: `entry-${i}` },
      body: Buffer.from(`{"n":${i}}`),
    }));
    for (let i = 0; i < entries.length; i += 1_000) await store.ingest(entries.slice(i, i + 1_000));
    const transportA = scratch.open();
    const transportB = scratch.open();
    const a = new RetryJobs({ store, transport: transportA });
    const b = new RetryJobs({ store: other, transport: transportB });
    const [jobA, jobB] = await Promise.all([a.create({ filter: {} }, { by: 'alice' }), b.create({ filter: {} }, { by: 'bob' })]);
    const started = performance.now();
    const [doneA, doneB] = await Promise.all([a.run(jobA.id), b.run(jobB.id)]);
    const seconds = (performance.now() - started) / 1_000;
    console.log(`retry jobs to RabbitMQ: ${N} entries sent by two jobs in ${seconds.toFixed(2)} s (${Math.round(N / seconds)}/s); alice ${doneA.sent}, bob ${doneB.sent}`);
    expect(doneA.sent + doneB.sent).toBe(N);
    // A refused entry is given back (still failed), so the other job may find and refuse it too.
    expect(doneA.refused + doneB.refused).toBeGreaterThanOrEqual(5);
    expect(doneA.refused + doneB.refused).toBeLessThanOrEqual(10);
    expect(doneB.sent + doneB.alreadyHandled + doneB.refused).toBe(N + 5);
    expect(doneA.sent + doneA.alreadyHandled + doneA.refused).toBe(N + 5);
    expect(jobA.snapshotSeq).toBe(N + 5);
    // The missing destination was refused, never created.
    expect(a.items(jobA.id, { afterSeq: N }).concat(b.items(jobB.id, { afterSeq: N })).filter((i) => i.result === 'refused')[0]!.detail).toContain(`no queue '${missing}' exists`);
    const probe = await scratch.channel();
    await expect(probe.checkQueue(missing)).rejects.toThrow(/404/);
    // Every message arrived once, with its id.
    const seen = new Map<string, number>();
    const reader = await scratch.channel();
    await reader.prefetch(1_000);
    await new Promise<void>((resolve) => {
      void reader.consume(work, (m) => {
        if (!m) return;
        const id = String(m.properties.messageId);
        seen.set(id, (seen.get(id) ?? 0) + 1);
        reader.ack(m);
        if (seen.size === N) resolve();
      });
    });
    expect(seen.size).toBe(N);
    expect(Math.max(...seen.values())).toBe(1);
    expect((await channel.checkQueue(work)).messageCount).toBe(0);
    expect(store.count({ status: 'retried' })).toBe(N);
    expect(store.count({ status: 'failed' })).toBe(5);
    other.close();
    store.close();
  }, 120_000);
});
