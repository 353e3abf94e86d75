import { checkConsume, checkHeaders, checkQueue } from '../../transport/arguments.js';
import { MAX_HELD_DELAY_MS, sendDelay } from '../../transport/delay.js';
import type { SendErrorKind } from '../../transport/send-errors.js';
import type {
  ConsumeOptions,
  DeliveryListener,
  OutgoingMessage,
  Subscription,
  Transport,
  TransportCapabilities,
} from '../../transport/types.js';
import { isCluster, type RedisClient } from './cluster.js';
import { encodeHeaders } from './codec.js';
import { openClient, readServerSettings, serverWarnings, whileReachable, type ServerSettings } from './connection.js';
import { MessageTooLargeError, QueueFullError, TransportClosedError } from './errors.js';
import { GROUP, RedisKeys } from './keys.js';
import { RedisOperations } from './operations.js';
import { replicaMark, waitForReplicas } from './replicas.js';
import { leaseOption, resolveRedisOptions, type RedisTransportOptions, type ResolvedRedisOptions } from './options.js';
import { FORGET_CONSUMER } from './scripts/forget-consumer.js';
import { ScriptRunner } from './scripts/runner.js';
import { SEND } from './scripts/send.js';
import { classifyRedisSendError } from './send-errors.js';
import { Settler } from './settler.js';
import { RedisSubscription } from './subscription.js';

/** The most messages of one `sendBatch` written by one script call. */
export const SEND_BATCH_CHUNK = 500;

/**
 * The Redis transport: each queue is a stream read by a consumer group, its
 * delayed retries a sorted set on the server, its error queue another stream.
 *
 * - A delivery is an entry in the group's pending entries list; its lease is
 *   the entry's idle time there, and a consumer takes over entries idle longer
 *   than `leaseMs`, which counts a delivery.
 * - Every settlement is one Lua script that writes the copy (retry or error
 *   entry) before it acks and deletes the original, and applies only while
 *   this consumer still holds the entry: never a second copy, never none.
 * - With `waitReplicas`, a send or a settlement that writes a copy resolves
 *   only once that many replicas have it (`WAIT`).
 * - Delays, of retries and of delayed sends, are held by the server, by its
 *   clock; each consumer keeps one wake-up for the earliest due one of its
 *   queue (a delayed send of this transport wakes its consumers of that
 *   queue; one from another process is found within `pollIntervalMs`).
 *
 * Durability is the server's: see docs/redis.md.
 */
export class RedisTransport implements Transport {
  readonly name = 'redis';
  readonly capabilities: TransportCapabilities = { nativeDelay: true, nativeDeliveryCount: true, atomicSettle: true };
  /** Delays wait in the server; the consumers' wake-ups for them are timers, which hold at most 2^31-1 ms. */
  readonly limits = Object.freeze({ maxDelayMs: MAX_HELD_DELAY_MS });
  /** The key names of this transport's prefix. */
  readonly keys: RedisKeys;
  /** The client commands go on: the one passed in, or the transport's own. */
  readonly client: RedisClient;
  /** Runs the transport's scripts on {@link client}. */
  readonly scripts: ScriptRunner;
  readonly #options: ResolvedRedisOptions;
  readonly #ownsClient: boolean;
  readonly #consumers = new Map<string, Set<RedisSubscription>>();
  readonly #settlers = new Map<string, Settler>();
  /** The connection settlements and lease extensions go on, opened with the first consumer; always the transport's own. */
  #settling: { readonly client: RedisClient; readonly scripts: ScriptRunner } | undefined;
  readonly #operations: RedisOperations;
  #serverChecked: Promise<ServerSettings | undefined> | undefined;
  #closed = false;

