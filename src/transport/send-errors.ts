/**
 * How a failed send is treated: `transient` (a timeout, an error the
 * broker answered) is retried at once; `throttled` (the broker is
 * overloaded and says so) backs off with jitter; `unavailable` (the broker
 * cannot be reached: connection refused or closed, a node shut down or
 * restarting) waits for it to come back with the same backoff; `fatal`
 * (bad input, a message too large, an unknown queue) is not retried.
 */
export type SendErrorKind = 'transient' | 'throttled' | 'unavailable' | 'fatal';

const THROTTLED = Symbol.for('redeliver.throttled');
const FATAL = Symbol.for('redeliver.fatalSend');

/** Thrown by a transport when the broker throttles a send (RocketMQ's `530 TOO_MANY_REQUESTS`). */
export class ThrottledError extends Error {
  readonly [THROTTLED] = true;
  override readonly name: string = 'ThrottledError';
}

/** Thrown by a transport for a send that no retry can fix. */
export class FatalSendError extends Error {
  readonly [FATAL] = true;
  override readonly name: string = 'FatalSendError';
}

/** A send attempt that did not finish in its time. The broker may still have the message. */
export class SendTimeoutError extends Error {
  override readonly name = 'SendTimeoutError';
}

/** The default classification, by brand: throttled, fatal, or else transient. */
export function classifyByBrand(error: unknown): SendErrorKind {
  if (typeof error !== 'object' || error === null) return 'transient';
  const marked = error as Record<symbol, unknown>;
  if (marked[THROTTLED] === true) return 'throttled';
  if (marked[FATAL] === true) return 'fatal';
  return 'transient';
}
