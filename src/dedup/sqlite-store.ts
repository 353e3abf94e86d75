import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { systemClock, type Clock } from '../time/clock.js';
import { SYNC_BUSY_WAIT_MS, writeWhenFree } from '../transports/sqlite/busy.js';
import type { DedupClaim, DeduplicationStore } from './types.js';

/** Options of {@link SqliteDeduplicationStore}. */
export interface SqliteDeduplicationStoreOptions {
  /** The SQLite file; may be the transport's own file. Required. */
  path: string;
  /** How long a handled id is remembered. Default 24 h. */
  windowMs?: number;
  /**
   * How long a write waits for a lock held by another process before it
   * fails, in milliseconds. The wait does not block the event loop: SQLite
   * waits at most 10 ms at a time and the write is tried again
   * asynchronously. Default 5 000 ms.
   */
  busyTimeoutMs?: number;
  /** Paces the waits for a locked file. Default the system clock. */
  clock?: Clock;
}

/** Begins, by every process on the file, between two sweeps of expired rows. */
const SWEEP_INTERVAL = 1_000;

/**
 * The most expired rows one sweep deletes: twice the rows the begins since
 * the last sweep can have added, so sweeps catch up with a backlog while
 * each holds the write lock briefly.
 */
const SWEEP_LIMIT = 2 * SWEEP_INTERVAL;

/**
 * Handled message ids in a SQLite table (`redeliver_dedup`), shared by every
 * process that opens the same file, with any transport: a RabbitMQ consumer
 * can keep its ids in a local SQLite file. Each claim carries a random token
 * (fencing). The begins are counted in the file (`redeliver_dedup_meta`), so
 * every 1 000 begins, by whichever processes, the one that makes the count
 * deletes up to 2 000 ids older than the window and claims that expired,
 * through an index on (handled, at): short-lived processes prune too.
 */
export class SqliteDeduplicationStore implements DeduplicationStore {
  readonly #db: Database.Database;
  readonly #windowMs: number;
  readonly #busyTimeoutMs: number;
  readonly #clock: Clock;
  readonly #begin: (id: string, now: number, leaseMs: number, token: string) => { claim: DedupClaim; sweep: boolean };
  readonly #complete: Database.Statement;
  readonly #abandon: Database.Statement;
  readonly #prune: Database.Statement<[number, number, number]>;

  constructor(options: SqliteDeduplicationStoreOptions) {
    this.#windowMs = options.windowMs ?? 24 * 3600_000;
    this.#busyTimeoutMs = Math.floor(options.busyTimeoutMs ?? 5_000);
    this.#clock = options.clock ?? systemClock;
    this.#db = new Database(options.path);
    this.#db.pragma('journal_mode = WAL');
    // Creating the table waits synchronously for the lock, once, when the store opens.
    this.#db.pragma(`busy_timeout = ${this.#busyTimeoutMs}`);
    this.#db.exec(`CREATE TABLE IF NOT EXISTS redeliver_dedup (
      id TEXT PRIMARY KEY,
      handled INTEGER NOT NULL,
      at INTEGER NOT NULL
    ) WITHOUT ROWID`);
    const columns = this.#db.prepare<[], { name: string }>('PRAGMA table_info(redeliver_dedup)').all();
    if (!columns.some((c) => c.name === 'token')) this.#db.exec("ALTER TABLE redeliver_dedup ADD COLUMN token TEXT NOT NULL DEFAULT ''");
    this.#db.exec('CREATE INDEX IF NOT EXISTS redeliver_dedup_expiry ON redeliver_dedup (handled, at)');
    this.#db.exec(`CREATE TABLE IF NOT EXISTS redeliver_dedup_meta (
      key TEXT PRIMARY KEY,
      value INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO redeliver_dedup_meta (key, value) VALUES ('begins_since_sweep', 0)`);
    const find = this.#db.prepare<[string], { handled: number; at: number }>('SELECT handled, at FROM redeliver_dedup WHERE id = ?');
    const claim = this.#db.prepare(
      'INSERT INTO redeliver_dedup (id, handled, at, token) VALUES (?, 0, ?, ?) ON CONFLICT(id) DO UPDATE SET handled = 0, at = excluded.at, token = excluded.token',
    );
    const countBegin = this.#db
      .prepare<[number], number>(
        `UPDATE redeliver_dedup_meta SET value = (value + 1) % ? WHERE key = 'begins_since_sweep' RETURNING value`,
      )
      .pluck(true);
    const decide = (id: string, now: number, leaseMs: number, token: string): DedupClaim => {
      const row = find.get(id);
      if (row?.handled === 1 && row.at >= now - this.#windowMs) return { outcome: 'duplicate' };
      if (row?.handled === 0 && row.at > now) return { outcome: 'busy' };
      claim.run(id, now + leaseMs, token);
      return { outcome: 'claimed', token };
    };
    this.#begin = this.#db.transaction((id: string, now: number, leaseMs: number, token: string) => ({
      claim: decide(id, now, leaseMs, token),
      sweep: countBegin.get(SWEEP_INTERVAL) === 0,
    })).immediate;
    this.#complete = this.#db.prepare(
      "INSERT INTO redeliver_dedup (id, handled, at, token) VALUES (?, 1, ?, '') ON CONFLICT(id) DO UPDATE SET handled = 1, at = excluded.at, token = ''",
    );
    this.#abandon = this.#db.prepare('DELETE FROM redeliver_dedup WHERE id = ? AND handled = 0 AND token = ?');
    this.#prune = this.#db.prepare(
      `DELETE FROM redeliver_dedup WHERE id IN
         (SELECT id FROM redeliver_dedup WHERE (handled = 1 AND at < ?) OR (handled = 0 AND at <= ?) LIMIT ?)`,
    );
    this.#db.pragma(`busy_timeout = ${Math.min(this.#busyTimeoutMs, SYNC_BUSY_WAIT_MS)}`);
  }

  async begin(id: string, now: number, leaseMs: number): Promise<DedupClaim> {
    const { claim, sweep } = await this.#write(() => this.#begin(id, now, leaseMs, randomUUID()));
    if (sweep) await this.#write(() => this.#prune.run(now - this.#windowMs, now, SWEEP_LIMIT));
    return claim;
  }

  async complete(id: string, _token: string, now: number): Promise<void> {
    await this.#write(() => this.#complete.run(id, now));
  }

  async abandon(id: string, token: string): Promise<void> {
    await this.#write(() => this.#abandon.run(id, token));
  }

  #write<T>(write: () => T): Promise<T> {
    return writeWhenFree(this.#clock, this.#busyTimeoutMs, write);
  }

  close(): void {
    this.#db.close();
  }
}
