/**
 * What is declared on each connection: work and error queues (each bound to
 * the deliver exchange), declared once per connection and remembered until
 * the broker says one is gone. A publish the broker returns (its queue was
 * deleted), or a consumer the broker cancels, makes the transport forget the
 * declaration, so the next use declares the queue again instead of
 * publishing into nothing.
 */
import type { ConnectionManager, Session } from './connection.js';
import { effectiveDeliveryLimit, errorQueueDeliveryLimit, errorQueueLimitWarning } from './delivery-limit.js';
import { QueueNotFoundError } from './errors.js';
import type { EmitEvent } from './events.js';
import type { ResolvedOptions } from './options.js';
import { deliverBindingArguments, parseInequivalentArgument, workQueueArguments, type QueueRole, type QueueType } from './topology.js';

/** What the transport knows about a queue's arguments. */
export interface QueueInfo {
  /** The queue's type; `unknown` when it was declared by someone else with arguments we could not read. */
  readonly queueType: QueueType | 'unknown';
  /**
   * The delivery limit that applies to the queue: its `x-delivery-limit`,
   * or the broker's default for a quorum queue declared without one (20 on
   * RabbitMQ 4 and later); `undefined` for none, `unknown` when it could
   * not be read.
   */
  readonly deliveryLimit: number | undefined | 'unknown';
  /** True when the queue existed with arguments other than ours and is used as it is. */
  readonly passive: boolean;
}

function isPreconditionFailed(error: unknown): error is Error {
  return error instanceof Error && ((error as { code?: unknown }).code === 406 || /PRECONDITION[-_]FAILED/.test(error.message));
}

/** Declares queues once per connection, and forgets them when they are gone. One per transport. */
export class QueueDeclarations {
  /** Every queue declared since the transport was created (queue inspection lists them). */
  readonly declaredQueues = new Set<string>();
  /** Error queues already warned about for their delivery limit: once per queue, not per connection. */
  readonly #warnedLimit = new Set<string>();

  constructor(
    private readonly connection: ConnectionManager,
    private readonly options: ResolvedOptions,
    private readonly emit: EmitEvent,
  ) {}

  /** Whether `queue`'s declaration has completed on `session`: a publish to it can go out at once. */
  isReady(session: Session, queue: string): boolean {
    return session.ready.has(queue);
  }

  /** The declaration of `queue` on `session` now, if any; a new object each time the queue is declared again. */
  current(session: Session, queue: string): Promise<QueueInfo> | undefined {
    return session.declared.get(queue);
  }

  /**
   * Declares a work or error queue once per connection and binds it to the
   * deliver exchange. A queue that already exists with other arguments is
   * used as it is (a warning is logged) and its delivery limit is probed.
   * Error queues never get the transport's `deliveryLimit` (see
   * {@link errorQueueDeliveryLimit}), and one that has a limit anyway is
   * reported with a warning.
   */
  declare(session: Session, queue: string, role: QueueRole = 'work'): Promise<QueueInfo> {
    let declared = session.declared.get(queue);
    if (!declared) {
      const declaring = this.#declare(session, queue, role);
      declared = declaring;
      session.declared.set(queue, declaring);
      declaring.then(
        () => {
          if (session.declared.get(queue) === declaring) session.ready.add(queue);
        },
        () => {
          if (session.declared.get(queue) === declaring) session.declared.delete(queue);
        },
      );
    }
    return declared;
  }

  /**
   * Forgets that `queue` is declared on `session`, because the broker said
   * it is gone (a returned publish, a cancelled consumer): the next use
   * declares it again. A declaration still under way is kept: it started
   * after the queue was deleted.
   */
  forgetQueue(session: Session, queue: string): void {
    if (!session.ready.delete(queue)) return;
    session.declared.delete(queue);
    this.options.logger?.warn({ queue, generation: session.generation }, `rabbitmq: queue '${queue}' is gone from the broker; declaring it again on next use`);
  }

  /**
   * Forgets the delay levels and every queue declared on `session`, because
   * a delay level is gone: the next use declares the levels again, and each
   * queue with its binding to the deliver exchange.
   */
  forgetDelayTopology(session: Session): void {
    this.connection.forgetDelayTopology(session);
    session.declared.clear();
    session.ready.clear();
    this.options.logger?.warn(
      { topologyPrefix: this.options.topologyPrefix, generation: session.generation },
      'rabbitmq: a delay level is gone from the broker; declaring the delay topology again on next use',
    );
  }

