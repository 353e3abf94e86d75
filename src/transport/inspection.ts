/** How many messages wait in one queue. */
export interface QueueDepth {
  readonly queue: string;
  /** `work` for ordinary queues, `error` for error queues, `retry` for a transport's own delay queues. */
  readonly kind: 'work' | 'error' | 'retry';
  /** Ready to be delivered now. */
  readonly ready: number;
  /** Waiting for a delay (a delayed retry not yet due). */
  readonly delayed: number;
  /** Delivered and not yet settled. */
  readonly inFlight: number;
}

/** What a queue is, for a send-back: a work queue, an error queue, or no queue at all. */
export type QueueKind = 'work' | 'error' | 'missing';

/** Reads queue depths, for `redeliver stats` and the dashboard. An optional transport capability. */
export interface QueueInspection {
  /** Depths of the queues the transport knows, or of `queues` when given. */
  queueDepths(queues?: readonly string[]): Promise<QueueDepth[]>;
  /**
   * What each queue is (`work`, `error`) or `missing`, by passive checks
   * only: never creates a queue. Where a send-back may go. Optional.
   */
  queueKinds?(queues: readonly string[]): Promise<ReadonlyMap<string, QueueKind>>;
}
