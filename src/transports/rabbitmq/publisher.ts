/**
 * Every publish the transport makes: sends, delayed copies through the delay
 * levels, and error-queue copies. All are `mandatory` and go through the
 * confirm channel, and resolve only once a queue took them and the broker
 * confirmed them.
 */
import type { MessageProperties, Options } from 'amqplib';
import type { Logger } from '../../logger.js';
import type { Headers, OutgoingMessage } from '../../transport/types.js';
import type { ConfirmedPublishing } from './confirmed-publishing.js';
import { MessageTooLargeError } from './errors.js';
import type { ResolvedOptions } from './options.js';
import { delayEntryExchange, delayRoutingKey, delayToLevelsMs, type DelayTopologyNames, type QueueRole } from './topology.js';
import { encodeHeaders, INTERNAL_HEADERS, type OutgoingMode } from './wire-headers.js';

/** The header table of a send without headers, shared: amqplib only reads it. */
const NO_HEADERS: Record<string, string> = Object.freeze(Object.create(null) as Record<string, string>);

/** Whether `headers` has no own enumerable key, without building the list of keys. */
function isEmpty(headers: object): boolean {
  for (const key in headers) if (Object.hasOwn(headers, key)) return false;
  return true;
}

/** Message properties carried over from the original to its retry and error-queue copies. */
const KEPT_STRING_PROPERTIES = ['contentType', 'contentEncoding', 'correlationId', 'type', 'appId'] as const;

/** The properties of an original worth keeping on its copies, checked for type. */
export function keptProperties(properties: MessageProperties | undefined): Options.Publish {
  const kept: Options.Publish = {};
  if (!properties) return kept;
  for (const name of KEPT_STRING_PROPERTIES) {
    const value: unknown = properties[name];
    if (typeof value === 'string' && value.length > 0) kept[name] = value;
  }
  const priority: unknown = properties.priority;
  if (typeof priority === 'number' && Number.isInteger(priority) && priority >= 0 && priority <= 255) kept.priority = priority;
  return kept;
}

function toBuffer(body: Uint8Array): Buffer {
  if (Buffer.isBuffer(body)) return body;
  if (!(body instanceof Uint8Array)) throw new TypeError('rabbitmq: message body must be a Uint8Array');
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
}

function checkId(id: unknown): string {
  if (typeof id !== 'string' || id.length === 0 || Buffer.byteLength(id) > 255) {
    throw new RangeError(`rabbitmq: message id must be a string of 1 to 255 bytes, got ${JSON.stringify(id)}`);
  }
  return id;
}

/** A copy to publish: the original's id, body and kept properties, with new headers. */
export interface CopyRequest {
  readonly id: string;
  readonly body: Uint8Array;
  readonly headers: Readonly<Headers>;
  readonly properties?: Options.Publish;
}

export class Publisher {
  constructor(
    private readonly publishing: ConfirmedPublishing,
    private readonly names: DelayTopologyNames,
    private readonly options: ResolvedOptions,
  ) {}

  /** Forgets `queue`'s declaration on the publish connection: it was deleted, and the next publish to it declares it again. */
  forgetQueue(queue: string): void {
    this.publishing.forgetQueue(queue);
  }

  #headers(headers: Readonly<Headers>, mode: OutgoingMode, id: string, logger: Logger | undefined): Record<string, string> {
    const { table, dropped, truncated } = encodeHeaders(headers, mode);
    if (dropped > 0 || truncated > 0) {
      logger?.warn({ messageId: id, dropped, truncated }, 'rabbitmq: headers of a copy were trimmed to the header bounds');
    }
    return table;
  }

  /**
   * Puts a message on `queue` (declared on first use); resolves once the
   * queue took it and the broker confirmed it. A message with a `delayMs`
   * goes through the delay levels, as a delayed retry does. A message no
   * queue took (the queue was deleted) rejects with a `PublishReturnedError`,
   * and the next send declares the queue again. Bad input (an id, body or
   * header the transport cannot carry, a delay beyond {@link MAX_DELAY_MS})
   * throws a TypeError or RangeError, and a body over `maxMessageBytes` a
   * {@link MessageTooLargeError}, before anything is published.
   */
  send(queue: string, message: OutgoingMessage): Promise<void> {
    const id = checkId(message?.id);
    const delayMs = message.delayMs === undefined ? 0 : delayToLevelsMs(message.delayMs, 'send: delayMs');
    const content = toBuffer(message.body);
    if (content.length > this.options.maxMessageBytes) throw new MessageTooLargeError(content.length, this.options.maxMessageBytes, 'maxMessageBytes');
    const given = message.headers ?? NO_HEADERS;
    if (delayMs > 0) {
      return this.#throughLevels(queue, id, content, {}, this.#headers(given, 'strict', id, undefined), delayMs, `delayed send of ${id} to ${queue} after ${delayMs} ms`);
    }
    const headers = typeof given === 'object' && given !== null && isEmpty(given) ? NO_HEADERS : this.#headers(given, 'strict', id, undefined);
    return this.publishing.publish({
      exchange: '',
      routingKey: queue,
      content,
      properties: { persistent: true, mandatory: true, messageId: id, headers },
      operation: `send of ${id} to ${queue}`,
      queue,
      role: 'work',
      route: 'queue',
    });
  }

  /**
   * Publishes a copy that returns to `queue` after `delayMs` through the delay
   * levels, with its due time in a header; resolves once confirmed.
   */
  async publishDelayed(queue: string, copy: CopyRequest, delayMs: number): Promise<void> {
    const ms = delayToLevelsMs(delayMs);
    const headers = this.#headers(copy.headers, 'lenient', copy.id, this.options.logger);
    await this.#throughLevels(queue, copy.id, toBuffer(copy.body), copy.properties ?? {}, headers, ms, `retry copy of ${copy.id} to ${queue} after ${ms} ms`);
  }

  /**
   * Publishes into the delay levels a message that returns to `queue` after
   * `ms` whole milliseconds, with its destination, due time and delay in
   * `headers` (a table of this publish's own, which gains them).
   */
  #throughLevels(queue: string, id: string, content: Buffer, properties: Options.Publish, headers: Record<string, string>, ms: number, operation: string): Promise<void> {
    headers[INTERNAL_HEADERS.destination] = queue;
    headers[INTERNAL_HEADERS.dueAt] = String(this.options.clock.now() + ms);
    headers[INTERNAL_HEADERS.delay] = String(ms);
    const exchange = delayEntryExchange(this.names, ms);
    return this.publishing.publish({
      exchange,
      routingKey: delayRoutingKey(ms),
      content,
      properties: { ...properties, persistent: true, mandatory: true, messageId: id, headers },
      operation,
      queue,
      role: 'work',
      // No delay enters at the deliver exchange, whose binding leads straight to the queue.
      route: exchange === this.names.deliver ? 'queue' : 'delay-levels',
    });
  }

  /**
   * Publishes a copy straight to `queue` (declared on first use, as a work
   * queue unless `role` is `'error'`: error queues are never bounded by
   * `maxLength`); resolves once confirmed.
   */
  async publishCopy(queue: string, copy: CopyRequest, operation: string, role: QueueRole = 'work'): Promise<void> {
    const headers = this.#headers(copy.headers, 'lenient', copy.id, this.options.logger);
    await this.publishing.publish({
      exchange: '',
      routingKey: queue,
      content: toBuffer(copy.body),
      properties: { ...copy.properties, persistent: true, mandatory: true, messageId: copy.id, headers },
      operation: `${operation} of ${copy.id} to ${queue}`,
      queue,
      role,
      route: 'queue',
    });
  }
}
