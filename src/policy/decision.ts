/**
 * What to do with a message whose handler failed. Decisions are data: a
 * custom policy receives the default decision and returns one of these.
 */
export type Decision =
  /** Run the handler again at once, in this process, without a broker round trip. */
  | { readonly kind: 'retry-now' }
  /** Hand the message back to the broker, to be delivered again after `delayMs`. */
  | { readonly kind: 'retry-later'; readonly delayMs: number }
  /** Move the message to the error queue. */
  | { readonly kind: 'dead-letter'; readonly reason: FailureReason | string }
  /** Drop the message: acknowledge it without handling. */
  | { readonly kind: 'discard'; readonly reason: string };

/** The reasons the engine itself gives for moving a message to the error queue. */
export type FailureReason =
  | 'retries-exhausted'
  | 'unrecoverable'
  | 'deserialization'
  /** The endpoint's schema refused the body, or its validator threw. */
  | 'validation'
  | 'requeue-limit'
  /** The custom policy threw or answered something that is not a decision. */
  | 'policy'
  /** The `unrecoverable` predicate threw. */
  | 'unrecoverable-predicate'
  /** The delayed backoff threw or answered something other than a finite number or undefined. */
  | 'backoff'
  /** The message's deadline passed, or its next retry would have come at or after it. */
  | 'expired';

export const retryNow = (): Decision => ({ kind: 'retry-now' });
export const retryLater = (delayMs: number): Decision => ({ kind: 'retry-later', delayMs });
export const deadLetter = (reason: FailureReason | string = 'policy'): Decision => ({ kind: 'dead-letter', reason });
export const discard = (reason = 'discarded by policy'): Decision => ({ kind: 'discard', reason });
