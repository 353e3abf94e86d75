/**
 * A transport that leases deliveries reckons on this side when a lease runs
 * out, from the clock of this process: for `Delivery.leaseExpired`, and to
 * refuse a settlement the broker would take from a lease already lost.
 */

/** How much sooner than the broker this side takes a lease as run out: a tenth of it, at most 250 ms, for the time on the wire. */
export function leaseMargin(leaseMs: number): number {
  return Math.min(250, Math.floor(leaseMs / 10));
}
