import type { PubAck } from '@nats-io/jetstream';
import type { MsgHdrs } from '@nats-io/transport-node';
import type { SendErrorKind } from '../../transport/send-errors.js';
import { checkConsume, checkHeadersObject, checkQueue } from '../../transport/arguments.js';
import { MAX_HELD_DELAY_MS, sendDelay } from '../../transport/delay.js';
import type { ConsumeOptions, DeliveryListener, OutgoingMessage, Subscription, Transport, TransportCapabilities } from '../../transport/types.js';
import { HEADER } from '../../headers/names.js';
import { DELAY_HEADER, encodedHeaderBytes, encodeNatsHeaders, headerBytes, MAX_COPY_HEADER_BYTES } from './codec.js';
import { openClients, type JetStreamClients } from './connection.js';
import type { DeliveryOwner } from './delivery.js';
import { MessageTooLargeError, QueueFullError, TransportClosedError } from './errors.js';
import type { JetStreamNames } from './names.js';
import { logStored } from './publish-log.js';
import { leaseOption, resolveJetStreamOptions, type JetStreamTransportOptions, type ResolvedJetStreamOptions } from './options.js';
import { classifyJetStreamSendError } from './send-errors.js';
import { ServerClock } from './server-clock.js';
import { JetStreamOperations } from './operations.js';
import { JetStreamSubscription } from './subscription.js';
import { Topology } from './topology.js';
import { TurnFlush } from './turn-flush.js';

/**
 * The NATS JetStream transport: each queue is a work-queue stream read
 * through one durable pull consumer; delayed retries and delayed sends wait
 * in the prefix's delay stream, held by the server, until a consumer of
 * their queue moves them to it, due at the time the server stored them plus
 * their delay; an error queue is a stream like any other queue.
 *
 * - A delivery's lease is the consumer's `ack_wait`; a consumer that holds
 *   a message past it loses it to another (its delivery count goes up).
 * - `retryLater` and `deadLetter` store the copy first and ack the original
 *   after: a crash in between leaves a duplicate, never a loss, and
 *   `Nats-Msg-Id` makes every copy's second publish a no-op.
 * - Consumers pull only as many messages as they have room for.
 *
 * Durability is the server's: see docs/jetstream.md.
 */
export class JetStreamTransport implements Transport {
  readonly name = 'jetstream';
  readonly capabilities: TransportCapabilities = { nativeDelay: true, nativeDeliveryCount: true, atomicSettle: false };
  /**
   * Delays wait in the server; the movers' waits for them are timers, which
   * hold at most 2^31-1 ms. Headers: see {@link MAX_COPY_HEADER_BYTES}.
   */
  readonly limits = Object.freeze({ maxDelayMs: MAX_HELD_DELAY_MS, maxHeaderBytes: MAX_COPY_HEADER_BYTES, headerBytes: encodedHeaderBytes });
  /** The stream, subject and consumer names of this transport's prefix. */
  readonly names: JetStreamNames;
  readonly #options: ResolvedJetStreamOptions;
  readonly #serverClock: ServerClock;
  readonly #subscriptions = new Set<JetStreamSubscription>();
  readonly #operations: JetStreamOperations;
  #clients: Promise<JetStreamClients> | undefined;
  #topology: Promise<Topology> | undefined;
  #closed = false;

  /** Checks the options; connects on first use. Throws if an option is invalid. */
  constructor(options: JetStreamTransportOptions = {}) {
    this.#options = resolveJetStreamOptions(options);
    this.names = this.#options.names;
    this.#serverClock = new ServerClock(() => this.ready(), () => this.topology(), this.#options.clock, this.#options.logger);
    this.#operations = new JetStreamOperations(() => this.ready(), this.names, this.#options.clock);
  }

  /** Browse, replay and delete error-queue entries (see ./operations.ts). */
  get errorQueue(): JetStreamOperations {
    return this.#operations;
  }

  /** Queue depths: ready, delayed and in flight. */
  get inspection(): JetStreamOperations {
    return this.#operations;
  }

  /** The connection and its JetStream clients, connecting on first use (an own connection waits for a server as long as it takes). */
  ready(): Promise<JetStreamClients> {
    if (this.#clients === undefined) {
      const pending = openClients(this.#options, () => this.#reconnected());
      this.#clients = pending;
      pending.catch(() => {
        if (this.#clients === pending) this.#clients = undefined;
      });
    }
    return this.#clients;
  }

  /** Makes the streams and consumers queues need, each once. */
  topology(): Promise<Topology> {
    this.#topology ??= this.ready().then(({ jsm }) => new Topology(jsm, this.#options));
    this.#topology.catch(() => {
      this.#topology = undefined;
    });
    return this.#topology;
  }

