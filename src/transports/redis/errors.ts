/**
 * Errors raised by the Redis transport. Each has a distinct `name`, so
 * callers can tell them apart across package copies without `instanceof`.
 * A queue at its bound extends the producer's `ThrottledError` and input no
 * retry can fix extends `FatalSendError`, so a `Producer` treats them right
 * by their brand alone (see `classifyRedisSendError`).
 */
import { FatalSendError, ThrottledError } from '../../producer/errors.js';
import type { DeliveryGone } from '../../transport/delivery-gone.js';

/** A send to a queue that holds `maxLength` messages already: consumers are behind. Nothing was written. */
export class QueueFullError extends ThrottledError {
  override readonly name: string = 'QueueFullError';
  constructor(
    readonly queue: string,
    readonly held: number,
    readonly maxLength: number,
  ) {
    super(`redis: queue ${queue} holds ${held} messages, at its maxLength of ${maxLength}: consumers are behind; nothing was written`);
  }
}

/** A body larger than `maxMessageBytes`: refused before it reaches the server. */
export class MessageTooLargeError extends FatalSendError {
  override readonly name: string = 'MessageTooLargeError';
  constructor(
    readonly bytes: number,
    readonly maxMessageBytes: number,
  ) {
    super(`redis: a message of ${bytes} bytes is larger than maxMessageBytes (${maxMessageBytes}); it was not sent`);
  }
}

/** An operation on a transport after `close()`. */
export class TransportClosedError extends FatalSendError {
  override readonly name: string = 'TransportClosedError';
  constructor(readonly operation: string) {
    super(`redis: ${operation} after the transport was closed`);
  }
}

/**
 * A settlement of a delivery this consumer no longer holds: its lease ran
 * out and another consumer took it over, it was settled already, or its
 * queue was deleted. Nothing was changed; the message is wherever its holder
 * put it.
 */
export class DeliveryGoneError extends Error implements DeliveryGone {
  override readonly name: string = 'DeliveryGoneError';
  readonly deliveryGone = true as const;
  constructor(
    readonly operation: string,
    readonly messageId: string,
    readonly queue: string,
  ) {
    super(`redis: ${operation} of message ${messageId} on ${queue} found it no longer held by this consumer (lease taken over, already settled, or queue deleted); nothing changed`);
  }
}

/** The server refused a settlement's copy (a key of the wrong type, say): the original stays held. */
export class SettlementRefusedError extends Error {
  override readonly name: string = 'SettlementRefusedError';
  constructor(
    readonly operation: string,
    readonly messageId: string,
    readonly reply: string,
  ) {
    super(`redis: ${operation} of message ${messageId} was refused by the server (${reply}); the message stays held`);
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
    super(`redis: message ${messageId} on ${queue} was already settled; nothing changed`);
  }
}
