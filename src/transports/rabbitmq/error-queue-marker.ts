/**
 * Which queues are error queues. AMQP cannot list a queue's arguments or
 * bindings, so a process that did not dead-letter into a queue (the CLI, a
 * dashboard) could not tell an error queue from a work queue. The transport
 * therefore marks every queue it dead-letters into: after the first
 * error-queue copy to a queue on each connection it declares a durable,
 * auto-delete fanout exchange `<prefix>.error-queue.<queue>` and binds the
 * queue to it. Any process can then ask whether the exchange exists
 * (`exchange.declare` passive). Deleting the error queue removes the binding,
 * and with it the auto-delete exchange.
 *
 * Marking is best effort and off the settlement path: it starts once the
 * copy is confirmed (so the queue exists) and runs in the background, so the
 * ack of the original is not delayed. It is done once per declaration of
 * the queue: an error queue deleted and declared again is marked again. When
 * it fails (no `configure` permission on the name, a broker that does not
 * answer), a warning is logged once per declaration; the queue is then shown
 * as a work queue by other processes. `close()` of the transport waits for
 * marks under way.
 */
import { createHash } from 'node:crypto';
import type { ConnectionManager, Session } from './connection.js';
import type { QueueDeclarations, QueueInfo } from './declarations.js';
import type { ResolvedOptions } from './options.js';
import { ReplyGuard, type PassiveChannel } from './queue-access.js';

/** The marker exchange of `queue`: `<prefix>.error-queue.<queue>`, or `<prefix>.error-queue.sha256-<32 hex>` when that is longer than 255 bytes. */
export function errorQueueMarkerName(prefix: string, queue: string): string {
  const plain = `${prefix}.error-queue.${queue}`;
  if (Buffer.byteLength(plain) <= 255) return plain;
  return `${prefix}.error-queue.sha256-${createHash('sha256').update(queue).digest('hex').slice(0, 32)}`;
}

/** Marks error queues, and tells whether a queue is one. One per transport. */
export class ErrorQueueMarkers {
  /** Error queues this transport dead-lettered into. */
  readonly #known = new Set<string>();
  /** The declarations of queues marked (or attempted): each is marked once per declaration. */
  readonly #marked = new WeakSet<Promise<QueueInfo>>();
  /** Marks under way. */
  readonly #pending = new Set<Promise<void>>();

  constructor(
    private readonly connection: ConnectionManager,
    private readonly declarations: QueueDeclarations,
    private readonly options: ResolvedOptions,
  ) {}

  /** Error queues this transport has dead-lettered into, in the order first used. */
  get known(): ReadonlySet<string> {
    return this.#known;
  }

  /** The marker exchange of `queue`, for this transport's topology prefix. */
  markerOf(queue: string): string {
    return errorQueueMarkerName(this.options.topologyPrefix, queue);
  }

  /**
   * Notes that a copy to `queue` was confirmed, and marks the queue unless
   * that was done for its current declaration already. Returns at once; the
   * mark is declared in the background and never fails the caller.
   */
  confirmedCopyTo(queue: string): void {
    this.#known.add(queue);
    const session = this.connection.session;
    const declaration = session && this.declarations.current(session, queue);
    // Without a connection or a declaration (forgotten meanwhile), it is marked after the next copy.
    if (!session || !declaration || this.#marked.has(declaration)) return;
    this.#marked.add(declaration);
    const pending = this.#declare(session, queue);
    this.#pending.add(pending);
    void pending.finally(() => this.#pending.delete(pending));
  }

  /** Resolves once every mark under way has finished (each is bounded by `confirmTimeoutMs` per request). */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  /** Whether `queue` is an error queue: one this transport dead-lettered into, or one with a marker. */
  async isErrorQueue(passive: PassiveChannel, queue: string): Promise<boolean> {
    return this.#known.has(queue) || (await passive.exchangeExists(this.markerOf(queue)));
  }

  async #declare(session: Session, queue: string): Promise<void> {
    const marker = this.markerOf(queue);
    const guard = new ReplyGuard(this.options.clock, this.options.confirmTimeoutMs);
    const operation = `mark '${queue}' as an error queue`;
    try {
      const channel = await guard.request(operation, session.model.createChannel());
      channel.on('error', () => undefined);
      try {
        await guard.request(operation, channel.assertExchange(marker, 'fanout', { durable: true, autoDelete: true }));
        await guard.request(operation, channel.bindQueue(queue, marker, ''));
      } finally {
        void channel.close().catch(() => undefined);
      }
    } catch (error) {
      // Not retried on this connection: a missing permission would fail every time.
      this.options.logger?.warn(
        { err: error, queue, marker },
        `rabbitmq: could not declare the error-queue marker '${marker}'; other processes will show '${queue}' as a work queue`,
      );
    } finally {
      guard.stop();
    }
  }
}
