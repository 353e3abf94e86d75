/**
 * Deadlines on every transport: an endpoint and a producer on the real
 * broker, with the system clock and short times (a deadline of 1 s, delayed
 * retries of 300 ms), so the broker's own delays are part of what is tested.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { constant } from '../../src/backoff/index.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { RecoverabilityOptions } from '../../src/endpoint/options.js';
import { HEADER } from '../../src/headers/names.js';
import { Producer } from '../../src/producer/producer.js';
import type { Delivery, Subscription, Transport } from '../../src/transport/types.js';
import type { ConformanceTarget } from './suite.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves with the arguments of the endpoint's first `event`, or rejects after `timeoutMs`. */
function once<K extends 'deadLettered' | 'discarded'>(endpoint: Endpoint, event: K, timeoutMs = 10_000): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} event within ${timeoutMs} ms; stats ${JSON.stringify(endpoint.stats)}`)), timeoutMs);
    endpoint.on(event, (args) => {
      clearTimeout(timer);
      resolve(args as unknown as Record<string, unknown>);
    });
  });
}

export function describeDeadlineConformance(target: ConformanceTarget): void {
  describe.skipIf(Boolean(target.skip))(`deadline conformance: ${target.name}`, () => {
    let transport: Transport | undefined;
    const endpoints: Endpoint[] = [];
    const subs: Subscription[] = [];
    const queueName = (label: string) => `conf-${label}-${randomUUID().slice(0, 8)}`;

    afterEach(async () => {
      for (const endpoint of endpoints.splice(0)) await endpoint.stop({ timeoutMs: 2_000 });
      for (const sub of subs.splice(0)) await sub.close().catch(() => undefined);
      await transport?.close();
      transport = undefined;
    });

    /** A fresh transport and an endpoint on it whose handler records when each attempt started and failed. */
    const setup = async (recoverability: RecoverabilityOptions) => {
      transport = await target.create();
      const queue = queueName('deadline');
      const errorQueue = queueName('deadline-error');
      const attempts: { startedAt: number; failedAt: number }[] = [];
      const endpoint = new Endpoint({
        name: queue,
        transport,
        recoverability: { errorQueue, ...recoverability },
        handler: () => {
          const startedAt = Date.now();
          attempts.push({ startedAt, failedAt: Date.now() });
          throw new Error('always fails');
        },
      });
      endpoints.push(endpoint);
      await endpoint.start();
      return { transport, queue, errorQueue, endpoint, attempts, producer: new Producer({ transport }) };
    };

    /** The messages that reach `queue` within `waitMs`, acked. */
    const collect = async (t: Transport, queue: string, count: number, waitMs: number): Promise<Delivery[]> => {
      const got: Delivery[] = [];
      subs.push(
        await t.consume(
          queue,
          (d) => {
            got.push(d);
            void d.ack();
          },
          { prefetch: 10, leaseMs: 30_000 },
        ),
      );
      const until = Date.now() + waitMs;
      while (got.length < count && Date.now() < until) await sleep(20);
      return got;
    };

    it('a message sent already expired goes to the error queue with reason expired; its handler never runs', async () => {
      const s = await setup({});
      const deadLettered = once(s.endpoint, 'deadLettered');
      await s.producer.send(s.queue, { n: 1 }, { id: 'expired-on-arrival', expiresAt: new Date(Date.now() - 1_000) });
      expect((await deadLettered)['reason']).toBe('expired');
      const [copy] = await collect(s.transport, s.errorQueue, 1, 10_000);
      expect(copy!.id).toBe('expired-on-arrival');
      expect(copy!.headers[HEADER.failureReason]).toBe('expired');
      expect(copy!.headers[HEADER.failureErrorName]).toBe('DeadlineExpiredError');
      expect(s.attempts).toHaveLength(0);
    });

    it('with deadlineMs, a message whose handler always fails reaches the error queue as expired, no retry scheduled past the deadline', async () => {
      const delayMs = 300;
      const s = await setup({ immediateRetries: 0, delayedRetries: 20, delayedBackoff: constant(delayMs), deadlineMs: 1_000 });
      const retries: number[] = [];
      s.endpoint.on('delayedRetry', (e) => retries.push(e.delayMs));
      const deadLettered = once(s.endpoint, 'deadLettered');
      await s.producer.send(s.queue, { n: 2 });
      expect((await deadLettered)['reason']).toBe('expired');
      const [copy] = await collect(s.transport, s.errorQueue, 1, 10_000);
      expect(copy!.headers[HEADER.failureReason]).toBe('expired');
      const deadlineAt = Number(copy!.headers[HEADER.deadlineAt]);
      const first = s.attempts[0]!.startedAt;
      // The deadline counts from the first attempt, taken just before the handler ran.
      expect(deadlineAt).toBeLessThanOrEqual(first + 1_000);
      expect(deadlineAt).toBeGreaterThan(first + 800);
      // At most ceil(1000 / 300) = 4 attempts fit; at least the first retry (due at 300 ms) does.
      expect(s.attempts.length).toBeGreaterThanOrEqual(2);
      expect(s.attempts.length).toBeLessThanOrEqual(4);
      expect(Number(copy!.headers[HEADER.failureAttempts])).toBe(s.attempts.length);
      // Every attempt started before the deadline, and every retry was due before it.
      for (const a of s.attempts) expect(a.startedAt).toBeLessThan(deadlineAt);
      expect(retries.every((d) => d === delayMs)).toBe(true);
      for (const a of s.attempts.slice(0, retries.length)) expect(a.failedAt + delayMs).toBeLessThan(deadlineAt);
      // Expired either when the next retry would land past the deadline, or on arrival of a retry the broker brought back late.
      expect([s.attempts.length - 1, s.attempts.length]).toContain(retries.length);
    });

    it("onExpired 'discard' acknowledges an expired message: nothing in the error queue, no redelivery", async () => {
      const s = await setup({ onExpired: 'discard' });
      const discarded = once(s.endpoint, 'discarded');
      await s.producer.send(s.queue, { n: 3 }, { expiresAt: Date.now() - 1 });
      expect((await discarded)['reason']).toBe('expired');
      expect(await collect(s.transport, s.errorQueue, 1, 500)).toHaveLength(0);
      expect(s.attempts).toHaveLength(0);
      expect(s.endpoint.stats).toMatchObject({ discarded: 1, deadLettered: 0, inFlight: 0 });
    });
  });
}
