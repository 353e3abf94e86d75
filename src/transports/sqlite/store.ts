import type Database from 'better-sqlite3';
import { HEADER } from '../../headers/names.js';
import { parseHeaders } from './codec.js';

/** Which table holds a queue's rows: work queues in `messages`, error queues in `error_messages`. */
export type QueueKind = 'queue' | 'error';

/** A row claimed under a lease, in the order it fell due. */
export interface ClaimedRow {
  readonly seq: number;
  readonly id: string;
  readonly body: Buffer;
  readonly headers: string;
  /** Deliveries counting this one. */
  readonly deliveries: number;
  /** The due time the row had before it was claimed: where it goes back to if it is returned unused. */
  readonly dueAt: number;
}

/** The failure facts copied out of the headers into `error_messages` columns. */
interface FailureColumns {
  readonly originalQueue: string | null;
  readonly failedAt: string | null;
  readonly reason: string | null;
  readonly errorName: string | null;
}

/** The rows one claim took, all under the same lease token. */
export interface Claim {
  readonly token: number;
  readonly rows: readonly ClaimedRow[];
}

const NOTHING_CLAIMED: Claim = { token: 0, rows: [] };

type Row = [seq: number, id: string, body: Buffer, headers: string, deliveries: number, visibleAt: number];

/** The prepared statements for one of the two message tables. */
class TableStatements {
  readonly select: Database.Statement<[string, number, number], Row>;
  readonly claim: Database.Statement<[number, number, string, number, number]>;
  readonly nextDue: Database.Statement<[string], number>;
  readonly remove: Database.Statement<[number, number]>;
  readonly release: Database.Statement<[number, number, number]>;
  readonly extend: Database.Statement<[number, number, number]>;
  readonly unclaim: Database.Statement<[number, number, number]>;
  readonly copyToErrors: Database.Statement<
    [string, string, number, number, string | null, string | null, string | null, string | null, number, number]
  >;

  constructor(db: Database.Database, table: string) {
    const due = `SELECT seq FROM ${table} WHERE queue = ? AND visible_at <= ? ORDER BY visible_at, seq LIMIT ?`;
    this.select = db
      .prepare<[string, number, number], Row>(
        `SELECT seq, id, body, headers, deliveries + 1, visible_at FROM ${table}
         WHERE queue = ? AND visible_at <= ? ORDER BY visible_at, seq LIMIT ?`,
      )
      .raw(true);
    this.claim = db.prepare(`UPDATE ${table} SET visible_at = ?, deliveries = deliveries + 1, lease = ? WHERE seq IN (${due})`);
    this.nextDue = db
      .prepare<[string], number>(`SELECT visible_at FROM ${table} WHERE queue = ? ORDER BY visible_at LIMIT 1`)
      .pluck(true);
    this.remove = db.prepare(`DELETE FROM ${table} WHERE seq = ? AND lease = ?`);
    this.release = db.prepare(`UPDATE ${table} SET visible_at = ?, lease = NULL WHERE seq = ? AND lease = ?`);
    this.extend = db.prepare(`UPDATE ${table} SET visible_at = max(visible_at, ?) WHERE seq = ? AND lease = ?`);
    this.unclaim = db.prepare(
      `UPDATE ${table} SET visible_at = ?, lease = NULL, deliveries = deliveries - 1 WHERE seq = ? AND lease = ?`,
    );
    this.copyToErrors = db.prepare(
      `INSERT INTO error_messages
         (queue, id, body, headers, visible_at, deliveries, enqueued_at, original_queue, failed_at, reason, error_name)
       SELECT ?, id, body, ?, ?, 0, ?, ?, ?, ?, ? FROM ${table} WHERE seq = ? AND lease = ?`,
    );
  }
}

/**
 * Every SQL statement the transport runs, prepared once. Methods run
 * synchronously on the caller's connection; the caller owns transactions.
 */
export class Store {
  readonly db: Database.Database;
  readonly #tables: Record<QueueKind, TableStatements>;
  readonly #kind: Database.Statement<[string], QueueKind>;
  readonly #registerQueue: Database.Statement<[string]>;
  readonly #registerError: Database.Statement<[string]>;
  readonly #moveToErrors: Database.Statement<[string]>;
  readonly #deleteQueue: Database.Statement<[string]>;
  readonly #nextToken: Database.Statement<[], number>;
  readonly #insertMessage: Database.Statement<[string, string, Buffer, string, number, number]>;
  readonly #insertError: Database.Statement<
    [string, string, Buffer, string, number, number, string | null, string | null, string | null, string | null]
  >;
  readonly #retryMessage: Database.Statement<[string, number, number, number]>;
  readonly #retryError: Database.Statement<
    [string, number, string | null, string | null, string | null, string | null, number, number]
  >;
  /** Kinds known to be final: a name that became an error queue, in a committed transaction, stays one. */
  readonly #errorQueues = new Set<string>();
  /** Error queues seen inside the running transaction: remembered only once it commits. */
  readonly #uncommittedErrorQueues = new Set<string>();

