/**
 * One AMQP connection at a time, replaced after a loss. Owns the confirm
 * channel every publish goes through, the channel that declares topology,
 * the `connection.blocked` gate, and the reconnect loop.
 */
import amqp from 'amqplib';
import type { Channel, ChannelModel, ConfirmChannel, Options } from 'amqplib';
import { MIN_CONNECT_TIMEOUT_MS } from '../../backoff/connection.js';
import { Deadlines, type Deadline } from '../../time/deadlines.js';
import {
  ConfirmTimeoutError,
  MessageTooLargeError,
  PublishBlockedError,
  PublishChannelClosedError,
  PublishNackedError,
  QueueNotFoundError,
  ReconnectFailedError,
  TransportClosedError,
} from './errors.js';
import type { EmitEvent, RabbitMqStats } from './events.js';
import type { ResolvedOptions } from './options.js';
import {
  declareDelayTopology,
  deliverBindingArguments,
  delayTopologyNames,
  parseInequivalentArgument,
  workQueueArguments,
  type DelayTopologyNames,
  type QueueRole,
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
  /** The broker's reason for the current block, such as `low on memory`. */
  blockReason: string | undefined;
  draining = false;
  confirm: ConfirmChannel | undefined;
  confirmOpening: Promise<ConfirmChannel> | undefined;
  admin: Channel | undefined;
  adminTail: Promise<unknown> = Promise.resolve();
  delayTopology: Promise<void> | undefined;
  readonly declared = new Map<string, Promise<QueueInfo>>();
  /** Queues whose declaration has completed on this connection: publishes to them need no await before going out. */
  readonly ready = new Set<string>();

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

/** The abort reason of a publish whose `confirmTimeoutMs` ran out; a constant, so no error is built unless it is needed. */
const TIMED_OUT = Object.freeze({ reason: 'redeliver: confirm timeout' });

/**
 * The broker's text when a message exceeds its `max_message_size`
 * (`PRECONDITION_FAILED - message size 2000 is larger than configured max size 1024`).
 */
function brokerMaxMessageSize(message: string): number | undefined {
  const match = /message size \d+ is larger than configured max size (\d+)/.exec(message);
  return match ? Number(match[1]) : undefined;
}

/**
 * Whether the broker's channel close names this publish's exchange (`access
 * to exchange 'amq.default' ... refused`, `no exchange 'x'`): one publish's
 * fault closes the channel for every publish in flight on it, and only the
 * one at fault should be given up.
 */
function concernsPublish(cause: Error | undefined, request: PublishRequest): boolean {
  const named = cause ? /exchange '([^']*)'/.exec(cause.message)?.[1] : undefined;
  return named !== undefined && named === (request.exchange === '' ? 'amq.default' : request.exchange);
}

function isPreconditionFailed(error: unknown): error is Error {
  return error instanceof Error && ((error as { code?: unknown }).code === 406 || /PRECONDITION[-_]FAILED/.test(error.message));
}

/** Opens, watches and replaces the connection. */
export class ConnectionManager {
  readonly names: DelayTopologyNames;
  /** Every queue declared through {@link declareQueue} since the transport was created (queue inspection lists them). */
  readonly declaredQueues = new Set<string>();
  #state: State = 'idle';
  #session: Session | undefined;
  #generation = 0;
  #connecting: Promise<Session> | undefined;
  #failure: Error | undefined;
  #waiters = new Set<() => void>();
  #sessionListeners = new Set<(session: Session) => void>();
  readonly #closing = new AbortController();
  /** The confirm timeouts of every publish, on one timer. */
  readonly #deadlines: Deadlines;
  /** Why the broker closed a confirm channel, kept until its unconfirmed publishes are failed. */
  readonly #closeErrors = new WeakMap<ConfirmChannel, Error>();

