import type { Random } from '../time/random.js';

/** What a backoff strategy sees when asked for the next delay. */
export interface BackoffStep {
  /** 1 for the first retry, 2 for the second, and so on. */
  readonly attempt: number;
  /** The delay this strategy returned for the previous attempt, or undefined on the first. */
  readonly previousDelayMs: number | undefined;
  /** The sum of the delays returned so far in this schedule. */
  readonly elapsedMs: number;
  /** The injected random source, uniform in [0, 1). */
  readonly random: Random;
}

/**
 * A backoff strategy: a pure function from the step to the next delay in
 * milliseconds, or `undefined` to stop retrying. No clock and no hidden
 * state: everything it needs is in the step, which can be rebuilt from the
 * message headers in any process.
 */
export type Backoff = (step: BackoffStep) => number | undefined;
