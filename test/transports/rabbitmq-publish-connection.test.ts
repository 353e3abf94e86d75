/**
 * Publishes and consumer acks on separate connections, on a RabbitMQ node of
 * the test's own: a resource alarm blocks the connection that publishes, and
 * the broker then stops reading it, so acks on the same connection would
 * wait for the alarm to clear. Where only these consumers can clear it (a
 * disk alarm from the backlog they drain) that is a deadlock.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Delivery, Subscription } from '../../src/transport/types.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { until } from '../support/own-servers.js';
import { RabbitCluster, rabbitNodeSkipReason } from '../support/rabbit-node.js';

const text = (s: string) => new TextEncoder().encode(s);

describe.skipIf(Boolean(rabbitNodeSkipReason()))('RabbitMQ: the publish connection', () => {
  let node: RabbitCluster;
  const transports: RabbitMqTransport[] = [];

  beforeAll(async () => {
    node = await RabbitCluster.start({ namePrefix: 'rmqpubconn' });
  }, 120_000);

  afterAll(async () => {
    await node?.memoryAlarm(false).catch(() => undefined);
    for (const t of transports) await t.close().catch(() => undefined);
    await node?.stop();
  }, 60_000);

  it('keeps acking during a memory alarm while a retry copy waits for the alarm to clear, and pauses without waiting for it', async () => {
    const t = new RabbitMqTransport({ url: node.url(), topologyPrefix: 'pubconn', connectionName: 'pubconn', reconnect: () => 100, confirmTimeoutMs: 120_000 });
    transports.push(t);
    const queue = 'pubconn.work';
    const total = 200;
    for (let i = 0; i < total; i++) await t.send(queue, { id: `m-${i}`, body: text(String(i)), headers: {} });
    await node.memoryAlarm(true);
    let handled = 0;
    let retry: Promise<void> | undefined;
    const subscription: Subscription = await t.consume(
      queue,
      (d: Delivery) => {
        handled++;
        // The first message's retry copy is a publish the alarm holds back; every other message is acked.
        if (d.id === 'm-0') retry = d.retryLater(1_000, {});
        else void d.ack();
      },
      { prefetch: 10 },
    );
    await until(`all ${total} handled during the alarm (have ${handled})`, 30_000, () => handled === total);
    expect(retry).toBeDefined();
    const paused = await Promise.race([subscription.pause().then(() => 'paused'), new Promise((r) => setTimeout(r, 10_000, 'still waiting'))]);
    expect(paused).toBe('paused');
    await node.memoryAlarm(false);
    await retry;
    await subscription.resume();
    await until('the retry copy handled', 30_000, () => handled === total + 1);
  }, 180_000);
});
