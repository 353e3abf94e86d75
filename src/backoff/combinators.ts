import type { Backoff } from './types.js';
import { checkDelay, checkMax, checkWholeNumber } from './validate.js';

/**
 * Caps every delay of `backoff`: `delay(n) = min(d, maxMs)` where `d` is the
 * delay `backoff` returns. Passes `undefined` (stop) through.
 * @param backoff the strategy to cap (required, no default).
 * @param maxMs the largest delay returned, >= 0; Infinity allowed (required, no default).
 */
export function capDelay(backoff: Backoff, maxMs: number): Backoff {
  checkMax('capDelay', 'maxMs', maxMs);
  return (step) => {
    const d = backoff(step);
    return d === undefined ? undefined : Math.min(d, maxMs);
  };
}

/**
 * Stops after `attempts` retries: `delay(n) = undefined` when `n > attempts`,
 * else the delay `backoff` returns.
 * @param backoff the strategy to bound (required, no default).
 * @param attempts how many retries to allow, a whole number >= 1 (required, no default).
 */
export function stopAfterAttempts(backoff: Backoff, attempts: number): Backoff {
  checkWholeNumber('stopAfterAttempts', 'attempts', attempts, 1);
  return (step) => (step.attempt > attempts ? undefined : backoff(step));
}

/**
 * Stops once the total wait would exceed a budget: `delay(n) = undefined` when
 * `elapsedMs + d > totalMs`, else `d`, where `d` is the delay `backoff` returns
 * and `elapsedMs` the sum of the delays already returned.
 * @param backoff the strategy to bound (required, no default).
 * @param totalMs the most time all retries may wait in total, in milliseconds,
 *   finite and >= 0 (required, no default).
 */
export function stopAfterElapsed(backoff: Backoff, totalMs: number): Backoff {
  checkDelay('stopAfterElapsed', 'totalMs', totalMs);
  return (step) => {
    const d = backoff(step);
    return d === undefined || step.elapsedMs + d > totalMs ? undefined : d;
  };
}
