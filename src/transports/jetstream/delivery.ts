import type { MsgHdrs } from '@nats-io/transport-node';
import type { Clock } from '../../time/clock.js';
import { checkErrorQueue, checkHeadersObject } from '../../transport/arguments.js';
import { checkDelay, MAX_HELD_DELAY_MS } from '../../transport/delay.js';
import { checkLeaseExtension, leaseEnd } from '../../transport/lease.js';
import { SettleOnce } from '../../transport/settle-once.js';
import type { Delivery, Headers } from '../../transport/types.js';
import type { AckInfo } from './ack-subject.js';
import { DELAY_HEADER, encodeNatsHeaders } from './codec.js';
import { AlreadySettledError, DeliveryGoneError, MessageTooLargeError } from './errors.js';
import type { QueueNames } from './names.js';

/** What a delivery needs from the consumer that handed it out. */
export interface DeliveryOwner {
  readonly clock: Clock;
  /** Sends `payload` (`+ACK`, `-NAK`, `+WPI`) to the delivery's reply subject and waits for the server to have it. */
  confirm(reply: string, payload: string): Promise<void>;
  /**
   * Publishes a copy and resolves once the stream has stored it (or had it
   * already, by its `msgID`; without one the stream stores every publish).
   * A copy over the server's `max_payload` rejects with a
   * `MessageTooLargeError`, nothing sent.
   */
  publish(subject: string, body: Uint8Array, headers: MsgHdrs, msgID: string | undefined): Promise<void>;
  /** The subject of `errorQueue`, whose stream is made when missing. */
  errorQueueSubject(errorQueue: string): Promise<string>;
  /** Logs that no copy with the failure headers fit, and what was done `instead`. */
  copyTooLarge(operation: 'deadLetter', id: string, queue: string, error: MessageTooLargeError, instead: string): void;
  /**
   * A settlement's final `+ACK` or `-NAK` is on its way to the server, and
   * `sent` settles once the server has it (or it failed): the consumer may
   * ask for a message in the delivery's stead meanwhile.
   */
  settling(sent: Promise<void>): void;
  /** The delivery no longer counts against the prefetch. */
  settled(): void;
}

/** Why a settlement found its delivery gone. */
const GONE = 'came after its lease ran out (the server gives it out again)';

/**
 * One delivery of a stream message under the consumer's `ack_wait`. The
 * server accepts a settlement even after the lease ran out and the message
 * went to another consumer, so the delivery checks its lease itself: the
 * lease began when the message was pulled (the server started its
 * `ack_wait` then, not when the message left the consumer's buffer), and
 * once it has run out (less a small margin for the time on the wire), every
 * settlement rejects with a `DeliveryGoneError` and changes nothing.
 *
 * `retryLater` and `deadLetter` publish the copy first and ack the original
 * once the copy is stored: a crash in between leaves both, never neither;
 * the copy's `Nats-Msg-Id` is fixed by the stream message it replaces (see
 * {@link copyMsgId}), so settling again after a failure, or settling a
 * later delivery of a message whose earlier delivery's copy was stored but
 * whose ack was lost, does not store a second copy.
 *
 * A copy over the server's `max_payload` even with its failure history and
 * stack cut (a body near the limit): `retryLater` rejects with a
 * `MessageTooLargeError` and the delivery stays held (an endpoint then moves
 * the message to the error queue, reason `copy-too-large`); `deadLetter`
 * moves the message to the error queue as it arrived (its own headers,
 * without the failure headers), logged, and when even that does not fit
 * beside the copy's `Nats-Msg-Id`, without the id: a settlement repeated
 * after a failure may then store it twice, a duplicate, never a loss.
 */
export class JetStreamDelivery implements Delivery {
  readonly #owner: DeliveryOwner;
  readonly #ackWaitMs: number;
  #leaseUntil: number;
  readonly #once: SettleOnce;
  #keepAlive: AbortController | undefined;

  constructor(
    owner: DeliveryOwner,
    readonly names: QueueNames,
    /** @internal where the server says the message is. */
    readonly info: AckInfo,
    /** @internal the reply subject settlements go to. */
    readonly reply: string,
    readonly id: string,
    readonly body: Uint8Array,
    readonly headers: Readonly<Headers>,
    ackWaitMs: number,
    /** When the pull request it came under was sent, on `owner.clock`'s monotonic clock: the earliest its lease can have started. */
    requestSentAt: number,
  ) {
    this.#owner = owner;
    this.#ackWaitMs = ackWaitMs;
    this.#leaseUntil = leaseEnd(requestSentAt, ackWaitMs);
    this.#once = new SettleOnce({ free: () => owner.settled(), alreadySettled: () => new AlreadySettledError('jetstream', names.queue, id) });
  }

  get queue(): string {
    return this.names.queue;
  }

  get deliveryCount(): number {
    return this.info.delivered;
  }

  ack(): Promise<void> {
    return this.#settle('ack', () => this.#finalConfirm('+ACK'));
  }

