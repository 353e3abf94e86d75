/**
 * One delivery from a RabbitMQ queue and its settlement. A retry or
 * error-queue copy is published on the confirm channel and confirmed before
 * the original is acked: a crash between the two leaves the message twice
 * (counted as `duplicateWindow`), never zero times.
 *
 * A delivery whose consumer the broker cancelled (its queue was deleted) is
 * an orphan: its original went with the queue, unacked or not, and is never
 * delivered again, so it is settled by copy alone. A retry or error-queue
 * copy is still published, an ack has nothing left to do, and a release
 * publishes the message back to its queue (declared again).
 */
import type { Channel, ConsumeMessage } from 'amqplib';
import type { Delivery, Headers } from '../../transport/types.js';
import { AlreadySettledError, StaleDeliveryError } from './errors.js';
import { headerTableBytes } from './wire-headers.js';

/** What a delivery needs from the subscription that received it. */
export interface DeliveryOwner {
  readonly queue: string;
  /**
   * Settles the message on its channel: `ack` coalesced with other acks of
   * this event-loop turn, `ackNow` written at once, `requeue` a nack with
   * requeue. Throws a StaleDeliveryError if that channel has closed.
   */
  settleOnChannel(delivery: RabbitMqDelivery, action: 'ack' | 'ackNow' | 'requeue'): void;
  /** Publishes a delayed copy to this queue and resolves once confirmed. */
  publishRetry(delivery: RabbitMqDelivery, delayMs: number, headers: Headers): Promise<void>;
  /** Publishes a copy to `errorQueue` and resolves once confirmed. */
  publishDeadLetter(delivery: RabbitMqDelivery, errorQueue: string, headers: Headers): Promise<void>;
  /** Runs between a confirmed copy and the ack of the original (fault injection in tests). */
  afterCopyConfirmed(delivery: RabbitMqDelivery, kind: 'retry' | 'deadLetter'): Promise<void>;
  /** Records a confirmed copy whose original could not be acked. */
  recordDuplicate(delivery: RabbitMqDelivery, kind: 'retry' | 'deadLetter'): void;
  /** Whether the channel the delivery arrived on has closed. */
  isStale(delivery: RabbitMqDelivery): boolean;
  /** Whether the broker cancelled the consumer the delivery arrived on (its queue was deleted): the original is gone. */
  isOrphaned(delivery: RabbitMqDelivery): boolean;
  /** Publishes an orphaned delivery back to its queue (declared again) and resolves once confirmed. */
  publishBack(delivery: RabbitMqDelivery): Promise<void>;
}

type SettleState = 'open' | 'settling' | 'settled';

/** A delivery from RabbitMQ: the transport contract's, plus what the broker said about it. */
export class RabbitMqDelivery implements Delivery {
  #state: SettleState = 'open';

  constructor(
    private readonly owner: DeliveryOwner,
    /** The message as amqplib delivered it. */
    readonly message: ConsumeMessage,
    /**
     * The channel it arrived on; settling after that channel closed fails.
     * @internal
     */
    readonly channel: Channel,
    readonly id: string,
    readonly headers: Readonly<Headers>,
    readonly deliveryCount: number,
  ) {}

  get queue(): string {
    return this.owner.queue;
  }

  get body(): Uint8Array {
    return this.message.content;
  }

  /** The broker's redelivered flag: an earlier delivery of this copy was not acked. */
  get redelivered(): boolean {
    return this.message.fields.redelivered;
  }

  /** The size of the header table as received, broker headers included, in bytes. */
  get rawHeaderBytes(): number {
    return headerTableBytes(this.message.properties.headers);
  }

  /** Whether a settlement has taken effect. */
  get settled(): boolean {
    return this.#state === 'settled';
  }

