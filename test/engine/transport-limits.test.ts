/**
 * An endpoint is checked against its transport's limits when it is built,
 * not when `start()` reaches the broker.
 */
import { describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { OptionError } from '../../src/util/option-checks.js';
import type { Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { resolveOptions } from '../../src/transports/rabbitmq/options.js';

const MIB = 1024 * 1024;
const handler = async () => undefined;

describe('transport limits', () => {
  it('refuses a concurrency above the largest prefetch RabbitMQ accepts, when the endpoint is built', async () => {
    // Never connects: nothing here reaches a broker.
    const transport = new RabbitMqTransport({ url: 'amqp://127.0.0.1:1' });
    expect(transport.limits?.maxPrefetch).toBe(65_535);
    expect(() => new Endpoint({ name: 'orders', transport, handler, concurrency: 100_000 })).toThrow(OptionError);
    expect(() => new Endpoint({ name: 'orders', transport, handler, concurrency: 65_536 })).toThrow(
      'concurrency must be at most 65535 on the rabbitmq transport (the largest prefetch it accepts), got 65536',
    );
    expect(new Endpoint({ name: 'orders', transport, handler, concurrency: 65_535 }).config.concurrency).toBe(65_535);
    await transport.close();
  });

  it('applies the limits any transport declares, and none when it declares none', () => {
    const memory = new MemoryTransport();
    const limited: Transport = Object.assign(Object.create(memory) as Transport, { limits: { maxPrefetch: 8 } });
    expect(() => new Endpoint({ name: 'orders', transport: limited, handler, concurrency: 9 })).toThrow(/at most 8/);
    expect(new Endpoint({ name: 'orders', transport: limited, handler, concurrency: 8 }).config.concurrency).toBe(8);
    expect(new Endpoint({ name: 'orders', transport: memory, handler, concurrency: 100_000 }).config.concurrency).toBe(100_000);
  });

  it('refuses a delay cap or budget deferral above the longest delay RabbitMQ holds, when the endpoint is built, naming both numbers and the option', async () => {
    const transport = new RabbitMqTransport({ url: 'amqp://127.0.0.1:1' });
    const max = transport.limits!.maxDelayMs!;
    expect(max).toBe(2 ** 28 - 1);
    const build = (maxDelayMs?: number) => new Endpoint({ name: 'orders', transport, handler, recoverability: { maxDelayMs } });
    expect(() => build(max + 1)).toThrow(OptionError);
    expect(() => build(max + 1)).toThrow(
      `recoverability.maxDelayMs is ${max + 1} ms, but the rabbitmq transport holds a delay of at most ${max} ms (its limits.maxDelayMs): set recoverability.maxDelayMs to ${max} or less`,
    );
    expect(build(max).config.maxDelayMs).toBe(max);
    // The default cap, 24 h, fits every built-in transport.
    expect(build().config.maxDelayMs).toBe(24 * 3600_000);
    // The retry budget's deferral is not capped: it is checked too.
    const budget = (deferMs: number) => new Endpoint({ name: 'orders', transport, handler, flowControl: { retryBudget: { deferMs } } });
    expect(() => budget(max + 1)).toThrow(
      `flowControl.retryBudget.deferMs is ${max + 1} ms, but the rabbitmq transport holds a delay of at most ${max} ms (its limits.maxDelayMs): set flowControl.retryBudget.deferMs to ${max} or less`,
    );
    expect(budget(max).config.flow.retryBudget?.deferMs).toBe(max);
    await transport.close();
  });

  it('refuses a default delay cap a transport cannot hold, and checks none where the transport declares no delay limit', () => {
    const memory = new MemoryTransport();
    const shortDelays: Transport = Object.assign(Object.create(memory) as Transport, { limits: { maxDelayMs: 3_600_000 } });
    expect(() => new Endpoint({ name: 'orders', transport: shortDelays, handler })).toThrow(/maxDelayMs is 86400000 ms, but .* at most 3600000 ms/);
    expect(new Endpoint({ name: 'orders', transport: shortDelays, handler, recoverability: { maxDelayMs: 3_600_000 } }).config.maxDelayMs).toBe(3_600_000);
    const noDelayLimit: Transport = Object.assign(Object.create(memory) as Transport, { limits: {} });
    expect(new Endpoint({ name: 'orders', transport: noDelayLimit, handler, recoverability: { maxDelayMs: 2 ** 31 - 1 } }).config.maxDelayMs).toBe(2 ** 31 - 1);
  });

  it("defaults RabbitMQ's maxMessageBytes to the 16 MiB RabbitMQ 4 accepts, and refuses more than a broker can be set to", () => {
    expect(resolveOptions({}).maxMessageBytes).toBe(16 * MIB);
    expect(resolveOptions({ maxMessageBytes: 128 * MIB }).maxMessageBytes).toBe(128 * MIB);
    expect(resolveOptions({ maxMessageBytes: 512 * MIB }).maxMessageBytes).toBe(512 * MIB);
    expect(() => resolveOptions({ maxMessageBytes: 512 * MIB + 1 })).toThrow(/from 1 to 536870912/);
  });
});