  /**
   * Puts a message on `queue` (making its stream when missing) and resolves
   * once the stream stored it. The message id is the `Nats-Msg-Id` (with
   * the replay count of a replayed message): a second send of the same
   * within the stream's duplicate window stores nothing. A stream out of
   * room rejects with a `QueueFullError`. A message with a `delayMs` is
   * stored in the delay stream instead, deduplicated there the same way,
   * and moved to the queue when due.
   */
  async send(queue: string, message: OutgoingMessage): Promise<void> {
    checkQueue(queue, 'send');
    this.#checkOpen('send');
    const { id, body, headers } = checkMessage(message);
    const delayMs = sendDelay('send', message.delayMs, MAX_HELD_DELAY_MS);
    const hdrs = encodeNatsHeaders(id, headers, delayMs > 0 ? { [DELAY_HEADER]: String(delayMs) } : undefined);
    const topology = await this.topology();
    const names = await topology.queue(queue, 'work');
    if (delayMs > 0) {
      await topology.delayStream();
      // The delay stream holds every queue's messages: the queue is part of the id it deduplicates by.
      await this.#publish(names.delaySubject, body, hdrs, `${sendMsgId(id, headers)}|s|${names.delaySubject}`, async () => {
        topology.forgetDelays();
        await topology.delayStream();
      });
      return;
    }
    try {
      await this.#publish(names.subject, body, hdrs, sendMsgId(id, headers), () => topology.remake(queue, 'work'));
    } catch (error) {
      if (classifyJetStreamSendError(error) === 'throttled') throw new QueueFullError(queue, String((error as Error | null)?.message ?? error));
      throw error;
    }
  }

  /**
   * Makes `errorQueue`'s stream now, as the first dead-letter into it
   * would. An endpoint calls it as it starts, so that a cluster has the
   * stream before any failure, not first made while the cluster is cut
   * apart.
   */
  async prepareErrorQueue(errorQueue: string): Promise<void> {
    checkQueue(errorQueue, 'prepareErrorQueue');
    this.#checkOpen('prepareErrorQueue');
    await (await this.topology()).queue(errorQueue, 'error');
  }

  async consume(queue: string, listener: DeliveryListener, options: ConsumeOptions): Promise<Subscription> {
    const prefetch = checkConsume(queue, listener, options, () => this.#checkOpen('consume'));
    const o = this.#options;
    const clients = await this.ready();
    const topology = await this.topology();
    const subscription = new JetStreamSubscription({
      queue,
      listener,
      prefetch,
      leaseMs: leaseOption('consume leaseMs', options.leaseMs, o.leaseMs),
      clients,
      topology,
      serverClock: this.#serverClock,
      settlement: this.#settlement(clients, topology),
      apiTimeoutMs: o.apiTimeoutMs,
      pullExpiresMs: o.pullExpiresMs,
      heartbeatMs: o.heartbeatMs,
      reconnect: o.reconnect,
      clock: o.clock,
      random: o.random,
      logger: o.logger,
      onClosed: (s) => this.#subscriptions.delete(s),
    });
    this.#subscriptions.add(subscription);
    try {
      await subscription.open();
    } catch (error) {
      await subscription.close();
      throw error;
    }
    return subscription;
  }

  /**
   * Closes every subscription and the transport's own connection (never a
   * connection passed in), after the settlements under way are sent.
   * Deliveries still unsettled come back to other consumers after their lease.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((s) => s.close()));
    if (this.#options.connection === undefined && this.#clients !== undefined) {
      const { nc } = await this.#clients.catch(() => ({ nc: undefined }));
      await nc?.drain().catch(() => nc.close());
    }
  }

  /** See {@link classifyJetStreamSendError}. */
  classifySendError(error: unknown): SendErrorKind {
    if (error instanceof TransportClosedError) return 'fatal';
    return classifyJetStreamSendError(error);
  }

  #checkOpen(operation: string): void {
    if (this.#closed) throw new TransportClosedError('jetstream', operation);
  }

  #reconnected(): void {
    for (const subscription of this.#subscriptions) subscription.reconnected();
  }

  #settlement(clients: JetStreamClients, topology: Topology): Omit<DeliveryOwner, 'settling' | 'settled'> {
    const names = this.names;
    const flush = new TurnFlush(clients.nc, this.#options.apiTimeoutMs, this.#options.clock);
    return {
      clock: this.#options.clock,
      confirm: (reply, payload) => flush.publish(reply, payload),
      publish: (subject, body, headers, msgID) =>
        this.#publish(subject, body, headers, msgID, async () => {
          // A settlement publishes to the delay stream or to an error queue: a queue's subject here is an error queue's.
          const errorQueue = names.queueOfSubject(subject);
          if (errorQueue !== undefined) await topology.remake(errorQueue, 'error');
          else if (subject.startsWith(`${names.prefix}.d.`)) {
            topology.forgetDelays();
            await topology.delayStream();
          }
        }),
      errorQueueSubject: async (errorQueue) => (await topology.queue(errorQueue, 'error')).subject,
      copyTooLarge: (operation, id, queue, error, instead) => {
        this.#options.logger?.error(
          { messageId: id, queue, operation, bytes: error.bytes, maxPayload: error.maxPayload },
          `jetstream: the ${operation} copy of message '${id}' on ${queue} would take ${error.bytes} bytes, over the server's max_payload (${error.maxPayload}), even without its failure history and stack; ${instead}`,
        );
      },
    };
  }

  /**
   * Publishes and waits for the stream to store the message; one larger
   * than the server's `max_payload` (body, headers and `Nats-Msg-Id`)
   * rejects with a {@link MessageTooLargeError}, nothing sent. When no
   * stream answers (it was deleted, or has no leader for now), `remake`
   * makes it again or waits for its leader, and the publish is tried once
   * more with the same id.
   */
  async #publish(subject: string, body: Uint8Array, headers: MsgHdrs, msgID: string | undefined, remake: () => Promise<void>): Promise<void> {
    const { nc, js } = await this.ready();
    const size = body.byteLength + headerBytes(headers) + (msgID === undefined ? 0 : msgIdHeaderBytes(msgID));
    const maxPayload = nc.info?.max_payload;
    if (maxPayload !== undefined && size > maxPayload) throw new MessageTooLargeError(size, maxPayload);
    const options = { headers, ...(msgID === undefined ? {} : { msgID }), timeout: this.#options.apiTimeoutMs };
    let ack: PubAck;
    try {
      ack = await js.publish(subject, body, options);
    } catch (error) {
      if (!noStreamAnswered(error)) throw error;
      await remake();
      ack = await js.publish(subject, body, options);
    }
    logStored(this.#options.logger, ack, msgID);
  }
}

