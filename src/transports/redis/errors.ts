/**
 * Errors raised by the Redis transport. Each has a distinct `name`, so
 * callers can tell them apart across package copies without `instanceof`.
 * A queue at its bound extends the producer's `ThrottledError` and input no
 * retry can fix extends `FatalSendError`, so a `Producer` treats them right
 * by their brand alone (see `classifyRedisSendError`). The errors every
 * transport raises alike come from `transport/errors.ts`, re-exported here.
 */
import { FatalSendError, ThrottledError } from '../../transport/send-errors.js';

export { AlreadySettledError, DeliveryGoneError, SettlementRefusedError, TransportClosedError } from '../../transport/errors.js';

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
