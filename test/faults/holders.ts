/**
 * The one-holder check of a fault run, judged by the broker's delivery
 * counts. Handler runs of one delivery (immediate retries run one after
 * another under one lease) are first joined into one hold, from the first
 * run's start to the last run's end, under the lease from the first start,
 * or until the first moment one of its runs saw the lease lost (its
 * `ctx.leaseExpired()`: a time that ran out, a RabbitMQ channel that
 * closed), whichever comes first. Two holds of one copy at once, within
 * the earlier one's lease, are then one of three kinds:
 *
 * - **repeated**: the later delivery's count is not higher than the
 *   earlier's, and another delivery of the copy carried that same count:
 *   the broker handed one delivery number out twice, its record of the
 *   first lost (on JetStream 2.9, delivered state not yet replicated when
 *   the consumer's leadership or its stream's moved). No client can see
 *   that coming; reported beside the broker's bare client.
 * - **early**: the count was raised, so the broker redelivered on purpose,
 *   while the earlier holder's lease was still in force by its own clock:
 *   the client took a lease the broker had not given. A failure.
 * - **stale**: the later delivery's count is lower than the earlier's and
 *   no other delivery carried it: an older delivery that reached its
 *   client only after the broker had already given the message out again
 *   (held back in a cut connection), and was taken as fresh. A lease the
 *   broker no longer honoured: a failure too.
 *
 * Transport-neutral: any worker that records holds with a delivery count
 * can be judged so.
 */
import { describeOverlaps, findOverlaps, type Hold, type Overlap } from '../support/holds.js';

/** One handler run, with the broker's delivery count of the delivery it ran for. */
export interface CountedHold extends Hold {
  readonly deliveryCount: number;
}

/** The one-holder check's verdict. */
export interface HolderVerdict {
  /** Handler runs recorded. */
  readonly runs: number;
  /** Deliveries those runs were of (runs of one delivery joined). */
  readonly deliveries: number;
  /** Overlaps whose later delivery count is not higher and was given out before: the broker gave one delivery out again. */
  readonly repeated: readonly Overlap[];
  /** Overlaps whose later delivery count is lower and given out once: an old delivery taken as fresh. */
  readonly stale: readonly Overlap[];
  /** Overlaps with a raised count within the earlier lease: a lease the client took too long. */
  readonly early: readonly Overlap[];
  /** Holds of a delayed retry's copy beside a hold of the copy it replaced (its ack lost), counted apart. */
  readonly copies: number;
}

/**
 * Joins the runs of each delivery: same copy, same holder (which names the
 * delivery count), each starting after the one before ended. A run that
 * starts while the joined hold still runs is another delivery of the same
 * count to the same holder, and stays apart.
 */
export function joinDeliveries(runs: readonly CountedHold[]): CountedHold[] {
  const byDelivery = new Map<string, CountedHold[]>();
  for (const run of runs) {
    const key = `${run.messageId}\u0000${run.holder}`;
    byDelivery.set(key, [...(byDelivery.get(key) ?? []), run]);
  }
  const joined: CountedHold[] = [];
  for (const ofOne of byDelivery.values()) {
    const open: CountedHold[] = [];
    for (const run of [...ofOne].sort((a, b) => a.startedAt - b.startedAt)) {
      const i = open.findIndex((hold) => hold.endedAt <= run.startedAt);
      if (i < 0) open.push(run);
      else open[i] = { ...open[i]!, endedAt: Math.max(open[i]!.endedAt, run.endedAt), leaseEndsAt: Math.min(open[i]!.leaseEndsAt, run.leaseEndsAt) };
    }
    joined.push(...open);
  }
  return joined;
}

/** Judges the recorded runs (see the module comment). A copy's id is `<message id>#d<delayed attempt>`. */
export function judgeHolders(runs: readonly CountedHold[]): HolderVerdict {
  const deliveries = joinDeliveries(runs);
  const sameCopy = findOverlaps(deliveries) as { earlier: CountedHold; later: CountedHold }[];
  const byMessage = findOverlaps(deliveries.map((hold) => ({ ...hold, messageId: hold.messageId.replace(/#d\d+$/, '') })));
  const given = new Map<string, number>();
  for (const hold of deliveries) given.set(`${hold.messageId} ${hold.deliveryCount}`, (given.get(`${hold.messageId} ${hold.deliveryCount}`) ?? 0) + 1);
  const givenTwice = (hold: CountedHold) => given.get(`${hold.messageId} ${hold.deliveryCount}`)! > 1;
  const notRaised = sameCopy.filter(({ earlier, later }) => later.deliveryCount <= earlier.deliveryCount);
  return {
    runs: runs.length,
    deliveries: deliveries.length,
    repeated: notRaised.filter(({ earlier, later }) => later.deliveryCount === earlier.deliveryCount || givenTwice(later)),
    stale: notRaised.filter(({ earlier, later }) => later.deliveryCount < earlier.deliveryCount && !givenTwice(later)),
    early: sameCopy.filter(({ earlier, later }) => later.deliveryCount > earlier.deliveryCount),
    copies: byMessage.length - sameCopy.length,
  };
}

/** One line for the report: the figures and the first few of each kind. */
export function describeVerdict(verdict: HolderVerdict): string {
  const sample = (overlaps: readonly Overlap[]) => (overlaps.length > 0 ? ` (e.g. ${describeOverlaps(overlaps.slice(0, 2)).replace(/\n/g, '; ')})` : '');
  return (
    `${verdict.runs} handler runs in ${verdict.deliveries} deliveries; ` +
    `${verdict.repeated.length} delivery counts given out twice while another held the copy${sample(verdict.repeated)}; ` +
    `${verdict.early.length} redelivered with a higher count within the earlier lease${sample(verdict.early)}; ` +
    `${verdict.stale.length} older deliveries taken as fresh after a newer one started${sample(verdict.stale)}; ` +
    `${verdict.copies} holds of a delayed retry's copy beside the copy it replaced`
  );
}
