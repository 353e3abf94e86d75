import type { Clock } from '../../time/clock.js';
import { checkErrorQueue, checkHeaders } from '../../transport/arguments.js';
import { checkDelay, MAX_HELD_DELAY_MS } from '../../transport/delay.js';
import { checkLeaseExtension, leaseEnd } from '../../transport/lease.js';
import { SettleOnce } from '../../transport/settle-once.js';
import type { Delivery, Headers } from '../../transport/types.js';
import type { MessageView } from './client.js';
import { AlreadySettledError, DeliveryGoneError } from './errors.js';
import type { DuplicateKind } from './events.js';
import { statusCode } from './send-errors.js';

/** What a delivery needs from the consumer that handed it out. */
export interface DeliveryOwner {
  /** The clock this side reckons leases by. */
  readonly clock: Clock;
  /** Acknowledges the message by its current receipt handle. */
  ack(view: MessageView): Promise<void>;
  /** Makes the message invisible for `ms` from now; the view gets the new receipt handle. */
  changeInvisible(view: MessageView, ms: number): Promise<void>;
  /** Sends a copy of the message to `topic`, held `delayMs` (0: deliverable at once); resolves once the broker stored it. */
  sendCopy(topic: string, view: MessageView, id: string, headers: Headers, delayMs: number): Promise<void>;
  /** Makes sure `errorQueue` exists as an error queue. */
  errorQueue(errorQueue: string): Promise<void>;
  /** A settlement's copy went out but the original will be given out again: one duplicate. */
  recordDuplicate(id: string, kind: DuplicateKind): void;
  /** The delivery no longer counts against the prefetch. */
  settled(): void;
}

/** The proxy's status for a receipt handle whose invisible time ran out (or that was acknowledged already). */
const INVALID_RECEIPT_HANDLE = 40013;

/** Why a settlement found its delivery gone. */
const GONE = 'found its lease run out (the message became visible again to other consumers)';

/** Why a settlement whose copy went out found its delivery gone. */
const GONE_AFTER_COPY = 'sent its copy, but the original could not be acknowledged before its lease ran out: the broker gives it out again too (a duplicate)';

/**
 * One delivery of a RocketMQ message received with a `SimpleConsumer`. Its
 * lease is the invisible duration of the receive: until it ends no other
 * consumer of the group gets the message; `extendLease` is
 * `changeInvisibleDuration`, which gives the message a new receipt handle
 * (later settlements use it).
 *
 * `retryLater` and `deadLetter` send the copy first and acknowledge the
 * original after: a crash or a lost lease in between leaves a duplicate,
 * never a loss. A settlement whose copy went out but whose
 * acknowledgement failed for another reason stays held, and trying it again
 * only acknowledges: no second copy. Once such a delivery ends without its
 * acknowledgement (its lease ran out, the broker refused its receipt
 * handle, or it was released) the owner records the duplicate, once.
 */
