import { describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { OptionError } from '../../src/util/option-checks.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { sendJson } from '../support/engine-harness.js';

const handler = () => undefined;

describe('endpoint options', () => {
  const transport = new MemoryTransport();
  const bad: [string, Record<string, unknown>, RegExp][] = [
    ['negative immediate retries', { recoverability: { immediateRetries: -1 } }, /recoverability\.immediateRetries/],
    ['fractional delayed retries', { recoverability: { delayedRetries: 1.5 } }, /recoverability\.delayedRetries/],
    ['NaN max delay', { recoverability: { maxDelayMs: Number.NaN } }, /recoverability\.maxDelayMs/],
    ['infinite max delay', { recoverability: { maxDelayMs: Infinity } }, /recoverability\.maxDelayMs/],
    ['max delay above 2^31-1', { recoverability: { maxDelayMs: 2 ** 31 } }, /2\^31-1/],
    ['zero concurrency', { concurrency: 0 }, /concurrency/],
    ['empty error queue', { recoverability: { errorQueue: '' } }, /recoverability\.errorQueue/],
    ['a policy that is not a function', { recoverability: { policy: 'x' } }, /recoverability\.policy/],
    ['unrecoverable that is not a class list', { recoverability: { unrecoverable: ['Error'] } }, /recoverability\.unrecoverable/],
    ['missing handler', { handler: undefined }, /handler/],
    ['empty name', { name: '' }, /name/],
  ];
  it.each(bad)('rejects %s, naming the option', (_label, patch, pattern) => {
    const build = () => new Endpoint({ name: 'x', transport, handler, ...patch } as never);
    expect(build).toThrow(OptionError);
    expect(build).toThrow(pattern);
  });

  it('accepts the defaults', () => {
    const endpoint = new Endpoint({ name: 'x', transport, handler });
    expect(endpoint.config.immediateRetries).toBe(5);
    expect(endpoint.config.delayedRetries).toBe(3);
    expect(endpoint.config.maxDelayMs).toBe(86_400_000);
    expect(endpoint.config.errorQueue).toBe('error');
    expect(endpoint.config.queue).toBe('x');
  });
});

describe('graceful stop', () => {
  it('lets in-flight handlers finish, aborts their signal, and leaves the rest in the store', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    const started: string[] = [];
    let finish!: () => void;
    const gate = new Promise<void>((r) => (finish = r));
    let sawAbort = false;
    const endpoint = new Endpoint({
      name: 'stop',
      transport,
      clock,
      concurrency: 2,
      handler: async (_m, ctx) => {
        started.push(ctx.messageId);
        await gate;
        sawAbort = ctx.signal.aborted;
      },
    });
    for (let i = 0; i < 5; i++) await sendJson(transport, 'stop', `m${i}`, {});
    await endpoint.start();
    await clock.advance(0);
    expect(started).toEqual(['m0', 'm1']);
    const stopping = endpoint.stop();
    await clock.advance(0);
    finish();
    await stopping;
    expect(sawAbort).toBe(true);
    expect(endpoint.stats.handled).toBe(2);
    expect(transport.depth('stop')).toBe(3);
  });

  it('stops when the start signal aborts', async () => {
    const transport = new MemoryTransport();
    const controller = new AbortController();
    const endpoint = new Endpoint({ name: 's', transport, handler });
    await endpoint.start(controller.signal);
    expect(endpoint.running).toBe(true);
    controller.abort();
    await endpoint.stop();
    expect(endpoint.running).toBe(false);
  });

  it('an immediate retry that would run after stop hands the message back instead', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    let calls = 0;
    let endpoint!: Endpoint;
    endpoint = new Endpoint({
      name: 'r',
      transport,
      clock,
      handler: async () => {
        calls++;
        void endpoint.stop();
        await clock.advance(0);
        throw new Error('x');
      },
    });
    await sendJson(transport, 'r', 'm', {});
    await endpoint.start();
    await clock.advance(0);
    await endpoint.stop();
    expect(calls).toBe(1);
    expect(transport.depth('r')).toBe(1);
    expect(endpoint.stats.deadLettered).toBe(0);
  });
});

describe('events', () => {
  it('a listener that throws does not disturb handling', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    const endpoint = new Endpoint({ name: 'ev', transport, clock, handler });
    endpoint.on('handled', () => {
      throw new Error('listener bug');
    });
    await sendJson(transport, 'ev', 'm', {});
    await endpoint.start();
    await clock.runUntil(() => endpoint.stats.handled === 1);
    expect(endpoint.stats.handled).toBe(1);
    await endpoint.stop();
  });
});
