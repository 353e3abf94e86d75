/**
 * Pull requests on one durable consumer, as many messages as the owner has
 * room for and no more. Each request asks for a batch, lives
 * `pullExpiresMs`, and makes the server send a heartbeat while it waits;
 * when the server ends a request it says how many messages it did not
 * deliver. A request the server forgot (a restart, a new consumer leader, a
 * reconnection) shows as missing heartbeats: the puller then counts nothing
 * outstanding and the owner asks again. A message that still arrives for a
 * forgotten request is handed over all the same; the owner keeps it until it
 * has room.
 */
import { createInbox, type Msg, type NatsConnection, type Subscription as NatsSubscription } from '@nats-io/transport-node';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { Clock } from '../../time/clock.js';
import { isNotFound } from './topology.js';
import type { Logger } from '../../logger.js';

const NS_PER_MS = 1_000_000;

/** What ended a pull request early, as the server put it. */
export type PullEnd = 'expired' | 'consumer-deleted' | 'no-responders' | 'other';

/** What a puller needs from its owner. */
export interface PullOwner {
  /** A message delivered under a pull request. */
  onMessage(msg: Msg): void;
  /** Requests ended or were forgotten: the owner may ask for more. */
  onRoom(): void;
  /** The consumer or its stream is gone (deleted, or no server answers for it). */
  onGone(reason: string): void;
}

/**
 * Sees whether a consumer that went silent still exists; a deleted one
 * is reported to the owner as gone, since pull requests to it are dropped
 * without an answer.
 */
export async function checkConsumer(jsm: JetStreamManager, stream: string, consumer: string, owner: PullOwner): Promise<void> {
  try {
    await jsm.consumers.info(stream, consumer);
  } catch (error) {
    if (isNotFound(error)) owner.onGone(`${stream}/${consumer} no longer exists`);
  }
}

export interface PullerOptions {
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
  readonly stream: string;
  readonly consumer: string;
  readonly expiresMs: number;
  readonly heartbeatMs: number;
  readonly clock: Clock;
  readonly logger: Logger | undefined;
  readonly owner: PullOwner;
}

export class Puller {
  readonly #o: PullerOptions;
  readonly #inbox = createInbox();
  readonly #sub: NatsSubscription;
  readonly #closing = new AbortController();
  #outstanding = 0;
  #lastHeard: number;
  #closed = false;

  constructor(options: PullerOptions) {
    this.#o = options;
    this.#lastHeard = options.clock.monotonic();
    this.#sub = options.nc.subscribe(this.#inbox, { callback: (_error, msg) => this.#onMsg(msg) });
    void this.#watch();
  }

  /** Messages asked for and not yet delivered or given up by the server. */
  get outstanding(): number {
    return this.#outstanding;
  }

  /** Asks the server for `count` more messages. */
  request(count: number): void {
    if (this.#closed || count <= 0) return;
    if (this.#outstanding === 0) this.#lastHeard = this.#o.clock.monotonic();
    this.#outstanding += count;
    const { nc, stream, consumer, expiresMs, heartbeatMs } = this.#o;
    const request = JSON.stringify({ batch: count, expires: expiresMs * NS_PER_MS, idle_heartbeat: heartbeatMs * NS_PER_MS });
    try {
      nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`, request, { reply: this.#inbox });
    } catch (error) {
      this.#outstanding -= count;
      this.#o.logger?.warn({ stream, consumer, error: String(error) }, `jetstream: could not send a pull request to ${stream}/${consumer}: ${String(error)}`);
    }
  }

  /** Counts nothing outstanding: requests sent before are taken as gone (after a reconnection). */
  forget(): void {
    this.#outstanding = 0;
  }

  /**
   * Stops asking. The inbox is drained rather than dropped: a message
   * already on its way for a pull sent earlier is given back (`-NAK`) as it
   * arrives, so the next consumer gets it at once instead of after its
   * lease; one the server sends after the drain waits out its lease.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort();
    try {
      void this.#sub.drain().catch(() => undefined);
    } catch {
      // The connection is closed: nothing more arrives.
    }
  }

  #onMsg(msg: Msg): void {
    if (this.#closed) {
      if (msg.reply?.startsWith('$JS.ACK.')) giveBack(msg);
      return;
    }
    this.#lastHeard = this.#o.clock.monotonic();
    if (msg.reply !== undefined && msg.reply.startsWith('$JS.ACK.')) {
      if (this.#outstanding > 0) this.#outstanding -= 1;
      this.#o.owner.onMessage(msg);
      return;
    }
    const code = msg.headers?.code ?? 0;
    if (code === 100) return;
    const description = msg.headers?.description ?? '';
    const pending = Number(msg.headers?.get('Nats-Pending-Messages') ?? NaN);
    if (Number.isInteger(pending) && pending >= 0) this.#outstanding = Math.max(0, this.#outstanding - pending);
    else this.#outstanding = 0;
    if (code === 409 && /consumer (is )?deleted/i.test(description)) this.#o.owner.onGone(`consumer deleted`);
    else if (code === 503) this.#o.owner.onGone('no server answers for the consumer (its stream is gone or has no leader)');
    else if (code !== 408 && code !== 404) this.#o.logger?.debug?.({ code, description }, `jetstream: pull request on ${this.#o.stream} ended: ${code} ${description}`);
    this.#o.owner.onRoom();
  }

  async #watch(): Promise<void> {
    while (!this.#closed) {
      try {
        await this.#o.clock.sleep(this.#o.heartbeatMs, this.#closing.signal);
      } catch {
        return;
      }
      this.#check();
    }
  }

  /** Two heartbeats missed while messages are outstanding: the server forgot the requests. */
  #check(): void {
    if (this.#closed || this.#outstanding === 0) return;
    if (this.#o.clock.monotonic() - this.#lastHeard <= 2 * this.#o.heartbeatMs + 100) return;
    this.#o.logger?.info({ stream: this.#o.stream, consumer: this.#o.consumer, outstanding: this.#outstanding }, `jetstream: no heartbeat from ${this.#o.stream}/${this.#o.consumer}; sending pull requests again`);
    this.#outstanding = 0;
    this.#lastHeard = this.#o.clock.monotonic();
    void checkConsumer(this.#o.jsm, this.#o.stream, this.#o.consumer, this.#o.owner);
    this.#o.owner.onRoom();
  }
}

/** Hands a fetched message back to the server at once; on a closed connection the server offers it again after its lease. */
export function giveBack(msg: Msg): void {
  try {
    msg.respond('-NAK');
  } catch {
    // The connection is closed.
  }
}
