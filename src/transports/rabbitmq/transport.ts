import { EventEmitter } from 'node:events';
import type { DeliveryListener, OutgoingMessage, Subscription, Transport, TransportCapabilities } from '../../transport/types.js';
import { ConnectionManager } from './connection.js';
import { TransportClosedError } from './errors.js';
import { emptyStats, type EmitEvent, type RabbitMqStats, type RabbitMqTransportEvents } from './events.js';
import { resolveOptions, type RabbitMqConsumeOptions, type RabbitMqTransportOptions, type ResolvedOptions } from './options.js';
import { Publisher } from './publisher.js';
import { RabbitMqSubscription } from './subscription.js';
import { delayTopologyNames, DELAY_LEVELS, type DelayTopologyNames } from './topology.js';

/**
 * A transport on RabbitMQ (AMQP 0-9-1, through amqplib).
 *
 * - Delayed retries wait in the broker, in 28 shared delay-level queues
 *   (level `n` holds a message `2^n` ms), never in a timer of this process.
 * - Retry and error-queue copies are confirmed by the broker before the
 *   original is acked: a crash between the two gives a duplicate, never a
 *   loss (`stats.duplicateWindow`).
 * - The connection is reopened after a loss with the `reconnect` backoff,
 *   the topology declared again and every subscription resumed; what was in
 *   flight is redelivered by the broker.
 *
 * The first operation (or {@link connect}) opens the connection and fails if
 * the broker cannot be reached. See docs/rabbitmq.md.
 */
export class RabbitMqTransport implements Transport {
  readonly name = 'rabbitmq';
  readonly capabilities: TransportCapabilities;
  readonly #options: ResolvedOptions;
  readonly #events = new EventEmitter();
  readonly #stats: RabbitMqStats = emptyStats();
  readonly #connection: ConnectionManager;
  readonly #publisher: Publisher;
  readonly #subscriptions = new Set<RabbitMqSubscription>();
  readonly #emit: EmitEvent;
  #closed = false;

  constructor(options: RabbitMqTransportOptions = {}) {
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
    this.#connection = new ConnectionManager(this.#options, this.#emit, this.#stats);
    this.#publisher = new Publisher(this.#connection, this.#options);
    this.#events.on('error', () => undefined);
  }

  /** Counters since the transport was created (a snapshot). */
  get stats(): RabbitMqStats {
    return { ...this.#stats };
  }

  /** The names of the shared delay topology (exchanges and queues `<prefix>.delay.NN`, exchange `<prefix>.delay.deliver`). */
  get topology(): DelayTopologyNames & { readonly levels: number } {
    return { ...delayTopologyNames(this.#options.topologyPrefix), levels: DELAY_LEVELS };
  }

  /** Whether a connection is open now. */
  get connected(): boolean {
    return this.#connection.session !== undefined;
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
   * Opens the connection now instead of at the first operation. Rejects if
   * the broker cannot be reached; after the first success, losses are
   * repaired in the background.
   */
  async connect(): Promise<void> {
    this.#assertOpen('connect');
    await this.#connection.connect();
  }

  async send(queue: string, message: OutgoingMessage): Promise<void> {
    this.#assertOpen('send');
    await this.#publisher.send(queue, message);
  }

  async consume(queue: string, listener: DeliveryListener, options: RabbitMqConsumeOptions): Promise<Subscription> {
    this.#assertOpen('consume');
    if (typeof listener !== 'function') throw new TypeError('rabbitmq: consume needs a listener function');
    const prefetch = options?.prefetch;
    if (!(Number.isInteger(prefetch) && prefetch >= 1 && prefetch <= 65_535)) {
      throw new RangeError(`rabbitmq: prefetch must be a whole number from 1 to 65535, got ${prefetch}`);
    }
    const subscription = new RabbitMqSubscription(
      {
        connection: this.#connection,
        publisher: this.#publisher,
        options: this.#options,
        stats: this.#stats,
        emit: this.#emit,
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

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const subscription of [...this.#subscriptions]) await subscription.close().catch(() => undefined);
    await this.#connection.close();
  }

  #assertOpen(operation: string): void {
    if (this.#closed) throw new TransportClosedError(operation);
  }
}
