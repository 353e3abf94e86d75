/**
 * The operator's side of RabbitMQ: browse, replay and delete error-queue
 * entries, and read queue depths (`transport.errorQueue` and
 * `transport.inspection`).
 *
 * AMQP 0-9-1 has no browse and no way to address a message in the middle of
 * a queue. Every operation that reads messages takes them off the head of
 * the queue with `basic.get` on a channel of its own, holds them
 * unacknowledged, and gives back (`basic.nack` with requeue) everything it
 * does not remove. What that means for an operator:
 *
 * - `scan`, `sendBackEach` and `deleteEach` read the queue in one pass:
 *   each message `basic.get` once, all held on one channel until the end,
 *   at most the messages the queue held when the pass began. Reading entry
 *   `n` by position or key (`browse`, `get`, `sendBack`, `delete`) costs `n`
 *   round trips. One operation reads at most `errorQueueMaxScan` messages
 *   (default 100,000) and otherwise fails with a {@link ScanLimitError},
 *   changing nothing.
 * - The messages read are given back in place on a classic queue, but the
 *   broker sets their `redelivered` flag. A quorum queue would count each
 *   read as a delivery against its delivery limit: every operation refuses
 *   one with a {@link QuorumErrorQueueError} unless
 *   `allowQuorumErrorQueueReads` is set.
 * - While an operation holds messages, nobody else sees them: a consumer of
 *   the error queue, or an operation of another process, sees a shorter
 *   queue for that moment. Operations of one transport on one error queue
 *   run one at a time, so they never hide entries from each other.
 *
 * See docs/rabbitmq.md, "Error queues".
 */
import type { GetMessage } from 'amqplib';
import { failureQueueOf, replayHeaders } from '../../headers/replay.js';
import { checkDestinationAllowed, noDestination, SendBackRefusedError, type SendBackRefusal } from '../../operations/send-back-destination.js';
import { BulkTally, failureResult, sendBackOptionsOf } from '../../operations/bulk.js';
import { pageSizeOf } from '../../operations/scan-page.js';
import type {
  BrowseOptions,
  BulkOptions,
  BulkSendBackOptions,
  BulkSummary,
  ErrorEntry,
  ErrorQueueOperations,
  ScanOptions,
  SendBackOptions,
} from '../../transport/error-queue.js';
import type { QueueDepth, QueueInspection, QueueKind } from '../../transport/inspection.js';
import type { ConnectionManager, Session } from './connection.js';
import type { QueueDeclarations } from './declarations.js';
import type { ErrorQueueMarkers } from './error-queue-marker.js';
import { derivedEntryKey, entryIdOf, hasEntryKey, messageIdOf } from './entry-key.js';
import { TransportClosedError } from './errors.js';
import type { ResolvedOptions } from './options.js';
import { keptProperties, type Publisher } from './publisher.js';
import { BrokerStallError, checkQueueName, PassiveChannel, QueueReader, type ReadStats } from './queue-access.js';
import { fromQuorumQueue, QuorumErrorQueueError } from './quorum-refusal.js';
import { SnapshotPass } from './snapshot-pass.js';
import { delayTopologyNames, levelQueues } from './topology.js';
import { decodeHeaders } from './wire-headers.js';
import { KeyedLock } from '../../util/keyed-lock.js';

/** The most entries one `browse` call returns on RabbitMQ; a larger `limit` returns this many. */
export const MAX_BROWSE_LIMIT = 1_000;

/** The default of {@link RabbitMqOperationsOptions.errorQueueMaxScan}. */
export const DEFAULT_ERROR_QUEUE_MAX_SCAN = 100_000;

/** Options of the error-queue operations, given with the transport's options. */
export interface RabbitMqOperationsOptions {
  /**
   * The most messages one error-queue operation (`browse`, `get`,
   * `sendBack`, `delete`) takes off the head of a queue while looking for
   * what it was asked for. Past it the operation gives every message back
   * and fails with a `ScanLimitError`: reading entry `n` costs `n` round
   * trips and holds `n` messages unacknowledged. Default 100 000.
   */
  readonly errorQueueMaxScan?: number;
  /**
   * Lets error-queue operations read quorum error queues. Every read of a
   * quorum queue counts a delivery of each message read against its
   * delivery limit (RabbitMQ 4: 20 unless declared otherwise; a policy can
   * set one too), past which the broker drops it; set this only for a
   * quorum error queue known to have no limit. Default false: an operation
   * that reads a message of a quorum queue gives it back and fails with a
   * `QuorumErrorQueueError`.
   */
  readonly allowQuorumErrorQueueReads?: boolean;
}

