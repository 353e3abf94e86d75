import type { Delivery, Headers } from '../../transport/types.js';
import { encodeHeaders } from './codec.js';
import type { LeasedRow, WriteOp } from './committer.js';
import { AlreadySettledError } from './errors.js';
import type { Clock } from '../../time/clock.js';
import { checkErrorQueue } from '../../transport/arguments.js';
import { checkDelay, MAX_HELD_DELAY_MS } from '../../transport/delay.js';
import { checkLeaseExtension } from '../../transport/lease.js';
import { SettleOnce } from '../../transport/settle-once.js';

/** What a delivery needs from the consumer that handed it out. */
export interface DeliveryOwner {
  /** The transport's clock, which lease ends are written in. */
  readonly clock: Clock;
  /** Writes the settlement in the next group commit. */
  settle(op: WriteOp): Promise<void>;
  /** Writes a lease extension in the next group commit. */
  extend(op: WriteOp): Promise<void>;
  /** The delivery no longer counts against the prefetch. */
  settled(): void;
}

/** One delivery of a row claimed from SQLite, held under the claim's lease token. */
export class SqliteDelivery implements Delivery, LeasedRow {
  readonly queue: string;
  readonly id: string;
  readonly body: Buffer;
  readonly headers: Readonly<Headers>;
  readonly deliveryCount: number;
  /** @internal the table the row lives in. */
  readonly kind: LeasedRow['kind'];
  /** @internal the row's sequence number. */
  readonly seq: number;
  /** @internal the lease token of the claim. */
  readonly lease: number;
  readonly #owner: DeliveryOwner;
  /** When the lease ends at the earliest, on the transport's clock. */
  #leaseUntil: number;
  readonly #once: SettleOnce;

  constructor(
    owner: DeliveryOwner,
    kind: LeasedRow['kind'],
    queue: string,
    seq: number,
    lease: number,
    id: string,
    body: Buffer,
    headers: Readonly<Headers>,
    deliveryCount: number,
    leaseUntil: number,
  ) {
    this.#owner = owner;
    this.kind = kind;
    this.queue = queue;
    this.seq = seq;
    this.lease = lease;
    this.id = id;
    this.body = body;
    this.headers = headers;
    this.deliveryCount = deliveryCount;
    this.#leaseUntil = leaseUntil;
    this.#once = new SettleOnce({ free: () => owner.settled(), alreadySettled: () => new AlreadySettledError(queue, id) });
  }

  ack(): Promise<void> {
    return this.#settle(() => ({ type: 'ack', row: this }));
  }

  retryLater(delayMs: number, headers: Headers): Promise<void> {
    return this.#settle(() => {
      const ms = checkDelay('retryLater: delayMs', delayMs, MAX_HELD_DELAY_MS);
      return { type: 'retry', row: this, headers: encodeHeaders(headers, 'retryLater'), delayMs: ms };
    });
  }

  deadLetter(errorQueue: string, headers: Headers): Promise<void> {
    return this.#settle(() => {
      checkErrorQueue(errorQueue);
      return { type: 'deadLetter', row: this, errorQueue, headers: encodeHeaders(headers, 'deadLetter') };
    });
  }

  release(): Promise<void> {
    return this.#settle(() => ({ type: 'release', row: this }));
  }

  /**
   * Moves the end of the lease to `ms` from now, unless it already ends
   * later: a lease never shortens. Rejects with `LeaseLostError` when
   * another consumer has the message, and with `AlreadySettledError` once
   * the delivery is settled.
   */
  async extendLease(ms: number): Promise<void> {
    if (this.#once.settled) throw new AlreadySettledError(this.queue, this.id);
    checkLeaseExtension(ms);
    const sentAt = this.#owner.clock.now();
    await this.#owner.extend({ type: 'extend', row: this, leaseMs: ms });
    this.#leaseUntil = Math.max(this.#leaseUntil, sentAt + ms);
  }

  /** Whether the lease has run out: another consumer may have claimed the row. */
  leaseExpired(): boolean {
    return this.#owner.clock.now() >= this.#leaseUntil;
  }

  /**
   * Settles at most once (see {@link SettleOnce}). A settlement that was
   * written, or that found its lease lost, is final; one that failed for
   * another reason (the database was busy past its timeout) leaves the
   * delivery held so it can be settled again.
   */
  #settle(build: () => WriteOp): Promise<void> {
    return this.#once.settle(build, (op) => this.#owner.settle(op), isLeaseLost);
  }
}

/** Whether a settlement failed because another consumer has the message (a `LeaseLostError`). */
function isLeaseLost(error: unknown): boolean {
  return error instanceof Error && error.name === 'LeaseLostError';
}
