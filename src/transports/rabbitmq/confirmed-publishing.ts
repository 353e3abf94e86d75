/**
 * Publishing with publisher confirms, on one confirm channel per
 * connection. Every publish is `mandatory`: a message no queue takes comes
 * back as a `basic.return` just before its `basic.ack`, and counts as not
 * stored ({@link PublishReturnedError}), never as confirmed. The return also
 * tells the declarations that the queue (or the delay level) is gone, so
 * the next publish declares it again.
 */
import type { ConfirmChannel, Message, Options } from 'amqplib';
import { Deadlines, type Deadline } from '../../time/deadlines.js';
import { raceAbort, type ConnectionManager, type Session } from './connection.js';
import type { QueueDeclarations } from './declarations.js';
import {
  ConfirmTimeoutError,
  MessageTooLargeError,
  PublishBlockedError,
  PublishChannelClosedError,
  PublishNackedError,
  PublishReturnedError,
} from './errors.js';
import type { RabbitMqStats } from './events.js';
import type { ResolvedOptions } from './options.js';
import type { QueueRole } from './topology.js';

/** A publish to make on the confirm channel. */
export interface PublishRequest {
  readonly exchange: string;
  readonly routingKey: string;
  readonly content: Buffer;
  /** The message's properties; `mandatory` must be set, so that a message no queue takes comes back. */
  readonly properties: Options.Publish;
  /** What is published, for errors and logs. */
  readonly operation: string;
  /** The queue the message is for: declared on the connection (once) before the publish goes out. */
  readonly queue: string;
  /** What the queue is for: error queues are declared without limits. */
  readonly role: QueueRole;
  /**
   * `queue`: the message goes straight to the queue (or through the deliver
   * exchange's binding), so a return means the queue is gone.
   * `delay-levels`: it enters a delay level, so a return means a level is gone.
   */
  readonly route: 'queue' | 'delay-levels';
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

/** Whether a returned message is the one `request` published: same route, id and body. */
function isReturnOf(returned: Message, request: PublishRequest): boolean {
  return (
    returned.fields.exchange === request.exchange &&
    returned.fields.routingKey === request.routingKey &&
    returned.properties.messageId === request.properties.messageId &&
    returned.content.equals(request.content)
  );
}

/** A message the broker returned, and how many publishes had been written on its channel when it came back. */
interface Returned {
  readonly message: Message;
  readonly publishedBefore: number;
}

/**
 * A confirm channel and what its publishes need to be told apart: the
 * broker's reason when it closed the channel, and the returns waiting for
 * their confirms.
 *
 * RabbitMQ routes the publishes of a channel in order and sends the
 * `basic.return` of an unroutable mandatory message right before its
 * `basic.ack`, in the same flush. So the publish a return belongs to is
 * confirmed before any publish written after the return arrived: a confirm
 * whose publish matches a waiting return (same exchange, routing key,
 * message id and body) takes it, and a return still waiting when a later
 * publish is confirmed matched nothing and is dropped.
 */
export class PublishChannel {
  /** Why the broker closed the channel, kept until its unconfirmed publishes are failed. */
  closeError: Error | undefined;
  /** Publishes written on the channel so far; the broker numbers them the same way. */
  published = 0;
  readonly #returns: Returned[] = [];

  constructor(readonly channel: ConfirmChannel) {
    channel.on('return', (message: Message) => this.#returns.push({ message, publishedBefore: this.published }));
  }

  /** The return of the publish numbered `sequence` (`request`), taken off the waiting list; undefined when it was not returned. */
  takeReturn(sequence: number, request: PublishRequest): Message | undefined {
    const returns = this.#returns;
    while (returns.length > 0 && returns[0]!.publishedBefore < sequence) returns.shift();
    const index = returns.findIndex((r) => isReturnOf(r.message, request));
    if (index < 0) return undefined;
    return returns.splice(index, 1)[0]!.message;
  }

  /** Whether any return waits for its confirm (the fast check on every confirm). */
  get hasReturns(): boolean {
    return this.#returns.length > 0;
  }
}

/** Publishes with confirms on the current connection. One per transport. */
export class ConfirmedPublishing {
  /** The confirm timeouts of every publish, on one timer. */
  readonly #deadlines: Deadlines;

