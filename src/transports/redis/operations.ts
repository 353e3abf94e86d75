/**
 * The operator's side of Redis: browse, replay and delete error-stream
 * entries, and read queue depths (`transport.errorQueue` and
 * `transport.inspection`).
 *
 * An error queue is a stream, and an entry's key is its stream id. Reading
 * a stream has no side effects, so every read here is a plain `XRANGE`:
 * nothing is held, nothing is counted as a delivery, and a pass never hides
 * an entry from anyone (`unseen` is always 0). Every change is one script:
 * a send-back adds the copy to its destination before it removes the entry,
 * atomically, so it happens once however often or concurrently it is asked
 * for. A bulk send-back moves the selected entries of each page it reads
 * {@link SEND_BACK_CHUNK} to a script, the scripts of a page sent together.
 *
 * A send-back goes only to a queue the prefix's `{p}:queues` hash lists as
 * a work queue: one a message was ever sent to, or a consumer ever consumed,
 * under that key prefix.
 *
 * Entries redeliver did not write (an `XADD` by hand) are shown with what
 * they carry and no headers, can be deleted, and are refused by a send-back
 * (see ./error-entry.ts).
 */
import { replayHeaders } from '../../headers/replay.js';
import { pageSizeOf, SCAN_PAGE_SIZE } from '../../operations/scan-page.js';
import { SendBackRefusedError } from '../../operations/send-back-destination.js';
import { systemClock, type Clock } from '../../time/clock.js';
import { failureResult } from '../../operations/bulk.js';
import type { BrowseOptions, BulkSendBackOptions, BulkSummary, EntryResult, ErrorEntry, ErrorQueueOperations, ScanOptions, SendBackOptions } from '../../transport/error-queue.js';
import { KeyedErrorQueueOperations, sendBackEachInBatches } from '../../transport/keyed-operations.js';
import type { QueueDepth, QueueInspection, QueueKind } from '../../transport/inspection.js';
import { sendBackDestination } from '../../transport/send-back.js';
import type { RedisClient } from './cluster.js';
import { encodeHeaders, MalformedEntryError, type RawEntry } from './codec.js';
import { errorEntryOf, isEntryKey, readEntryOf, type ReadEntry } from './error-entry.js';
import { GROUP, type RedisKeys } from './keys.js';
import { DELETE_ENTRY, PURGE_CHUNK, SEND_BACK, SEND_BACK_REPLY } from './scripts/error-queue.js';
import { QUEUE_DEPTHS } from './scripts/queue-depths.js';
import type { ScriptRunner } from './scripts/runner.js';
import { replicaMark, waitForReplicas, type ReplicaWait } from './replicas.js';

/** The most entries one script of a purge removes, so a purge never blocks the server for long. */
export const PURGE_CHUNK_SIZE = 500;

/** The most entries one read takes while `browse` skips to its offset. */
const SKIP_CHUNK = 1_000;

/** The most queues one depth script reads. */
const DEPTHS_CHUNK = 100;

/** The most entries one send-back script moves, so a bulk send-back never blocks the server for long. */
export const SEND_BACK_CHUNK = 100;

/** An entry ready for the send-back script: its arguments but the destination's index. */
interface Move {
  readonly index: number;
  readonly entry: ErrorEntry;
  readonly destination: string;
  readonly id: string;
  readonly messageId: string;
  readonly headers: string;
  readonly body: Uint8Array;
}

/** Error-queue operations and queue inspection on Redis, on the transport's command client. */
export class RedisOperations extends KeyedErrorQueueOperations implements ErrorQueueOperations, QueueInspection {
  readonly #client: RedisClient;
  readonly #keys: RedisKeys;
  readonly #scripts: ScriptRunner;
  readonly #clock: Clock;
  readonly #replicaWait: ReplicaWait;

