/**
 * A running consumer of one queue: reads the queue's topic through the
 * channel from every nsqd (given, or listed by nsqlookupd and looked up
 * again every `lookupdPollIntervalMs`), and hands each message to the
 * listener as an `NsqDelivery`.
 *
 * RDY is the consumer's flow control. The prefetch is split across the
 * connections (never above nsqd's `--max-rdy-count`); with more
 * connections than the prefetch, RDY 1 goes to as many connections as the
 * prefetch allows and passes on in turn. `pause` sets RDY 0 on every
 * connection, `setPrefetch(1)` probes with RDY 1, `resume` and a full
 * prefetch return to full RDY.
 */
import type { Logger } from '../../logger.js';
import type { Clock } from '../../time/clock.js';
import { leaseEnd } from '../../transport/lease.js';
import type { DeliveryListener, Headers, Subscription } from '../../transport/types.js';
import { unwrap, type Unwrapped } from './codec.js';
import { NsqDelivery, type DeliveryOwner } from './delivery.js';
import type { NsqjsMessage } from './nsqjs.js';
import type { NsqNode, NsqNodes } from './nodes.js';
import type { ResolvedNsqOptions } from './options.js';
import { ReaderLink, type LinkConnection } from './reader-link.js';

export interface SubscriptionOptions {
  readonly queue: string;
  readonly listener: DeliveryListener;
  readonly prefetch: number;
  readonly leaseMs: number;
  readonly nodes: NsqNodes;
  readonly options: ResolvedNsqOptions;
  /** Publishing of copies, shared by the transport's deliveries. */
  readonly settlement: Omit<DeliveryOwner, 'settled' | 'clock'>;
  readonly onClosed: (subscription: NsqSubscription) => void;
}

type State = 'running' | 'paused' | 'closed';

/**
 * How long a closed subscription keeps its connections open after RDY 0,
 * to give back (REQ 0) messages nsqd sent before it read the RDY 0. A
 * message that arrived on a connection already closed would wait out its
 * whole lease in nsqd before another consumer could have it.
 */
export const CLOSE_GRACE_MS = 250;

/** A message received while there was no room for it. */
interface Waiting {
  readonly link: LinkConnection;
  readonly msg: NsqjsMessage;
  readonly unwrapped: Unwrapped;
  /** When its lease started (`LinkConnection.leaseStart`). */
  readonly at: number;
}

export class NsqSubscription implements Subscription {
  readonly #o: SubscriptionOptions;
  readonly #owner: DeliveryOwner;
  readonly #links = new Map<string, ReaderLink>();
  readonly #waiting: Waiting[] = [];
  readonly #stopping = new AbortController();
  readonly #clock: Clock;
  readonly #logger: Logger | undefined;
  #state: State = 'running';
  #prefetch: number;
  #held = 0;
  #rotation = 0;
  #warnedPlain = false;
  #warnedMalformed = false;
  #graceOver = false;

  constructor(options: SubscriptionOptions) {
    this.#o = options;
    this.#prefetch = options.prefetch;
    this.#clock = options.options.clock;
    this.#logger = options.options.logger;
    this.#owner = {
      ...options.settlement,
      clock: this.#clock,
      settled: () => {
        this.#held -= 1;
        if (this.#state === 'closed' && this.#held === 0 && this.#graceOver) this.#disconnect();
        else this.#handOutWaiting();
      },
    };
  }

