/** The events an `NsqTransport` emits, and the counters it keeps. */

/** What a duplicate came from: a retry's copy, an error-queue copy, or a long delay carried one hop further. */
export type DuplicateKind = 'retry' | 'deadLetter' | 'hop';

/** The events of an `NsqTransport`, each with one arguments object. */
export interface NsqTransportEvents {
  /**
   * A copy was confirmed by nsqd but the original could not be finished
   * (its connection closed or its lease ran out first): nsqd gives the
   * original out again, so the message now exists twice (never zero times).
   */
  duplicateWindow: { id: string; queue: string; kind: DuplicateKind };
}

/** Counters kept by the transport since it was created. */
export interface NsqStats {
  /** Copies confirmed whose original could not be finished: each is one duplicate message. */
  duplicateWindow: number;
}
