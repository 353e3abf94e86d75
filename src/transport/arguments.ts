/**
 * The argument checks every transport makes the same way, so a bad call
 * fails with the same error whichever broker is behind it.
 */
import type { DeliveryListener } from './types.js';

/** Throws a TypeError unless `queue` is a non-empty string; `what` names the call. */
export function checkQueue(queue: unknown, what: string): asserts queue is string {
  if (typeof queue !== 'string' || queue.length === 0) throw new TypeError(`${what}: queue must be a non-empty string`);
}

/** Throws a RangeError unless `prefetch` is a positive integer; `what` names the call. Returns it. */
export function checkPrefetch(prefetch: unknown, what: string): number {
  if (typeof prefetch !== 'number' || !Number.isInteger(prefetch) || prefetch < 1) {
    throw new RangeError(`${what}: prefetch must be a positive integer, got ${String(prefetch)}`);
  }
  return prefetch;
}

/** Throws a TypeError unless `listener` is a function. */
export function checkListener(listener: unknown): asserts listener is DeliveryListener {
  if (typeof listener !== 'function') throw new TypeError('consume: listener must be a function');
}
