/**
 * The duplicate window on the real broker: a retry whose copy the broker
 * confirmed but whose original could not be acknowledged (its receipt
 * handle ran out while the copy was on its way) is counted in
 * `stats.duplicateWindow`, emitted and logged once, and the message then
 * arrives twice, never zero times.
 *
 * The lease running out during the copy is made real on the broker and
 * held back on this side: the delivery's invisible time is cut to 1 s
 * (`extendLease(1_000)`), and the transport's monotonic clock stands still
 * from then on, so this side still takes the lease as held (as it does when
 * a copy takes longer than the rest of the lease) while the broker's
 * receipt handle expires.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../../src/logger.js';
import { systemClock, type Clock } from '../../../src/time/clock.js';
import type { Delivery } from '../../../src/transport/types.js';
import type { MessageView } from '../../../src/transports/rocketmq/client.js';
import { DeliveryGoneError, RocketMqDelivery, type DuplicateKind, type RocketMqTransportEvents } from '../../../src/transports/rocketmq/index.js';
import { RocketScratch, rocketSkipReason } from './scratch.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('dupwin');
const token = scratch.group.slice(-8);

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The system clock, whose monotonic time can be made to stand still. */
function holdableClock(): Clock & { hold(): void } {
  let held: number | undefined;
  return {
    now: () => systemClock.now(),
    monotonic: () => held ?? systemClock.monotonic(),
    sleep: (ms, signal) => systemClock.sleep(ms, signal),
    hold() {
      held = systemClock.monotonic();
    },
  };
}

describe('rocketmq: when the duplicate window is counted', () => {
  function delivery(ack: () => Promise<void>) {
    const duplicates: DuplicateKind[] = [];
    const copies: string[] = [];
    const view = { messageId: 'b-1', properties: new Map(), body: Buffer.from('x'), keys: [] } as unknown as MessageView;
    const d = new RocketMqDelivery(
      {
        clock: systemClock,
        ack,
        changeInvisible: async () => undefined,
        sendCopy: async (topic) => void copies.push(topic),
        errorQueue: async () => undefined,
        recordDuplicate: (_id, kind) => duplicates.push(kind),
        settled: () => undefined,
      },
      'q',
      'm-1',
      {},
      view,
      30_000,
      systemClock.monotonic(),
    );
    return { d, duplicates, copies };
  }

  it('an acknowledgement that fails after the copy leaves the delivery held; tried again it only acknowledges, nothing counted', async () => {
    let acks = 0;
    const { d, duplicates, copies } = delivery(async () => {
      if (++acks === 1) throw new Error('connection reset');
    });
    await expect(d.deadLetter('q-error', { why: 'x' })).rejects.toThrow('connection reset');
    await d.deadLetter('q-error', { why: 'x' });
    expect(copies).toEqual(['q-error']);
    expect(duplicates).toEqual([]);
  });

  it('released after its copy went out (the acknowledgement kept failing): the original comes back, counted once', async () => {
    const { d, duplicates, copies } = delivery(async () => {
      throw new Error('connection reset');
    });
    await expect(d.retryLater(1_000, {})).rejects.toThrow('connection reset');
    await d.release();
    expect(copies).toEqual(['q']);
    expect(duplicates).toEqual(['retry']);
  });

  it('released without a copy: no duplicate', async () => {
    const { d, duplicates } = delivery(async () => undefined);
    await d.release();
    expect(duplicates).toEqual([]);
  });
});

describe.skipIf(Boolean(skip))('rocketmq: the duplicate window', () => {
  it('a retry copy confirmed whose original could not be acknowledged is counted, emitted and logged once; both arrive', async () => {
    const queue = `redeliver-dupwin-${token}`;
    const warnings: string[] = [];
    const logger: Logger = { info: () => undefined, error: () => undefined, warn: (_f, m) => warnings.push(m) };
    const clock = holdableClock();
    const transport = scratch.transport({ clock, logger });
    const events: RocketMqTransportEvents['duplicateWindow'][] = [];
    transport.on('duplicateWindow', (e) => events.push(e));
    const got: Delivery[] = [];
    const sub = await transport.consume(queue, (d) => {
      got.push(d);
      if (got.length > 1) void d.ack();
    }, { prefetch: 4 });
    try {
      await transport.send(queue, { id: 'twice', body: new TextEncoder().encode('b'), headers: { n: '0' } });
      await until('the first delivery', () => got.length === 1, 20_000);
      const first = got[0]!;
      await first.extendLease!(1_000);
      clock.hold();
      await new Promise((r) => setTimeout(r, 2_500));
      expect(first.leaseExpired!()).toBe(false);
      const retry = first.retryLater(0, { n: '1' });
      await expect(retry).rejects.toBeInstanceOf(DeliveryGoneError);
      await expect(retry).rejects.toThrow(/sent its copy/);
      expect(transport.stats.duplicateWindow).toBe(1);
      expect(events).toEqual([{ id: 'twice', queue, kind: 'retry' }]);
      expect(warnings.filter((w) => w.includes('now exists twice'))).toHaveLength(1);
      // Settled for good: a second settlement is refused and counts nothing more.
      await expect(first.release()).rejects.toThrow();
      expect(transport.stats.duplicateWindow).toBe(1);
      // The copy at once, and the original again once the broker revives it.
      await until('the copy and the original again', () => got.length === 3, 90_000);
      const again = got.slice(1);
      expect(again.map((d) => d.id)).toEqual(['twice', 'twice']);
      expect(again.map((d) => d.headers['n']).sort()).toEqual(['0', '1']);
    } finally {
      await sub.close();
      await transport.close();
    }
  }, 120_000);
});
