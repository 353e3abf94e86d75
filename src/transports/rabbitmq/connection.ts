/**
 * One AMQP connection at a time, replaced after a loss: the reconnect loop,
 * the `connection.blocked` gate, and the channel that declares topology.
 * What is declared on a connection is remembered by `declarations.ts`, and
 * publishing with confirms is `confirmed-publishing.ts`.
 *
 * A transport keeps two, as RabbitMQ advises: one that consumes and acks,
 * and one that publishes. A resource alarm blocks a connection once it
 * publishes, and the broker then stops reading it altogether; on a
 * connection of their own, acks keep flowing while publishes wait for the
 * alarm to clear (which the consumers may be the ones to bring about, by
 * draining the backlog that raised it).
 */
import amqp from 'amqplib';
import type { Channel, ChannelModel } from 'amqplib';
import { MIN_CONNECT_TIMEOUT_MS } from '../../backoff/connection.js';
import type { PublishChannel } from './confirmed-publishing.js';
import type { QueueInfo } from './declarations.js';
import { brokerMajorVersion } from './delivery-limit.js';
import { ReconnectFailedError, TransportClosedError } from './errors.js';
import type { EmitEvent, RabbitMqStats } from './events.js';
import type { ResolvedOptions } from './options.js';
import { declareDelayTopology, delayTopologyNames, type DelayTopologyNames } from './topology.js';

/** One open connection and its channels. Replaced, never reopened, after a loss. */
export class Session {
  alive = true;
  blocked = false;
  /** The broker's reason for the current block, such as `low on memory`. */
  blockReason: string | undefined;
  draining = false;
  confirm: PublishChannel | undefined;
  confirmOpening: Promise<PublishChannel> | undefined;
  admin: Channel | undefined;
  adminTail: Promise<unknown> = Promise.resolve();
  delayTopology: Promise<void> | undefined;
  readonly declared = new Map<string, Promise<QueueInfo>>();
  /** Queues whose declaration has completed on this connection: publishes to them need no await before going out. */
  readonly ready = new Set<string>();
  /** The broker's major version (`version` server property), undefined when it could not be read. */
  readonly brokerMajor: number | undefined;

  constructor(
    readonly model: ChannelModel,
    readonly generation: number,
  ) {
    this.brokerMajor = brokerMajorVersion(model.connection.serverProperties?.version);
  }
}

/** What a connection is for: consuming and acking, or publishing (sends, retry, error-queue and send-back copies). */
export type ConnectionRole = 'consume' | 'publish';

/** The connection name the broker shows for the `role` connection of a transport named `connectionName`: the publish one gets `.publish` added. */
export function roleConnectionName(connectionName: string, role: ConnectionRole): string {
  return role === 'consume' ? connectionName : `${connectionName}.publish`;
}

type State = 'idle' | 'connecting' | 'open' | 'reconnecting' | 'failed' | 'closed';

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

/** Opens, watches and replaces the connection of one role. */
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
    /** What the connection is for; its events and log lines say so. */
    readonly role: ConnectionRole,
  ) {
    this.names = delayTopologyNames(options.topologyPrefix, options.delayLevels);
  }

  /** The open session, if any. */
  get session(): Session | undefined {
    return this.#session?.alive ? this.#session : undefined;
  }

  get closed(): boolean {
    return this.#state === 'closed';
  }

  /** Whether the connection has been asked to open (it may be down now). */
  get started(): boolean {
    return this.#state !== 'idle';
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
          this.emit('connected', { connection: this.role, generation: session.generation, reconnect: false });
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

  /** Wakes every {@link whenReady} waiting, to look at the session again (a channel drained or closed). */
  notifyChanged(): void {
    this.#notify();
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }

  async #open(): Promise<Session> {
    const model = await amqp.connect(this.options.url, {
      noDelay: true,
      timeout: MIN_CONNECT_TIMEOUT_MS,
      clientProperties: { connection_name: roleConnectionName(this.options.connectionName, this.role), product: 'redeliver' },
    });
    const session = new Session(model, ++this.#generation);
    model.on('error', (error: Error) => this.options.logger?.warn({ err: error, connection: this.role, generation: session.generation }, 'rabbitmq: connection error'));
    model.on('close', (error?: Error) => this.#lost(session, error));
    model.on('blocked', (reason: string) => {
      session.blocked = true;
      session.blockReason = String(reason);
      this.options.logger?.warn({ reason, connection: this.role, generation: session.generation }, 'rabbitmq: the broker blocked publishing; publishes wait');
      this.emit('blocked', { connection: this.role, reason: String(reason) });
      this.#notify();
    });
    model.on('unblocked', () => {
      session.blocked = false;
      session.blockReason = undefined;
      this.options.logger?.info({ connection: this.role, generation: session.generation }, 'rabbitmq: the broker unblocked publishing');
      this.emit('unblocked', { connection: this.role });
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
    this.options.logger?.warn({ err: error, connection: this.role, generation: session.generation }, 'rabbitmq: connection lost; reconnecting');
    this.emit('disconnected', { connection: this.role, generation: session.generation, error });
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
      this.emit('reconnecting', { connection: this.role, attempt, delayMs, error: lastError });
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
        this.options.logger?.info({ connection: this.role, generation: session.generation, attempt }, 'rabbitmq: reconnected');
        this.emit('connected', { connection: this.role, generation: session.generation, reconnect: true });
        for (const listener of [...this.#sessionListeners]) listener(session);
        return;
      } catch (error) {
        if (this.closed) return;
        lastError = error as Error;
        this.options.logger?.warn({ err: error, connection: this.role, attempt }, 'rabbitmq: reconnection attempt failed');
      }
    }
  }

  #fail(error: Error): void {
    this.#state = 'failed';
    this.#failure = error;
    this.options.logger?.error({ err: error, connection: this.role }, 'rabbitmq: reconnection abandoned');
    this.emit('failed', { connection: this.role, error });
    this.#notify();
  }

  /** Opens a channel on `session`, listening for its errors so none is unhandled. */
  async openChannel(session: Session, purpose: string): Promise<Channel> {
    const channel = await session.model.createChannel();
    channel.on('error', (error: Error) => this.options.logger?.warn({ err: error, purpose, generation: session.generation }, `rabbitmq: ${purpose} channel error`));
    return channel;
  }

  /** Runs `fn` on the session's declaring channel, one at a time, reopening the channel after an error closed it. */
  onTopologyChannel<T>(session: Session, fn: (channel: Channel) => Promise<T>): Promise<T> {
    return this.#admin(session, fn);
  }

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

  /** Forgets that the delay levels are declared on `session` (a level was deleted): the next use declares them again. */
  forgetDelayTopology(session: Session): void {
    session.delayTopology = undefined;
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