  constructor(db: Database.Database) {
    this.db = db;
    this.#tables = { queue: new TableStatements(db, 'messages'), error: new TableStatements(db, 'error_messages') };
    this.#kind = db.prepare<[string], QueueKind>('SELECT kind FROM queues WHERE name = ?').pluck(true);
    this.#registerQueue = db.prepare(`INSERT OR IGNORE INTO queues (name, kind) VALUES (?, 'queue')`);
    this.#registerError = db.prepare(
      `INSERT INTO queues (name, kind) VALUES (?, 'error') ON CONFLICT (name) DO UPDATE SET kind = 'error'`,
    );
    // Rows written by other tools may hold headers that are not JSON: those facts are NULL, not an error.
    const header = (name: string) => `(CASE WHEN json_valid(headers) THEN json_extract(headers, '$."${name}"') END)`;
    this.#moveToErrors = db.prepare(
      `INSERT INTO error_messages
         (queue, id, body, headers, visible_at, deliveries, lease, enqueued_at, original_queue, failed_at, reason, error_name)
       SELECT queue, id, body, headers, visible_at, deliveries, lease, enqueued_at,
         ${header(HEADER.failureQueue)}, ${header(HEADER.failureTime)}, ${header(HEADER.failureReason)}, ${header(HEADER.failureErrorName)}
       FROM messages WHERE queue = ? ORDER BY seq`,
    );
    this.#deleteQueue = db.prepare('DELETE FROM messages WHERE queue = ?');
    this.#nextToken = db
      .prepare<[], number>(`UPDATE meta SET value = value + 1 WHERE key = 'lease_token' RETURNING value`)
      .pluck(true);
    this.#insertMessage = db.prepare(
      'INSERT INTO messages (queue, id, body, headers, visible_at, deliveries, enqueued_at) VALUES (?, ?, ?, ?, ?, 0, ?)',
    );
    this.#insertError = db.prepare(
      `INSERT INTO error_messages
         (queue, id, body, headers, visible_at, deliveries, enqueued_at, original_queue, failed_at, reason, error_name)
       VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?)`,
    );
    this.#retryMessage = db.prepare(
      'UPDATE messages SET headers = ?, visible_at = ?, deliveries = 0, lease = NULL WHERE seq = ? AND lease = ?',
    );
    this.#retryError = db.prepare(
      `UPDATE error_messages SET headers = ?, visible_at = ?, deliveries = 0, lease = NULL,
         original_queue = ?, failed_at = ?, reason = ?, error_name = ?
       WHERE seq = ? AND lease = ?`,
    );
  }

  /**
   * `fn` as a function that runs it in one immediate (write) transaction.
   * The error queues it registers or finds are remembered once the
   * transaction commits, and forgotten if it rolls back.
   */
  immediateTransaction<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
    const run = this.db.transaction(fn).immediate;
    return (...args: A): R => {
      try {
        const result = run(...args);
        for (const queue of this.#uncommittedErrorQueues) this.#errorQueues.add(queue);
        return result;
      } finally {
        this.#uncommittedErrorQueues.clear();
      }
    };
  }

  /** The kind of `queue`, registering it as a work queue when it is new. */
  kindOf(queue: string): QueueKind {
    const kind = this.peekKind(queue);
    if (kind === undefined) this.#registerQueue.run(queue);
    return kind ?? 'queue';
  }

  /** The kind of `queue` as stored, without registering it. */
  peekKind(queue: string): QueueKind | undefined {
    if (this.#errorQueues.has(queue)) return 'error';
    const kind = this.#kind.get(queue);
    if (kind === 'error') this.#rememberErrorQueue(queue);
    return kind;
  }

  /**
   * Makes `queue` an error queue. Rows already sent to that name as a work
   * queue move with it, so nothing is stranded in the wrong table.
   */
  ensureErrorQueue(queue: string): void {
    if (this.kindOf(queue) === 'error') return;
    this.#registerError.run(queue);
    this.#moveToErrors.run(queue);
    this.#deleteQueue.run(queue);
    this.#rememberErrorQueue(queue);
  }

  /** Remembers that `queue` is an error queue: at once outside a transaction, at its commit inside one. */
  #rememberErrorQueue(queue: string): void {
    (this.db.inTransaction ? this.#uncommittedErrorQueues : this.#errorQueues).add(queue);
  }

  /** Puts a message on `queue` of the given kind, due at `visibleAt`. */
  insert(kind: QueueKind, queue: string, id: string, body: Buffer, headers: string, visibleAt: number, now: number): void {
    if (kind === 'queue') {
      this.#insertMessage.run(queue, id, body, headers, visibleAt, now);
      return;
    }
    const f = failureColumns(headers);
    this.#insertError.run(queue, id, body, headers, visibleAt, now, f.originalQueue, f.failedAt, f.reason, f.errorName);
  }

  /**
   * Claims up to `limit` rows of `queue` that are due at `now`, in due
   * order, under a fresh lease token until `leaseUntil`. The caller runs
   * this inside a write transaction.
   */
  claimRows(kind: QueueKind, queue: string, now: number, leaseUntil: number, limit: number): Claim {
    const t = this.#tables[kind];
    const raw = t.select.all(queue, now, limit);
    if (raw.length === 0) return NOTHING_CLAIMED;
    const token = this.#nextToken.get();
    if (token === undefined) throw new Error('SqliteTransport: the meta table lost its lease_token row');
    const { changes } = t.claim.run(leaseUntil, token, queue, now, limit);
    if (changes !== raw.length) throw new Error(`SqliteTransport: claimed ${changes} rows but selected ${raw.length}`);
    const rows: ClaimedRow[] = new Array(raw.length);
    for (let i = 0; i < raw.length; i++) {
      const r = raw[i]!;
      rows[i] = { seq: r[0], id: r[1], body: r[2], headers: r[3], deliveries: r[4], dueAt: r[5] };
    }
    return { token, rows };
  }

  /** The earliest time any row of `queue` becomes claimable (due, or its lease ends), or undefined when the queue is empty. */
  nextDue(kind: QueueKind, queue: string): number | undefined {
    return this.#tables[kind].nextDue.get(queue);
  }

  /** Deletes a leased row; false when the lease no longer holds. */
  remove(kind: QueueKind, seq: number, lease: number): boolean {
    return this.#tables[kind].remove.run(seq, lease).changes === 1;
  }

  /** Makes a leased row available again at `visibleAt`; false when the lease no longer holds. */
  release(kind: QueueKind, seq: number, lease: number, visibleAt: number): boolean {
    return this.#tables[kind].release.run(visibleAt, seq, lease).changes === 1;
  }

  /**
   * Moves a leased row to `errorQueue` (already an error queue) with new
   * headers, copying the body as stored; false, and nothing changed, when
   * the lease no longer holds. The caller runs this inside a transaction.
   */
  moveToErrorQueue(kind: QueueKind, seq: number, lease: number, errorQueue: string, headers: string, now: number): boolean {
    const t = this.#tables[kind];
    const f = failureColumns(headers);
    const copied = t.copyToErrors.run(errorQueue, headers, now, now, f.originalQueue, f.failedAt, f.reason, f.errorName, seq, lease);
    if (copied.changes !== 1) return false;
    t.remove.run(seq, lease);
    return true;
  }

  /** Moves the end of a row's lease to `leaseUntil` unless it already ends later (a lease never shortens); false when the lease no longer holds. */
  extend(kind: QueueKind, seq: number, lease: number, leaseUntil: number): boolean {
    return this.#tables[kind].extend.run(leaseUntil, seq, lease).changes === 1;
  }

  /** Returns a claimed row that was never handed out, undoing its delivery count; false when the lease no longer holds. */
  unclaim(kind: QueueKind, seq: number, lease: number, dueAt: number): boolean {
    return this.#tables[kind].unclaim.run(dueAt, seq, lease).changes === 1;
  }

  /** Rewrites a leased row as its own retry: new headers, due at `visibleAt`, count reset; false when the lease no longer holds. */
  retry(kind: QueueKind, seq: number, lease: number, headers: string, visibleAt: number): boolean {
    if (kind === 'queue') return this.#retryMessage.run(headers, visibleAt, seq, lease).changes === 1;
    const f = failureColumns(headers);
    return (
      this.#retryError.run(headers, visibleAt, f.originalQueue, f.failedAt, f.reason, f.errorName, seq, lease).changes === 1
    );
  }
}

/** The failure facts in a headers JSON object; a missing or non-text value is NULL. */
function failureColumns(headersJson: string): FailureColumns {
  const headers = parseHeaders(headersJson);
  const text = (name: string) => {
    const value = headers[name];
    return typeof value === 'string' ? value : null;
  };
  return {
    originalQueue: text(HEADER.failureQueue),
    failedAt: text(HEADER.failureTime),
    reason: text(HEADER.failureReason),
    errorName: text(HEADER.failureErrorName),
  };
}
