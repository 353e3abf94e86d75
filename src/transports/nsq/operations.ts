/**
 * The operator's side of NSQ: browse, send back and delete error-queue
 * entries, and read topic depths (`transport.errorQueue` and
 * `transport.inspection`).
 *
 * An error queue is a topic, read through a channel of its own
 * (`errorChannel`, default `redeliver-errors`); a topic that has that
 * channel is an error queue. NSQ cannot peek at a message, so every
 * operation that reads entries is one pass (see {@link ChannelPass}) on each
 * nsqd: it subscribes to the error channel, takes the messages the channel
 * held ready when the pass began, holds them in flight (TOUCHed while the
 * pass lasts), FINs the ones it removes and gives every other one back with
 * `REQ 0` at its end. What that means for an operator:
 *
 * - Entries are listed oldest first by the time nsqd first took each
 *   message (a REQ keeps it), so the order does not change from pass to
 *   pass. Each read counts one delivery in NSQ's `attempts` of the messages
 *   read; nothing redeliver does depends on it.
 * - One pass holds at most nsqd's `--max-rdy-count` messages (default
 *   2 500) per node: a larger error queue is refused with a
 *   `PassLimitError`, changing nothing (`purge` and `count` still work).
 * - While a pass holds entries, nobody else sees them: a consumer of the
 *   error channel (the error store's ingester) sees a shorter queue for that
 *   moment. Operations of one transport on one error queue run one at a
 *   time. A pass holds entries on a lease of its own (10 s, TOUCHed while
 *   it lasts): if the process dies during a pass, nsqd gives the entries
 *   back once that lease runs out, and a pass that begins meanwhile waits
 *   for them.
 * - Entries that another reader holds in flight are not read; a bulk
 *   operation counts them as `unseen`.
 * - Other channels of an error topic hold copies of their own, which these
 *   operations neither see nor change.
 *
 * What the transport passes (see {@link NsqOperationsContext}): the nsqd
 * nodes (TCP address and HTTP client of each, or a function that lists
 * them, e.g. from nsqlookupd), the channel its consumers read queues
 * through, its `connectionName`, clock and logger, and optionally a publish
 * function for send-back copies (default: HTTP `POST /pub` on the node the
 * entry was read from, which answers once nsqd has the message). The error
 * topics must have the error channel before their first entry arrives: a
 * channel receives only what is published after it was made, so the
 * transport creates `errorChannel` before it first dead-letters to a topic.
 */
import { failureQueueOf, replayHeaders } from '../../headers/replay.js';
import type { Logger } from '../../logger.js';
import { BulkTally, failureResult, sendBackOptionsOf } from '../../operations/bulk.js';
import { pageSizeOf } from '../../operations/scan-page.js';
import { checkDestinationAllowed, noDestination, SendBackRefusedError } from '../../operations/send-back-destination.js';
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
import type { Clock } from '../../time/clock.js';
import { envelopeOf, errorEntryOf, type NsqErrorEntry } from './error-entry.js';
import type { NsqChannelStats, NsqdHttpApi, NsqTopicStats } from './http-api.js';
import { checkName } from './names.js';
import { ChannelPass, PASS_LEASE_MS, type HeldMessage } from './operations-pass.js';
import { KeyedLock } from '../../util/keyed-lock.js';

/** The default of {@link NsqOperationsContext.errorChannel}. */
export const DEFAULT_ERROR_CHANNEL = 'redeliver-errors';

/** The most entries one `browse` returns; a larger `limit` returns this many. */
export const MAX_BROWSE_LIMIT = 1_000;

/** nsqd's default `--max-rdy-count`, used when a node does not say. */
const DEFAULT_MAX_RDY = 2_500;
/** nsqd's default `--max-msg-timeout`, used when a node does not say. */
const DEFAULT_MAX_MSG_TIMEOUT_MS = 15 * 60_000;

