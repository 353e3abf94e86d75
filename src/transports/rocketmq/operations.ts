/**
 * The operator's side of RocketMQ: browse, replay and delete error-queue
 * entries, and read queue depths (`transport.errorQueue` and
 * `transport.inspection`).
 *
 * An error queue is a topic, read whole without consuming it (./reader.ts):
 * a read changes nothing and hides nothing (`unseen` is always 0). An
 * entry's key is where the broker stores it, `<broker>:<queueId>:<offset>`.
 * A broker keeps a message until its commit log file expires and cannot
 * delete one, so removing an entry (a send-back, a delete, a purge) writes
 * its key to the error queue's removal topic, `%REMOVED%<errorQueue>`, and
 * every read leaves the keys found there out. A send-back sends the copy
 * first and records the removal after: a crash in between leaves the
 * entry, and a second send-back sends a second copy.
 *
 * The broker's own dead-letter topics (`%DLQ%<group>`) are error queues
 * too: messages the broker dead-lettered after its `maxReconsumeTimes`.
 * Such an entry carries no redeliver failure headers; unless it has one,
 * its `redeliver-failure-queue` is the topic the broker recorded it came
 * from (its `RETRY_TOPIC` property, `%RETRY%<group>_<topic>` for messages
 * consumed by pop, else `REAL_TOPIC`), so a send-back returns it there by
 * default.
 */
import { HEADER } from '../../headers/names.js';
import { replayHeaders } from '../../headers/replay.js';
import { pageSizeOf } from '../../operations/scan-page.js';
import type { Clock } from '../../time/clock.js';
import type { BrowseOptions, ErrorEntry, ErrorQueueOperations, ScanOptions, SendBackOptions } from '../../transport/error-queue.js';
import type { QueueDepth, QueueInspection, QueueKind } from '../../transport/inspection.js';
import { KeyedErrorQueueOperations } from '../../transport/keyed-operations.js';
import { checkWorkQueue, sendBackDestination } from '../../transport/send-back.js';
import type { Headers } from '../../transport/types.js';
import { DLQ_PREFIX, RETRY_PREFIX, type RocketMqAdmin } from './admin.js';
import { decodeProperties } from './codec.js';
import { TopicReader, type StoredMessage } from './reader.js';

/** The topic recording the removed entries of `errorQueue`. */
export function removalTopic(errorQueue: string): string {
  return `%REMOVED%${errorQueue}`;
}

/** What the operations need of the transport. */
export interface OperationsHost {
  readonly admin: RocketMqAdmin;
  /** The consumer group whose progress queue depths are read against. */
  readonly consumerGroup: string;
  readonly clock: Clock;
  /** The topics this transport created or checked. */
  knownTopics(): string[];
  /** Messages of `queue` this transport's own consumers hold: handed out and not settled, or received and waiting for room. */
  heldBy(queue: string): number;
  /** Sends a message to an existing topic. */
  sendTo(topic: string, id: string, body: Uint8Array, headers: Headers): Promise<void>;
  /** Sends a removal record (the key as body) to `topic`, creating it when missing. */
  recordRemoval(topic: string, key: string): Promise<void>;
}

/** The most removal records `drain` has in flight at once. */
const REMOVAL_CONCURRENCY = 32;

/** Error-queue operations and queue inspection on RocketMQ. */
export class RocketMqOperations extends KeyedErrorQueueOperations implements ErrorQueueOperations, QueueInspection {
  readonly #host: OperationsHost;
  readonly #reader: TopicReader;
  /** Keys this process removed, seen by its reads before the broker serves the removal record. */
  readonly #removed = new Map<string, Set<string>>();

  constructor(host: OperationsHost) {
    super();
    this.#host = host;
    this.#reader = new TopicReader(host.admin, `${host.consumerGroup}-operator`);
  }

