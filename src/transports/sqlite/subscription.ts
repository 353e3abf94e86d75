import { checkPrefetch } from '../../transport/arguments.js';
import type { Clock } from '../../time/clock.js';
import type { DeliveryListener, Subscription } from '../../transport/types.js';
import { parseHeaders } from './codec.js';
import type { ClaimResult, GroupCommit, WriteOp } from './committer.js';
import { SqliteDelivery, type DeliveryOwner } from './delivery.js';
import type { ClaimedRow, QueueKind, Store } from './store.js';

/** What a consumer needs to run. */
export interface ConsumerSettings {
  readonly queue: string;
  /** The queue's kind when the consumer starts, as registered in the file. */
  readonly kind: QueueKind;
  readonly listener: DeliveryListener;
  readonly prefetch: number;
  readonly leaseMs: number;
  readonly batchSize: number;
  readonly pollIntervalMs: number;
  readonly clock: Clock;
  readonly store: Store;
  readonly commit: GroupCommit;
  /** Called once the subscription is closed, so the transport forgets it. */
  readonly onClosed: (sub: SqliteSubscription) => void;
}

/** Rows from one claim, all under the same lease token. */
interface ClaimedBatch {
  readonly rows: readonly ClaimedRow[];
  /** The next row to hand out. */
  next: number;
  readonly token: number;
  readonly leaseUntil: number;
}

/**
 * The longest an idle consumer sleeps before it reads the wall clock again:
 * a row that the wall clock, set forward, made due is claimed at most this
 * late.
 */
const WALL_CLOCK_CHECK_MS = 1_000;

const RUNNING = 0;
const PAUSED = 1;
const CLOSED = 2;

/**
 * A consumer on one queue. It claims due rows in batches under a lease,
 * keeps them in a local buffer and hands out at most `prefetch` unsettled
 * deliveries at a time. Claims ride in the transport's group commit, so the
 * acks of one batch and the claim of the next share a transaction.
 *
 * When nothing is due it waits with a single wake-up for the earliest due
 * time of its queue, or the poll interval (for writes by other processes),
 * whichever is sooner; a write in this process that is due sooner cuts the
 * wait short. There is no timer per waiting message. The wake-up reads the
 * wall clock at least every {@link WALL_CLOCK_CHECK_MS}, so a wall clock set
 * forward does not leave a message that became due waiting for the poll.
 */
export class SqliteSubscription implements Subscription, DeliveryOwner {
  readonly #s: ConsumerSettings;
  #prefetch: number;
  #kind: QueueKind;
  #state = RUNNING;
  /** Handed out and not yet settled. */
  #outstanding = 0;
  /** Claimed and not yet handed out, oldest claim first. */
  readonly #buffer: ClaimedBatch[] = [];
  /** How many rows the buffer holds. */
  #buffered = 0;
  /** The claim waiting for the next commit, if any. */
  #claim: Promise<void> | undefined;
  /** A settlement was requested since the last claim: the consumer is moving, not stuck. */
  #settlingSinceClaim = false;
  /** Something became due while a claim was under way: look again before going idle. */
  #dueWhileClaiming = false;
  #pumpScheduled = false;
  /** The pending wake-up, if the consumer is idle. */
  #wake: AbortController | undefined;
  #wakeAt = Infinity;
  /** Rows taken from the buffer whose lease is being renewed before they are handed out. */
  readonly #renewals = new Set<Promise<void>>();

  constructor(settings: ConsumerSettings) {
    this.#s = settings;
    this.#prefetch = settings.prefetch;
    this.#kind = settings.kind;
  }

  /** Starts consuming. */
  start(): void {
    this.#pump();
  }