/** One nsqd: its TCP address (the passes connect to it) and its HTTP API. */
export interface NsqOperationsNode {
  readonly tcp: string;
  readonly http: NsqdHttpApi;
}

/** What the operations need from their transport. */
export interface NsqOperationsContext {
  /** The nsqd nodes to read and change, or a function listing them now (e.g. from nsqlookupd). */
  readonly nodes: readonly NsqOperationsNode[] | (() => Promise<readonly NsqOperationsNode[]>);
  /** The channel consumers read work topics through (the transport's `channel`): work queues' depths are read from it. */
  readonly channel: string;
  /** The channel error topics are read through. Default `redeliver-errors`. */
  readonly errorChannel?: string;
  /** The `client_id` of each pass's connection is `<connectionName>-ops`. */
  readonly connectionName: string;
  /** Dates the `redeliver-replayed-at` of a send-back copy. */
  readonly clock: Clock;
  readonly logger?: Logger;
  /**
   * Publishes a send-back copy (envelope bytes) to `topic`, resolving once
   * nsqd has it. Default: HTTP `POST /pub` on `node`.
   */
  readonly publish?: (topic: string, bytes: Uint8Array, node: NsqOperationsNode) => Promise<void>;
  /** Longest wait for one answer of nsqd. Default 5 000 ms. */
  readonly timeoutMs?: number;
}

/**
 * `sendBack` published a copy (nsqd took it) but could not confirm the
 * entry's removal: it may still be in the error queue, and sending it back
 * again would send the message twice. The message id is the same on both.
 */
export class SendBackIncompleteError extends Error {
  override readonly name: string = 'SendBackIncompleteError';
  constructor(
    readonly errorQueue: string,
    readonly key: string,
    /** Where the copy went. */
    readonly queue: string,
  ) {
    super(
      `nsq: entry ${key} was sent back to '${queue}' (nsqd took the copy), but its removal from '${errorQueue}' could not be confirmed: ` +
        'it may still be in the error queue, and sending it back again would send the message twice; look it up and delete it instead',
    );
  }
}

/** A removal (FIN) nsqd did not confirm: the entries may still be there. */
export class RemovalUnconfirmedError extends Error {
  override readonly name: string = 'RemovalUnconfirmedError';
  constructor(
    readonly errorQueue: string,
    readonly unconfirmed: number,
    what: 'sent back' | 'deleted',
  ) {
    super(
      `nsq: ${unconfirmed} ${unconfirmed === 1 ? 'entry was' : 'entries were'} ${what}, but nsqd did not confirm their removal from '${errorQueue}': ` +
        `some may still be there${what === 'sent back' ? '; sending them back again would send those messages twice, look them up and delete them instead' : ''}`,
    );
  }
}

/** An entry held by a pass on one node. */
interface Held {
  readonly entry: NsqErrorEntry;
  readonly message: HeldMessage;
  readonly pass: ChannelPass;
  readonly node: NsqOperationsNode;
}

/** Error-queue operations and queue inspection on NSQ. */
export class NsqOperations implements ErrorQueueOperations, QueueInspection {
  /** The channel error topics are read through. */
  readonly errorChannel: string;
  readonly #context: NsqOperationsContext;
  readonly #timeoutMs: number;
  readonly #locks = new KeyedLock();

  constructor(context: NsqOperationsContext) {
    this.errorChannel = context.errorChannel ?? DEFAULT_ERROR_CHANNEL;
    checkName(this.errorChannel, 'channel', 'NsqOperations: errorChannel');
    this.#context = context;
    this.#timeoutMs = context.timeoutMs ?? 5_000;
  }