  async count(errorQueue: string): Promise<number> {
    return (await this.#entries(errorQueue)).length;
  }

  async browse(errorQueue: string, options: BrowseOptions = {}): Promise<ErrorEntry[]> {
    const offset = Math.max(0, Math.floor(options.offset ?? 0));
    const limit = Math.max(0, Math.floor(options.limit ?? 100));
    return (await this.#entries(errorQueue)).slice(offset, offset + limit);
  }

  /** Every entry the queue held when the scan began, oldest first, a page at a time. */
  async *scan(errorQueue: string, options: ScanOptions = {}): AsyncGenerator<ErrorEntry[]> {
    const pageSize = pageSizeOf(options.pageSize);
    const entries = await this.#entries(errorQueue);
    for (let i = 0; i < entries.length; i += pageSize) yield entries.slice(i, i + pageSize);
  }

  async get(errorQueue: string, key: string): Promise<ErrorEntry | undefined> {
    return (await this.#entries(errorQueue)).find((e) => e.key === key);
  }

  /** Sends the entry back (a fresh retry state) to an existing work queue, then records its removal. */
  async sendBack(errorQueue: string, key: string, options: SendBackOptions = {}): Promise<string | undefined> {
    const entry = await this.get(errorQueue, key);
    if (entry === undefined) return undefined;
    const destination = sendBackDestination(errorQueue, entry.messageId, entry.headers, options);
    const kind = (await this.queueKinds([destination])).get(destination);
    checkWorkQueue(destination, kind, entry.messageId);
    await this.#host.sendTo(destination, entry.messageId, entry.body, replayHeaders(entry.headers, new Date(this.#host.clock.now())));
    await this.#remove(errorQueue, key);
    return destination;
  }

  async delete(errorQueue: string, key: string): Promise<boolean> {
    if ((await this.get(errorQueue, key)) === undefined) return false;
    await this.#remove(errorQueue, key);
    return true;
  }

  /**
   * Hands up to `limit` of the oldest entries to `store`, and once it
   * resolves records each one's removal; when `store` rejects nothing is
   * removed. Reading the topic consumes nothing, so entries a consumer of the
   * error queue holds are handed over too. See `ErrorQueueOperations.drain`.
   */
  async drain(errorQueue: string, limit: number, store: (entries: ErrorEntry[]) => Promise<void>): Promise<number> {
    if (!(Number.isSafeInteger(limit) && limit >= 1)) throw new RangeError(`drain: limit must be a whole number >= 1, got ${limit}`);
    const entries = (await this.#entries(errorQueue)).slice(0, limit);
    if (entries.length === 0) return 0;
    await store(entries);
    for (let i = 0; i < entries.length; i += REMOVAL_CONCURRENCY) {
      await Promise.all(entries.slice(i, i + REMOVAL_CONCURRENCY).map((e) => this.#remove(errorQueue, e.key)));
    }
    return entries.length;
  }

  async purge(errorQueue: string): Promise<number> {
    const entries = await this.#entries(errorQueue);
    for (const entry of entries) await this.#remove(errorQueue, entry.key);
    return entries.length;
  }

  /**
   * Depths of the queues this transport created or checked, or of
   * `queues`, as far as the brokers tell them:
   *
   * - `ready`: messages written to the topic and not yet received by the
   *   transport's consumer group, and those given back (released, or whose
   *   lease ran out) waiting in the group's retry topic of it,
   *   `%RETRY%<group>_<topic>`; for an error queue, its entries;
   * - `delayed`: timed messages for the topic waiting in the brokers'
   *   timers (delayed sends, delayed retries and their hops, whoever sent
   *   them);
   * - `inFlight`: only the messages this transport's own consumers hold.
   *   A broker does not report the messages other processes received and
   *   have not acknowledged (its count feeds only its OpenTelemetry
   *   metrics, off by default), so the CLI or a dashboard in a process of
   *   its own reads 0 here; those messages count in no column until they
   *   are acknowledged or come back as ready.
   */
  async queueDepths(queues?: readonly string[]): Promise<QueueDepth[]> {
    const names = queues ?? this.#host.knownTopics().sort();
    const kinds = await this.queueKinds(names);
    const { admin, consumerGroup } = this.#host;
    const timed = names.some((q) => kinds.get(q) === 'work') ? await admin.timedCounts() : new Map<string, number>();
    const out: QueueDepth[] = [];
    for (const queue of names) {
      const kind = kinds.get(queue);
      if (kind === 'missing' && queues === undefined) continue;
      const inFlight = this.#host.heldBy(queue);
      if (kind === 'error') {
        out.push({ queue, kind, ready: await this.count(queue), delayed: 0, inFlight });
        continue;
      }
      let ready = 0;
      if (kind === 'work') {
        for (const topic of [queue, ...popRetryTopics(consumerGroup, queue)]) {
          for (const o of await admin.offsets(topic, consumerGroup)) ready += Math.max(0, o.max - o.consumed);
        }
      }
      out.push({ queue, kind: 'work', ready, delayed: timed.get(queue) ?? 0, inFlight });
    }
    return out;
  }

  /** Each queue's kind as the broker reports it (see ./admin.ts); `missing` when the name server routes it nowhere. */
  async queueKinds(queues: readonly string[]): Promise<ReadonlyMap<string, QueueKind>> {
    const out = new Map<string, QueueKind>();
    for (const queue of queues) out.set(queue, (await this.#host.admin.kind(queue)) ?? 'missing');
    return out;
  }

  async #entries(errorQueue: string): Promise<ErrorEntry[]> {
    const [stored, removals] = await Promise.all([this.#reader.readAll(errorQueue), this.#reader.readAll(removalTopic(errorQueue))]);
    const removed = new Set(removals.map((r) => r.body.toString('utf8')));
    for (const key of this.#removed.get(errorQueue) ?? []) removed.add(key);
    return stored.filter((m) => !removed.has(m.key)).map((m) => entryOf(errorQueue, m));
  }

  async #remove(errorQueue: string, key: string): Promise<void> {
    await this.#host.recordRemoval(removalTopic(errorQueue), key);
    let keys = this.#removed.get(errorQueue);
    if (keys === undefined) this.#removed.set(errorQueue, (keys = new Set()));
    keys.add(key);
  }
}

/**
 * The topics a broker gives messages of `topic` back in for consumer group
 * `group` when they were received by pop and not acknowledged: its retry
 * topic of the topic, named `%RETRY%<group>_<topic>`, or
 * `%RETRY%<group>+<topic>` on brokers with `enableRetryTopicV2`.
 */
export function popRetryTopics(group: string, topic: string): string[] {
  return [`${RETRY_PREFIX}${group}_${topic}`, `${RETRY_PREFIX}${group}+${topic}`];
}

/** The broker's properties that are not the user's. */
const SYSTEM_PROPERTY = /^(UNIQ_KEY|KEYS|TAGS|WAIT|DELAY|RETRY_TOPIC|REAL_TOPIC|REAL_QID|TRAN_MSG|PGROUP|MIN_OFFSET|MAX_OFFSET|MSG_REGION|TRACE_ON|CLUSTER|RECONSUME_TIME|MAX_RECONSUME_TIMES|ORIGIN_MESSAGE_ID|CONSUME_START_TIME|BORN_TIMESTAMP|TIMER_.*|POP_CK.*|INNER_.*|__.*)$/;

export function entryOf(errorQueue: string, m: StoredMessage): ErrorEntry {
  const user = new Map([...m.properties].filter(([k]) => !SYSTEM_PROPERTY.test(k)));
  const decoded = decodeProperties(m.properties.get('UNIQ_KEY') ?? m.key, user);
  const origin = errorQueue.startsWith(DLQ_PREFIX) ? originalTopic(m.properties, errorQueue.slice(DLQ_PREFIX.length)) : undefined;
  const headers = origin === undefined || decoded.headers[HEADER.failureQueue] !== undefined ? decoded.headers : { ...decoded.headers, [HEADER.failureQueue]: origin };
  return { key: m.key, messageId: decoded.id, errorQueue, body: m.body, headers };
}

/**
 * The topic a message consumer group `group` dead-lettered came from: its
 * `RETRY_TOPIC` property, the topic itself or, for messages consumed by
 * pop (`SimpleConsumer`s), the group's retry topic of it,
 * `%RETRY%<group>_<topic>`; else its `REAL_TOPIC`. Undefined when neither
 * names a topic of the user's.
 */
function originalTopic(properties: ReadonlyMap<string, string>, group: string): string | undefined {
  const popRetry = `${RETRY_PREFIX}${group}_`;
  for (const name of ['RETRY_TOPIC', 'REAL_TOPIC']) {
    let topic = properties.get(name);
    if (topic?.startsWith(popRetry)) topic = topic.slice(popRetry.length);
    if (topic !== undefined && topic.length > 0 && !topic.startsWith('%') && !topic.startsWith('rmq_sys_')) return topic;
  }
  return undefined;
}
