/**
 * RabbitMQ in `npm run bench -- latency`: a RabbitMqTransport, and raw
 * amqplib beside it (a confirm channel that sends persistent messages, and
 * a consumer of prefetch P that acks each message).
 */
import amqp from 'amqplib';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { workQueueArguments } from '../../src/transports/rabbitmq/topology.js';
import { readStamp, type BrokerCase, type CaseSettings, type Rig } from './rig.js';

export function rabbitmqCase(settings: CaseSettings, url: string): BrokerCase {
  const queues = { bare: `bench-latency-${settings.token}-bare`, endpoint: `bench-latency-${settings.token}-rdl`, transport: `bench-latency-${settings.token}-trn` };
  return {
    name: 'rabbitmq',
    bareName: 'amqplib consume + ack',
    bare: async (onHandled): Promise<Rig> => {
      const connection = await amqp.connect(url, { noDelay: true });
      const publisher = await connection.createConfirmChannel();
      const consumer = await connection.createChannel();
      // The queue as the transport declares a work queue.
      await consumer.assertQueue(queues.bare, { durable: true, arguments: workQueueArguments('classic', undefined) });
      await consumer.prefetch(settings.prefetch, false);
      await consumer.consume(queues.bare, (message) => {
        if (!message) return;
        onHandled(readStamp(message.content), performance.now());
        consumer.ack(message);
      });
      return {
        send: (body, id) =>
          new Promise<void>((resolve, reject) => {
            publisher.sendToQueue(queues.bare, body, { persistent: true, messageId: id }, (error: unknown) => (error ? reject(error as Error) : resolve()));
          }),
        close: () => connection.close(),
      };
    },
    transport: (side) => ({ transport: new RabbitMqTransport({ url, connectionName: 'redeliver-bench-latency' }), queue: queues[side] }),
    cleanup: async () => {
      const connection = await amqp.connect(url);
      try {
        const channel = await connection.createChannel();
        for (const queue of Object.values(queues)) await channel.deleteQueue(queue);
      } finally {
        await connection.close();
      }
    },
  };
}