  constructor(
    private readonly connection: ConnectionManager,
    private readonly declarations: QueueDeclarations,
    private readonly options: ResolvedOptions,
    private readonly stats: RabbitMqStats,
  ) {
    this.#deadlines = new Deadlines(options.clock);
  }

  /**
   * Forgets that `queue` is declared on the publish connection, because the
   * consume side learnt it is gone (the broker cancelled its consumer): the
   * next publish to it declares it again instead of being returned.
   */
  forgetQueue(queue: string): void {
    const session = this.connection.session;
    if (session) this.declarations.forgetQueue(session, queue);
  }

  /**
   * Publishes on the confirm channel and resolves once the broker confirms
   * that a queue took the message. The whole call, including any wait for a
   * reconnection, an unblock, the queue's declaration or the socket to
   * drain, is bounded by `confirmTimeoutMs`; it never hangs. A publish is
   * never retried here; the caller decides. Rejects with:
   *
   * - {@link PublishReturnedError}: no queue took it (`basic.return`): its
   *   queue or delay level was deleted; not stored. The declaration is
   *   forgotten, so the next publish declares it again;
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
   * When the session is open and usable, the confirm channel is open and the
   * request's queue is already declared on it, the message is written at
   * once with no await and no timer of its own (its timeout is an entry on
   * the shared {@link Deadlines}): the path nearly every send takes.
   */
  publish(request: PublishRequest): Promise<void> {
    const session = this.connection.session;
    if (
      session !== undefined &&
      !session.blocked &&
      !session.draining &&
      session.confirm !== undefined &&
      this.declarations.isReady(session, request.queue)
    ) {
      const channel = session.confirm;
      return new Promise<void>((resolve, reject) => {
        const deadline = this.#deadlines.add(this.options.confirmTimeoutMs, () => reject(this.#timedOut(request, true)));
        this.#write(session, channel, request, deadline, resolve, reject);
      });
    }
    return this.#publishWhenReady(request);
  }

  /** The publish path that waits: for a connection, the gate, the queue's declaration or the confirm channel. */
  async #publishWhenReady(request: PublishRequest): Promise<void> {
    const abort = new AbortController();
    const deadline = this.#deadlines.add(this.options.confirmTimeoutMs, () => abort.abort(TIMED_OUT));
    let written = false;
    try {
      const session = await this.connection.whenReady(abort.signal);
      if (!this.declarations.isReady(session, request.queue)) await raceAbort(this.declarations.declare(session, request.queue, request.role), abort.signal);
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

  /** The session's confirm channel, opened on first use and after an error closed it. */
  #confirmChannel(session: Session): Promise<PublishChannel> {
    if (session.confirm) return Promise.resolve(session.confirm);
    session.confirmOpening ??= (async () => {
      try {
        const channel = new PublishChannel(await session.model.createConfirmChannel());
        channel.channel.on('error', (error: Error) => {
          // The broker's reason, read when the channel's unconfirmed publishes fail just after this event.
          channel.closeError = error;
          this.options.logger?.warn({ err: error, generation: session.generation }, 'rabbitmq: publish channel error');
        });
        channel.channel.on('close', () => {
          if (session.confirm === channel) session.confirm = undefined;
          if (session.draining) {
            session.draining = false;
            this.connection.notifyChanged();
          }
        });
        channel.channel.on('drain', () => {
          session.draining = false;
          this.connection.notifyChanged();
        });
        session.confirm = channel;
        return channel;
      } finally {
        session.confirmOpening = undefined;
      }
    })();
    return session.confirmOpening;
  }