/** Copies of a `sendBackEach` waiting for their confirms at once, at most. */
export const SEND_BACK_WINDOW = 128;

/** What the operations need from their transport. */
export interface OperationsContext {
  readonly connection: ConnectionManager;
  readonly declarations: QueueDeclarations;
  readonly publisher: Publisher;
  readonly options: ResolvedOptions;
  readonly markers: ErrorQueueMarkers;
}

/**
 * `sendBack` published a confirmed copy but could not confirm that the entry
 * was removed from the error queue (the connection dropped between the two).
 * The entry may still be there: sending it back again would send the
 * message twice. The message id is the same on both copies.
 */
export class SendBackIncompleteError extends Error {
  override readonly name: string = 'SendBackIncompleteError';
  constructor(
    readonly errorQueue: string,
    readonly key: string,
    /** Where the confirmed copy went. */
    readonly queue: string,
    cause: unknown,
  ) {
    super(
      `rabbitmq: entry ${key} was sent back to '${queue}' (the broker confirmed the copy), but its removal from '${errorQueue}' ` +
        `could not be confirmed (${(cause as Error)?.message ?? String(cause)}): it may still be in the error queue, and sending it ` +
        'back again would send the message twice; look it up and delete it instead',
      { cause },
    );
  }
}

/**
 * A bulk operation acked entries but could not confirm that the broker
 * removed them (the connection dropped before the end of the pass). For a
 * send-back their copies are out: sending them back again would send those
 * messages twice.
 */
export class BulkIncompleteError extends Error {
  override readonly name: string = 'BulkIncompleteError';
  constructor(
    readonly errorQueue: string,
    /** Entries acked whose removal is unconfirmed. */
    readonly unconfirmed: number,
    what: 'sent back' | 'deleted',
  ) {
    super(
      `rabbitmq: ${unconfirmed} ${unconfirmed === 1 ? 'entry was' : 'entries were'} ${what}` +
        (what === 'sent back' ? ' (the broker confirmed each copy)' : '') +
        `, but their removal from '${errorQueue}' could not be confirmed: some may still be there` +
        (what === 'sent back' ? '; sending them back again would send those messages twice, look them up and delete them instead' : ''),
    );
  }
}

/**
 * Error-queue operations and queue inspection on RabbitMQ. Reached through
 * `transport.errorQueue` and `transport.inspection`; shares the transport's
 * connection and confirm channel.
 */
export class RabbitMqOperations implements ErrorQueueOperations, QueueInspection {
  /** The most messages one operation reads (`errorQueueMaxScan`). */
  readonly maxScan: number;
  /** `basic.get` requests sent by every operation so far. */
  readonly stats: ReadStats = { reads: 0 };
  readonly #allowQuorum: boolean;
  readonly #context: OperationsContext;
  /** The tail of the operations running on each error queue: they run one at a time. */
  readonly #locks = new KeyedLock();
  readonly #warnedQuorum = new Set<string>();

  constructor(context: OperationsContext, options: RabbitMqOperationsOptions = {}) {
    const maxScan = options.errorQueueMaxScan ?? DEFAULT_ERROR_QUEUE_MAX_SCAN;
    if (!(Number.isSafeInteger(maxScan) && maxScan >= 1)) {
      throw new RangeError(`RabbitMqTransport: errorQueueMaxScan must be a whole number >= 1, got ${maxScan}`);
    }
    this.maxScan = maxScan;
    this.#allowQuorum = options.allowQuorumErrorQueueReads === true;
    this.#context = context;
  }