  /**
   * Entries in the error queue, on every node: the error channel's ready
   * messages (`depth`), those held in flight by a reader (`in_flight_count`)
   * and those deferred (`deferred_count`). Before the channel exists, the
   * messages its topic holds for a first channel. 0 for a topic that does
   * not exist.
   */
  async count(errorQueue: string): Promise<number> {
    checkName(errorQueue, 'topic', 'error queue');
    let total = 0;
    for (const node of await this.#nodes()) {
      const topic = await node.http.topicStats(errorQueue);
      const channel = topic?.channels.find((c) => c.channel_name === this.errorChannel);
      if (channel) total += channel.depth + channel.in_flight_count + channel.deferred_count;
      else if (topic && topic.channels.length === 0) total += topic.depth;
    }
    return total;
  }

  /**
   * Every entry, oldest first, in one pass on each node: each entry read
   * once and held until the iteration ends, then given back. Stopping the
   * iteration early gives them back at once.
   */
  async *scan(errorQueue: string, options: ScanOptions = {}): AsyncGenerator<ErrorEntry[]> {
    checkName(errorQueue, 'topic', 'error queue');
    const pageSize = pageSizeOf(options.pageSize);
    const unlock = await this.#locks.acquire(errorQueue);
    try {
      const passes = await this.#openPasses(errorQueue, `scan '${errorQueue}'`);
      try {
        const held = await this.#readAll(errorQueue, passes);
        for (let at = 0; at < held.length; at += pageSize) yield held.slice(at, at + pageSize).map((h) => h.entry);
      } finally {
        await this.#finishAll(passes);
      }
    } finally {
      unlock();
    }
  }

  /** Entries, oldest first: one pass reads the whole queue and gives it back. */
  async browse(errorQueue: string, options: BrowseOptions = {}): Promise<ErrorEntry[]> {
    const offset = Math.max(0, Math.floor(options.offset ?? 0));
    const limit = Math.min(MAX_BROWSE_LIMIT, Math.max(0, Math.floor(options.limit ?? 100)));
    return this.#withEntries(errorQueue, `browse '${errorQueue}'`, async (held) => held.slice(offset, offset + limit).map((h) => h.entry));
  }

  /** One entry, or undefined when no entry has that key. */
  async get(errorQueue: string, key: string): Promise<ErrorEntry | undefined> {
    return this.#withEntries(errorQueue, `get entry ${key} of '${errorQueue}'`, async (held) => held.find((h) => h.entry.key === key)?.entry);
  }

  /**
   * Sends the entry back with a fresh retry state: the copy is published
   * (nsqd has it) before the entry is FINed. The destination is
   * `options.queue` or the queue the entry failed on; it must be a topic
   * some node has, not an error topic, and in `allowedQueues` when given.
   * Rejects with a {@link SendBackIncompleteError} when the copy went out
   * but the removal was not confirmed.
   */
  async sendBack(errorQueue: string, key: string, options: SendBackOptions = {}): Promise<string | undefined> {
    if (options.queue !== undefined) checkName(options.queue, 'topic', 'send-back queue');
    return this.#withEntries(errorQueue, `send back entry ${key} of '${errorQueue}'`, async (held, passes) => {
      const found = held.find((h) => h.entry.key === key);
      if (!found) return undefined;
      const destination = await this.#destination(errorQueue, found.entry, options, new Map());
      await this.#publishCopy(destination, found);
      found.pass.fin(found.message);
      if (!(await this.#finishAll(passes))) throw new SendBackIncompleteError(errorQueue, key, destination);
      return destination;
    });
  }

  /** Removes one entry (FIN); resolves whether it was there, once nsqd confirmed it. */
  async delete(errorQueue: string, key: string): Promise<boolean> {
    return this.#withEntries(errorQueue, `delete entry ${key} from '${errorQueue}'`, async (held, passes) => {
      const found = held.find((h) => h.entry.key === key);
      if (!found) return false;
      found.pass.fin(found.message);
      if (!(await this.#finishAll(passes))) throw new RemovalUnconfirmedError(errorQueue, 1, 'deleted');
      return true;
    });
  }

