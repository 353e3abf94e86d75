/**
 * Seed 002's send retry on the RocketMQ transport: the proxy's status codes
 * as the client raises them, through a `Producer` on a fake clock. A
 * throttled send (`TOO_MANY_REQUESTS`, 42900) waits 1 s, then × 1.6 up
 * to 120 s, each wait jittered ± 20 %; a broker that cannot be reached
 * (gRPC UNAVAILABLE) is waited for with the same backoff; a transient one is retried at once; a fatal
 * one is not retried; a message throttled many times is sent once, after
 * the throttling lifts.
 */
import { describe, expect, it } from 'vitest';
import { BadRequestException, InternalErrorException, ProxyTimeoutException, TooManyRequestsException } from 'rocketmq-client-nodejs';
import { HEADER } from '../../../src/headers/names.js';
import { SendFailedError } from '../../../src/producer/errors.js';
import { Producer } from '../../../src/producer/producer.js';
import { FakeClock } from '../../../src/time/fake-clock.js';
import { seededRandom } from '../../../src/time/random.js';
import { RocketMqTransport } from '../../../src/transports/rocketmq/index.js';
import type { OutgoingMessage } from '../../../src/transport/types.js';

const START = Date.UTC(2026, 0, 1);

/** A transport whose sends fail with `failures` in turn (as the client raises the proxy's answers), then succeed; it records each attempt's time. */
function failingTransport(clock: FakeClock, failures: Error[]) {
  const transport = new RocketMqTransport({ clock });
  const attempts: number[] = [];
  const stored: OutgoingMessage[] = [];
  transport.send = async (_queue, message) => {
    attempts.push(clock.monotonic());
    const failure = failures.shift();
    if (failure !== undefined) throw failure;
    stored.push(message);
  };
  return { transport, attempts, stored };
}

/** Moves the fake clock from sleeper to sleeper until `promise` settles. */
async function drive<T>(clock: FakeClock, promise: Promise<T>): Promise<T> {
  let settled = false;
  const done = promise.finally(() => {
    settled = true;
  });
  done.catch(() => undefined);
  while (!settled) {
    await new Promise((r) => setImmediate(r));
    const next = clock.nextDueAt;
    if (next !== undefined && !settled) await clock.advance(Math.max(0, next - clock.now()));
  }
  return done;
}

const throttled = () => new TooManyRequestsException(42900, 'TOO_MANY_REQUESTS');

