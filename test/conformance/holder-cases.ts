/**
 * One holder at a time, on every transport: while prefetch goes up and
 * down, consumers pause and resume, flow control probes one message at a
 * time, and the connection is cut, no message is in two handlers at once
 * unless the earlier handler's lease ran out first. Each handler's start
 * and end are logged with the lease end known at its start (the lease
 * length where deliveries are leased; without leases any overlap counts),
 * and `findOverlaps` checks the log.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { constant } from '../../src/backoff/index.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { EndpointOptions } from '../../src/endpoint/options.js';
import { Producer } from '../../src/producer/producer.js';
import { seededRandom } from '../../src/time/random.js';
import type { Delivery, Subscription, Transport } from '../../src/transport/types.js';
import { describeOverlaps, findOverlaps, HoldLog } from '../support/holds.js';
import type { ConformanceTarget } from './suite.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The lease the consumers ask for: far longer than any test here, so an overlap is never excused by a lease running out. */
const LEASE_MS = 30_000;

/**
 * The lease a delivery runs under: `LEASE_MS` where the transport leases
 * for a time (its deliveries can extend it), none (any overlap counts)
 * where it does not: memory, and RabbitMQ, whose lease is the connection
 * (see `CuttableTransport.cutEndsLeases`).
 */
const leaseOf = (delivery: Delivery) => (delivery.extendLease ? LEASE_MS : Infinity);

/** What {@link observed} saw of the transport an endpoint used. */
interface Observed {
  /** The lease of the deliveries handed out (see {@link leaseOf}), for handlers that see a message context, not the delivery. */
  leaseMs: number;
  /** Every prefetch the endpoints' flow control set, in order. */
  readonly prefetches: number[];
  /** How many times flow control paused a subscription. */
  pauses: number;
}

