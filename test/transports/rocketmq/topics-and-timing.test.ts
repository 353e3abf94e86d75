/**
 * The RocketMQ transport on the real broker: a topic whose type allows no
 * delayed messages is refused with a TopicTypeError; headers larger than
 * the proxy's property limit are refused before anything is sent; timed
 * deliveries are never early (200 of them), and arrive within the broker's
 * timer precision, which the transport declares.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { request, REQUEST } from '../../../src/transports/rocketmq/remoting.js';
import { MAX_PROPERTY_BYTES, MessageTooLargeError, TopicTypeError } from '../../../src/transports/rocketmq/index.js';
import { RocketScratch, rocketSkipReason } from './scratch.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('topics');

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

const token = scratch.group.slice(-8);

describe.skipIf(Boolean(skip))('rocketmq: topics and timing on the broker', () => {
  it('a NORMAL topic is refused with a TopicTypeError naming the fix, for sends and consumers', async () => {
    const topic = `redeliver-normal-${token}`;
    scratch.topics.add(topic);
    for (const broker of await scratch.admin.masters()) {
      const fields = { topic, defaultTopic: 'TBW102', readQueueNums: '1', writeQueueNums: '1', perm: '6', topicFilterType: 'SINGLE_TAG', topicSysFlag: '0', order: 'false', attributes: '+message.type=NORMAL' };
      expect((await request(broker, REQUEST.updateAndCreateTopic, fields)).code).toBe(0);
    }
    for (let i = 0; i < 100 && (await scratch.admin.route(topic)) === undefined; i++) await new Promise((r) => setTimeout(r, 50));
    const t = scratch.transport();
    try {
      const sent = t.send(topic, { id: 'n-1', body: new Uint8Array([1]), headers: {} });
      await expect(sent).rejects.toBeInstanceOf(TopicTypeError);
      await expect(sent).rejects.toThrow(/message\.type=NORMAL.*MIXED/);
      expect(t.classifySendError(await sent.catch((e: unknown) => e))).toBe('fatal');
      await expect(t.consume(topic, () => undefined, { prefetch: 1 })).rejects.toBeInstanceOf(TopicTypeError);
    } finally {
      await t.close();
    }
  });

  it('headers over the property limit are refused with a MessageTooLargeError, nothing sent', async () => {
    const topic = `redeliver-big-${token}`;
    const t = scratch.transport();
    try {
      await t.send(topic, { id: 'small', body: new Uint8Array([1]), headers: { a: 'b' } });
      const headers = { big: 'x'.repeat(MAX_PROPERTY_BYTES) };
      expect(t.limits.headerBytes!(headers)).toBeGreaterThan(MAX_PROPERTY_BYTES);
      const refused = await t.send(topic, { id: 'big', body: new Uint8Array([1]), headers }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(MessageTooLargeError);
      expect((refused as MessageTooLargeError).part).toBe('properties');
      expect(t.classifySendError(refused)).toBe('fatal');
      const offsets = await scratch.admin.offsets(topic, scratch.group);
      expect(offsets.reduce((n, o) => n + o.max, 0)).toBe(1);
    } finally {
      await t.close();
    }
  });

  it('200 timed deliveries: none early, each within the declared timer precision (and a little processing) late', async () => {
    const topic = `redeliver-timed-${token}`;
    const t = scratch.transport();
    const count = 200;
    const due = new Map<string, number>();
    const lateness: number[] = [];
    try {
      let all!: () => void;
      const done = new Promise<void>((r) => (all = r));
      const sub = await t.consume(topic, async (d) => {
        lateness.push(Date.now() - due.get(d.id)!);
        await d.ack();
        if (lateness.length === count) all();
      }, { prefetch: 64 });
      const precisionMs = t.limits.delayPrecisionMs!;
      await Promise.all(
        Array.from({ length: count }, (_, i) => {
          const delayMs = 200 + ((i * 37) % 2_800);
          const id = `t-${i}`;
          due.set(id, Date.now() + delayMs);
          return t.send(topic, { id, body: new Uint8Array([1]), headers: {}, delayMs });
        }),
      );
      await done;
      await sub.close();
      lateness.sort((a, b) => a - b);
      console.info(`rocketmq timed: ${count} deliveries, lateness min ${lateness[0]} ms, p50 ${lateness[count / 2]} ms, p99 ${lateness[Math.floor(count * 0.99)]} ms, max ${lateness.at(-1)} ms; timerPrecisionMs ${precisionMs}`);
      expect(lateness.filter((ms) => ms < 0)).toEqual([]);
      expect(lateness.at(-1)!).toBeLessThan(precisionMs + 1_000);
    } finally {
      await t.close();
    }
  }, 60_000);
});
