import { describe, expect, it } from 'vitest';
import { constant } from '../../src/backoff/index.js';
import { HEADER } from '../../src/headers/names.js';
import { Producer } from '../../src/producer/producer.js';
import type { Delivery } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { drain, sendJson, startEndpoint } from '../support/engine-harness.js';
import { recordingLogger } from '../support/recording-logger.js';

const S = 1_000;
const memory = (clock: Parameters<Parameters<typeof startEndpoint>[0]>[0]) => new MemoryTransport({ clock });
const fail = () => {
  throw new Error('down');
};

/** Starts an endpoint on the memory transport; `calls` records the fake wall time of each handler attempt. */
async function harness(options: Omit<Parameters<typeof startEndpoint>[1], 'handler'> & { handler?: Parameters<typeof startEndpoint>[1]['handler'] }) {
  const calls: { at: number; headers: Delivery['headers'] }[] = [];
  const handler = options.handler ?? fail;
  let clockNow = () => 0;
  const h = await startEndpoint<unknown>(memory, {
    ...options,
    handler: (message, ctx) => {
      calls.push({ at: clockNow(), headers: ctx.headers });
      return handler(message, ctx);
    },
  });
  clockNow = () => h.clock.now();
  const events: { name: string; args: Record<string, unknown> }[] = [];
  for (const name of ['deadLettered', 'discarded', 'delayedRetry', 'deferred', 'requeued', 'handled'] as const) {
    h.endpoint.on(name, (args) => events.push({ name, args: args as Record<string, unknown> }));
  }
  return { ...h, calls, events };
}

