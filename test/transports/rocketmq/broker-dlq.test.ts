/**
 * The broker's own dead-letter topic on the real broker: a consumer group
 * whose `retryMaxTimes` is 0 and a `SimpleConsumer` that never acknowledges,
 * so the broker moves the message to `%DLQ%<group>` after its first lease
 * runs out. The transport reads the entry there, names the topic it came
 * from as its failure queue, and a send-back with no destination returns
 * it to that topic.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { SimpleConsumer } from 'rocketmq-client-nodejs';
import { HEADER } from '../../../src/headers/names.js';
import { request, REQUEST } from '../../../src/transports/rocketmq/remoting.js';
import { ROCKETMQ_ENDPOINTS, RocketScratch, rocketSkipReason } from './scratch.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('dlq');

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

describe.skipIf(Boolean(skip))("rocketmq: the broker's %DLQ% topic", () => {
  it('an entry the broker dead-lettered names its topic, and a send-back returns it there', async () => {
    const topic = `redeliver-dlq-${scratch.group.slice(-8)}`;
    const dlq = `%DLQ%${scratch.group}`;
    for (const broker of await scratch.admin.masters()) {
      const body = Buffer.from(JSON.stringify({ groupName: scratch.group, consumeEnable: true, consumeBroadcastEnable: false, retryQueueNums: 1, retryMaxTimes: 0, brokerId: 0, whichBrokerWhenConsumeSlowly: 1, notifyConsumerIdsChangedEnable: true }));
      expect((await request(broker, REQUEST.updateAndCreateSubscriptionGroup, {}, 5_000, body)).code).toBe(0);
    }
    const t = scratch.transport();
    const consumer = new SimpleConsumer({ endpoints: ROCKETMQ_ENDPOINTS, namespace: '', consumerGroup: scratch.group, subscriptions: new Map([[topic, '*']]), awaitDuration: 5_000, logger: quiet as never });
    try {
      await t.send(topic, { id: 'poison-1', body: Buffer.from('poison'), headers: { tenant: 'a' } });
      await consumer.startup();
      let received = 0;
      // Receive and never acknowledge: after its 10 s lease the broker has no retries left for the group and dead-letters it.
      for (let i = 0; i < 12 && received === 0; i++) received += (await consumer.receive(1, 10_000)).length;
      expect(received).toBe(1);
      let entries = await t.errorQueue.browse(dlq);
      for (let i = 0; i < 100 && entries.length === 0; i++) {
        await consumer.receive(1, 10_000).catch(() => []);
        entries = await t.errorQueue.browse(dlq);
      }
      expect(entries).toHaveLength(1);
      const [entry] = entries;
      expect(entry!.messageId).toBe('poison-1');
      expect(entry!.headers['tenant']).toBe('a');
      expect(entry!.headers[HEADER.failureQueue]).toBe(topic);
      expect(await t.errorQueue.sendBack(dlq, entry!.key)).toBe(topic);
      expect(await t.errorQueue.count(dlq)).toBe(0);
      const offsets = await scratch.admin.offsets(topic, scratch.group);
      expect(offsets.reduce((n, o) => n + o.max, 0)).toBe(2);
    } finally {
      await consumer.shutdown().catch(() => undefined);
      await t.close();
    }
  }, 120_000);
});
