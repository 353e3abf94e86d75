/**
 * The operator's side of JetStream: browse, replay and delete error-queue
 * entries, and read queue depths (`transport.errorQueue` and
 * `transport.inspection`).
 *
 * An error queue is a stream, and an entry's key is its stream sequence.
 * Every read is a get of one message, direct where the stream allows it
 * (see ./stream-reader.ts): nothing is delivered or held, so a pass never
 * hides an entry from anyone (`unseen` is always 0) and no consumer of the
 * error queue is needed.
 *
 * A send-back publishes the copy to the destination's stream with the
 * `Nats-Msg-Id` `sendback|<error stream>|<sequence>`, waits for the
 * server's acknowledgement, and only then deletes the entry. A send-back
 * that stops in between (a lost connection) leaves the entry in place; one
 * asked again within the destination's duplicate window publishes a copy the
 * server drops as a duplicate, then deletes the entry. Concurrent send-backs
 * of one entry send one copy the same way, and only the one whose deletion
 * removed the entry reports it sent; the others find it gone. A bulk
 * send-back does the same for up to {@link SEND_BACK_CONCURRENCY} entries of
 * a page at once, looking each destination's stream up once per page; it
 * copies each entry as the page read it (a stream's message never changes)
 * after reading it again only to learn it is still there.
 *
 * A send-back goes only to a queue whose stream exists and says it is a work
 * queue (`redeliver queue` in its description): one a message was sent to,
 * or a consumer consumed, under the transport's prefix.
 */
import type { StoredMsg, StreamInfo } from '@nats-io/jetstream';
import { replayHeaders } from '../../headers/replay.js';
import { pageSizeOf } from '../../operations/scan-page.js';
import { systemClock, type Clock } from '../../time/clock.js';
import { failureResult } from '../../operations/bulk.js';
import type { BrowseOptions, BulkSendBackOptions, BulkSummary, EntryResult, ErrorEntry, ErrorQueueOperations, ScanOptions, SendBackOptions } from '../../transport/error-queue.js';
import { KeyedErrorQueueOperations, sendBackEachInBatches } from '../../transport/keyed-operations.js';
import type { QueueDepth, QueueInspection, QueueKind } from '../../transport/inspection.js';
import { checkWorkQueue, sendBackDestination } from '../../transport/send-back.js';
import { encodeNatsHeaders } from './codec.js';
import type { JetStreamClients } from './connection.js';
import { errorEntryOf, sequenceOfKey } from './error-entry.js';
import { QUEUE_CONSUMER, QUEUE_DESCRIPTION, type JetStreamNames, type QueueNames } from './names.js';
import { readerFor, readStream, type MessageReader } from './stream-reader.js';
import { isNotFound } from './topology.js';

/** The JetStream clients the operations use, from the transport's connection. */
export type OperationClients = Pick<JetStreamClients, 'js' | 'jsm'>;

/** The most entries one read takes while `browse` skips to its offset. */
const SKIP_CHUNK = 1_000;

/** The most deletions `drain` has in flight at once. */
const DELETE_CONCURRENCY = 64;

/** Send-backs a bulk send-back has under way at once: each a read, a publish, then a deletion. */
export const SEND_BACK_CONCURRENCY = 128;

/** A queue's kind, by name. */
type KindLookup = (queue: string) => Promise<QueueKind>;

/** The server's error codes of a message deletion that found nothing (`no message found`, `sequence not found`). */
const DELETE_FAILED = new Set([10057, 10043]);

/** Error-queue operations and queue inspection on JetStream, on the transport's connection. */
export class JetStreamOperations extends KeyedErrorQueueOperations implements ErrorQueueOperations, QueueInspection {
  readonly #clients: () => Promise<OperationClients>;
  readonly #names: JetStreamNames;
  readonly #clock: Clock;

  /**
   * @param clients the transport's JetStream clients, connecting on first use (`transport.ready`).
   * @param clock the time written into a sent-back message's
   * `redeliver-replayed-at` header. Default the system clock.
   */
  constructor(clients: () => Promise<OperationClients>, names: JetStreamNames, clock: Clock = systemClock) {
    super();
    this.#clients = clients;
    this.#names = names;
    this.#clock = clock;
  }

  /** The messages in the error queue's stream; 0 when there is no such stream. */
  async count(errorQueue: string): Promise<number> {
    const info = await this.#info(this.#names.of(errorQueue).stream);
    return info?.state.messages ?? 0;
  }