/**
 * The `Nats-Msg-Id` of a send: the message id, so a producer's retry of the
 * same send stores nothing new; for a message replayed from an error queue
 * or the error store, the id and its replay count, so a replay is not taken
 * for a repeat of the original send (a resumed replay job, which sends the
 * same replay again, still stores one copy).
 */
function sendMsgId(id: string, headers: Readonly<Record<string, string>>): string {
  const replay = Object.prototype.hasOwnProperty.call(headers, HEADER.replayCount) ? headers[HEADER.replayCount] : undefined;
  return replay === undefined ? id : `${id}|replay|${replay}`;
}

/** The bytes a `Nats-Msg-Id` header adds to a message. */
function msgIdHeaderBytes(msgID: string): number {
  return 'Nats-Msg-Id'.length + Buffer.byteLength(msgID) + 4;
}

/** Whether a publish found no stream to answer: deleted, or without a leader during an election. */
function noStreamAnswered(error: unknown): boolean {
  const e = error as { name?: unknown; message?: unknown; code?: unknown } | null;
  return /no responders|JetStreamNotEnabled|503/i.test(`${String(e?.name)} ${String(e?.message)} ${String(e?.code)}`);
}


function checkMessage(message: OutgoingMessage): OutgoingMessage {
  if (typeof message !== 'object' || message === null) throw new TypeError('send: message must be an object');
  const { id, body, headers } = message;
  if (typeof id !== 'string' || id.length === 0) throw new TypeError('send: message id must be a non-empty string');
  if (!(body instanceof Uint8Array)) throw new TypeError('send: message body must be a Uint8Array');
  checkHeadersObject(headers, 'send: message headers');
  return message;
}
