import { randomUUID } from 'node:crypto';
import { jsonCodec, type Codec } from '../codec.js';
import type { Headers, Transport } from '../transport/types.js';

/** Options of a {@link Producer}. */
export interface ProducerOptions<T> {
  /** The broker or store. Required. */
  transport: Transport;
  /** Body codec. Default UTF-8 JSON. */
  codec?: Codec<T>;
  /** Makes message ids. Default random UUIDs. */
  newId?: () => string;
}

/** Options of one send. */
export interface SendOptions {
  /** The message id, kept across retries. Default a new id. */
  id?: string;
  /** Application headers. Names starting with `redeliver-` are reserved. */
  headers?: Headers;
}

/** Sends messages: encodes the body, gives the message a stable id, and hands it to the transport. */
export class Producer<T = unknown> {
  readonly #transport: Transport;
  readonly #codec: Codec<T>;
  readonly #newId: () => string;

  constructor(options: ProducerOptions<T>) {
    this.#transport = options.transport;
    this.#codec = (options.codec ?? jsonCodec) as Codec<T>;
    this.#newId = options.newId ?? randomUUID;
  }

  /** Sends `body` to `queue`; resolves with the message id once the broker has it. */
  async send(queue: string, body: T, options: SendOptions = {}): Promise<string> {
    const id = options.id ?? this.#newId();
    await this.#transport.send(queue, { id, body: this.#codec.encode(body), headers: { ...options.headers } });
    return id;
  }
}