  async #declare(session: Session, queue: string, role: QueueRole): Promise<QueueInfo> {
    if (typeof queue !== 'string' || queue.length === 0 || Buffer.byteLength(queue) > 255) {
      throw new RangeError(`rabbitmq: queue name must be 1 to 255 bytes, got ${JSON.stringify(queue)}`);
    }
    this.declaredQueues.add(queue);
    const { connection } = this;
    await connection.ensureDelayTopology(session);
    const { queueType, maxLength, declareQueues } = this.options;
    const declaredLimit = role === 'error' ? errorQueueDeliveryLimit(queueType, session.brokerMajor) : this.options.deliveryLimit;
    let info: QueueInfo;
    if (!declareQueues) {
      // Declaring is off: the queue must exist. A passive declaration answers 404 NOT_FOUND otherwise.
      try {
        await connection.onTopologyChannel(session, (channel) => channel.checkQueue(queue));
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code === 404) throw new QueueNotFoundError(queue, { cause: error });
        throw error;
      }
      // An error queue's limit matters to every browse of it: read it (the probe changes nothing).
      info =
        role === 'error'
          ? await this.#probeQueue(session, queue)
          : { queueType, deliveryLimit: queueType === 'quorum' ? 'unknown' : undefined, passive: true };
    } else {
      info = { queueType, deliveryLimit: declaredLimit, passive: false };
      const args = workQueueArguments(queueType, declaredLimit, role === 'work' ? maxLength : undefined);
      try {
        await connection.onTopologyChannel(session, (channel) => channel.assertQueue(queue, { durable: true, arguments: args }));
      } catch (error) {
        if (!isPreconditionFailed(error)) throw error;
        this.options.logger?.warn(
          { queue, err: error },
          `rabbitmq: queue '${queue}' exists with other arguments than this transport declares; using it as it is`,
        );
        await connection.onTopologyChannel(session, (channel) => channel.checkQueue(queue));
        info = await this.#probeQueue(session, queue);
      }
    }
    await connection.onTopologyChannel(session, (channel) => channel.bindQueue(queue, connection.names.deliver, '', deliverBindingArguments(queue)));
    const applied: QueueInfo = { ...info, deliveryLimit: effectiveDeliveryLimit(info.queueType, info.deliveryLimit, session.brokerMajor) };
    if (role === 'error') this.#checkErrorQueueLimit(queue, applied.deliveryLimit);
    return applied;
  }

  #checkErrorQueueLimit(queue: string, deliveryLimit: number | undefined | 'unknown'): void {
    const message = errorQueueLimitWarning(queue, deliveryLimit);
    if (!message || this.#warnedLimit.has(queue)) return;
    this.#warnedLimit.add(queue);
    this.options.logger?.warn({ queue, deliveryLimit }, `rabbitmq: ${message}`);
    this.emit('warning', { message, queue });
  }

  /**
   * Learns an existing queue's type and delivery limit without changing it:
   * declaring it as a quorum queue without a limit either succeeds (quorum,
   * no limit) or fails naming the argument that differs and its current
   * value. Operator policies are invisible to this probe.
   */
  async #probeQueue(session: Session, queue: string): Promise<QueueInfo> {
    try {
      await this.connection.onTopologyChannel(session, (channel) => channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } }));
      return { queueType: 'quorum', deliveryLimit: undefined, passive: true };
    } catch (error) {
      const mismatch = isPreconditionFailed(error) ? parseInequivalentArgument(error.message) : undefined;
      if (mismatch?.argument === 'x-delivery-limit') {
        const limit = mismatch.current === undefined ? undefined : Number(mismatch.current);
        return { queueType: 'quorum', deliveryLimit: limit !== undefined && Number.isFinite(limit) ? limit : 'unknown', passive: true };
      }
      if (mismatch?.argument === 'x-queue-type' && (mismatch.current === undefined || mismatch.current === 'classic')) {
        return { queueType: 'classic', deliveryLimit: undefined, passive: true };
      }
      return { queueType: 'unknown', deliveryLimit: 'unknown', passive: true };
    }
  }
}
