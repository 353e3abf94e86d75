/**
 * Makes the streams and consumers a queue needs, once per transport: a
 * queue's stream and its `redeliver` consumer, the prefix's delay stream
 * with one consumer per queue, and the clock stream. Each is looked up
 * first and created only when missing; one that exists with another
 * purpose is refused with a `StreamConflictError`.
 */
import {
  AckPolicy,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type ConsumerInfo,
  type JetStreamManager,
  type StreamConfig,
  type StreamInfo,
} from '@nats-io/jetstream';
import { StreamConflictError } from './errors.js';
import { QUEUE_CONSUMER, QUEUE_DESCRIPTION, type JetStreamNames, type JetStreamQueueKind, type QueueNames } from './names.js';
import type { ResolvedJetStreamOptions } from './options.js';

const NS_PER_MS = 1_000_000;
/**
 * How long the transport waits before it makes again a stream it saw
 * deleted: nats-server 2.9 removes a deleted stream's files after it
 * answers, and a stream made under the same name meanwhile can lose its
 * directory (and the messages stored in it) to that removal.
 */
export const REMAKE_AFTER_MS = 3_000;
/** How often a stream without a leader is looked at again. */
const LEADER_POLL_MS = 200;
/** How long the delay mover holds a retry before the server offers it again (a mover that died). */
export const DELAY_ACK_WAIT_MS = 10_000;

/** Whether an error is the server's "stream not found" or "consumer not found". */
export function isNotFound(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 10059 || code === 10014;
}

/** What the transport learned about a queue's consumer. */
export interface QueueConsumer {
  readonly names: QueueNames;
  /** The consumer's `ack_wait` in ms: how long a delivery's lease lasts. */
  readonly ackWaitMs: number;
}

/** Creates what queues need on the server, each thing once. */
export class Topology {
  readonly #jsm: JetStreamManager;
  readonly #options: ResolvedJetStreamOptions;
  readonly #streams = new Map<string, Promise<StreamInfo>>();
  /** Streams this transport has seen exist: one missing now was deleted. */
  readonly #seen = new Set<string>();
  readonly #consumers = new Map<string, Promise<ConsumerInfo>>();

  constructor(jsm: JetStreamManager, options: ResolvedJetStreamOptions) {
    this.#jsm = jsm;
    this.#options = options;
  }

  get names(): JetStreamNames {
    return this.#options.names;
  }

  /** The queue's stream, created as `kind` when missing. */
  async queue(queue: string, kind: JetStreamQueueKind): Promise<QueueNames> {
    const names = this.names.of(queue);
    const info = await this.#stream(names.stream, () => this.#queueStreamConfig(names, kind));
    if (!info.config.subjects?.includes(names.subject)) throw new StreamConflictError(names.stream, `does not take subject ${names.subject}`);
    return names;
  }

