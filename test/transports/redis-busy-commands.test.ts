/**
 * A consumer whose transport's command connection is busy (here: a `BLPOP`
 * blocking it, as a slow script or a queue of sends would) keeps reading and
 * settling: its reads have their own connection and do not wait for the
 * upkeep (promotion of due retries, takeover of expired leases) queued on
 * the command connection, and its settlements have theirs. A takeover of
 * expired leases beside the reads never lets the consumer hold more than its
 * prefetch. Works under a key prefix of its own on the shared server.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/transport/types.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { REDIS_URL, redisSkipReason } from '../support/brokers.js';
import { until } from '../support/own-servers.js';
import { deletePrefix } from '../support/redis-scratch.js';

const skip = await redisSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long the command connection stays blocked: far longer than the poll interval. */
const BLOCK_SECONDS = 4;
const POLL_MS = 50;

describe.skipIf(Boolean(skip))('a Redis consumer while the command connection is busy', () => {
  const prefix = `rbusy-${randomUUID().slice(0, 8)}`;
  const cleanups: (() => Promise<unknown>)[] = [];
  const open = () => {
    const t = new RedisTransport({ url: REDIS_URL, keyPrefix: prefix, connectionName: `${prefix}-conn`, checkServer: false, pollIntervalMs: POLL_MS, commandTimeoutMs: 30_000 });
    cleanups.push(() => t.close());
    return t;
  };
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    const admin = new Redis(REDIS_URL);
    await deletePrefix(admin, prefix);
    admin.disconnect();
  });

  /** A consumer that has read and acked one message; then its command connection is blocked. Resolves whether the block is still on. */
  async function blockedConsumer(prefetch: number, onDelivery: (d: Delivery) => void) {
    const queue = `q-${randomUUID().slice(0, 8)}`;
    const consumerSide = open();
    const producer = open();
    const handed: Delivery[] = [];
    await consumerSide.consume(
      queue,
      (d) => {
        handed.push(d);
        onDelivery(d);
      },
      { prefetch },
    );
    await producer.send(queue, { id: 'warm-up', body: text('w'), headers: {} });
    await until('the warm-up delivery', 10_000, () => handed.length === 1, 5);
    await handed[0]!.ack();
    handed.length = 0;
    let blocked = true;
    const block = consumerSide.client.blpop(`${prefix}:never-pushed`, BLOCK_SECONDS).finally(() => {
      blocked = false;
    });
    cleanups.push(() => block);
    // Several poll intervals pass: every upkeep from now on waits behind the block.
    await sleep(POLL_MS * 4);
    return { queue, producer, handed, isBlocked: () => blocked };
  }

  it('hands out new messages while the upkeep waits behind a blocked command connection', async () => {
    const c = await blockedConsumer(10, () => undefined);
    for (let i = 0; i < 5; i++) await c.producer.send(c.queue, { id: `m${i}`, body: text(String(i)), headers: {} });
    await until('five deliveries', BLOCK_SECONDS * 1000 + 5_000, () => c.handed.length === 5 || !c.isBlocked(), 5);
    expect(c.handed.map((d) => d.id).sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    expect(c.isBlocked()).toBe(true);
    for (const d of c.handed) await d.ack();
  });

  it('has its settlements answered, and goes on past its prefetch, while the command connection is blocked', async () => {
    const acked: string[] = [];
    const c = await blockedConsumer(2, (d) => {
      if (d.id === 'warm-up') return;
      d.ack().then(() => acked.push(d.id), () => undefined);
    });
    for (let i = 0; i < 6; i++) await c.producer.send(c.queue, { id: `m${i}`, body: text(String(i)), headers: {} });
    await until('six acks', BLOCK_SECONDS * 1000 + 5_000, () => acked.length === 6 || !c.isBlocked(), 5);
    expect(acked.sort()).toEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5']);
    expect(c.isBlocked()).toBe(true);
  });

  it('takes over expired leases beside its reads without ever holding more than its prefetch', async () => {
    const queue = `q-${randomUUID().slice(0, 8)}`;
    const producer = open();
    const abandoning = open();
    const taken: Delivery[] = [];
    const first = await abandoning.consume(queue, (d) => void taken.push(d), { prefetch: 4, leaseMs: 300 });
    for (let i = 0; i < 4; i++) await producer.send(queue, { id: `old${i}`, body: text(String(i)), headers: {} });
    await until('four deliveries left unsettled', 10_000, () => taken.length === 4, 5);
    await first.close();

    const prefetch = 3;
    let held = 0;
    let mostHeld = 0;
    const acked = new Map<string, number>();
    const consumer = open();
    await consumer.consume(
      queue,
      (d) => {
        held++;
        mostHeld = Math.max(mostHeld, held);
        void sleep(10)
          .then(() => d.ack())
          .then(() => acked.set(d.id, d.deliveryCount))
          .finally(() => held--);
      },
      { prefetch, leaseMs: 300 },
    );
    // New messages keep coming until well past the abandoned leases' end, so takeovers and reads overlap.
    const fresh: string[] = [];
    for (let i = 0; i < 120; i++) {
      fresh.push(`new${i}`);
      await producer.send(queue, { id: `new${i}`, body: text(String(i)), headers: {} });
      await sleep(5);
    }
    await until('every ack', 15_000, () => acked.size === 124, 5);
    expect(mostHeld).toBeLessThanOrEqual(prefetch);
    expect([...acked.keys()].sort()).toEqual([...fresh, 'old0', 'old1', 'old2', 'old3'].sort());
    for (let i = 0; i < 4; i++) expect(acked.get(`old${i}`)).toBe(2);
  });
});
