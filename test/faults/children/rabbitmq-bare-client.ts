/**
 * What the bare amqplib client's worker, producer and fault adapter share:
 * the queues of a bare scope and how they are declared, the header that
 * carries a delayed retry's round, a named connection, and a publish that
 * waits for the broker's confirm.
 *
 * A bare scope has three quorum queues: the work queue, a delay queue and
 * an error queue. A delayed retry is a copy published to the delay queue
 * with a per-message `expiration`; the delay queue dead-letters expired
 * copies to the work queue through the default exchange, at least once (a
 * quorum queue's `x-dead-letter-strategy: at-least-once`, which RabbitMQ
 * honours only with `x-overflow: reject-publish`). The fault adapter's
 * bare scope declares them on the suite's own cluster and deletes every one
 * of them at its cleanup (`RabbitMqFaultAdapter.bareScope`); the worker
 * declares them again each time it connects, as an amqplib application
 * does, so a queue that `autoheal` dropped (declared on the side that lost)
 * comes back.
 */
import amqp from 'amqplib';
import type { Channel, ChannelModel, ConfirmChannel, Options } from 'amqplib';

/** The header a delayed retry's copy carries: how many delayed retries made it (1, 2). */
export const ROUND_HEADER = 'x-bare-round';

/** How long a publish waits for the broker's confirm before it counts as failed. */
const CONFIRM_TIMEOUT_MS = 10_000;
/** How long a connection attempt may take. */
const CONNECT_TIMEOUT_MS = 5_000;

/** The delay queue of bare work queue `queue`. */
export function bareDelayQueue(queue: string): string {
  return `${queue}.delay`;
}

/** The queues of a bare scope, each with the arguments it is declared with, in the order they are declared. */
export function bareQueues(queue: string, errorQueue: string): { readonly name: string; readonly arguments: Record<string, unknown> }[] {
  const quorum = { 'x-queue-type': 'quorum' };
  return [
    { name: queue, arguments: quorum },
    { name: errorQueue, arguments: quorum },
    {
      name: bareDelayQueue(queue),
      arguments: { ...quorum, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue, 'x-dead-letter-strategy': 'at-least-once', 'x-overflow': 'reject-publish' },
    },
  ];
}

/** Declares the queues of the bare scope of work queue `queue` through `channel`, in order (see {@link bareQueues}). */
export async function declareBareQueues(channel: Channel, queue: string, errorQueue: string): Promise<void> {
  for (const q of bareQueues(queue, errorQueue)) await channel.assertQueue(q.name, { durable: true, arguments: q.arguments });
}

/** A connection to `url` that the broker shows as `name`; its errors are left to its `close` event. */
export async function bareConnect(url: string, name: string): Promise<ChannelModel> {
  const model = await amqp.connect(url, { noDelay: true, timeout: CONNECT_TIMEOUT_MS, clientProperties: { connection_name: name } });
  model.on('error', () => undefined);
  return model;
}

/**
 * Publishes `id` (the body and the message id, persistent) to `queue`
 * through the default exchange on a confirm channel; resolves once the
 * broker confirmed it, rejects when it nacked, the channel closed, or no
 * confirm came within {@link CONFIRM_TIMEOUT_MS}.
 */
export function publishConfirmed(channel: ConfirmChannel, queue: string, id: string, options: Options.Publish = {}): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no confirm within ${CONFIRM_TIMEOUT_MS} ms`)), CONFIRM_TIMEOUT_MS);
    try {
      channel.sendToQueue(queue, Buffer.from(id), { ...options, persistent: true, messageId: id }, (error: unknown) => {
        clearTimeout(timer);
        if (error) reject(error instanceof Error ? error : new Error(`nacked: ${String(error)}`));
        else resolve();
      });
    } catch (error) {
      clearTimeout(timer);
      reject(error as Error);
    }
  });
}
