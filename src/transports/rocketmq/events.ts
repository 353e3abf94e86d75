/** The events a `RocketMqTransport` emits, and the counters it keeps. */

/** What a duplicate came from: a retry's copy, an error-queue copy, or a long delay carried one hop further. */
export type DuplicateKind = 'retry' | 'deadLetter' | 'hop';

/** The events of a `RocketMqTransport`, each with one arguments object. */
export interface RocketMqTransportEvents {
  /**
   * A copy was confirmed by the broker but the original could not be
   * acknowledged (its receipt handle ran out, or the acknowledgement failed
   * and the delivery was given up or released): the broker gives the
   * original out again, so the message now exists twice (never zero times).
   */
  duplicateWindow: { id: string; queue: string; kind: DuplicateKind };
}

/** Counters kept by the transport since it was created. */
export interface RocketMqStats {
  /** Copies confirmed whose original could not be acknowledged: each is one duplicate message. */
  duplicateWindow: number;
}
