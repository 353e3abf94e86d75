/**
 * Consuming one topic through one channel from one nsqd, over a connection
 * that comes back. nsqjs's `Reader` reconnects only when its lookupd poll
 * comes round and cannot be opened again once closed; here each connection
 * is an nsqjs `NSQDConnection` (IDENTIFY, SUB, heartbeats, message frames),
 * and when one closes another is opened after `connectionBackoff`. RDY is
 * set by the subscription alone: nsqjs's backoff timer is never involved.
 */
import type { Backoff } from '../../backoff/types.js';
import type { Logger } from '../../logger.js';
import type { Clock } from '../../time/clock.js';
import type { Random } from '../../time/random.js';
import type { DeliveryLink } from './delivery.js';
import { EVENT, readerConnection, type NsqjsConnection, type NsqjsMessage } from './nsqjs.js';
import type { NsqNode } from './nodes.js';
import { splitAddress } from './options.js';

/**
 * The id of the lease mark: 16 bytes, as nsqd takes a FIN's id, and not
 * hexadecimal, so never the id of a message nsqd gave out.
 */
export const LEASE_MARK_ID = 'redeliver-mark!!';
const MARK_COMMAND = new TextEncoder().encode(`FIN ${LEASE_MARK_ID}\n`);

/** One open connection of a link: deliveries that arrived on it settle on it, and are gone once it closes. */
export class LinkConnection implements DeliveryLink {
  open = true;
  /** The RDY count last sent. */
  rdy = 0;
  /**
   * With lease marks, when the last mark answered was sent (monotonic):
   * nsqd sent every message arriving after that answer later than this. At
   * first the time the connection became ready, before any RDY went out.
   */
  #sentNoEarlierThan: number;
  /** When the mark now on its way was sent, if one is. */
  #markSentAt: number | undefined;

  constructor(
    readonly address: string,
    readonly connection: NsqjsConnection,
    /** IDENTIFY's answer: the lease nsqd gives this connection, in ms. */
    readonly msgTimeoutMs: number,
    readonly maxLeaseMs: number,
    readonly maxRdyCount: number,
    readonly clock: Clock,
    /** Whether this connection sends lease marks (`leaseMarkMs` above 0). */
    readonly marked: boolean,
  ) {
    this.#sentNoEarlierThan = clock.monotonic();
  }

  #corked = false;

  /**
   * When a lease of a message arriving now starts, on the monotonic clock:
   * with lease marks, the send time of the last mark answered (nsqd started
   * the message's timeout no earlier); without, now.
   */
  leaseStart(): number {
    return this.marked ? this.#sentNoEarlierThan : this.clock.monotonic();
  }

