/**
 * A consumer on one queue, on its own channel with a per-consumer prefetch.
 * Pause and resume are `basic.cancel` and `basic.consume`; after a channel or
 * connection loss the consumer is opened again on the next channel, and the
 * broker redelivers what was in flight. A consumer the broker cancels (its
 * queue was deleted) declares the queue again before it consumes again, and
 * every reopen after a failure waits out the `reconnect` backoff. What that
 * consumer had received went with the queue and is never delivered again:
 * its deliveries become orphans, settled by copy (see delivery.ts), and the
 * messages it held but had not handed out are published back to the queue.
 */
import type { Channel, ConsumeMessage } from 'amqplib';
import type { DeliveryListener, Headers, Subscription } from '../../transport/types.js';
import { AckBatcher } from './ack-batcher.js';
import type { BackoffStep } from '../../backoff/types.js';
import type { ConnectionManager, Session } from './connection.js';
import type { QueueDeclarations } from './declarations.js';
import { expectedDeliveriesWarning } from './delivery-limit.js';
import { RabbitMqDelivery, type DeliveryOwner } from './delivery.js';
import { withEntryId } from './entry-key.js';
import type { ErrorQueueMarkers } from './error-queue-marker.js';
import { AlreadySettledError, StaleDeliveryError } from './errors.js';
import type { EmitEvent, RabbitMqStats } from './events.js';
import { MAX_PREFETCH, type RabbitMqConsumeOptions, type ResolvedOptions } from './options.js';
import { keptProperties, type Publisher } from './publisher.js';
import { MAX_DELAY_MS } from './topology.js';
import { decodeHeaders, deriveMessageId, type DecodedHeaders } from './wire-headers.js';

/** A delayed copy this early (ms) or more is scheduled again for the remainder instead of handed out. */
export const EARLY_TOLERANCE_MS = 1;

type SubState = 'active' | 'paused' | 'closed';

/** How a message is settled on its channel: coalesced ack, immediate ack, or requeue. */
export type SettleAction = 'ack' | 'ackNow' | 'requeue';

/** What a subscription needs from its transport. */
export interface SubscriptionContext {
  readonly connection: ConnectionManager;
  readonly declarations: QueueDeclarations;
  readonly publisher: Publisher;
  readonly options: ResolvedOptions;
  readonly stats: RabbitMqStats;
  readonly emit: EmitEvent;
  /** Marks the queues dead-lettered into as error queues, for other processes' queue inspection. */
  readonly markers: ErrorQueueMarkers;
  /** Called once the subscription is closed for good. */
  readonly onClosed: (subscription: RabbitMqSubscription) => void;
}

export class RabbitMqSubscription implements Subscription, DeliveryOwner {
  #state: SubState = 'active';
  #channel: Channel | undefined;
  /** Settles messages on `#channel`; replaced with it. */
  #acks: AckBatcher | undefined;
  #consumerTag: string | undefined;
  /** Deliveries handed out and not yet settled, on the current channel. */
  #inFlight = 0;
  /** Messages that arrived while pausing; handed out on resume, requeued on close. */
  #held: ConsumeMessage[] = [];
  #draining = false;
  #ops: Promise<unknown> = Promise.resolve();
  /** The backoff of reopens after failures since the consumer last consumed; undefined before the first failure. */
  #reopenStep: Omit<BackoffStep, 'random'> | undefined;
  /** The wait before the next reopen, while one is scheduled: there is never more than one. */
  #reopenTimer: AbortController | undefined;
  #unsubscribeReconnect: () => void;
  #warnedDeliveryLimit = false;
  /** The most deliveries handed out and unsettled at once; `setPrefetch` changes it. */
  #prefetch: number;
  /** Whether the queue is a quorum queue, whose `x-delivery-count` the broker maintains. */
  #quorum = false;
  /** Channels whose consumer the broker cancelled: their deliveries are orphans. */
  readonly #orphaned = new WeakSet<Channel>();

