import { EventEmitter } from 'node:events';
import type { DeliveryListener, OutgoingMessage, Subscription, Transport, TransportCapabilities } from '../../transport/types.js';
import { ConfirmedPublishing } from './confirmed-publishing.js';
import { ConnectionManager, raceAbort } from './connection.js';
import { QueueDeclarations } from './declarations.js';
import { ErrorQueueMarkers } from './error-queue-marker.js';
import { TransportClosedError } from './errors.js';
import { emptyStats, type EmitEvent, type RabbitMqStats, type RabbitMqTransportEvents } from './events.js';
import { MAX_PREFETCH, resolveOptions, type RabbitMqConsumeOptions, type RabbitMqTransportOptions, type ResolvedOptions } from './options.js';
import { RabbitMqOperations, type RabbitMqOperationsOptions } from './operations.js';
import { checkQueueName } from './queue-access.js';
import { Publisher } from './publisher.js';
import { classifyRabbitMqSendError } from './send-errors.js';
import { RabbitMqSubscription } from './subscription.js';
import { delayTopologyNames, DELAY_LEVELS, MAX_DELAY_MS, type DelayTopologyNames } from './topology.js';

/**
 * A transport on RabbitMQ (AMQP 0-9-1, through amqplib).
 *
 * - Delayed retries and delayed sends wait in the broker, in 28 shared
 *   delay-level queues (level `n` holds a message `2^n` ms), never in a
 *   timer of this process; by default quorum queues whose hops are
 *   dead-lettered at least once.
 * - Retry and error-queue copies are confirmed by the broker before the
 *   original is acked: a crash between the two gives a duplicate, never a
 *   loss (`stats.duplicateWindow`).
 * - Consumers and their acks use one connection, every publish (sends,
 *   retry and error-queue copies, send-backs) another, as RabbitMQ advises:
 *   a resource alarm that blocks publishes does not stop the acks.
 * - Each connection is reopened after a loss with the `reconnect` backoff,
 *   the topology declared again and every subscription resumed; what was in
 *   flight is redelivered by the broker.
 *
 * The first operation (or {@link connect}) opens the connection it needs and
 * fails if the broker cannot be reached. See docs/rabbitmq.md.
 */
export class RabbitMqTransport implements Transport {
  readonly name = 'rabbitmq';
  readonly capabilities: TransportCapabilities;
  /**
   * An endpoint's concurrency is its prefetch, which AMQP caps at 65 535;
   * the 28 delay levels hold a delay of at most 2^28-1 ms (about 74.6 h).
   */
  readonly limits = Object.freeze({ maxPrefetch: MAX_PREFETCH, maxDelayMs: MAX_DELAY_MS });
  readonly #options: ResolvedOptions;
  readonly #events = new EventEmitter();
  readonly #stats: RabbitMqStats = emptyStats();
  /** Consumers, their acks, and error-queue reads. */
  readonly #consuming: ConnectionManager;
  /** Every publish. */
  readonly #publishingConnection: ConnectionManager;
  readonly #declarations: QueueDeclarations;
  readonly #publishing: ConfirmedPublishing;
  readonly #publisher: Publisher;
  readonly #subscriptions = new Set<RabbitMqSubscription>();
  readonly #emit: EmitEvent;
  readonly #markers: ErrorQueueMarkers;
  readonly #operations: RabbitMqOperations;
  #closed = false;