  /**
   * A page of entries, oldest first. Skipping to `offset` is one lookup when
   * no message was removed from the middle of the stream, else a read of the
   * entries before it.
   */
  async browse(errorQueue: string, options: BrowseOptions = {}): Promise<ErrorEntry[]> {
    let skip = Math.max(0, Math.floor(options.offset ?? 0));
    const limit = Math.max(0, Math.floor(options.limit ?? 100));
    if (limit === 0) return [];
    const names = this.#names.of(errorQueue);
    const { jsm } = await this.#clients();
    const info = await this.#info(names.stream);
    if (info === undefined || skip >= info.state.messages) return [];
    const read = readerFor(jsm, info);
    let from = info.state.first_seq;
    if ((info.state.num_deleted ?? 0) === 0) {
      from += skip;
      skip = 0;
    }
    while (skip > 0) {
      const skipped = await readStream(read, names.stream, names.subject, { from, limit: Math.min(skip, SKIP_CHUNK) });
      if (skipped.length === 0) return [];
      skip -= skipped.length;
      from = skipped[skipped.length - 1]!.seq + 1;
    }
    const messages = await readStream(read, names.stream, names.subject, { from, limit });
    return messages.map((m) => errorEntryOf(errorQueue, names.stream, m));
  }

  /**
   * Every entry, oldest first, a page at a time, up to the last sequence the
   * stream held when the scan began.
   */
  async *scan(errorQueue: string, options: ScanOptions = {}): AsyncGenerator<ErrorEntry[]> {
    const names = this.#names.of(errorQueue);
    const info = await this.#info(names.stream);
    const { jsm } = await this.#clients();
    yield* this.#scan(errorQueue, names, info, readerFor(jsm, info), pageSizeOf(options.pageSize));
  }

