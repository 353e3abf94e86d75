import type { Random } from '../time/random.js';
import type { Backoff } from './types.js';
import { checkBetween, checkDelay, checkMax } from './validate.js';

/** A uniform draw from [min, max) (from (max, min] when max < min). */
function uniform(random: Random, min: number, max: number): number {
  return min + random() * (max - min);
}

/**
 * Spreads each delay of `backoff` over the whole range below it:
 * `delay(n) = U(0, d)` where `d` is the delay `backoff` returns. Retries of many
 * failed messages no longer land together (NSQ's FullJitterStrategy).
 * Passes `undefined` (stop) through.
 * @param backoff the strategy whose delays are jittered (required, no default).
 */
export function fullJitter(backoff: Backoff): Backoff {
  return (step) => {
    const d = backoff(step);
    return d === undefined ? undefined : uniform(step.random, 0, d);
  };
}

/**
 * Keeps half of each delay and jitters the other half:
 * `delay(n) = d/2 + U(0, d/2)` where `d` is the delay `backoff` returns.
 * Passes `undefined` (stop) through.
 * @param backoff the strategy whose delays are jittered (required, no default).
 */
export function equalJitter(backoff: Backoff): Backoff {
  return (step) => {
    const d = backoff(step);
    return d === undefined ? undefined : d / 2 + uniform(step.random, 0, d / 2);
  };
}

/**
 * Scales each delay by a random factor around 1 (nesbus `distortFactor`):
 * `delay(n) = d × U(1 - factor/100, 1 + factor/100)` where `d` is the delay
 * `backoff` returns; a factor of 10 gives d × 0.9 to d × 1.1.
 * Passes `undefined` (stop) through.
 * @param backoff the strategy whose delays are distorted (required, no default).
 * @param factor the distortion in percent, from 0 to 100 (required, no default).
 */
export function distort(backoff: Backoff, factor: number): Backoff {
  checkBetween('distort', 'factor', factor, 0, 100);
  const spread = factor / 100;
  return (step) => {
    const d = backoff(step);
    return d === undefined ? undefined : d * uniform(step.random, 1 - spread, 1 + spread);
  };
}

/**
 * Decorrelated jitter: each delay is drawn between the first delay and three
 * times the previous one, `delay(n) = min(maxMs, U(initialMs, 3 × previous))`,
 * where `previous` is the step's `previousDelayMs`, or `initialMs` on the first
 * retry. Never stops on its own.
 * @param initialMs the lower end of every draw in milliseconds, finite and >= 0
 *   (required, no default).
 * @param maxMs the largest delay returned; Infinity allowed (required, no default).
 */
export function decorrelatedJitter(initialMs: number, maxMs: number): Backoff {
  checkDelay('decorrelatedJitter', 'initialMs', initialMs);
  checkMax('decorrelatedJitter', 'maxMs', maxMs);
  return ({ previousDelayMs = initialMs, random }) =>
    Math.min(maxMs, uniform(random, initialMs, previousDelayMs * 3));
}
