/**
 * One AMQP connection at a time, replaced after a loss. Owns the confirm
 * channel every publish goes through, the channel that declares topology,
 * the `connection.blocked` gate, and the reconnect loop.
 */
import amqp from 'amqplib';
import type { Channel, ChannelModel, ConfirmChannel, Options } from 'amqplib';
import { MIN_CONNECT_TIMEOUT_MS } from '../../backoff/connection.js';
import { ConfirmTimeoutError, TransportClosedError } from './errors.js';
import type { EmitEvent, RabbitMqStats } from './events.js';
import type { ResolvedOptions } from './options.js';
import {
  declareDelayTopology,
  deliverBindingArguments,
  delayTopologyNames,
  parseInequivalentArgument,
  workQueueArguments,
  type DelayTopologyNames,
  type QueueType,
} from './topology.js';

/** What the transport knows about a queue's arguments. */
export interface QueueInfo {
  /** The queue's type; `unknown` when it was declared by someone else with arguments we could not read. */
  readonly queueType: QueueType | 'unknown';
  /** The queue's `x-delivery-limit`: a number, `undefined` for none, `unknown` when it could not be read. */
  readonly deliveryLimit: number | undefined | 'unknown';
  /** True when the queue existed with arguments other than ours and is used as it is. */
  readonly passive: boolean;
}

/** One open connection and its channels. Replaced, never reopened, after a loss. */
export class Session {
  alive = true;
  blocked = false;
  draining = false;
  confirm: ConfirmChannel | undefined;
  confirmOpening: Promise<ConfirmChannel> | undefined;
  admin: Channel | undefined;
  adminTail: Promise<unknown> = Promise.resolve();
  delayTopology: Promise<void> | undefined;
  readonly declared = new Map<string, Promise<QueueInfo>>();

  constructor(
    readonly model: ChannelModel,
    readonly generation: number,
  ) {}
}

type State = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'failed' | 'closed';

/** A publish to make on the confirm channel. */
export interface PublishRequest {
  readonly exchange: string;
  readonly routingKey: string;
  readonly content: Buffer;
  readonly properties: Options.Publish;
  /** What is published, for errors and logs. */
  readonly operation: string;
}

/** Resolves when `promise` does, or rejects with the signal's reason as soon as it aborts. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      promise.catch(() => undefined);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function isPreconditionFailed(error: unknown): error is Error {
  return error instanceof Error && ((error as { code?: unknown }).code === 406 || /PRECONDITION[-_]FAILED/.test(error.message));
}

/** Opens, watches and replaces the connection. */
export class ConnectionManager {
  readonly names: DelayTopologyNames;
  #state: State = 'idle';
  #session: Session | undefined;
  #generation = 0;
  #connecting: Promise<Session> | undefined;
  #failure: Error | undefined;
  #waiters = new Set<() => void>();
  #sessionListeners = new Set<(session: Session) => void>();
  readonly #closing = new AbortController();

  constructor(
    private readonly options: ResolvedOptions,
    private readonly emit: EmitEvent,
    private readonly stats: RabbitMqStats,
  ) {
    this.names = delayTopologyNames(options.topologyPrefix);
  }

  /** The open session, if any. */
  get session(): Session | undefined {
    return this.#session?.alive ? this.#session : undefined;
  }

  get closed(): boolean {
    return this.#state === 'closed';
  }

  /** Calls `listener` with every session opened after a loss (not the first). */
  onReconnect(listener: (session: Session) => void): () => void {
    this.#sessionListeners.add(listener);
    return () => this.#sessionListeners.delete(listener);
  }