export class RocketMqDelivery implements Delivery {
  readonly #owner: DeliveryOwner;
  readonly #view: MessageView;
  readonly #once: SettleOnce;
  /** Monotonic time at which this side takes the lease as run out. */
  #leaseUntil: number;
  /** Which settlement's copy went out (trying the settlement again only acknowledges); undefined while none did. */
  #copied: DuplicateKind | undefined;
  /** Whether the duplicate the copy left was recorded. */
  #duplicateRecorded = false;
  /** Settlements and lease extensions one after the other: each uses the receipt handle the one before left. */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(
    owner: DeliveryOwner,
    readonly queue: string,
    readonly id: string,
    readonly headers: Readonly<Headers>,
    view: MessageView,
    leaseMs: number,
    /** Monotonic time the lease counts from: when the receive that brought it was asked for. */
    leaseFrom: number,
  ) {
    this.#owner = owner;
    this.#view = view;
    this.#leaseUntil = leaseEnd(leaseFrom, leaseMs);
    this.#once = new SettleOnce({
      free: () => owner.settled(),
      alreadySettled: () => new AlreadySettledError('rocketmq', queue, id),
    });
  }

  get body(): Uint8Array {
    return this.#view.body;
  }

  /** The broker's delivery attempt of this copy (1 on its first delivery). */
  get deliveryCount(): number {
    return this.#view.deliveryAttempt ?? 1;
  }

  /** The message group of a FIFO message, undefined for others. */
  get messageGroup(): string | undefined {
    return this.#view.messageGroup || undefined;
  }

  /** The broker's id of this copy. */
  get brokerMessageId(): string {
    return this.#view.messageId;
  }

  ack(): Promise<void> {
    return this.#settle('ack', () => undefined, () => this.#owner.ack(this.#view));
  }

  retryLater(delayMs: number, headers: Headers): Promise<void> {
    return this.#settle(
      'retryLater',
      () => {
        const ms = checkDelay('retryLater: delayMs', delayMs, MAX_HELD_DELAY_MS);
        checkHeaders(headers, 'retryLater');
        return { ms, headers: { ...headers } };
      },
      ({ ms, headers: h }) => this.#copyThenAck('retry', () => this.#owner.sendCopy(this.queue, this.#view, this.id, h, ms)),
    );
  }

  deadLetter(errorQueue: string, headers: Headers): Promise<void> {
    return this.#settle(
      'deadLetter',
      () => {
        checkErrorQueue(errorQueue);
        checkHeaders(headers, 'deadLetter');
        return { errorQueue, headers: { ...headers } };
      },
      ({ errorQueue: q, headers: h }) =>
        this.#copyThenAck('deadLetter', async () => {
          await this.#owner.errorQueue(q);
          await this.#owner.sendCopy(q, this.#view, this.id, h, 0);
        }),
    );
  }

  /**
   * Makes the message visible again at once; its next delivery counts one
   * more. After a settlement whose copy went out, that is a duplicate
   * (recorded): the original comes back beside its copy.
   */
  release(): Promise<void> {
    return this.#settle('release', () => undefined, async () => {
      try {
        await this.#owner.changeInvisible(this.#view, 0);
      } finally {
        this.#recordDuplicate();
      }
    });
  }

  /**
   * Keeps the message invisible `ms` more milliseconds from now (the proxy
   * sets the new invisible time; it may shorten the lease). Rejects with a
   * `DeliveryGoneError` when the lease had already run out, and an
   * `AlreadySettledError` once settled.
   */
  extendLease(ms: number): Promise<void> {
    if (this.#once.settled) return Promise.reject(new AlreadySettledError('rocketmq', this.queue, this.id));
    checkLeaseExtension(ms);
    return this.#serial(async () => {
      if (this.leaseExpired()) throw new DeliveryGoneError('rocketmq', 'extendLease', this.id, this.queue, GONE);
      const sentAt = this.#owner.clock.monotonic();
      await this.#owner.changeInvisible(this.#view, ms).catch((error: unknown) => {
        throw goneOr(error, 'extendLease', this.id, this.queue);
      });
      this.#leaseUntil = leaseEnd(sentAt, ms);
    });
  }

  /** Whether the invisible time ran out by this side's reckoning: another consumer may have the message now. */
  leaseExpired(): boolean {
    return this.#owner.clock.monotonic() > this.#leaseUntil;
  }

  async #copyThenAck(kind: DuplicateKind, copy: () => Promise<void>): Promise<void> {
    if (this.#copied === undefined) {
      await copy();
      this.#copied = kind;
    }
    await this.#owner.ack(this.#view);
  }

  /** When a copy went out and the original will be given out again: records the duplicate, once. */
  #recordDuplicate(): void {
    if (this.#copied === undefined || this.#duplicateRecorded) return;
    this.#duplicateRecorded = true;
    this.#owner.recordDuplicate(this.id, this.#copied);
  }

  /** The error of a settlement that found the delivery gone; a duplicate when its copy went out before. */
  #gone(operation: string): DeliveryGoneError {
    if (this.#copied === undefined) return new DeliveryGoneError('rocketmq', operation, this.id, this.queue, GONE);
    this.#recordDuplicate();
    return new DeliveryGoneError('rocketmq', operation, this.id, this.queue, GONE_AFTER_COPY);
  }

  #settle<T>(operation: string, prepare: () => T, act: (prepared: T) => Promise<void>): Promise<void> {
    return this.#once.settle(
      () => {
        const prepared = prepare();
        // A settlement after the lease ran out would act on a message another consumer may hold.
        if (this.leaseExpired()) throw this.#gone(operation);
        return prepared;
      },
      (prepared) =>
        this.#serial(() =>
          act(prepared).catch((error: unknown) => {
            throw statusCode(error) === INVALID_RECEIPT_HANDLE ? this.#gone(operation) : error;
          }),
        ),
      (error) => error instanceof DeliveryGoneError,
    );
  }

  #serial<T>(run: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(run, run);
    this.#chain = next.catch(() => undefined);
    return next;
  }
}

/** A `DeliveryGoneError` for an invalid receipt handle, else `error` as it is. */
function goneOr(error: unknown, operation: string, id: string, queue: string): unknown {
  return statusCode(error) === INVALID_RECEIPT_HANDLE ? new DeliveryGoneError('rocketmq', operation, id, queue, GONE) : error;
}