  /**
   * @param clock the time written into a sent-back message's
   * `redeliver-replayed-at` header. Default the system clock.
   * @param replicaWait how many replicas must have a send-back before it
   * resolves (the transport's `waitReplicas`). Default none.
   */
  constructor(client: RedisClient, keys: RedisKeys, scripts: ScriptRunner, clock: Clock = systemClock, replicaWait: ReplicaWait = { replicas: 0, timeoutMs: 0 }) {
    super();
    this.#client = client;
    this.#keys = keys;
    this.#scripts = scripts;
    this.#clock = clock;
    this.#replicaWait = replicaWait;
  }

  /** The error stream's length. */
  count(errorQueue: string): Promise<number> {
    return this.#client.xlen(this.#keys.stream(errorQueue));
  }

  /** A page of entries, oldest first; skipping to `offset` reads the entries before it, in chunks. */
  async browse(errorQueue: string, options: BrowseOptions = {}): Promise<ErrorEntry[]> {
    const stream = this.#keys.stream(errorQueue);
    let skip = Math.max(0, Math.floor(options.offset ?? 0));
    const limit = Math.max(0, Math.floor(options.limit ?? 100));
    if (limit === 0) return [];
    let start = '-';
    while (skip > 0) {
      const count = Math.min(skip, SKIP_CHUNK);
      const skipped = await this.#client.xrangeBuffer(stream, start, '+', 'COUNT', count);
      if (skipped.length < count) return [];
      skip -= count;
      start = after(skipped);
    }
    const raw = await this.#client.xrangeBuffer(stream, start, '+', 'COUNT', limit);
    return raw.map((r) => errorEntryOf(errorQueue, r));
  }

