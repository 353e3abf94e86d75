import type { Clock } from '../../time/clock.js';
import { checkErrorQueue, checkHeaders } from '../../transport/arguments.js';
import { checkDelay, MAX_HELD_DELAY_MS } from '../../transport/delay.js';
import { isDeliveryGone } from '../../transport/delivery-gone.js';
import { checkLeaseExtension, leaseEnd } from '../../transport/lease.js';
import { SettleOnce } from '../../transport/settle-once.js';
import type { Delivery, Headers } from '../../transport/types.js';
import { AlreadySettledError, DeliveryGoneError, MessageTooLargeError } from './errors.js';
import type { DuplicateKind } from './events.js';
import type { NsqjsMessage } from './nsqjs.js';

/** What a delivery needs from the subscription that handed it out. */
export interface DeliveryOwner {
  readonly clock: Clock;
  /**
   * Publishes a copy of the message to `topic` with `headers`, after
   * `delayMs` (carried in hops past nsqd's limit), and resolves once nsqd
   * has it. Headers that would take the copy over nsqd's `--max-msg-size`
   * are cut first (failure history, then stack); a copy that does not fit
   * even so rejects with a `MessageTooLargeError`, nothing sent.
   */
  publishCopy(topic: string, id: string, body: Uint8Array, headers: Headers, delayMs: number, via: string): Promise<void>;
  /** A copy of message `id` that could not fit nsqd's `--max-msg-size`, and what was done instead: logged. */
  copyTooLarge(operation: 'deadLetter', id: string, error: MessageTooLargeError, instead: string): void;
  /** In how many ms nsqd starts handing out deferred messages of `topic`'s consumer channel on `via` (0 unless the channel is new: see `NsqNode.scanStartsIn`). */
  scanStartsIn(topic: string, via: string): number;
  /**
   * Publishes a copy of the message to the error topic `errorQueue` with
   * `headers`, once the topic has the channel the error store and the
   * operations read it through, and resolves once nsqd has it. The consumer
   * channel is not made on it: nobody reads an error topic through it.
   */
  deadLetterCopy(errorQueue: string, id: string, body: Uint8Array, headers: Headers, via: string): Promise<void>;
  /** Publishes `bytes` (the message as nsqd delivered it, envelope and all) to the error topic `errorQueue` unchanged, and resolves once nsqd has it. */
  deadLetterAsArrived(errorQueue: string, bytes: Uint8Array, via: string): Promise<void>;
  /** The delivery no longer counts against the prefetch. */
  settled(): void;
  /** A copy of message `id` was confirmed but the original could not be finished: it will be delivered again. */
  recordDuplicate(id: string, kind: DuplicateKind): void;
}

/** The connection a delivery arrived on: settlements go back on it, and die with it. */
export interface DeliveryLink {
  /** Whether the connection the message arrived on is still open. */
  readonly open: boolean;
  /** The nsqd it is open to (`host:port`): copies are published there. */
  readonly address: string;
  /** nsqd's `--max-msg-timeout` for this connection: TOUCH never keeps a message past it. */
  readonly maxLeaseMs: number;
  /** Runs `send` (a FIN or REQ), batching the writes of one event-loop turn where the link can. */
  respond?(send: () => void): void;
}

/**
 * One delivery of an NSQ message, in flight on the connection it arrived
 * on for the lease (the connection's `msg_timeout`). nsqd takes a FIN or
 * REQ only on that connection and only while the message is in flight; a
 * settlement after the lease ran out (less the shared margin) or after the
 * connection closed rejects with a `DeliveryGoneError` and changes nothing.
 *
 * - `ack` is FIN; `release` is REQ with no delay.
 * - `retryLater` publishes a copy with the new headers (DPUB), and FINs the
 *   original once nsqd confirmed the copy. A delay that would come due
 *   before nsqd scans a new channel's deferred queue is held here instead,
 *   the original in flight, and the copy published undelayed (see
 *   {@link NsqDelivery.retryLater}). `deadLetter` publishes the copy
 *   to the error topic, then FINs. A crash or a lost connection between the
 *   two leaves both: a duplicate, never a loss.
 * - A copy that would not fit nsqd's `--max-msg-size` even with its
 *   failure history and stack cut: `retryLater` rejects with
 *   `MessageTooLargeError` and the delivery stays held (an endpoint then
 *   moves the message to the error queue, reason `copy-too-large`);
 *   `deadLetter` moves the message to the error topic as it arrived
 *   (without the failure headers), logged. Nothing is lost.
 * - `extendLease` is TOUCH, which restarts the lease; nsqd never keeps a
 *   message in flight past `--max-msg-timeout` from its delivery.
 */