  /** Sends a lease mark, unless one is still on its way. */
  sendMark(): void {
    const socket = this.connection.conn;
    if (!this.open || this.#markSentAt !== undefined || socket == null || socket.destroyed) return;
    this.#markSentAt = this.clock.monotonic();
    socket.write(MARK_COMMAND);
  }

  /** nsqd's answer to a frame-level error: true when it was the mark's (and is taken as its answer). */
  takeMarkAnswer(error: Error): boolean {
    if (!error.message.includes(LEASE_MARK_ID)) return false;
    if (this.#markSentAt !== undefined) this.#sentNoEarlierThan = this.#markSentAt;
    this.#markSentAt = undefined;
    return true;
  }

  /**
   * Runs `send` (a FIN or REQ, which nsqd does not answer) with the socket
   * corked until the event loop's check phase: the responses of one turn
   * leave in one write instead of one write each.
   */
  respond(send: () => void): void {
    const socket = this.connection.conn;
    if (!this.#corked && socket != null && !socket.destroyed) {
      this.#corked = true;
      socket.cork();
      setImmediate(() => {
        this.#corked = false;
        socket.uncork();
      });
    }
    send();
  }

  setRdy(count: number): void {
    const capped = Math.min(count, this.maxRdyCount);
    if (!this.open || capped === this.rdy) return;
    this.rdy = capped;
    this.connection.setRdy(capped);
  }
}

export interface ReaderLinkOptions {
  readonly node: NsqNode;
  readonly topic: string;
  readonly channel: string;
  readonly leaseMs: number;
  readonly connectionName: string;
  readonly heartbeatMs: number;
  /** Between two lease marks on a connection (`leaseMarkMs`); 0 for none. */
  readonly leaseMarkMs: number;
  readonly backoff: Backoff;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
  /** A connection subscribed and ready for RDY. */
  onReady(connection: LinkConnection): void;
  onMessage(connection: LinkConnection, msg: NsqjsMessage): void;
  /** A connection closed: its deliveries are gone. */
  onClosed(connection: LinkConnection): void;
}

export class ReaderLink {
  readonly #o: ReaderLinkOptions;
  readonly #closing = new AbortController();
  #current: LinkConnection | undefined;
  #socket: NsqjsConnection | undefined;
  #warnedLease = false;

  constructor(options: ReaderLinkOptions) {
    this.#o = options;
  }

  get address(): string {
    return this.#o.node.address;
  }

  /** The connection now subscribed, if any. */
  get current(): LinkConnection | undefined {
    return this.#current;
  }

  /** Connects, and connects again after each close, until {@link close}. */
  start(): void {
    void this.#run();
  }

  /** Closes the connection at once, as a failing network would (for tests); the link opens another. */
  cut(): number {
    const socket = this.#socket;
    if (socket === undefined || socket.conn == null || socket.conn.destroyed) return 0;
    // Nothing written to it from now on reaches nsqd: deliveries on it are gone at once, not at the close event.
    if (this.#current !== undefined) this.#current.open = false;
    socket.destroy();
    return 1;
  }

  /** Closes the connection for good (CLS); nsqd gives messages in flight on it out again. */
  close(): void {
    this.#closing.abort();
    this.#socket?.close();
  }

  async #run(): Promise<void> {
    const o = this.#o;
    let attempt = 0;
    let previousDelayMs: number | undefined;
    let elapsedMs = 0;
    while (!this.#closing.signal.aborted) {
      const subscribed = await this.#connectOnce().catch((error: unknown) => {
        o.logger?.warn({ nsqd: this.address, topic: o.topic, error: String(error) }, `nsq: could not consume ${o.topic} from ${this.address}: ${String(error)}`);
        return false;
      });
      if (this.#closing.signal.aborted) return;
      if (subscribed) {
        attempt = 0;
        previousDelayMs = undefined;
        elapsedMs = 0;
      }
      attempt += 1;
      const delay = o.backoff({ attempt, previousDelayMs, elapsedMs, random: o.random }) ?? 120_000;
      previousDelayMs = delay;
      elapsedMs += delay;
      await o.clock.sleep(delay, this.#closing.signal).catch(() => undefined);
    }
  }

  /** Sends `link` a lease mark every `intervalMs` while it is open. */
  async #mark(link: LinkConnection, intervalMs: number): Promise<void> {
    while (link.open && !this.#closing.signal.aborted) {
      link.sendMark();
      await this.#o.clock.sleep(intervalMs, this.#closing.signal).catch(() => undefined);
    }
  }

  /** One connection, from connect to close: resolves true when it got as far as subscribed, once it closed. */
  async #connectOnce(): Promise<boolean> {
    const o = this.#o;
    const limits = await o.node.limits();
    // Made over HTTP before SUB would make it, so the node knows whether the channel is new (NsqNode.scanStartsIn).
    await o.node.ensureChannel(o.topic, o.channel).catch(() => undefined);
    const msgTimeout = Math.max(1_000, Math.min(o.leaseMs, limits.maxLeaseMs));
    if (msgTimeout !== o.leaseMs && !this.#warnedLease) {
      this.#warnedLease = true;
      o.logger?.warn({ nsqd: this.address, leaseMs: o.leaseMs, msgTimeout }, `nsq: ${this.address} takes leases from 1000 ms to its --max-msg-timeout (${limits.maxLeaseMs} ms); asking for ${msgTimeout} ms`);
    }
    const { host, port } = splitAddress(this.address);
    const socket = readerConnection(host, port, o.topic, o.channel, {
      clientId: o.connectionName,
      heartbeatInterval: Math.round(o.heartbeatMs / 1000),
      messageTimeout: msgTimeout,
    });
    this.#socket = socket;
    return new Promise<boolean>((resolve) => {
      let link: LinkConnection | undefined;
      socket.on(EVENT.error, (error: Error) => {
        if (link?.takeMarkAnswer(error) === true) return;
        o.logger?.warn({ nsqd: this.address, topic: o.topic, error: String(error) }, `nsq: consuming ${o.topic} from ${this.address}: ${String(error)}`);
      });
      socket.on(EVENT.connectionError, () => undefined);
      socket.once(EVENT.ready, () => {
        link = new LinkConnection(this.address, socket, socket.msgTimeout || msgTimeout, socket.maxMsgTimeout || limits.maxLeaseMs, socket.maxRdyCount || limits.maxRdyCount, o.clock, o.leaseMarkMs > 0);
        this.#current = link;
        if (this.#closing.signal.aborted) {
          socket.close();
          return;
        }
        if (link.marked) void this.#mark(link, Math.max(10, Math.min(o.leaseMarkMs, Math.floor(link.msgTimeoutMs / 2))));
        o.onReady(link);
      });
      socket.on(EVENT.message, (msg: NsqjsMessage) => {
        if (link !== undefined) o.onMessage(link, msg);
      });
      socket.once(EVENT.closed, () => {
        if (this.#socket === socket) this.#socket = undefined;
        if (link !== undefined) {
          link.open = false;
          if (this.#current === link) this.#current = undefined;
          o.onClosed(link);
        }
        resolve(link !== undefined);
      });
      socket.connect();
    });
  }
}
