import type Database from 'better-sqlite3';
import { replayHeaders } from '../../headers/replay.js';
import type { Clock } from '../../time/clock.js';
import { pageSizeOf } from '../../operations/scan-page.js';
import type { BrowseOptions, ErrorEntry, ErrorQueueOperations, ScanOptions, SendBackOptions } from '../../transport/error-queue.js';
import type { QueueDepth, QueueKind, QueueInspection } from '../../transport/inspection.js';
import { KeyedErrorQueueOperations } from '../../transport/keyed-operations.js';
import { checkWorkQueue, sendBackDestination } from '../../transport/send-back.js';
import { nextTurn, writeWhenFree } from './busy.js';
import { parseHeaders } from './codec.js';

/** The most error entries one transaction of a purge deletes. */
export const PURGE_CHUNK = 500;

interface ErrorRow {
  seq: number;
  id: string;
  body: Buffer;
  headers: string;
}

interface DepthRow {
  queue: string;
  ready: number;
  delayed: number;
  inFlight: number;
}

/**
 * The operator's side of the SQLite store: browse, replay and delete error
 * entries, and read queue depths. Reads work from any process that opens
 * the file; a replay is one transaction (insert the copy, delete the entry),
 * so it happens once however often it is asked for.
 *
 * A replay goes only to a queue that exists in the file: one the `queues`
 * table lists as a work queue, which a queue joins when a message is first
 * sent to it or a consumer first consumes it, and never leaves.
 *
 * Writes wait for another connection's lock asynchronously, up to
 * `busyTimeoutMs`, and a purge deletes in chunks of {@link PURGE_CHUNK} entries, one short transaction
 * each, so workers on the same file keep committing while it runs.
 */
export class SqliteOperations extends KeyedErrorQueueOperations implements ErrorQueueOperations, QueueInspection {
  readonly #clock: Clock;
  readonly #busyTimeoutMs: number;
  readonly #onQueued: (queue: string, dueAt: number) => void;
  readonly #count: Database.Statement<[string], number>;
  readonly #page: Database.Statement<[string, number, number], ErrorRow>;
  readonly #one: Database.Statement<[string, number], ErrorRow>;
  readonly #after: Database.Statement<[string, number, number, number], ErrorRow>;
  readonly #delete: Database.Statement<[string, number]>;
  readonly #lastSeq: Database.Statement<[string], number | null>;
  readonly #purgeChunk: Database.Statement<[string, number, number]>;
  readonly #insert: Database.Statement<[string, string, Buffer, string, number, number]>;
  readonly #kind: Database.Statement<[string], string>;
  readonly #workDepths: Database.Statement<[{ now: number }], DepthRow>;
  readonly #errorDepths: Database.Statement<[{ now: number }], DepthRow>;
  readonly #names: Database.Statement<[], { name: string; kind: string }>;
  readonly #sendBack: (queue: string, seq: number, options: SendBackOptions) => string | undefined;
  readonly #unheld: Database.Statement<[string, number, number], ErrorRow>;
  readonly #deleteRows: (queue: string, seqs: readonly number[]) => number;

