/**
 * Errors raised by the RabbitMQ transport. Each has a distinct `name`, so
 * callers can tell them apart across package copies without `instanceof`.
 */

/** The broker did not confirm a publish within `confirmTimeoutMs` (connection lost, blocked or overloaded). */
export class ConfirmTimeoutError extends Error {
  override readonly name: string = 'ConfirmTimeoutError';
  constructor(
    /** What was being published, for the message. */
    readonly operation: string,
    /** The timeout that ran out, in milliseconds. */
    readonly timeoutMs: number,
  ) {
    super(
      `rabbitmq: ${operation} was not confirmed by the broker within ${timeoutMs} ms ` +
        '(connection lost, blocked by a resource alarm, or overloaded); it may or may not have been stored',
    );
  }
}

/**
 * A delivery was settled after the channel it arrived on closed. The broker
 * has already put the message back on its queue and will deliver it again;
 * nothing was lost and the settlement had no effect on the broker.
 */
export class StaleDeliveryError extends Error {
  override readonly name: string = 'StaleDeliveryError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A second settlement of a delivery that is already settled (or being settled). */
export class AlreadySettledError extends Error {
  override readonly name: string = 'AlreadySettledError';
  constructor(id: string, queue: string) {
    super(`rabbitmq: delivery of message ${JSON.stringify(id)} from ${JSON.stringify(queue)} is already settled`);
  }
}

/** An operation on a transport that was closed with `close()`. */
export class TransportClosedError extends Error {
  override readonly name: string = 'TransportClosedError';
  constructor(operation: string) {
    super(`rabbitmq: cannot ${operation}: the transport is closed`);
  }
}
