/**
 * Errors raised by the JetStream transport. Each has a distinct `name`, so
 * callers can tell them apart across package copies without `instanceof`.
 * A full queue extends the producer's `ThrottledError` and input no retry
 * can fix extends `FatalSendError`, so a `Producer` treats them right by
 * their brand alone (see `classifyJetStreamSendError`).
 */
import { FatalSendError, ThrottledError } from '../../producer/errors.js';
import type { DeliveryGone } from '../../transport/delivery-gone.js';

/** A send to a queue whose stream holds `maxLength` messages already (`maximum messages exceeded`): nothing was stored. */
export class QueueFullError extends ThrottledError {
  override readonly name: string = 'QueueFullError';
  constructor(
    readonly queue: string,
    readonly reason: string,
  ) {
    super(`jetstream: queue ${queue} is full (${reason}): consumers are behind; nothing was stored`);
  }
}

/** A message larger than the server's `max_payload`, headers included: refused before it reaches the server. */
export class MessageTooLargeError extends FatalSendError {
  override readonly name: string = 'MessageTooLargeError';
  constructor(
    readonly bytes: number,
    readonly maxPayload: number,
  ) {
    super(`jetstream: a message of ${bytes} bytes (body and headers) is larger than the server's max_payload (${maxPayload}); it was not sent`);
  }
}

/** An operation on a transport after `close()`. */
export class TransportClosedError extends FatalSendError {
  override readonly name: string = 'TransportClosedError';
  constructor(readonly operation: string) {
    super(`jetstream: ${operation} after the transport was closed`);
  }
}

/**
 * A settlement of a delivery whose lease ran out: the server may have given
 * the message to another consumer, so nothing was changed. The message comes
 * back by itself.
 */
export class DeliveryGoneError extends Error implements DeliveryGone {
  override readonly name: string = 'DeliveryGoneError';
  readonly deliveryGone = true as const;
  constructor(
    readonly operation: string,
    readonly messageId: string,
    readonly queue: string,
  ) {
    super(`jetstream: ${operation} of message ${messageId} on ${queue} came after its lease ran out (the server gives it out again); nothing changed`);
  }
}

/** A second settlement of a delivery already settled (or being settled): nothing changed. */
export class AlreadySettledError extends Error implements DeliveryGone {
  override readonly name: string = 'AlreadySettledError';
  readonly deliveryGone = true as const;
  constructor(
    readonly queue: string,
    readonly messageId: string,
  ) {
    super(`jetstream: message ${messageId} on ${queue} was already settled; nothing changed`);
  }
}

/** A stream that exists under a queue's name but is not one redeliver can use (another subject, another retention). */
export class StreamConflictError extends FatalSendError {
  override readonly name: string = 'StreamConflictError';
  constructor(
    readonly stream: string,
    readonly detail: string,
  ) {
    super(`jetstream: stream ${stream} exists but ${detail}; delete it or choose another prefix`);
  }
}
