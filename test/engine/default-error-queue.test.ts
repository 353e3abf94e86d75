/** The endpoint's error queue when `recoverability.errorQueue` is not set: the transport's `defaultErrorQueue(queue)` where it has one, else `error`. */
import { describe, expect, it } from 'vitest';
import { resolveEndpointConfig } from '../../src/endpoint/config.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { NsqTransport } from '../../src/transports/nsq/index.js';
import type { Transport } from '../../src/transport/types.js';

const handler = async () => undefined;

function withDefault(queueOf: (queue: string) => string): Transport {
  const transport = new MemoryTransport();
  return Object.assign(Object.create(transport) as Transport, { defaultErrorQueue: queueOf });
}

describe('default error queue', () => {
  it('is `error` for a transport without defaultErrorQueue', () => {
    expect(resolveEndpointConfig({ name: 'orders', transport: new MemoryTransport(), handler }).errorQueue).toBe('error');
  });

  it("is the transport's defaultErrorQueue of the endpoint's queue", () => {
    const config = resolveEndpointConfig({ name: 'orders', queue: 'orders-in', transport: withDefault((q) => `${q}.dead`), handler });
    expect(config.errorQueue).toBe('orders-in.dead');
  });

  it('gives way to recoverability.errorQueue', () => {
    const config = resolveEndpointConfig({ name: 'orders', transport: withDefault((q) => `${q}.dead`), handler, recoverability: { errorQueue: 'mine' } });
    expect(config.errorQueue).toBe('mine');
  });

  it('an empty name from the transport is refused when the endpoint is built', () => {
    expect(() => resolveEndpointConfig({ name: 'orders', transport: withDefault(() => ''), handler })).toThrow(/transport.defaultErrorQueue\(\) must be a non-empty string/);
  });

  it('NSQ: <topic>.error, the durable topic for an ephemeral one, and a refusal past 64 characters', () => {
    const nsq = new NsqTransport();
    expect(resolveEndpointConfig({ name: 'orders', transport: nsq, handler }).errorQueue).toBe('orders.error');
    expect(nsq.defaultErrorQueue('orders#ephemeral')).toBe('orders.error');
    expect(() => resolveEndpointConfig({ name: 'x'.repeat(60), transport: nsq, handler })).toThrow(/not a valid topic name/);
  });
});
