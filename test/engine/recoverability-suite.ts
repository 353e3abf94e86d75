/**
 * The engine's behaviour, run for real on a transport with a fake clock:
 * the NServiceBus attempts table, delays, the error queue and its headers,
 * unrecoverable errors, custom policies, requeue and log levels.
 */
import { describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { readRetryState } from '../../src/headers/retry-state.js';
import { discard, retryLater, type Decision } from '../../src/policy/decision.js';
import { RetryLaterError, UnrecoverableError } from '../../src/policy/errors.js';
import { exponential } from '../../src/backoff/exponential.js';
import { drain, sendJson, startEndpoint, type TransportFactory } from '../support/engine-harness.js';
import { recordingLogger } from '../support/recording-logger.js';

/** Seed 004: Attempts = (ImmediateRetries + 1) × (DelayedRetries + 1). */
const ATTEMPTS_TABLE: [immediate: number, delayed: number, attempts: number][] = [
  [0, 0, 1], [1, 0, 2], [2, 0, 3], [3, 0, 4], [0, 1, 2], [1, 1, 4],
  [2, 1, 6], [3, 1, 8], [1, 2, 6], [2, 2, 9], [1, 3, 8], [5, 3, 24],
];

class ValidationError extends Error {}
class MissingFieldError extends ValidationError {}

export function describeRecoverability(name: string, factory: TransportFactory): void {
  describe(`recoverability on ${name}`, () => {
    it.each(ATTEMPTS_TABLE)('immediate %i, delayed %i: %i attempts, then the error queue', async (immediate, delayed, expected) => {
      let calls = 0;
      const h = await startEndpoint(factory, {
        handler: () => {
          calls++;
          throw new Error('always fails');
        },
        recoverability: { immediateRetries: immediate, delayedRetries: delayed },
      });
      await sendJson(h.transport, 'orders', 'm-1', { n: 1 });
      await h.until(1);
      expect(calls).toBe(expected);
      expect(h.endpoint.stats.deadLettered).toBe(1);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      expect(dead!.id).toBe('m-1');
      expect(dead!.headers[HEADER.failureAttempts]).toBe(String(expected));
      expect(dead!.headers[HEADER.failureDelayedAttempts]).toBe(String(delayed));
      expect(dead!.headers[HEADER.failureReason]).toBe('retries-exhausted');
      await h.close();
    });

    it('waits 10, 20 and 30 s between rounds by default, and each round retries at once', async () => {
      const times: number[] = [];
      const h = await startEndpoint(factory, {
        handler: () => {
          times.push(h.clock.now());
          throw new Error('down');
        },
      });
      const start = h.clock.now();
      await sendJson(h.transport, 'orders', 'm-1', {});
      await h.until(1);
      expect(times).toHaveLength(24);
      const rounds = [0, 6, 12, 18].map((i) => times[i]! - start);
      const gaps = [rounds[1]! - rounds[0]!, rounds[2]! - rounds[1]!, rounds[3]! - rounds[2]!];
      // The broker holds each delay: never early, and late only by the transport's wake-up.
      expect(gaps[0]).toBeGreaterThanOrEqual(10_000);
      expect(gaps[1]).toBeGreaterThanOrEqual(20_000);
      expect(gaps[2]).toBeGreaterThanOrEqual(30_000);
      for (const [i, gap] of gaps.entries()) expect(gap).toBeLessThan((i + 1) * 10_000 + 1_000);
      for (const r of [0, 6, 12, 18]) for (let k = 1; k < 6; k++) expect(times[r + k]).toBe(times[r]);
      await h.close();
    });

    it('records the full story of the failure in the error-queue copy', async () => {
      const h = await startEndpoint(factory, {
        name: 'billing',
        host: 'worker-7',
        handler: (_m, ctx) => {
          throw new TypeError(`bad total on attempt ${ctx.attempt}`);
        },
        recoverability: { immediateRetries: 1, delayedRetries: 1 },
      });
      await sendJson(h.transport, 'billing', 'inv-9', { total: -1 }, { 'x-tenant': 'acme' });
      await h.until(1);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      const headers = dead!.headers;
      expect(headers['x-tenant']).toBe('acme');
      expect(headers[HEADER.failureErrorName]).toBe('TypeError');
      expect(headers[HEADER.failureMessage]).toBe('bad total on attempt 4');
      expect(headers[HEADER.failureStack]).toContain('TypeError: bad total on attempt 4');
      expect(headers[HEADER.failureQueue]).toBe('billing');
      expect(headers[HEADER.failureEndpoint]).toBe('billing');
      expect(headers[HEADER.failureHost]).toBe('worker-7');
      expect(headers[HEADER.failureImmediateAttempts]).toBe('2');
      expect(headers[HEADER.failureDelayedAttempts]).toBe('1');
      expect(new Date(headers[HEADER.failureTime]!).getTime()).toBe(h.clock.now());
      const history = readRetryState(headers).history;
      expect(history.map((r) => r.message)).toEqual([1, 2, 3, 4].map((n) => `bad total on attempt ${n}`));
      expect(history.map((r) => [r.immediateAttempt, r.delayedAttempt])).toEqual([[1, 0], [2, 0], [1, 1], [2, 1]]);
      await h.close();
    });

    it('keeps at most 10 failures in the history', async () => {
      const h = await startEndpoint(factory, {
        handler: (_m, ctx) => {
          throw new Error(`fail ${ctx.attempt}`);
        },
        recoverability: { immediateRetries: 5, delayedRetries: 3 },
      });
      await sendJson(h.transport, 'orders', 'm', {});
      await h.until(1);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      const history = readRetryState(dead!.headers).history;
      expect(history).toHaveLength(10);
      expect(history[9]!.message).toBe('fail 24');
      expect(history[0]!.message).toBe('fail 15');
      await h.close();
    });

    it('unrecoverable errors skip every retry: configured classes with their subclasses, a predicate, UnrecoverableError', async () => {
      const calls = new Map<string, number>();
      const h = await startEndpoint<{ kind: string }>(factory, {
        handler: (m, ctx) => {
          calls.set(ctx.messageId, (calls.get(ctx.messageId) ?? 0) + 1);
          if (m.kind === 'sub') throw new MissingFieldError('no customer');
          if (m.kind === 'pred') throw Object.assign(new Error('gone'), { code: 'GONE' });
          if (m.kind === 'brand') throw new UnrecoverableError('never');
          throw new Error('transient');
        },
        recoverability: {
          immediateRetries: 2,
          delayedRetries: 0,
          unrecoverable: [ValidationError],
          isUnrecoverable: (e) => (e as { code?: string }).code === 'GONE',
        },
      });
      for (const kind of ['sub', 'pred', 'brand', 'other']) await sendJson(h.transport, 'orders', kind, { kind });
      await h.until(4);
      expect(Object.fromEntries(calls)).toEqual({ sub: 1, pred: 1, brand: 1, other: 3 });
      const dead = await drain(h.transport, 'error', h.clock, 4);
      const reasons = Object.fromEntries(dead.map((d) => [d.id, d.headers[HEADER.failureReason]]));
      expect(reasons).toEqual({ sub: 'unrecoverable', pred: 'unrecoverable', brand: 'unrecoverable', other: 'retries-exhausted' });
      await h.close();
    });

    it('a body that cannot be decoded goes straight to the error queue', async () => {
      let calls = 0;
      const h = await startEndpoint(factory, { handler: () => void calls++ });
      await h.transport.send('orders', { id: 'garbled', body: new Uint8Array([0x7b, 0xff, 0x22]), headers: {} });
      await h.until(1);
      expect(calls).toBe(0);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      expect(dead!.headers[HEADER.failureReason]).toBe('deserialization');
      expect(dead!.headers[HEADER.failureErrorName]).toBe('DeserializationError');
      expect(Array.from(dead!.body)).toEqual([0x7b, 0xff, 0x22]);
      await h.close();
    });

    it('a custom policy sees the default decision and may change it', async () => {
      const seen: Decision[] = [];
      const h = await startEndpoint<{ n: number }>(factory, {
        handler: (m) => {
          throw new Error(m.n === 1 ? 'discard me' : 'later');
        },
        recoverability: {
          immediateRetries: 0,
          delayedRetries: 1,
          policy: (ctx, def) => {
            seen.push(def);
            if ((ctx.error as Error).message === 'discard me') return discard('obsolete');
            return ctx.delayedAttempt === 0 ? retryLater(5_000) : def;
          },
        },
      });
      await sendJson(h.transport, 'orders', 'a', { n: 1 });
      await sendJson(h.transport, 'orders', 'b', { n: 2 });
      const start = h.clock.now();
      await h.until(2);
      expect(h.endpoint.stats.discarded).toBe(1);
      expect(h.endpoint.stats.deadLettered).toBe(1);
      expect(h.clock.now() - start).toBeGreaterThanOrEqual(5_000);
      expect(h.clock.now() - start).toBeLessThan(10_000);
      expect(seen.map((d) => d.kind).sort()).toEqual(['dead-letter', 'retry-later', 'retry-later']);
      await h.close();
    });

    it('a policy that throws sends the message to the error queue instead of losing it', async () => {
      const h = await startEndpoint(factory, {
        handler: () => {
          throw new Error('x');
        },
        recoverability: {
          policy: () => {
            throw new Error('policy bug');
          },
        },
      });
      await sendJson(h.transport, 'orders', 'p', {});
      await h.until(1);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      expect(dead!.headers[HEADER.failureReason]).toBe('policy');
      await h.close();
    });

    it('RetryLaterError asks for its own delay; requeue counts as an attempt and a delayed retry', async () => {
      const events: string[] = [];
      const h = await startEndpoint<{ kind: string }>(factory, {
        handler: (m, ctx) => {
          events.push(`${ctx.messageId}:${ctx.attempt}:${ctx.delayedAttempt}@${h.clock.now() - start}`);
          if (ctx.delayedAttempt >= 2) return;
          if (m.kind === 'error') throw new RetryLaterError(3_000);
          ctx.requeue({ delayMs: 7_000, backoff: false });
        },
        recoverability: { immediateRetries: 5, delayedRetries: 3 },
      });
      const start = h.clock.now();
      await sendJson(h.transport, 'orders', 'e', { kind: 'error' });
      await h.until(1);
      await sendJson(h.transport, 'orders', 'r', { kind: 'requeue' });
      const requeueStart = h.clock.now() - start;
      await h.until(2);
      const e = events.filter((x) => x.startsWith('e:'));
      const r = events.filter((x) => x.startsWith('r:'));
      expect(e.map((x) => x.split('@')[0])).toEqual(['e:1:0', 'e:2:1', 'e:3:2']);
      const eTimes = e.map((x) => Number(x.split('@')[1]));
      expect(eTimes[1]! - eTimes[0]!).toBeGreaterThanOrEqual(3_000);
      expect(eTimes[1]! - eTimes[0]!).toBeLessThan(4_000);
      expect(r.map((x) => x.split('@')[0])).toEqual(['r:1:0', 'r:2:1', 'r:3:2']);
      const rTimes = r.map((x) => Number(x.split('@')[1]));
      expect(rTimes[0]).toBeGreaterThanOrEqual(requeueStart);
      expect(rTimes[1]! - rTimes[0]!).toBeGreaterThanOrEqual(7_000);
      expect(h.endpoint.stats.requeued).toBe(2);
      await h.close();
    });

    it('a requeue past the delayed retries goes to the error queue', async () => {
      const h = await startEndpoint(factory, {
        handler: (_m, ctx) => ctx.requeue({ delayMs: 1_000 }),
        recoverability: { delayedRetries: 2 },
      });
      await sendJson(h.transport, 'orders', 'q', {});
      await h.until(1);
      const [dead] = await drain(h.transport, 'error', h.clock, 1);
      expect(dead!.headers[HEADER.failureReason]).toBe('requeue-limit');
      expect(dead!.headers[HEADER.failureAttempts]).toBe('3');
      await h.close();
    });

    it('no delay between delayed retries exceeds the cap', async () => {
      const delays: number[] = [];
      const h = await startEndpoint(factory, {
        handler: () => {
          throw new Error('x');
        },
        recoverability: { immediateRetries: 0, delayedRetries: 4, delayedBackoff: exponential(3600_000, 10), maxDelayMs: 24 * 3600_000 },
      });
      h.endpoint.on('delayedRetry', (e) => delays.push(e.delayMs));
      await sendJson(h.transport, 'orders', 'c', {});
      await h.until(1);
      expect(delays).toEqual([3600_000, 36_000_000, 86_400_000, 86_400_000]);
      await h.close();
    });

    it('logs one line per action at the seed 004 levels, and the handler sees its attempt counts', async () => {
      const logger = recordingLogger();
      const seen: string[] = [];
      const h = await startEndpoint(factory, {
        logger,
        handler: (_m, ctx) => {
          seen.push(`${ctx.immediateAttempt}/${ctx.delayedAttempt}/${ctx.attempt}`);
          throw new Error('boom');
        },
        recoverability: { immediateRetries: 3, delayedRetries: 2 },
      });
      await sendJson(h.transport, 'orders', 'messageId', {});
      await h.until(1);
      expect(seen).toEqual(['1/0/1', '2/0/2', '3/0/3', '4/0/4', '1/1/5', '2/1/6', '3/1/7', '4/1/8', '1/2/9', '2/2/10', '3/2/11', '4/2/12']);
      const levels = logger.lines.map((l) => l.level);
      expect(levels).toEqual(['info', 'info', 'info', 'warn', 'info', 'info', 'info', 'warn', 'info', 'info', 'info', 'error']);
      expect(logger.lines[0]!.message).toMatch(/^Immediate retry is going to retry message 'messageId' because of an exception: Error: boom/);
      expect(logger.lines[3]!.message).toMatch(/^Delayed retry will reschedule message 'messageId' after a delay of 00:00:10 because/);
      expect(logger.lines[7]!.message).toContain('after a delay of 00:00:20');
      expect(logger.lines[11]!.message).toMatch(/^Moving message 'messageId' to the error queue 'error' because processing failed/);
      await h.close();
    });
  });
}
