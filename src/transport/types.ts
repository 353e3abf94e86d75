/**
 * The transport contract: broker I/O only. A transport receives messages
 * under a lease, settles them (ack, retry later, dead-letter), sends, and
 * pauses and resumes consumption. Every transport passes the conformance
 * suite in `test/conformance/`.
 */

import type { ErrorQueueOperations } from './error-queue.js';
import type { QueueInspection } from './inspection.js';

/** Message headers: string keys, string values, the same on every transport. */
export type Headers = Record<string, string>;

/** What a transport can promise, so the endpoint knows what it can rely on. */
export interface TransportCapabilities {
  /** Delayed messages are held by the broker or store, not by a timer per message in this process. */
  readonly nativeDelay: boolean;
  /** The broker counts deliveries of a message itself (`Delivery.deliveryCount` survives crashes). */
  readonly nativeDeliveryCount: boolean;
  /** Settling a message and writing its retry or error copy happen atomically: never two copies. */
  readonly atomicSettle: boolean;
}

/** What a broker refuses, declared by its transport so an endpoint is checked when it is built. */
export interface TransportLimits {
  /** The largest `ConsumeOptions.prefetch` the transport accepts, and so the largest endpoint `concurrency`. Default no limit. */
  readonly maxPrefetch?: number;
  /**
   * The longest delay, in milliseconds, the transport holds a message for:
   * the most `OutgoingMessage.delayMs` and `Delivery.retryLater` accept (a
   * longer one is refused with a RangeError, and nothing is sent). A
   * transport that declares it honours `OutgoingMessage.delayMs`; one that
   * does not is sent no delayed message (a producer refuses it). Default
   * none.
   */
  readonly maxDelayMs?: number;
  /**
   * How late, at most, the transport brings a held message back after its
   * delay (a broker timer that fires on whole ticks). The deadline rule
   * counts it: a delayed retry that could land at or past the message's
   * deadline, delay plus this, expires the message at once instead of being
   * scheduled. Read at each failure, so a transport may learn it from its
   * broker. Default 0.
   */
  readonly delayPrecisionMs?: number;
  /**
   * The most bytes a message's headers may take as {@link headerBytes}
   * measures them. An endpoint builds each retry and error-queue copy to
   * fit (see `fitHeaders`). Declared together with `headerBytes`. Default
   * none.
   */
  readonly maxHeaderBytes?: number;
  /** How many bytes `headers` take once the transport encoded them, room for what it adds of its own included. */
  headerBytes?(headers: Readonly<Headers>): number;
}

/** A message to put on a queue. */
export interface OutgoingMessage {
  /** Stable message id; kept across retries and dead-lettering. */
  readonly id: string;
  readonly body: Uint8Array;
  readonly headers: Headers;
  /**
   * Hold the message at least this many milliseconds before any consumer
   * can receive it, the way the transport holds a delayed retry (a broker
   * or store, never a timer of the sender). From 0 to the transport's
   * `limits.maxDelayMs`; a longer one is refused with a RangeError before
   * anything is sent. Default 0: deliverable at once.
   */
  readonly delayMs?: number;
}

/**
 * One delivery of a message, held under a lease until settled. Exactly one
 * settlement call takes effect; settlement is final once it resolves. A
 * delivery that is never settled comes back after its lease expires (or when
 * the connection that holds it closes). A settlement that fails because the
 * delivery can no longer be settled at all rejects with an error marked
 * `deliveryGone: true` (see `isDeliveryGone`); any other failure leaves the
 * delivery held, to be settled again or released.
 */
