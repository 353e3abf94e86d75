import type { StandardSchemaV1 } from '@standard-schema/spec';
import type { Backoff } from '../backoff/types.js';
import type { Codec } from '../codec.js';
import type { Logger } from '../logger.js';
import type { ErrorClass, UnrecoverablePredicate } from '../policy/classify.js';
import type { FailureContext } from '../policy/context.js';
import type { Decision } from '../policy/decision.js';
import type { OnExpired } from '../policy/deadline.js';
import type { DeduplicationStore } from '../dedup/types.js';
import type { FlowControlOptions } from '../flow/options.js';
import type { Clock } from '../time/clock.js';
import type { Random } from '../time/random.js';
import type { Transport } from '../transport/types.js';
import type { MessageContext } from './context.js';

/** Handles one message. Throwing (or rejecting) starts recoverability. */
export type Handler<T> = (message: T, context: MessageContext) => void | Promise<void>;

/**
 * A custom recoverability policy: receives the failure and the decision the
 * default policy would make, and returns the decision to carry out.
 */
export type CustomPolicy = (context: FailureContext, defaultDecision: Decision) => Decision;

/** How failed messages are retried and where they go when retries are spent. */
export interface RecoverabilityOptions {
  /** Retries at once, in this process, per round. Default 5 (NServiceBus). */
  immediateRetries?: number;
  /** Retries later, held by the broker; each is followed by a fresh round of immediate retries. Default 3 (NServiceBus). */
  delayedRetries?: number;
  /** The delay before each delayed retry. Default `linear(10_000)`: 10, 20, 30 s (NServiceBus). */
  delayedBackoff?: Backoff;
  /**
   * No delay between two delayed retries exceeds this. Default 24 h
   * (NServiceBus); at most 2^31-1 ms, and at most the transport's
   * `limits.maxDelayMs` (RabbitMQ: 2^28-1 ms, about 74 h), checked when the
   * endpoint is built.
   */
  maxDelayMs?: number;
  /** Where messages go when retries are spent or they are unrecoverable. Default the transport's `defaultErrorQueue(queue)` where it has one (NSQ: `<queue>.error`), else `error`. */
  errorQueue?: string;
  /** Errors of these classes, and of every subclass, skip every retry. Default none (beyond `UnrecoverableError` and undecodable bodies, which always do). */
  unrecoverable?: readonly ErrorClass[];
  /** Errors this predicate accepts skip every retry. Default none. */
  isUnrecoverable?: UnrecoverablePredicate;
  /** Takes the final say over each failure. Default none: the default policy decides. */
  policy?: CustomPolicy;
  /**
   * How long a message is worth handling, counted from its first handler
   * attempt: no retry is scheduled to come back at or after that time, and
   * a message found past it is never handled (see `onExpired`). A sender's
   * earlier `expiresAt` wins. Wall-clock time, fixed in the message's headers
   * on its first retry. Default none: no deadline beyond the sender's.
   */
  deadlineMs?: number;
  /** What becomes of a message past its deadline: `error-queue` (reason `expired`) or `discard` (acknowledged and dropped). Default `error-queue`. */
  onExpired?: OnExpired;
}

/** Options of an {@link Endpoint}. */
export interface EndpointOptions<T> {
  /** The endpoint's name, in logs, events and failure headers. Required. */
  name: string;
  /** The queue to consume. Default: the endpoint's name. */
  queue?: string;
  /** The broker or store. Required. */
  transport: Transport;
  /** The message handler. Required. */
  handler: Handler<T>;
  /**
   * Validates and types each decoded body: any Standard Schema (zod,
   * valibot, arktype...), whose output type becomes the handler's message
   * type. The handler receives the schema's output (defaults filled in,
   * transforms applied). A body it refuses, or one whose validator throws,
   * goes to the error queue at once with reason `validation`, the issues in
   * `redeliver-validation-issues`. Default none: the decoded body as it is.
   */
  schema?: StandardSchemaV1<unknown, T>;
  /** Messages handled at once. Default 10. */
  concurrency?: number;
  /** How long a delivery is leased before another consumer may take it, on transports that lease. Default 30 000 ms. */
  leaseMs?: number;
  /**
   * How many times a settlement (ack, retry copy, error-queue copy) that
   * failed while the delivery is still held is tried again, waiting the
   * connection backoff between tries (1 s, then 1.6 s, 2.56 s ... ± 20 %),
   * before the message is released back to its queue; an error-queue copy
   * still refused then goes once as a minimal copy (no failure history, no
   * stack) before that. While the endpoint stops, it is released at once. A delivery that is gone (closed channel,
   * lost lease) is left to the broker, which delivers it again. 0 releases at
   * once. Default 5 (about 16 s).
   */
  settlementRetries?: number;
  /** Retry and error-queue settings. */
  recoverability?: RecoverabilityOptions;
  /** Consumer backoff, rate limiting and the retry budget. Default: all off. */
  flowControl?: FlowControlOptions;
  /**
   * Skip copies of a message whose id was already handled within the store's
   * window (a producer retry after an unknown outcome, a redelivery after a
   * lost ack). Default none: every copy is handled.
   */
  deduplication?: DeduplicationStore;
  /** Body codec. With a `schema`, it decodes the value the schema validates, so any codec fits. Default UTF-8 JSON. */
  codec?: Codec<T> | Codec<unknown>;
  /** Source of time. Default the system clock. */
  clock?: Clock;
  /** Source of randomness for jitter. Default `Math.random`. */
  random?: Random;
  /** A pino-compatible logger. Default none: silent. */
  logger?: Logger;
  /** The host name recorded in failure headers. Default `os.hostname()`. */
  host?: string;
  /**
   * Where to report what became of messages an operator sent back from an
   * error queue: after such a message (one with `redeliver-replay-count`) is
   * handled and acked, the endpoint sends a small outcome record to this
   * queue, which `redeliver errors ingest` reads to tell a canary replay it
   * succeeded. Must not be the endpoint's queue or its error queue.
   * Default undefined: no records are sent.
   */
  replayOutcomeQueue?: string;
}