  /** Something in the queue became claimable at `dueAt`: wake up if that is sooner than planned. */
  notifyDue(dueAt: number): void {
    if (this.#state !== RUNNING) return;
    if (this.#claim !== undefined) {
      this.#dueWhileClaiming = true;
      return;
    }
    if (this.#wake === undefined || dueAt >= this.#wakeAt) return;
    this.#cancelWake();
    this.#schedulePump();
  }

  async pause(): Promise<void> {
    if (this.#state !== RUNNING) return;
    this.#state = PAUSED;
    this.#cancelWake();
    await this.#claim;
    await this.#renewed();
    await this.#returnBuffer();
  }

  async resume(): Promise<void> {
    if (this.#state !== PAUSED) return;
    this.#state = RUNNING;
    this.#pump();
  }

  /**
   * Changes how many unsettled deliveries may be out at once. Lowering it
   * also gives back the rows claimed but not handed out, so a consumer that
   * slows down does not sit on a batch under lease.
   */
  async setPrefetch(prefetch: number): Promise<void> {
    checkPrefetch(prefetch, 'setPrefetch');
    const lower = prefetch < this.#prefetch;
    this.#prefetch = prefetch;
    if (lower) await this.#returnBuffer();
    if (this.#state === RUNNING) this.#pump();
  }

  async close(): Promise<void> {
    if (this.#state === CLOSED) return;
    this.#state = CLOSED;
    this.#cancelWake();
    this.#s.onClosed(this);
    await this.#claim;
    await this.#renewed();
    await this.#returnBuffer();
  }

  get clock(): Clock {
    return this.#s.clock;
  }

  settle(op: WriteOp): Promise<void> {
    const written = this.#s.commit.write(op);
    if (!this.#settlingSinceClaim) {
      // Claim the next batch now, so the claim joins this settlement's commit.
      this.#settlingSinceClaim = true;
      this.#schedulePump();
    }
    return written;
  }

  extend(op: WriteOp): Promise<void> {
    return this.#s.commit.write(op);
  }

  settled(): void {
    this.#outstanding--;
    this.#schedulePump();
  }

  /** Pumps once, after the current callbacks, however many settlements asked. */
  #schedulePump(): void {
    if (this.#pumpScheduled || this.#state !== RUNNING) return;
    this.#pumpScheduled = true;
    queueMicrotask(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  /**
   * Hands out deliveries while there is room, and asks for the next batch
   * while the buffer holds less than a prefetch window. A consumer with
   * every slot taken still claims ahead while its deliveries are being
   * settled, so the claim rides in the same commit as their acks; one whose
   * handlers are all stuck stops claiming, so it does not sit on messages
   * that another consumer could handle.
   */
  #pump(): void {
    const s = this.#s;
    if (this.#state !== RUNNING) return;
    const now = this.#buffered > 0 ? s.clock.now() : 0;
    while (this.#outstanding < this.#prefetch && this.#buffered > 0) {
      const batch = this.#buffer[0]!;
      if (now >= batch.leaseUntil) {
        // Held so long in the buffer that the lease ran out: another consumer may own these rows now.
        this.#buffer.shift();
        this.#buffered -= batch.rows.length - batch.next;
        continue;
      }
      const row = batch.rows[batch.next++]!;
      this.#buffered--;
      if (batch.next === batch.rows.length) this.#buffer.shift();
      this.#outstanding++;
      if (batch.leaseUntil - now >= s.leaseMs) this.#handOut(row, batch.token, batch.leaseUntil);
      else this.#renewAndHandOut(row, batch.token);
      if (this.#state !== RUNNING) return;
    }
    if (this.#claim !== undefined || this.#buffered >= this.#prefetch) return;
    if (this.#outstanding >= this.#prefetch && !this.#settlingSinceClaim) return;
    const room = 2 * this.#prefetch - this.#outstanding - this.#buffered;
    if (room > 0) this.#startClaim(Math.min(s.batchSize, room));
  }

  #startClaim(limit: number): void {
    const s = this.#s;
    this.#cancelWake();
    this.#dueWhileClaiming = false;
    this.#settlingSinceClaim = false;
    const claim = s.commit
      .claim({ kind: this.#kind, queue: s.queue, limit, leaseMs: claimLeaseMs(s.leaseMs) })
      .then(
        (result) => {
          this.#claim = undefined;
          this.#claimed(result);
        },
        () => {
          // The store was busy past its timeout, or is closing: try again after a poll interval.
          this.#claim = undefined;
          if (this.#state === RUNNING) this.#idle(undefined);
        },
      );
    this.#claim = claim;
  }

  #claimed(result: ClaimResult): void {
    const s = this.#s;
    if (result.rows.length > 0) {
      this.#buffer.push({ rows: result.rows, next: 0, token: result.token, leaseUntil: result.now + claimLeaseMs(s.leaseMs) });
      this.#buffered += result.rows.length;
      // Paused or closed meanwhile: pause() and close() give these rows back.
      this.#pump();
      return;
    }
    if (this.#state !== RUNNING) return;
    if (this.#dueWhileClaiming) {
      this.#pump();
      return;
    }
    if (this.#kind === 'queue' && s.store.peekKind(s.queue) === 'error') {
      // The name became an error queue (a dead-letter arrived): its rows are in the other table now.
      this.#kind = 'error';
      this.#pump();
      return;
    }
    // Every slot is taken: the next settlement looks again.
    if (this.#outstanding >= this.#prefetch) return;
    this.#idle(result.nextDue);
  }

  /**
   * A row that waited in the buffer past the claim-ahead allowance gets a
   * fresh lease of `leaseMs` before it is handed out, so its handler has the
   * whole lease. A row whose lease was lost meanwhile is dropped (another
   * consumer has it); one that could not be renewed (the database stayed
   * busy) is left to come back when its lease ends.
   */
  #renewAndHandOut(row: ClaimedRow, lease: number): void {
    const s = this.#s;
    const leased = { kind: this.#kind, queue: s.queue, id: row.id, seq: row.seq, lease };
    const leaseUntil = s.clock.now() + s.leaseMs;
    const renewal = s.commit.write({ type: 'extend', row: leased, leaseMs: s.leaseMs }).then(
      () => {
        if (this.#state === RUNNING) {
          this.#handOut(row, lease, leaseUntil);
          return;
        }
        // Paused or closed meanwhile: give the row back as it was, as the buffer is given back.
        this.settled();
        return s.commit.write({ type: 'unclaim', row: leased, dueAt: row.dueAt }).catch(() => undefined);
      },
      () => this.settled(),
    );
    this.#renewals.add(renewal);
    void renewal.finally(() => this.#renewals.delete(renewal));
  }

  async #renewed(): Promise<void> {
    while (this.#renewals.size > 0) await Promise.all(this.#renewals);
  }

  /** Hands out a row already counted in `#outstanding`, its lease ending no sooner than `leaseUntil`. */
  #handOut(row: ClaimedRow, lease: number, leaseUntil: number): void {
    const s = this.#s;
    const delivery = new SqliteDelivery(
      this,
      this.#kind,
      s.queue,
      row.seq,
      lease,
      row.id,
      row.body,
      parseHeaders(row.headers),
      row.deliveries,
      leaseUntil,
    );
    try {
      s.listener(delivery);
    } catch {
      // A listener that throws cannot have taken the delivery on: give it back.
      delivery.release().catch(() => undefined);
    }
  }

  /**
   * Waits until `nextDue` (undefined: nothing waits in the queue) or one
   * poll interval, whichever is sooner, then looks again; a write in this
   * process due sooner cuts the wait short. Due times are wall time and the
   * poll interval is monotonic time, so the wait is slept in slices of at
   * most {@link WALL_CLOCK_CHECK_MS}, each measured from the wall clock
   * again: a wall clock set forward is noticed at the end of the slice.
   */
  #idle(nextDue: number | undefined): void {
    this.#cancelWake();
    const { clock, pollIntervalMs } = this.#s;
    const controller = new AbortController();
    this.#wake = controller;
    this.#wakeAt = Math.min(nextDue ?? Infinity, clock.now() + pollIntervalMs);
    const pollAt = clock.monotonic() + pollIntervalMs;
    const sleepSlice = (): void => {
      const ms = Math.min(WALL_CLOCK_CHECK_MS, pollAt - clock.monotonic(), this.#wakeAt - clock.now());
      clock.sleep(Math.max(0, ms), controller.signal).then(
        () => {
          if (this.#wake !== controller) return;
          if (clock.monotonic() < pollAt && clock.now() < this.#wakeAt) {
            sleepSlice();
            return;
          }
          this.#wake = undefined;
          this.#wakeAt = Infinity;
          this.#pump();
        },
        () => undefined,
      );
    };
    sleepSlice();
  }

  #cancelWake(): void {
    const wake = this.#wake;
    if (wake === undefined) return;
    this.#wake = undefined;
    this.#wakeAt = Infinity;
    wake.abort();
  }

  /** Gives back rows claimed but never handed out, as they were: same due time, same delivery count. */
  async #returnBuffer(): Promise<void> {
    const batches = this.#buffer.splice(0);
    this.#buffered = 0;
    const s = this.#s;
    const returns: Promise<void>[] = [];
    for (const batch of batches) {
      for (let i = batch.next; i < batch.rows.length; i++) {
        const row = batch.rows[i]!;
        const leased = { kind: this.#kind, queue: s.queue, id: row.id, seq: row.seq, lease: batch.token };
        // A row whose lease already ran out belongs to whoever claimed it since; nothing to give back.
        returns.push(s.commit.write({ type: 'unclaim', row: leased, dueAt: row.dueAt }).catch(() => undefined));
      }
    }
    await Promise.all(returns);
  }
}

/**
 * The lease a claim takes: `leaseMs` plus a tenth, the claim-ahead
 * allowance. A row handed out within the allowance still has at least
 * `leaseMs` of its claim's lease left; one that waited longer in the buffer is
 * leased again for `leaseMs` at hand-out.
 */
function claimLeaseMs(leaseMs: number): number {
  return leaseMs + Math.ceil(leaseMs / 10);
}
