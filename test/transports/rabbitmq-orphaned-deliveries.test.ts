/**
 * A work queue deleted while its consumer holds deliveries: RabbitMQ's
 * `if-empty` delete looks at ready messages only, so the unacked ones go
 * with the queue and are never delivered again. Their settlements must keep
 * the message (a retry or error-queue copy is still published, a release
 * publishes it back) instead of trusting a redelivery that never comes.
 * The fault suite's queue-deleted scenario lost such messages (m-992, m-12).
 *
 * Runs on a node of its own: nothing here touches the shared broker.
 */
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { RabbitMqTransport, type RabbitMqDelivery } from '../../src/transports/rabbitmq/index.js';
import { until } from '../support/own-servers.js';
import { RabbitCluster, rabbitNodeSkipReason } from '../support/rabbit-node.js';

const text = (s: string) => new TextEncoder().encode(s);

describe.skipIf(Boolean(rabbitNodeSkipReason()))('RabbitMQ: deliveries whose work queue was deleted under them', () => {
  let node: RabbitCluster;
  const transports: RabbitMqTransport[] = [];
  let n = 0;

  beforeAll(async () => {
    node = await RabbitCluster.start({ namePrefix: 'rmqorphan' });
  }, 120_000);

  afterAll(async () => {
    for (const t of transports) await t.close().catch(() => undefined);
    await node?.stop();
  }, 60_000);

  /** A transport on the node with a topology of its own, and a queue name. */
  function open(options: ConstructorParameters<typeof RabbitMqTransport>[0] = {}): { t: RabbitMqTransport; queue: string } {
    const id = `orphan${++n}`;
    const t = new RabbitMqTransport({ url: node.url(), topologyPrefix: id, reconnect: () => 100, ...options });
    transports.push(t);
    return { t, queue: `${id}.work` };
  }

  /** Runs `use` on a channel of the test's own. */
  async function onChannel<T>(use: (channel: amqp.Channel) => Promise<T>): Promise<T> {
    const connection = await amqp.connect(node.url());
    try {
      return await use(await connection.createChannel());
    } finally {
      await connection.close().catch(() => undefined);
    }
  }

  /** Deletes `queue` if it has no ready message, as the fault suite does: unacked messages do not count. */
  const deleteIfEmpty = (queue: string) => onChannel((channel) => channel.deleteQueue(queue, { ifEmpty: true }));

  /** Takes every message off `queue`: their ids. */
  const drain = (queue: string) =>
    onChannel(async (channel) => {
      const ids: string[] = [];
      for (let m = await channel.get(queue, { noAck: true }); m; m = await channel.get(queue, { noAck: true })) ids.push(String(m.properties.messageId));
      return ids;
    });

  /** Consumes `queue` into a list; resolves the list and a promise of the consumer's cancellation by the broker. */
  async function consume(t: RabbitMqTransport, queue: string) {
    const deliveries: RabbitMqDelivery[] = [];
    const cancelled = new Promise<void>((resolve) => t.on('warning', (w) => w.message.includes('cancelled the consumer') && resolve()));
    await t.consume(queue, (d) => void deliveries.push(d as RabbitMqDelivery), { prefetch: 10 });
    return { deliveries, cancelled };
  }

  it('publishes the retry and error-queue copies of deliveries whose queue was deleted, and a release publishes the message back', async () => {
    const { t, queue } = open();
    const errorQueue = `${queue}.error`;
    const { deliveries, cancelled } = await consume(t, queue);
    for (const id of ['r', 'd', 'l', 'a']) await t.send(queue, { id, body: text(id), headers: {} });
    await until('four deliveries', 10_000, () => deliveries.length === 4);

    // Nothing ready, four unacked: the if-empty delete goes through, and the four originals go with the queue.
    await deleteIfEmpty(queue);
    await cancelled;
    const [retry, deadLetter, release, ack] = deliveries as [RabbitMqDelivery, RabbitMqDelivery, RabbitMqDelivery, RabbitMqDelivery];
    await retry.retryLater(50, {});
    await deadLetter.deadLetter(errorQueue, { [HEADER.failureReason]: 'test' });
    await release.release();
    await ack.ack();
    expect([retry, deadLetter, release, ack].every((d) => d.settled)).toBe(true);

    // The consumer declared the queue again: the retry and the released message come back to it.
    await until('the retry and the release to come back', 10_000, () => deliveries.length === 6);
    expect(deliveries.slice(4).map((d) => d.id).sort()).toEqual(['l', 'r']);
    for (const d of deliveries.slice(4)) await d.ack();
    expect(await drain(errorQueue)).toEqual(['d']);
  });

  it('a retry copy confirmed just before the queue was deleted is the message: the settlement resolves and the copy comes back', async () => {
    let deleted: Promise<void> | undefined;
    let queueName = '';
    const { t, queue } = open({
      faults: {
        // Between the confirmed copy and the ack of the original: the queue goes, and the consumer is cancelled.
        afterCopyConfirmed: async () => {
          await (deleted ??= deleteIfEmpty(queueName).then(() => undefined));
          await until('the consumer to be cancelled', 10_000, () => cancelledYet);
        },
      },
    });
    queueName = queue;
    let cancelledYet = false;
    const { deliveries, cancelled } = await consume(t, queue);
    void cancelled.then(() => (cancelledYet = true));
    await t.send(queue, { id: 'm', body: text('m'), headers: {} });
    await until('a delivery', 10_000, () => deliveries.length === 1);

    // Long enough for the consumer to declare the queue again first (a copy back sooner goes to the unroutable queue).
    await deliveries[0]!.retryLater(1_000, {});
    expect(deliveries[0]!.settled).toBe(true);
    await until('the retry to come back', 10_000, () => deliveries.length === 2);
    expect(deliveries[1]!.id).toBe('m');
    await deliveries[1]!.ack();
  });
});