  /** The queue's stream and its `redeliver` consumer (created with `ack_wait` = `leaseMs` when missing). */
  async queueConsumer(queue: string, leaseMs: number): Promise<QueueConsumer> {
    const names = await this.queue(queue, 'work');
    const info = await this.#consumer(names.stream, QUEUE_CONSUMER, {
      durable_name: QUEUE_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      ack_wait: leaseMs * NS_PER_MS,
      max_deliver: -1,
      max_ack_pending: this.#options.maxAckPending,
    });
    const logger = this.#options.logger;
    const maxDeliver = info.config.max_deliver ?? -1;
    if (maxDeliver > 0) {
      logger?.warn(
        { queue, stream: names.stream, maxDeliver },
        `jetstream: consumer ${QUEUE_CONSUMER} of ${names.stream} has max_deliver ${maxDeliver}: the server stops giving out a message after ${maxDeliver} deliveries and leaves it in the stream, whatever redeliver's policy says; set it to -1`,
      );
    }
    const ackWaitMs = Math.round((info.config.ack_wait ?? leaseMs * NS_PER_MS) / NS_PER_MS);
    if (ackWaitMs !== leaseMs) {
      logger?.info({ queue, ackWaitMs, leaseMs }, `jetstream: consumer of ${names.stream} keeps its ack_wait of ${ackWaitMs} ms (asked for ${leaseMs}): leases last ${ackWaitMs} ms`);
    }
    return { names, ackWaitMs };
  }

  /** The delay stream and the consumer of `queue`'s delayed retries. */
  async delayConsumer(queue: string): Promise<QueueNames> {
    const names = this.names.of(queue);
    await this.delayStream();
    await this.#consumer(this.names.delayStream, names.delayConsumer, {
      durable_name: names.delayConsumer,
      filter_subject: names.delaySubject,
      ack_policy: AckPolicy.Explicit,
      ack_wait: DELAY_ACK_WAIT_MS * NS_PER_MS,
      max_deliver: -1,
      max_ack_pending: -1,
    });
    return names;
  }

  /** The prefix's delay stream. */
  async delayStream(): Promise<void> {
    const n = this.names;
    await this.#stream(n.delayStream, () => ({ ...this.#common(), name: n.delayStream, subjects: [n.delaySubjects], description: 'redeliver delayed retries' }));
  }

  /** The prefix's clock stream: one message, in memory. */
  async clockStream(): Promise<void> {
    const n = this.names;
    await this.#stream(n.clockStream, () => ({
      name: n.clockStream,
      subjects: [n.clockSubject],
      retention: RetentionPolicy.Limits,
      storage: StorageType.Memory,
      discard: DiscardPolicy.Old,
      max_msgs: 1,
      num_replicas: 1,
      description: 'redeliver server clock probe',
    }));
  }

  /**
   * Waits until the stream of `queue` has a leader, for at most
   * `apiTimeoutMs`: a stream of several replicas just made, or whose leader
   * died, refuses every publish until its servers elect one (seconds).
   * Resolves whether it has one; a single server's stream always has.
   */
  async awaitLeader(queue: string): Promise<boolean> {
    return this.#awaitLeader(this.names.of(queue).stream);
  }

  async #awaitLeader(stream: string): Promise<boolean> {
    const clock = this.#options.clock;
    const deadline = clock.monotonic() + this.#options.apiTimeoutMs;
    for (;;) {
      const info = await this.#jsm.streams.info(stream).catch(() => undefined);
      if (info !== undefined && (info.cluster === undefined || info.cluster.leader !== undefined)) return true;
      if (clock.monotonic() >= deadline) return false;
      await clock.sleep(LEADER_POLL_MS);
    }
  }

  /** Makes `queue`'s stream again when a publish found none: forgets it, looks it up or makes it as `kind`, and waits for its leader. */
  async remake(queue: string, kind: JetStreamQueueKind): Promise<void> {
    this.forget(queue);
    await this.queue(queue, kind);
    await this.awaitLeader(queue);
  }

  /** Forgets what was made for `queue`, so the next use looks it up again (after the stream was deleted). */
  forget(queue: string): void {
    const names = this.names.of(queue);
    this.#streams.delete(names.stream);
    this.#consumers.delete(`${names.stream}/${QUEUE_CONSUMER}`);
    this.#consumers.delete(`${this.names.delayStream}/${names.delayConsumer}`);
  }

  /** Forgets the delay stream (after it was deleted) and every consumer on it. */
  forgetDelays(): void {
    this.#streams.delete(this.names.delayStream);
    for (const key of this.#consumers.keys()) if (key.startsWith(`${this.names.delayStream}/`)) this.#consumers.delete(key);
  }

  #queueStreamConfig(names: QueueNames, kind: JetStreamQueueKind): Partial<StreamConfig> {
    const config: Partial<StreamConfig> = { ...this.#common(), name: names.stream, subjects: [names.subject], description: QUEUE_DESCRIPTION[kind] };
    if (kind === 'work' && this.#options.maxLength !== undefined) config.max_msgs = this.#options.maxLength;
    // An error queue is read by the operator's passes a message at a time: direct gets answer with the message itself, not JSON around it.
    if (kind === 'error') config.allow_direct = true;
    return config;
  }

  #common(): Partial<StreamConfig> {
    return {
      retention: RetentionPolicy.Workqueue,
      storage: StorageType.File,
      discard: DiscardPolicy.New,
      num_replicas: this.#options.replicas,
      duplicate_window: this.#options.duplicateWindowMs * NS_PER_MS,
    };
  }

  #stream(name: string, config: () => Partial<StreamConfig>): Promise<StreamInfo> {
    let pending = this.#streams.get(name);
    if (pending === undefined) {
      const wanted = config();
      pending = this.#lookUpOrCreate(
        () => this.#jsm.streams.info(name),
        async () => {
          if (this.#seen.has(name)) await this.#options.clock.sleep(REMAKE_AFTER_MS);
          return this.#jsm.streams.add(wanted as StreamConfig);
        },
      ).then(async (info) => {
        this.#seen.add(name);
        if (info.cluster !== undefined && info.cluster.leader === undefined) await this.#awaitLeader(name);
        const retention = info.config.retention;
        if (wanted.retention !== undefined && retention !== wanted.retention) throw new StreamConflictError(name, `has retention ${retention}, not ${wanted.retention}`);
        return info;
      });
      this.#remember(this.#streams, name, pending);
    }
    return pending;
  }

  #consumer(stream: string, name: string, config: Partial<ConsumerConfig>): Promise<ConsumerInfo> {
    const key = `${stream}/${name}`;
    let pending = this.#consumers.get(key);
    if (pending === undefined) {
      pending = this.#lookUpOrCreate(
        () => this.#jsm.consumers.info(stream, name),
        () => this.#jsm.consumers.add(stream, config),
      );
      this.#remember(this.#consumers, key, pending);
    }
    return pending;
  }

  /**
   * Looks the thing up; creates it when missing. When creating fails, looks
   * again for up to `apiTimeoutMs`: someone else made it meanwhile, or the
   * cluster is still electing the new stream's leader (a create can time
   * out while the group elects, and lookups go unanswered until it has
   * one). Rejects with the create's error when the thing is not there.
   */
  async #lookUpOrCreate<T>(info: () => Promise<T>, add: () => Promise<T>): Promise<T> {
    try {
      return await info();
    } catch (error) {
      if (!isNotFound(error)) throw error;
    }
    try {
      return await add();
    } catch (error) {
      return this.#lookAgain(info, error);
    }
  }

  async #lookAgain<T>(info: () => Promise<T>, addError: unknown): Promise<T> {
    const clock = this.#options.clock;
    const deadline = clock.monotonic() + this.#options.apiTimeoutMs;
    for (;;) {
      try {
        return await info();
      } catch (error) {
        if (isNotFound(error) || clock.monotonic() >= deadline) throw addError;
      }
      await clock.sleep(LEADER_POLL_MS);
    }
  }

  /** Keeps a lookup while it succeeds; a failed one is forgotten so the next call tries again. */
  #remember<T>(map: Map<string, Promise<T>>, key: string, pending: Promise<T>): void {
    map.set(key, pending);
    pending.catch(() => {
      if (map.get(key) === pending) map.delete(key);
    });
  }
}