  /** Ready messages in the error queue (0 when it does not exist). Messages someone holds unacknowledged are not counted. */
  async count(errorQueue: string): Promise<number> {
    checkQueueName(errorQueue);
    return this.#locks.run(errorQueue, () =>
      this.#passive('count an error queue', async (passive) => (await passive.queue(errorQueue))?.messageCount ?? 0),
    );
  }

  /**
   * Every entry, oldest first, in one pass (see {@link SnapshotPass}): each
   * message read once and held until the iteration ends, then all given
   * back in their places. Stopping the iteration early (`break`, or a throw
   * in the loop) gives them back at once. While it runs, other operations
   * of this transport on the same queue wait.
   */
  async *scan(errorQueue: string, options: ScanOptions = {}): AsyncGenerator<ErrorEntry[]> {
    checkQueueName(errorQueue);
    const pageSize = pageSizeOf(options.pageSize);
    const operation = `scan '${errorQueue}'`;
    const unlock = await this.#locks.acquire(errorQueue);
    try {
      const session = await this.#session(operation);
      const pass = await this.#onPassive(session, (passive) => this.#openPass(session, passive, errorQueue, operation));
      try {
        let page: ErrorEntry[] = [];
        for (let message = await pass.next(); message; message = await pass.next()) {
          this.#checkQuorum(errorQueue, message, operation);
          page.push(this.#entry(errorQueue, message));
          if (page.length >= pageSize) {
            yield page;
            page = [];
          }
        }
        if (page.length > 0) yield page;
      } finally {
        await pass.finish();
      }
    } finally {
      unlock();
    }
  }

  /**
   * Sends back every entry `options.select` picks, in one pass: each
   * message read once; for each selected one the copy is published on the
   * confirm channel (up to {@link SEND_BACK_WINDOW} awaiting their confirms
   * at once) and the entry acked only once its own copy is confirmed; every
   * other message is given back at the end. One delivery counted per entry.
   *
   * Per entry: `sent`, `refused` (the destination is missing, an error queue
   * or not allowed: checked once per destination per pass, passively),
   * `failed` (no destination named, the copy not confirmed: the entry stays;
   * or a {@link SendBackIncompleteError}: the copy is out and the ack could
   * not be made). Resolves the totals, with `unseen` the entries another
   * reader held. Rejects with a {@link BulkIncompleteError} when acks were
   * made but their end could not be confirmed, and with the error when the
   * pass itself failed (after settling the copies in flight).
   */
  async sendBackEach(errorQueue: string, options: BulkSendBackOptions): Promise<BulkSummary> {
    checkQueueName(errorQueue);
    if (options.queue !== undefined) checkQueueName(options.queue);
    const { queue, allowedQueues } = sendBackOptionsOf(options);
    const { publisher, markers, options: transportOptions } = this.#context;
    return this.#bulk(errorQueue, `send back entries of '${errorQueue}'`, options, 'sent back', (passive) => {
      const refusals = new Map<string, Promise<SendBackRefusal | undefined>>();
      // Passive checks only: the destination may come from a header anyone could write, and a send-back never creates a queue.
      const refusalOf = (destination: string) => {
        let refusal = refusals.get(destination);
        if (!refusal) {
          refusal = (async () => {
            if ((await passive.queue(destination)) === undefined) return 'missing' as const;
            return (await markers.isErrorQueue(passive, destination)) ? ('error-queue' as const) : undefined;
          })();
          refusals.set(destination, refusal);
        }
        return refusal;
      };
      return async (message, entry, pass, tally) => {
        const destination = queue ?? failureQueueOf(entry.headers);
        if (destination === undefined) {
          tally.record(failureResult(entry, noDestination(entry.messageId)));
          return undefined;
        }
        try {
          checkQueueName(destination);
          checkDestinationAllowed(destination, errorQueue, entry.messageId, allowedQueues);
          const refusal = await refusalOf(destination);
          if (refusal) throw new SendBackRefusedError(destination, refusal, entry.messageId);
        } catch (error) {
          tally.record(failureResult(entry, error));
          return undefined;
        }
        const copy = {
          id: entry.messageId,
          body: message.content,
          headers: replayHeaders(entry.headers, new Date(transportOptions.clock.now())),
          properties: keptProperties(message.properties),
        };
        const confirmed = publisher.publishCopy(destination, copy, 'send-back').then(
          () => {
            // The copy is confirmed. From here a failure leaves the message twice, never zero times.
            try {
              pass.ack(message);
            } catch (error) {
              transportOptions.logger?.warn({ err: error, errorQueue, key: entry.key, queue: destination, messageId: entry.messageId }, 'rabbitmq: a sent-back entry is still in the error queue');
              tally.record({ outcome: 'failed', entry, error: new SendBackIncompleteError(errorQueue, entry.key, destination, error) });
              return;
            }
            tally.record({ outcome: 'sent', entry, queue: destination });
          },
          (error: unknown) => tally.record(failureResult(entry, error)),
        );
        return { confirmed };
      };
    });
  }

  /**
   * Removes every entry `options.select` picks, in one pass: each message
   * read once, the selected ones acked, the rest given back at the end,
   * which the broker answers once every ack is done. Rejects with a
   * {@link BulkIncompleteError} when that answer does not come.
   */
  async deleteEach(errorQueue: string, options: BulkOptions): Promise<BulkSummary> {
    checkQueueName(errorQueue);
    return this.#bulk(errorQueue, `delete entries of '${errorQueue}'`, options, 'deleted', () => async (message, entry, pass, tally) => {
      try {
        pass.ack(message);
      } catch (error) {
        tally.record({ outcome: 'failed', entry, error });
        return undefined;
      }
      tally.record({ outcome: 'deleted', entry });
      return undefined;
    });
  }

  /**
   * One pass acting on the selected entries. `prepare` makes the action,
   * given the pass's passive channel; an action may return what it still
   * waits for (a copy's confirm), and at most {@link SEND_BACK_WINDOW} such
   * waits are pending at once.
   */
  async #bulk(
    errorQueue: string,
    operation: string,
    options: BulkOptions,
    what: 'sent back' | 'deleted',
    prepare: (
      passive: PassiveChannel,
    ) => (message: GetMessage, entry: ErrorEntry, pass: SnapshotPass, tally: BulkTally) => Promise<{ confirmed: Promise<void> } | undefined>,
  ): Promise<BulkSummary> {
    return this.#locks.run(errorQueue, async () => {
      const tally = new BulkTally(options.onResult);
      const session = await this.#session(operation);
      return this.#onPassive(session, async (passive) => {
        const pass = await this.#openPass(session, passive, errorQueue, operation);
        const act = prepare(passive);
        const pending = new Set<Promise<void>>();
        let failure: { error: unknown } | undefined;
        try {
          for (;;) {
            if (options.signal?.aborted) tally.interrupted = true;
            if (tally.interrupted || tally.callbackFailed) break;
            const message = await pass.next();
            if (!message) break;
            this.#checkQuorum(errorQueue, message, operation);
            tally.read++;
            options.onRead?.(1);
            const entry = this.#entry(errorQueue, message);
            if (!options.select(entry)) continue;
            tally.selected++;
            const waiting = await act(message, entry, pass, tally);
            if (!waiting) continue;
            const tracked: Promise<void> = waiting.confirmed.finally(() => pending.delete(tracked));
            pending.add(tracked);
            if (pending.size >= SEND_BACK_WINDOW) await Promise.race(pending);
          }
        } catch (error) {
          failure = { error };
        }
        await Promise.all(pending);
        const confirmed = await pass.finish();
        tally.unseen = pass.unseen;
        if (failure) throw failure.error;
        if (!confirmed && tally.done > 0) throw new BulkIncompleteError(errorQueue, tally.done, what);
        return tally.summary();
      });
    });
  }

  /**
   * Entries, oldest first: `offset` (default 0) entries skipped, then at
   * most `limit` (default 100, at most {@link MAX_BROWSE_LIMIT}) returned.
   * Reads `offset + limit` messages and gives them all back: the queue keeps
   * its messages and (on a classic queue) their order, with the
   * `redelivered` flag set.
   */
  async browse(errorQueue: string, options: BrowseOptions = {}): Promise<ErrorEntry[]> {
    checkQueueName(errorQueue);
    const offset = wholeNumber(options.offset, 0);
    const limit = Math.min(MAX_BROWSE_LIMIT, wholeNumber(options.limit, 100));
    if (limit === 0) return [];
    return this.#locks.run(errorQueue, () =>
      this.#read(errorQueue, `browse '${errorQueue}'`, async (reader) => {
        const entries: ErrorEntry[] = [];
        for (let index = 0; index < offset + limit; index++) {
          const message = await reader.next();
          if (!message) break;
          this.#checkQuorum(errorQueue, message, `browse '${errorQueue}'`);
          // Skipped messages are not kept: only their delivery tags matter, and one nack gives them all back.
          if (index >= offset) entries.push(this.#entry(errorQueue, message));
        }
        return entries;
      }),
    );
  }

  /** One entry, or undefined when no entry has that key. Reads the queue up to the entry and gives everything back. */
  async get(errorQueue: string, key: string): Promise<ErrorEntry | undefined> {
    checkQueueName(errorQueue);
    return this.#locks.run(errorQueue, () =>
      this.#read(errorQueue, `find entry ${key} in '${errorQueue}'`, async (reader) => {
        const message = await this.#find(reader, key, `find entry ${key} in '${errorQueue}'`);
        return message && this.#entry(errorQueue, message);
      }),
    );
  }

  /**
   * Sends the entry back with a fresh retry state (`replayHeaders`), to
   * `options.queue` or the queue it failed on, then removes it:
   *
   * 1. the queue is read up to the entry; the messages before it are given
   *    back at once, the entry is held;
   * 2. the copy (same message id, body and properties) is published on the
   *    transport's confirm channel and confirmed by the broker, within
   *    `confirmTimeoutMs`;
   * 3. only then is the entry acknowledged, and the channel closed, which
   *    the broker answers once the ack is done.
   *
   * A failure before 3 gives the entry back: nothing was sent, or (a
   * confirm timeout) a copy may have been stored and a second call sends
   * another. A connection lost between 2 and 3 rejects with a
   * {@link SendBackIncompleteError}: the copy is out, the entry may still be
   * there. Either way a duplicate, never a loss; the message id is kept, so a
   * consumer with a deduplication store handles it once.
   *
   * Resolves the queue the copy went to, or undefined when no entry has the
   * key (sent back or deleted already, or held at that moment by a consumer
   * or another process's operation). Throws when the entry names no queue
   * and `options.queue` is not given. Rejects with a `SendBackRefusedError`,
   * giving the entry back, when the destination does not exist (checked
   * with a passive declaration on a channel of its own: a send-back never
   * declares a queue), is an error queue, or is not in
   * `options.allowedQueues`.
   */
  async sendBack(errorQueue: string, key: string, options: SendBackOptions = {}): Promise<string | undefined> {
    checkQueueName(errorQueue);
    if (options.queue !== undefined) checkQueueName(options.queue);
    return this.#locks.run(errorQueue, () =>
      this.#read(errorQueue, `send back entry ${key} from '${errorQueue}'`, async (reader, session) => {
        const message = await this.#find(reader, key, `send back entry ${key} from '${errorQueue}'`);
        if (!message) return undefined;
        reader.requeueBefore(message);
        const { headers } = decodeHeaders(message.properties.headers);
        const id = messageIdOf(message, headers);
        const destination = options.queue ?? failureQueueOf(headers);
        if (destination === undefined) throw noDestination(id);
        checkQueueName(destination);
        checkDestinationAllowed(destination, errorQueue, id, options.allowedQueues);
        // Passive checks only: the destination may come from a header anyone could write, and a send-back never creates a queue.
        const refusal = await this.#onPassive(session, async (p): Promise<SendBackRefusal | undefined> => {
          if ((await p.queue(destination)) === undefined) return 'missing';
          return (await this.#context.markers.isErrorQueue(p, destination)) ? 'error-queue' : undefined;
        });
        if (refusal) throw new SendBackRefusedError(destination, refusal, id);
        const { publisher, options: transportOptions } = this.#context;
        await publisher.publishCopy(
          destination,
          {
            id,
            body: message.content,
            headers: replayHeaders(headers, new Date(transportOptions.clock.now())),
            properties: keptProperties(message.properties),
          },
          'send-back',
        );
        // The copy is confirmed. From here a failure leaves the message twice, never zero times.
        try {
          await reader.ackAndClose(message);
        } catch (error) {
          transportOptions.logger?.warn({ err: error, errorQueue, key, queue: destination, messageId: id }, 'rabbitmq: a sent-back entry may still be in the error queue');
          throw new SendBackIncompleteError(errorQueue, key, destination, error);
        }
        return destination;
      }),
    );
  }

  /**
   * Removes one entry; resolves whether it was there. Reads the queue up to
   * the entry, gives the others back and acknowledges the entry; resolves
   * once the broker has done it.
   */
  async delete(errorQueue: string, key: string): Promise<boolean> {
    checkQueueName(errorQueue);
    return this.#locks.run(errorQueue, () =>
      this.#read(errorQueue, `delete entry ${key} from '${errorQueue}'`, async (reader) => {
        const message = await this.#find(reader, key, `delete entry ${key} from '${errorQueue}'`);
        if (!message) return false;
        reader.requeueBefore(message);
        await reader.ackAndClose(message);
        return true;
      }),
    );
  }

  /**
   * Removes every ready entry (`queue.purge`); resolves how many (0 when the
   * queue does not exist). Entries a consumer or another operation holds at
   * that moment are not ready, so they stay.
   */
  async purge(errorQueue: string): Promise<number> {
    checkQueueName(errorQueue);
    return this.#locks.run(errorQueue, () => this.#passive('purge an error queue', async (passive) => (await passive.purge(errorQueue)) ?? 0));
  }

  /**
   * Depths read with a passive declaration of each queue. Without `queues`:
   * every queue this transport has declared (sent to, consumed, retried to
   * or dead-lettered into) that still exists, then the delay-level queues of
   * its topology prefix that exist, quorum and classic levels both (after a
   * switch of `delayLevels` the other kind still drains), then the quorum
   * levels' unroutable queue if it exists. AMQP cannot list a broker's
   * queues, so queues this transport never used must be named.
   *
   * - `kind`: `retry` for a delay-level queue; `error` for a queue this
   *   transport dead-lettered into, that carries the error-queue marker
   *   (see `errorQueueMarkerName`), or the unroutable queue of the quorum
   *   levels (delayed retries whose work queue was gone); `work` otherwise.
   * - `ready`: the queue's ready messages (`message_count`). For a
   *   delay-level queue it is 0 and its messages count as `delayed`.
   * - `delayed`: on a delay-level queue, the messages waiting in it. A
   *   delayed retry waits in the shared levels, not in its work queue, and
   *   the level does not say which work queue it returns to without reading
   *   it, so work queues show 0.
   * - `inFlight`: always 0. AMQP reports how many consumers a queue has,
   *   not how many messages they hold unacknowledged (the management API
   *   does; this transport does not use it).
   *
   * A named queue that does not exist shows zeros.
   */
  async queueDepths(queues?: readonly string[]): Promise<QueueDepth[]> {
    if (queues !== undefined) for (const queue of queues) checkQueueName(queue);
    const { declarations, markers } = this.#context;
    const quorum = delayTopologyNames(this.#context.options.topologyPrefix, 'quorum');
    const levels = [...levelQueues(quorum), ...levelQueues(delayTopologyNames(this.#context.options.topologyPrefix, 'classic'))];
    const levelSet = new Set(levels);
    const unroutable = quorum.unroutable!;
    return this.#passive('read queue depths', async (passive) => {
      /** The depth of `queue`; for a queue that does not exist zeros, or undefined when `existingOnly`. */
      const depth = async (queue: string, existingOnly: boolean): Promise<QueueDepth | undefined> => {
        const found = await passive.queue(queue);
        if (!found && existingOnly) return undefined;
        if (levelSet.has(queue)) return { queue, kind: 'retry', ready: 0, delayed: found?.messageCount ?? 0, inFlight: 0 };
        if (queue === unroutable) return { queue, kind: 'error', ready: found?.messageCount ?? 0, delayed: 0, inFlight: 0 };
        if (!found) return { queue, kind: markers.known.has(queue) ? 'error' : 'work', ready: 0, delayed: 0, inFlight: 0 };
        const kind = (await markers.isErrorQueue(passive, queue)) ? 'error' : 'work';
        return { queue, kind, ready: found.messageCount, delayed: 0, inFlight: 0 };
      };
      const out: QueueDepth[] = [];
      if (queues !== undefined) {
        for (const queue of queues) out.push((await depth(queue, false))!);
        return out;
      }
      const used = [...new Set([...declarations.declaredQueues, ...markers.known])].filter((q) => !levelSet.has(q) && q !== unroutable).sort();
      for (const queue of [...used, ...levels, unroutable]) {
        const row = await depth(queue, true);
        if (row) out.push(row);
      }
      return out;
    });
  }

  /** What each queue is, by passive declarations only; the delay queues count as error queues (never a send-back's destination). */
  async queueKinds(queues: readonly string[]): Promise<ReadonlyMap<string, QueueKind>> {
    for (const queue of queues) checkQueueName(queue);
    const delayQueues = new Set([
      ...levelQueues(delayTopologyNames(this.#context.options.topologyPrefix, 'quorum')),
      ...levelQueues(delayTopologyNames(this.#context.options.topologyPrefix, 'classic')),
      delayTopologyNames(this.#context.options.topologyPrefix, 'quorum').unroutable!,
    ]);
    return this.#passive('check queues', async (passive) => {
      const kinds = new Map<string, QueueKind>();
      for (const queue of queues) {
        if ((await passive.queue(queue)) === undefined) kinds.set(queue, 'missing');
        else kinds.set(queue, delayQueues.has(queue) || (await this.#context.markers.isErrorQueue(passive, queue)) ? 'error' : 'work');
      }
      return kinds;
    });
  }

  #entry(errorQueue: string, message: GetMessage): ErrorEntry {
    const { headers } = decodeHeaders(message.properties.headers);
    const messageId = messageIdOf(message, headers);
    const key = entryIdOf(message.properties.headers) ?? derivedEntryKey(messageId, headers, message.content);
    return { key, messageId, errorQueue, body: message.content, headers };
  }

  /** Reads until the entry with `key`, which stays held; undefined once the queue ends without it. */
  async #find(reader: QueueReader, key: string, operation: string): Promise<GetMessage | undefined> {
    for (;;) {
      const message = await reader.next();
      if (!message) return undefined;
      this.#checkQuorum(reader.queue, message, operation);
      if (hasEntryKey(message, key)) return message;
    }
  }

  /**
   * Refuses to go on reading a quorum queue (see {@link QuorumErrorQueueError})
   * unless `allowQuorumErrorQueueReads`; when allowed, warns once per queue.
   */
  #checkQuorum(queue: string, message: GetMessage, operation: string): void {
    if (!fromQuorumQueue(message)) return;
    if (!this.#allowQuorum) throw new QuorumErrorQueueError(queue, operation);
    if (this.#warnedQuorum.has(queue)) return;
    this.#warnedQuorum.add(queue);
    this.#context.options.logger?.warn(
      { queue },
      `rabbitmq: '${queue}' is a quorum queue: every error-queue operation moves the entries it reads past to the back of the queue ` +
        'and counts a delivery of each against x-delivery-limit; with a delivery limit, entries read often enough are dropped by the broker',
    );
  }

  /** Runs `fn` with a reader of `queue`; every message it still holds afterwards is given back. */
  async #read<T>(queue: string, operation: string, fn: (reader: QueueReader, session: Session) => Promise<T>): Promise<T> {
    const session = await this.#session(operation);
    const { clock, confirmTimeoutMs } = this.#context.options;
    const reader = await QueueReader.open(session, queue, { clock, timeoutMs: confirmTimeoutMs, maxScan: this.maxScan, operation, stats: this.stats });
    try {
      return await fn(reader, session);
    } finally {
      await reader.release();
    }
  }

  /** Opens a one-pass read of `queue` (its depth read on `passive`). */
  #openPass(session: Session, passive: PassiveChannel, queue: string, operation: string): Promise<SnapshotPass> {
    const { clock, confirmTimeoutMs } = this.#context.options;
    return SnapshotPass.open(session, passive, queue, { clock, timeoutMs: confirmTimeoutMs, maxScan: this.maxScan, operation, stats: this.stats });
  }

  async #passive<T>(operation: string, fn: (passive: PassiveChannel) => Promise<T>): Promise<T> {
    return this.#onPassive(await this.#session(operation), fn);
  }

  /** Runs `fn` with passive checks on a channel of its own, closed afterwards. */
  async #onPassive<T>(session: Session, fn: (passive: PassiveChannel) => Promise<T>): Promise<T> {
    const passive = new PassiveChannel(session, this.#context.options.clock, this.#context.options.confirmTimeoutMs);
    try {
      return await fn(passive);
    } finally {
      await passive.close();
    }
  }

  /** The open connection, waiting for a reconnection at most `confirmTimeoutMs`. */
  async #session(operation: string): Promise<Session> {
    const { connection, options } = this.#context;
    if (connection.closed) throw new TransportClosedError(operation);
    const deadline = new AbortController();
    options.clock.sleep(options.confirmTimeoutMs, deadline.signal).then(
      () => deadline.abort(new BrokerStallError(`${operation} (waiting for a connection)`, options.confirmTimeoutMs)),
      () => undefined,
    );
    try {
      return await connection.whenReady(deadline.signal, { ignoreBlocked: true });
    } finally {
      if (!deadline.signal.aborted) deadline.abort();
    }
  }
}

function wholeNumber(value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  return Number.isFinite(value) ? Math.max(0, Math.floor(value)) : fallback;
}
