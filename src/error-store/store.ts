/**
 * The error store: every error-queue entry of every broker, ingested into
 * one SQLite file, where operators search, chart, retry and delete them
 * without reading a broker's queue again. See docs/error-store.md.
 */
import type Database from 'better-sqlite3';
import { HEADER } from '../headers/names.js';
import { entryKeyFromHeaders } from '../operations/entry-key.js';
import { signatureOf, type FailureSignature } from '../operations/signature.js';
import { systemClock, type Clock } from '../time/clock.js';
import { nextTurn, SYNC_BUSY_WAIT_MS, writeWhenFree } from '../transports/sqlite/busy.js';
import type { Headers } from '../transport/types.js';
import { checkFilter, filterSql, type EntryFilter, type EntrySort } from './filter.js';
import { openStoreDatabase } from './schema.js';
import { TextIndexCatchUp, TextIndexer } from './text-index.js';
import { silentLogger, type Logger } from '../logger.js';
import type { EntryStatus, FailureRate, IngestEntry, IngestResult, RetryOutcome, StoredEntry, StoredEntryDetail, StoredGroup } from './types.js';
import { preparePrivateFile } from '../util/private-file.js';

/** Options of {@link ErrorStore.open}. */
export interface ErrorStoreOptions {
  /** The source of time. Default the system clock. */
  readonly clock?: Clock;
  /** How long a write waits for another process's lock before failing with `DatabaseBusyError`, ms. Default 5000. */
  readonly busyTimeoutMs?: number;
  /**
   * Whether this store brings the full-text index up to date in the
   * background (text-index.ts): from opening while entries wait to be
   * indexed, and after each ingest. Search finds every entry either way.
   * Default true.
   */
  readonly indexTextInBackground?: boolean;
  /** Quiet time after the last ingest before the full-text index catches up, ms. Default 200. */
  readonly textIndexIdleMs?: number;
  /** While entries keep arriving, the full-text index catches up one step at least this often, ms. Default 2000. */
  readonly textIndexMaxWaitMs?: number;
  /** Entries the full-text index takes in per step (one short transaction). Default 500. */
  readonly textIndexRowsPerStep?: number;
  /** Where a failed background step of the full-text index is logged (the next step tries again). Default silent. */
  readonly logger?: Logger;
}

/** A page of entries. */
export interface EntryPage {
  readonly entries: StoredEntry[];
  /** Pass as `after` for the next page; absent on the last page. */
  readonly next?: string;
}

/** Options of {@link ErrorStore.search}. */
export interface SearchOptions {
  /** Default `failed-desc`. */
  readonly sort?: EntrySort;
  /** Entries per page, 1 to 1000. Default 50. */
  readonly limit?: number;
  /** The `next` of the previous page. */
  readonly after?: string;
}

/** Options of {@link ErrorStore.failureRate}. */
export interface FailureRateOptions {
  /** Start of the range, epoch ms. Default an hour before `until`. */
  readonly since?: number;
  /** End of the range, epoch ms. Default now. */
  readonly until?: number;
  /** Width of a bucket, ms, at least 1000; the range holds at most 1440 buckets. Default 60 000 (a minute). */
  readonly bucketMs?: number;
  /** Which entries count. Default: every status (a failure counts even after it was retried). */
  readonly filter?: EntryFilter;
  /** Groups returned at most, largest first. Default 10. */
  readonly groups?: number;
}

/** How a sent-back entry was recorded: who, where. */
export interface RetryRecord {
  /** Where the copy went. */
  readonly queue: string;
  /** Who sent it (an operator's name, `cli`, `dashboard`). */
  readonly by: string;
}

/** One entry as {@link ErrorStore.export} writes it. */
export interface ExportedEntry {
  readonly key: string;
  readonly messageId: string;
  readonly errorQueue: string;
  /** The failure signature id. */
  readonly signature: string;
  /** Epoch ms. */
  readonly failedAt: number;
  readonly status: EntryStatus;
  readonly headers: Readonly<Headers>;
  readonly body: Uint8Array;
}