export interface Delivery {
  readonly id: string;
  readonly queue: string;
  readonly body: Uint8Array;
  readonly headers: Readonly<Headers>;
  /** How many times this copy has been delivered, counting this one (1 on the first delivery). */
  readonly deliveryCount: number;
  /** The message is done: remove it. */
  ack(): Promise<void>;
  /**
   * Schedule a copy with `headers` to reappear on this queue after `delayMs`,
   * and settle this delivery. The copy keeps the id and body.
   */
  retryLater(delayMs: number, headers: Headers): Promise<void>;
  /** Move the message to `errorQueue` with `headers`, and settle this delivery. */
  deadLetter(errorQueue: string, headers: Headers): Promise<void>;
  /** Give the message back unsettled, available again at once, without counting an attempt. */
  release(): Promise<void>;
  /**
   * Where the transport leases deliveries: keep this one from other
   * consumers for `ms` more milliseconds, counted from now. Resolves once the
   * new lease is written; rejects with an error marked `deliveryGone` when
   * the lease was already lost. Absent on transports without leases.
   */
  extendLease?(ms: number): Promise<void>;
  /**
   * Where the transport leases deliveries: whether the lease has run out by
   * this side's reckoning (another consumer may have the message now; on
   * RabbitMQ, the channel it arrived on closed). An endpoint checks it
   * before running the handler and before each immediate retry, and
   * releases a delivery whose lease ran out instead. Absent on transports
   * without leases.
   */
  leaseExpired?(): boolean;
}

/** Options for {@link Transport.consume}. */
export interface ConsumeOptions {
  /** The most deliveries handed out and not yet settled at any time. */
  readonly prefetch: number;
  /** How long a delivery stays leased before another consumer may take it, where the transport leases. */
  readonly leaseMs?: number;
}

/** A running consumer on one queue. */
export interface Subscription {
  /** Stop handing out new deliveries; unsettled ones stay with their holder. */
  pause(): Promise<void>;
  /** Hand out deliveries again. */
  resume(): Promise<void>;
  /**
   * From now on hand out at most `prefetch` unsettled deliveries (flow
   * control takes it down to 1 and back). Deliveries already handed out
   * stay with their holder.
   */
  setPrefetch(prefetch: number): Promise<void>;
  /**
   * Stop for good. Messages the transport fetched but did not hand out go
   * back to the queue; deliveries already handed out may still be settled.
   */
  close(): Promise<void>;
}

/** Called by the transport for each delivery, one call per message. */
export type DeliveryListener = (delivery: Delivery) => void;

/** A broker or store. */
export interface Transport {
  /** Short name for logs and docs, such as `sqlite`. */
  readonly name: string;
  readonly capabilities: TransportCapabilities;
  /** What the broker refuses. Default none: every value the contract allows is accepted. */
  readonly limits?: TransportLimits;
  /** Browse, replay and delete error-queue entries, where the transport supports it. */
  readonly errorQueue?: ErrorQueueOperations;
  /** Read queue depths, where the transport supports it. */
  readonly inspection?: QueueInspection;
  /**
   * The error queue of an endpoint consuming `queue` that names none
   * (`recoverability.errorQueue`). Default none: such endpoints use `error`.
   */
  defaultErrorQueue?(queue: string): string;
  /** Put a message on `queue`; resolves once the broker has it. */
  send(queue: string, message: OutgoingMessage): Promise<void>;
  /**
   * Makes `errorQueue` exist now, before the first dead-letter needs it,
   * where the broker needs a queue made before it holds messages (a
   * RabbitMQ queue, a JetStream stream): on a cluster, one first made while
   * the cluster is cut apart may not survive the heal. An endpoint calls it
   * as it starts; elsewhere absent.
   */
  prepareErrorQueue?(errorQueue: string): Promise<void>;
  /** Start delivering messages from `queue` to `listener`. */
  consume(queue: string, listener: DeliveryListener, options: ConsumeOptions): Promise<Subscription>;
  /** Release every resource. Open subscriptions are closed first. */
  close(): Promise<void>;
  /**
   * How a producer should treat an error this transport's `send` threw:
   * `transient` (retry at once), `throttled` (back off), `unavailable`
   * (the broker cannot be reached: wait for it with the same backoff) or
   * `fatal` (give up). Without it, errors are classified by their brand
   * (`ThrottledError`, `FatalSendError`), and anything else is transient.
   */
  classifySendError?(error: unknown): 'transient' | 'throttled' | 'unavailable' | 'fatal';
  /**
   * The longest any `send` of this transport takes to settle, in
   * milliseconds, when the transport bounds every send itself (RabbitMQ: its
   * `confirmTimeoutMs`). A producer needs no timer of its own for an attempt
   * given at least this long. Default none: sends are not known to be
   * bounded, and the producer bounds each attempt.
   */
  readonly sendTimeoutMs?: number;
}
