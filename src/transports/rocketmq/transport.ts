import { EventEmitter } from 'node:events';
import type { Producer, MessageOptions, SimpleConsumer } from 'rocketmq-client-nodejs';
import type { SendErrorKind } from '../../transport/send-errors.js';
import { checkConsume, checkHeaders, checkQueue } from '../../transport/arguments.js';
import { MAX_HELD_DELAY_MS, sendDelay } from '../../transport/delay.js';
import type { ConsumeOptions, DeliveryListener, Headers, OutgoingMessage, Subscription, Transport, TransportCapabilities, TransportLimits } from '../../transport/types.js';
import { DEFAULT_TIMER_PRECISION_MS, RocketMqAdmin, type TopicKind } from './admin.js';
import { startConsumer, startProducer, type MessageView } from './client.js';
import { decodeProperties, DUE_PROPERTY, encodeProperties, GROUP_PROPERTY, headerBytes } from './codec.js';
import type { DeliveryOwner } from './delivery.js';
import { MessageTooLargeError, TransportClosedError } from './errors.js';
import type { DuplicateKind, RocketMqStats, RocketMqTransportEvents } from './events.js';
import { leaseOption, resolveRocketMqOptions, ROCKETMQ_DEFAULTS, type ResolvedRocketMqOptions, type RocketMqTransportOptions } from './options.js';
import { classifyRocketMqSendError, statusCode } from './send-errors.js';
import { RocketMqSubscription } from './subscription.js';
import { RocketMqOperations } from './operations.js';

/** The furthest ahead the proxy accepts a delivery time by default (its `maxDelayTimeMills`): the default `maxTimedDelayMs`. */
export const MAX_HOP_MS = ROCKETMQ_DEFAULTS.maxTimedDelayMs;

/** The largest message body the proxy accepts by default (`maxMessageSize`). */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** The most bytes of user properties the proxy accepts by default (`maxUserPropertySize`): the headers must fit. */
export const MAX_PROPERTY_BYTES = 16 * 1024;

/** The proxy's status for a topic it has no route for. */
const TOPIC_NOT_FOUND = 40402;

/**
 * The Apache RocketMQ 5 transport, through the gRPC proxy with the Node
 * client (`rocketmq-client-nodejs`): each queue is a topic of type MIXED,
 * consumed by one consumer group with `SimpleConsumer`s; an error queue is
 * a topic too. The transport creates and checks its topics itself over the
 * remoting protocol (./admin.ts).
 *
 * - A group new to a queue starts at its first message: before its first
 *   receive the transport points the group at the start of every queue of
 *   the topic where the group has no offset, as a work queue is expected
 *   to (the broker would start a new group at the last message once it no
 *   longer counts the first as fresh, skipping what came before).
 * - A delivery's lease is the invisible duration of its receive (at least
 *   the proxy's 10 s); `extendLease` is `changeInvisibleDuration`.
 * - `retryLater` sends a copy with the new headers as a timed message (the
 *   broker holds it until its delivery time) and acknowledges the original
 *   after; `deadLetter` sends the copy to the error topic first the same
 *   way. A crash between the two leaves a duplicate, never a loss; a copy
 *   confirmed whose original could not be acknowledged is counted in
 *   `stats.duplicateWindow`, emitted as `duplicateWindow` and logged.
 * - The broker's timer fires on ticks of `timerPrecisionMs` (1 000 ms by
 *   default), so a timed copy arrives up to one tick late: the transport
 *   reads the coarsest tick of the cluster's brokers and declares it as
 *   `limits.delayPrecisionMs`, which the deadline rule counts.
 * - Delays beyond `maxTimedDelayMs` (24 h, the proxy's furthest delivery
 *   time) go in hops: a consumer that receives a copy before its due time
 *   sends it on, which counts no delivery.
 * - A FIFO message (one with a message group) keeps its group: an
 *   immediate retry's copy is sent in the group; a delayed copy travels as a
 *   timed message (the broker takes no group on those) and re-enters its
 *   group, at its end, when due.
 * - The producer makes one attempt per send: a `Producer` retries,
 *   classifying errors with {@link classifyRocketMqSendError}.
 *
 * See docs/rocketmq.md.
 */
