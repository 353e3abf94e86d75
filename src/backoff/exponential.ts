import type { Backoff } from './types.js';
import { checkDelay, checkMax, checkMultiplier } from './validate.js';

/**
 * The capped exponential delay of retry `attempt`:
 * `min(initialMs × multiplier^(attempt-1), maxMs)`. Parameters are not checked
 * here; strategies check them when they are built. No defaults.
 * @param attempt the retry number, 1 for the first (required).
 * @param initialMs the delay of the first retry in milliseconds (required).
 * @param multiplier the growth factor per retry (required).
 * @param maxMs the cap (required).
 */
export function exponentialDelay(attempt: number, initialMs: number, multiplier: number, maxMs: number): number {
  // A zero start stays zero even when multiplier^(attempt-1) overflows to Infinity (0 × Infinity is NaN).
  if (initialMs === 0) return 0;
  return Math.min(initialMs * multiplier ** (attempt - 1), maxMs);
}

/**
 * A delay that multiplies each retry:
 * `delay(n) = min(initialMs × multiplier^(n-1), maxMs)`.
 * With the defaults and `initialMs = 1000`: 1 s, 2 s, 4 s, 8 s, ...
 * @param initialMs the delay of the first retry in milliseconds, finite and >= 0
 *   (required, no default).
 * @param multiplier the growth factor per retry, finite and >= 1 (default 2).
 * @param maxMs the largest delay returned (default Infinity: no cap).
 */
export function exponential(initialMs: number, multiplier = 2, maxMs = Infinity): Backoff {
  checkDelay('exponential', 'initialMs', initialMs);
  checkMultiplier('exponential', 'multiplier', multiplier);
  checkMax('exponential', 'maxMs', maxMs);
  return ({ attempt }) => exponentialDelay(attempt, initialMs, multiplier, maxMs);
}
