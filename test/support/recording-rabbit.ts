/**
 * A RabbitMQ transport for suites that leave their queues behind: every
 * queue it sends to, consumes, dead-letters into or sends back to is
 * recorded, and `deleteRecordedQueues` removes them after the run (which
 * also removes the auto-delete error-queue marker exchanges).
 */
import amqp from 'amqplib';
import type { ErrorQueueOperations } from '../../src/transport/error-queue.js';
import type { Delivery, Transport } from '../../src/transport/types.js';
import type { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL } from './brokers.js';

const queues = new Set<string>();

/** The transport, recording every queue it touches. */
export function recordingQueues(transport: RabbitMqTransport): Transport {
  const ops = transport.errorQueue;
  const errorQueue: ErrorQueueOperations = {
    count: (q) => ops.count(q),
    browse: (q, o) => ops.browse(q, o),
    get: (q, k) => ops.get(q, k),
    sendBack: async (q, k, o) => {
      if (o?.queue !== undefined) queues.add(o.queue);
      const sentTo = await ops.sendBack(q, k, o);
      if (sentTo !== undefined) queues.add(sentTo);
      return sentTo;
    },
    delete: (q, k) => ops.delete(q, k),
    purge: (q) => ops.purge(q),
    scan: (q, o) => ops.scan(q, o),
    sendBackEach: (q, o) => {
      if (o.queue !== undefined) queues.add(o.queue);
      return ops.sendBackEach(q, {
        ...o,
        onResult: (result) => {
          if (result.outcome === 'sent') queues.add(result.queue);
          o.onResult?.(result);
        },
      });
    },
    deleteEach: (q, o) => ops.deleteEach(q, o),
  };
  return {
    name: transport.name,
    capabilities: transport.capabilities,
    limits: transport.limits,
    errorQueue,
    inspection: transport.inspection,
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
            // A proxy, not a subclass: the delivery's methods need their own `this` (private fields).
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
            }) as Delivery,
          ),
        options,
      );
    },
    close: () => transport.close(),
  };
}

/** Deletes every queue recorded so far. */
export async function deleteRecordedQueues(): Promise<void> {
  if (queues.size === 0) return;
  const connection = await amqp.connect(RABBITMQ_URL);
  for (const queue of queues) {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await channel.deleteQueue(queue).catch(() => undefined);
    await channel.close().catch(() => undefined);
  }
  queues.clear();
  await connection.close();
}
