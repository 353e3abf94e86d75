/**
 * The fault suite's accounting, after Jepsen's total-queue checker: from the
 * durable evidence of a run (ids whose send resolved, ids handled
 * successfully, ids in the error queue, ids still waiting in a queue or a
 * delay), count what was lost and what was handled twice.
 */

/** The durable evidence of one run. */
export interface Evidence {
  /** Ids whose `send` resolved (the producer's log). */
  readonly confirmed: readonly string[];
  /** One entry per successful handling (the workers' logs): an id handled twice appears twice. */
  readonly handled: readonly string[];
  /** Ids in the error queue at the end. */
  readonly errored: readonly string[];
  /** Ids still waiting at the end: in the work queue, in flight, or in a delay. */
  readonly pending: readonly string[];
}

/** What the checker found. */
export interface Accounting {
  /** Distinct confirmed ids. */
  readonly messages: number;
  /** Confirmed ids neither handled, nor in the error queue, nor pending. */
  readonly lost: readonly string[];
  /** Extra successful handlings: the sum over ids of (times handled - 1). */
  readonly duplicates: number;
  /** Ids handled successfully more than once. */
  readonly duplicatedIds: readonly string[];
  /** Confirmed ids handled at least once. */
  readonly handled: number;
  /** Confirmed ids in the error queue and never handled. */
  readonly errored: number;
  /** Confirmed ids still pending and neither handled nor in the error queue. */
  readonly pending: number;
  /** Ids handled or found whose send never resolved (sent when the producer died): not counted as messages. */
  readonly unconfirmedSeen: number;
}

/** Counts the evidence of one run. */
export function account(evidence: Evidence): Accounting {
  const confirmed = new Set(evidence.confirmed);
  const timesHandled = new Map<string, number>();
  for (const id of evidence.handled) timesHandled.set(id, (timesHandled.get(id) ?? 0) + 1);
  const errored = new Set(evidence.errored);
  const pending = new Set(evidence.pending);

  const lost: string[] = [];
  let handled = 0;
  let inErrorQueue = 0;
  let stillPending = 0;
  for (const id of confirmed) {
    if (timesHandled.has(id)) handled++;
    else if (errored.has(id)) inErrorQueue++;
    else if (pending.has(id)) stillPending++;
    else lost.push(id);
  }
  const duplicatedIds = [...timesHandled].filter(([, times]) => times > 1).map(([id]) => id);
  const duplicates = duplicatedIds.reduce((sum, id) => sum + timesHandled.get(id)! - 1, 0);
  const seen = new Set([...timesHandled.keys(), ...errored, ...pending]);
  const unconfirmedSeen = [...seen].filter((id) => !confirmed.has(id)).length;
  return { messages: confirmed.size, lost, duplicates, duplicatedIds, handled, errored: inErrorQueue, pending: stillPending, unconfirmedSeen };
}