  /** {@link scan} of the stream `info` describes, read with `read`. */
  async *#scan(errorQueue: string, names: QueueNames, info: StreamInfo | undefined, read: MessageReader, pageSize: number): AsyncGenerator<ErrorEntry[]> {
    if (info === undefined || info.state.messages === 0) return;
    const to = info.state.last_seq;
    for (let from = info.state.first_seq; from <= to; ) {
      const messages = await readStream(read, names.stream, names.subject, { from, to, limit: pageSize });
      if (messages.length === 0) return;
      from = messages[messages.length - 1]!.seq + 1;
      yield messages.map((m) => errorEntryOf(errorQueue, names.stream, m));
      if (messages.length < pageSize) return;
    }
  }

  async get(errorQueue: string, key: string): Promise<ErrorEntry | undefined> {
    const seq = sequenceOfKey(key);
    if (seq === undefined) return undefined;
    const names = this.#names.of(errorQueue);
    const message = await this.#read(names, seq, await this.#plainReader());
    return message && errorEntryOf(errorQueue, names.stream, message);
  }

  /**
   * Reads the entry; checks the destination (not the error queue, on
   * `allowedQueues` when given, a work queue whose stream exists); publishes
   * the copy with a fresh retry state and the same message id, deduplicated
   * by the entry's stream and sequence; waits for the server to store it;
   * then deletes the entry. Resolves the destination, or undefined when the
   * entry is not there, or another send-back deleted it first (so each entry
   * a concurrent run moved is counted by one run only).
   */
  async sendBack(errorQueue: string, key: string, options: SendBackOptions = {}): Promise<string | undefined> {
    const seq = sequenceOfKey(key);
    if (seq === undefined) return undefined;
    const names = this.#names.of(errorQueue);
    const message = await this.#read(names, seq, await this.#plainReader());
    if (message === undefined) return undefined;
    return this.#sendBackRead(errorQueue, names, errorEntryOf(errorQueue, names.stream, message), options, this.#kindLookup());
  }

  /**
   * Sends back the selected entries of each page the scan reads as
   * {@link sendBack} would, {@link SEND_BACK_CONCURRENCY} at a time, each
   * destination's stream looked up once per page.
   */
  override async sendBackEach(errorQueue: string, options: BulkSendBackOptions): Promise<BulkSummary> {
    const names = this.#names.of(errorQueue);
    const info = await this.#info(names.stream);
    const { jsm } = await this.#clients();
    const read = readerFor(jsm, info);
    return sendBackEachInBatches(this.#scan(errorQueue, names, info, read, pageSizeOf(undefined)), (entry) => entry, options, (entries, destination) => {
      const kindOf = this.#kindLookup();
      return mapConcurrently(entries, SEND_BACK_CONCURRENCY, async (entry): Promise<EntryResult> => {
        try {
          // Read again just before the copy, so an entry deleted since the page was read does not come back.
          const there = (await this.#read(names, Number(entry.key), read)) !== undefined;
          const queue = there ? await this.#sendBackRead(errorQueue, names, entry, destination, kindOf) : undefined;
          return queue === undefined ? { outcome: 'gone', entry } : { outcome: 'sent', entry, queue };
        } catch (error) {
          return failureResult(entry, error);
        }
      });
    });
  }

  /** Sends back `entry`, just read from the queue's stream (see {@link sendBack}); undefined when another send-back deleted it first. */
  async #sendBackRead(errorQueue: string, names: QueueNames, entry: ErrorEntry, options: SendBackOptions, kindOf: KindLookup): Promise<string | undefined> {
    const seq = Number(entry.key);
    const destination = sendBackDestination(errorQueue, entry.messageId, entry.headers, options);
    checkWorkQueue(destination, await kindOf(destination), entry.messageId);
    const target = this.#names.of(destination);
    const { js } = await this.#clients();
    await js.publish(target.subject, entry.body, {
      headers: encodeNatsHeaders(entry.messageId, replayHeaders(entry.headers, new Date(this.#clock.now()))),
      msgID: `sendback|${names.stream}|${seq}`,
      expect: { streamName: target.stream },
    });
    // The copy is stored. From here a failure leaves the message twice at worst, never lost.
    try {
      // A concurrent send-back that deleted the entry first moved it (this run's copy was a duplicate): only that one reports it.
      if (!(await this.#delete(names.stream, seq))) return undefined;
    } catch (error) {
      throw new Error(
        `jetstream: entry ${seq} was sent back to '${destination}' (the server stored the copy), but deleting it from '${errorQueue}' failed ` +
          `(${(error as Error).message}); sending it back again within the queue's duplicate window sends no second copy`,
        { cause: error },
      );
    }
    return destination;
  }

  /** Each queue's kind, looked up once however often it is asked for. */
  #kindLookup(): KindLookup {
    const kinds = new Map<string, Promise<QueueKind>>();
    return (queue) => {
      let kind = kinds.get(queue);
      if (kind === undefined) {
        kind = this.queueKinds([queue]).then((found) => found.get(queue) ?? 'missing');
        kinds.set(queue, kind);
      }
      return kind;
    };
  }

  /** Deletes one entry; resolves whether it was there. */
  async delete(errorQueue: string, key: string): Promise<boolean> {
    const seq = sequenceOfKey(key);
    return seq !== undefined && this.#delete(this.#names.of(errorQueue).stream, seq);
  }

  /**
   * Removes every entry up to the last sequence the stream held when it is
   * called, in one request (a purge up to the sequence after it, which no
   * message has yet); entries dead-lettered meanwhile stay.
   */
  async purge(errorQueue: string): Promise<number> {
    const stream = this.#names.of(errorQueue).stream;
    const info = await this.#info(stream);
    if (info === undefined || info.state.messages === 0) return 0;
    const { jsm } = await this.#clients();
    const { purged } = await jsm.streams.purge(stream, { seq: info.state.last_seq + 1 });
    return purged;
  }

  /**
   * Hands the oldest `limit` entries to `store`, then deletes exactly those,
   * {@link DELETE_CONCURRENCY} at a time. (Not with a purge up to the last
   * one: a purge up to a sequence deleted before leaves that message
   * readable on nats-server 2.9.) Reading takes no lease, so an entry a
   * consumer of the error queue holds is handed over too. See
   * `ErrorQueueOperations.drain`.
   */
  async drain(errorQueue: string, limit: number, store: (entries: ErrorEntry[]) => Promise<void>): Promise<number> {
    if (!(Number.isSafeInteger(limit) && limit >= 1)) throw new RangeError(`drain: limit must be a whole number >= 1, got ${limit}`);
    const names = this.#names.of(errorQueue);
    const info = await this.#info(names.stream);
    if (info === undefined || info.state.messages === 0) return 0;
    const { jsm } = await this.#clients();
    const messages = await readStream(readerFor(jsm, info), names.stream, names.subject, { from: info.state.first_seq, limit });
    if (messages.length === 0) return 0;
    await store(messages.map((m) => errorEntryOf(errorQueue, names.stream, m)));
    for (let i = 0; i < messages.length; i += DELETE_CONCURRENCY) {
      await Promise.all(messages.slice(i, i + DELETE_CONCURRENCY).map((m) => this.#delete(names.stream, m.seq)));
    }
    return messages.length;
  }

  /**
   * Depths of every queue of the prefix (a stream on a subject under
   * `<prefix>.q.`), by name, or of `queues`: ready = the `redeliver`
   * consumer's messages not yet delivered (the stream's messages when the
   * queue has no consumer), in flight = its deliveries not yet acknowledged,
   * delayed = the queue's retries in the delay stream. A queue without a
   * stream reads as an empty work queue.
   */
  async queueDepths(queues?: readonly string[]): Promise<QueueDepth[]> {
    const { jsm } = await this.#clients();
    const streams = new Map<string, StreamInfo>();
    if (queues === undefined) {
      for await (const info of jsm.streams.list(`${this.#names.queueSubjectPrefix}>`)) {
        const queue = this.#queueOf(info);
        if (queue !== undefined) streams.set(queue, info);
      }
    } else {
      await Promise.all(queues.map(async (queue) => {
        const info = await this.#info(this.#names.of(queue).stream);
        if (info !== undefined && this.#queueOf(info) === queue) streams.set(queue, info);
      }));
    }
    const delayed = await this.#delayedBySubject();
    const names = queues ?? [...streams.keys()].sort();
    return Promise.all(names.map(async (queue): Promise<QueueDepth> => {
      const info = streams.get(queue);
      const delayedRetries = delayed.get(this.#names.of(queue).delaySubject) ?? 0;
      if (info === undefined) return { queue, kind: 'work', ready: 0, delayed: delayedRetries, inFlight: 0 };
      const consumer = await jsm.consumers.info(info.config.name, QUEUE_CONSUMER).catch((error: unknown) => {
        if (isNotFound(error)) return undefined;
        throw error;
      });
      return {
        queue,
        kind: info.config.description === QUEUE_DESCRIPTION.error ? 'error' : 'work',
        ready: consumer === undefined ? info.state.messages : consumer.num_pending,
        delayed: delayedRetries,
        inFlight: consumer?.num_ack_pending ?? 0,
      };
    }));
  }

  /**
   * Each queue's kind from its stream's description, looked up without
   * creating anything; `missing` when there is no stream, or the stream is
   * not one of redeliver's queues.
   */
  async queueKinds(queues: readonly string[]): Promise<ReadonlyMap<string, QueueKind>> {
    const kinds = await Promise.all(queues.map(async (queue): Promise<QueueKind> => {
      let stream: string;
      try {
        stream = this.#names.of(queue).stream;
      } catch (error) {
        if (error instanceof RangeError) return 'missing';
        throw error;
      }
      const info = await this.#info(stream);
      if (info === undefined || this.#queueOf(info) !== queue) return 'missing';
      if (info.config.description === QUEUE_DESCRIPTION.work) return 'work';
      return info.config.description === QUEUE_DESCRIPTION.error ? 'error' : 'missing';
    }));
    return new Map(queues.map((queue, i) => [queue, kinds[i]!]));
  }

  /** The stream's information, or undefined when there is no such stream. */
  async #info(stream: string): Promise<StreamInfo | undefined> {
    const { jsm } = await this.#clients();
    try {
      return await jsm.streams.info(stream);
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** The queue `info` is the stream of: its one subject is a queue subject of the prefix, and its name is that queue's stream. */
  #queueOf(info: StreamInfo): string | undefined {
    const subjects = info.config.subjects ?? [];
    if (subjects.length !== 1) return undefined;
    const queue = this.#names.queueOfSubject(subjects[0]!);
    return queue !== undefined && this.#names.of(queue).stream === info.config.name ? queue : undefined;
  }

  /** Reads with `STREAM.MSG.GET`, which needs nothing known of the stream. */
  async #plainReader(): Promise<MessageReader> {
    const { jsm } = await this.#clients();
    return readerFor(jsm, undefined);
  }

  /** The message `seq` of the queue's stream, or undefined when it is not there. */
  async #read(names: QueueNames, seq: number, read: MessageReader): Promise<StoredMsg | undefined> {
    try {
      const message = await read(names.stream, { seq });
      return message === null || message.subject !== names.subject ? undefined : message;
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /**
   * Deletes message `seq` of `stream`; resolves whether it was there. The
   * server answers a message already gone with a generic failure, so a failed
   * deletion is checked by reading the message: gone means false.
   */
  async #delete(stream: string, seq: number): Promise<boolean> {
    const { jsm } = await this.#clients();
    try {
      return await jsm.streams.deleteMessage(stream, seq, false);
    } catch (error) {
      if (isNotFound(error)) return false;
      const code = (error as { code?: unknown }).code;
      if (typeof code === 'number' && DELETE_FAILED.has(code) && (await jsm.streams.getMessage(stream, { seq })) === null) return false;
      throw error;
    }
  }

  /** How many delayed retries the delay stream holds on each subject; empty when there is no delay stream. */
  async #delayedBySubject(): Promise<ReadonlyMap<string, number>> {
    const { jsm } = await this.#clients();
    try {
      const info = await jsm.streams.info(this.#names.delayStream, { subjects_filter: this.#names.delaySubjects });
      return new Map(Object.entries(info.state.subjects ?? {}));
    } catch (error) {
      if (isNotFound(error)) return new Map();
      throw error;
    }
  }
}

/** `act` applied to every item, at most `limit` at a time; resolves the results in the items' order. */
async function mapConcurrently<T, R>(items: readonly T[], limit: number, act: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await act(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
