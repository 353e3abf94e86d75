/**
 * When a RocketMQ delivery's lease starts: the proxy starts a message's
 * invisible time when it hands the message out, at any moment of the
 * receive's long poll, and a cut or a slow link can hold its answer back
 * further. The lease counts from when the receive was asked for, never
 * later, so this side never takes a message as held after the broker gave
 * it to another consumer. Shown on the subscription with a fake clock and a
 * consumer whose receive takes the time the test gives it.
 */
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../../src/time/fake-clock.js';
import { FAKE_MESSAGE, fakeSubscription } from './fake-consumer.js';

const LEASE_MS = 10_000;

/** A subscription whose first receive answers one message after `receiveMs` of the fake clock; later ones answer nothing. */
async function firstDelivery(receiveMs: number) {
  const clock = new FakeClock(1_000_000);
  let receives = 0;
  const { got, sub } = fakeSubscription({
    clock,
    leaseMs: LEASE_MS,
    async receive() {
      receives++;
      if (receives > 1) {
        await new Promise((r) => setTimeout(r, 20));
        return [];
      }
      await clock.advance(receiveMs);
      return [FAKE_MESSAGE];
    },
  });
  // The first receive has answered, and what it brought is handed out or dropped, once the next one is asked for (with room).
  for (let i = 0; i < 200 && got.length === 0 && receives < 2; i++) await new Promise((r) => setTimeout(r, 5));
  return { clock, got, sub };
}

describe('a RocketMQ lease counts from the receive that was asked for', () => {
  it('a message that came after a 7 s wait has 3 s of its 10 s lease left (less the 250 ms margin for the wire)', async () => {
    const { clock, got, sub } = await firstDelivery(7_000);
    try {
      expect(got.map((d) => d.id)).toEqual(['x']);
      expect(got[0]!.leaseExpired!()).toBe(false);
      await clock.advance(2_750);
      expect(got[0]!.leaseExpired!()).toBe(false);
      await clock.advance(1);
      expect(got[0]!.leaseExpired!()).toBe(true);
    } finally {
      await sub.close();
    }
  });

  it('a message held back past its lease is never handed out: the broker may have given it to another consumer', async () => {
    const { got, sub } = await firstDelivery(LEASE_MS);
    try {
      expect(got).toEqual([]);
    } finally {
      await sub.close();
    }
  });
});
