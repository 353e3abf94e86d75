import type { Headers } from '../transport/types.js';

/** Options of {@link MessageContext.requeue}. */
export interface RequeueOptions {
  /** The delay before the message comes back. Default: the next delayed-retry delay. */
  delayMs?: number;
  /** Whether the consumer should also back off as a whole (NSQ "requeue with backoff"). Default true. */
  backoff?: boolean;
}

/** What a handler knows about the message it handles. */
export interface MessageContext {
  readonly messageId: string;
  readonly queue: string;
  readonly headers: Readonly<Headers>;
  /** The attempt within this round of immediate retries, from 1. */
  readonly immediateAttempt: number;
  /** Delayed retries already taken (0 on the first round). */
  readonly delayedAttempt: number;
  /** Handler attempts in all, counting this one. */
  readonly attempt: number;
  /** Times the broker has delivered this copy, counting this delivery. */
  readonly deliveryCount: number;
  /**
   * The message's deadline: the earlier of the sender's `expiresAt` and the
   * endpoint's `recoverability.deadlineMs` from the first attempt (fixed on
   * the first retry copy for later rounds). The handler runs before it;
   * work that cannot finish by then is worthless. Undefined when the
   * message has none. A fresh `Date` for each attempt.
   */
  readonly deadline: Date | undefined;
  /** Aborts when the endpoint is stopping: finish or give up promptly. */
  readonly signal: AbortSignal;
  /**
   * Ask for the message to come back later (NSQ requeue), once the handler
   * returns. It counts as an attempt and as a delayed retry; when the
   * delayed retries are spent the message goes to the error queue instead.
   */
  requeue(options?: RequeueOptions): void;
  /**
   * Keep the message from other consumers for `ms` more milliseconds,
   * counted from now, for a handler that may outlive the transport's lease
   * (SQLite's `leaseMs`). Rejects when the lease was already lost. Resolves
   * at once on transports without leases.
   */
  extendLease(ms: number): Promise<void>;
  /**
   * Whether this delivery's lease ran out while the handler ran: its time
   * is up on a transport that leases (SQLite, Redis, JetStream, NSQ,
   * RocketMQ), or its channel closed on RabbitMQ. Another consumer may be
   * handling the message now, and whatever this handler does next may be
   * done twice; a long handler checks it before a step it must not repeat.
   * Always false on transports without leases.
   */
  leaseExpired(): boolean;
}
