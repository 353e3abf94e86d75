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
 * for.
 *
 * A send-back goes only to a queue the prefix's `{p}:queues` hash lists as
 * a work queue: one a message was ever sent to, or a consumer ever consumed,
 * under that key prefix.
 *
 * Entries redeliver did not write (an `XADD` by hand) are shown with what
 * they carry and no headers, can be deleted, and are refused by a send-back
 * (see ./error-entry.ts).
 */
import type { Redis } from 'ioredis';
import { replayHeaders } from '../../headers/replay.js';
import { pageSizeOf } from '../../operations/scan-page.js';
import { SendBackRefusedError } from '../../operations/send-back-destination.js';
import { systemClock, type Clock } from '../../time/clock.js';
import type { BrowseOptions, ErrorEntry, ErrorQueueOperations, ScanOptions, SendBackOptions } from '../../transport/error-queue.js';
import { KeyedErrorQueueOperations } from '../../transport/keyed-operations.js';
import type { QueueDepth, QueueInspection, QueueKind } from '../../transport/inspection.js';
import { sendBackDestination } from '../../transport/send-back.js';
import { decodeEntry, encodeHeaders, MalformedEntryError, type RawEntry, type StreamEntry } from './codec.js';
import { errorEntryOf, isEntryKey } from './error-entry.js';
import { GROUP, type RedisKeys } from './keys.js';
import { DELETE_ENTRY, PURGE_CHUNK, SEND_BACK, SEND_BACK_REPLY } from './scripts/error-queue.js';
import { QUEUE_DEPTHS } from './scripts/queue-depths.js';
import type { ScriptRunner } from './scripts/runner.js';

/** The most entries one script of a purge removes, so a purge never blocks the server for long. */
export const PURGE_CHUNK_SIZE = 500;

/** The most entries one read takes while `browse` skips to its offset. */
const SKIP_CHUNK = 1_000;

/** The most queues one depth script reads. */
const DEPTHS_CHUNK = 100;

/** Error-queue operations and queue inspection on Redis, on the transport's command client. */
export class RedisOperations extends KeyedErrorQueueOperations implements ErrorQueueOperations, QueueInspection {
  readonly #client: Redis;
  readonly #keys: RedisKeys;
  readonly #scripts: ScriptRunner;
  readonly #clock: Clock;

  /**
   * @param clock the time written into a sent-back message's
   * `redeliver-replayed-at` header. Default the system clock.
   */
  constructor(client: Redis, keys: RedisKeys, scripts: ScriptRunner, clock: Clock = systemClock) {
    super();
    this.#client = client;
    this.#keys = keys;
    this.#scripts = scripts;
    this.#clock = clock;
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
    const pageSize = pageSizeOf(options.pageSize);
    const stream = this.#keys.stream(errorQueue);
    const [last] = await this.#client.xrevrange(stream, '+', '-', 'COUNT', 1);
    if (last === undefined) return;
    for (let start = '-'; ; ) {
      const raw = await this.#client.xrangeBuffer(stream, start, last[0], 'COUNT', pageSize);
      if (raw.length === 0) return;
      start = after(raw);
      yield raw.map((r) => errorEntryOf(errorQueue, r));
      if (raw.length < pageSize) return;
    }
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
    const entry = strict(raw);
    const destination = sendBackDestination(errorQueue, entry.id, entry.headers, options);
    const headers = encodeHeaders(replayHeaders(entry.headers, new Date(this.#clock.now())));
    const reply = await this.#scripts.run(
      SEND_BACK,
      [this.#keys.stream(errorQueue), this.#keys.stream(destination), this.#keys.queues, this.#keys.of(errorQueue).leases],
      [key, destination, entry.id, headers, entry.body, GROUP],
    );
    switch (reply) {
      case SEND_BACK_REPLY.sent:
        return destination;
      case SEND_BACK_REPLY.gone:
        return undefined;
      case SEND_BACK_REPLY.missing:
        throw new SendBackRefusedError(destination, 'missing', entry.id);
      case SEND_BACK_REPLY.errorQueue:
        throw new SendBackRefusedError(destination, 'error-queue', entry.id);
      default:
        throw new Error(`redis: the send-back script replied ${String(reply)}`);
    }
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

/** The entry, decoded strictly: a send-back copies only what redeliver wrote. */
function strict(raw: RawEntry): StreamEntry {
  try {
    return decodeEntry(raw);
  } catch (error) {
    if (!(error instanceof MalformedEntryError)) throw error;
    throw new MalformedEntryError(`${error.message}; it cannot be sent back (delete it, or read it with XRANGE)`);
  }
}

function kindOf(value: string | null | undefined): QueueKind {
  return value === 'work' || value === 'error' ? value : 'missing';
}
