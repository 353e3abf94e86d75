/**
 * One holder at a time: a record of which handler held which message when,
 * and a checker that finds a message held by two handlers at once while the
 * earlier one's lease still ran. Pure: times are whatever clock the caller
 * reads (milliseconds), and nothing here waits.
 */

/** One handler's hold of one message, from its start to its end. */
export interface Hold {
  readonly messageId: string;
  /** Who held it (a consumer or endpoint name), for the failure message. */
  readonly holder: string;
  readonly startedAt: number;
  readonly endedAt: number;
  /**
   * When the lease known at the start runs out (the start plus the
   * transport's lease length); `Infinity` where the transport has no
   * leases, so that any overlap counts.
   */
  readonly leaseEndsAt: number;
}

/** Two holds of one message at once, the earlier one's lease not yet run out when the later one started. */
export interface Overlap {
  readonly earlier: Hold;
  readonly later: Hold;
}

/** Options of {@link findOverlaps}. */
export interface OverlapOptions {
  /**
   * Moments every lease held then ran out (a cut connection, where the
   * connection holds the lease, as RabbitMQ's does): a hold running at one
   * of them may be overlapped from then on. Default none.
   */
  readonly leasesLostAt?: readonly number[];
}

/**
 * The overlaps among `holds`: a later hold of a message that started before
 * an earlier hold of it ended, and before that earlier hold's lease ran out
 * (its `leaseEndsAt`, or the first of `leasesLostAt` during it). A hold that
 * starts the moment the earlier one ends is no overlap.
 */
export function findOverlaps(holds: readonly Hold[], options: OverlapOptions = {}): Overlap[] {
  const lost = [...(options.leasesLostAt ?? [])].sort((a, b) => a - b);
  const leaseEnd = (hold: Hold) => Math.min(hold.leaseEndsAt, lost.find((at) => at >= hold.startedAt) ?? Infinity);
  const byMessage = new Map<string, Hold[]>();
  for (const hold of holds) byMessage.set(hold.messageId, [...(byMessage.get(hold.messageId) ?? []), hold]);
  const overlaps: Overlap[] = [];
  for (const ofOne of byMessage.values()) {
    const ordered = [...ofOne].sort((a, b) => a.startedAt - b.startedAt);
    ordered.forEach((earlier, i) => {
      for (const later of ordered.slice(i + 1)) {
        if (later.startedAt < earlier.endedAt && later.startedAt < leaseEnd(earlier)) overlaps.push({ earlier, later });
      }
    });
  }
  return overlaps;
}

/** One line per overlap, for a failing assertion. */
export function describeOverlaps(overlaps: readonly Overlap[]): string {
  const span = (h: Hold) => `${h.holder} ${h.startedAt.toFixed(1)}..${h.endedAt.toFixed(1)} (lease to ${h.leaseEndsAt.toFixed(1)})`;
  return overlaps.map(({ earlier, later }) => `${earlier.messageId}: ${span(earlier)} overlapped by ${span(later)}`).join('\n');
}

/** Collects holds as handlers start and end. */
export class HoldLog {
  readonly holds: Hold[] = [];

  /** @param now the clock the holds are timed by; default `performance.now()`, finer than a millisecond. */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * A handler of `holder` starts holding `messageId`, under a lease of
   * `leaseMs` (`Infinity` without leases); call the returned function when
   * it ends.
   */
  start(messageId: string, holder: string, leaseMs: number): () => void {
    const startedAt = this.now();
    return () => {
      this.holds.push({ messageId, holder, startedAt, endedAt: this.now(), leaseEndsAt: startedAt + leaseMs });
    };
  }
}
