import type { DeferReason, FlowEvents } from '../flow/controller.js';

/** The events an endpoint emits, each with one arguments object. */
export interface EndpointEvents extends FlowEvents {
  /** The handler succeeded and the message was acknowledged. */
  handled: { messageId: string; queue: string; attempt: number; durationMs: number };
  /** The handler failed and runs again at once (logged at info). */
  immediateRetry: FailureEvent;
  /** The handler failed and the message comes back after `delayMs` (logged at warn). */
  delayedRetry: FailureEvent & { delayMs: number };
  /** The handler asked for a requeue. */
  requeued: { messageId: string; queue: string; delayMs: number; backoff: boolean };
  /**
   * Flow control handed a message back to the broker instead of retrying it
   * at once (the consumer is backing off, rate limited, or out of retry
   * budget). It does not count as a delayed retry.
   */
  deferred: { messageId: string; queue: string; delayMs: number; reason: DeferReason };
  /** A copy of a message already handled within the deduplication window was acknowledged without running the handler. */
  duplicate: { messageId: string; queue: string };
  /** The message moved to the error queue (logged at error). */
  deadLettered: FailureEvent & { errorQueue: string; reason: string };
  /** A policy discarded the message. */
  discarded: FailureEvent & { reason: string };
  /**
   * A settlement failed (the broker refused or did not confirm a copy, the
   * connection dropped, the lease ended). One event per failed try;
   * `outcome` says what happens to the message:
   * - `retrying`: the endpoint still holds it and tries again in `retryInMs`;
   * - `released`: tries spent, or the endpoint is stopping: it was handed back to its queue;
   * - `redelivered`: the delivery is gone (or could not be released): the broker delivers it again by itself.
   */
  settlementFailed: SettlementFailedEvent;
  /**
   * The outcome record of a handled replayed message could not be sent to
   * `replayOutcomeQueue` (logged at warn). The message itself was handled
   * and acknowledged; the record is not sent again.
   */
  replayOutcomeFailed: { messageId: string; queue: string; outcomeQueue: string; replayCount: number; error: unknown };
}

/** The common fields of failure events. */
export interface FailureEvent {
  messageId: string;
  queue: string;
  error: unknown;
  immediateAttempt: number;
  delayedAttempt: number;
  attempt: number;
}

/** What happens to a message after a failed settlement. */
export type SettlementOutcome = 'retrying' | 'released' | 'redelivered';

/** The arguments of the `settlementFailed` event. */
export interface SettlementFailedEvent {
  messageId: string;
  queue: string;
  /** `ack`, `retryLater`, `deadLetter` or `release`. */
  action: string;
  error: unknown;
  /** Which try of this settlement failed, from 1. */
  attempt: number;
  outcome: SettlementOutcome;
  /** When `outcome` is `retrying`: the wait before the next try, in milliseconds. */
  retryInMs?: number;
}
