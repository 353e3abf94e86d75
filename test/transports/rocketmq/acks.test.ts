/**
 * Acks several to a request, on the real broker: the entries of one turn
 * go out together (at most 32 to a request), each settles by its own
 * entry's status, and the acknowledged messages do not come back.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { SimpleConsumer } from 'rocketmq-client-nodejs';
import { AckBatch, MAX_ENTRIES } from '../../../src/transports/rocketmq/acks.js';
import { statusCode } from '../../../src/transports/rocketmq/send-errors.js';
import type { MessageView } from '../../../src/transports/rocketmq/client.js';
import { ROCKETMQ_ENDPOINTS, RocketScratch, rocketSkipReason } from './scratch.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('acks');
afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 60_000);

/** The proxy's status for a receipt handle whose invisible time ran out. */
const INVALID_RECEIPT_HANDLE = 40013;
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

async function receiveAll(consumer: SimpleConsumer, n: number, invisibleMs: number): Promise<MessageView[]> {
  const got: MessageView[] = [];
  for (let i = 0; i < 40 && got.length < n; i++) got.push(...(await consumer.receive(Math.min(32, n - got.length), invisibleMs).catch(() => [])));
  return got;
}

describe.skipIf(Boolean(skip))('rocketmq: acks several to a request', () => {
  it('acks of one turn go out 32 to a request; an expired receipt handle fails alone with its own status; the others are not delivered again', async () => {
    const t = scratch.transport();
    const topic = `acks-${randomUUID().slice(0, 8)}`;
    await t.send(topic, { id: 'expired', body: Buffer.from('x'), headers: {} });
    const consumer = new SimpleConsumer({ endpoints: ROCKETMQ_ENDPOINTS, namespace: '', consumerGroup: scratch.group, subscriptions: new Map([[topic, '*']]), awaitDuration: 5_000, requestTimeout: 10_000, logger: quiet });
    await consumer.startup();
    try {
      const [expired] = await receiveAll(consumer, 1, 10_000);
      expect(expired).toBeDefined();
      const expiredAt = Date.now() + 10_000;
      for (let i = 0; i < 41; i++) await t.send(topic, { id: `m-${i}`, body: Buffer.from(String(i)), headers: {} });
      await new Promise((r) => setTimeout(r, Math.max(0, expiredAt - Date.now()) + 500));
      // The expired message comes back too, under a new handle; the old handle stays expired.
      const all = await receiveAll(consumer, 42, 15_000);
      const receivedAt = Date.now();
      expect(all).toHaveLength(42);
      // One message is left unacked: it must come back, the acked ones must not.
      const control = all.find((view) => view.properties.get('redeliver-id') === 'm-40')!;
      const fresh = all.filter((view) => view !== control);

      const requests: number[] = [];
      const rpc = consumer.ackMessageViaRpc.bind(consumer);
      consumer.ackMessageViaRpc = (endpoints, request, timeout) => {
        requests.push(request.getEntriesList().length);
        return rpc(endpoints, request, timeout);
      };
      const acks = new AckBatch({ group: scratch.group, requestTimeoutMs: 10_000, consumer: async () => consumer });
      const outcomes = await Promise.allSettled([expired!, ...fresh].map((view) => acks.ack(view)));

      expect(requests).toEqual([MAX_ENTRIES, 42 - MAX_ENTRIES]);
      expect(outcomes[0]!.status).toBe('rejected');
      expect(statusCode((outcomes[0] as PromiseRejectedResult).reason)).toBe(INVALID_RECEIPT_HANDLE);
      expect(outcomes.slice(1).every((o) => o.status === 'fulfilled')).toBe(true);

      await new Promise((r) => setTimeout(r, Math.max(0, receivedAt + 15_000 - Date.now())));
      const again = await receiveAll(consumer, 1, 10_000);
      for (const view of await consumer.receive(32, 10_000).catch(() => [])) again.push(view);
      expect(again.map((view) => view.properties.get('redeliver-id'))).toEqual(['m-40']);
      await consumer.ack(again[0]!);
    } finally {
      await consumer.shutdown();
      await t.close();
    }
  }, 120_000);
});
