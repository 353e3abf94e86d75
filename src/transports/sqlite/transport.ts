import { checkConsume, checkQueue } from '../../transport/arguments.js';
import type Database from 'better-sqlite3';
import type {
  ConsumeOptions,
  DeliveryListener,
  OutgoingMessage,
  Subscription,
  Transport,
  TransportCapabilities,
} from '../../transport/types.js';
import { MAX_HELD_DELAY_MS } from '../../transport/delay.js';
import { checkMessage } from './codec.js';
import { GroupCommit, type EncodedMessage } from './committer.js';
import { TransportClosedError } from './errors.js';
import { leaseOption, resolveOptions, type ResolvedSqliteOptions, type SqliteTransportOptions } from './options.js';
import { openDatabase } from './schema.js';
import { Store } from './store.js';
import { SqliteSubscription } from './subscription.js';
import { SqliteOperations } from './operations.js';
import { ThrottledError, type SendErrorKind } from '../../transport/send-errors.js';
import type { ErrorQueueOperations } from '../../transport/error-queue.js';
import type { QueueInspection } from '../../transport/inspection.js';

/** The most messages of one `sendBatch` written in one transaction. */
export const SEND_BATCH_CHUNK = 1_000;

/**
 * The embedded transport: queues, delayed retries and error queues in one
 * SQLite file, in WAL mode.
 *
 * - A delay, of a retry or a delayed send, is a due time in an indexed
 *   column, not a timer: each consumer keeps one wake-up for the earliest
 *   due time of its queue.
 * - A claimed message is leased: invisible to other consumers until it is
 *   settled or its lease ends, so a message held by a process that died
 *   comes back.
 * - Settlements are single transactions: a retry rewrites the row in place
 *   and a dead-letter moves it, so there is always exactly one copy.
 * - Writes made in the same turn of the event loop share one commit; each
 *   promise resolves after that commit.
 *
 * Several processes may share the file; see docs/sqlite.md.
 */
export class SqliteTransport implements Transport {
  readonly name = 'sqlite';
  readonly capabilities: TransportCapabilities = { nativeDelay: true, nativeDeliveryCount: true, atomicSettle: true };
  /** A delay is a due time in a column; the wake-ups that read it are timers, which hold at most 2^31-1 ms. */
  readonly limits = Object.freeze({ maxDelayMs: MAX_HELD_DELAY_MS });
  readonly #options: ResolvedSqliteOptions;
  readonly #db: Database.Database;
  readonly #store: Store;
  readonly #commit: GroupCommit;
  readonly #consumers = new Map<string, Set<SqliteSubscription>>();
  readonly #operations: SqliteOperations;
  readonly #backlog: Database.Statement<[string], number>;
  #closed = false;

  /** Opens (or creates) the store; throws if an option is invalid or the file cannot be opened. */
  constructor(options: SqliteTransportOptions) {
    this.#options = resolveOptions(options);
    this.#db = openDatabase(this.#options);
    this.#store = new Store(this.#db);
    this.#commit = new GroupCommit(this.#store, this.#options.clock, (queue, dueAt) => this.#notifyDue(queue, dueAt), this.#options.busyTimeoutMs);
    this.#backlog = this.#db.prepare<[string], number>('SELECT COUNT(*) FROM messages WHERE queue = ?').pluck(true);
    this.#operations = new SqliteOperations(this.#db, this.#options.clock, this.#options.busyTimeoutMs, (queue, dueAt) => this.#notifyDue(queue, dueAt));
  }

  /** Browse, replay and delete error-queue entries. */
  get errorQueue(): ErrorQueueOperations {
    return this.#operations;
  }

  /** Queue depths: ready, delayed and in flight. */
  get inspection(): QueueInspection {
    return this.#operations;
  }

  /** The file this transport stores its queues in. */
  get path(): string {
    return this.#options.path;
  }