  constructor(
    private readonly context: SubscriptionContext,
    readonly queue: string,
    private readonly listener: DeliveryListener,
    private readonly consumeOptions: RabbitMqConsumeOptions,
  ) {
    this.#prefetch = consumeOptions.prefetch;
    this.#unsubscribeReconnect = context.connection.onReconnect((session) => void this.#reopen(session));
  }

  /** Deliveries handed out and not yet settled. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Opens the consumer on the current connection. When that connection drops
   * while the consumer opens (its declaration or `consume` rejected because
   * the connection closed), opens it on the next one: a drop during start is
   * repaired as any later one is. Other failures reject.
   */
  async start(): Promise<void> {
    for (;;) {
      const session = await this.context.connection.connect();
      try {
        await this.#serial(() => this.#openOn(session));
      } catch (error) {
        if (session.alive || this.#state === 'closed') throw error;
        this.context.options.logger?.warn({ err: error, queue: this.queue }, `rabbitmq: the connection dropped while the consumer of '${this.queue}' opened; opening it on the next one`);
        continue;
      }
      if (this.#channel || this.#state === 'closed') return;
    }
  }

  #serial<T>(op: () => Promise<T>): Promise<T> {
    const result = this.#ops.then(op, op);
    this.#ops = result.catch(() => undefined);
    return result;
  }

  async #openOn(session: Session): Promise<void> {
    if (this.#state === 'closed' || !session.alive || this.#channel) return;
    const { connection, declarations } = this.context;
    const info = await declarations.declare(session, this.queue);
    this.#quorum = info.queueType === 'quorum';
    this.#checkDeliveryLimit(info.deliveryLimit);
    const channel = await connection.openChannel(session, 'consumer');
    this.#channel = channel;
    this.#acks = new AckBatcher(channel);
    this.#inFlight = 0;
    this.#held = [];
    channel.on('close', () => this.#channelClosed(channel, session));
    await channel.prefetch(this.#prefetch, false);
    if (this.#state === 'active' && this.#channel === channel) await this.#consume(channel);
  }

  #checkDeliveryLimit(limit: number | undefined | 'unknown'): void {
    const expected = this.consumeOptions.expectedDeliveries;
    if (expected === undefined || this.#warnedDeliveryLimit) return;
    const message = expectedDeliveriesWarning({ queue: this.queue, expectedDeliveries: expected, deliveryLimit: limit });
    if (message) {
      this.#warnedDeliveryLimit = true;
      this.context.options.logger?.warn({ queue: this.queue, expectedDeliveries: expected, deliveryLimit: limit }, message);
      this.context.emit('warning', { message, queue: this.queue });
    }
  }

  async #consume(channel: Channel): Promise<void> {
    const { consumerTag } = await channel.consume(this.queue, (message) => this.#onMessage(channel, message), { noAck: false });
    this.#consumerTag = consumerTag;
  }

  #channelClosed(channel: Channel, session: Session): void {
    if (this.#channel !== channel) return;
    this.#acks?.close();
    this.#channel = undefined;
    this.#acks = undefined;
    this.#consumerTag = undefined;
    this.#inFlight = 0;
    this.#held = [];
    if (this.#state === 'closed') return;
    // amqplib closes the channels of a dying connection before it reports the
    // connection closed, in the same turn: look again once that turn is over.
    queueMicrotask(() => {
      if (!session.alive || this.#state === 'closed' || this.#channel) return; // the reconnect listener reopens it
      // The channel failed on a live connection (a broker-side error): open a new one after a pause.
      this.context.options.logger?.warn({ queue: this.queue }, 'rabbitmq: consumer channel closed; opening it again');
      this.#reopenLater();
    });
  }

  /**
   * Schedules the one reopen after a failure, on the connection open at that
   * time, after the next wait of the `reconnect` backoff; does nothing while
   * one is scheduled. When the backoff gives up, its last wait (or 1 s) is
   * kept: a consumer keeps trying while its transport is open.
   */
  #reopenLater(): void {
    if (this.#reopenTimer || this.#state === 'closed') return;
    const { options } = this.context;
    const previous = this.#reopenStep;
    const step = { attempt: (previous?.attempt ?? 0) + 1, previousDelayMs: previous?.previousDelayMs, elapsedMs: previous?.elapsedMs ?? 0 };
    const next = options.reconnect({ ...step, random: options.random });
    const delayMs = Math.min(Math.max(0, next ?? previous?.previousDelayMs ?? 1_000), 2 ** 31 - 1);
    this.#reopenStep = { attempt: step.attempt, previousDelayMs: delayMs, elapsedMs: step.elapsedMs + delayMs };
    const timer = new AbortController();
    this.#reopenTimer = timer;
    options.clock.sleep(delayMs, timer.signal).then(
      () => {
        if (this.#reopenTimer === timer) this.#reopenTimer = undefined;
        // No connection: the reconnect listener reopens the consumer on the next one.
        const session = this.context.connection.session;
        if (session) void this.#reopen(session);
      },
      () => undefined,
    );
  }

  /** Opens the consumer on `session` again; on failure, forgets the queue's declaration and schedules the next try. */
  async #reopen(session: Session): Promise<void> {
    try {
      await this.#serial(() => this.#openOn(session));
      if (this.#channel) this.#reopenStep = undefined;
    } catch (error) {
      if (this.#state === 'closed') return;
      // The queue may be gone (404 on consume): declare it again on the next try.
      this.context.declarations.forgetQueue(session, this.queue);
      this.context.options.logger?.warn({ err: error, queue: this.queue, attempt: this.#reopenStep?.attempt }, 'rabbitmq: could not reopen the consumer; trying again');
      if (session.alive) this.#reopenLater();
    }
  }

  #onMessage(channel: Channel, message: ConsumeMessage | null): void {
    if (message === null) {
      // The broker cancelled the consumer (the queue was deleted): start over on a fresh channel.
      if (this.#channel === channel && this.#state !== 'closed') {
        this.context.options.logger?.warn({ queue: this.queue }, 'rabbitmq: the broker cancelled the consumer; opening it again');
        this.context.emit('warning', { message: `the broker cancelled the consumer of '${this.queue}'`, queue: this.queue });
        this.#consumerTag = undefined;
        // The queue was deleted, and with it every message this consumer had received: declare it again before consuming again.
        const session = this.context.connection.session;
        if (session) this.context.declarations.forgetQueue(session, this.queue);
        // The publish connection declared it too: the held messages published back below must declare it again, not be returned.
        this.context.publisher.forgetQueue(this.queue);
        this.#orphaned.add(channel);
        for (const held of this.#held.splice(0)) void this.#publishHeldBack(held);
        void channel.close().catch(() => undefined);
      }
      return;
    }
    if (this.#channel !== channel) return; // from a channel being replaced; the broker requeues it
    this.#acks!.track(message);
    this.#held.push(message);
    if (this.#state === 'closed') this.#requeueHeld();
    else this.#drainHeld();
  }

  /**
   * Hands out held messages while the subscription is active and fewer than
   * `prefetch` deliveries are unsettled. The broker's per-consumer prefetch
   * does not count deliveries of an earlier (cancelled) consumer on the same
   * channel, so after a resume this gate is what keeps the limit exact.
   */
  #drainHeld(): void {
    if (this.#draining) return;
    this.#draining = true;
    try {
      const channel = this.#channel;
      while (channel && this.#state === 'active' && this.#channel === channel && this.#inFlight < this.#prefetch) {
        const message = this.#held.shift();
        if (!message) break;
        this.#dispatch(channel, message);
      }
    } finally {
      this.#draining = false;
    }
  }

  #dispatch(channel: Channel, message: ConsumeMessage): void {
    let decoded: DecodedHeaders;
    let id: string;
    try {
      decoded = decodeHeaders(message.properties.headers);
      if (decoded.dropped > 0 || decoded.truncated > 0) this.context.stats.sanitizedHeaders++;
      const messageId: unknown = message.properties.messageId;
      id = typeof messageId === 'string' && messageId.length > 0 ? messageId : deriveMessageId(message.content, decoded.headers);
    } catch (error) {
      // Unreachable by design (decoding never throws); keep the consumer alive regardless.
      this.context.options.logger?.error({ err: error, queue: this.queue }, 'rabbitmq: could not decode a delivery; requeueing it');
      this.#inFlight++;
      this.#settleRaw(channel, message, 'requeue');
      return;
    }
    this.#inFlight++;
    if (decoded.dueAt !== undefined) {
      const early = decoded.dueAt - this.context.options.clock.now();
      if (early > EARLY_TOLERANCE_MS) {
        void this.#reschedule(channel, message, decoded, id, early);
        return;
      }
    }
    const delivery = new RabbitMqDelivery(this, message, channel, id, decoded.headers, this.#deliveryCount(message, decoded));
    try {
      this.listener(delivery);
    } catch (error) {
      this.#releaseAfterListenerThrew(delivery, error);
    }
  }

  /** A listener that throws has not taken the delivery: give it back to the queue, unless the listener settled it first. */
  #releaseAfterListenerThrew(delivery: RabbitMqDelivery, error: unknown): void {
    const { logger } = this.context.options;
    const fields = { err: error, queue: this.queue, messageId: delivery.id };
    delivery.release().then(
      () => logger?.error(fields, 'rabbitmq: the delivery listener threw; the delivery was released back to the queue'),
      (releaseError: unknown) =>
        logger?.error(
          { ...fields, releaseError },
          releaseError instanceof AlreadySettledError
            ? 'rabbitmq: the delivery listener threw after settling the delivery'
            : 'rabbitmq: the delivery listener threw and the delivery could not be released; the broker delivers it again when its channel closes',
        ),
    );
  }

  /**
   * Quorum queues: the broker's `x-delivery-count` (returns so far) plus
   * this delivery, trusted only on a redelivery, where the broker sets it.
   * Classic queues count nothing: 1, or 2 when the broker flags a
   * redelivery (a lower bound).
   */
  #deliveryCount(message: ConsumeMessage, decoded: DecodedHeaders): number {
    if (!message.fields.redelivered) return 1;
    if (this.#quorum && decoded.brokerDeliveryCount !== undefined) return Math.max(2, decoded.brokerDeliveryCount + 1);
    return 2;
  }

  /** A delayed copy came back early (a clock step, a skewed host): send it round again for the remainder. */
  async #reschedule(channel: Channel, message: ConsumeMessage, decoded: DecodedHeaders, id: string, earlyMs: number): Promise<void> {
    const remaining = Math.min(Math.ceil(earlyMs), decoded.delayMs ?? Math.ceil(earlyMs), MAX_DELAY_MS);
    const { stats, options, publisher } = this.context;
    try {
      await publisher.publishDelayed(this.queue, { id, body: message.content, headers: decoded.headers, properties: keptProperties(message.properties) }, remaining);
    } catch (error) {
      options.logger?.warn({ err: error, queue: this.queue, messageId: id }, 'rabbitmq: could not reschedule an early delayed copy; requeueing it');
      this.#settleRaw(channel, message, 'requeue');
      return;
    }
    stats.rescheduledEarly++;
    if (!this.#settleRaw(channel, message, 'ackNow')) {
      stats.duplicateWindow++;
      this.context.emit('duplicateWindow', { id, queue: this.queue, kind: 'reschedule' });
    }
  }

  /** Settles a message on its channel; false if that channel has closed. */
  #settleRaw(channel: Channel, message: ConsumeMessage, action: SettleAction): boolean {
    const acks = this.#acks;
    if (this.#channel !== channel || !acks) return false;
    try {
      if (action === 'ack') acks.ack(message);
      else if (action === 'ackNow') acks.ackNow(message);
      else acks.requeue(message);
    } catch {
      return false;
    }
    this.#settled();
    return true;
  }

  #settled(): void {
    this.#inFlight--;
    if (this.#state === 'closed') {
      if (this.#inFlight <= 0) void this.#closeChannel();
    } else if (this.#held.length > 0) {
      this.#drainHeld();
    }
  }

  // DeliveryOwner

  settleOnChannel(delivery: RabbitMqDelivery, action: SettleAction): void {
    if (this.#channel !== delivery.channel) {
      this.context.stats.staleSettlements++;
      throw new StaleDeliveryError(
        `rabbitmq: cannot ${action === 'requeue' ? 'release' : 'ack'} message ${JSON.stringify(delivery.id)}: ` +
          `the channel it arrived on from '${this.queue}' has closed; the broker will deliver it again`,
      );
    }
    if (!this.#settleRaw(delivery.channel, delivery.message, action)) {
      this.context.stats.staleSettlements++;
      throw new StaleDeliveryError(
        `rabbitmq: cannot settle message ${JSON.stringify(delivery.id)}: its channel is closing; the broker will deliver it again`,
      );
    }
  }

  isStale(delivery: RabbitMqDelivery): boolean {
    return this.#channel !== delivery.channel;
  }

  isOrphaned(delivery: RabbitMqDelivery): boolean {
    return this.#orphaned.has(delivery.channel);
  }

  async publishBack(delivery: RabbitMqDelivery): Promise<void> {
    await this.context.publisher.publishCopy(
      this.queue,
      { id: delivery.id, body: delivery.body, headers: delivery.headers, properties: keptProperties(delivery.message.properties) },
      'release of an orphaned delivery',
    );
  }

  /** Publishes back to the queue a message held, not handed out, when the broker cancelled the consumer: its original is gone. */
  async #publishHeldBack(message: ConsumeMessage): Promise<void> {
    const headers = decodeHeaders(message.properties.headers).headers;
    const messageId: unknown = message.properties.messageId;
    const id = typeof messageId === 'string' && messageId.length > 0 ? messageId : deriveMessageId(message.content, headers);
    try {
      await this.context.publisher.publishCopy(this.queue, { id, body: message.content, headers, properties: keptProperties(message.properties) }, 'held message of a cancelled consumer');
    } catch (error) {
      this.context.options.logger?.error(
        { err: error, queue: this.queue, messageId: id },
        'rabbitmq: a message held when the broker cancelled the consumer could not be published back; its original went with the queue',
      );
    }
  }

  #assertLive(delivery: RabbitMqDelivery): void {
    // An orphan's original went with its queue: its copy is still published.
    if (this.#channel !== delivery.channel && !this.#orphaned.has(delivery.channel)) {
      this.context.stats.staleSettlements++;
      throw new StaleDeliveryError(
        `rabbitmq: message ${JSON.stringify(delivery.id)} arrived on a channel that has closed; no copy was published, ` +
          'and the broker will deliver the original again',
      );
    }
  }

  async publishRetry(delivery: RabbitMqDelivery, delayMs: number, headers: Headers): Promise<void> {
    this.#assertLive(delivery);
    await this.context.publisher.publishDelayed(
      this.queue,
      { id: delivery.id, body: delivery.body, headers, properties: keptProperties(delivery.message.properties) },
      delayMs,
    );
  }

  async publishDeadLetter(delivery: RabbitMqDelivery, errorQueue: string, headers: Headers): Promise<void> {
    this.#assertLive(delivery);
    // Each error-queue copy gets its own entry id: its key for the error-queue operations.
    await this.context.publisher.publishCopy(
      errorQueue,
      { id: delivery.id, body: delivery.body, headers: withEntryId(headers), properties: keptProperties(delivery.message.properties) },
      'error-queue copy',
      'error',
    );
    // Marks the error queue for other processes, in the background: the ack of the original is not delayed.
    this.context.markers.confirmedCopyTo(errorQueue);
  }

  async afterCopyConfirmed(delivery: RabbitMqDelivery, kind: 'retry' | 'deadLetter'): Promise<void> {
    const hook = this.context.options.faults.afterCopyConfirmed;
    if (hook) await hook({ id: delivery.id, queue: this.queue, kind });
  }

  recordDuplicate(delivery: RabbitMqDelivery, kind: 'retry' | 'deadLetter'): void {
    this.context.stats.duplicateWindow++;
    this.context.options.logger?.warn(
      { messageId: delivery.id, queue: this.queue, kind },
      'rabbitmq: a copy was confirmed but the original could not be acked; the message will be delivered twice',
    );
    this.context.emit('duplicateWindow', { id: delivery.id, queue: this.queue, kind });
  }

  // Subscription

  pause(): Promise<void> {
    return this.#serial(async () => {
      if (this.#state !== 'active') return;
      this.#state = 'paused';
      await this.#cancelConsumer();
    });
  }

  resume(): Promise<void> {
    return this.#serial(async () => {
      if (this.#state !== 'paused') return;
      this.#state = 'active';
      const channel = this.#channel;
      if (!channel) return; // reopened with a consumer after the reconnection
      this.#drainHeld();
      if (!this.#consumerTag && this.#state === 'active' && this.#channel === channel) await this.#consume(channel);
    });
  }

  /**
   * Changes the prefetch. RabbitMQ applies `basic.qos` only to consumers
   * started after it, so an active consumer is cancelled and started again;
   * messages in transit meanwhile are held and handed out within the new
   * limit.
   */
  setPrefetch(prefetch: number): Promise<void> {
    if (!(Number.isInteger(prefetch) && prefetch >= 1 && prefetch <= MAX_PREFETCH)) {
      return Promise.reject(new RangeError(`rabbitmq: prefetch must be a whole number from 1 to ${MAX_PREFETCH}, got ${prefetch}`));
    }
    return this.#serial(async () => {
      if (this.#state === 'closed' || prefetch === this.#prefetch) return;
      this.#prefetch = prefetch;
      const channel = this.#channel;
      if (!channel) return; // applied when the consumer is opened again
      try {
        await channel.prefetch(prefetch, false);
        if (this.#consumerTag) {
          await this.#cancelConsumer();
          if (this.#state === 'active' && this.#channel === channel) await this.#consume(channel);
        }
      } catch (error) {
        // The channel closed meanwhile: the consumer is opened again with the new prefetch.
        if (this.#channel === channel) throw error;
      }
      this.#drainHeld();
    });
  }

  close(): Promise<void> {
    return this.#serial(async () => {
      if (this.#state === 'closed') return;
      this.#state = 'closed';
      this.#unsubscribeReconnect();
      this.#reopenTimer?.abort();
      this.#reopenTimer = undefined;
      await this.#cancelConsumer();
      this.#requeueHeld();
      if (this.#inFlight <= 0) await this.#closeChannel();
      this.context.onClosed(this);
    });
  }

  async #cancelConsumer(): Promise<void> {
    const channel = this.#channel;
    const tag = this.#consumerTag;
    if (!channel || !tag) return;
    this.#consumerTag = undefined;
    try {
      await channel.cancel(tag);
    } catch {
      // The channel closed meanwhile: there is no consumer left to cancel.
    }
  }

  #requeueHeld(): void {
    const acks = this.#acks;
    const held = this.#held.splice(0);
    if (!acks) return;
    for (const message of held) {
      try {
        acks.requeue(message);
      } catch {
        return; // channel closed: the broker requeues them itself
      }
    }
  }

  async #closeChannel(): Promise<void> {
    const channel = this.#channel;
    if (!channel) return;
    this.#acks?.flush();
    this.#acks?.close();
    this.#channel = undefined;
    this.#acks = undefined;
    await channel.close().catch(() => undefined);
  }
}
