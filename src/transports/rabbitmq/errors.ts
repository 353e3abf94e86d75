/**
 * Errors raised by the RabbitMQ transport. Each has a distinct `name`, so
 * callers can tell them apart across package copies without `instanceof`.
 * Send errors the broker means as "not now" extend the producer's
 * `ThrottledError`, and those no retry can fix extend `FatalSendError`, so a
 * `Producer` treats them right by their brand alone (see
 * `RabbitMqTransport.classifySendError` and docs/producer.md).
 */
import { FatalSendError, ThrottledError } from '../../transport/send-errors.js';

/**
 * The broker did not confirm a publish within `confirmTimeoutMs`: the
 * connection was lost or being re-established, or the broker was slow. When
 * `written` is true the message may or may not have been stored; when false
 * it never left the process (no connection came up in time).
 */
export class ConfirmTimeoutError extends Error {
  override readonly name: string = 'ConfirmTimeoutError';
  constructor(
    /** What was being published, for the message. */
    readonly operation: string,
    /** The timeout that ran out, in milliseconds. */
    readonly timeoutMs: number,
    /** Whether the publish had been written to a connection. Default true: the outcome is unknown. */
    readonly written: boolean = true,
  ) {
    super(
      written
        ? `rabbitmq: ${operation} was not confirmed by the broker within ${timeoutMs} ms ` +
            '(connection lost, blocked by a resource alarm, or overloaded); it may or may not have been stored'
        : `rabbitmq: ${operation} was not sent within ${timeoutMs} ms (no usable connection: reconnecting, or the queue's ` +
            'declaration did not finish); it was not stored',
    );
  }
}

/**
 * The broker refused a publish with `basic.nack`: it was not stored. RabbitMQ
 * nacks when the queue is at its `x-max-length` with `x-overflow:
 * reject-publish` (see the transport's `maxLength`), and, rarely, when the
 * queue's process fails. The nack does not say which, so both count as
 * throttling: a `Producer` backs off and tries again.
 */
export class PublishNackedError extends ThrottledError {
  override readonly name: string = 'PublishNackedError';
  constructor(
    /** What was being published, for the message. */
    readonly operation: string,
  ) {
    super(
      `rabbitmq: ${operation} was refused by the broker (basic.nack): the queue is full (x-max-length with ` +
        'x-overflow reject-publish) or failed; it was not stored',
    );
  }
}

/**
 * A publish waited `confirmTimeoutMs` for the broker to accept publishes
 * again and was never written: the connection was blocked
 * (`connection.blocked`, a memory or disk alarm), or the socket did not
 * drain because the broker was not reading (its flow control). Nothing was
 * stored; a `Producer` backs off and tries again.
 */
export class PublishBlockedError extends ThrottledError {
  override readonly name: string = 'PublishBlockedError';
  constructor(
    /** What was being published, for the message. */
    readonly operation: string,
    /** The timeout that ran out, in milliseconds. */
    readonly timeoutMs: number,
    /** `blocked`: a `connection.blocked` from the broker; `flow`: the socket's write buffer was full. */
    readonly gate: 'blocked' | 'flow',
    /** The broker's reason for the block, such as `low on memory`, when it gave one. */
    readonly reason: string | undefined,
  ) {
    super(
      `rabbitmq: ${operation} waited ${timeoutMs} ms and was not sent: ` +
        (gate === 'blocked'
          ? `the broker blocked publishing${reason ? ` (${reason})` : ''}`
          : 'the broker did not read from the connection (flow control)') +
        '; it was not stored',
    );
  }
}

/**
 * The channel a publish was written on closed before the broker confirmed it
 * (the connection dropped, or the broker closed the channel). The message may
 * or may not have been stored. When the broker closed the channel, `cause` is
 * its error and `replyCode` its AMQP code; the fault may be another publish's
 * on the same channel, and `concernsThisPublish` tells whether the broker's
 * message names this publish's exchange.
 */
