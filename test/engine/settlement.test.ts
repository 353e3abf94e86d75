/**
 * A settlement that fails ends settled or released: it is tried again with
 * the connection backoff while the delivery is still held, then released;
 * when stopping, released at once. A delivery that is gone is left to the
 * broker's redelivery.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { EndpointEvents } from '../../src/endpoint/events.js';
import type { Logger } from '../../src/logger.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { Delivery } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { sendJson } from '../support/engine-harness.js';
import { overrideDelivery, wrappingTransport } from '../support/delivery-doubles.js';
import { recordingLogger } from '../support/recording-logger.js';

type Failed = EndpointEvents['settlementFailed'];

/** A memory transport whose deliveries' `deadLetter` rejects `failures` times (per message), then works. */
function failingDeadLetter(memory: MemoryTransport, failures: number, error: () => Error = () => new Error('error queue is full')) {
  const calls: number[] = [];
  let left = failures;
  const transport = wrappingTransport(memory, (d: Delivery) =>
    overrideDelivery(d, {
      deadLetter: async (q, h) => {
        calls.push(clockOf.now());
        if (left-- > 0) throw error();
        await d.deadLetter(q, h);
      },
    }),
  );
  const clockOf = { now: () => 0 };
  return { transport, calls, useClock: (c: FakeClock) => (clockOf.now = () => c.now()) };
}

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const s of stops.splice(0)) await s();
});

function setUp(failures: number, options: { settlementRetries?: number; handler?: () => void; logger?: Logger; error?: () => Error } = {}) {
  const clock = new FakeClock(0);
  const memory = new MemoryTransport({ clock });
  const double = failingDeadLetter(memory, failures, options.error);
  double.useClock(clock);
  const endpoint = new Endpoint({
    name: 'settle',
    transport: double.transport,
    clock,
    random: () => 0.5, // no jitter: 1000, 1600, 2560 ms ...
    concurrency: 1,
    recoverability: { immediateRetries: 0, delayedRetries: 0 },
    ...(options.settlementRetries === undefined ? {} : { settlementRetries: options.settlementRetries }),
    ...(options.logger ? { logger: options.logger } : {}),
    handler:
      options.handler ??
      (() => {
        throw new Error('boom');
      }),
  });
  const failed: Failed[] = [];
  endpoint.on('settlementFailed', (e) => failed.push(e));
  stops.push(() => endpoint.stop());
  return { clock, memory, endpoint, failed, calls: double.calls };
}