export class RocketMqTransport implements Transport {
  readonly name = 'rocketmq';
  readonly capabilities: TransportCapabilities = { nativeDelay: true, nativeDeliveryCount: true, atomicSettle: false };
  /**
   * Delays up to 2^31-1 ms, in hops of at most 24 h, brought back up to the
   * brokers' timer precision late (`timerPrecisionMs`, read off the brokers
   * when the transport first makes or checks a topic; RocketMQ's default
   * 1 000 ms until then); headers within the proxy's property size.
   */
  readonly limits: TransportLimits;
  /** Creates, checks and deletes this transport's topics. */
  readonly admin: RocketMqAdmin;
  readonly #options: ResolvedRocketMqOptions;
  readonly #subscriptions = new Set<RocketMqSubscription>();
  readonly #topics = new Map<string, Promise<void>>();
  readonly #operations: RocketMqOperations;
  readonly #events = new EventEmitter();
  readonly #stats: RocketMqStats = { duplicateWindow: 0 };
  #producer: Promise<Producer> | undefined;
  #precision: Promise<void> | undefined;
  #precisionMs: number = DEFAULT_TIMER_PRECISION_MS;
  #closed = false;

  /** Checks the options; connects on first use. Throws if an option is invalid. */
  constructor(options: RocketMqTransportOptions = {}) {
    const precision = () => this.#precisionMs;
    this.limits = Object.freeze({
      maxDelayMs: MAX_HELD_DELAY_MS,
      maxHeaderBytes: MAX_PROPERTY_BYTES,
      headerBytes,
      get delayPrecisionMs() {
        return precision();
      },
    });
    this.#options = resolveRocketMqOptions(options);
    const o = this.#options;
    this.admin = new RocketMqAdmin(o.nameServer, o.cluster, o.queuesPerTopic, o.requestTimeoutMs);
    this.#operations = new RocketMqOperations({
      admin: this.admin,
      consumerGroup: o.consumerGroup,
      clock: o.clock,
      knownTopics: () => [...this.#topics.keys()].filter((t) => !t.startsWith('%')),
      heldBy: (queue) => [...this.#subscriptions].reduce((n, s) => n + (s.queue === queue ? s.held : 0), 0),
      sendTo: (topic, id, body, headers) =>
        this.#send(topic, 'work', timed(topic, Buffer.from(body.buffer, body.byteOffset, body.byteLength), encodeProperties(id, headers), id, 0, undefined, o.clock.now(), o.maxTimedDelayMs)),
      recordRemoval: async (topic, key) => {
        await this.#ensure(topic, 'error');
        await this.#send(topic, 'error', { topic, body: Buffer.from(key, 'utf8') });
      },
    });
  }

  /** Browse, replay and delete error-queue entries, the broker's `%DLQ%<group>` topics included (see ./operations.ts). */
  get errorQueue(): RocketMqOperations {
    return this.#operations;
  }

  /** Queue depths (see ./operations.ts). */
  get inspection(): RocketMqOperations {
    return this.#operations;
  }

