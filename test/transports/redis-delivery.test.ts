/**
 * A Redis delivery's prefetch slot: freed once a settlement is final (done
 * or gone), kept while a failed settlement leaves the entry held, and
 * handed to the consumer to free when that entry's lease runs out.
 */
import { describe, expect, it } from 'vitest';
import { RedisDelivery, type DeliveryOwner } from '../../src/transports/redis/delivery.js';
import type { SettleResult } from '../../src/transports/redis/settler.js';
import { FakeClock } from '../../src/time/fake-clock.js';

function owner(results: (SettleResult | Error)[]) {
  const calls = { settled: 0, leaseWatched: [] as (() => void)[] };
  const o: DeliveryOwner = {
    clock: new FakeClock(0),
    settle: async () => {
      const next = results.shift()!;
      if (next instanceof Error) throw next;
      return next;
    },
    extend: async () => true,
    settled: () => void calls.settled++,
    heldAfterFailure: (free) => void calls.leaseWatched.push(free),
  };
  return { o, calls };
}

const delivery = (o: DeliveryOwner) => new RedisDelivery(o, 'q', '1-0', 1, 0, 'm', Buffer.alloc(0), {}, 30_000, o.clock.monotonic());

describe('a Redis delivery and its prefetch slot', () => {
  it('keeps its slot while failed settlements leave the entry held, and frees it once one is done', async () => {
    const { o, calls } = owner([new Error('Connection is closed.'), 'OOM command not allowed', 1]);
    const d = delivery(o);
    await expect(d.ack()).rejects.toThrow(/closed/);
    await expect(d.ack()).rejects.toThrow(/refused/);
    expect(calls.settled).toBe(0);
    expect(calls.leaseWatched).toHaveLength(1);
    await d.ack();
    expect(calls.settled).toBe(1);
    // The lease running out later frees nothing more.
    calls.leaseWatched[0]!();
    expect(calls.settled).toBe(1);
  });

  it('frees its slot when the lease of an entry whose settlement failed runs out', async () => {
    const { o, calls } = owner([new Error('Connection is closed.')]);
    const d = delivery(o);
    await expect(d.ack()).rejects.toThrow(/closed/);
    calls.leaseWatched[0]!();
    expect(calls.settled).toBe(1);
  });
});