  constructor(
    private readonly options: ResolvedOptions,
    private readonly emit: EmitEvent,
    private readonly stats: RabbitMqStats,
  ) {
    this.names = delayTopologyNames(options.topologyPrefix, options.delayLevels);
    this.#deadlines = new Deadlines(options.clock);
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
    // The first connection is bounded by the caller's deadline too, not only by the connect timeout (20 s).
    if (this.#state === 'idle') await (signal ? raceAbort(this.connect(), signal) : this.connect());
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
      session.blockReason = String(reason);
      this.options.logger?.warn({ reason, generation: session.generation }, 'rabbitmq: the broker blocked publishing; publishes wait');
      this.emit('blocked', { reason: String(reason) });
      this.#notify();
    });
    model.on('unblocked', () => {
      session.blocked = false;
      session.blockReason = undefined;
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
        this.#fail(new ReconnectFailedError(attempt - 1, { cause: lastError }));
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
  declareQueue(session: Session, queue: string, role: QueueRole = 'work'): Promise<QueueInfo> {
    let declared = session.declared.get(queue);
    if (!declared) {
      declared = this.#declareQueue(session, queue, role);
      session.declared.set(queue, declared);
      declared.then(
        () => session.ready.add(queue),
        () => session.declared.delete(queue),
      );
    }
    return declared;
  }

  async #declareQueue(session: Session, queue: string, role: QueueRole): Promise<QueueInfo> {
    if (typeof queue !== 'string' || queue.length === 0 || Buffer.byteLength(queue) > 255) {
      throw new RangeError(`rabbitmq: queue name must be 1 to 255 bytes, got ${JSON.stringify(queue)}`);
    }
    this.declaredQueues.add(queue);
    await this.ensureDelayTopology(session);
    const { queueType, deliveryLimit, maxLength, declareQueues } = this.options;
    let info: QueueInfo = { queueType, deliveryLimit, passive: false };
    if (!declareQueues) {
      // Declaring is off: the queue must exist. A passive declaration answers 404 NOT_FOUND otherwise.
      try {
        await this.#admin(session, (channel) => channel.checkQueue(queue));
      } catch (error) {
        if ((error as { code?: unknown } | null)?.code === 404) throw new QueueNotFoundError(queue, { cause: error });
        throw error;
      }
      info = { queueType, deliveryLimit: queueType === 'quorum' ? 'unknown' : undefined, passive: true };
      await this.#admin(session, (channel) => channel.bindQueue(queue, this.names.deliver, '', deliverBindingArguments(queue)));
      return info;
    }
    const args = workQueueArguments(queueType, deliveryLimit, role === 'work' ? maxLength : undefined);
    try {
      await this.#admin(session, (channel) => channel.assertQueue(queue, { durable: true, arguments: args }));
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
        channel.on('error', (error: Error) => {
          // The broker's reason, read when the channel's unconfirmed publishes fail just after this event.
          this.#closeErrors.set(channel, error);
          this.options.logger?.warn({ err: error, generation: session.generation }, 'rabbitmq: publish channel error');
        });
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
   * socket to drain, is bounded by `confirmTimeoutMs`; it never hangs. A
   * publish is never retried here; the caller decides. Rejects with:
   *
   * - {@link PublishNackedError} (a `ThrottledError`): the broker nacked it,
   *   such as a full `reject-publish` queue; not stored;
   * - {@link PublishBlockedError} (a `ThrottledError`): the time ran out
   *   while publishing was blocked (`connection.blocked`) or the socket was
   *   not draining; never written, not stored;
   * - {@link ConfirmTimeoutError}: the time ran out waiting for a connection
   *   (`written: false`, not stored) or for the confirm (`written: true`,
   *   outcome unknown);
   * - {@link PublishChannelClosedError}: the channel closed before the
   *   confirm (outcome unknown), or {@link MessageTooLargeError} when the
   *   broker closed it because this message exceeds its `max_message_size`.
   *
   * `declaredQueue` names the queue `prepare` declares. When the session is
   * open and usable, the confirm channel is open and that queue is already
   * declared on it, the message is written at once with no await and no
   * timer of its own (its timeout is an entry on the shared
   * {@link Deadlines}): the path nearly every send takes.
   */
  publish(request: PublishRequest, prepare?: (session: Session) => Promise<unknown>, declaredQueue?: string): Promise<void> {
    const session = this.#session;
    if (
      session !== undefined &&
      session.alive &&
      !session.blocked &&
      !session.draining &&
      session.confirm !== undefined &&
      (prepare === undefined || (declaredQueue !== undefined && session.ready.has(declaredQueue)))
    ) {
      const channel = session.confirm;
      return new Promise<void>((resolve, reject) => {
        const deadline = this.#deadlines.add(this.options.clock.now() + this.options.confirmTimeoutMs, () => reject(this.#timedOut(request, true)));
        this.#write(session, channel, request, deadline, resolve, reject);
      });
    }
    return this.#publishWhenReady(request, prepare, declaredQueue);
  }

  /** The publish path that waits: for a connection, the gate, the queue's declaration or the confirm channel. */
  async #publishWhenReady(request: PublishRequest, prepare: ((session: Session) => Promise<unknown>) | undefined, declaredQueue: string | undefined): Promise<void> {
    const abort = new AbortController();
    const deadline = this.#deadlines.add(this.options.clock.now() + this.options.confirmTimeoutMs, () => abort.abort(TIMED_OUT));
    let written = false;
    try {
      const session = await this.whenReady(abort.signal);
      if (prepare && !(declaredQueue !== undefined && session.ready.has(declaredQueue))) await raceAbort(prepare(session), abort.signal);
      const channel = await raceAbort(this.#confirmChannel(session), abort.signal);
      written = true;
      await raceAbort(new Promise<void>((resolve, reject) => this.#write(session, channel, request, undefined, resolve, reject)), abort.signal);
    } catch (error) {
      if (error === TIMED_OUT) throw this.#timedOut(request, written);
      throw error;
    } finally {
      this.#deadlines.delete(deadline);
    }
  }

  /** Writes the publish; `resolve` on the broker's ack, `reject` with a classified error otherwise. */
  #write(
    session: Session,
    channel: ConfirmChannel,
    request: PublishRequest,
    deadline: Deadline | undefined,
    resolve: () => void,
    reject: (error: unknown) => void,
  ): void {
    try {
      const accepted = channel.publish(request.exchange, request.routingKey, request.content, request.properties, (error: unknown) => {
        if (deadline) this.#deadlines.delete(deadline);
        if (error) reject(this.#notConfirmed(channel, request, error));
        else resolve();
      });
      if (!accepted) session.draining = true;
    } catch (error) {
      if (deadline) this.#deadlines.delete(deadline);
      reject(error);
    }
  }

  /** The error for a publish amqplib reports as not confirmed: nacked, or its channel closed. */
  #notConfirmed(channel: ConfirmChannel, request: PublishRequest, error: unknown): Error {
    const message = error instanceof Error ? error.message : String(error);
    if (message === 'message nacked') return new PublishNackedError(request.operation);
    if (message === 'channel closed') {
      // Set when the broker closed the channel (a channel error); undefined when the connection closed.
      const cause = this.#closeErrors.get(channel);
      const code = (cause as { code?: unknown } | undefined)?.code;
      const replyCode = typeof code === 'number' ? code : undefined;
      const maxBytes = cause ? brokerMaxMessageSize(cause.message) : undefined;
      // The broker closes the channel for the one message over its limit; the others in flight are collateral.
      if (maxBytes !== undefined && request.content.length > maxBytes) {
        return new MessageTooLargeError(request.content.length, maxBytes, 'broker max_message_size', { cause });
      }
      return new PublishChannelClosedError(request.operation, replyCode, concernsPublish(cause, request), { cause: cause ?? error });
    }
    return new Error(`rabbitmq: ${request.operation} was not confirmed: ${message}`, { cause: error });
  }

  /** The error for a publish whose `confirmTimeoutMs` ran out. */
  #timedOut(request: PublishRequest, written: boolean): Error {
    const { confirmTimeoutMs, logger } = this.options;
    this.stats.confirmTimeouts++;
    const session = this.#session;
    if (!written && session?.alive && (session.blocked || session.draining)) {
      const gate = session.blocked ? 'blocked' : 'flow';
      logger?.warn({ operation: request.operation, timeoutMs: confirmTimeoutMs, gate }, 'rabbitmq: publish waited for the broker to accept publishes and was not sent');
      return new PublishBlockedError(request.operation, confirmTimeoutMs, gate, session.blockReason);
    }
    logger?.warn({ operation: request.operation, timeoutMs: confirmTimeoutMs, written }, 'rabbitmq: publish confirm timed out');
    return new ConfirmTimeoutError(request.operation, confirmTimeoutMs, written);
  }

  /** Closes the connection; later operations fail with a TransportClosedError. */
  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#deadlines.close();
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