  /** Counters since the transport was created (a copy). */
  get stats(): RocketMqStats {
    return { ...this.#stats };
  }

  /** Adds a listener for one of the {@link RocketMqTransportEvents}. */
  on<K extends keyof RocketMqTransportEvents>(event: K, listener: (args: RocketMqTransportEvents[K]) => void): this {
    this.#events.on(event, listener);
    return this;
  }

  /** Removes a listener added with {@link on}. */
  off<K extends keyof RocketMqTransportEvents>(event: K, listener: (args: RocketMqTransportEvents[K]) => void): this {
    this.#events.off(event, listener);
    return this;
  }

  /** The consumer group consumers of this transport join. */
  get consumerGroup(): string {
    return this.#options.consumerGroup;
  }

  /** The longest a send takes before it rejects: the client's request timeout. */
  get sendTimeoutMs(): number {
    return this.#options.requestTimeoutMs;
  }

  /**
   * Puts a message on `queue` (creating its topic when missing) and
   * resolves once the broker stored it. A message with a `delayMs` is sent
   * as a timed message. A body or headers larger than the proxy accepts
   * are refused with a {@link MessageTooLargeError}, nothing sent.
   */
  async send(queue: string, message: OutgoingMessage): Promise<void> {
    checkQueue(queue, 'send');
    this.#checkOpen('send');
    const { id, body, headers } = checkMessage(message);
    const delayMs = sendDelay('send', message.delayMs, MAX_HELD_DELAY_MS);
    if (body.byteLength > MAX_BODY_BYTES) throw new MessageTooLargeError(body.byteLength, MAX_BODY_BYTES);
    const propertyBytes = headerBytes(headers);
    if (propertyBytes > MAX_PROPERTY_BYTES) throw new MessageTooLargeError(propertyBytes, MAX_PROPERTY_BYTES, 'properties');
    await this.#ensure(queue, 'work');
    await this.#send(queue, 'work', timed(queue, Buffer.from(body.buffer, body.byteOffset, body.byteLength), encodeProperties(id, headers), id, delayMs, undefined, this.#options.clock.now(), this.#options.maxTimedDelayMs));
  }

  async consume(queue: string, listener: DeliveryListener, options: ConsumeOptions): Promise<Subscription> {
    const prefetch = checkConsume(queue, listener, options, () => this.#checkOpen('consume'));
    const o = this.#options;
    await this.#ensure(queue, 'work');
    const leaseMs = leaseOption('consume leaseMs', options.leaseMs, o.leaseMs);
    let starting: Promise<SimpleConsumer> | undefined;
    const subscription = new RocketMqSubscription({
      queue,
      group: o.consumerGroup,
      requestTimeoutMs: o.requestTimeoutMs,
      listener,
      prefetch,
      leaseMs,
      start: () => {
        starting ??= this.admin.startAtFirstMessage(queue, o.consumerGroup).then(() => startConsumer(o, queue, o.consumerGroup));
        starting.catch(() => {
          starting = undefined;
        });
        return starting;
      },
      owner: this.#owner(queue, () => starting),
      hop: (view) => this.#hop(queue, view, () => starting),
      backoff: o.connectionBackoff,
      clock: o.clock,
      random: o.random,
      logger: o.logger,
      onClosed: (s) => this.#subscriptions.delete(s),
    });
    this.#subscriptions.add(subscription);
    return subscription;
  }

  /** Closes every subscription (messages they hold back become visible again) and the producer. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((s) => s.close()));
    const producer = await this.#producer?.catch(() => undefined);
    await producer?.shutdown().catch(() => undefined);
  }

  /** See {@link classifyRocketMqSendError}. */
  classifySendError(error: unknown): SendErrorKind {
    if (error instanceof TransportClosedError) return 'fatal';
    return classifyRocketMqSendError(error);
  }

  /** Makes sure `topic` exists (once per transport, again after a failure), the brokers' timer precision read first. */
  #ensure(topic: string, kind: TopicKind): Promise<void> {
    let pending = this.#topics.get(topic);
    if (pending === undefined) {
      pending = this.#readPrecision().then(() => this.admin.ensure(topic, kind));
      this.#topics.set(topic, pending);
      pending.catch(() => {
        if (this.#topics.get(topic) === pending) this.#topics.delete(topic);
      });
    }
    return pending;
  }

  /** Reads the brokers' timer precision into `limits.delayPrecisionMs` (once, again after a failure). */
  #readPrecision(): Promise<void> {
    if (this.#precision === undefined) {
      const pending = this.admin.timerPrecisionMs().then((ms) => {
        this.#precisionMs = ms;
      });
      this.#precision = pending;
      pending.catch(() => {
        if (this.#precision === pending) this.#precision = undefined;
      });
    }
    return this.#precision;
  }

  #startProducer(): Promise<Producer> {
    if (this.#producer === undefined) {
      const pending = startProducer(this.#options);
      this.#producer = pending;
      pending.catch(() => {
        if (this.#producer === pending) this.#producer = undefined;
      });
    }
    return this.#producer;
  }

  /** Sends one message; when the proxy finds no route for the topic (deleted meanwhile), makes it again and tries once more. */
  async #send(topic: string, kind: TopicKind, message: MessageOptions): Promise<void> {
    const producer = await this.#startProducer();
    try {
      await producer.send(message);
    } catch (error) {
      if (statusCode(error) !== TOPIC_NOT_FOUND) throw error;
      this.#topics.delete(topic);
      await this.#ensure(topic, kind);
      await producer.send(message);
    }
  }

  #owner(queue: string, consumer: () => Promise<SimpleConsumer> | undefined): Omit<DeliveryOwner, 'settled' | 'ack'> {
    const started = async () => {
      const c = consumer();
      if (c === undefined) throw new Error(`rocketmq: the consumer of ${queue} is not started`);
      return c;
    };
    return {
      clock: this.#options.clock,
      changeInvisible: async (view, ms) => (await started()).changeInvisibleDuration(view, ms),
      sendCopy: async (topic, view, id, headers: Headers, delayMs) => {
        const group = view.messageGroup || view.properties.get(GROUP_PROPERTY) || undefined;
        const kind: TopicKind = topic === queue ? 'work' : 'error';
        await this.#send(topic, kind, timed(topic, view.body, encodeProperties(id, headers), id, delayMs, group, this.#options.clock.now(), this.#options.maxTimedDelayMs));
      },
      errorQueue: (errorQueue) => this.#ensure(errorQueue, 'error'),
      recordDuplicate: (id, kind) => this.#recordDuplicate(queue, id, kind),
    };
  }

  /** A copy confirmed whose original will be given out again: counted, logged and emitted; the message will be delivered twice. */
  #recordDuplicate(queue: string, id: string, kind: DuplicateKind): void {
    this.#stats.duplicateWindow += 1;
    this.#options.logger?.warn({ messageId: id, queue, kind }, `rocketmq: a copy of message '${id}' on ${queue} was confirmed but the original could not be acknowledged; the broker gives it out again, so the message now exists twice`);
    try {
      this.#events.emit('duplicateWindow', { id, queue, kind });
    } catch (error) {
      this.#options.logger?.error({ error: String(error) }, `rocketmq: a duplicateWindow listener threw: ${String(error)}`);
    }
  }