  constructor(db: Database.Database, clock: Clock, busyTimeoutMs: number, onQueued: (queue: string, dueAt: number) => void) {
    super();
    this.#clock = clock;
    this.#busyTimeoutMs = busyTimeoutMs;
    this.#onQueued = onQueued;
    this.#count = db.prepare<[string], number>('SELECT COUNT(*) FROM error_messages WHERE queue = ?').pluck(true);
    this.#page = db.prepare<[string, number, number], ErrorRow>('SELECT seq, id, body, headers FROM error_messages WHERE queue = ? ORDER BY seq LIMIT ? OFFSET ?');
    this.#after = db.prepare<[string, number, number, number], ErrorRow>(
      'SELECT seq, id, body, headers FROM error_messages WHERE queue = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?',
    );
    this.#one = db.prepare<[string, number], ErrorRow>('SELECT seq, id, body, headers FROM error_messages WHERE queue = ? AND seq = ?');
    this.#delete = db.prepare<[string, number]>('DELETE FROM error_messages WHERE queue = ? AND seq = ?');
    this.#lastSeq = db.prepare<[string], number | null>('SELECT max(seq) FROM error_messages WHERE queue = ?').pluck(true);
    this.#purgeChunk = db.prepare<[string, number, number]>(
      'DELETE FROM error_messages WHERE seq IN (SELECT seq FROM error_messages WHERE queue = ? AND seq <= ? ORDER BY seq LIMIT ?)',
    );
    this.#insert = db.prepare<[string, string, Buffer, string, number, number]>(
      'INSERT INTO messages (queue, id, body, headers, visible_at, deliveries, enqueued_at) VALUES (?, ?, ?, ?, ?, 0, ?)',
    );
    this.#kind = db.prepare<[string], string>('SELECT kind FROM queues WHERE name = ?').pluck(true);
    this.#unheld = db.prepare<[string, number, number], ErrorRow>(
      'SELECT seq, id, body, headers FROM error_messages WHERE +queue = ? AND NOT (lease IS NOT NULL AND visible_at > ?) ORDER BY seq LIMIT ?',
    );
    this.#deleteRows = db.transaction((queue: string, seqs: readonly number[]) => seqs.reduce((n, seq) => n + this.#delete.run(queue, seq).changes, 0));
    const depths = (table: string) =>
      db.prepare<[{ now: number }], DepthRow>(
        `SELECT queue,
           SUM(lease IS NULL AND visible_at <= @now) + SUM(lease IS NOT NULL AND visible_at <= @now) AS ready,
           SUM(lease IS NULL AND visible_at > @now) AS delayed,
           SUM(lease IS NOT NULL AND visible_at > @now) AS inFlight
         FROM ${table} GROUP BY queue`,
      );
    this.#workDepths = depths('messages');
    this.#errorDepths = depths('error_messages');
    this.#names = db.prepare<[], { name: string; kind: string }>('SELECT name, kind FROM queues');
    this.#sendBack = db
      .transaction((queue: string, seq: number, options: SendBackOptions): string | undefined => {
        const row = this.#one.get(queue, seq);
        if (!row) return undefined;
        const headers = parseHeaders(row.headers);
        const destination = sendBackDestination(queue, row.id, headers, options);
        checkWorkQueue(destination, queueKindOf(this.#kind.get(destination)), row.id);
        const now = this.#clock.now();
        this.#insert.run(destination, row.id, row.body, JSON.stringify(replayHeaders(headers, new Date(now))), now, now);
        this.#delete.run(queue, seq);
        return destination;
      })
      .immediate;
  }

  async count(errorQueue: string): Promise<number> {
    return this.#count.get(errorQueue) ?? 0;
  }

  async browse(errorQueue: string, options: BrowseOptions = {}): Promise<ErrorEntry[]> {
    const offset = Math.max(0, Math.floor(options.offset ?? 0));
    const limit = Math.max(0, Math.floor(options.limit ?? 100));
    return this.#page.all(errorQueue, limit, offset).map((row) => entry(errorQueue, row));
  }

  /**
   * Every entry, oldest first, a page at a time by seq (keyset paging: each
   * page starts after the last seq of the one before, never skipping rows).
   * Reads up to the last entry the queue held when the scan began.
   */
  async *scan(errorQueue: string, options: ScanOptions = {}): AsyncGenerator<ErrorEntry[]> {
    const pageSize = pageSizeOf(options.pageSize);
    const last = this.#lastSeq.get(errorQueue);
    if (last === null || last === undefined) return;
    for (let after = 0; ; ) {
      const rows = this.#after.all(errorQueue, after, last, pageSize);
      if (rows.length === 0) return;
      after = rows[rows.length - 1]!.seq;
      yield rows.map((row) => entry(errorQueue, row));
      if (rows.length < pageSize) return;
    }
  }

  async get(errorQueue: string, key: string): Promise<ErrorEntry | undefined> {
    const seq = parseKey(key);
    const row = seq === undefined ? undefined : this.#one.get(errorQueue, seq);
    return row && entry(errorQueue, row);
  }

  async sendBack(errorQueue: string, key: string, options: SendBackOptions = {}): Promise<string | undefined> {
    const seq = parseKey(key);
    if (seq === undefined) return undefined;
    const destination = await writeWhenFree(this.#clock, this.#busyTimeoutMs, () => this.#sendBack(errorQueue, seq, options));
    if (destination) this.#onQueued(destination, this.#clock.now());
    return destination;
  }

  async delete(errorQueue: string, key: string): Promise<boolean> {
    const seq = parseKey(key);
    return seq !== undefined && (await writeWhenFree(this.#clock, this.#busyTimeoutMs, () => this.#delete.run(errorQueue, seq).changes)) > 0;
  }

  /** Deletes every entry in the queue when it is called; entries dead-lettered while it runs stay. */
  async purge(errorQueue: string): Promise<number> {
    const last = this.#lastSeq.get(errorQueue);
    if (last === null || last === undefined) return 0;
    let deleted = 0;
    for (;;) {
      const changes = await writeWhenFree(this.#clock, this.#busyTimeoutMs, () => this.#purgeChunk.run(errorQueue, last, PURGE_CHUNK).changes);
      deleted += changes;
      if (changes < PURGE_CHUNK) return deleted;
      await nextTurn();
    }
  }

  /**
   * Hands the oldest `limit` entries no consumer holds to `store`, then
   * deletes those rows in one transaction. See `ErrorQueueOperations.drain`.
   */
  async drain(errorQueue: string, limit: number, store: (entries: ErrorEntry[]) => Promise<void>): Promise<number> {
    if (!(Number.isSafeInteger(limit) && limit >= 1)) throw new RangeError(`drain: limit must be a whole number >= 1, got ${limit}`);
    const rows = this.#unheld.all(errorQueue, this.#clock.now(), limit);
    if (rows.length === 0) return 0;
    await store(rows.map((row) => entry(errorQueue, row)));
    const seqs = rows.map((row) => row.seq);
    await writeWhenFree(this.#clock, this.#busyTimeoutMs, () => this.#deleteRows(errorQueue, seqs));
    return rows.length;
  }

  async queueDepths(queues?: readonly string[]): Promise<QueueDepth[]> {
    const now = this.#clock.now();
    const found = new Map<string, QueueDepth>();
    for (const row of this.#workDepths.all({ now })) found.set(row.queue, depth(row, 'work'));
    for (const row of this.#errorDepths.all({ now })) found.set(row.queue, depth(row, 'error'));
    const kinds = new Map(this.#names.all().map((r) => [r.name, r.kind === 'error' ? ('error' as const) : ('work' as const)]));
    const names = queues ?? [...new Set([...kinds.keys(), ...found.keys()])].sort();
    return names.map((queue) => found.get(queue) ?? { queue, kind: kinds.get(queue) ?? 'work', ready: 0, delayed: 0, inFlight: 0 });
  }

  async queueKinds(queues: readonly string[]): Promise<ReadonlyMap<string, QueueKind>> {
    return new Map(queues.map((queue) => [queue, queueKindOf(this.#kind.get(queue))] as const));
  }
}

function entry(errorQueue: string, row: ErrorRow): ErrorEntry {
  return { key: String(row.seq), messageId: row.id, errorQueue, body: new Uint8Array(row.body), headers: parseHeaders(row.headers) };
}

function depth(row: DepthRow, kind: 'work' | 'error'): QueueDepth {
  return { queue: row.queue, kind, ready: row.ready ?? 0, delayed: row.delayed ?? 0, inFlight: row.inFlight ?? 0 };
}

/** What a queue is, by its `kind` in the `queues` table (undefined: no such queue). */
function queueKindOf(kind: string | undefined): QueueKind {
  return kind === undefined ? 'missing' : kind === 'error' ? 'error' : 'work';
}

function parseKey(key: string): number | undefined {
  return /^\d{1,15}$/.test(key) ? Number(key) : undefined;
}
