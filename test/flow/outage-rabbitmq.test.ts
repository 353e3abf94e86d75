import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { describe, it } from 'vitest';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { expectOutageRidden } from '../support/real-outage.js';

const skip = await rabbitSkipReason();

describe.skipIf(Boolean(skip))('flow control through a real outage on RabbitMQ', () => {
  it('keeps the dependency near its normal load during the outage and handles every message after it', async () => {
    const queue = `flow-${randomUUID().slice(0, 8)}`;
    const errorQueue = `${queue}-error`;
    const transport = new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: `redeliver-test-${queue}` });
    try {
      await expectOutageRidden(transport, queue, errorQueue);
    } finally {
      await transport.close();
      const connection = await amqp.connect(RABBITMQ_URL);
      const channel = await connection.createChannel();
      for (const q of [queue, errorQueue]) await channel.deleteQueue(q).catch(() => undefined);
      await connection.close();
    }
  }, 120_000);
});