  /**
   * Whether the channel the delivery arrived on has closed (a lost
   * connection): the broker gave the message back to its queue, another
   * consumer may have it now, and this delivery can no longer be settled.
   * The channel is the lease here; an endpoint releases a delivery whose
   * channel closed while it waited for a slot instead of running its
   * handler. An orphan (its queue deleted) is never expired: nobody else
   * can have it.
   */
  leaseExpired(): boolean {
    return this.owner.isStale(this) && !this.owner.isOrphaned(this);
  }

  #claim(): void {
    if (this.#state !== 'open') throw new AlreadySettledError(this.id, this.queue);
    this.#state = 'settling';
  }

  async ack(): Promise<void> {
    this.#claim();
    if (this.owner.isOrphaned(this)) {
      // The original went with its queue: nothing is left to ack.
      this.#state = 'settled';
      return;
    }
    this.#settleOnChannel('ack');
  }

  async release(): Promise<void> {
    this.#claim();
    if (this.owner.isOrphaned(this)) return this.#publishBack();
    this.#settleOnChannel('requeue');
  }

  /** Releases an orphan: its original went with its queue, so the message is published back to the queue instead. */
  async #publishBack(): Promise<void> {
    try {
      await this.owner.publishBack(this);
    } catch (error) {
      this.#state = 'open';
      throw error;
    }
    this.#state = 'settled';
  }

  async retryLater(delayMs: number, headers: Headers): Promise<void> {
    this.#claim();
    await this.#copyThenAck('retry', () => this.owner.publishRetry(this, delayMs, headers));
  }

  async deadLetter(errorQueue: string, headers: Headers): Promise<void> {
    this.#claim();
    await this.#copyThenAck('deadLetter', () => this.owner.publishDeadLetter(this, errorQueue, headers));
  }

  #settleOnChannel(action: 'ack' | 'ackNow' | 'requeue'): void {
    try {
      this.owner.settleOnChannel(this, action);
    } finally {
      // Whether it went out or the channel is gone, this delivery cannot be settled again.
      this.#state = 'settled';
    }
  }

  async #copyThenAck(kind: 'retry' | 'deadLetter', publish: () => Promise<void>): Promise<void> {
    try {
      await publish();
    } catch (error) {
      // An orphan's original is gone, not redelivered: it stays open, to be settled again.
      if (!(error instanceof StaleDeliveryError) && this.owner.isStale(this) && !this.owner.isOrphaned(this)) {
        // The connection went down under the publish: the original comes back by redelivery.
        this.#state = 'settled';
        throw new StaleDeliveryError(
          `rabbitmq: the ${kind === 'retry' ? 'retry' : 'error-queue'} copy of message ${JSON.stringify(this.id)} was not confirmed ` +
            `(${(error as Error)?.message ?? String(error)}) and the channel of the original has closed: the broker will deliver ` +
            'the original again (if the broker stored the copy before the connection dropped, that is a duplicate)',
          { cause: error },
        );
      }
      // No confirmed copy: the original is untouched and may be settled another way.
      if (!(error instanceof StaleDeliveryError)) this.#state = 'open';
      else this.#state = 'settled';
      throw error;
    }
    await this.owner.afterCopyConfirmed(this, kind);
    if (this.owner.isOrphaned(this)) {
      // The original went with its queue: the confirmed copy is the message now.
      this.#state = 'settled';
      return;
    }
    try {
      // Written at once, not coalesced: the window between copy and ack stays as short as it can be.
      this.#settleOnChannel('ackNow');
    } catch (error) {
      if (error instanceof StaleDeliveryError) {
        // Orphaned between the check above and the ack: the confirmed copy is the message now.
        if (this.owner.isOrphaned(this)) return;
        this.owner.recordDuplicate(this, kind);
        throw new StaleDeliveryError(
          `rabbitmq: the ${kind === 'retry' ? 'retry' : 'error-queue'} copy of message ${JSON.stringify(this.id)} was confirmed, ` +
            'but the channel of the original closed before it could be acked: the broker will deliver the original again, ' +
            'so the message now exists twice (a duplicate, counted in stats.duplicateWindow)',
        );
      }
      throw error;
    }
  }
}