describe('a failed settlement', () => {
  it('is tried again with the connection backoff while the delivery is held: a dead-letter rejected twice then succeeding', async () => {
    const logger = recordingLogger();
    const { clock, memory, endpoint, failed, calls } = setUp(2, { logger });
    await sendJson(memory, 'settle', 'm1', {});
    await endpoint.start();
    await clock.advance(0);
    expect(calls).toEqual([0]);
    expect(failed).toMatchObject([{ messageId: 'm1', action: 'deadLetter', attempt: 1, outcome: 'retrying', retryInMs: 1_000 }]);
    // The stall is visible: the endpoint still holds the message.
    expect(endpoint.stats.inFlight).toBe(1);
    await clock.advance(999);
    expect(calls).toEqual([0]);
    await clock.advance(1);
    expect(calls).toEqual([0, 1_000]);
    expect(failed.at(-1)).toMatchObject({ attempt: 2, outcome: 'retrying', retryInMs: 1_600 });
    await clock.advance(1_600);
    expect(calls).toEqual([0, 1_000, 2_600]);
    expect(failed).toHaveLength(2);
    expect(endpoint.stats).toMatchObject({ deadLettered: 1, settlementFailures: 2, inFlight: 0 });
    expect(memory.depth('error')).toBe(1);
    const lines = logger.lines.filter((l) => l.fields['action'] === 'deadLetter').map((l) => `${l.level}: ${l.message}`);
    expect(lines).toEqual([
      "warn: Could not deadLetter message 'm1' (attempt 1): Error: error queue is full; trying again in 00:00:01",
      "warn: Could not deadLetter message 'm1' (attempt 2): Error: error queue is full; trying again in 00:00:02",
    ]);
  });

  it('is released back to its queue once `settlementRetries` are spent, and handled again', async () => {
    let calls = 0;
    const { clock, memory, endpoint, failed } = setUp(Infinity, {
      settlementRetries: 2,
      handler: () => {
        if (++calls === 1) throw new Error('boom');
      },
    });
    await sendJson(memory, 'settle', 'm1', {});
    await endpoint.start();
    expect(await clock.runUntil(() => endpoint.stats.handled === 1, 60_000)).toBe(true);
    expect(failed.map((e) => [e.attempt, e.outcome])).toEqual([
      [1, 'retrying'],
      [2, 'retrying'],
      [3, 'released'],
    ]);
    expect(calls).toBe(2);
    expect(endpoint.stats).toMatchObject({ deadLettered: 0, settlementFailures: 3, inFlight: 0 });
    expect(memory.depth('settle')).toBe(0);
  });

  it('is released at once when the endpoint stops', async () => {
    const { clock, memory, endpoint, failed } = setUp(Infinity);
    await sendJson(memory, 'settle', 'm1', {});
    await endpoint.start();
    await clock.advance(0);
    expect(failed.map((e) => e.outcome)).toEqual(['retrying']);
    await endpoint.stop();
    expect(failed.map((e) => e.outcome)).toEqual(['retrying', 'released']);
    expect(memory.depth('settle')).toBe(1);
    expect(endpoint.stats.inFlight).toBe(0);
  });

  it('of a delivery that is gone is left to the broker, which delivers it again', async () => {
    const gone = () => Object.assign(new Error('channel closed'), { deliveryGone: true });
    const { clock, memory, endpoint, failed, calls } = setUp(1, { error: gone });
    await sendJson(memory, 'settle', 'm1', {});
    await endpoint.start();
    await clock.advance(0);
    expect(calls).toEqual([0]);
    expect(failed).toMatchObject([{ attempt: 1, outcome: 'redelivered' }]);
    expect(failed[0]!.retryInMs).toBeUndefined();
    expect(endpoint.stats.inFlight).toBe(0);
  });

  it('refused four times then taken, is tried at 1, 1.6, 2.56 and 4.1 s gaps, never in a hot loop, and the copy is stored once', async () => {
    const { clock, memory, endpoint, failed, calls } = setUp(4, { error: () => new Error('the broker refused the copy (reject-publish)') });
    await sendJson(memory, 'settle', 'm1', {});
    await endpoint.start();
    expect(await clock.runUntil(() => endpoint.stats.deadLettered === 1, 60_000)).toBe(true);
    expect(calls).toEqual([0, 1_000, 2_600, 5_160, 9_256]);
    expect(failed.map((e) => [e.attempt, e.outcome, e.retryInMs])).toEqual([
      [1, 'retrying', 1_000],
      [2, 'retrying', 1_600],
      [3, 'retrying', 2_560],
      [4, 'retrying', 4_096],
    ]);
    expect(endpoint.stats).toMatchObject({ deadLettered: 1, settlementFailures: 4, inFlight: 0, handled: 0 });
    expect(memory.depth('error')).toBe(1);
    expect(memory.depth('settle')).toBe(0);
  });

  it('rejects a bad settlementRetries, naming the option', () => {
    expect(() => new Endpoint({ name: 'x', transport: new MemoryTransport(), handler: () => undefined, settlementRetries: -1 })).toThrow(/settlementRetries/);
  });
});

describe('a listener or logger that throws', () => {
  it('cannot leave a delivery unsettled: a logger throwing on the immediate-retry line', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    let thrown = false;
    const logger: Logger = {
      info: () => {
        if (thrown) return;
        thrown = true;
        throw new Error('logger bug');
      },
      warn: () => undefined,
      error: () => undefined,
    };
    let calls = 0;
    const endpoint = new Endpoint({
      name: 'rescue',
      transport,
      clock,
      logger,
      handler: () => {
        if (++calls === 1) throw new Error('boom');
      },
    });
    stops.push(() => endpoint.stop());
    await sendJson(transport, 'rescue', 'm1', {});
    await endpoint.start();
    expect(await clock.runUntil(() => endpoint.stats.handled === 1, 60_000)).toBe(true);
    expect(endpoint.stats.inFlight).toBe(0);
    expect((await transport.inspection.queueDepths(['rescue']))[0]).toMatchObject({ ready: 0, inFlight: 0 });
  });

  it('cannot leave a delivery unsettled or reject unhandled: a deadLettered listener and the logger both throwing', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const clock = new FakeClock(0);
      const transport = new MemoryTransport({ clock });
      const logger: Logger = {
        info: () => undefined,
        warn: () => undefined,
        error: (_f, message) => {
          if (message.includes('listener')) throw new Error('logger bug');
        },
      };
      const endpoint = new Endpoint({
        name: 'rescue',
        transport,
        clock,
        logger,
        recoverability: { immediateRetries: 0, delayedRetries: 0 },
        handler: () => {
          throw new Error('boom');
        },
      });
      endpoint.on('deadLettered', () => {
        throw new Error('listener bug');
      });
      stops.push(() => endpoint.stop());
      await sendJson(transport, 'rescue', 'm1', {});
      await endpoint.start();
      expect(await clock.runUntil(() => endpoint.stats.deadLettered === 1 && endpoint.stats.inFlight === 0, 60_000)).toBe(true);
      await clock.advance(1_000);
      await new Promise((r) => setImmediate(r));
      expect(transport.depth('error')).toBe(1);
      expect(transport.depth('rescue')).toBe(0);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
