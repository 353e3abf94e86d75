import type { Random } from '../time/random.js';
import type { Backoff } from './types.js';
import { checkWholeNumber } from './validate.js';

/**
 * Lists the delays `backoff` yields for retries 1 to `count`, feeding each
 * step the previous delay and the sum of the delays so far, and stopping early
 * when it returns `undefined`: `[delay(1), delay(2), ..., delay(k)]`, `k ≤ count`.
 * Pass `seededRandom(seed)` to get the same list every time.
 * @param backoff the strategy to run (required, no default).
 * @param count the most retries to list, a whole number >= 0 (required, no default).
 * @param random the random source handed to every step (required, no default).
 */
export function delaysOf(backoff: Backoff, count: number, random: Random): number[] {
  checkWholeNumber('delaysOf', 'count', count, 0);
  const delays: number[] = [];
  let previousDelayMs: number | undefined;
  let elapsedMs = 0;
  for (let attempt = 1; attempt <= count; attempt++) {
    const delay = backoff({ attempt, previousDelayMs, elapsedMs, random });
    if (delay === undefined) break;
    delays.push(delay);
    previousDelayMs = delay;
    elapsedMs += delay;
  }
  return delays;
}