  send(queue: string, message: OutgoingMessage): Promise<void> {
    try {
      checkQueue(queue, 'send');
      if (this.#closed) throw new TransportClosedError('send');
      this.#checkBacklog(queue, 1);
      return this.#commit.write({ type: 'send', queue, messages: [checkMessage(message, 'send')] });
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Puts several messages on `queue`, in order, and resolves once all are
   * committed. Up to {@link SEND_BATCH_CHUNK} messages are one transaction:
   * all of them or, on failure, none. A longer batch is written one chunk
   * per transaction, so the write lock is never held for long; when a chunk
   * fails, the chunks before it stay sent and the rest are not sent.
   */
  sendBatch(queue: string, messages: readonly OutgoingMessage[]): Promise<void> {
    try {
      checkQueue(queue, 'sendBatch');
      if (this.#closed) throw new TransportClosedError('send');
      if (!Array.isArray(messages)) throw new TypeError('sendBatch: messages must be an array');
      this.#checkBacklog(queue, messages.length);
      const encoded: EncodedMessage[] = new Array(messages.length);
      for (let i = 0; i < messages.length; i++) encoded[i] = checkMessage(messages[i]!, 'sendBatch');
      if (encoded.length <= SEND_BATCH_CHUNK) return this.#commit.write({ type: 'send', queue, messages: encoded });
      return this.#sendInChunks(queue, encoded);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  async #sendInChunks(queue: string, encoded: readonly EncodedMessage[]): Promise<void> {
    for (let i = 0; i < encoded.length; i += SEND_BATCH_CHUNK) {
      await this.#commit.write({ type: 'send', queue, messages: encoded.slice(i, i + SEND_BATCH_CHUNK) });
    }
  }

  async consume(queue: string, listener: DeliveryListener, options: ConsumeOptions): Promise<Subscription> {
    const prefetch = checkConsume(queue, listener, options, () => {
      if (this.#closed) throw new TransportClosedError('consume');
    });
    const o = this.#options;
    const leaseMs = leaseOption('consume leaseMs', options.leaseMs, o.leaseMs);
    // Consuming a queue makes it exist in the file, as sending to it does: an operator may send messages back to it.
    if (this.#store.peekKind(queue) === undefined) {
      await this.#commit.write({ type: 'register', queue });
      if (this.#closed) throw new TransportClosedError('consume');
    }
    const sub = new SqliteSubscription({
      queue,
      kind: this.#store.peekKind(queue) ?? 'queue',
      listener,
      prefetch,
      leaseMs,
      batchSize: o.batchSize,
      pollIntervalMs: o.pollIntervalMs,
      clock: o.clock,
      store: this.#store,
      commit: this.#commit,
      onClosed: (s) => this.#consumers.get(queue)?.delete(s),
    });
    let subs = this.#consumers.get(queue);
    if (subs === undefined) this.#consumers.set(queue, (subs = new Set()));
    subs.add(sub);
    sub.start();
    return sub;
  }

  /**
   * Closes every subscription (returning the rows they had claimed but not
   * handed out), commits pending writes, and closes the database. Deliveries
   * still unsettled come back after their lease.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const subs = [...this.#consumers.values()].flatMap((set) => [...set]);
    await Promise.all(subs.map((sub) => sub.close()));
    await this.#commit.close();
    this.#db.close();
  }

  /**
   * SQLite errors: a lock held too long (`SQLITE_BUSY`, `SQLITE_LOCKED`) or
   * an I/O hiccup is transient; a backlog at `maxBacklog` is throttling; a
   * full disk, an oversized message, bad input or a closed transport is
   * fatal.
   */
  classifySendError(error: unknown): SendErrorKind {
    if (error instanceof ThrottledError) return 'throttled';
    if (error instanceof TransportClosedError || error instanceof TypeError || error instanceof RangeError) return 'fatal';
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && /^SQLITE_(FULL|TOOBIG|CONSTRAINT|READONLY|CORRUPT|NOTADB|PERM|MISMATCH)/.test(code)) return 'fatal';
    return 'transient';
  }

  #checkBacklog(queue: string, adding: number): void {
    const max = this.#options.maxBacklog;
    if (max === undefined) return;
    const backlog = this.#backlog.get(queue) ?? 0;
    if (backlog + adding > max) {
      throw new ThrottledError(`queue ${queue} holds ${backlog} messages, at its maximum backlog of ${max}: consumers are behind`);
    }
  }

  #notifyDue(queue: string, dueAt: number): void {
    const subs = this.#consumers.get(queue);
    if (subs === undefined) return;
    for (const sub of subs) sub.notifyDue(dueAt);
  }
}
