import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { EndpointOptions } from '../../src/endpoint/options.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import type { Delivery, Transport } from '../../src/transport/types.js';
import { jsonCodec } from '../../src/codec.js';

/** Makes a transport driven by the given clock. */
export type TransportFactory = (clock: FakeClock) => Promise<Transport> | Transport;

/** Sends JSON bodies straight through a transport. */
export async function sendJson(transport: Transport, queue: string, id: string, body: unknown, headers: Record<string, string> = {}): Promise<void> {
  await transport.send(queue, { id, body: jsonCodec.encode(body), headers });
}

/** Reads every message in `queue` (acking each) until none arrives within a few fake-clock steps. */
export async function drain(transport: Transport, queue: string, clock: FakeClock, expected: number): Promise<Delivery[]> {
  const got: Delivery[] = [];
  const sub = await transport.consume(queue, (d) => {
    got.push(d);
    void d.ack();
  }, { prefetch: 100 });
  await clock.runUntil(() => got.length >= expected, 60_000);
  await sub.close();
  return got;
}

/** An endpoint on a fresh transport with a fake clock, plus helpers to drive it. */
export async function startEndpoint<T>(
  factory: TransportFactory,
  options: Omit<EndpointOptions<T>, 'transport' | 'clock' | 'name'> & { name?: string },
) {
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const transport = await factory(clock);
  const endpoint = new Endpoint<T>({ name: 'orders', ...options, transport, clock });
  await endpoint.start();
  const settled = () => {
    const s = endpoint.stats;
    return s.handled + s.deadLettered + s.discarded;
  };
  return {
    clock,
    transport,
    endpoint,
    settled,
    /** Advances fake time until `n` messages are handled, dead-lettered or discarded. */
    async until(n: number, limitMs = 30 * 24 * 3600_000) {
      const ok = await clock.runUntil(() => settled() >= n, limitMs);
      if (!ok) throw new Error(`only ${settled()} of ${n} messages settled; stats ${JSON.stringify(endpoint.stats)}`);
    },
    async close() {
      await endpoint.stop();
      await transport.close();
    },
  };
}