  /**
   * Opens the first connection. Fails at once if the broker cannot be
   * reached, so start-up errors surface; after the first success, losses are
   * repaired in the background.
   */
  async connect(): Promise<Session> {
    if (this.#state === 'closed') throw new TransportClosedError('connect');
    if (this.#state === 'failed') throw this.#failure!;
    if (this.#state === 'idle') {
      this.#state = 'connecting';
      this.#connecting = this.#open().then(
        (session) => {
          this.#state = 'open';
          this.#connecting = undefined;
          this.emit('connected', { generation: session.generation, reconnect: false });
          return session;
        },
        (error: unknown) => {
          this.#connecting = undefined;
          if (this.#state === 'connecting') this.#state = 'idle';
          throw error;
        },
      );
    }
    if (this.#connecting) return this.#connecting;
    return this.whenReady(undefined, { ignoreBlocked: true });
  }

  /**
   * The open session once it is usable: connected, and (unless
   * `ignoreBlocked`) not blocked by the broker nor waiting for the socket to
   * drain. Rejects with the signal's reason when it aborts first.
   */
  async whenReady(signal: AbortSignal | undefined, { ignoreBlocked = false } = {}): Promise<Session> {
    if (this.#state === 'idle') await this.connect();
    for (;;) {
      if (this.#state === 'closed') throw new TransportClosedError('use the connection');
      if (this.#state === 'failed') throw this.#failure!;
      if (signal?.aborted) throw signal.reason;
      const session = this.session;
      if (session && (ignoreBlocked || (!session.blocked && !session.draining))) return session;
      await this.#changed(signal);
    }
  }

  /** Resolves at the next change of connection state, or rejects when `signal` aborts. */
  #changed(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        this.#waiters.delete(done);
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        this.#waiters.delete(done);
        reject(signal!.reason);
      };
      this.#waiters.add(done);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }

  async #open(): Promise<Session> {
    const model = await amqp.connect(this.options.url, {
      noDelay: true,
      timeout: MIN_CONNECT_TIMEOUT_MS,
      clientProperties: { connection_name: this.options.connectionName, product: 'redeliver' },
    });
    const session = new Session(model, ++this.#generation);
    model.on('error', (error: Error) => this.options.logger?.warn({ err: error, generation: session.generation }, 'rabbitmq: connection error'));
    model.on('close', (error?: Error) => this.#lost(session, error));
    model.on('blocked', (reason: string) => {
      session.blocked = true;
      this.options.logger?.warn({ reason, generation: session.generation }, 'rabbitmq: the broker blocked publishing; publishes wait');
      this.emit('blocked', { reason: String(reason) });
      this.#notify();
    });
    model.on('unblocked', () => {
      session.blocked = false;
      this.options.logger?.info({ generation: session.generation }, 'rabbitmq: the broker unblocked publishing');
      this.emit('unblocked', {});
      this.#notify();
    });
    if (this.#state === 'closed') {
      await model.close().catch(() => undefined);
      throw new TransportClosedError('connect');
    }
    this.#session = session;
    this.#notify();
    return session;
  }

  #lost(session: Session, error: Error | undefined): void {
    if (!session.alive) return;
    session.alive = false;
    if (this.#session === session) this.#session = undefined;
    this.#notify();
    if (this.#state === 'closed') return;
    this.stats.connectionLosses++;
    this.options.logger?.warn({ err: error, generation: session.generation }, 'rabbitmq: connection lost; reconnecting');
    this.emit('disconnected', { generation: session.generation, error });
    if (this.#state === 'open') void this.#reconnect(error);
  }

  async #reconnect(cause: Error | undefined): Promise<void> {
    this.#state = 'reconnecting';
    let previousDelayMs: number | undefined;
    let elapsedMs = 0;
    let lastError = cause;
    for (let attempt = 1; ; attempt++) {
      const delay = this.options.reconnect({ attempt, previousDelayMs, elapsedMs, random: this.options.random });
      if (delay === undefined || !Number.isFinite(delay) || delay < 0) {
        this.#fail(new Error(`rabbitmq: gave up reconnecting after ${attempt - 1} attempts`, { cause: lastError }));
        return;
      }
      const delayMs = Math.min(Math.max(0, delay), 2 ** 31 - 1);
      previousDelayMs = delayMs;
      elapsedMs += delayMs;
      this.emit('reconnecting', { attempt, delayMs, error: lastError });
      try {
        await this.options.clock.sleep(delayMs, this.#closing.signal);
      } catch {
        return; // closed while waiting
      }
      if (this.closed) return;
      try {
        const session = await this.#open();
        this.#state = 'open';
        this.stats.reconnects++;
        this.options.logger?.info({ generation: session.generation, attempt }, 'rabbitmq: reconnected');
        this.emit('connected', { generation: session.generation, reconnect: true });
        for (const listener of [...this.#sessionListeners]) listener(session);
        return;
      } catch (error) {
        if (this.closed) return;
        lastError = error as Error;
        this.options.logger?.warn({ err: error, attempt }, 'rabbitmq: reconnection attempt failed');
      }
    }
  }

  #fail(error: Error): void {
    this.#state = 'failed';
    this.#failure = error;
    this.options.logger?.error({ err: error }, 'rabbitmq: reconnection abandoned');
    this.emit('failed', { error });
    this.#notify();
  }

  /** Opens a channel on `session`, listening for its errors so none is unhandled. */
  async openChannel(session: Session, purpose: string): Promise<Channel> {
    const channel = await session.model.createChannel();
    channel.on('error', (error: Error) => this.options.logger?.warn({ err: error, purpose, generation: session.generation }, `rabbitmq: ${purpose} channel error`));
    return channel;
  }

  /** Runs `fn` on the session's declaring channel, one at a time, reopening the channel after an error closed it. */
  #admin<T>(session: Session, fn: (channel: Channel) => Promise<T>): Promise<T> {
    const run = async () => {
      if (!session.alive) throw new Error('rabbitmq: connection closed during topology declaration');
      if (!session.admin) {
        const channel = await this.openChannel(session, 'topology');
        channel.on('close', () => {
          if (session.admin === channel) session.admin = undefined;
        });
        session.admin = channel;
      }
      return fn(session.admin);
    };
    const result = session.adminTail.then(run, run);
    session.adminTail = result.catch(() => undefined);
    return result;
  }

  /** Declares the shared delay levels once per connection. */
  ensureDelayTopology(session: Session): Promise<void> {
    if (!session.delayTopology) {
      session.delayTopology = this.#admin(session, (channel) => declareDelayTopology(channel, this.names)).catch((error: unknown) => {
        session.delayTopology = undefined;
        throw new Error(
          `rabbitmq: could not declare the delay topology with prefix '${this.options.topologyPrefix}' ` +
            `(another endpoint may have declared it with other arguments): ${(error as Error).message}`,
          { cause: error },
        );
      });
    }
    return session.delayTopology;
  }

  /**
   * Declares a work or error queue once per connection and binds it to the
   * deliver exchange. A queue that already exists with other arguments is
   * used as it is (a warning is logged) and its delivery limit is probed.
   */
  declareQueue(session: Session, queue: string): Promise<QueueInfo> {
    let declared = session.declared.get(queue);
    if (!declared) {
      declared = this.#declareQueue(session, queue);
      session.declared.set(queue, declared);
      declared.catch(() => session.declared.delete(queue));
    }
    return declared;
  }

  async #declareQueue(session: Session, queue: string): Promise<QueueInfo> {
    if (typeof queue !== 'string' || queue.length === 0 || Buffer.byteLength(queue) > 255) {
      throw new RangeError(`rabbitmq: queue name must be 1 to 255 bytes, got ${JSON.stringify(queue)}`);
    }
    await this.ensureDelayTopology(session);
    const { queueType, deliveryLimit } = this.options;
    let info: QueueInfo = { queueType, deliveryLimit, passive: false };
    try {
      await this.#admin(session, (channel) => channel.assertQueue(queue, { durable: true, arguments: workQueueArguments(queueType, deliveryLimit) }));
    } catch (error) {
      if (!isPreconditionFailed(error)) throw error;
      this.options.logger?.warn(
        { queue, err: error },
        `rabbitmq: queue '${queue}' exists with other arguments than this transport declares; using it as it is`,
      );
      await this.#admin(session, (channel) => channel.checkQueue(queue));
      info = await this.#probeQueue(session, queue);
    }
    await this.#admin(session, (channel) => channel.bindQueue(queue, this.names.deliver, '', deliverBindingArguments(queue)));
    return info;
  }

  /**
   * Learns an existing queue's type and delivery limit without changing it:
   * declaring it as a quorum queue without a limit either succeeds (quorum,
   * no limit) or fails naming the argument that differs and its current
   * value. Operator policies are invisible to this probe.
   */
  async #probeQueue(session: Session, queue: string): Promise<QueueInfo> {
    try {
      await this.#admin(session, (channel) => channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } }));
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

  /** The session's confirm channel, opened on first use and after an error closed it. */
  #confirmChannel(session: Session): Promise<ConfirmChannel> {
    if (session.confirm) return Promise.resolve(session.confirm);
    session.confirmOpening ??= (async () => {
      try {
        const channel = await session.model.createConfirmChannel();
        channel.on('error', (error: Error) => this.options.logger?.warn({ err: error, generation: session.generation }, 'rabbitmq: publish channel error'));
        channel.on('close', () => {
          if (session.confirm === channel) session.confirm = undefined;
          if (session.draining) {
            session.draining = false;
            this.#notify();
          }
        });
        channel.on('drain', () => {
          session.draining = false;
          this.#notify();
        });
        session.confirm = channel;
        return channel;
      } finally {
        session.confirmOpening = undefined;
      }
    })();
    return session.confirmOpening;
  }

  /**
   * Publishes on the confirm channel and resolves once the broker confirms.
   * The whole call, including any wait for a reconnection, an unblock or the
   * socket to drain, is bounded by `confirmTimeoutMs`: it then rejects with a
   * {@link ConfirmTimeoutError} rather than hang. A publish is never retried
   * here; the caller decides.
   */
  async publish(request: PublishRequest, prepare?: (session: Session) => Promise<unknown>): Promise<void> {
    const { clock, confirmTimeoutMs } = this.options;
    const deadline = new AbortController();
    const timeout = new ConfirmTimeoutError(request.operation, confirmTimeoutMs);
    clock.sleep(confirmTimeoutMs, deadline.signal).then(
      () => deadline.abort(timeout),
      () => undefined,
    );
    try {
      const session = await this.whenReady(deadline.signal);
      if (prepare) await raceAbort(prepare(session), deadline.signal);
      const channel = await raceAbort(this.#confirmChannel(session), deadline.signal);
      await raceAbort(this.#publishOn(session, channel, request), deadline.signal);
    } catch (error) {
      if (error === timeout) {
        this.stats.confirmTimeouts++;
        this.options.logger?.warn({ operation: request.operation, timeoutMs: confirmTimeoutMs }, 'rabbitmq: publish confirm timed out');
      }
      throw error;
    } finally {
      if (!deadline.signal.aborted) deadline.abort();
    }
  }

  #publishOn(session: Session, channel: ConfirmChannel, request: PublishRequest): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      try {
        const accepted = channel.publish(request.exchange, request.routingKey, request.content, request.properties, (error: unknown) => {
          if (error) reject(new Error(`rabbitmq: ${request.operation} was not confirmed: ${(error as Error).message ?? String(error)}`, { cause: error }));
          else resolve();
        });
        if (!accepted) session.draining = true;
      } catch (error) {
        reject(error);
      }
    });
  }

  /** Closes the connection; later operations fail with a TransportClosedError. */
  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#closing.abort(new TransportClosedError('reconnect'));
    const pending = this.#connecting;
    const session = this.#session;
    this.#session = undefined;
    this.#notify();
    if (session) {
      session.alive = false;
      await session.model.close().catch(() => undefined);
    }
    if (pending) {
      await pending.then(
        (s) => s.model.close().catch(() => undefined),
        () => undefined,
      );
    }
  }
}
