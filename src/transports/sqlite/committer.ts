import type { Clock } from '../../time/clock.js';
import { busyRetryDelay, isBusy } from './busy.js';
import { DatabaseBusyError, LeaseLostError, TransportClosedError } from './errors.js';
import type { Claim, QueueKind, Store } from './store.js';

/** A claimed row, identified by its table, sequence number and lease token. */
export interface LeasedRow {
  readonly kind: QueueKind;
  readonly queue: string;
  readonly id: string;
  readonly seq: number;
  readonly lease: number;
}

/** A message checked and encoded for the store. */
export interface EncodedMessage {
  readonly id: string;
  readonly body: Buffer;
  readonly headers: string;
  /** Milliseconds from the send until the message is due: 0 for at once. */
  readonly delayMs: number;
}

/** One write waiting for the next group commit. */
export type WriteOp =
  | { readonly type: 'register'; readonly queue: string }
  | { readonly type: 'send'; readonly queue: string; readonly messages: readonly EncodedMessage[] }
  | { readonly type: 'ack'; readonly row: LeasedRow }
  | { readonly type: 'retry'; readonly row: LeasedRow; readonly headers: string; readonly delayMs: number }
  | { readonly type: 'deadLetter'; readonly row: LeasedRow; readonly errorQueue: string; readonly headers: string }
  | { readonly type: 'release'; readonly row: LeasedRow }
  | { readonly type: 'extend'; readonly row: LeasedRow; readonly leaseMs: number }
  | { readonly type: 'unclaim'; readonly row: LeasedRow; readonly dueAt: number };

/** A request to claim due rows, answered in the next group commit. */
export interface ClaimRequest {
  readonly kind: QueueKind;
  readonly queue: string;
  readonly limit: number;
  readonly leaseMs: number;
}

/** What a claim found: the rows, or when nothing was due, when the queue next has something. */
export interface ClaimResult extends Claim {
  /** The time the claim ran at. */
  readonly now: number;
  /** When no row was due: the earliest time one becomes claimable (due, or its lease ends); undefined when the queue is empty. */
  readonly nextDue: number | undefined;
}

interface PendingWrite {
  readonly op: WriteOp;
  /** When the write was requested: delays count from here. */
  readonly at: number;
  /** When a commit holding this write first found the database locked. */
  busySince?: number;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

interface PendingClaim {
  readonly request: ClaimRequest;
  busySince?: number;
  readonly resolve: (result: ClaimResult) => void;
  readonly reject: (error: unknown) => void;
}

/** Told after each commit which queues have rows that became claimable, and when. */
export type DueListener = (queue: string, dueAt: number) => void;

/**
 * Group commit. Writes requested in the same turn of the event loop (sends,
 * acks, retries, dead-letters, releases, a consumer's first registration of
 * its queue) are applied in one transaction, and
 * each caller's promise settles only after that transaction commits: batching
 * costs latency, never durability. Consumers' claims ride in the same
 * transaction, after the writes, so a consumer that just acked a batch takes
 * its next batch in the same commit. A settlement whose lease no longer holds
 * changes nothing and rejects with {@link LeaseLostError}; the others in the
 * batch are unaffected.
 *
 * When another connection holds the write lock, the group waits for it
 * without blocking the event loop: the database's own (synchronous) busy
 * wait is a few milliseconds, and the commit is tried again after a short
 * sleep on the clock, with every write requested meanwhile joining it. A
 * write or claim still locked out `busyTimeoutMs` after its first try
 * rejects with {@link DatabaseBusyError}, having changed nothing.
 */
export class GroupCommit {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #onDue: DueListener;
  readonly #busyTimeoutMs: number;
  #writes: PendingWrite[] = [];
  #claims: PendingClaim[] = [];
  #scheduled = false;
  #closed = false;
  /** Consecutive commits that found the database locked; 0 when the last one got through. */
  #busyTries = 0;
  /** Settles when a wait for a locked database ends and the queued work has been tried again. */
  #busyWait: Promise<void> | undefined;
  readonly #apply: (writes: readonly PendingWrite[], ok: Uint8Array, claims: readonly PendingClaim[], now: number) => ClaimResult[];

