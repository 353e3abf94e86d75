/**
 * Publishing to one nsqd over a connection that comes back. nsqjs's
 * `Writer` connects once and stays closed after nsqd restarts; here each
 * connection is an nsqjs `WriterNSQDConnection`, and when one closes the
 * next publish opens another, waiting out `connectionBackoff` between
 * failed attempts. A publish waits for a connection at most
 * `publishTimeoutMs` in all.
 */
import type { Backoff } from '../../backoff/types.js';
import type { Logger } from '../../logger.js';
import type { Clock } from '../../time/clock.js';
import type { Random } from '../../time/random.js';
import { NsqPublishError } from './errors.js';
import { EVENT, writerConnection, type NsqjsWriterConnection } from './nsqjs.js';
import { splitAddress } from './options.js';
import { publishError } from './send-errors.js';

export interface PublisherOptions {
  readonly address: string;
  readonly connectionName: string;
  readonly heartbeatMs: number;
  readonly publishTimeoutMs: number;
  readonly backoff: Backoff;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
}

/** The reason a publish's timeout is called off with. */
const PUBLISH_ENDED = 'publish ended';

export class Publisher {
  readonly #o: PublisherOptions;
  readonly #closing = new AbortController();
  #connection: Promise<NsqjsWriterConnection> | undefined;
  #current: NsqjsWriterConnection | undefined;
  #closed = false;
  /** The timeouts of the publishes under way. */
  readonly #timeouts = new Set<AbortController>();

  constructor(options: PublisherOptions) {
    this.#o = options;
  }

  get address(): string {
    return this.#o.address;
  }

  /**
   * Publishes `messages` to `topic` (one: PUB, or DPUB when `delayMs` > 0;
   * several: MPUB) and resolves once nsqd answered OK. nsqd's refusals
   * reject with an `NsqRefusedError`; `E_PUB_FAILED` and the like, a
   * connection that closed before the answer and a timeout reject with an
   * `NsqPublishError` (nsqd may then hold the message).
   */
  async publish(topic: string, messages: Buffer[], delayMs = 0): Promise<void> {
    const started = this.#o.clock.monotonic();
    // One controller per publish, aborted with a shared reason (no DOMException) when the publish ends or the publisher closes.
    const timeout = new AbortController();
    this.#timeouts.add(timeout);
    const timer = this.#o.clock.sleep(this.#o.publishTimeoutMs, timeout.signal).then(
      () => true,
      () => false,
    );
    try {
      const connection = await Promise.race([this.#connect(), timer.then(() => undefined)]);
      if (connection === undefined) throw new NsqPublishError(undefined, this.address, `no connection within ${this.#o.publishTimeoutMs} ms`);
      const answer = new Promise<void>((resolve, reject) => {
        try {
          connection.produceMessages(topic, messages, delayMs > 0 ? delayMs : undefined, (error) => {
            if (error === null || error === undefined) resolve();
            else reject(/E_[A-Z_]+/.test(error.message) ? publishError(error.message, this.address) : new NsqPublishError(undefined, this.address, error.message));
          });
        } catch (error) {
          reject(new NsqPublishError(undefined, this.address, String(error)));
        }
      });
      const outcome = await Promise.race([answer.then(() => 'ok' as const), timer.then((fired) => (fired ? ('timeout' as const) : ('ok' as const)))]);
      if (outcome === 'timeout') {
        // Answers pair with publishes in order: one that never came leaves the connection unusable.
        connection.destroy();
        throw new NsqPublishError(undefined, this.address, `no answer within ${this.#o.publishTimeoutMs} ms (${Math.round(this.#o.clock.monotonic() - started)} ms in all); nsqd may hold the message`);
      }
      await answer;
    } finally {
      this.#timeouts.delete(timeout);
      timeout.abort(PUBLISH_ENDED);
    }
  }

  /** Closes the current connection at once, as a failing network would (for tests); the next publish opens another. */
  cut(): number {
    const current = this.#current;
    if (current === undefined || current.conn == null || current.conn.destroyed) return 0;
    current.destroy();
    return 1;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort();
    for (const timeout of this.#timeouts) timeout.abort(PUBLISH_ENDED);
    this.#timeouts.clear();
    this.#current?.close();
  }

  /** The open connection, or one being opened (attempts separated by the backoff). */
  #connect(): Promise<NsqjsWriterConnection> {
    this.#connection ??= this.#open().catch((error: unknown) => {
      this.#connection = undefined;
      throw error;
    });
    return this.#connection;
  }

  async #open(): Promise<NsqjsWriterConnection> {
    const o = this.#o;
    let previousDelayMs: number | undefined;
    let elapsedMs = 0;
    for (let attempt = 1; ; attempt++) {
      if (this.#closed) throw new NsqPublishError(undefined, o.address, 'the transport is closed');
      try {
        return await this.#openOnce();
      } catch (error) {
        const delay = o.backoff({ attempt, previousDelayMs, elapsedMs, random: o.random }) ?? 120_000;
        previousDelayMs = delay;
        elapsedMs += delay;
        o.logger?.warn({ nsqd: o.address, attempt, delayMs: delay, error: String(error) }, `nsq: could not connect to ${o.address} to publish (${String(error)}); trying again in ${delay} ms`);
        await o.clock.sleep(delay, this.#closing.signal).catch(() => undefined);
      }
    }
  }

  #openOnce(): Promise<NsqjsWriterConnection> {
    const o = this.#o;
    const { host, port } = splitAddress(o.address);
    const connection = writerConnection(host, port, { clientId: o.connectionName, heartbeatInterval: Math.round(o.heartbeatMs / 1000) });
    return new Promise((resolve, reject) => {
      let ready = false;
      connection.on(EVENT.error, (error: Error) => {
        if (ready) o.logger?.warn({ nsqd: o.address, error: String(error) }, `nsq: publishing connection to ${o.address}: ${String(error)}`);
      });
      connection.on(EVENT.connectionError, () => undefined);
      connection.once(EVENT.ready, () => {
        ready = true;
        this.#current = connection;
        if (this.#closed) connection.close();
        resolve(connection);
      });
      connection.once(EVENT.closed, () => {
        if (this.#current === connection) {
          this.#current = undefined;
          this.#connection = undefined;
        }
        if (!ready) reject(new Error(`connection to ${o.address} closed before it was ready`));
      });
      connection.connect();
    });
  }
}