  /**
   * Removes every ready entry (`/channel/empty` on each node); resolves how
   * many were ready just before. Entries a reader holds in flight, and
   * deferred ones, stay.
   */
  async purge(errorQueue: string): Promise<number> {
    checkName(errorQueue, 'topic', 'error queue');
    return this.#locks.run(errorQueue, async () => {
      let purged = 0;
      for (const node of await this.#nodes()) {
        const topic = await node.http.topicStats(errorQueue);
        if (!topic) continue;
        const channel = topic.channels.find((c) => c.channel_name === this.errorChannel);
        if (channel) {
          purged += channel.depth;
          await node.http.emptyChannel(errorQueue, this.errorChannel);
        } else if (topic.channels.length === 0) {
          purged += topic.depth;
          await node.http.emptyTopic(errorQueue);
        }
      }
      return purged;
    });
  }

  /** Sends back every selected entry in one pass: each copy published before its entry is FINed; the rest given back. */
  async sendBackEach(errorQueue: string, options: BulkSendBackOptions): Promise<BulkSummary> {
    if (options.queue !== undefined) checkName(options.queue, 'topic', 'send-back queue');
    const destinationOptions = sendBackOptionsOf(options);
    const kinds = new Map<string, QueueKind>();
    return this.#bulk(errorQueue, `send back entries of '${errorQueue}'`, options, 'sent back', async (held, tally) => {
      let destination: string;
      try {
        destination = await this.#destination(errorQueue, held.entry, destinationOptions, kinds);
        await this.#publishCopy(destination, held);
      } catch (error) {
        tally.record(failureResult(held.entry, error));
        return false;
      }
      held.pass.fin(held.message);
      tally.record({ outcome: 'sent', entry: held.entry, queue: destination });
      return true;
    });
  }

  /** Removes every selected entry in one pass (FIN); the rest given back. */
  async deleteEach(errorQueue: string, options: BulkOptions): Promise<BulkSummary> {
    return this.#bulk(errorQueue, `delete entries of '${errorQueue}'`, options, 'deleted', async (held, tally) => {
      held.pass.fin(held.message);
      tally.record({ outcome: 'deleted', entry: held.entry });
      return true;
    });
  }

  /**
   * Moves up to `limit` of the oldest ready entries to `store`: holds them,
   * waits for `store`, then FINs them; when `store` rejects they are given
   * back. For the error store's ingester, which then reads through the
   * error channel too.
   */
  async drain(errorQueue: string, limit: number, store: (entries: ErrorEntry[]) => Promise<void>): Promise<number> {
    checkName(errorQueue, 'topic', 'error queue');
    return this.#locks.run(errorQueue, async () => {
      const passes = await this.#openPasses(errorQueue, `drain '${errorQueue}'`, Math.max(1, Math.floor(limit)));
      try {
        const held = (await this.#readAll(errorQueue, passes)).slice(0, limit);
        if (held.length === 0) return 0;
        await store(held.map((h) => h.entry));
        for (const h of held) h.pass.fin(h.message);
        if (!(await this.#finishAll(passes))) throw new RemovalUnconfirmedError(errorQueue, held.length, 'deleted');
        return held.length;
      } finally {
        await this.#finishAll(passes);
      }
    });
  }

  /**
   * Depths from nsqd's `/stats`, summed over the nodes. Without `queues`:
   * every topic of every node. A topic with the error channel is `error`
   * and is read through it; any other is `work`, read through the
   * transport's channel (or, before that channel exists, the topic's own
   * depth as `ready`).
   *
   * - `ready`: the channel's `depth`, waiting to be sent to a consumer.
   * - `delayed`: its `deferred_count`, delayed retries (DPUB/REQ) not yet due.
   * - `inFlight`: its `in_flight_count`, sent to a consumer (or held by an
   *   error-queue pass) and not yet finished or requeued.
   *
   * A named topic that no node has shows zeros.
   */
  async queueDepths(queues?: readonly string[]): Promise<QueueDepth[]> {
    if (queues !== undefined) for (const queue of queues) checkName(queue, 'topic', 'queue');
    const rows = new Map<string, { kind: 'work' | 'error'; ready: number; delayed: number; inFlight: number }>();
    for (const queue of queues ?? []) rows.set(queue, { kind: 'work', ready: 0, delayed: 0, inFlight: 0 });
    for (const node of await this.#nodes()) {
      const stats = queues?.length === 1 ? { topics: [await node.http.topicStats(queues[0]!)].filter((t): t is NsqTopicStats => t !== undefined) } : await node.http.stats();
      for (const topic of stats.topics) {
        if (queues !== undefined && !rows.has(topic.topic_name)) continue;
        const row = rows.get(topic.topic_name) ?? { kind: 'work' as const, ready: 0, delayed: 0, inFlight: 0 };
        const errorChannel = topic.channels.find((c) => c.channel_name === this.errorChannel);
        if (errorChannel) row.kind = 'error';
        const channel: NsqChannelStats | undefined = errorChannel ?? topic.channels.find((c) => c.channel_name === this.#context.channel);
        if (channel) {
          row.ready += channel.depth;
          row.delayed += channel.deferred_count;
          row.inFlight += channel.in_flight_count;
        } else {
          row.ready += topic.depth;
        }
        rows.set(topic.topic_name, row);
      }
    }
    const names = queues ?? [...rows.keys()].sort();
    return names.map((queue) => ({ queue, ...rows.get(queue)! }));
  }

  /** `missing` for a topic no node has, `error` for one with the error channel, `work` otherwise. Changes nothing. */
  async queueKinds(queues: readonly string[]): Promise<ReadonlyMap<string, QueueKind>> {
    for (const queue of queues) checkName(queue, 'topic', 'queue');
    const kinds = new Map<string, QueueKind>();
    const nodes = await this.#nodes();
    for (const queue of queues) {
      let kind: QueueKind = 'missing';
      for (const node of nodes) {
        const topic = await node.http.topicStats(queue);
        if (!topic) continue;
        kind = topic.channels.some((c) => c.channel_name === this.errorChannel) ? 'error' : 'work';
        if (kind === 'error') break;
      }
      kinds.set(queue, kind);
    }
    return kinds;
  }

  /** Where an entry goes: checked against the operator's list, then against the nodes (once per destination in `kinds`). */
  async #destination(errorQueue: string, entry: ErrorEntry, options: SendBackOptions, kinds: Map<string, QueueKind>): Promise<string> {
    const destination = options.queue ?? failureQueueOf(entry.headers);
    if (destination === undefined) throw noDestination(entry.messageId);
    checkName(destination, 'topic', 'send-back queue');
    checkDestinationAllowed(destination, errorQueue, entry.messageId, options.allowedQueues);
    let kind = kinds.get(destination);
    if (kind === undefined) {
      kind = (await this.queueKinds([destination])).get(destination)!;
      kinds.set(destination, kind);
    }
    if (kind === 'missing') throw new SendBackRefusedError(destination, 'missing', entry.messageId);
    if (kind === 'error') throw new SendBackRefusedError(destination, 'error-queue', entry.messageId);
    return destination;
  }

  /** Publishes the entry's copy with a fresh retry state, resolving once nsqd has it. */
  async #publishCopy(destination: string, held: Held): Promise<void> {
    const bytes = envelopeOf(held.entry.messageId, replayHeaders(held.entry.headers, new Date(this.#context.clock.now())), held.entry.body);
    const publish = this.#context.publish ?? ((topic, body, node) => node.http.publish(topic, body));
    await publish(destination, bytes, held.node);
  }

  async #bulk(
    errorQueue: string,
    operation: string,
    options: BulkOptions,
    what: 'sent back' | 'deleted',
    act: (held: Held, tally: BulkTally) => Promise<boolean>,
  ): Promise<BulkSummary> {
    checkName(errorQueue, 'topic', 'error queue');
    return this.#locks.run(errorQueue, async () => {
      const tally = new BulkTally(options.onResult);
      const passes = await this.#openPasses(errorQueue, operation);
      let removed = 0;
      let confirmed = false;
      try {
        const all = await this.#readAll(errorQueue, passes);
        for (const held of all) {
          if (options.signal?.aborted) tally.interrupted = true;
          if (tally.interrupted || tally.callbackFailed) break;
          tally.read++;
          options.onRead?.(1);
          if (!options.select(held.entry)) continue;
          tally.selected++;
          if (await act(held, tally)) removed++;
        }
        tally.unseen = passes.reduce((n, p) => n + p.pass.unseen, 0);
      } finally {
        confirmed = await this.#finishAll(passes);
      }
      if (!confirmed && removed > 0) throw new RemovalUnconfirmedError(errorQueue, removed, what);
      return tally.summary();
    });
  }

  /** Runs `fn` on every entry, held, after the other operations on `errorQueue` of this transport; everything not FINed goes back. */
  async #withEntries<T>(errorQueue: string, operation: string, fn: (held: Held[], passes: { pass: ChannelPass }[]) => Promise<T>): Promise<T> {
    checkName(errorQueue, 'topic', 'error queue');
    return this.#locks.run(errorQueue, async () => {
      const passes = await this.#openPasses(errorQueue, operation);
      try {
        return await fn(await this.#readAll(errorQueue, passes), passes);
      } finally {
        await this.#finishAll(passes);
      }
    });
  }

  /** Opens a pass on every node that has the error topic. */
  async #openPasses(errorQueue: string, operation: string, limit?: number): Promise<{ pass: ChannelPass; node: NsqOperationsNode }[]> {
    const passes: { pass: ChannelPass; node: NsqOperationsNode }[] = [];
    try {
      for (const node of await this.#nodes()) {
        if ((await node.http.topicStats(errorQueue)) === undefined) continue;
        const [maxRdy, maxMsgTimeoutMs] = await Promise.all([
          node.http.numberOption('max_rdy_count').catch(() => DEFAULT_MAX_RDY),
          node.http.durationMs('max_msg_timeout').catch(() => DEFAULT_MAX_MSG_TIMEOUT_MS),
        ]);
        const pass = await ChannelPass.open({
          tcp: node.tcp,
          http: node.http,
          topic: errorQueue,
          channel: this.errorChannel,
          clientId: `${this.#context.connectionName}-ops`,
          maxHeld: maxRdy,
          ...(limit === undefined ? {} : { limit: Math.min(limit, maxRdy) }),
          timeoutMs: this.#timeoutMs,
          leaseMs: Math.max(1_000, Math.min(PASS_LEASE_MS, maxMsgTimeoutMs)),
          operation,
        });
        passes.push({ pass, node });
      }
    } catch (error) {
      await this.#finishAll(passes);
      throw error;
    }
    return passes;
  }

  /** Reads every pass whole; the entries of all nodes, oldest first. */
  async #readAll(errorQueue: string, passes: readonly { pass: ChannelPass; node: NsqOperationsNode }[]): Promise<Held[]> {
    const held: Held[] = [];
    for (const { pass, node } of passes) {
      for (const message of await pass.readAll()) held.push({ entry: errorEntryOf(errorQueue, message), message, pass, node });
    }
    return held.sort((a, b) => (a.message.timestamp < b.message.timestamp ? -1 : a.message.timestamp > b.message.timestamp ? 1 : 0));
  }

  /** Ends every pass (each at most once); resolves whether nsqd confirmed all of them. */
  async #finishAll(passes: readonly { pass: ChannelPass }[]): Promise<boolean> {
    const results = await Promise.all(passes.map((p) => p.pass.finish()));
    return results.every(Boolean);
  }

  async #nodes(): Promise<readonly NsqOperationsNode[]> {
    const { nodes } = this.#context;
    return typeof nodes === 'function' ? nodes() : nodes;
  }
}
