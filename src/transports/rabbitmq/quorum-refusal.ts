/**
 * Quorum error queues and in-place reads. A quorum queue counts every
 * message a read gives back as a delivery, against a delivery limit that
 * RabbitMQ 4 sets to 20 by default and that an operator policy can set
 * without any client seeing it; past the limit the broker drops the
 * message. So the in-place operations refuse a quorum error queue unless
 * told the queue has no limit. A quorum queue marks every message it
 * delivers with `x-delivery-count` (RabbitMQ 3.x on the first delivery too);
 * a classic queue never does, so the first message read tells.
 */
import type { GetMessage } from 'amqplib';

/** An in-place operation found that the error queue is a quorum queue, and it may not read one. */
export class QuorumErrorQueueError extends Error {
  override readonly name: string = 'QuorumErrorQueueError';
  constructor(
    readonly queue: string,
    operation: string,
  ) {
    super(
      `rabbitmq: refused to ${operation}: '${queue}' is a quorum queue, and every in-place read counts a delivery of each entry it ` +
        'reads against its delivery limit (20 by default on RabbitMQ 4, or one set by a policy no client can see): browsing could make ' +
        'the broker drop entries. Nothing was changed; the message read was given back. Read the queue through the error store ' +
        "instead (redeliver errors ingest), or, if the queue has no delivery limit, allow in-place reads with the transport's " +
        'allowQuorumErrorQueueReads option',
    );
  }
}

/** Whether `message` came from a quorum queue: it carries the broker's `x-delivery-count` header. */
export function fromQuorumQueue(message: GetMessage): boolean {
  const headers: unknown = message.properties.headers;
  return typeof headers === 'object' && headers !== null && Object.hasOwn(headers, 'x-delivery-count');
}