interface EntryRow {
  seq: number;
  key: string;
  error_queue: string;
  message_id: string;
  original_queue: string;
  endpoint: string;
  host: string;
  reason: string;
  error_name: string;
  message: string;
  top_frame: string;
  signature: string;
  failed_at: number;
  ingested_at: number;
  replay_count: number;
  status: EntryStatus;
  retried_count: number;
  last_retried_at: number | null;
  last_retried_by: string | null;
  retried_to: string | null;
  outcome: RetryOutcome | null;
  outcome_at: number | null;
  version: number;
}

interface DetailRow extends EntryRow {
  deleted_at: number | null;
  deleted_by: string | null;
  headers: string;
  /** The body as hex: better-sqlite3 makes a string far faster than a Buffer, which matters when exporting 100,000 entries. */
  body_hex: string;
}

const SUMMARY_COLUMNS = `seq, key, error_queue, message_id, original_queue, endpoint, host, reason, error_name, message, top_frame, signature,
  failed_at, ingested_at, replay_count, status, retried_count, last_retried_at, last_retried_by, retried_to, outcome, outcome_at, version`;

const DETAIL_COLUMNS = `${SUMMARY_COLUMNS}, deleted_at, deleted_by, headers, hex(body) AS body_hex`;

/** Rows one transaction of a bulk change touches at most, so workers on the same file keep committing. */
export const CHANGE_CHUNK = 1_000;

/** The largest page of {@link ErrorStore.search}. */
export const MAX_PAGE = 1_000;

/**
 * The error store on one SQLite file. Any number of processes may open the
 * same file: ingesters, the CLI, the dashboard. Reads never block writers
 * (WAL); writes wait for each other asynchronously, up to `busyTimeoutMs`.
 */
export class ErrorStore {
  /** The file. */
  readonly path: string;
  readonly #db: Database.Database;
  readonly #clock: Clock;
  readonly #busyTimeoutMs: number;
  readonly #insert: Database.Statement<[InsertParams]>;
  readonly #failedAgain: Database.Statement<[number, number, string]>;
  readonly #handled: Database.Statement<[number, number, string]>;
  readonly #bump: Database.Statement<[], number>;
  readonly #textIndex: TextIndexCatchUp | undefined;
  readonly #textIndexer: TextIndexer;
  readonly #closed = { value: false };

