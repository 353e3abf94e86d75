import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { describe, expect, it } from 'vitest';
import { createDashboard } from '../../src/dashboard/index.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { bearer, csrfOf, operatorRequest, postHeaders, sendAll, type TestMessage, waitFor } from './support.js';

const skip = await rabbitSkipReason();

describe.skipIf(Boolean(skip))('dashboard on RabbitMQ', () => {
  it('groups the error queue, sends a group back once, and the endpoint handles it', async () => {
    const run = randomUUID().slice(0, 8);
    const queue = `dash-orders-${run}`;
    const errorQueue = `dash-error-${run}`;
    const transport = new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: `redeliver-test-dash-${run}` });
    let poisoned = true;
    const handled: string[] = [];
    const endpoint = new Endpoint<TestMessage>({
      name: queue,
      transport,
      recoverability: { immediateRetries: 0, delayedRetries: 0, errorQueue },
      handler: (m, ctx) => {
        if (m.fail && poisoned) throw new RangeError(m.fail.message);
        handled.push(ctx.messageId);
      },
    });
    const dashboard = await createDashboard({ transport, errorQueues: [errorQueue] });
    const request = operatorRequest(() => dashboard.token);
    try {
      await endpoint.start();
      await sendAll(transport, queue, [1, 2, 3].map((n) => ({ n, fail: { name: 'RangeError', message: `amount ${n * 7} is over the limit` } })));
      await waitFor(() => endpoint.stats.deadLettered === 3, 20_000, 'three dead letters');
      await waitFor(async () => (await transport.errorQueue.count(errorQueue)) === 3, 10_000, 'the error queue to hold 3');

      const url = dashboard.url;
      const { groups } = (await request(`${url}api/groups`)).json();
      expect(groups).toHaveLength(1);
      expect(groups[0]).toMatchObject({ errorQueue, count: 3, signature: { errorName: 'RangeError', message: 'amount <n> is over the limit' } });

      poisoned = false;
      const csrf = await csrfOf(url, bearer(dashboard.token));
      const retry = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue, group: groups[0].signature.id }) });
      expect(retry.json()).toEqual({ sent: 3, missing: 0, failed: 0 });
      await waitFor(() => handled.length === 3, 20_000, 'the replayed messages to be handled');
      expect(handled.sort()).toEqual(['msg-1', 'msg-2', 'msg-3']);
      expect((await request(`${url}api/groups`)).json().groups).toHaveLength(0);
    } finally {
      await dashboard.close();
      await endpoint.stop();
      await transport.close();
      const connection = await amqp.connect(RABBITMQ_URL);
      const channel = await connection.createChannel();
      for (const q of [queue, errorQueue]) await channel.deleteQueue(q).catch(() => undefined);
      await connection.close();
    }
  }, 60_000);
});