  /**
   * Sends a copy received before its due time on (or a due FIFO copy back
   * into its group), then acknowledges it; rejects when the copy could not
   * be sent (the one received comes back after its lease). An
   * acknowledgement that fails after the copy went out is a duplicate,
   * recorded.
   */
  async #hop(queue: string, view: MessageView, consumer: () => Promise<SimpleConsumer> | undefined): Promise<void> {
    const now = this.#options.clock.now();
    const properties = new Map(view.properties);
    const due = Number(properties.get(DUE_PROPERTY));
    const group = properties.get(GROUP_PROPERTY);
    properties.delete(DUE_PROPERTY);
    properties.delete(GROUP_PROPERTY);
    const delayMs = Number.isFinite(due) ? Math.max(0, due - now) : 0;
    const keys = view.keys.length > 0 ? view.keys : undefined;
    await this.#send(queue, 'work', timed(queue, view.body, properties, keys?.[0], delayMs, group, now, this.#options.maxTimedDelayMs));
    try {
      const c = consumer();
      if (c === undefined) throw new Error(`rocketmq: the consumer of ${queue} is not started`);
      await (await c).ack(view);
    } catch (error) {
      this.#options.logger?.debug?.({ err: error, queue, messageId: view.messageId }, `rocketmq: the acknowledgement of hop ${view.messageId} on ${queue} failed`);
      this.#recordDuplicate(queue, decodeProperties(view.messageId, view.properties).id, 'hop');
    }
  }

  #checkOpen(operation: string): void {
    if (this.#closed) throw new TransportClosedError('rocketmq', operation);
  }
}

/**
 * The message to send: held `delayMs` when above 0 (in hops of at most
 * `hopMs`, the due time in a property when longer), in message group
 * `group` when it has one and is not held (a held copy carries its group
 * in a property instead, to re-enter it when due).
 */
function timed(topic: string, body: Buffer, properties: Map<string, string>, key: string | undefined, delayMs: number, group: string | undefined, now: number, hopMs: number): MessageOptions {
  const message: MessageOptions = { topic, body, properties, ...(key === undefined ? {} : { keys: [key] }) };
  if (delayMs <= 0) return group === undefined ? message : { ...message, messageGroup: group };
  if (group !== undefined) properties.set(GROUP_PROPERTY, group);
  if (delayMs > hopMs) properties.set(DUE_PROPERTY, String(now + delayMs));
  return { ...message, deliveryTimestamp: new Date(now + Math.min(delayMs, hopMs)) };
}

function checkMessage(message: OutgoingMessage): OutgoingMessage {
  if (typeof message !== 'object' || message === null) throw new TypeError('send: message must be an object');
  const { id, body, headers } = message;
  if (typeof id !== 'string' || id.length === 0) throw new TypeError('send: message id must be a non-empty string');
  if (!(body instanceof Uint8Array)) throw new TypeError('send: message body must be a Uint8Array');
  checkHeaders(headers, 'send', 'send: message headers');
  return message;
}