  private constructor(path: string, options: ErrorStoreOptions) {
    this.path = path;
    this.#clock = options.clock ?? systemClock;
    this.#busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
    if (!(Number.isSafeInteger(this.#busyTimeoutMs) && this.#busyTimeoutMs >= 0)) {
      throw new RangeError(`ErrorStore: busyTimeoutMs must be a whole number >= 0, got ${options.busyTimeoutMs}`);
    }
    const rowsPerStep = wholeOption('textIndexRowsPerStep', options.textIndexRowsPerStep ?? 500, 1, 100_000);
    const idleMs = wholeOption('textIndexIdleMs', options.textIndexIdleMs ?? 200, 0, 3_600_000);
    const maxWaitMs = wholeOption('textIndexMaxWaitMs', options.textIndexMaxWaitMs ?? 2_000, 0, 3_600_000);
    const db = (this.#db = openStoreDatabase(path, SYNC_BUSY_WAIT_MS));
    this.#insert = db.prepare<[InsertParams]>(
      `INSERT INTO entries (key, error_queue, message_id, original_queue, endpoint, host, reason, error_name, message, top_frame, signature,
         failed_at, ingested_at, replay_count, headers, body, status, version)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'failed', ?)
       ON CONFLICT (key) DO NOTHING`,
    );
    this.#failedAgain = db.prepare(
      `UPDATE entries SET outcome = 'failed-again', outcome_at = ?, version = ?
       WHERE message_id = ? AND status IN ('retrying', 'retried', 'replaced') AND outcome IS NULL`,
    );
    this.#handled = db.prepare(
      `UPDATE entries SET outcome = 'handled', outcome_at = ?, version = ?
       WHERE message_id = ? AND status IN ('retrying', 'retried', 'replaced') AND outcome IS NULL`,
    );
    this.#bump = db.prepare<[], number>(`UPDATE meta SET value = value + 1 WHERE key = 'version' RETURNING value`).pluck(true);
    this.#textIndexer = new TextIndexer(db, this.#clock, this.#busyTimeoutMs, rowsPerStep);
    if (options.indexTextInBackground ?? true) {
      const logger = options.logger ?? silentLogger;
      this.#textIndex = new TextIndexCatchUp({
        indexer: this.#textIndexer,
        clock: this.#clock,
        idleMs,
        maxWaitMs,
        onError: (error) => logger.warn({ err: error, store: path }, 'error store: the full-text index could not catch up this time; trying again'),
      });
      if (this.textIndexBehind()) this.#textIndex.start();
    }
  }

  /**
   * Opens (creating if needed, with mode 0600) the error store at `path`.
   * Refuses a SQLite file that holds something else, and a symbolic link.
   */
  static open(path: string, options: ErrorStoreOptions = {}): ErrorStore {
    if (typeof path !== 'string' || path === '') throw new RangeError('ErrorStore: path must name a file');
    if (path !== ':memory:') preparePrivateFile(path);
    return new ErrorStore(path, options);
  }

  /**
   * Stores entries in one transaction; an entry whose key the store has is
   * skipped (counted as a duplicate). An entry that carries
   * `redeliver-replay-count` was sent back before: earlier sent-back entries
   * of the same message id are marked `failed-again`. Resolves once the
   * transaction is committed to disk: only then may the copies be removed
   * from their broker.
   */
  async ingest(entries: readonly IngestEntry[]): Promise<IngestResult> {
    this.#open();
    if (entries.length === 0) return { stored: 0, duplicates: 0, failedAgain: 0 };
    const now = this.#clock.now();
    const rows = entries.map((entry) => rowOf(entry, now));
    return writeWhenFree(this.#clock, this.#busyTimeoutMs, () =>
      this.#db.transaction(() => {
        const version = this.#bump.get()!;
        let stored = 0;
        let failedAgain = 0;
        for (const row of rows) {
          row[16] = version;
          if (this.#insert.run(row).changes === 0) continue;
          stored++;
          const replayCount = row[13];
          if (replayCount > 0) failedAgain += this.#failedAgain.run(now, version, row[2]).changes;
        }
        return { stored, duplicates: rows.length - stored, failedAgain };
      }).immediate(),
    ).then((result) => {
      if (result.stored > 0) this.#textIndex?.written();
      return result;
    });
  }

  /** Whether entries wait to be taken into the full-text index (search finds them meanwhile, by reading them). */
  textIndexBehind(): boolean {
    this.#open();
    return this.#textIndexer.behind();
  }

  /**
   * Takes every entry not yet in the full-text index into it now, a step
   * (`textIndexRowsPerStep` entries, one transaction) at a time, yielding
   * between steps; what the background catch-up does without waiting for a
   * quiet moment. Resolves the entries indexed.
   */
  async indexText(): Promise<number> {
    this.#open();
    let total = 0;
    for (;;) {
      const indexed = await this.#textIndexer.step();
      total += indexed;
      if (indexed < this.#textIndexer.rowsPerStep) return total;
      await nextTurn();
    }
  }

  /** Marks the sent-back entries of these message ids `handled` (their handlers succeeded). Resolves how many entries changed. */
  async recordHandled(messageIds: readonly string[]): Promise<number> {
    this.#open();
    if (messageIds.length === 0) return 0;
    const now = this.#clock.now();
    return writeWhenFree(this.#clock, this.#busyTimeoutMs, () =>
      this.#db.transaction(() => {
        const version = this.#bump.get()!;
        let changed = 0;
        for (const id of messageIds) changed += this.#handled.run(now, version, id).changes;
        return changed;
      }).immediate(),
    );
  }

  /** Entries the filter selects. */
  count(filter: EntryFilter = {}): number {
    this.#open();
    checkFilter(filter);
    const { where, params } = filterSql(filter);
    return this.#db.prepare<[Record<string, string | number>], number>(`SELECT count(*) FROM entries WHERE ${where}`).pluck(true).get(params)!;
  }

  /** The highest `seq` so far (0 when empty): a bulk action's snapshot cut-off. */
  lastSeq(): number {
    this.#open();
    return this.#db.prepare<[], number>('SELECT coalesce(max(seq), 0) FROM entries').pluck(true).get()!;
  }

  /** The store's change counter: it grows with every write. */
  version(): number {
    this.#open();
    return this.#db.prepare<[], number>(`SELECT value FROM meta WHERE key = 'version'`).pluck(true).get()!;
  }

  /** One page of the entries the filter selects, without headers and bodies. Pages by keyset, so page 1,000 costs what page 1 does. */
  search(filter: EntryFilter = {}, options: SearchOptions = {}): EntryPage {
    this.#open();
    checkFilter(filter);
    const sort = options.sort ?? 'failed-desc';
    if (sort !== 'failed-desc' && sort !== 'failed-asc') throw new RangeError(`sort must be failed-desc or failed-asc, got ${String(sort).slice(0, 40)}`);
    const limit = options.limit ?? 50;
    if (!(Number.isSafeInteger(limit) && limit >= 1 && limit <= MAX_PAGE)) throw new RangeError(`limit must be a whole number from 1 to ${MAX_PAGE}`);
    const { where, params } = filterSql(filter);
    const conditions = [where];
    const all: Record<string, string | number> = { ...params, limit: limit + 1 };
    if (options.after !== undefined) {
      const [failedAt, seq] = parseCursor(options.after);
      conditions.push(sort === 'failed-desc' ? '(failed_at, seq) < (@cursorAt, @cursorSeq)' : '(failed_at, seq) > (@cursorAt, @cursorSeq)');
      all['cursorAt'] = failedAt;
      all['cursorSeq'] = seq;
    }
    const order = sort === 'failed-desc' ? 'failed_at DESC, seq DESC' : 'failed_at ASC, seq ASC';
    const rows = this.#db
      .prepare<[Record<string, string | number>], EntryRow>(`SELECT ${SUMMARY_COLUMNS} FROM entries WHERE ${conditions.join(' AND ')} ORDER BY ${order} LIMIT @limit`)
      .all(all);
    const more = rows.length > limit;
    const entries = rows.slice(0, limit).map(entryOf);
    const last = entries.at(-1);
    return more && last ? { entries, next: `${last.failedAt}.${last.seq}` } : { entries };
  }

  /** The entries of one message id (each time it reached an error queue), oldest first, at most `limit`, without headers or bodies. */
  occurrences(messageId: string, limit: number): StoredEntry[] {
    this.#open();
    return this.#db
      .prepare<[string, number], EntryRow>(`SELECT ${SUMMARY_COLUMNS} FROM entries WHERE message_id = ? ORDER BY seq LIMIT ?`)
      .all(messageId, limit)
      .map(entryOf);
  }

  /** One entry with its headers and body, or undefined. */
  get(key: string): StoredEntryDetail | undefined {
    this.#open();
    if (typeof key !== 'string') return undefined;
    const row = this.#db.prepare<[string], DetailRow>(`SELECT ${DETAIL_COLUMNS} FROM entries WHERE key = ?`).get(key);
    return row && detailOf(row);
  }

  /**
   * The failure groups among the entries the filter selects, largest first,
   * with each signature's retry history across every status.
   */
  groups(filter: EntryFilter = {}): StoredGroup[] {
    this.#open();
    checkFilter(filter);
    const { where, params } = filterSql(filter);
    // Counts from the index alone; each group's description from one of its rows.
    const rows = this.#db
      .prepare<[Record<string, string | number>], { signature: string; count: number; first: number; last: number }>(
        `SELECT signature, count(*) AS count, min(failed_at) AS first, max(failed_at) AS last
         FROM entries WHERE ${where} GROUP BY signature ORDER BY count DESC, signature`,
      )
      .all(params);
    const describe = this.#db.prepare<[string], { reason: string; error_name: string; norm: string; top_frame: string }>(
      `SELECT reason, error_name, message AS norm, top_frame FROM entries
       WHERE status IN ('failed', 'retrying', 'retried', 'replaced', 'deleted') AND signature = ? LIMIT 1`,
    );
    const history = new Map(
      this.#db
        .prepare<[], { signature: string; retried: number; handled: number; again: number }>(
          `SELECT signature, count(*) AS retried, sum(outcome = 'handled') AS handled, sum(outcome = 'failed-again') AS again
           FROM entries INDEXED BY entries_retried WHERE retried_count > 0 GROUP BY signature`,
        )
        .all()
        .map((r) => [r.signature, r]),
    );
    return rows.map((r) => {
      const h = history.get(r.signature);
      const d = describe.get(r.signature)!;
      return {
        signature: signatureFromRow(r.signature, d.reason, d.error_name, d.norm, d.top_frame),
        count: r.count,
        firstFailedAt: r.first,
        lastFailedAt: r.last,
        retried: h?.retried ?? 0,
        handledAfterRetry: h?.handled ?? 0,
        failedAgainAfterRetry: h?.again ?? 0,
      };
    });
  }

  /** Failures per bucket (a minute by default) per group over a range (the last hour by default), largest groups first. */
  failureRate(options: FailureRateOptions = {}): FailureRate {
    this.#open();
    const until = options.until ?? this.#clock.now();
    const since = options.since ?? until - 3_600_000;
    const bucketMs = options.bucketMs ?? 60_000;
    const top = options.groups ?? 10;
    if (!(Number.isSafeInteger(until) && Number.isSafeInteger(since) && since < until)) throw new RangeError('failureRate: since must be before until');
    if (!(Number.isSafeInteger(bucketMs) && bucketMs >= 1_000)) throw new RangeError('failureRate: bucketMs must be a whole number >= 1000');
    const buckets = Math.ceil((until - since) / bucketMs);
    if (buckets > 1_440) throw new RangeError(`failureRate: ${buckets} buckets asked for; at most 1440 (widen bucketMs or narrow the range)`);
    if (!(Number.isSafeInteger(top) && top >= 1 && top <= 100)) throw new RangeError('failureRate: groups must be a whole number from 1 to 100');
    const filter: EntryFilter = { status: 'any', ...options.filter, since, until };
    checkFilter(filter);
    const sql = filterSql(filter);
    // Every status listed, so the (status, failed_at) index serves the time range.
    const where = filter.status === 'any' ? `status IN ('failed', 'retrying', 'retried', 'replaced', 'deleted') AND ${sql.where}` : sql.where;
    const params = sql.params;
    const rows = this.#db
      .prepare<[Record<string, string | number>], { signature: string; bucket: number; count: number }>(
        `SELECT signature, (failed_at - @since) / @bucketMs AS bucket, count(*) AS count FROM entries WHERE ${where} GROUP BY signature, bucket`,
      )
      .all({ ...params, bucketMs });
    const bySignature = new Map<string, number[]>();
    for (const row of rows) {
      let counts = bySignature.get(row.signature);
      if (!counts) bySignature.set(row.signature, (counts = new Array<number>(buckets).fill(0)));
      counts[Math.min(buckets - 1, Math.floor(row.bucket))]! += row.count;
    }
    const series = [...bySignature]
      .map(([signature, counts]) => ({ signature, total: counts.reduce((a, b) => a + b, 0), counts }))
      .sort((a, b) => b.total - a.total || a.signature.localeCompare(b.signature))
      .slice(0, top);
    return { bucketMs, since, until, series };
  }

  /**
   * Entries changed after `cursor` (ingested, retried, deleted, outcome
   * seen), oldest change first, at most `limit` (default 200, at most 1000),
   * and the cursor for the next call: what a live view polls. Without a
   * cursor, starts from now (no entries, just the cursor). A row that
   * changes again later is listed again then.
   */
  changes(cursor?: string, limit = 200): { cursor: string; entries: StoredEntry[]; more: boolean } {
    this.#open();
    if (!(Number.isSafeInteger(limit) && limit >= 1 && limit <= MAX_PAGE)) throw new RangeError(`changes: limit must be from 1 to ${MAX_PAGE}`);
    if (cursor === undefined) return { cursor: `${this.version()}.${Number.MAX_SAFE_INTEGER}`, entries: [], more: false };
    const [version, seq] = parseCursor(cursor, 'cursor');
    const rows = this.#db
      .prepare<[number, number, number], EntryRow>(`SELECT ${SUMMARY_COLUMNS} FROM entries WHERE (version, seq) > (?, ?) ORDER BY version, seq LIMIT ?`)
      .all(version, seq, limit + 1);
    const more = rows.length > limit;
    const entries = rows.slice(0, limit).map(entryOf);
    const last = entries.at(-1);
    return { cursor: last ? `${last.version}.${last.seq}` : cursor, entries, more };
  }

  /**
   * Every entry the filter selects, with headers and bodies, oldest failure
   * first, read a page at a time (memory stays bounded). Lean rows: what an
   * export writes, without the retry history.
   */
  *export(filter: EntryFilter = {}, pageSize = 500): Generator<ExportedEntry> {
    this.#open();
    checkFilter(filter);
    const { where, params } = filterSql(filter);
    const page = this.#db
      .prepare<[Record<string, string | number>], [number, number, string, string, string, string, EntryStatus, string, string]>(
        `SELECT seq, failed_at, key, message_id, error_queue, signature, status, headers, hex(body) FROM entries
         WHERE ${where} AND (failed_at, seq) > (@cursorAt, @cursorSeq) ORDER BY failed_at, seq LIMIT @limit`,
      )
      .raw(true);
    let cursor = { cursorAt: -1, cursorSeq: -1 };
    for (;;) {
      const rows = page.all({ ...params, ...cursor, limit: pageSize });
      for (const [, failedAt, key, messageId, errorQueue, signature, status, headers, hex] of rows) {
        const body = Buffer.from(hex, 'hex');
        yield { key, messageId, errorQueue, signature, failedAt, status, headers: JSON.parse(headers) as Headers, body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength) };
      }
      if (rows.length < pageSize) return;
      const last = rows.at(-1)!;
      cursor = { cursorAt: last[1], cursorSeq: last[0] };
    }
  }

  /**
   * Marks the entries the filter selects (status `failed` only) `deleted`
   * by `by` (`cli:<user>`, `dashboard`), now, dropping their bodies and
   * keeping the failure story; in chunks, so other writers keep going.
   * Resolves how many were deleted.
   */
  async delete(filter: EntryFilter, by: string): Promise<number> {
    this.#open();
    checkFilter(filter);
    checkActor(by);
    const { where, params } = filterSql({ ...filter, status: 'failed' });
    const chunk = this.#db.prepare<[Record<string, string | number>]>(
      `UPDATE entries SET status = 'deleted', body = x'', deleted_at = @now, deleted_by = @by, version = @version
       WHERE seq IN (SELECT seq FROM entries WHERE ${where} LIMIT ${CHANGE_CHUNK})`,
    );
    let deleted = 0;
    for (;;) {
      const changed = await writeWhenFree(this.#clock, this.#busyTimeoutMs, () =>
        this.#db.transaction(() => chunk.run({ ...params, now: this.#clock.now(), by, version: this.#bump.get()! }).changes).immediate(),
      );
      deleted += changed;
      if (changed < CHANGE_CHUNK) return deleted;
      await nextTurn();
    }
  }

  /** Deletes one entry (status `failed`), recording `by` and now like {@link delete}; resolves whether it was there to delete. */
  async deleteOne(key: string, by: string): Promise<boolean> {
    this.#open();
    checkActor(by);
    const statement = this.#db.prepare(
      `UPDATE entries SET status = 'deleted', body = x'', deleted_at = @now, deleted_by = @by, version = @version WHERE key = @key AND status = 'failed'`,
    );
    return (
      (await writeWhenFree(this.#clock, this.#busyTimeoutMs, () =>
        this.#db.transaction(() => statement.run({ key, now: this.#clock.now(), by, version: this.#bump.get()! }).changes).immediate(),
      )) === 1
    );
  }

  /**
   * Claims entries for sending back: each key whose entry is `failed`, or
   * `retrying` under a claim that ran out, becomes `retrying` under
   * `claimant` until `untilMs`. Resolves the keys claimed, in the order
   * given. Two claimants never hold one entry at once, so two operators
   * retrying the same group send each entry once.
   */
  async claim(keys: readonly string[], claimant: string, untilMs: number): Promise<string[]> {
    this.#open();
    if (keys.length === 0) return [];
    return this.write((version) => this.claimWithin(keys, claimant, untilMs, version));
  }

  /** {@link claim} inside a transaction of {@link write}, for the store's own modules that claim together with their own rows. */
  claimWithin(keys: readonly string[], claimant: string, untilMs: number, version: number): string[] {
    this.#open();
    const now = this.#clock.now();
    const statement = this.#db.prepare(
      `UPDATE entries SET status = 'retrying', claim = @claimant, claim_until = @until, version = @version
       WHERE key = @key AND (status = 'failed' OR (status = 'retrying' AND (claim = @claimant OR claim_until <= @now)))`,
    );
    return keys.filter((key) => statement.run({ key, claimant, until: untilMs, now, version }).changes === 1);
  }

  /** Records that a claimed entry was sent back (the broker confirmed the copy). Resolves false when the claim was lost meanwhile. */
  async markRetried(key: string, claimant: string, record: RetryRecord, status: 'retried' | 'replaced' = 'retried'): Promise<boolean> {
    return (await this.markRetriedMany([key], claimant, record, status)).length === 1;
  }

  /**
   * Records that claimed entries were sent back, in one transaction;
   * `within` runs inside it with the keys marked, so a caller's own rows
   * (a job's progress, an edit) commit together with the entries. Resolves
   * the keys marked: a key whose claim was lost meanwhile is left out. An
   * outcome already seen while the entry was `retrying` (a fast consumer) is kept.
   */
  async markRetriedMany(
    keys: readonly string[],
    claimant: string,
    record: RetryRecord,
    status: 'retried' | 'replaced' = 'retried',
    within?: (marked: readonly string[]) => void,
  ): Promise<string[]> {
    this.#open();
    const now = this.#clock.now();
    const statement = this.#db.prepare(
      `UPDATE entries SET status = @status, retried_count = retried_count + 1, last_retried_at = @now, last_retried_by = @by,
         retried_to = @queue, claim = NULL, claim_until = NULL, version = @version
       WHERE key = @key AND status = 'retrying' AND claim = @claimant`,
    );
    return writeWhenFree(this.#clock, this.#busyTimeoutMs, () =>
      this.#db.transaction(() => {
        const version = this.#bump.get()!;
        const marked = keys.filter((key) => statement.run({ key, claimant, now, by: record.by, queue: record.queue, status, version }).changes === 1);
        within?.(marked);
        return marked;
      }).immediate(),
    );
  }

  /** Gives a claimed entry back (`failed` again): its send-back did not happen. */
  async releaseClaim(key: string, claimant: string): Promise<void> {
    this.#open();
    await writeWhenFree(this.#clock, this.#busyTimeoutMs, () =>
      this.#db.transaction(() =>
        this.#db
          .prepare(`UPDATE entries SET status = 'failed', claim = NULL, claim_until = NULL, version = ? WHERE key = ? AND status = 'retrying' AND claim = ?`)
          .run(this.#bump.get()!, key, claimant),
      ).immediate(),
    );
  }

  /** The database, for the store's own modules (retry jobs, edits) that keep tables next to the entries. */
  get database(): Database.Database {
    this.#open();
    return this.#db;
  }

  /** Runs `write` in an immediate transaction, waiting for other writers asynchronously; `version` is the change counter for rows it changes. */
  write<T>(write: (version: number) => T): Promise<T> {
    this.#open();
    return writeWhenFree(this.#clock, this.#busyTimeoutMs, () => this.#db.transaction(() => write(this.#bump.get()!)).immediate());
  }

  /** Closes the file. */
  close(): void {
    if (this.#closed.value) return;
    this.#closed.value = true;
    this.#textIndex?.stop();
    this.#db.close();
  }

  #open(): void {
    if (this.#closed.value) throw new Error(`ErrorStore ${this.path} is closed`);
  }
}

/**
 * The parameters of the insert statement, in its column order (positional:
 * binding an array costs far less than naming 17 parameters per entry); the
 * last, the change counter, is set inside the transaction.
 */
type InsertParams = [
  key: string,
  errorQueue: string,
  messageId: string,
  originalQueue: string,
  endpoint: string,
  host: string,
  reason: string,
  errorName: string,
  message: string,
  topFrame: string,
  signature: string,
  failedAt: number,
  ingestedAt: number,
  replayCount: number,
  headers: string,
  body: Buffer,
  version: number,
];

function rowOf(entry: IngestEntry, now: number): InsertParams {
  const headers = entry.headers;
  const get = (name: string) => (Object.hasOwn(headers, name) && typeof headers[name] === 'string' ? headers[name]! : '');
  const signature = signatureOf(headers);
  const failedAt = Date.parse(get(HEADER.failureTime));
  const replayCount = Number(get(HEADER.replayCount));
  return [
    entryKeyFromHeaders(entry.messageId, headers, entry.body),
    entry.errorQueue,
    entry.messageId,
    get(HEADER.failureQueue),
    get(HEADER.failureEndpoint),
    get(HEADER.failureHost),
    signature.reason,
    signature.errorName,
    get(HEADER.failureMessage).slice(0, 4_096),
    signature.topFrame,
    signature.id,
    Number.isFinite(failedAt) ? failedAt : now,
    now,
    Number.isSafeInteger(replayCount) && replayCount > 0 ? replayCount : 0,
    JSON.stringify(headers),
    Buffer.from(entry.body.buffer, entry.body.byteOffset, entry.body.byteLength),
    0,
  ];
}

function signatureFromRow(id: string, reason: string, errorName: string, message: string, topFrame: string): FailureSignature {
  // The normalised message is what the signature hashed; recompute it from the stored message.
  return { id, reason, errorName, message: normalizeStored(id, message), topFrame };
}

/** Normalised messages by signature id: every entry of a signature has the same one, so it is computed once. */
const normalizedBySignature = new Map<string, string>();

function normalizeStored(id: string, message: string): string {
  let normalized = normalizedBySignature.get(id);
  if (normalized === undefined) {
    normalized = signatureOf({ [HEADER.failureMessage]: message }).message;
    if (normalizedBySignature.size >= 10_000) normalizedBySignature.clear();
    normalizedBySignature.set(id, normalized);
  }
  return normalized;
}

function entryOf(row: EntryRow): StoredEntry {
  return {
    key: row.key,
    seq: row.seq,
    errorQueue: row.error_queue,
    messageId: row.message_id,
    originalQueue: row.original_queue,
    endpoint: row.endpoint,
    host: row.host,
    signature: signatureFromRow(row.signature, row.reason, row.error_name, row.message, row.top_frame),
    message: row.message,
    failedAt: row.failed_at,
    ingestedAt: row.ingested_at,
    replayCount: row.replay_count,
    status: row.status,
    retriedCount: row.retried_count,
    ...(row.last_retried_at === null ? {} : { lastRetriedAt: row.last_retried_at }),
    ...(row.last_retried_by === null ? {} : { lastRetriedBy: row.last_retried_by }),
    ...(row.retried_to === null ? {} : { retriedTo: row.retried_to }),
    ...(row.outcome === null ? {} : { outcome: row.outcome }),
    ...(row.outcome_at === null ? {} : { outcomeAt: row.outcome_at }),
    version: row.version,
  };
}

function detailOf(row: DetailRow): StoredEntryDetail {
  const body = Buffer.from(row.body_hex, 'hex');
  return {
    ...entryOf(row),
    headers: JSON.parse(row.headers) as Headers,
    body: new Uint8Array(body.buffer, body.byteOffset, body.byteLength),
    ...(row.deleted_at === null ? {} : { deletedAt: row.deleted_at }),
    ...(row.deleted_by === null ? {} : { deletedBy: row.deleted_by }),
  };
}

/** Checks a whole-number option of {@link ErrorStore.open} and returns it. */
function wholeOption(name: string, value: number, min: number, max: number): number {
  if (!(Number.isSafeInteger(value) && value >= min && value <= max)) throw new RangeError(`ErrorStore: ${name} must be a whole number from ${min} to ${max}, got ${value}`);
  return value;
}

/** Throws a RangeError unless `by` names who is writing (1 to 200 characters). */
function checkActor(by: string): void {
  if (typeof by !== 'string' || by.trim() === '' || by.length > 200) throw new RangeError('by must name who is writing (1 to 200 characters)');
}

function parseCursor(cursor: string, name = 'after'): [number, number] {
  const match = typeof cursor === 'string' ? /^(\d{1,16})\.(\d{1,16})$/.exec(cursor) : null;
  if (!match) throw new RangeError(`${name} must be one an earlier call returned`);
  return [Number(match[1]), Number(match[2])];
}