describe('deadlines on an endpoint', () => {
  it('ctx.deadline shows the deadline to the handler: the sender\'s, the endpoint\'s from the first attempt, the one fixed in a retry copy, none without', async () => {
    const seen: { id: string; attempt: number; deadline: Date | undefined }[] = [];
    const h = await harness({
      recoverability: { deadlineMs: 60 * S, immediateRetries: 1, delayedRetries: 1, delayedBackoff: constant(5 * S) },
      handler: (_message, ctx) => {
        seen.push({ id: ctx.messageId, attempt: ctx.attempt, deadline: ctx.deadline });
        if (ctx.messageId === 'retried' && ctx.attempt < 3) throw new Error('down');
      },
    });
    const start = h.clock.now();
    const producer = new Producer({ transport: h.transport, clock: h.clock });
    await producer.send('orders', {}, { id: 'sender', expiresAt: new Date(start + 10 * S) });
    await producer.send('orders', {}, { id: 'retried' });
    await h.until(2);
    const of = (id: string) => seen.filter((s) => s.id === id).map((s) => [s.attempt, s.deadline?.getTime()]);
    expect(of('sender')).toEqual([[1, start + 10 * S]]);
    // Fixed at the first attempt, kept by the immediate retry and by the delayed round 5 s later.
    expect(of('retried')).toEqual([[1, start + 60 * S], [2, start + 60 * S], [3, start + 60 * S]]);
    await h.close();

    const none = await harness({ handler: (_message, ctx) => void seen.push({ id: 'none', attempt: ctx.attempt, deadline: ctx.deadline }) });
    await sendJson(none.transport, 'orders', 'none', {});
    await none.until(1);
    expect(seen.at(-1)).toEqual({ id: 'none', attempt: 1, deadline: undefined });
    await none.close();
  });

  it('a message sent already expired goes to the error queue, reason expired, and its handler never runs', async () => {
    const h = await harness({});
    const producer = new Producer({ transport: h.transport, clock: h.clock });
    await producer.send('orders', { n: 1 }, { id: 'late', expiresAt: new Date(h.clock.now() - S) });
    await h.until(1);
    expect(h.calls).toHaveLength(0);
    const [copy] = await drain(h.transport, 'error', h.clock, 1);
    expect(copy!.id).toBe('late');
    expect(copy!.headers[HEADER.failureReason]).toBe('expired');
    expect(copy!.headers[HEADER.failureErrorName]).toBe('DeadlineExpiredError');
    expect(copy!.headers[HEADER.deadlineAt]).toBe(String(h.clock.now() - S));
    expect(copy!.headers[HEADER.failureAttempts]).toBe('0');
    expect(h.events.map((e) => [e.name, e.args['reason']])).toEqual([['deadLettered', 'expired']]);
    await h.close();
  });

  it("onExpired 'discard' acknowledges an expired message and moves nothing", async () => {
    const h = await harness({ recoverability: { onExpired: 'discard' } });
    await sendJson(h.transport, 'orders', 'late', {}, { [HEADER.expiresAt]: String(h.clock.now()) });
    await h.until(1);
    expect(h.calls).toHaveLength(0);
    expect(h.endpoint.stats).toMatchObject({ discarded: 1, deadLettered: 0 });
    expect(h.events.map((e) => [e.name, e.args['reason']])).toEqual([['discarded', 'expired']]);
    expect((h.transport as MemoryTransport).depth('error')).toBe(0);
    expect((h.transport as MemoryTransport).depth('orders')).toBe(0);
    await h.close();
  });

  it('deadlineMs 25 s on the defaults: 12 attempts, the second delayed retry (due at 30 s) is never scheduled, error queue at 10 s', async () => {
    const h = await harness({ recoverability: { deadlineMs: 25 * S } });
    const start = h.clock.now();
    await sendJson(h.transport, 'orders', 'm', {});
    await h.until(1);
    expect(h.calls.map((c) => c.at - start)).toEqual([...Array(6).fill(0), ...Array(6).fill(10 * S)]);
    expect(h.events.filter((e) => e.name === 'delayedRetry').map((e) => e.args['delayMs'])).toEqual([10 * S]);
    expect(h.clock.now() - start).toBe(10 * S);
    // The retry copy carries the deadline fixed on the first round.
    expect(h.calls[6]!.headers[HEADER.deadlineAt]).toBe(String(start + 25 * S));
    const [copy] = await drain(h.transport, 'error', h.clock, 1);
    expect(copy!.headers[HEADER.failureReason]).toBe('expired');
    expect(copy!.headers[HEADER.failureAttempts]).toBe('12');
    expect(copy!.headers[HEADER.failureMessage]).toBe('down');
    expect(copy!.headers[HEADER.deadlineAt]).toBe(String(start + 25 * S));
    await h.close();
  });

  it("the sender's earlier expiresAt wins over deadlineMs", async () => {
    const h = await harness({ recoverability: { immediateRetries: 0, delayedRetries: 10, delayedBackoff: constant(2 * S), deadlineMs: 60 * S } });
    const start = h.clock.now();
    await sendJson(h.transport, 'orders', 'm', {}, { [HEADER.expiresAt]: String(start + 5 * S) });
    await h.until(1);
    // Attempts at 0, 2, 4 s; a retry from 4 s would land at 6 s, past 5 s.
    expect(h.calls.map((c) => c.at - start)).toEqual([0, 2 * S, 4 * S]);
    expect(h.calls[1]!.headers[HEADER.deadlineAt]).toBe(String(start + 5 * S));
    await h.close();
  });

  it('a deadline fixed on an earlier round holds in an endpoint with another deadlineMs', async () => {
    const h = await harness({ recoverability: { immediateRetries: 0, delayedRetries: 10, delayedBackoff: constant(2 * S), deadlineMs: 3_600 * S } });
    const start = h.clock.now();
    await sendJson(h.transport, 'orders', 'm', {}, { [HEADER.attempts]: '3', [HEADER.delayedAttempts]: '2', [HEADER.deadlineAt]: String(start + 3 * S) });
    await h.until(1);
    expect(h.calls.map((c) => c.at - start)).toEqual([0, 2 * S]);
    const [copy] = await drain(h.transport, 'error', h.clock, 1);
    expect(copy!.headers[HEADER.failureReason]).toBe('expired');
    expect(copy!.headers[HEADER.failureAttempts]).toBe('5');
    await h.close();
  });

  it('a retry that comes back past its deadline (the wall clock stepped forward) is never handled', async () => {
    const h = await harness({ recoverability: { immediateRetries: 0, delayedRetries: 3, delayedBackoff: constant(10 * S), deadlineMs: 15 * S } });
    await sendJson(h.transport, 'orders', 'm', {});
    await h.clock.runUntil(() => h.events.some((e) => e.name === 'delayedRetry'));
    expect(h.calls).toHaveLength(1);
    h.clock.stepWall(20 * S);
    await h.until(1);
    expect(h.calls).toHaveLength(1);
    const [copy] = await drain(h.transport, 'error', h.clock, 1);
    expect(copy!.headers[HEADER.failureReason]).toBe('expired');
    expect(copy!.headers[HEADER.failureErrorName]).toBe('DeadlineExpiredError');
    await h.close();
  });

  it('a handler requeue that would come back past the deadline expires instead', async () => {
    const h = await harness({ recoverability: { deadlineMs: 5 * S }, handler: (_m, ctx) => ctx.requeue({ delayMs: 3 * S }) });
    const start = h.clock.now();
    await sendJson(h.transport, 'orders', 'm', {});
    await h.until(1);
    expect(h.calls.map((c) => c.at - start)).toEqual([0, 3 * S]);
    expect(h.events.map((e) => e.name)).toEqual(['requeued', 'deadLettered']);
    expect(h.events[1]!.args['reason']).toBe('expired');
    await h.close();
  });

  it('a flow-control deferral that would come back past the deadline expires instead', async () => {
    const short = await harness({ recoverability: { deadlineMs: 3 * S }, flowControl: { rateLimit: { consecutiveFailures: 1, waitMs: 5 * S } } });
    await sendJson(short.transport, 'orders', 'm', {});
    await short.until(1);
    expect(short.calls).toHaveLength(1);
    expect(short.events.map((e) => [e.name, e.args['reason']])).toEqual([['deadLettered', 'expired']]);
    await short.close();

    const long = await harness({ recoverability: { deadlineMs: 30 * S }, flowControl: { rateLimit: { consecutiveFailures: 1, waitMs: 5 * S } } });
    const start = long.clock.now();
    await sendJson(long.transport, 'orders', 'm', {});
    await long.until(1);
    // Deferred every 5 s while the deadline allows: attempts at 0, 5, ..., 25 s; from 25 s the next would land at 30 s.
    expect(long.calls.map((c) => c.at - start)).toEqual([0, 5, 10, 15, 20, 25].map((s) => s * S));
    expect(long.events.filter((e) => e.name === 'deferred')).toHaveLength(5);
    expect(long.calls[1]!.headers[HEADER.deadlineAt]).toBe(String(start + 30 * S));
    expect(long.events.at(-1)).toMatchObject({ name: 'deadLettered', args: { reason: 'expired' } });
    await long.close();
  });

  it('a malformed expires-at header reads as no deadline, with a warning', async () => {
    const logger = recordingLogger();
    const h = await harness({ logger, handler: () => undefined });
    await sendJson(h.transport, 'orders', 'm', {}, { [HEADER.expiresAt]: 'tomorrow' });
    await h.until(1);
    expect(h.endpoint.stats.handled).toBe(1);
    const warning = logger.lines.find((l) => l.level === 'warn' && l.message.includes(HEADER.expiresAt));
    expect(warning?.message).toBe(`redeliver: message 'm' has a malformed ${HEADER.expiresAt} header ("tomorrow"); handling it as if it had none`);
    await h.close();
  });

  it('a message handled before its deadline is acknowledged as usual', async () => {
    const h = await harness({ recoverability: { deadlineMs: S }, handler: () => undefined });
    await sendJson(h.transport, 'orders', 'm', {}, { [HEADER.expiresAt]: String(h.clock.now() + 1) });
    await h.until(1);
    expect(h.endpoint.stats).toMatchObject({ handled: 1, deadLettered: 0 });
    await h.close();
  });
});
