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

/** Reads queue depths, for `redeliver stats` and the dashboard. An optional transport capability. */
export interface QueueInspection {
  /** Depths of the queues the transport knows, or of `queues` when given. */
  queueDepths(queues?: readonly string[]): Promise<QueueDepth[]>;
}
