import amqp from 'amqplib';
import { afterAll } from 'vitest';
import type { Transport } from '../../src/transport/types.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { describeTransportConformance } from './suite.js';

const skip = await rabbitSkipReason();

/** Every queue the suite touched, deleted after the run (the suite itself leaves them). */
const queues = new Set<string>();

function recordingQueues(transport: RabbitMqTransport): Transport {
  return {
    name: transport.name,
    capabilities: transport.capabilities,
    send: (queue, message) => {
      queues.add(queue);
      return transport.send(queue, message);
    },
    consume: (queue, listener, options) => {
      queues.add(queue);
      return transport.consume(
        queue,
        (delivery) =>
          listener(
            new Proxy(delivery, {
              get(target, property) {
                if (property === 'deadLetter') {
                  return (errorQueue: string, headers: Record<string, string>) => {
                    queues.add(errorQueue);
                    return target.deadLetter(errorQueue, headers);
                  };
                }
                const value: unknown = Reflect.get(target, property);
                return typeof value === 'function' ? value.bind(target) : value;
              },
            }),
          ),
        options,
      );
    },
    close: () => transport.close(),
  };
}

afterAll(async () => {
  if (skip || queues.size === 0) return;
  const connection = await amqp.connect(RABBITMQ_URL);
  for (const queue of queues) {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await channel.deleteQueue(queue).catch(() => undefined);
    await channel.close().catch(() => undefined);
  }
  await connection.close();
});

describeTransportConformance({
  name: 'rabbitmq',
  create: async () => recordingQueues(new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: 'redeliver-conformance' })),
  skip,
});
