/**
 * Delays longer than one timed message may be held, on the real broker: a
 * transport whose `maxTimedDelayMs` is 2.5 s carries a 7 s delayed retry in
 * hops. The retry arrives no sooner than its due time, the handler runs once
 * for it, and it counts as one delayed attempt and one delivery: the hops
 * are messages the consumer sends on without handing them out.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Endpoint, Producer, RetryLaterError } from '../../../src/index.js';
import { RocketMqTransport } from '../../../src/transports/rocketmq/index.js';
import { RocketScratch, rocketSkipReason } from './scratch.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('hops');
const token = scratch.group.slice(-8);

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('rocketmq: maxTimedDelayMs', () => {
  it('is a whole number of milliseconds from 1 000; 24 h by default', () => {
    expect(() => new RocketMqTransport({ maxTimedDelayMs: 999 })).toThrow(/maxTimedDelayMs must be a whole number from 1000/);
    expect(() => new RocketMqTransport({ maxTimedDelayMs: 1_500.5 })).toThrow(RangeError);
  });
});

describe.skipIf(Boolean(skip))('rocketmq: a delayed retry longer than one timed message, in hops', () => {
  it('a 7 s retry with maxTimedDelayMs 2.5 s: hops on the topic, on time, the handler run once for it, one attempt', async () => {
    const queue = `redeliver-hops-${token}`;
    const maxTimedDelayMs = 2_500;
    const retryMs = 7_000;
    const transport = scratch.transport({ maxTimedDelayMs });
    const calls: { at: number; attempt: number; delayedAttempt: number; deliveryCount: number }[] = [];
    let failedAt = 0;
    const endpoint = new Endpoint<{ n: number }>({
      name: queue,
      transport,
      recoverability: { immediateRetries: 0, delayedRetries: 3 },
      handler: (_body, ctx) => {
        calls.push({ at: Date.now(), attempt: ctx.attempt, delayedAttempt: ctx.delayedAttempt, deliveryCount: ctx.deliveryCount });
        if (calls.length === 1) {
          failedAt = Date.now();
          throw new RetryLaterError(retryMs);
        }
      },
    });
    try {
      await endpoint.start();
      await new Producer({ transport }).send(queue, { n: 1 }, { id: 'long-1' });
      await until('the retried attempt', () => calls.length === 2, 30_000);
      // Time for a third run, if a hop were handed out.
      await new Promise((r) => setTimeout(r, 3_000));
      const written = (await scratch.admin.offsets(queue, scratch.group)).reduce((n, o) => n + o.max, 0);
      const late = calls[1]!.at - (failedAt + retryMs);
      console.info(`rocketmq hops: ${written} messages written to the topic for one retry of ${retryMs} ms in timed messages of at most ${maxTimedDelayMs} ms; the retry ${late} ms after its due time`);
      expect(calls).toHaveLength(2);
      expect(late).toBeGreaterThanOrEqual(0);
      expect(late).toBeLessThan(transport.limits.delayPrecisionMs! + 2_000);
      expect(calls[1]).toMatchObject({ attempt: 2, delayedAttempt: 1, deliveryCount: 1 });
      // The message, its retry copy, and at least one hop (7 s in legs of at most 2.5 s: two, unless the broker was late).
      expect(written).toBeGreaterThanOrEqual(3);
      expect(written).toBeLessThanOrEqual(4);
    } finally {
      await endpoint.stop();
      await transport.close();
    }
  }, 60_000);
});