  /** Connects to the topic's nodes (and keeps looking for new ones through nsqlookupd). Rejects when no node can be found. */
  async open(): Promise<void> {
    await this.#discover();
    if (this.#o.options.lookupd.length > 0) void this.#pollLookupd();
    if (this.#o.options.nsqd.length + this.#o.options.lookupd.length > 0) void this.#rotateLoop();
  }

  /** The nsqd addresses consumed from. */
  get addresses(): string[] {
    return [...this.#links.keys()];
  }

  /** Closes every connection at once, as a failing network would (for tests), and says how many; each opens again. */
  cut(): number {
    let cut = 0;
    for (const link of this.#links.values()) cut += link.cut();
    return cut;
  }

  async pause(): Promise<void> {
    if (this.#state !== 'running') return;
    this.#state = 'paused';
    this.#distribute();
    this.#giveBackWaiting();
  }

  async resume(): Promise<void> {
    if (this.#state !== 'paused') return;
    this.#state = 'running';
    this.#distribute();
    this.#handOutWaiting();
  }

  async setPrefetch(prefetch: number): Promise<void> {
    if (typeof prefetch !== 'number' || !Number.isInteger(prefetch) || prefetch < 1) {
      throw new RangeError(`setPrefetch: prefetch must be a positive integer, got ${String(prefetch)}`);
    }
    this.#prefetch = prefetch;
    this.#distribute();
    this.#handOutWaiting();
  }

  /**
   * Stops for good: RDY 0 everywhere, messages not handed out go back (REQ
   * 0). Deliveries handed out may still be settled: the connections close
   * once the last is settled, or when their lease has run out.
   */
  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#stopping.abort();
    for (const link of this.#links.values()) link.current?.setRdy(0);
    this.#giveBackWaiting();
    this.#o.onClosed(this);
    const leaseMs = Math.max(0, ...[...this.#links.values()].map((l) => l.current?.msgTimeoutMs ?? 0));
    void this.#clock.sleep(CLOSE_GRACE_MS).then(() => {
      this.#graceOver = true;
      if (this.#held === 0) this.#disconnect();
      else void this.#clock.sleep(leaseMs).then(() => this.#disconnect());
    });
  }

  /** Closes every connection now, deliveries still held or not (the transport is closing). */
  disconnect(): void {
    if (this.#state !== 'closed') void this.close();
    this.#disconnect();
  }

  #disconnect(): void {
    for (const link of this.#links.values()) link.close();
  }

  async #discover(): Promise<void> {
    const nodes = await this.#o.nodes.forTopic(this.#o.queue);
    for (const node of nodes) this.#consumeFrom(node);
  }

  #consumeFrom(node: NsqNode): void {
    if (this.#links.has(node.address) || this.#state === 'closed') return;
    const o = this.#o.options;
    const link = new ReaderLink({
      node,
      topic: this.#o.queue,
      channel: o.channel,
      leaseMs: this.#o.leaseMs,
      connectionName: o.connectionName,
      heartbeatMs: o.heartbeatMs,
      leaseMarkMs: o.leaseMarkMs,
      backoff: o.connectionBackoff,
      clock: o.clock,
      random: o.random,
      logger: o.logger,
      onReady: () => this.#distribute(),
      onMessage: (connection, msg) => this.#onMessage(connection, msg),
      onClosed: () => this.#distribute(),
    });
    this.#links.set(node.address, link);
    link.start();
  }

  async #pollLookupd(): Promise<void> {
    while (this.#state !== 'closed') {
      try {
        await this.#clock.sleep(this.#o.options.lookupdPollIntervalMs, this.#stopping.signal);
      } catch {
        return;
      }
      await this.#discover().catch((error: unknown) => this.#logger?.warn({ queue: this.#o.queue, error: String(error) }, `nsq: looking up the nodes of ${this.#o.queue} failed: ${String(error)}`));
    }
  }

  /** With more connections than the prefetch, RDY 1 passes on to the next connections every `rdyRotateMs`. */
  async #rotateLoop(): Promise<void> {
    while (this.#state !== 'closed') {
      try {
        await this.#clock.sleep(this.#o.options.rdyRotateMs, this.#stopping.signal);
      } catch {
        return;
      }
      const ready = this.#ready();
      if (ready.length > this.#prefetch) {
        this.#rotation = (this.#rotation + this.#prefetch) % ready.length;
        this.#distribute();
      }
    }
  }

  #ready(): LinkConnection[] {
    const ready: LinkConnection[] = [];
    for (const link of this.#links.values()) if (link.current?.open) ready.push(link.current);
    return ready;
  }

  /** Sets RDY on every connection: 0 while paused or closed, else the prefetch split across them. */
  #distribute(): void {
    const ready = this.#ready();
    if (ready.length === 0) return;
    const total = this.#state === 'running' ? this.#prefetch : 0;
    const counts = splitRdy(total, ready.length, this.#rotation);
    // Lower first, so the total never passes the prefetch while RDY moves between connections.
    const order = ready.map((c, i) => ({ c, n: counts[i]! })).sort((a, b) => a.n - a.c.rdy - (b.n - b.c.rdy));
    for (const { c, n } of order) c.setRdy(n);
  }

  #onMessage(link: LinkConnection, msg: NsqjsMessage): void {
    if (this.#state === 'closed') {
      msg.requeue(0, false);
      return;
    }
    const at = link.leaseStart();
    if (this.#state === 'paused') {
      msg.requeue(0, false);
      return;
    }
    // Only a lease counted from a mark can be over on arrival: one counted from now cannot.
    if (link.marked && this.#leaseOver(link, at)) {
      // Held back on the way for longer than its lease: nsqd has given it out again, or is about to. No REQ: by
      // now nsqd may have given it out again on this very connection, and a REQ would take that delivery back.
      this.#logger?.warn({ queue: this.#o.queue, nsqId: msg.id, attempts: msg.attempts, nsqd: link.address }, `nsq: message ${msg.id} on ${this.#o.queue} reached us after its lease ran out (sent by ${link.address} before the last lease mark it answered); left for nsqd to give out again`);
      return;
    }
    const unwrapped = unwrap(msg.body);
    if (unwrapped.kind === 'envelope' && unwrapped.dueAt !== undefined) {
      const rest = unwrapped.dueAt - this.#o.options.clock.now();
      if (rest > 0) {
        void this.#hop(link, msg, unwrapped.id ?? msg.id, unwrapped.body, unwrapped.headers, rest);
        return;
      }
    }
    if (this.#held >= this.#prefetch) {
      this.#waiting.push({ link, msg, unwrapped, at });
      return;
    }
    this.#handOut(link, msg, unwrapped, at);
  }

  /** A message whose delay nsqd could not hold in one go: published again with the rest of it, then finished, never handed out. */
  async #hop(link: LinkConnection, msg: NsqjsMessage, id: string, body: Uint8Array, headers: Headers, rest: number): Promise<void> {
    try {
      await this.#o.settlement.publishCopy(this.#o.queue, id, body, headers, rest, link.address);
      if (link.open) msg.finish();
      else this.#o.settlement.recordDuplicate(id, 'hop');
    } catch (error) {
      this.#logger?.warn({ queue: this.#o.queue, messageId: id, error: String(error) }, `nsq: could not carry the delay of message ${id} on ${this.#o.queue} one hop further (${String(error)}); nsqd offers it again`);
      if (link.open) msg.requeue(Math.min(rest, 1_000), false);
    }
  }

  #handOutWaiting(): void {
    while (this.#state === 'running' && this.#held < this.#prefetch && this.#waiting.length > 0) {
      const { link, msg, unwrapped, at } = this.#waiting.shift()!;
      if (!link.open || this.#leaseOver(link, at)) continue; // nsqd offers it again
      this.#handOut(link, msg, unwrapped, at);
    }
  }

  /** Whether the lease of a message on `link` that started at `at` has run out (less the margin for the time on the wire). */
  #leaseOver(link: LinkConnection, at: number): boolean {
    return this.#clock.monotonic() > leaseEnd(at, this.#leaseMs(link));
  }

  /** The lease of the deliveries on `link`: the subscription's, within what nsqd gave the connection. */
  #leaseMs(link: LinkConnection): number {
    return Math.min(this.#o.leaseMs, link.msgTimeoutMs);
  }

  #giveBackWaiting(): void {
    for (const { link, msg } of this.#waiting.splice(0)) if (link.open) msg.requeue(0, false);
  }

  #handOut(link: LinkConnection, msg: NsqjsMessage, unwrapped: Unwrapped, at: number): void {
    const o = this.#o;
    let id: string;
    let headers: Headers;
    let body: Uint8Array;
    if (unwrapped.kind === 'envelope') {
      id = unwrapped.id ?? msg.id;
      headers = unwrapped.headers;
      body = unwrapped.body;
    } else {
      id = msg.id;
      headers = {};
      body = unwrapped.body;
      if (unwrapped.problem !== undefined) {
        if (!this.#warnedMalformed) {
          this.#warnedMalformed = true;
          this.#logger?.warn({ queue: o.queue, nsqId: msg.id, problem: unwrapped.problem }, `nsq: message ${msg.id} on ${o.queue} starts like redeliver's envelope but is malformed (${unwrapped.problem}); delivered as a plain message, body as is (said once per queue)`);
        }
      } else if (!this.#warnedPlain) {
        this.#warnedPlain = true;
        this.#logger?.warn({ queue: o.queue, nsqId: msg.id }, `nsq: queue ${o.queue} has messages not written by redeliver (no envelope); they are delivered as they are, with NSQ's id and attempts`);
      }
    }
    const delivery = new NsqDelivery(this.#owner, link, msg, o.queue, id, body, headers, this.#leaseMs(link), at);
    this.#held += 1;
    try {
      o.listener(delivery);
    } catch (error) {
      this.#logger?.error({ queue: o.queue, messageId: id, error: String(error) }, `nsq: the delivery listener threw for message '${id}' (${String(error)}); the message is given back`);
      delivery.release().catch(() => undefined);
    }
  }
}

/**
 * RDY per connection for `total` across `connections`: an even split, the
 * remainder to the first ones; with fewer than one each, 1 to `total`
 * connections starting at `rotation`, 0 to the rest.
 */
export function splitRdy(total: number, connections: number, rotation: number): number[] {
  if (total >= connections) {
    const base = Math.floor(total / connections);
    return Array.from({ length: connections }, (_, i) => base + (i < total % connections ? 1 : 0));
  }
  const counts = new Array<number>(connections).fill(0);
  for (let i = 0; i < total; i++) counts[(rotation + i) % connections] = 1;
  return counts;
}
