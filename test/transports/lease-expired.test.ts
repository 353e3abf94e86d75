/**
 * Redis and JetStream deliveries reckon their lease on this side, from the
 * transport's clock, for `Delivery.leaseExpired`: the lease (less a small
 * margin for the wire) from when the delivery was handed out, moved by
 * `extendLease`. No broker: the deliveries get fake owners.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/time/fake-clock.js';
import { JetStreamDelivery } from '../../src/transports/jetstream/delivery.js';
import type { QueueNames } from '../../src/transports/jetstream/names.js';
import { RedisDelivery } from '../../src/transports/redis/delivery.js';

describe('Delivery.leaseExpired', () => {
  it('Redis: runs out a margin before leaseMs, and extendLease moves it to ms from when it was sent', async () => {
    const clock = new FakeClock(0);
    const owner = { clock, settle: async () => 1 as const, extend: async () => true, settled: () => undefined, heldAfterFailure: () => undefined };
    const delivery = new RedisDelivery(owner, 'q', '1-0', 1, 0, 'm', Buffer.alloc(0), {}, 10_000, clock.monotonic());
    await clock.advance(9_750);
    expect(delivery.leaseExpired()).toBe(false);
    await clock.advance(1);
    expect(delivery.leaseExpired()).toBe(true);
    await delivery.extendLease(20_000);
    await clock.advance(19_750);
    expect(delivery.leaseExpired()).toBe(false);
    await clock.advance(1);
    expect(delivery.leaseExpired()).toBe(true);
  });

  it("JetStream: runs out a margin before ack_wait, and extendLease restarts it", async () => {
    const clock = new FakeClock(0);
    const owner = { clock, confirm: async () => undefined, publish: async () => undefined, errorQueueSubject: async () => 'e', copyTooLarge: () => undefined, settling: () => undefined, settled: () => undefined };
    const names = { queue: 'q' } as QueueNames;
    const info = { stream: 's', consumer: 'c', delivered: 1, streamSeq: 1, storedAtMs: 0 };
    const delivery = new JetStreamDelivery(owner, names, info, '$JS.ACK.x', 'm', new Uint8Array(), {}, 1_000, clock.monotonic());
    await clock.advance(900);
    expect(delivery.leaseExpired()).toBe(false);
    await delivery.extendLease(1_000);
    await clock.advance(900);
    expect(delivery.leaseExpired()).toBe(false);
    await clock.advance(1);
    expect(delivery.leaseExpired()).toBe(true);
  });
});

describe('JetStream copy ids', () => {
  it('are the same for every delivery of one stream message, and apart for another message or kind', async () => {
    const clock = new FakeClock(0);
    const ids: string[] = [];
    const owner = {
      clock,
      confirm: async () => undefined,
      publish: async (_subject: string, _body: Uint8Array, _headers: unknown, msgID: string | undefined) => void ids.push(String(msgID)),
      errorQueueSubject: async () => 'e',
      copyTooLarge: () => undefined,
      settling: () => undefined,
      settled: () => undefined,
    };
    const names = { queue: 'q', delaySubject: 'd' } as QueueNames;
    const deliver = (delivered: number, streamSeq = 7) =>
      new JetStreamDelivery(owner, names, { stream: 's', consumer: 'c', delivered, streamSeq, storedAtMs: 0 }, '$JS.ACK.x', 'm', new Uint8Array(), {}, 1_000, clock.monotonic());
    await deliver(1).retryLater(10, {});
    await deliver(2).retryLater(10, {});
    await deliver(3).deadLetter('errors', {});
    await deliver(1, 8).retryLater(10, {});
    expect(ids).toEqual(['m|r|s|7', 'm|r|s|7', 'm|e|s|7', 'm|r|s|8']);
  });
});