export class NsqDelivery implements Delivery {
  readonly #owner: DeliveryOwner;
  readonly #link: DeliveryLink;
  readonly #msg: NsqjsMessage;
  readonly #leaseMs: number;
  readonly #leaseStart: number;
  readonly #once: SettleOnce;
  #leaseUntil: number;
  #keepAlive: AbortController | undefined;

  constructor(
    owner: DeliveryOwner,
    link: DeliveryLink,
    msg: NsqjsMessage,
    readonly queue: string,
    readonly id: string,
    readonly body: Uint8Array,
    readonly headers: Readonly<Headers>,
    /** The lease nsqd gives the connection (`msg_timeout`), in ms. */
    leaseMs: number,
    /** When its lease started, on `owner.clock`'s monotonic clock: its arrival, or with lease marks no later than nsqd sent it. */
    leaseStart: number,
  ) {
    this.#owner = owner;
    this.#link = link;
    this.#msg = msg;
    this.#leaseMs = leaseMs;
    this.#leaseStart = leaseStart;
    this.#leaseUntil = leaseEnd(leaseStart, leaseMs);
    this.#once = new SettleOnce({ free: () => owner.settled(), alreadySettled: () => new AlreadySettledError('nsq', queue, id) });
  }

  /** nsqd's `attempts`: how many times this copy was delivered, this one included. */
  get deliveryCount(): number {
    return this.#msg.attempts;
  }

  /** nsqd's id of this copy (16 hex characters). */
  get nsqId(): string {
    return this.#msg.id;
  }

  ack(): Promise<void> {
    return this.#settle('ack', async () => this.#respond(() => this.#msg.finish()));
  }