  /**
   * Every entry, oldest first, a page at a time: each page starts after the
   * last id of the one before, up to the last entry the stream held when
   * the scan began.
   */
  async *scan(errorQueue: string, options: ScanOptions = {}): AsyncGenerator<ErrorEntry[]> {
    for await (const page of this.#scanRead(errorQueue, pageSizeOf(options.pageSize))) yield page.map((r) => r.entry);
  }

  async get(errorQueue: string, key: string): Promise<ErrorEntry | undefined> {
    const raw = await this.#read(errorQueue, key);
    return raw && errorEntryOf(errorQueue, raw);
  }

  /**
   * Reads the entry, then in one script: when it is still there and the
   * destination is a registered work queue, adds the copy (fresh retry
   * state, no inherited deliveries) to the destination's stream and removes
   * the entry. An entry redeliver did not write is refused with a
   * `MalformedEntryError` and stays.
   */
  async sendBack(errorQueue: string, key: string, options: SendBackOptions = {}): Promise<string | undefined> {
    const raw = await this.#read(errorQueue, key);
    if (raw === undefined) return undefined;
    const [result] = await this.#sendBackRead(errorQueue, [readEntryOf(errorQueue, raw)], options);
    switch (result!.outcome) {
      case 'sent':
        return result!.queue;
      case 'gone':
        return undefined;
      case 'refused':
      case 'failed':
        throw result!.error;
      default:
        throw new Error(`redis: a send-back ended ${result!.outcome}`);
    }
  }

  /**
   * Sends back the selected entries of each page as {@link sendBack} would,
   * without reading each again: the scripts check that each entry is still
   * there, and a stream never reuses an entry's id.
   */
  override sendBackEach(errorQueue: string, options: BulkSendBackOptions): Promise<BulkSummary> {
    return sendBackEachInBatches(
      this.#scanRead(errorQueue, SCAN_PAGE_SIZE),
      (read) => read.entry,
      options,
      (batch, destination) => this.#sendBackRead(errorQueue, batch, destination),
    );
  }

  async delete(errorQueue: string, key: string): Promise<boolean> {
    if (!isEntryKey(key)) return false;
    const removed = await this.#scripts.run(DELETE_ENTRY, [this.#keys.stream(errorQueue), this.#keys.of(errorQueue).leases], [key, GROUP]);
    return removed === 1;
  }

  /**
   * Removes every entry the stream held when it is called, oldest first,
   * {@link PURGE_CHUNK_SIZE} per script; entries dead-lettered while it runs stay.
   */
  async purge(errorQueue: string): Promise<number> {
    const stream = this.#keys.stream(errorQueue);
    const [last] = await this.#client.xrevrange(stream, '+', '-', 'COUNT', 1);
    if (last === undefined) return 0;
    let removed = 0;
    for (;;) {
      const chunk = Number(await this.#scripts.run(PURGE_CHUNK, [stream, this.#keys.of(errorQueue).leases], [last[0], PURGE_CHUNK_SIZE, GROUP]));
      removed += chunk;
      if (chunk < PURGE_CHUNK_SIZE) return removed;
    }
  }

  /**
   * Depths of every queue `{p}:queues` lists, by name, or of `queues`:
   * ready = stream length − pending, in flight = pending in the consumer
   * group, delayed = the delayed retries not yet moved to the stream. A
   * queue that is not registered reads as an empty work queue.
   */
  async queueDepths(queues?: readonly string[]): Promise<QueueDepth[]> {
    const kinds = await this.#client.hgetall(this.#keys.queues);
    const names = queues ?? Object.keys(kinds).sort();
    const out: QueueDepth[] = [];
    for (let i = 0; i < names.length; i += DEPTHS_CHUNK) {
      const chunk = names.slice(i, i + DEPTHS_CHUNK);
      const keys = chunk.flatMap((queue) => {
        const k = this.#keys.of(queue);
        return [k.stream, k.delayed];
      });
      const reply = (await this.#scripts.run(QUEUE_DEPTHS, keys, [GROUP])) as number[];
      chunk.forEach((queue, j) => {
        const [length, pending, delayed] = [Number(reply[3 * j]), Number(reply[3 * j + 1]), Number(reply[3 * j + 2])];
        const kind = Object.hasOwn(kinds, queue) && kinds[queue] === 'error' ? 'error' : 'work';
        out.push({ queue, kind, ready: Math.max(0, length - pending), delayed, inFlight: pending });
      });
    }
    return out;
  }

  /** Each queue's kind as `{p}:queues` records it; `missing` when it is not there. */
  async queueKinds(queues: readonly string[]): Promise<ReadonlyMap<string, QueueKind>> {
    const kinds = queues.length === 0 ? [] : await this.#client.hmget(this.#keys.queues, ...queues);
    return new Map(queues.map((queue, i) => [queue, kindOf(kinds[i])]));
  }

  /**
   * Every entry, oldest first, a page at a time: each page starts after the
   * last id of the one before, up to the last entry the stream held when
   * the read began.
   */
  async *#scanRead(errorQueue: string, pageSize: number): AsyncGenerator<ReadEntry[]> {
    const stream = this.#keys.stream(errorQueue);
    const [last] = await this.#client.xrevrange(stream, '+', '-', 'COUNT', 1);
    if (last === undefined) return;
    for (let start = '-'; ; ) {
      const raw = await this.#client.xrangeBuffer(stream, start, last[0], 'COUNT', pageSize);
      if (raw.length === 0) return;
      start = after(raw);
      yield raw.map((r) => readEntryOf(errorQueue, r));
      if (raw.length < pageSize) return;
    }
  }

  /**
   * Sends back entries read from `errorQueue`: checks each one's
   * destination here, then moves them {@link SEND_BACK_CHUNK} to a script,
   * all scripts sent at once. Resolves one result per entry, in order; the
   * entries of a script that failed (the server is over `maxmemory`) are
   * `failed` with its error, and stay.
   */
  async #sendBackRead(errorQueue: string, entries: readonly ReadEntry[], options: SendBackOptions): Promise<EntryResult[]> {
    const results: EntryResult[] = new Array<EntryResult>(entries.length);
    const moves: Move[] = [];
    const now = new Date(this.#clock.now());
    entries.forEach(({ entry, decoded }, index) => {
      if (decoded instanceof MalformedEntryError) {
        results[index] = failureResult(entry, unsendable(decoded));
        return;
      }
      try {
        const destination = sendBackDestination(errorQueue, decoded.id, decoded.headers, options);
        const headers = encodeHeaders(replayHeaders(decoded.headers, now));
        moves.push({ index, entry, destination, id: decoded.entryId, messageId: decoded.id, headers, body: decoded.body });
      } catch (error) {
        results[index] = failureResult(entry, error);
      }
    });
    const chunks: Move[][] = [];
    for (let i = 0; i < moves.length; i += SEND_BACK_CHUNK) chunks.push(moves.slice(i, i + SEND_BACK_CHUNK));
    await Promise.all(chunks.map(async (chunk) => {
      let replies: unknown[];
      try {
        replies = await this.#runSendBack(errorQueue, chunk);
      } catch (error) {
        for (const move of chunk) results[move.index] = failureResult(move.entry, error);
        return;
      }
      chunk.forEach((move, i) => (results[move.index] = resultOf(move, replies[i])));
    }));
    return results;
  }

  /** One send-back script for `moves`; resolves its reply per move, in order. */
  async #runSendBack(errorQueue: string, moves: readonly Move[]): Promise<unknown[]> {
    const destinations = [...new Set(moves.map((m) => m.destination))];
    const indexOf = new Map(destinations.map((d, j) => [d, j + 1]));
    const keys = [this.#keys.stream(errorQueue), this.#keys.queues, this.#keys.of(errorQueue).leases, ...destinations.map((d) => this.#keys.stream(d))];
    const args: (string | number | Uint8Array)[] = [GROUP, destinations.length, ...destinations];
    for (const move of moves) args.push(move.id, indexOf.get(move.destination)!, move.messageId, move.headers, move.body);
    const mark = replicaMark(this.#client, this.#keys.stream(errorQueue), this.#replicaWait);
    const replies = await this.#scripts.run(SEND_BACK, keys, args);
    if (!Array.isArray(replies) || replies.length !== moves.length) throw new Error(`redis: the send-back script replied ${String(replies)} for ${moves.length} entries`);
    await waitForReplicas(this.#client, this.#keys.stream(errorQueue), this.#replicaWait, moves.length === 1 ? 'a send-back' : `a send-back of ${moves.length} entries`, mark);
    return replies;
  }

  /** The entry `key` of `errorQueue`, or undefined when there is none (or `key` is no entry id). */
  async #read(errorQueue: string, key: string): Promise<RawEntry | undefined> {
    if (!isEntryKey(key)) return undefined;
    const [raw] = await this.#client.xrangeBuffer(this.#keys.stream(errorQueue), key, key);
    return raw;
  }
}

/** The exclusive start of the read after `entries`: after the last one's id. */
function after(entries: readonly RawEntry[]): string {
  return `(${entries[entries.length - 1]![0].toString()}`;
}

/** What the send-back script's `reply` for `move` means. */
function resultOf(move: Move, reply: unknown): EntryResult {
  switch (Number(reply)) {
    case SEND_BACK_REPLY.sent:
      return { outcome: 'sent', entry: move.entry, queue: move.destination };
    case SEND_BACK_REPLY.gone:
      return { outcome: 'gone', entry: move.entry };
    case SEND_BACK_REPLY.missing:
      return failureResult(move.entry, new SendBackRefusedError(move.destination, 'missing', move.messageId));
    case SEND_BACK_REPLY.errorQueue:
      return failureResult(move.entry, new SendBackRefusedError(move.destination, 'error-queue', move.messageId));
    default:
      return { outcome: 'failed', entry: move.entry, error: new Error(`redis: the send-back script replied ${String(reply)}`) };
  }
}

/** Why a send-back refuses an entry redeliver did not write: it copies only what redeliver wrote. */
function unsendable(error: MalformedEntryError): MalformedEntryError {
  return new MalformedEntryError(`${error.message}; it cannot be sent back (delete it, or read it with XRANGE)`);
}

function kindOf(value: string | null | undefined): QueueKind {
  return value === 'work' || value === 'error' ? value : 'missing';
}
