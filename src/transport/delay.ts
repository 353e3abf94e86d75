/**
 * The delay check every transport makes the same way, for a delayed send
 * (`OutgoingMessage.delayMs`) and a delayed retry (`Delivery.retryLater`)
 * alike, so a delay out of range fails with the same error whichever broker
 * is behind it.
 */
import { MAX_TIMER_MS } from '../time/clock.js';

/**
 * The longest delay a transport timed by a due time or a timer holds: 2^31-1
 * ms, about 24.8 days, the longest a Node timer waits.
 */
export const MAX_HELD_DELAY_MS = MAX_TIMER_MS;

/**
 * Whole milliseconds to hold a message for `delayMs`, rounded up so it is
 * never early. Throws a RangeError, naming `what` (the call and its
 * argument, such as `send: delayMs`), unless `delayMs` is a finite number
 * from 0 to `maxMs`.
 */
export function checkDelay(what: string, delayMs: unknown, maxMs: number): number {
  if (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0 || Math.ceil(delayMs) > maxMs) {
    throw new RangeError(`${what} must be a number of milliseconds from 0 to ${maxMs}, got ${String(delayMs)}`);
  }
  return Math.ceil(delayMs);
}

/** The delay of a message to send: 0 when it has none, else checked as {@link checkDelay} does; `what` names the call. */
export function sendDelay(what: string, delayMs: number | undefined, maxMs: number): number {
  return delayMs === undefined ? 0 : checkDelay(`${what}: delayMs`, delayMs, maxMs);
}