describe('rocketmq: seed 002 send retry and throttling, on the proxy status codes', () => {
  it('throttled sends wait 1 s, then 1.6 s, 2.56 s ... (capped at 120 s) ± 20 %, and the message is sent once when the throttling lifts', async () => {
    const clock = new FakeClock(START);
    const { transport, attempts, stored } = failingTransport(clock, Array.from({ length: 14 }, throttled));
    const producer = new Producer<string>({ transport, clock, random: seededRandom(2), retry: { timeoutMs: 3_600_000 } });
    await drive(clock, producer.send('orders', 'x', { id: 'm-1' }));
    expect(stored.map((m) => m.id)).toEqual(['m-1']);
    expect(attempts).toHaveLength(15);
    const waits = attempts.slice(1).map((at, i) => at - attempts[i]!);
    // The seed: the first wait is the initial backoff; each next one is the previous × 1.6, capped at 120 s, then jittered ± 20 %.
    expect(waits[0]).toBe(1_000);
    waits.forEach((wait, i) => {
      const nominal = Math.min(1_000 * 1.6 ** i, 120_000);
      expect(wait).toBeGreaterThanOrEqual(nominal * 0.8 - 1);
      expect(wait).toBeLessThanOrEqual(nominal * 1.2 + 1);
    });
    // 1.6^11 s is past 120 s: the last waits are jittered around the cap.
    expect(waits.slice(-3).every((w) => w >= 96_000 - 1 && w <= 144_000 + 1)).toBe(true);
    expect(producer.stats).toMatchObject({ sent: 1, throttled: 14, failed: 0 });
  });

  it('INTERNAL_SERVER_ERROR and PROXY_TIMEOUT are retried at once, within the attempts', async () => {
    const clock = new FakeClock(START);
    const { transport, attempts, stored } = failingTransport(clock, [new InternalErrorException(50001, 'INTERNAL_SERVER_ERROR'), new ProxyTimeoutException(50400, 'PROXY_TIMEOUT')]);
    const producer = new Producer<string>({ transport, clock, random: seededRandom(2) });
    await drive(clock, producer.send('orders', 'x', { id: 'm-2' }));
    expect(stored).toHaveLength(1);
    expect(attempts).toEqual([attempts[0], attempts[0], attempts[0]]);
  });

  it('a connection closed by a broker shutting down (gRPC UNAVAILABLE) waits for the broker with the connection backoff, and the resent copy is marked', async () => {
    const clock = new FakeClock(START);
    const closed = () => Object.assign(new Error('14 UNAVAILABLE: Connection dropped'), { code: 14 });
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8081'), { code: 'ECONNREFUSED' });
    const { transport, attempts, stored } = failingTransport(clock, [closed(), closed(), refused, closed()]);
    const producer = new Producer<string>({ transport, clock, random: seededRandom(3), retry: { timeoutMs: 120_000 } });
    await drive(clock, producer.send('orders', 'x', { id: 'm-3' }));
    expect(stored.map((m) => m.id)).toEqual(['m-3']);
    expect(stored[0]!.headers[HEADER.possibleDuplicate]).toBe('true');
    const waits = attempts.slice(1).map((at, i) => at - attempts[i]!);
    expect(waits[0]).toBe(1_000);
    waits.forEach((wait, i) => {
      const nominal = 1_000 * 1.6 ** i;
      expect(wait).toBeGreaterThanOrEqual(nominal * 0.8 - 1);
      expect(wait).toBeLessThanOrEqual(nominal * 1.2 + 1);
    });
    expect(producer.stats).toMatchObject({ sent: 1, unavailable: 4, throttled: 0, failed: 0 });
  });

  it('a broker unavailable for longer than the send timeout fails the send (timeout), after waiting, not after three quick attempts', async () => {
    const clock = new FakeClock(START);
    const { transport, attempts, stored } = failingTransport(clock, Array.from({ length: 50 }, () => Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 })));
    const producer = new Producer<string>({ transport, clock, random: seededRandom(4), retry: { timeoutMs: 10_000 } });
    const failure = await drive(clock, producer.send('orders', 'x', { id: 'm-5' })).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(SendFailedError);
    expect((failure as SendFailedError).reason).toBe('timeout');
    expect(stored).toHaveLength(0);
    // 1 + 1.6 + 2.56 s of waits fit in 10 s, jittered; the next one would not.
    expect(attempts.length).toBeGreaterThanOrEqual(4);
    expect(attempts.at(-1)! - attempts[0]!).toBeLessThan(10_000);
  });

  it('a transient error and then an unavailable broker: immediate retry first, then the backoff', async () => {
    const clock = new FakeClock(START);
    const { transport, attempts, stored } = failingTransport(clock, [new InternalErrorException(50001, 'INTERNAL_SERVER_ERROR'), Object.assign(new Error('14 UNAVAILABLE'), { code: 14 })]);
    const producer = new Producer<string>({ transport, clock, random: seededRandom(2) });
    await drive(clock, producer.send('orders', 'x', { id: 'm-6' }));
    expect(stored).toHaveLength(1);
    expect(attempts[1]).toBe(attempts[0]);
    expect(attempts[2]! - attempts[0]!).toBe(1_000);
  });

  it('ILLEGAL_TOPIC is fatal: one attempt, the send rejects', async () => {
    const clock = new FakeClock(START);
    const { transport, attempts, stored } = failingTransport(clock, [new BadRequestException(40002, 'ILLEGAL_TOPIC')]);
    const producer = new Producer<string>({ transport, clock, random: seededRandom(2) });
    await expect(drive(clock, producer.send('orders', 'x', { id: 'm-4' }))).rejects.toThrow();
    expect(attempts).toHaveLength(1);
    expect(stored).toHaveLength(0);
  });
});
