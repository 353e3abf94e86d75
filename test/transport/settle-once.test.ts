import { describe, expect, it } from 'vitest';
import { AlreadySettledError, DeliveryGoneError } from '../../src/transport/errors.js';
import { SettleOnce } from '../../src/transport/settle-once.js';

const gone = (error: unknown): boolean => error instanceof DeliveryGoneError;
const goneError = () => new DeliveryGoneError('test', 'ack', 'm1', 'q', 'found it gone');

function settleOnce(heldAfterFailure?: (free: () => void) => void) {
  const counts = { freed: 0, watched: 0 };
  let freeLater: (() => void) | undefined;
  const once = new SettleOnce({
    free: () => counts.freed++,
    alreadySettled: () => new AlreadySettledError('test', 'q', 'm1'),
    heldAfterFailure:
      heldAfterFailure &&
      ((free) => {
        counts.watched++;
        freeLater = free;
        heldAfterFailure(free);
      }),
  });
  return { once, counts, freeLater: () => freeLater?.() };
}

describe('SettleOnce', () => {
  it('settles once, frees the slot once, and rejects a second settlement as already settled', async () => {
    const { once, counts } = settleOnce();
    await once.settle(() => 1, async () => {}, gone);
    expect(once.settled).toBe(true);
    await expect(once.settle(() => 1, async () => {}, gone)).rejects.toMatchObject({ name: 'AlreadySettledError', deliveryGone: true });
    expect(counts.freed).toBe(1);
  });

  it('rejects a settlement while another is under way', async () => {
    const { once } = settleOnce();
    let finish!: () => void;
    const first = once.settle(() => 1, () => new Promise<void>((resolve) => (finish = resolve)), gone);
    await expect(once.settle(() => 1, async () => {}, gone)).rejects.toBeInstanceOf(AlreadySettledError);
    finish();
    await first;
  });

  it('leaves the delivery untouched when preparing fails, and settles it when preparing finds it gone', async () => {
    const { once, counts } = settleOnce();
    await expect(once.settle(() => { throw new RangeError('bad delay'); }, async () => {}, gone)).rejects.toBeInstanceOf(RangeError);
    expect(once.settled).toBe(false);
    expect(counts.freed).toBe(0);
    await expect(once.settle(() => { throw goneError(); }, async () => {}, gone)).rejects.toBeInstanceOf(DeliveryGoneError);
    expect(once.settled).toBe(true);
    expect(counts.freed).toBe(1);
  });

  it('a settlement that finds the delivery gone is final', async () => {
    const { once, counts } = settleOnce();
    await expect(once.settle(() => 1, () => Promise.reject(goneError()), gone)).rejects.toBeInstanceOf(DeliveryGoneError);
    expect(once.settled).toBe(true);
    expect(counts.freed).toBe(1);
  });

  it('keeps a delivery held after a failed settlement, freeing its slot at once by default', async () => {
    const { once, counts } = settleOnce();
    await expect(once.settle(() => 1, () => Promise.reject(new Error('connection lost')), gone)).rejects.toThrow('connection lost');
    expect(once.settled).toBe(false);
    expect(counts.freed).toBe(1);
    await once.settle(() => 1, async () => {}, gone);
    expect(once.settled).toBe(true);
    expect(counts.freed).toBe(1);
  });

  it('with heldAfterFailure, keeps the slot until it is freed, and watches a held delivery once', async () => {
    const { once, counts, freeLater } = settleOnce(() => {});
    const fail = () => once.settle(() => 1, () => Promise.reject(new Error('out of memory')), gone);
    await expect(fail()).rejects.toThrow('out of memory');
    await expect(fail()).rejects.toThrow('out of memory');
    expect(counts).toEqual({ freed: 0, watched: 1 });
    freeLater();
    freeLater();
    expect(counts.freed).toBe(1);
    await once.settle(() => 1, async () => {}, gone);
    expect(counts.freed).toBe(1);
  });
});
