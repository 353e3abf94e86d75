import type { Clock } from '../../time/clock.js';
import { checkErrorQueue, checkHeaders } from '../../transport/arguments.js';
import { checkDelay, MAX_HELD_DELAY_MS } from '../../transport/delay.js';
import { checkLeaseExtension, leaseEnd } from '../../transport/lease.js';
import { SettleOnce } from '../../transport/settle-once.js';
import type { Delivery, Headers } from '../../transport/types.js';
import { encodeHeaders } from './codec.js';
import { AlreadySettledError, DeliveryGoneError, SettlementRefusedError } from './errors.js';
import type { SettleOp, SettleResult } from './settler.js';

/** What a delivery needs from the consumer that handed it out. */
export interface DeliveryOwner {
  /** The clock this side reckons leases by. */
  readonly clock: Clock;
  /** Sends the settlement with the others of this turn. */
  settle(op: SettleOp): Promise<SettleResult>;
  /** Extends the lease of `entryId`; resolves whether it was still held. */
  extend(entryId: string, count: number, ms: number): Promise<boolean>;
  /** The delivery no longer counts against the prefetch. */
  settled(): void;
  /**
   * A settlement failed and the entry is still held, so the delivery keeps
   * counting against the prefetch; `free` ends that once the entry's lease
   * runs out (it can then be taken over, by this consumer too).
   */
  heldAfterFailure(free: () => void): void;
}

const ACTIONS = { a: 'ack', r: 'retryLater', d: 'deadLetter', l: 'release' } as const;

/** Why a settlement found its delivery gone. */
const GONE = 'found it no longer held by this consumer (lease taken over, already settled, or queue deleted)';

/**
 * One delivery of a stream entry, held in the consumer group's pending
 * entries list under this consumer's name with a delivery count. Every
 * settlement checks both on the server, so one made after the lease was
 * taken over changes nothing. The lease runs `leaseMs` from when the entry
 * was read or claimed; this side takes it as run out a little sooner.
 */
export class RedisDelivery implements Delivery {
  readonly #owner: DeliveryOwner;
  /** Monotonic time at which this side takes the lease as run out. */
  #leaseUntil: number;
  readonly #once: SettleOnce;

  constructor(
    owner: DeliveryOwner,
    readonly queue: string,
    /** @internal the entry's stream id. */
    readonly entryId: string,
    /** @internal the pending entries list's delivery count when this delivery was read. */
    readonly pendingCount: number,
    /** @internal deliveries the entry inherited from an earlier copy. */
    readonly inherited: number,
    readonly id: string,
    readonly body: Buffer,
    readonly headers: Readonly<Headers>,
    leaseMs: number,
    /** When the command that read or claimed the entry was sent, on `owner.clock`'s monotonic clock: the earliest its lease can have started. */
    leaseFrom: number,
  ) {
    this.#owner = owner;
    this.#leaseUntil = leaseEnd(leaseFrom, leaseMs);
    this.#once = new SettleOnce({
      free: () => owner.settled(),
      alreadySettled: () => new AlreadySettledError('redis', queue, id),
      heldAfterFailure: (free) => owner.heldAfterFailure(free),
    });
  }

  get deliveryCount(): number {
    return this.inherited + this.pendingCount;
  }

  ack(): Promise<void> {
    return this.#settle(() => ({ kind: 'a', entryId: this.entryId, count: this.pendingCount }));
  }

  retryLater(delayMs: number, headers: Headers): Promise<void> {
    return this.#settle(() => {
      const ms = checkDelay('retryLater: delayMs', delayMs, MAX_HELD_DELAY_MS);
      return { kind: 'r', entryId: this.entryId, count: this.pendingCount, delayMs: ms, headers: checkedHeaders(headers, 'retryLater') };
    });
  }

  deadLetter(errorQueue: string, headers: Headers): Promise<void> {
    return this.#settle(() => {
      checkErrorQueue(errorQueue);
      return { kind: 'd', entryId: this.entryId, count: this.pendingCount, errorQueue, headers: checkedHeaders(headers, 'deadLetter') };
    });
  }

  /** Gives the message back at the end of the stream; its next delivery counts one more. */
  release(): Promise<void> {
    return this.#settle(() => ({ kind: 'l', entryId: this.entryId, count: this.pendingCount, inherit: this.pendingCount }));
  }

  /**
   * Keeps the delivery `ms` more milliseconds from other consumers, or
   * longer when its lease already ends later (a lease never shortens). Rejects
   * with a `DeliveryGoneError` when the lease was already taken over, and an
   * `AlreadySettledError` once settled.
   */
  async extendLease(ms: number): Promise<void> {
    if (this.#once.settled) throw new AlreadySettledError('redis', this.queue, this.id);
    checkLeaseExtension(ms);
    const sentAt = this.#owner.clock.monotonic();
    if (!(await this.#owner.extend(this.entryId, this.pendingCount, ms))) throw new DeliveryGoneError('redis', 'extendLease', this.id, this.queue, GONE);
    this.#leaseUntil = Math.max(this.#leaseUntil, leaseEnd(sentAt, ms));
  }

  /** Whether the lease ran out by this side's reckoning: another consumer may have claimed the entry. */
  leaseExpired(): boolean {
    return this.#owner.clock.monotonic() > this.#leaseUntil;
  }

  /**
   * Settles at most once (see {@link SettleOnce}). A settlement that took
   * effect, or that found the delivery gone, is final and frees the prefetch
   * slot; one that failed otherwise (the connection dropped, the server was
   * out of memory) leaves the delivery held, so it can be settled again, and
   * its slot taken until the entry's lease runs out.
   */
  #settle(build: () => SettleOp): Promise<void> {
    return this.#once.settle(
      build,
      (op) =>
        this.#owner.settle(op).then((result) => {
          if (result === 1) return;
          if (result === 0) throw new DeliveryGoneError('redis', ACTIONS[op.kind], this.id, this.queue, GONE);
          throw new SettlementRefusedError('redis', ACTIONS[op.kind], this.id, result);
        }),
      (error) => error instanceof DeliveryGoneError,
    );
  }
}

function checkedHeaders(headers: Headers, what: string): string {
  checkHeaders(headers, what);
  return encodeHeaders(headers);
}
