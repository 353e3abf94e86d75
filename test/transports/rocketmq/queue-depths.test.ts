/**
 * What `transport.inspection` reads for a RocketMQ work queue, on the real
 * broker: ready (written and not yet received by the group, plus what the
 * broker gave back in the group's retry topic), delayed (the broker timer's
 * count for the topic) and in flight (only what this transport's own
 * consumers hold: a transport of another process reads 0, as the broker
 * reports no count of received, unacknowledged messages).
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { QueueDepth } from '../../../src/transport/inspection.js';
import type { Delivery } from '../../../src/transport/types.js';
import { RocketScratch, rocketSkipReason } from './scratch.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('depths');
const token = scratch.group.slice(-8);

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}; last read ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe.skipIf(Boolean(skip))('rocketmq: queue depths', () => {
  it('ready, delayed (the timer), in flight (own consumers only); a released message counts ready again; all 0 once drained', async () => {
    const queue = `redeliver-depths-${token}`;
    const worker = scratch.transport();
    const operator = scratch.transport({ connectionName: 'redeliver-operator' });
    const depth = async (t = operator): Promise<QueueDepth> => (await t.inspection.queueDepths([queue]))[0]!;
    const got: Delivery[] = [];
    const text = (s: string) => new TextEncoder().encode(s);
    try {
      for (let i = 0; i < 3; i++) await worker.send(queue, { id: `now-${i}`, body: text('x'), headers: {} });
      for (let i = 0; i < 2; i++) await worker.send(queue, { id: `later-${i}`, body: text('x'), headers: {}, delayMs: 25_000 });
      // The timer counts a timed message once its enqueue service took it in, a moment after the send.
      expect(await until('the timed messages in the timer', depth, (d) => d.delayed === 2, 10_000)).toEqual({ queue, kind: 'work', ready: 3, delayed: 2, inFlight: 0 });

      const sub = await worker.consume(queue, (d) => void got.push(d), { prefetch: 1 });
      await until('one delivery held', async () => got.length, (n) => n === 1, 20_000);
      expect(await depth(worker)).toEqual({ queue, kind: 'work', ready: 2, delayed: 2, inFlight: 1 });
      expect(await depth(operator)).toEqual({ queue, kind: 'work', ready: 2, delayed: 2, inFlight: 0 });

      // Given back while nothing receives: ready again, from the group's retry topic.
      await sub.pause();
      await got[0]!.release();
      const back = await until('the released message ready again, the timed ones due', depth, (d) => d.ready === 5, 90_000);
      expect(back).toEqual({ queue, kind: 'work', ready: 5, delayed: 0, inFlight: 0 });

      await sub.resume();
      for (let handled = 1; handled < got.length || got.length < 6; ) {
        await until('the next delivery', async () => got.length, (n) => n > handled, 30_000);
        await got[handled]!.ack();
        handled++;
      }
      expect(new Set(got.map((d) => d.id))).toEqual(new Set(['now-0', 'now-1', 'now-2', 'later-0', 'later-1']));
      expect(await until('drained', depth, (d) => d.ready === 0, 10_000)).toEqual({ queue, kind: 'work', ready: 0, delayed: 0, inFlight: 0 });
      await sub.close();
    } finally {
      await worker.close();
      await operator.close();
    }
  }, 150_000);
});