  retryLater(delayMs: number, headers: Headers): Promise<void> {
    let encoded: MsgHdrs;
    try {
      const ms = checkDelay('retryLater: delayMs', delayMs, MAX_HELD_DELAY_MS);
      encoded = encodeNatsHeaders(this.id, checked(headers, 'retryLater'), { [DELAY_HEADER]: String(ms) });
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#settle('retryLater', async () => {
      await this.#owner.publish(this.names.delaySubject, this.body, encoded, copyMsgId(this.id, 'r', this.info));
      await this.#finalConfirm('+ACK');
    });
  }

  deadLetter(errorQueue: string, headers: Headers): Promise<void> {
    let encoded: MsgHdrs;
    try {
      checkErrorQueue(errorQueue);
      encoded = encodeNatsHeaders(this.id, checked(headers, 'deadLetter'));
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#settle('deadLetter', async () => {
      const subject = await this.#owner.errorQueueSubject(errorQueue);
      const msgID = copyMsgId(this.id, 'e', this.info);
      try {
        await this.#owner.publish(subject, this.body, encoded, msgID);
      } catch (error) {
        if (!(error instanceof MessageTooLargeError)) throw error;
        await this.#deadLetterAsArrived(subject, errorQueue, msgID, error);
      }
      await this.#finalConfirm('+ACK');
    });
  }

  /** No copy with the failure headers fits: the message as it arrived goes to the error queue, with the copy's id when that fits too. */
  async #deadLetterAsArrived(subject: string, errorQueue: string, msgID: string, tooLarge: MessageTooLargeError): Promise<void> {
    const asArrived = encodeNatsHeaders(this.id, this.headers);
    try {
      await this.#owner.publish(subject, this.body, asArrived, msgID);
      this.#owner.copyTooLarge('deadLetter', this.id, this.queue, tooLarge, `moved to ${errorQueue} as it arrived, without the failure headers`);
    } catch (error) {
      if (!(error instanceof MessageTooLargeError)) throw error;
      await this.#owner.publish(subject, this.body, asArrived, undefined);
      this.#owner.copyTooLarge('deadLetter', this.id, this.queue, tooLarge, `moved to ${errorQueue} as it arrived, without the failure headers and without a Nats-Msg-Id`);
    }
  }

  /** Gives the message back: the server offers it again at once, one delivery more. */
  release(): Promise<void> {
    return this.#settle('release', () => this.#finalConfirm('-NAK'));
  }

  /**
   * Keeps the delivery `ms` more milliseconds from other consumers: tells
   * the server the message is being worked on (which restarts its
   * `ack_wait`), again every half `ack_wait` while `ms` is longer than one.
   * Rejects with a `DeliveryGoneError` when the lease had already run out,
   * and an `AlreadySettledError` once settled.
   */
  async extendLease(ms: number): Promise<void> {
    if (this.#once.settled) throw new AlreadySettledError('jetstream', this.queue, this.id);
    checkLeaseExtension(ms);
    if (this.#leaseRanOut()) throw new DeliveryGoneError('jetstream', 'extendLease', this.id, this.queue, GONE);
    await this.#workingOn();
    if (this.#leaseRanOut()) throw new DeliveryGoneError('jetstream', 'extendLease', this.id, this.queue, GONE);
    this.#keepAlive?.abort();
    this.#keepAlive = undefined;
    if (ms > this.#ackWaitMs) void this.#keepWorking(this.#owner.clock.monotonic() + ms);
  }

  /** Whether the `ack_wait` ran out (less the margin for the time on the wire): another consumer may have the message. */
  leaseExpired(): boolean {
    return this.#leaseRanOut();
  }

  /** Sends the settlement's `+ACK` or `-NAK` and waits for the server to have it. */
  #finalConfirm(payload: '+ACK' | '-NAK'): Promise<void> {
    const sent = this.#owner.confirm(this.reply, payload);
    this.#owner.settling(sent);
    return sent;
  }

  /**
   * Sends `+WPI`, and once the server confirms it, counts the lease from
   * when it was sent. A confirmation that comes after the lease ran out on
   * this side (held back in a cut connection) extends nothing: the server
   * may have had it only after its own `ack_wait` ran out and the message
   * went to another consumer.
   */
  async #workingOn(): Promise<void> {
    const sentAt = this.#owner.clock.monotonic();
    await this.#owner.confirm(this.reply, '+WPI');
    if (this.#leaseRanOut()) return;
    this.#leaseUntil = Math.max(this.#leaseUntil, leaseEnd(sentAt, this.#ackWaitMs));
  }

  async #keepWorking(until: number): Promise<void> {
    const controller = new AbortController();
    this.#keepAlive = controller;
    const clock = this.#owner.clock;
    while (!this.#once.settled && !controller.signal.aborted && this.#leaseUntil < until) {
      try {
        await clock.sleep(Math.max(1, Math.floor(this.#ackWaitMs / 2)), controller.signal);
        if (!this.#once.settled) await this.#workingOn();
        if (this.#leaseRanOut()) return;
      } catch {
        return;
      }
    }
  }

  #leaseRanOut(): boolean {
    return this.#owner.clock.monotonic() > this.#leaseUntil;
  }

  /**
   * Settles at most once (see {@link SettleOnce}). A settlement that took
   * effect is final, and so is one refused because the lease ran out; one
   * that failed otherwise (the connection dropped, the server did not
   * answer) leaves the delivery held, so it can be settled again.
   */
  #settle(operation: string, act: () => Promise<void>): Promise<void> {
    return this.#once.settle(
      () => {
        this.#keepAlive?.abort();
        if (this.#leaseRanOut()) throw new DeliveryGoneError('jetstream', operation, this.id, this.queue, GONE);
      },
      act,
      (error) => error instanceof DeliveryGoneError,
    );
  }
}

/**
 * The `Nats-Msg-Id` of the copy that `retryLater` (`r`) or `deadLetter`
 * (`e`) makes of the stream message `info` names: the message id, the
 * kind, the stream and the sequence; not the delivery count, so every
 * delivery of one stream message makes the same copy and the stream keeps
 * the first one within its duplicate window: a message whose copy was
 * stored but whose ack was lost (a cut connection, a late settlement) and
 * that comes back to another consumer does not start a second line of
 * retries.
 */
export function copyMsgId(id: string, kind: 'r' | 'e', info: AckInfo): string {
  return `${id}|${kind}|${info.stream}|${info.streamSeq}`;
}

function checked(headers: Headers, what: string): Headers {
  checkHeadersObject(headers, `${what}: headers`);
  return headers;
}
