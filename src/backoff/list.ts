import type { Backoff } from './types.js';
import { checkDelay } from './validate.js';

/**
 * Delays read from a list, the last one repeating (the NATS JetStream
 * `BackOff` array): `delay(n) = delaysMs[min(n, length) - 1]`.
 * `fromList([1000, 5000, 30000])` gives 1 s, 5 s, 30 s, 30 s, ...
 * The list is copied, so changing it later does not change the strategy.
 * @param delaysMs one or more finite delays in milliseconds, each >= 0
 *   (required, no default; an empty list is rejected).
 */
export function fromList(delaysMs: readonly number[]): Backoff {
  if (delaysMs.length === 0) throw new RangeError('fromList: delaysMs must hold at least one delay, got an empty list');
  delaysMs.forEach((d, i) => checkDelay('fromList', `delaysMs[${i}]`, d));
  const delays = [...delaysMs];
  const last = delays.length - 1;
  return ({ attempt }) => delays[Math.min(attempt - 1, last)];
}
