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

/**
 * A write the primary took, but fewer than `waitReplicas` replicas
 * confirmed within `waitReplicasTimeoutMs`, or the connection that made it
 * closed before they could confirm it. The write stands on the primary
 * and may still reach the replicas; if the primary fails before they have
 * it, a failover loses it. Transient: a send tried again may store the
 * message twice (a duplicate), a settlement tried again finds its delivery
 * already settled.
 */
export class ReplicasBehindError extends Error {
  override readonly name: string = 'ReplicasBehindError';
  constructor(
    readonly what: string,
    readonly wanted: number,
    /** How many replicas confirmed it; undefined when the connection closed before they could be asked. */
    readonly acknowledged: number | undefined,
    readonly timeoutMs: number,
    message?: string,
  ) {
    super(
      message ??
        `redis: ${what} is on the primary but only ${acknowledged} of the ${wanted} replicas waitReplicas asks for confirmed it within ${timeoutMs} ms; ` +
          'it may be lost if the primary fails now, and a retry may store it twice',
    );
  }

  /** The connection that made the write closed before the replicas confirmed it: it may be on the old primary only, or nowhere. */
  static connectionLost(what: string): ReplicasBehindError {
    return new ReplicasBehindError(
      what,
      0,
      undefined,
      0,
      `redis: the connection that wrote ${what} closed before the replicas confirmed it; it may be lost with the primary it went to, and a retry may store it twice`,
    );
  }
}
