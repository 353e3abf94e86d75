/**
 * A transport that leases deliveries reckons on this side when a lease runs
 * out, from the clock of this process: for `Delivery.leaseExpired`, and to
 * refuse a settlement the broker would take from a lease already lost.
 */
import { MAX_TIMER_MS } from '../time/clock.js';

/** How much sooner than the broker this side takes a lease as run out: a tenth of it, at most 250 ms, for the time on the wire. */
function leaseMargin(leaseMs: number): number {
  return Math.min(250, Math.floor(leaseMs / 10));
}

/**
 * When a lease of `leaseMs` that the broker started no sooner than
 * `startedAt` (monotonic) is taken as run out on this side: `leaseMs`
 * later, less the {@link leaseMargin} for the time on the wire.
 */
export function leaseEnd(startedAt: number, leaseMs: number): number {
  return startedAt + leaseMs - leaseMargin(leaseMs);
}

/** Throws a RangeError unless `ms`, the argument of `Delivery.extendLease`, is a whole number of milliseconds a timer can wait. */
export function checkLeaseExtension(ms: unknown): asserts ms is number {
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 1 || ms > MAX_TIMER_MS) {
    throw new RangeError(`extendLease: ms must be a whole number from 1 to ${MAX_TIMER_MS}, got ${String(ms)}`);
  }
}
