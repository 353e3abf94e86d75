/**
 * Errors raised by the JetStream transport. Each has a distinct `name`, so
 * callers can tell them apart across package copies without `instanceof`.
 * A full queue extends the producer's `ThrottledError` and input no retry
 * can fix extends `FatalSendError`, so a `Producer` treats them right by
 * their brand alone (see `classifyJetStreamSendError`). The errors every
 * transport raises alike come from `transport/errors.ts`, re-exported here.
 */
import { FatalSendError, ThrottledError } from '../../transport/send-errors.js';

export { AlreadySettledError, DeliveryGoneError, TransportClosedError } from '../../transport/errors.js';

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
