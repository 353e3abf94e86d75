import { describe, expect, it } from 'vitest';
import { Producer } from '../../src/producer/producer.js';
import { ThrottledError } from '../../src/transport/send-errors.js';
import { OptionError } from '../../src/util/option-checks.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { seededRandom } from '../../src/time/random.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import type { Delivery, OutgoingMessage, Transport } from '../../src/transport/types.js';

/** A memory transport that records each attempt and throttles the first `throttled` of them. */
class RecordingTransport extends MemoryTransport {
  readonly attempts: { at: number; message: OutgoingMessage }[] = [];
  constructor(private readonly clock: FakeClock, private throttled = 0) {
    super({ clock });
  }
  override async send(queue: string, message: OutgoingMessage): Promise<void> {
    this.attempts.push({ at: this.clock.now(), message });
    if (this.throttled-- > 0) throw new ThrottledError('530 TOO_MANY_REQUESTS');
    return super.send(queue, message);
  }
}

/** A transport that declares no `maxDelayMs`: it holds no delayed message. */
function withoutDelays(inner: MemoryTransport): Transport {
  return {
    name: 'plain',
    capabilities: inner.capabilities,
    send: (queue, message) => inner.send(queue, message),
    consume: (queue, listener, options) => inner.consume(queue, listener, options),
    close: () => inner.close(),
  };
}

async function setUp(throttled = 0) {
  const clock = new FakeClock(1_000_000);
  const transport = new RecordingTransport(clock, throttled);
  const received: { id: string; at: number }[] = [];
  await transport.consume('q', (d: Delivery) => {
    received.push({ id: d.id, at: clock.now() });
    void d.ack();
  }, { prefetch: 10 });
  const producer = new Producer({ transport, clock, random: seededRandom(1) });
  return { clock, transport, received, producer };
}

describe('producer delayed send', () => {
  it('delayMs: held until its time, and an undelayed message sent after it arrives first', async () => {
    const { clock, received, producer } = await setUp();
    await producer.send('q', 'later', { id: 'later', delayMs: 500 });
    await producer.send('q', 'now', { id: 'now' });
    await clock.advance(499);
    expect(received.map((r) => r.id)).toEqual(['now']);
    await clock.advance(1);
    expect(received).toEqual([{ id: 'now', at: 1_000_000 }, { id: 'later', at: 1_000_500 }]);
  });

  it('deliverAt: a delay against the producer clock; one in the past sends at once', async () => {
    const { clock, transport, received, producer } = await setUp();
    await producer.send('q', 'a', { id: 'future', deliverAt: new Date(1_000_750) });
    await producer.send('q', 'b', { id: 'past', deliverAt: new Date(999_000) });
    expect(transport.attempts.map((a) => a.message.delayMs)).toEqual([750, undefined]);
    await clock.advance(0);
    expect(received.map((r) => r.id)).toEqual(['past']);
    await clock.advance(750);
    expect(received.map((r) => r.id)).toEqual(['past', 'future']);
  });

  it('a retried attempt carries the delay left, so it is due when the first would have been', async () => {
    const { clock, transport, received, producer } = await setUp(1);
    const sent = producer.send('q', 'x', { id: 'x', delayMs: 5_000 });
    await clock.runUntil(() => transport.attempts.length === 2);
    await sent;
    expect(transport.attempts.map((a) => [a.at - 1_000_000, a.message.delayMs])).toEqual([[0, 5_000], [1_000, 4_000]]);
    await clock.advance(3_999);
    expect(received).toEqual([]);
    await clock.advance(1);
    expect(received).toEqual([{ id: 'x', at: 1_005_000 }]);
  });

  it.each([
    [{ delayMs: -1 }, /delayMs must be a finite number/],
    [{ delayMs: Number.NaN }, /delayMs must be a finite number/],
    [{ delayMs: Number.POSITIVE_INFINITY }, /delayMs must be a finite number/],
    [{ delayMs: '100' as unknown as number }, /delayMs must be a finite number/],
    [{ deliverAt: new Date(Number.NaN) }, /deliverAt must be a valid Date/],
    [{ deliverAt: 1_000_500 as unknown as Date }, /deliverAt must be a valid Date/],
    [{ delayMs: 10, deliverAt: new Date(1_000_500) }, /delayMs or deliverAt, not both/],
    [{ delayMs: 2 ** 31 }, /delayMs is beyond the longest delay memory holds \(2147483647 ms\)/],
    [{ deliverAt: new Date(1_000_000 + 2 ** 31) }, /deliverAt is beyond the longest delay memory holds/],
  ])('refuses %o with an error naming the option, and sends nothing', async (options, message) => {
    const { transport, producer } = await setUp();
    await expect(producer.send('q', 'x', options)).rejects.toThrow(message);
    await expect(producer.send('q', 'x', options)).rejects.toBeInstanceOf(OptionError);
    expect(() => producer.sendInBackground('q', 'x', options)).toThrow(message);
    expect(transport.attempts).toEqual([]);
  });

  it('refuses a delay on a transport that declares no maxDelayMs, but sends an undelayed message', async () => {
    const clock = new FakeClock(0);
    const inner = new MemoryTransport({ clock });
    const producer = new Producer({ transport: withoutDelays(inner), clock });
    await expect(producer.send('q', 'x', { delayMs: 100 })).rejects.toThrow(/delayMs needs a transport that holds delayed messages; plain/);
    expect(inner.depth('q') + inner.delayedCount).toBe(0);
    await producer.send('q', 'x', { delayMs: 0 });
    expect(inner.depth('q')).toBe(1);
  });
});

describe('transports refuse a delay beyond their maxDelayMs before sending anything', () => {
  it('memory', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    expect(transport.limits.maxDelayMs).toBe(2 ** 31 - 1);
    await expect(transport.send('q', { id: 'a', body: new Uint8Array(), headers: {}, delayMs: 2 ** 31 })).rejects.toThrow(RangeError);
    await expect(transport.send('q', { id: 'a', body: new Uint8Array(), headers: {}, delayMs: -5 })).rejects.toThrow(/send: delayMs must be a number of milliseconds from 0 to 2147483647, got -5/);
    expect(transport.depth('q') + transport.delayedCount).toBe(0);
  });
});
