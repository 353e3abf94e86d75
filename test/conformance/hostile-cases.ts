/**
 * Hostile failures on every transport: whatever a handler throws (a value
 * whose getters or Proxy traps throw, null, a symbol, a huge non-ASCII
 * message or stack) ends in the error queue within its configured attempts,
 * with a failure story the broker accepts, while the worker goes on handling
 * other messages.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { constant } from '../../src/backoff/index.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { HEADER } from '../../src/headers/names.js';
import { Producer } from '../../src/producer/producer.js';
import type { Delivery, Subscription, Transport } from '../../src/transport/types.js';
import { HOSTILE_VALUES } from '../support/hostile-values.js';
import type { ConformanceTarget } from './suite.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** immediateRetries 1 and delayedRetries 1: two rounds of two attempts. */
const ATTEMPTS = 4;

export function describeHostileFailureConformance(target: ConformanceTarget): void {
  describe.skipIf(Boolean(target.skip))(`hostile failures: ${target.name}`, () => {
    let transport: Transport | undefined;
    let endpoint: Endpoint<{ hostile?: number }> | undefined;
    let sub: Subscription | undefined;

    afterEach(async () => {
      await endpoint?.stop({ timeoutMs: 2_000 });
      await sub?.close().catch(() => undefined);
      await transport?.close();
      endpoint = undefined;
      sub = undefined;
      transport = undefined;
    });

    it('every hostile thrown value ends in the error queue within its attempts, while a normal message is handled', async () => {
      transport = await target.create();
      const queue = `conf-hostile-${randomUUID().slice(0, 8)}`;
      const errorQueue = `${queue}-error`;
      const calls = new Map<string, number>();
      endpoint = new Endpoint<{ hostile?: number }>({
        name: queue,
        transport,
        concurrency: 4,
        recoverability: { errorQueue, immediateRetries: 1, delayedRetries: 1, delayedBackoff: constant(200) },
        handler: (message, ctx) => {
          calls.set(ctx.messageId, (calls.get(ctx.messageId) ?? 0) + 1);
          if (message.hostile !== undefined) throw HOSTILE_VALUES[message.hostile]![1]();
        },
      });
      await endpoint.start();
      const producer = new Producer({ transport });
      for (const [index] of HOSTILE_VALUES.entries()) await producer.send(queue, { hostile: index }, { id: `hostile-${index}` });
      await producer.send(queue, {}, { id: 'normal' });
      const until = Date.now() + 20_000;
      const s = () => endpoint!.stats;
      while ((s().deadLettered < HOSTILE_VALUES.length || s().handled < 1) && Date.now() < until) await sleep(20);
      expect(s()).toMatchObject({ handled: 1, deadLettered: HOSTILE_VALUES.length, settlementFailures: 0 });
      expect(calls.get('normal')).toBe(1);
      for (const [index] of HOSTILE_VALUES.entries()) expect(calls.get(`hostile-${index}`)).toBe(ATTEMPTS);

      const copies: Delivery[] = [];
      sub = await transport.consume(errorQueue, (d) => {
        copies.push(d);
        void d.ack();
      }, { prefetch: 20, leaseMs: 30_000 });
      while (copies.length < HOSTILE_VALUES.length && Date.now() < until + 10_000) await sleep(20);
      expect(copies.map((c) => c.id).sort()).toEqual(HOSTILE_VALUES.map((_, i) => `hostile-${i}`).sort());
      for (const copy of copies) {
        expect(copy.headers[HEADER.failureReason]).toBe('retries-exhausted');
        expect(copy.headers[HEADER.failureAttempts]).toBe(String(ATTEMPTS));
      }
    });
  });
}