  /** Checks the options and starts connecting; throws if an option is invalid. */
  constructor(options: RedisTransportOptions = {}) {
    this.#options = resolveRedisOptions(options);
    this.keys = new RedisKeys(this.#options.keyPrefix);
    this.#ownsClient = this.#options.client === undefined;
    this.client = this.#ownsClient ? openClient(this.#options, false) : this.#options.client!;
    this.scripts = new ScriptRunner(this.client);
    this.#operations = new RedisOperations(this.client, this.keys, this.scripts, this.#options.clock, this.#options.waitReplicas);
  }

  /** Browse, replay and delete error-queue entries (see ./operations.ts). */
  get errorQueue(): RedisOperations {
    return this.#operations;
  }

  /** Queue depths: ready, delayed and in flight. */
  get inspection(): RedisOperations {
    return this.#operations;
  }

  /**
   * The longest a send takes before it rejects, on the transport's own
   * client of one server (its `commandTimeoutMs`). Undefined on a cluster: a
   * cluster client holds commands without a timeout while it cannot reach
   * the cluster, so a `Producer` bounds each send itself.
   */
  get sendTimeoutMs(): number | undefined {
    return this.#ownsClient && !isCluster(this.client) ? this.#options.commandTimeoutMs : undefined;
  }

  /**
   * The server's persistence and eviction settings, read once (undefined
   * when the server refuses `CONFIG`). With `checkServer`, the first send or
   * consume reads them and logs a warning for each setting that can lose
   * messages.
   */
  serverSettings(): Promise<ServerSettings | undefined> {
    this.#serverChecked ??= readServerSettings(this.client, this.keys.queues).then((settings) => {
      const logger = this.#options.logger;
      if (settings === undefined) logger?.info({}, 'redis: could not read the server settings (CONFIG refused); see docs/redis.md for the persistence it needs');
      else for (const warning of serverWarnings(settings)) logger?.warn({ settings }, `redis: ${warning}`);
      return settings;
    });
    return this.#serverChecked;
  }

  send(queue: string, message: OutgoingMessage): Promise<void> {
    return this.sendBatch(queue, [message]);
  }

  /**
   * Puts several messages on `queue`, in order. Up to {@link SEND_BATCH_CHUNK}
   * messages are one script call, written all or none; a longer batch is
   * written chunk by chunk, and when a chunk fails the chunks before it stay
   * sent and the rest are not sent.
   */
  async sendBatch(queue: string, messages: readonly OutgoingMessage[]): Promise<void> {
    checkQueue(queue, 'send');
    this.#checkOpen('send');
    if (!Array.isArray(messages)) throw new TypeError('sendBatch: messages must be an array');
    const encoded = messages.map((m) => this.#encode(m));
    this.#checkServerOnce();
    const k = this.keys.of(queue);
    const keys = [k.stream, k.delayed, this.keys.queues, k.delayedData, this.keys.seq];
    const bound = this.#options.maxLength ?? 0;
    for (let i = 0; i < encoded.length; i += SEND_BATCH_CHUNK) {
      const slice = encoded.slice(i, i + SEND_BATCH_CHUNK);
      // Counted from before the call, as the server counts from a moment later: a wake-up is never late.
      const sentAt = this.#options.clock.monotonic();
      const mark = replicaMark(this.client, k.stream, this.#options.waitReplicas);
      const [written, held] = (await this.scripts.run(SEND, keys, [queue, bound, ...slice.flat()])) as [number, number];
      if (written !== 1) throw new QueueFullError(queue, held, bound);
      this.#notifyDue(queue, sentAt, slice);
      await waitForReplicas(this.client, k.stream, this.#options.waitReplicas, slice.length === 1 ? 'the send' : `a send of ${slice.length} messages`, mark);
    }
  }

  async consume(queue: string, listener: DeliveryListener, options: ConsumeOptions): Promise<Subscription> {
    const prefetch = checkConsume(queue, listener, options, () => this.#checkOpen('consume'));
    this.#checkServerOnce();
    const o = this.#options;
    const sub = new RedisSubscription({
      queue,
      listener,
      prefetch,
      leaseMs: leaseOption('consume leaseMs', options.leaseMs, o.leaseMs),
      batchSize: o.batchSize,
      pollIntervalMs: o.pollIntervalMs,
      consumer: o.consumerName,
      keys: this.keys.of(queue),
      queuesKey: this.keys.queues,
      client: this.client,
      scripts: this.scripts,
      blocking: openClient(o, true),
      settler: this.#settlerOf(queue),
      reconnect: o.reconnect,
      clock: o.clock,
      random: o.random,
      logger: o.logger,
      onClosed: (s) => this.#consumers.get(queue)?.delete(s),
    });
    let subs = this.#consumers.get(queue);
    if (subs === undefined) this.#consumers.set(queue, (subs = new Set()));
    subs.add(sub);
    return sub;
  }

  /**
   * Closes every subscription, waits for the settlements asked for so far,
   * leaves the groups of the queues it consumed where it holds nothing, and
   * closes the transport's own connections (never a client passed in; its
   * settlement connection, a duplicate of such a client, is its own).
   * Deliveries still unsettled come back to other consumers after their lease.
   * While the server cannot be reached it waits for none of this: its
   * connections are closed at once, and settlements not answered reject.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const subs = [...this.#consumers.values()].flatMap((set) => [...set]);
    await Promise.all(subs.map((sub) => sub.close()));
    const settling = this.#settling?.client;
    await whileReachable(settling === undefined ? [] : [settling], Promise.all([...this.#settlers.values()].map((settler) => settler.idle())));
    await whileReachable(
      [this.client],
      Promise.all(
        [...this.#settlers.keys()].map((queue) =>
          this.scripts.run(FORGET_CONSUMER, [this.keys.stream(queue)], [GROUP, this.#options.consumerName]).catch(() => undefined),
        ),
      ),
    );
    if (settling !== undefined) await closeClient(settling);
    if (this.#ownsClient) await closeClient(this.client);
  }

  /** See {@link classifyRedisSendError}. */
  classifySendError(error: unknown): SendErrorKind {
    if (error instanceof TransportClosedError) return 'fatal';
    return classifyRedisSendError(error);
  }

  #settlerOf(queue: string): Settler {
    let settler = this.#settlers.get(queue);
    if (settler === undefined) {
      settler = new Settler(this.#settlingScripts(), this.keys, queue, this.#options.consumerName, this.#options.waitReplicas);
      this.#settlers.set(queue, settler);
    }
    return settler;
  }

  #settlingScripts(): ScriptRunner {
    if (this.#settling === undefined) {
      const client = openClient(this.#options, false);
      this.#settling = { client, scripts: new ScriptRunner(client) };
    }
    return this.#settling.scripts;
  }

  /** Wakes this transport's consumers of `queue` when the earliest delayed message of `sent` falls due. */
  #notifyDue(queue: string, sentAt: number, sent: readonly (readonly [string, string, Buffer, number])[]): void {
    let delayMs = Infinity;
    for (const message of sent) if (message[3] > 0) delayMs = Math.min(delayMs, message[3]);
    if (delayMs === Infinity) return;
    for (const sub of this.#consumers.get(queue) ?? []) sub.notifyDue(sentAt + delayMs);
  }

  #checkOpen(operation: string): void {
    if (this.#closed) throw new TransportClosedError('redis', operation);
  }

  #checkServerOnce(): void {
    if (this.#serverChecked === undefined && this.#options.checkServer) void this.serverSettings();
  }

  #encode(message: OutgoingMessage): [string, string, Buffer, number] {
    if (typeof message !== 'object' || message === null) throw new TypeError('send: message must be an object');
    const { id, body, headers } = message;
    if (typeof id !== 'string' || id.length === 0) throw new TypeError('send: message id must be a non-empty string');
    if (!(body instanceof Uint8Array)) throw new TypeError('send: message body must be a Uint8Array');
    if (body.byteLength > this.#options.maxMessageBytes) throw new MessageTooLargeError(body.byteLength, this.#options.maxMessageBytes);
    checkHeaders(headers, 'send', 'send: message headers');
    const delayMs = sendDelay('send', message.delayMs, MAX_HELD_DELAY_MS);
    return [id, encodeHeaders(headers), Buffer.from(body.buffer, body.byteOffset, body.byteLength), delayMs];
  }
}

/** Closes a connection of the transport's own: politely while it is up, at once otherwise. */
async function closeClient(client: RedisClient): Promise<void> {
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}
