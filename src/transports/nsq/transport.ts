import type { SendErrorKind } from '../../transport/send-errors.js';
import { checkConsume, checkHeaders, checkQueue } from '../../transport/arguments.js';
import { MAX_HELD_DELAY_MS, sendDelay } from '../../transport/delay.js';
import type { ConsumeOptions, DeliveryListener, Headers, OutgoingMessage, Subscription, Transport, TransportCapabilities } from '../../transport/types.js';
import { leaseOption } from '../../transport/options.js';
import { EventEmitter } from 'node:events';
import { fitHeaders, minimalDeadLetterHeaders } from '../../headers/fit.js';
import { DUE_HEADER, ID_HEADER, wrap } from './codec.js';
import { ENVELOPE_OVERHEAD, headerBlockBytes } from './envelope.js';
import { MessageTooLargeError, TransportClosedError } from './errors.js';
import type { DuplicateKind, NsqStats, NsqTransportEvents } from './events.js';
import { checkName } from './names.js';
import type { NsqNode } from './nodes.js';
import { NsqNodes } from './nodes.js';
import { NsqOperations } from './operations.js';
import { resolveNsqOptions, type NsqTransportOptions, type ResolvedNsqOptions } from './options.js';
import { classifyNsqSendError } from './send-errors.js';
import { NsqSubscription } from './subscription.js';
import { NsqTopology } from './topology.js';

/**
 * The most bytes a retry or error-queue copy's headers may take in the
 * envelope: 64 KiB, so that with nsqd's default `--max-msg-size` (1 MiB)
 * most of a message is left to its body.
 */
export const MAX_COPY_HEADER_BYTES = 64 * 1024;

/** The bytes `headers` take in the envelope, with room for the message id and a hop's due time. */
function envelopeHeaderBytes(headers: Readonly<Headers>): number {
  return ENVELOPE_OVERHEAD + headerBlockBytes(headers) + 256;
}

/**
 * The NSQ transport: a queue is an NSQ topic, read through one channel
 * (`redeliver` by default) from every nsqd; an error queue is a topic like
 * any other. NSQ messages have no headers, so redeliver's travel in an
 * envelope at the front of the body (docs/headers.md).
 *
 * - A delivery's lease is the connection's `msg_timeout`; `extendLease` is
 *   TOUCH; a settlement after the lease ran out is refused here.
 * - `retryLater` publishes a copy with the new headers by DPUB (nsqd holds
 *   the delay), confirmed, then FINs the original; `deadLetter` publishes
 *   to the error topic, then FINs: a duplicate, never a loss, if the FIN
 *   does not follow (counted in `stats.duplicateWindow`, emitted as
 *   `duplicateWindow` and logged). A delay longer than nsqd's
 *   `--max-req-timeout` is carried in hops: the copy says when it is due,
 *   and a consumer that gets it early publishes it again with the rest of
 *   the delay.
 * - Consumer flow control is RDY (see `NsqSubscription`).
 *
 * Durability is nsqd's: deferred and in-flight messages live in its memory
 * (docs/nsq.md).
 */
export class NsqTransport implements Transport {
  readonly name = 'nsq';
  readonly capabilities: TransportCapabilities = { nativeDelay: true, nativeDeliveryCount: true, atomicSettle: false };
  /**
   * Delays past nsqd's `--max-req-timeout` are carried in hops, so any delay
   * up to 2^31-1 ms is held; the headers of a copy are kept within
   * {@link MAX_COPY_HEADER_BYTES}.
   */
  readonly limits = Object.freeze({ maxDelayMs: MAX_HELD_DELAY_MS, maxHeaderBytes: MAX_COPY_HEADER_BYTES, headerBytes: envelopeHeaderBytes });
  /** Topics and channels on every nsqd. */
  readonly topology: NsqTopology;
  readonly #options: ResolvedNsqOptions;
  readonly #nodes: NsqNodes;
  readonly #subscriptions = new Set<NsqSubscription>();
  readonly #operations: NsqOperations;
  readonly #events = new EventEmitter();
  readonly #stats: NsqStats = { duplicateWindow: 0 };
  #closed = false;