  constructor(store: Store, clock: Clock, onDue: DueListener, busyTimeoutMs: number) {
    this.#store = store;
    this.#clock = clock;
    this.#onDue = onDue;
    this.#busyTimeoutMs = busyTimeoutMs;
    this.#apply = store.immediateTransaction((writes: readonly PendingWrite[], ok: Uint8Array, claims: readonly PendingClaim[], now: number) => {
      for (let i = 0; i < writes.length; i++) {
        const w = writes[i]!;
        ok[i] = this.#applyOne(w.op, w.at, now) ? 1 : 0;
      }
      const results: ClaimResult[] = new Array(claims.length);
      for (let i = 0; i < claims.length; i++) {
        const { kind, queue, limit, leaseMs } = claims[i]!.request;
        const claim = store.claimRows(kind, queue, now, now + leaseMs, limit);
        results[i] = { ...claim, now, nextDue: claim.rows.length === 0 ? store.nextDue(kind, queue) : undefined };
      }
      return results;
    });
  }

  /** Queues a write for the next commit; resolves once it is committed. */
  write(op: WriteOp): Promise<void> {
    if (this.#closed) return Promise.reject(new TransportClosedError(purposeOf(op)));
    return new Promise<void>((resolve, reject) => {
      this.#writes.push({ op, at: op.type === 'ack' ? 0 : this.#clock.now(), resolve, reject });
      this.#schedule();
    });
  }

  /** Claims due rows in the next commit, under a lease that starts when that commit runs. */
  claim(request: ClaimRequest): Promise<ClaimResult> {
    if (this.#closed) return Promise.reject(new TransportClosedError('claim messages'));
    return new Promise<ClaimResult>((resolve, reject) => {
      this.#claims.push({ request, resolve, reject });
      this.#schedule();
    });
  }

  #schedule(): void {
    // While waiting out a lock, new work joins the next try instead.
    if (this.#scheduled || this.#busyWait !== undefined) return;
    this.#scheduled = true;
    setImmediate(() => this.#flush());
  }

  /** Commits every queued write and claim now. */
  #flush(): void {
    this.#scheduled = false;
    const writes = this.#writes;
    const claims = this.#claims;
    if (writes.length === 0 && claims.length === 0) return;
    this.#writes = [];
    this.#claims = [];
    this.#commit(writes, claims, true);
  }

  /**
   * Applies a group in one transaction and settles its promises. When the
   * transaction fails because of one write (a constraint, a value SQLite
   * cannot bind) rather than the database (busy, full, I/O), each member is
   * committed on its own, so only the faulty write fails.
   */
  #commit(writes: readonly PendingWrite[], claims: readonly PendingClaim[], isolate: boolean): void {
    const ok = new Uint8Array(writes.length);
    let results: ClaimResult[];
    try {
      results = this.#apply(writes, ok, claims, this.#clock.now());
    } catch (error) {
      if (isBusy(error)) {
        this.#waitOutLock(writes, claims, error);
        return;
      }
      if (isolate && writes.length + claims.length > 1 && isOwnFault(error)) {
        for (const w of writes) this.#commit([w], [], false);
        for (const c of claims) this.#commit([], [c], false);
        return;
      }
      for (const w of writes) w.reject(error);
      for (const c of claims) c.reject(error);
      return;
    }
    this.#busyTries = 0;
    this.#settle(writes, ok, claims, results);
  }

  /**
   * The database was locked by another connection: fails what has waited
   * `busyTimeoutMs` since its first try, and tries the rest again, with
   * whatever is requested meanwhile, after a short sleep.
   */
  #waitOutLock(writes: readonly PendingWrite[], claims: readonly PendingClaim[], error: unknown): void {
    const now = this.#clock.now();
    const keptWrites: PendingWrite[] = [];
    const keptClaims: PendingClaim[] = [];
    let busy: DatabaseBusyError | undefined;
    const timedOut = (item: { busySince?: number }) => now - (item.busySince ??= now) >= this.#busyTimeoutMs;
    for (const w of writes) {
      if (timedOut(w)) w.reject((busy ??= new DatabaseBusyError(this.#busyTimeoutMs, error)));
      else keptWrites.push(w);
    }
    for (const c of claims) {
      if (timedOut(c)) c.reject((busy ??= new DatabaseBusyError(this.#busyTimeoutMs, error)));
      else keptClaims.push(c);
    }
    this.#writes = keptWrites.concat(this.#writes);
    this.#claims = keptClaims.concat(this.#claims);
    if (this.#writes.length === 0 && this.#claims.length === 0) {
      this.#busyTries = 0;
      return;
    }
    // Several writes of one group, committed one by one, may each find the lock taken: one wait serves them all.
    if (this.#busyWait !== undefined) return;
    const delay = busyRetryDelay(this.#busyTries++);
    this.#busyWait = this.#clock.sleep(delay).then(() => {
      this.#busyWait = undefined;
      this.#flush();
    });
  }

  /** After a commit: resolves the writes that took effect, rejects those whose lease was lost, answers the claims. */
  #settle(writes: readonly PendingWrite[], ok: Uint8Array, claims: readonly PendingClaim[], results: readonly ClaimResult[]): void {
    for (let i = 0; i < writes.length; i++) {
      const { op, at, resolve, reject } = writes[i]!;
      if (ok[i] === 1) {
        resolve();
        const due = dueOf(op, at);
        if (due !== undefined) this.#onDue(due.queue, due.at);
      } else if ('row' in op) {
        reject(new LeaseLostError(op.row.queue, op.row.id));
      }
    }
    for (let i = 0; i < claims.length; i++) claims[i]!.resolve(results[i]!);
  }

  /**
   * Commits what is queued, waiting out a locked database up to
   * `busyTimeoutMs`, then refuses further writes.
   */
  async close(): Promise<void> {
    if (this.#busyWait === undefined) this.#flush();
    while (this.#busyWait !== undefined) await this.#busyWait;
    this.#closed = true;
  }

  #applyOne(op: WriteOp, requestedAt: number, now: number): boolean {
    // A delay counts from when the write was requested, not from the commit; a lease from the commit.
    const store = this.#store;
    switch (op.type) {
      case 'register':
        store.kindOf(op.queue);
        return true;
      case 'send': {
        const kind = store.kindOf(op.queue);
        for (const m of op.messages) store.insert(kind, op.queue, m.id, m.body, m.headers, requestedAt + m.delayMs, requestedAt);
        return true;
      }
      case 'ack':
        return store.remove(op.row.kind, op.row.seq, op.row.lease);
      case 'retry':
        return store.retry(op.row.kind, op.row.seq, op.row.lease, op.headers, requestedAt + op.delayMs);
      case 'deadLetter': {
        store.ensureErrorQueue(op.errorQueue);
        return store.moveToErrorQueue(op.row.kind, op.row.seq, op.row.lease, op.errorQueue, op.headers, requestedAt);
      }
      case 'release':
        return store.release(op.row.kind, op.row.seq, op.row.lease, requestedAt);
      case 'unclaim':
        return store.unclaim(op.row.kind, op.row.seq, op.row.lease, op.dueAt);
      case 'extend':
        return store.extend(op.row.kind, op.row.seq, op.row.lease, now + op.leaseMs);
    }
  }
}

/**
 * Whether a failed group commit may be the fault of one of its writes rather
 * than of the database as a whole (busy, full, read-only, I/O): a constraint
 * failed, or a value could not be bound.
 */
function isOwnFault(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code !== 'string' || code.startsWith('SQLITE_CONSTRAINT');
}

/** Which queue a committed write made claimable, and from when. */
function dueOf(op: WriteOp, requestedAt: number): { queue: string; at: number } | undefined {
  switch (op.type) {
    case 'send': {
      let delayMs = Infinity;
      for (const m of op.messages) delayMs = Math.min(delayMs, m.delayMs);
      return delayMs === Infinity ? undefined : { queue: op.queue, at: requestedAt + delayMs };
    }
    case 'retry':
      return { queue: op.row.queue, at: requestedAt + op.delayMs };
    case 'deadLetter':
      return { queue: op.errorQueue, at: requestedAt };
    case 'release':
      return { queue: op.row.queue, at: requestedAt };
    case 'unclaim':
      return { queue: op.row.queue, at: op.dueAt };
    case 'register':
    case 'ack':
    case 'extend':
      return undefined;
  }
}

/** What a write refused by a closed transport was for, as its error says. */
function purposeOf(op: WriteOp): string {
  switch (op.type) {
    case 'register':
      return 'consume';
    case 'send':
      return 'send';
    default:
      return 'settle a delivery';
  }
}