/** `transport`, with what endpoints do on it noted in `seen`: the lease of its deliveries, and flow control's prefetch changes and pauses. */
function observed(transport: Transport, seen: Observed): Transport {
  return new Proxy(transport, {
    get(target, key) {
      if (key !== 'consume') {
        // Methods run on the transport itself: its private fields are not the proxy's.
        const value = Reflect.get(target, key, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      }
      const consume: Transport['consume'] = async (queue, listener, options) => {
        const sub = await target.consume(queue, (d) => {
          seen.leaseMs = leaseOf(d);
          listener(d);
        }, options);
        return {
          pause: () => {
            seen.pauses++;
            return sub.pause();
          },
          resume: () => sub.resume(),
          setPrefetch: (prefetch) => {
            seen.prefetches.push(prefetch);
            return sub.setPrefetch(prefetch);
          },
          close: () => sub.close(),
        };
      };
      return consume;
    },
  });
}

/** Waits until `done()`, polling, or fails naming `what`. */
async function until(done: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

export function describeOneHolderConformance(target: ConformanceTarget): void {
  describe.skipIf(Boolean(target.skip))(`one holder at a time: ${target.name}`, () => {
    const cleanups: (() => Promise<unknown>)[] = [];
    const queueName = (label: string) => `conf-${label}-${randomUUID().slice(0, 8)}`;

    afterEach(async () => {
      for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
    });

    const open = async () => {
      const transport = await target.create();
      cleanups.push(() => transport.close());
      return transport;
    };

    /**
     * Endpoints on `queue` whose handler logs its holds, waits `holdMs` (a
     * few ms by default), and fails the first round (both attempts) of
     * every third message: a message failing as a whole backs the consumer
     * off, two failures in a row start rate limiting, and its delayed retry
     * comes back 50 ms later. Resolves what flow control did.
     */
    const startEndpoints = async (
      transport: Transport,
      queue: string,
      log: HoldLog,
      handled: Set<string>,
      variants: readonly (readonly [string, Partial<EndpointOptions<number>>])[],
      holdMs: readonly [min: number, max: number] = [2, 12],
    ): Promise<Observed> => {
      const seen: Observed = { leaseMs: Infinity, prefetches: [], pauses: 0 };
      const leased = observed(transport, seen);
      const random = seededRandom(7);
      for (const [holder, options] of variants) {
        const endpoint = new Endpoint<number>({
          name: queue,
          transport: leased,
          leaseMs: LEASE_MS,
          recoverability: { errorQueue: `${queue}-error`, immediateRetries: 1, delayedRetries: 2, delayedBackoff: constant(50) },
          ...options,
          handler: async (n, ctx) => {
            const end = log.start(ctx.messageId, holder, seen.leaseMs);
            try {
              await sleep(holdMs[0] + Math.floor(random() * (holdMs[1] - holdMs[0])));
              if (n % 3 === 0 && ctx.delayedAttempt === 0) throw new Error('the first round fails');
            } finally {
              end();
            }
            handled.add(ctx.messageId);
          },
        });
        cleanups.push(() => endpoint.stop({ timeoutMs: 2_000 }));
        await endpoint.start();
      }
      return seen;
    };

    it('two consumers under setPrefetch up and down, pause and resume, releases: no message in two holders at once', async () => {
      const transport = await open();
      const queue = queueName('holder');
      const log = new HoldLog();
      const acked = new Set<string>();
      const random = seededRandom(42);
      const listener = (holder: string) => (d: Delivery) => {
        const end = log.start(d.id, holder, leaseOf(d));
        void sleep(Math.floor(random() * 15)).then(async () => {
          const release = random() < 0.2;
          end();
          if (release) return d.release();
          await d.ack();
          acked.add(d.id);
        }).catch(() => undefined);
      };
      const subs: Subscription[] = [];
      for (const holder of ['a', 'b']) {
        const sub = await transport.consume(queue, listener(holder), { prefetch: 3, leaseMs: LEASE_MS });
        cleanups.push(() => sub.close());
        subs.push(sub);
      }
      const count = 60;
      for (let i = 0; i < count; i++) await transport.send(queue, { id: `h-${i}`, body: new Uint8Array([i]), headers: {} });
      const [a, b] = subs as [Subscription, Subscription];
      const prefetches = [1, 5, 2, 1, 8, 1, 3];
      for (let step = 0; acked.size < count; step++) {
        if (step > 1_500) throw new Error(`only ${acked.size} of ${count} messages acked`);
        await a.setPrefetch(prefetches[step % prefetches.length]!);
        if (step % 4 === 1) await b.pause();
        if (step % 4 === 3) await b.resume();
        await sleep(20);
      }
      await b.resume();
      expect(acked.size).toBe(count);
      expect(log.holds.length).toBeGreaterThanOrEqual(count);
      const overlaps = findOverlaps(log.holds);
      expect(overlaps, describeOverlaps(overlaps)).toEqual([]);
    });

    it('endpoints with consumer backoff and rate limiting probing at prefetch 1: no message in two handlers at once', async () => {
      const transport = await open();
      const queue = queueName('holder-flow');
      const log = new HoldLog();
      const handled = new Set<string>();
      const seen = await startEndpoints(transport, queue, log, handled, [
        ['backoff', { concurrency: 4, flowControl: { consumerBackoff: { multiplierMs: 40, maxMs: 200 } } }],
        ['rate-limit', { concurrency: 4, flowControl: { rateLimit: { consecutiveFailures: 2, waitMs: 60 } } }],
      ]);
      const producer = new Producer<number>({ transport });
      const count = 30;
      for (let i = 0; i < count; i++) await producer.send(queue, i, { id: `f-${i}` });
      await until(() => handled.size === count, `${count} messages handled, have ${handled.size}`);
      // Every third message failed its first round: two more holds each; and flow control paused and probed at prefetch 1.
      expect(log.holds.length).toBeGreaterThanOrEqual(count + (2 * count) / 3);
      expect(seen.pauses).toBeGreaterThan(0);
      expect(seen.prefetches).toContain(1);
      const overlaps = findOverlaps(log.holds);
      expect(overlaps, describeOverlaps(overlaps)).toEqual([]);
    });

    const cutReason = target.createCuttable ? undefined : (target.noConnection ?? 'the target gives no way to cut its connection');
    it.skipIf(Boolean(cutReason))(`a cut connection and the reconnect: no message in two handlers at once${cutReason ? ` (skipped: ${cutReason})` : ''}`, async () => {
      const cuttable = await target.createCuttable!();
      cleanups.push(() => cuttable.dispose());
      cleanups.push(() => cuttable.transport.close());
      const queue = queueName('holder-cut');
      const log = new HoldLog();
      const handled = new Set<string>();
      // Handlers hold 100 to 400 ms, longer than a reconnect takes, so some are running when the connection is cut and after it is back.
      await startEndpoints(cuttable.transport, queue, log, handled, [
        ['one', { concurrency: 4 }],
        ['two', { concurrency: 4, flowControl: { consumerBackoff: { multiplierMs: 40, maxMs: 200 } } }],
      ], [100, 400]);
      const producer = new Producer<number>({ transport: cuttable.transport });
      const count = 24;
      for (let i = 0; i < count; i++) await producer.send(queue, i, { id: `c-${i}` });
      await until(() => handled.size >= 4, 'the first 4 messages handled');
      const cutAt = performance.now();
      expect(cuttable.cut()).toBeGreaterThan(0);
      await until(() => handled.size === count, `${count} messages handled after the cut, have ${handled.size}`, 60_000);
      const overlaps = findOverlaps(log.holds, { leasesLostAt: cuttable.cutEndsLeases ? [cutAt] : [] });
      expect(overlaps, `${describeOverlaps(overlaps)}\n(the connection was cut at ${cutAt.toFixed(1)})`).toEqual([]);
    }, 90_000);
  });
}