  /** Checks the options; connects on first use. Throws if an option is invalid. */
  constructor(options: NsqTransportOptions = {}) {
    this.#options = resolveNsqOptions(options);
    this.#nodes = new NsqNodes(this.#options);
    this.topology = new NsqTopology(this.#nodes, this.#options.channel);
    const o = this.#options;
    this.#operations = new NsqOperations({
      nodes: async () => (await this.#nodes.known()).map((n) => ({ tcp: n.address, http: n.http })),
      channel: o.channel,
      connectionName: o.connectionName,
      clock: o.clock,
      ...(o.logger === undefined ? {} : { logger: o.logger }),
      publish: async (topic, bytes, node) => {
        const target = this.#nodes.node(node.tcp);
        await target.ensureChannel(topic, o.channel);
        await target.publisher.publish(topic, [Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)]);
      },
    });
  }

  /** Browse, replay and delete error-queue entries (see ./operations.ts). */
  get errorQueue(): NsqOperations {
    return this.#operations;
  }

  /** Queue depths from nsqd's `/stats`. */
  get inspection(): NsqOperations {
    return this.#operations;
  }

  /** Counters since the transport was created (a copy). */
  get stats(): NsqStats {
    return { ...this.#stats };
  }

  /** Adds a listener for one of the {@link NsqTransportEvents}. */
  on<K extends keyof NsqTransportEvents>(event: K, listener: (args: NsqTransportEvents[K]) => void): this {
    this.#events.on(event, listener);
    return this;
  }

  /** Removes a listener added with {@link on}. */
  off<K extends keyof NsqTransportEvents>(event: K, listener: (args: NsqTransportEvents[K]) => void): this {
    this.#events.off(event, listener);
    return this;
  }

  /** The channel consumers read through. */
  get channel(): string {
    return this.#options.channel;
  }

  /** The nodes known so far (the `nsqd` option's, and the ones found through nsqlookupd). */
  get nodes(): NsqNodes {
    return this.#nodes;
  }

  /**
   * The error queue of an endpoint consuming `queue` that names none:
   * `<queue>.error` (for an ephemeral `<name>#ephemeral`, the durable
   * `<name>.error`). Throws an `InvalidNameError` when that name would be
   * longer than nsqd takes (64 characters): such an endpoint must name its
   * error queue.
   */
  defaultErrorQueue(queue: string): string {
    const errorQueue = `${queue.replace(/#ephemeral$/, '')}.error`;
    checkName(errorQueue, 'topic', 'defaultErrorQueue');
    return errorQueue;
  }

  /**
   * Publishes a message to `queue`'s topic on an nsqd (the `nsqd` option's
   * in turn, else one nsqlookupd lists) and resolves once nsqd answered OK.
   * Before the first send to a topic on a node, the consumer channel is made
   * there, so the message waits for consumers that come later. A `delayMs`
   * is held by nsqd (DPUB), in hops past its `--max-req-timeout`. A message
   * larger than nsqd's `--max-msg-size` is refused with a
   * `MessageTooLargeError` before anything is sent.
   */
  async send(queue: string, message: OutgoingMessage): Promise<void> {
    checkQueue(queue, 'send');
    checkName(queue, 'topic', 'send: queue');
    if (this.#closed) throw new TransportClosedError('nsq', 'send');
    const { id, body, headers } = checkMessage(message);
    const delayMs = sendDelay('send', message.delayMs, MAX_HELD_DELAY_MS);
    const node = await this.#nodes.forSend();
    await this.#publish(node, queue, id, body, headers, delayMs, this.#options.channel);
  }

  /**
   * Starts consuming `queue`'s topic from every nsqd, through the consumer
   * channel; an error topic (one that has the error channel, which a
   * dead-letter makes) through the error channel, so that whoever consumes
   * an error queue takes its entries as the operators' tools do: an error
   * queue stays one queue.
   */
  async consume(queue: string, listener: DeliveryListener, options: ConsumeOptions): Promise<Subscription> {
    const prefetch = checkConsume(queue, listener, options, () => {
      if (this.#closed) throw new TransportClosedError('nsq', 'consume');
    });
    checkName(queue, 'topic', 'consume: queue');
    const leaseMs = leaseOption('NsqTransport', 'consume: leaseMs', options?.leaseMs, this.#options.leaseMs);
    const channel = (await this.#isErrorTopic(queue)) ? this.#operations.errorChannel : this.#options.channel;
    const subscription = new NsqSubscription({
      queue,
      listener,
      prefetch,
      leaseMs,
      nodes: this.#nodes,
      options: { ...this.#options, channel },
      settlement: {
        publishCopy: (topic, id, body, headers, delay, via) => this.#publishCopy(this.#nodes.node(via), queue, topic, id, body, headers, delay, channel),
        copyTooLarge: (operation, id, error, instead) => {
          this.#options.logger?.error(
            { messageId: id, queue, operation, bytes: error.bytes, maxMessageBytes: error.maxMessageBytes },
            `nsq: the ${operation} copy of message '${id}' on ${queue} would take ${error.bytes} bytes, over nsqd's --max-msg-size (${error.maxMessageBytes}), even without its failure history and stack; ${instead}`,
          );
        },
        recordDuplicate: (id, kind) => this.#recordDuplicate(queue, id, kind),
        scanStartsIn: (topic, via) => this.#nodes.node(via).scanStartsIn(topic, channel),
        deadLetterCopy: async (errorQueue, id, body, headers, via) => {
          checkName(errorQueue, 'topic', 'deadLetter: errorQueue');
          // The error store and the operations read error topics through a channel of their own: it must hold every entry.
          // The consumer channel is not made there: a channel nobody reads would keep a copy of every entry for good.
          // The copy's node gets that channel before the copy (see #publish); no other node nor nsqlookupd is asked: one that
          // does not answer (cut off, killed) would hold the dead-letter past its lease or fail it.
          await this.#publishCopy(this.#nodes.node(via), queue, errorQueue, id, body, headers, 0, this.#operations.errorChannel);
        },
        deadLetterAsArrived: async (errorQueue, bytes, via) => {
          const node = this.#nodes.node(via);
          await node.ensureChannel(errorQueue, this.#operations.errorChannel);
          await node.publisher.publish(errorQueue, [Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)]);
        },
      },
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

  /** Whether `topic` has the error channel on any nsqd this transport knows: an error topic. */
  async #isErrorTopic(topic: string): Promise<boolean> {
    const nodes = await this.#nodes.known();
    const stats = await Promise.all(nodes.map((n) => n.http.topicStats(topic)));
    return stats.some((t) => t?.channels.some((c) => c.channel_name === this.#operations.errorChannel) ?? false);
  }

  /** Closes every subscription and publishing connection. Deliveries still unsettled come back to other consumers after their lease. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const subscriptions = [...this.#subscriptions];
    await Promise.all(subscriptions.map((s) => s.close()));
    for (const s of subscriptions) s.disconnect();
    this.#nodes.close();
  }

  /** Closes every connection at once, as a failing network would, and says how many (for tests); each opens again. */
  cut(): number {
    let cut = 0;
    for (const s of this.#subscriptions) cut += s.cut();
    for (const node of this.#nodes.all()) cut += node.publisher.cut();
    return cut;
  }

  /** See {@link classifyNsqSendError}. */
  classifySendError(error: unknown): SendErrorKind {
    return classifyNsqSendError(error);
  }

  /** A copy confirmed whose original could not be finished: counted, logged and emitted; the message will be delivered twice. */
  #recordDuplicate(queue: string, id: string, kind: DuplicateKind): void {
    this.#stats.duplicateWindow += 1;
    this.#options.logger?.warn({ messageId: id, queue, kind }, `nsq: a copy of message '${id}' on ${queue} was confirmed but the original could not be finished (its connection closed or its lease ran out); nsqd delivers it again, so the message now exists twice`);
    try {
      this.#events.emit('duplicateWindow', { id, queue, kind });
    } catch (error) {
      this.#options.logger?.error({ error: String(error) }, `nsq: a duplicateWindow listener threw: ${String(error)}`);
    }
  }

  /**
   * A retry, error-queue or hop copy: {@link #publish} with `headers` cut
   * to what nsqd's `--max-msg-size` leaves beside the body (see
   * {@link fitCopyHeaders}), logged when anything was cut.
   */
  async #publishCopy(node: NsqNode, queue: string, topic: string, id: string, body: Uint8Array, headers: Readonly<Headers>, delayMs: number, channel: string): Promise<void> {
    const limits = await node.limits();
    const fitted = fitCopyHeaders(id, headers, body, delayMs > limits.maxDelayMs, limits.maxMessageBytes);
    if (fitted !== undefined && fitted !== headers) {
      const dropped = Object.keys(headers).filter((name) => fitted[name] !== headers[name]);
      this.#options.logger?.warn(
        { messageId: id, queue, topic, maxMessageBytes: limits.maxMessageBytes, cut: dropped },
        `nsq: the copy of message '${id}' to ${topic} did not fit nsqd's --max-msg-size (${limits.maxMessageBytes}) beside its ${body.byteLength}-byte body; cut: ${dropped.join(', ')}`,
      );
    }
    await this.#publish(node, topic, id, body, fitted ?? headers, delayMs, channel);
  }

  /**
   * Publishes one message in its envelope to `topic` on `node`, after
   * `delayMs`: a delay nsqd holds in one go is a DPUB of it; a longer one
   * is a DPUB of nsqd's most, with the due time in the envelope. `channel`
   * is made on the topic first (once per node), so the message waits in it
   * even before anyone reads it.
   */
  async #publish(node: NsqNode, topic: string, id: string, body: Uint8Array, headers: Readonly<Headers>, delayMs: number, channel: string): Promise<void> {
    const limits = await node.limits();
    const hop = delayMs > limits.maxDelayMs;
    const bytes = wrap(id, headers, body, hop ? this.#options.clock.now() + delayMs : undefined);
    if (bytes.byteLength > limits.maxMessageBytes) throw new MessageTooLargeError(bytes.byteLength, limits.maxMessageBytes);
    await node.ensureChannel(topic, channel);
    await node.publisher.publish(topic, [bytes], Math.min(delayMs, limits.maxDelayMs));
  }
}

/**
 * `headers` as they may go in a copy of `body` within `maxMessageBytes`
 * (envelope, message id and, for a hop, its due time included): as they
 * are when they fit; else with the failure history's oldest entries, then
 * the stack's end cut (`fitHeaders`); else without history, stack and
 * validation issues (`minimalDeadLetterHeaders`). Undefined when not even
 * that fits: the user's own headers and body leave no room.
 */
export function fitCopyHeaders(id: string, headers: Readonly<Headers>, body: Uint8Array, hop: boolean, maxMessageBytes: number): Readonly<Headers> | undefined {
  const carried: Headers = { [ID_HEADER]: id, ...(hop ? { [DUE_HEADER]: String(Number.MAX_SAFE_INTEGER) } : {}) };
  const measure = (h: Readonly<Headers>) => ENVELOPE_OVERHEAD + headerBlockBytes({ ...h, ...carried }) + body.byteLength;
  if (measure(headers) <= maxMessageBytes) return headers;
  const budget = { maxHeaderBytes: maxMessageBytes, headerBytes: measure };
  const cut = fitHeaders({ ...headers }, budget);
  if (measure(cut) <= maxMessageBytes) return cut;
  const minimal = fitHeaders(minimalDeadLetterHeaders(cut), budget);
  return measure(minimal) <= maxMessageBytes ? minimal : undefined;
}

function checkMessage(message: OutgoingMessage): OutgoingMessage {
  if (typeof message !== 'object' || message === null) throw new TypeError('send: message must be an object');
  const { id, body, headers } = message;
  if (typeof id !== 'string' || id.length === 0) throw new TypeError('send: message id must be a non-empty string');
  if (!(body instanceof Uint8Array)) throw new TypeError('send: message body must be a Uint8Array');
  checkHeaders(headers, 'send', 'send: message headers');
  return message;
}