  /** Writes the publish; `resolve` once a queue took it and the broker confirmed, `reject` with a classified error otherwise. */
  #write(
    session: Session,
    channel: PublishChannel,
    request: PublishRequest,
    deadline: Deadline | undefined,
    resolve: () => void,
    reject: (error: unknown) => void,
  ): void {
    const sequence = ++channel.published;
    try {
      const accepted = channel.channel.publish(request.exchange, request.routingKey, request.content, request.properties, (error: unknown) => {
        if (deadline) this.#deadlines.delete(deadline);
        // Taken even after a timeout rejected the publish, so the declaration is forgotten all the same.
        const returned = channel.hasReturns ? channel.takeReturn(sequence, request) : undefined;
        if (error) reject(this.#notConfirmed(session, channel, request, error));
        else if (returned) reject(this.#returned(session, request, returned));
        else resolve();
      });
      if (!accepted) session.draining = true;
    } catch (error) {
      if (deadline) this.#deadlines.delete(deadline);
      reject(error);
    }
  }

  /** The error for a returned publish; forgets what the return says is gone. */
  #returned(session: Session, request: PublishRequest, returned: Message): PublishReturnedError {
    const { replyCode, replyText } = returned.fields as Message['fields'] & { replyCode: number; replyText: string };
    this.#forgetRoute(session, request);
    return new PublishReturnedError(request.operation, request.queue, replyCode, replyText);
  }

  /** Forgets the declarations a failed publish shows to be gone, so the next publish declares them again. */
  #forgetRoute(session: Session, request: PublishRequest): void {
    if (request.route === 'delay-levels') this.declarations.forgetDelayTopology(session);
    else this.declarations.forgetQueue(session, request.queue);
  }

  /** The error for a publish amqplib reports as not confirmed: nacked, or its channel closed. */
  #notConfirmed(session: Session, channel: PublishChannel, request: PublishRequest, error: unknown): Error {
    const message = error instanceof Error ? error.message : String(error);
    if (message === 'message nacked') return new PublishNackedError(request.operation);
    if (message === 'channel closed') {
      // Set when the broker closed the channel (a channel error); undefined when the connection closed.
      const cause = channel.closeError;
      const code = (cause as { code?: unknown } | undefined)?.code;
      const replyCode = typeof code === 'number' ? code : undefined;
      const maxBytes = cause ? brokerMaxMessageSize(cause.message) : undefined;
      // The broker closes the channel for the one message over its limit; the others in flight are collateral.
      if (maxBytes !== undefined && request.content.length > maxBytes) {
        return new MessageTooLargeError(request.content.length, maxBytes, 'broker max_message_size', { cause });
      }
      const concerns = concernsPublish(cause, request);
      // `no exchange '<prefix>.delay.NN'`: a delay exchange was deleted; declare the levels again.
      if (concerns && replyCode === 404) this.#forgetRoute(session, request);
      return new PublishChannelClosedError(request.operation, replyCode, concerns, { cause: cause ?? error });
    }
    return new Error(`rabbitmq: ${request.operation} was not confirmed: ${message}`, { cause: error });
  }

  /** The error for a publish whose `confirmTimeoutMs` ran out. */
  #timedOut(request: PublishRequest, written: boolean): Error {
    const { confirmTimeoutMs, logger } = this.options;
    this.stats.confirmTimeouts++;
    const session = this.connection.session;
    if (!written && session?.alive && (session.blocked || session.draining)) {
      const gate = session.blocked ? 'blocked' : 'flow';
      logger?.warn({ operation: request.operation, timeoutMs: confirmTimeoutMs, gate }, 'rabbitmq: publish waited for the broker to accept publishes and was not sent');
      return new PublishBlockedError(request.operation, confirmTimeoutMs, gate, session.blockReason);
    }
    logger?.warn({ operation: request.operation, timeoutMs: confirmTimeoutMs, written }, 'rabbitmq: publish confirm timed out');
    return new ConfirmTimeoutError(request.operation, confirmTimeoutMs, written);
  }

  /** Stops the timer of the confirm timeouts; publishes still pending fail with their channel. */
  close(): void {
    this.#deadlines.close();
  }
}