  /**
   * Publishes a copy with `headers` due in `delayMs` (DPUB), then FINs the
   * original. nsqd hands out nothing deferred in a channel until its queue
   * scan takes the channel in, up to 5.1 s after the channel was made; a
   * delay that would come due before then (on a channel this transport
   * made) is held here, the original in flight and the prefetch slot
   * taken, and the copy then goes out undelayed (PUB), so it is not late.
   * When the lease would not last the delay, the copy goes out with DPUB as
   * usual.
   */
  retryLater(delayMs: number, headers: Headers): Promise<void> {
    let ms: number;
    try {
      ms = checkDelay('retryLater: delayMs', delayMs, MAX_HELD_DELAY_MS);
      checkHeaders(headers, 'retryLater');
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#settle('retryLater', async () => {
      const clock = this.#owner.clock;
      if (ms > 0 && ms < this.#owner.scanStartsIn(this.queue, this.#link.address) && clock.monotonic() + ms < this.#leaseUntil) {
        await clock.sleep(ms);
        ms = 0;
      }
      await this.#owner.publishCopy(this.queue, this.id, this.body, headers, ms, this.#link.address);
      this.#respondAfterCopy('retryLater', 'retry', () => this.#msg.finish());
    });
  }

  deadLetter(errorQueue: string, headers: Headers): Promise<void> {
    try {
      checkErrorQueue(errorQueue);
      checkHeaders(headers, 'deadLetter');
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#settle('deadLetter', async () => {
      try {
        await this.#owner.deadLetterCopy(errorQueue, this.id, this.body, headers, this.#link.address);
      } catch (error) {
        if (!(error instanceof MessageTooLargeError)) throw error;
        // No copy with the failure headers fits: the message as it arrived does (nsqd took it), so that goes to the error topic.
        await this.#owner.deadLetterAsArrived(errorQueue, this.#msg.body, this.#link.address);
        this.#owner.copyTooLarge('deadLetter', this.id, error, `moved to ${errorQueue} as it arrived, without the failure headers`);
      }
      this.#respondAfterCopy('deadLetter', 'deadLetter', () => this.#msg.finish());
    });
  }

  /** Gives the message back: nsqd offers it again at once (REQ 0), one delivery more. */
  release(): Promise<void> {
    return this.#settle('release', async () => this.#respond(() => this.#msg.requeue(0, false)));
  }

  /**
   * Keeps the delivery `ms` more milliseconds from other consumers: TOUCH,
   * which restarts the lease, again every half lease while `ms` is longer
   * than one, never past nsqd's `--max-msg-timeout` from the delivery.
   * Never shortens the lease. Rejects with a `DeliveryGoneError` when the
   * lease had already run out, and an `AlreadySettledError` once settled.
   */
  async extendLease(ms: number): Promise<void> {
    if (this.#once.settled) throw new AlreadySettledError('nsq', this.queue, this.id);
    checkLeaseExtension(ms);
    this.#checkHeld('extendLease');
    this.#touch();
    this.#keepAlive?.abort();
    this.#keepAlive = undefined;
    if (ms > this.#leaseMs) void this.#keepTouching(this.#owner.clock.monotonic() + ms);
  }

  /** Whether the lease ran out (less the margin for the time on the wire) or the connection closed: nsqd gives the message out again. */
  leaseExpired(): boolean {
    return !this.#link.open || this.#owner.clock.monotonic() > this.#leaseUntil;
  }

  #touch(): void {
    const now = this.#owner.clock.monotonic();
    this.#msg.touch();
    const hardEnd = leaseEnd(this.#leaseStart, this.#link.maxLeaseMs);
    this.#leaseUntil = Math.max(this.#leaseUntil, Math.min(leaseEnd(now, this.#leaseMs), hardEnd));
  }

  async #keepTouching(until: number): Promise<void> {
    const controller = new AbortController();
    this.#keepAlive = controller;
    const clock = this.#owner.clock;
    while (!this.#once.settled && !controller.signal.aborted && this.#leaseUntil < until) {
      try {
        await clock.sleep(Math.max(1, Math.floor(this.#leaseMs / 2)), controller.signal);
      } catch {
        return;
      }
      if (this.#once.settled || this.leaseExpired()) return;
      this.#touch();
    }
  }

  #checkHeld(operation: string): void {
    if (!this.#link.open) throw new DeliveryGoneError('nsq', operation, this.id, this.queue, 'came after its connection to nsqd closed (nsqd gives it out again)');
    if (this.#owner.clock.monotonic() > this.#leaseUntil) throw new DeliveryGoneError('nsq', operation, this.id, this.queue, 'came after its lease ran out (nsqd gives it out again)');
  }

  /** Sends FIN or REQ, which nsqd does not answer; resolves once it is written to the connection. */
  async #respond(send: () => void): Promise<void> {
    this.#checkHeld('settle');
    if (this.#link.respond === undefined) send();
    else this.#link.respond(send);
    await new Promise<void>((resolve) => process.nextTick(resolve));
  }

  /**
   * The FIN after a copy was published. When the connection closed or the
   * lease ran out meanwhile, nsqd gives the original out again beside the
   * copy (the duplicate window, counted and logged by the owner): the
   * settlement is final all the same.
   */
  #respondAfterCopy(operation: string, kind: DuplicateKind, send: () => void): void {
    if (this.#link.open && this.#owner.clock.monotonic() <= this.#leaseUntil) {
      if (this.#link.respond === undefined) send();
      else this.#link.respond(send);
      return;
    }
    this.#owner.recordDuplicate(this.id, kind);
    throw new DeliveryGoneError('nsq', operation, this.id, this.queue, 'published its copy, but its connection closed or its lease ran out before the FIN: nsqd gives the original out again too (a duplicate)');
  }

  /**
   * Settles at most once (see `SettleOnce`). A delivery whose lease ran out
   * or whose connection closed is gone: the settlement is refused and final.
   */
  #settle(operation: string, act: () => Promise<void>): Promise<void> {
    this.#keepAlive?.abort();
    return this.#once.settle(() => this.#checkHeld(operation), act, isDeliveryGone);
  }
}
