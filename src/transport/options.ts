/**
 * The checks of numeric transport options, made the same way by every
 * transport; each error names the transport class whose option it is
 * (`RedisTransport: ...`).
 */
import { MAX_TIMER_MS } from '../time/clock.js';

/** Throws a RangeError, naming `owner` and `what`, unless `value` is a whole number from `min` to `max`. Returns it. */
export function wholeNumberOption(owner: string, what: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${owner}: ${what} must be a whole number from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

/** A lease in milliseconds, of the transport class `owner`: `value`, or `fallback` when undefined; else a whole number a timer can wait. */
export function leaseOption(owner: string, what: string, value: number | undefined, fallback: number): number {
  return value === undefined ? fallback : wholeNumberOption(owner, what, value, 1, MAX_TIMER_MS);
}
