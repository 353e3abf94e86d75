import { MAX_TIMER_MS, type Clock } from '../../time/clock.js';
import { checkDelay, MAX_HELD_DELAY_MS } from '../../transport/delay.js';
import { leaseMargin } from '../../transport/lease.js';
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

const HELD = 0;
const SETTLING = 1;
const SETTLED = 2;

const ACTIONS = { a: 'ack', r: 'retryLater', d: 'deadLetter', l: 'release' } as const;

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
  #state = HELD;
  #counted = false;
  #leaseWatched = false;

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
  ) {
    this.#owner = owner;
    this.#leaseUntil = owner.clock.monotonic() + leaseMs - leaseMargin(leaseMs);
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
      if (typeof errorQueue !== 'string' || errorQueue.length === 0) throw new TypeError('deadLetter: errorQueue must be a non-empty string');
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
    if (this.#state === SETTLED) throw new AlreadySettledError(this.queue, this.id);
    if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 1 || ms > MAX_TIMER_MS) {
      throw new RangeError(`extendLease: ms must be a whole number from 1 to ${MAX_TIMER_MS}, got ${String(ms)}`);
    }
    const sentAt = this.#owner.clock.monotonic();
    if (!(await this.#owner.extend(this.entryId, this.pendingCount, ms))) throw new DeliveryGoneError('extendLease', this.id, this.queue);
    this.#leaseUntil = Math.max(this.#leaseUntil, sentAt + ms - leaseMargin(ms));
  }

  /** Whether the lease ran out by this side's reckoning: another consumer may have claimed the entry. */
  leaseExpired(): boolean {
    return this.#owner.clock.monotonic() > this.#leaseUntil;
  }

  /**
   * Settles at most once. A settlement that took effect, or that found the
   * delivery gone, is final and frees the prefetch slot; one that failed
   * otherwise (the connection dropped, the server was out of memory) leaves
   * the delivery held, so it can be settled again, and its slot taken until
   * the entry's lease runs out.
   */
  #settle(build: () => SettleOp): Promise<void> {
    if (this.#state !== HELD) return Promise.reject(new AlreadySettledError(this.queue, this.id));
    let op: SettleOp;
    try {
      op = build();
    } catch (error) {
      return Promise.reject(error);
    }
    this.#state = SETTLING;
    return this.#owner.settle(op).then(
      (result) => {
        if (result === 1) {
          this.#state = SETTLED;
          this.#release();
          return;
        }
        if (result === 0) {
          this.#state = SETTLED;
          this.#release();
          throw new DeliveryGoneError(ACTIONS[op.kind], this.id, this.queue);
        }
        this.#stillHeld();
        throw new SettlementRefusedError(ACTIONS[op.kind], this.id, result);
      },
      (error: unknown) => {
        this.#stillHeld();
        throw error;
      },
    );
  }

  #stillHeld(): void {
    this.#state = HELD;
    if (this.#leaseWatched) return;
    this.#leaseWatched = true;
    this.#owner.heldAfterFailure(() => this.#release());
  }

  #release(): void {
    if (this.#counted) return;
    this.#counted = true;
    this.#owner.settled();
  }
}

function checkedHeaders(headers: Headers, what: string): string {
  if (typeof headers !== 'object' || headers === null) throw new TypeError(`${what}: headers must be an object of strings`);
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') throw new TypeError(`${what}: header ${name} must be a string, got ${typeof value}`);
  }
  return encodeHeaders(headers);
}
