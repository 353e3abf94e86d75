/**
 * An endpoint is checked against its transport's limits when it is built,
 * not when `start()` reaches the broker.
 */
import { describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { OptionError } from '../../src/endpoint/validate.js';
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

  it("defaults RabbitMQ's maxMessageBytes to the 16 MiB RabbitMQ 4 accepts, and refuses more than a broker can be set to", () => {
    expect(resolveOptions({}).maxMessageBytes).toBe(16 * MIB);
    expect(resolveOptions({ maxMessageBytes: 128 * MIB }).maxMessageBytes).toBe(128 * MIB);
    expect(resolveOptions({ maxMessageBytes: 512 * MIB }).maxMessageBytes).toBe(512 * MIB);
    expect(() => resolveOptions({ maxMessageBytes: 512 * MIB + 1 })).toThrow(/from 1 to 536870912/);
  });
});
