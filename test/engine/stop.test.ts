/**
 * `stop()` always ends: a handler that ignores its signal is given the stop
 * timeout, then its delivery is released; a subscription that cannot be
 * paused does not keep the endpoint from aborting and draining.
 */
import { describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { OptionError } from '../../src/util/option-checks.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { Subscription, Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { sendJson } from '../support/engine-harness.js';
import { recordingLogger } from '../support/recording-logger.js';

/** Resolves whether `promise` settled before `limitMs` of fake time passed. */
async function settlesWithin(clock: FakeClock, promise: Promise<unknown>, limitMs: number): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return clock.runUntil(() => settled, limitMs);
}

describe('stop with a handler that ignores its signal', () => {
  it('releases the delivery after timeoutMs and resolves', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    const logger = recordingLogger();
    const endpoint = new Endpoint({ name: 'hang', transport, clock, logger, handler: () => new Promise<void>(() => undefined) });
    await sendJson(transport, 'hang', 'm1', {});
    await endpoint.start();
    await clock.advance(0);
    expect(endpoint.stats.inFlight).toBe(1);
    const stopping = endpoint.stop({ timeoutMs: 5_000 });
    await clock.advance(4_999);
    expect(transport.depth('hang')).toBe(0);
    expect(await settlesWithin(clock, stopping, 10)).toBe(true);
    await stopping;
    expect(clock.now()).toBe(5_000);
    expect(transport.depth('hang')).toBe(1);
    expect(logger.lines.some((l) => l.level === 'error' && l.message.includes("message 'm1' did not finish within the stop timeout"))).toBe(true);
  });

  it('uses a 30 s timeout by default', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    const endpoint = new Endpoint({ name: 'hang', transport, clock, handler: () => new Promise<void>(() => undefined) });
    await sendJson(transport, 'hang', 'm1', {});
    await endpoint.start();
    await clock.advance(0);
    const stopping = endpoint.stop();
    expect(await settlesWithin(clock, stopping, 60_000)).toBe(true);
    expect(clock.now()).toBe(30_000);
    expect(transport.depth('hang')).toBe(1);
  });

  it('rejects a timeout that is not a duration', async () => {
    const endpoint = new Endpoint({ name: 'x', transport: new MemoryTransport(), handler: () => undefined });
    await expect(endpoint.stop({ timeoutMs: -1 })).rejects.toThrow(OptionError);
  });
});

describe('stop when pause() rejects', () => {
  it('still aborts the handlers, drains them and resolves', async () => {
    const clock = new FakeClock(0);
    const memory = new MemoryTransport({ clock });
    const transport: Transport = Object.create(memory, {
      consume: {
        value: async (...args: Parameters<Transport['consume']>) => {
          const sub = await memory.consume(...args);
          return Object.assign(Object.create(sub) as Subscription, {
            pause: () => Promise.reject(new Error('channel closed')),
            close: () => sub.close(),
            setPrefetch: (n: number) => sub.setPrefetch(n),
            resume: () => sub.resume(),
          });
        },
      },
    });
    const logger = recordingLogger();
    let aborted = false;
    const endpoint = new Endpoint({
      name: 'pause',
      transport,
      clock,
      logger,
      handler: (_m, ctx) =>
        new Promise<void>((resolve) =>
          ctx.signal.addEventListener('abort', () => {
            aborted = true;
            resolve();
          }),
        ),
    });
    await sendJson(memory, 'pause', 'm1', {});
    await endpoint.start();
    await clock.advance(0);
    const stopping = endpoint.stop({ timeoutMs: 1_000 });
    await expect(stopping).resolves.toBeUndefined();
    expect(aborted).toBe(true);
    expect(endpoint.stats.handled).toBe(1);
    expect(logger.lines.some((l) => l.level === 'error' && /could not pause/.test(l.message))).toBe(true);
  });
});
