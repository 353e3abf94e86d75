import type { FailureRecord } from '../headers/retry-state.js';
import type { Headers } from '../transport/types.js';

/** Everything a recoverability policy knows about a failure. */
export interface FailureContext {
  /** What the handler threw. */
  readonly error: unknown;
  readonly messageId: string;
  readonly queue: string;
  readonly headers: Readonly<Headers>;
  /** The failed attempt within this round of immediate retries, from 1. */
  readonly immediateAttempt: number;
  /** Delayed retries already taken. */
  readonly delayedAttempt: number;
  /** Handler attempts in all, counting the one that just failed. */
  readonly attempts: number;
  /** The delay before this delivery, when it was a delayed retry. */
  readonly lastDelayMs: number | undefined;
  /** The sum of the delayed-retry delays so far. */
  readonly delayedElapsedMs: number;
  /** Earlier failures, oldest first, the one that just happened last. */
  readonly history: readonly FailureRecord[];
  /**
   * The message's deadline, milliseconds since the Unix epoch: the earlier
   * of the sender's `expiresAt` and the first attempt plus
   * `recoverability.deadlineMs`. Undefined when it has none.
   */
  readonly deadlineAt: number | undefined;
  /** When the attempt failed, on the same clock as `deadlineAt`. */
  readonly failedAt: number;
}