  constructor(options: RabbitMqTransportOptions & RabbitMqOperationsOptions = {}) {
    this.#options = resolveOptions(options);
    this.capabilities = Object.freeze({
      nativeDelay: true,
      nativeDeliveryCount: this.#options.queueType === 'quorum',
      atomicSettle: false,
    });
    this.#emit = (event, args) => {
      try {
        this.#events.emit(event, args);
      } catch (error) {
        this.#options.logger?.error({ err: error, event }, 'rabbitmq: an event listener threw');
      }
    };
    this.#consuming = new ConnectionManager(this.#options, this.#emit, this.#stats, 'consume');
    this.#publishingConnection = new ConnectionManager(this.#options, this.#emit, this.#stats, 'publish');
    this.#declarations = new QueueDeclarations(this.#consuming, this.#options, this.#emit);
    this.#publishing = new ConfirmedPublishing(this.#publishingConnection, this.#declarations, this.#options, this.#stats);
    this.#publisher = new Publisher(this.#publishing, this.#publishingConnection.names, this.#options);
    // The marks follow the error-queue copies, declared and confirmed on the publish connection.
    this.#markers = new ErrorQueueMarkers(this.#publishingConnection, this.#declarations, this.#options);
    this.#operations = new RabbitMqOperations(
      { connection: this.#consuming, declarations: this.#declarations, publisher: this.#publisher, options: this.#options, markers: this.#markers },
      options,
    );
    this.#events.on('error', () => undefined);
  }

  /** Counters since the transport was created (a snapshot). */
  get stats(): RabbitMqStats {
    return { ...this.#stats };
  }

  /**
   * The names of the shared delay topology this transport uses (exchanges and
   * queues `<prefix>.delay-quorum.NN` or, with classic `delayLevels`,
   * `<prefix>.delay.NN`, and their deliver exchange).
   */
  get topology(): DelayTopologyNames & { readonly levels: number } {
    return { ...delayTopologyNames(this.#options.topologyPrefix, this.#options.delayLevels), levels: DELAY_LEVELS };
  }

  /**
   * Browse, replay and delete error-queue entries. AMQP has no browse: each
   * operation reads the queue from its head with `basic.get` and gives back
   * what it does not remove. See docs/rabbitmq.md, "Error queues".
   */
  get errorQueue(): RabbitMqOperations {
    return this.#operations;
  }

  /** Queue depths from passive declarations; `inFlight` is always 0. See {@link RabbitMqOperations.queueDepths}. */
  get inspection(): RabbitMqOperations {
    return this.#operations;
  }

  /** Whether every connection opened so far (the consume one, the publish one, or both) is open now. */
  get connected(): boolean {
    const started = [this.#consuming, this.#publishingConnection].filter((connection) => connection.started);
    return started.length > 0 && started.every((connection) => connection.session !== undefined);
  }

  /** Adds a listener for one of the {@link RabbitMqTransportEvents}. */
  on<K extends keyof RabbitMqTransportEvents>(event: K, listener: (args: RabbitMqTransportEvents[K]) => void): this {
    this.#events.on(event, listener);
    return this;
  }

  /** Removes a listener added with {@link on}. */
  off<K extends keyof RabbitMqTransportEvents>(event: K, listener: (args: RabbitMqTransportEvents[K]) => void): this {
    this.#events.off(event, listener);
    return this;
  }

  /** Adds a listener called once. */
  once<K extends keyof RabbitMqTransportEvents>(event: K, listener: (args: RabbitMqTransportEvents[K]) => void): this {
    this.#events.once(event, listener);
    return this;
  }

  /**
   * Opens both connections now instead of at the first operations. Rejects
   * if the broker cannot be reached; after the first success, losses are
   * repaired in the background.
   */
  async connect(): Promise<void> {
    this.#assertOpen('connect');
    await Promise.all([this.#consuming.connect(), this.#publishingConnection.connect()]);
  }

  /**
   * Not an async function, to spare the hot path a promise: bad input and a
   * closed transport still reject rather than throw.
   */
  send(queue: string, message: OutgoingMessage): Promise<void> {
    try {
      this.#assertOpen('send');
      return this.#publisher.send(queue, message);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Declares `errorQueue` now, as the first dead-letter into it would, on
   * the connection that publishes dead-letters, within `confirmTimeoutMs`.
   * An endpoint calls it as it starts, so that a cluster has the queue
   * before any failure: a queue first declared while the cluster is split
   * can be lost when it heals (see docs/rabbitmq.md, "Topology").
   */
  async prepareErrorQueue(errorQueue: string): Promise<void> {
    this.#assertOpen('prepareErrorQueue');
    checkQueueName(errorQueue);
    const timeoutMs = this.#options.confirmTimeoutMs;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      for (;;) {
        const session = await this.#publishingConnection.whenReady(signal);
        try {
          if (!this.#declarations.isReady(session, errorQueue)) await raceAbort(this.#declarations.declare(session, errorQueue, 'error'), signal);
          return;
        } catch (error) {
          // The connection dropped during the declaration: declare again on the next one, within the same time.
          if (session.alive || signal.aborted) throw error;
        }
      }
    } catch (error) {
      if (!signal.aborted) throw error;
      throw new Error(`rabbitmq: error queue '${errorQueue}' was not declared within confirmTimeoutMs (${timeoutMs} ms)`, { cause: error });
    }
  }

  /** Every `send` settles within `confirmTimeoutMs`: a `Producer` adds no timer of its own. */
  get sendTimeoutMs(): number {
    return this.#options.confirmTimeoutMs;
  }

  async consume(queue: string, listener: DeliveryListener, options: RabbitMqConsumeOptions): Promise<Subscription> {
    this.#assertOpen('consume');
    if (typeof listener !== 'function') throw new TypeError('rabbitmq: consume needs a listener function');
    const prefetch = options?.prefetch;
    if (!(Number.isInteger(prefetch) && prefetch >= 1 && prefetch <= MAX_PREFETCH)) {
      throw new RangeError(`rabbitmq: prefetch must be a whole number from 1 to ${MAX_PREFETCH}, got ${prefetch}`);
    }
    const subscription = new RabbitMqSubscription(
      {
        connection: this.#consuming,
        declarations: this.#declarations,
        publisher: this.#publisher,
        options: this.#options,
        stats: this.#stats,
        emit: this.#emit,
        markers: this.#markers,
        onClosed: (s) => this.#subscriptions.delete(s),
      },
      queue,
      listener,
      options,
    );
    this.#subscriptions.add(subscription);
    try {
      await subscription.start();
    } catch (error) {
      await subscription.close().catch(() => undefined);
      throw error;
    }
    return subscription;
  }

  /**
   * How a `Producer` treats an error of {@link send}: `throttled` (a nack
   * from a full `reject-publish` queue, a publish held at the
   * `connection.blocked` gate) backs off; `fatal` (bad input, a message over
   * the size limit, a missing queue with `declareQueues: false`, access
   * refused, a closed transport) fails at once; anything else, chiefly a
   * lost connection or a confirm timeout, is `transient` and retried at
   * once. See docs/producer.md, "Errors by transport".
   */
  classifySendError(error: unknown): 'transient' | 'throttled' | 'unavailable' | 'fatal' {
    return classifyRabbitMqSendError(error);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const subscription of [...this.#subscriptions]) await subscription.close().catch(() => undefined);
    await this.#markers.idle();
    this.#publishing.close();
    await Promise.all([this.#consuming.close(), this.#publishingConnection.close()]);
  }

  #assertOpen(operation: string): void {
    if (this.#closed) throw new TransportClosedError(operation);
  }
}
