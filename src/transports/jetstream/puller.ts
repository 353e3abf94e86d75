/**
 * Pull requests on one durable consumer, as many messages as the owner has
 * room for and no more. Each request asks for a batch, lives
 * `expiresMs`, and makes the server send a heartbeat while it waits;
 * when the server ends a request it says how many messages it did not
 * deliver. A request the server forgot (a restart, a new consumer leader, a
 * reconnection) shows as missing heartbeats: the puller then counts nothing
 * outstanding and the owner asks again. A message that still arrives for a
 * forgotten request is handed over all the same; the owner keeps it until it
 * has room.
 *
 * Each request has an inbox of its own, so every message tells which
 * request it answers and the owner learns when that request was sent. The
 * server starts a delivery's `ack_wait` when it sends the message, which is
 * after it got the request: the send time is the earliest the lease can have
 * started, whenever the message arrives. A message held back in a cut
 * connection and arriving late is so seen as late; counted from its arrival,
 * it would look fresh while the server has given it to another consumer.
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
  /** A message delivered under a pull request, with the monotonic time that request was sent. */
  onMessage(msg: Msg, requestSentAt: number): void;
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
  /** The consumer's `ack_wait`: how long the inbox of a request the server never ended is read after the request expired. */
  readonly ackWaitMs: number;
  readonly clock: Clock;
  readonly logger: Logger | undefined;
  readonly owner: PullOwner;
}

/**
 * How long the requests of a consumer with `ackWaitMs` live and how often
 * the server signals them: at most half the `ack_wait`, so a message's
 * lease, counted from its request's send time, has at least half left when
 * it comes, and heartbeats less than half of that.
 */
export function pullTiming(expiresMs: number, heartbeatMs: number, ackWaitMs: number): { expiresMs: number; heartbeatMs: number } {
  const expires = Math.max(MIN_EXPIRES_MS, Math.min(expiresMs, Math.floor(ackWaitMs / 2)));
  return { expiresMs: expires, heartbeatMs: Math.max(1, Math.min(heartbeatMs, Math.ceil(expires / 2) - 1)) };
}

/** The shortest life of a pull request, whatever the `ack_wait`. */
const MIN_EXPIRES_MS = 100;

/** An inbox pull requests are answered on, with the subscription that reads it. */
interface Inbox {
  readonly subject: string;
  readonly sub: NatsSubscription;
}

/** A pull request the server has not ended: when it was sent, how many messages it may still bring, and its inbox. */
interface SentRequest {
  readonly sentAt: number;
  left: number;
  readonly inbox: Inbox;
}

export class Puller {
  readonly #o: PullerOptions;
  readonly #closing = new AbortController();
  /**
   * Requests by their inbox's subject. Each request has an inbox to itself,
   * so a message tells which request it answers. An inbox is used again
   * once its request ended (the server sent its last message, or its end),
   * when nothing more can come for it.
   */
  readonly #sent = new Map<string, SentRequest>();
  /** Inboxes whose request ended, to answer the next requests. */
  readonly #free: Inbox[] = [];
  #outstanding = 0;
  #lastHeard: number;
  #closed = false;

  constructor(options: PullerOptions) {
    this.#o = options;
    this.#lastHeard = options.clock.monotonic();
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
    const { nc, stream, consumer, expiresMs, heartbeatMs, clock } = this.#o;
    const request = JSON.stringify({ batch: count, expires: expiresMs * NS_PER_MS, idle_heartbeat: heartbeatMs * NS_PER_MS });
    let inbox: Inbox | undefined;
    try {
      inbox = this.#inbox();
      this.#sent.set(inbox.subject, { sentAt: clock.monotonic(), left: count, inbox });
      nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`, request, { reply: inbox.subject });
      this.#outstanding += count;
    } catch (error) {
      if (inbox !== undefined) this.#end(inbox.subject, false);
      this.#o.logger?.warn({ stream, consumer, error: String(error) }, `jetstream: could not send a pull request to ${stream}/${consumer}: ${String(error)}`);
    }
  }

  /** Counts nothing outstanding: requests sent before are taken as gone (after a reconnection). */
  forget(): void {
    this.#outstanding = 0;
  }

  /**
   * Stops asking. The inboxes are drained rather than dropped: a message
   * already on its way for a pull sent earlier is given back (`-NAK`) as it
   * arrives, so the next consumer gets it at once instead of after its
   * lease; one the server sends after the drain waits out its lease.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#closing.abort();
    for (const sent of this.#sent.values()) drainQuietly(sent.inbox);
    for (const inbox of this.#free) drainQuietly(inbox);
    this.#sent.clear();
    this.#free.length = 0;
  }

  /** A free inbox, or a new one. */
  #inbox(): Inbox {
    const free = this.#free.pop();
    if (free !== undefined) return free;
    const subject = createInbox();
    return { subject, sub: this.#o.nc.subscribe(subject, { callback: (_error, msg) => this.#onMsg(msg, subject) }) };
  }

  /** The request on `subject` ended: its inbox answers the next request (`reuse`), or is no longer read. */
  #end(subject: string, reuse: boolean): void {
    const sent = this.#sent.get(subject);
    if (sent === undefined) return;
    this.#sent.delete(subject);
    if (reuse && !this.#closed) {
      this.#free.push(sent.inbox);
      return;
    }
    try {
      sent.inbox.sub.unsubscribe();
    } catch {
      // The connection is closed.
    }
  }

  #onMsg(msg: Msg, subject: string): void {
    if (this.#closed) {
      if (msg.reply?.startsWith('$JS.ACK.')) giveBack(msg);
      return;
    }
    this.#lastHeard = this.#o.clock.monotonic();
    const sent = this.#sent.get(subject);
    if (msg.reply !== undefined && msg.reply.startsWith('$JS.ACK.')) {
      if (this.#outstanding > 0) this.#outstanding -= 1;
      if (sent === undefined) {
        // No request of ours waits on this inbox: when it was asked for is not known, so neither is its lease.
        this.#o.logger?.debug?.({ stream: this.#o.stream }, `jetstream: a message of ${this.#o.stream} came on an inbox no pull request waits on; the server offers it again after its ack_wait`);
        return;
      }
      if (--sent.left <= 0) this.#end(subject, true);
      this.#o.owner.onMessage(msg, sent.sentAt);
      return;
    }
    const code = msg.headers?.code ?? 0;
    if (code === 100) return;
    // Any other status ends its request: the server sent every message of it before this.
    this.#end(subject, true);
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

  /**
   * Stops reading the inboxes of requests the server never ended (forgotten
   * by it, or their end lost) once a message of theirs would be past its
   * lease anyway; then, when two heartbeats were missed while messages are
   * outstanding, takes the requests as forgotten by the server.
   */
  #check(): void {
    const keptSince = this.#o.clock.monotonic() - this.#o.expiresMs - this.#o.ackWaitMs;
    for (const [subject, { sentAt }] of this.#sent) if (sentAt < keptSince) this.#end(subject, false);
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

/** Reads what is already on its way to `inbox`, then stops; on a closed connection nothing more arrives. */
function drainQuietly(inbox: Inbox): void {
  try {
    void inbox.sub.drain().catch(() => undefined);
  } catch {
    // The connection is closed.
  }
}