export class PublishChannelClosedError extends Error {
  override readonly name: string = 'PublishChannelClosedError';
  constructor(
    /** What was being published, for the message. */
    readonly operation: string,
    /** The AMQP reply code of the broker's channel close (`403`, `404`, `406`, `541`, ...), when it sent one. */
    readonly replyCode: number | undefined,
    /** Whether the broker's reason names this publish's exchange, so the fault is this publish's. */
    readonly concernsThisPublish: boolean,
    options?: { cause?: unknown },
  ) {
    super(
      `rabbitmq: ${operation} was not confirmed: its channel closed` +
        (options?.cause instanceof Error ? ` (${options.cause.message})` : '') +
        '; it may or may not have been stored',
      options,
    );
  }
}

/**
 * The broker returned a publish (`basic.return`): it was `mandatory` and no
 * queue took it, so it was **not stored**, although the broker then confirms
 * it. The queue it was meant for (or, for a delayed copy, the delay level it
 * enters by) was deleted after this transport declared it. The transport has
 * already forgotten that declaration, so the next publish declares the queue
 * again: a `Producer` retries it at once (transient), and a settlement whose
 * copy was returned leaves the original unsettled.
 */
export class PublishReturnedError extends Error {
  override readonly name: string = 'PublishReturnedError';
  constructor(
    /** What was being published, for the message. */
    readonly operation: string,
    /** The queue the message was meant for. */
    readonly queue: string,
    /** The broker's reply code, `312` NO_ROUTE. */
    readonly replyCode: number,
    /** The broker's reply text, such as `NO_ROUTE`. */
    readonly replyText: string,
  ) {
    super(
      `rabbitmq: ${operation} was returned by the broker (${replyCode} ${replyText}): no queue took it, so it was not stored; ` +
        `'${queue}' (or the delay level it goes through) was deleted, and the next attempt declares it again`,
    );
  }
}

/** A message larger than the transport's `maxMessageBytes` or the broker's `max_message_size`. Never retried. */
export class MessageTooLargeError extends FatalSendError {
  override readonly name: string = 'MessageTooLargeError';
  constructor(
    /** The body's size in bytes. */
    readonly bytes: number,
    /** The limit it exceeds, in bytes. */
    readonly maxBytes: number,
    /** Whose limit: this transport's option, or the broker's setting. */
    readonly limit: 'maxMessageBytes' | 'broker max_message_size',
    options?: { cause?: unknown },
  ) {
    super(`rabbitmq: message of ${bytes} bytes is larger than the ${limit} of ${maxBytes} bytes`, options);
  }
}

/** With `declareQueues: false`, a send or consume named a queue that does not exist (`404 NOT_FOUND`). Never retried. */
export class QueueNotFoundError extends FatalSendError {
  override readonly name: string = 'QueueNotFoundError';
  constructor(
    readonly queue: string,
    options?: { cause?: unknown },
  ) {
    super(`rabbitmq: queue ${JSON.stringify(queue)} does not exist, and declareQueues is false: declare it before sending to it`, options);
  }
}

/** The `reconnect` backoff gave up: the transport fails every operation from then on. */
export class ReconnectFailedError extends Error {
  override readonly name: string = 'ReconnectFailedError';
  constructor(
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(`rabbitmq: gave up reconnecting after ${attempts} attempts`, options);
  }
}

/**
 * A delivery was settled after the channel it arrived on closed. The broker
 * has already put the message back on its queue and will deliver it again;
 * nothing was lost and the settlement had no effect on the broker.
 */
export class StaleDeliveryError extends Error {
  override readonly name: string = 'StaleDeliveryError';
  /** The delivery can no longer be settled; the broker delivers the message again (see `isDeliveryGone`). */
  readonly deliveryGone = true as const;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A second settlement of a delivery that is already settled (or being settled). */
export class AlreadySettledError extends Error {
  override readonly name: string = 'AlreadySettledError';
  /** The delivery can no longer be settled; the broker delivers the message again (see `isDeliveryGone`). */
  readonly deliveryGone = true as const;
  constructor(id: string, queue: string) {
    super(`rabbitmq: delivery of message ${JSON.stringify(id)} from ${JSON.stringify(queue)} is already settled`);
  }
}

/** An operation on a transport that was closed with `close()`. */
export class TransportClosedError extends Error {
  override readonly name: string = 'TransportClosedError';
  /** The delivery can no longer be settled; the broker delivers the message again (see `isDeliveryGone`). */
  readonly deliveryGone = true as const;
  constructor(operation: string) {
    super(`rabbitmq: cannot ${operation}: the transport is closed`);
  }
}
