import { checkPrefetch } from '../../transport/arguments.js';
import type { Backoff } from '../../backoff/types.js';
import type { Logger } from '../../logger.js';
import type { Clock } from '../../time/clock.js';
import type { Random } from '../../time/random.js';
import type { DeliveryListener, Subscription } from '../../transport/types.js';
import type { MessageView } from './client.js';
import type { SimpleConsumer } from 'rocketmq-client-nodejs';
import { AckBatch } from './acks.js';
import { decodeProperties, DUE_PROPERTY, GROUP_PROPERTY } from './codec.js';
import { RocketMqDelivery, type DeliveryOwner } from './delivery.js';

/** What a consumer needs to run. */
export interface RocketMqConsumerSettings {
  readonly queue: string;
  /** The consumer group the simple consumer receives in. */
  readonly group: string;
  /** The longest an ack request waits for its answer. */
  readonly requestTimeoutMs: number;
  readonly listener: DeliveryListener;
  readonly prefetch: number;
  /** The invisible duration of each receive, at least the proxy's minimum. */
  readonly leaseMs: number;
  /** Starts the simple consumer (once; again after a failed start). */
  readonly start: () => Promise<SimpleConsumer>;
  /** What deliveries settle through, less `settled` and `ack` (acks go through the subscription's {@link AckBatch}). */
  readonly owner: Omit<DeliveryOwner, 'settled' | 'ack'>;
  /** Sends a copy that is not due yet (or a FIFO copy to put back in its group) on, and acknowledges the one received: a hop, not a delivery. */
  readonly hop: (view: MessageView) => Promise<void>;
  readonly backoff: Backoff;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
  readonly onClosed: (sub: RocketMqSubscription) => void;
}

/** The most messages one receive asks for. */
const MAX_BATCH = 32;

/** The most receives under way at once (each of up to {@link MAX_BATCH}). */
const MAX_RECEIVES = 4;

/**
 * A consumer of one queue: a `SimpleConsumer` of the transport's group that
 * receives at most as many messages as the prefetch has room for, each
 * under a lease (the invisible duration, counted from when the receive was
 * asked for: the proxy may hand a message out at any moment of the wait), with a receive of up to 32
 * messages under way for every 32 of the prefetch (at most 4 at once), so
 * the next batch is on its way while one is handled. Messages that arrive while paused,
 * or beyond a prefetch lowered meanwhile, wait here, still leased, until
 * there is room; those whose lease runs out while waiting are dropped (the
 * broker gives them out again), and on close the rest are made visible
 * again at once.
 *
 * The first receive after start may be refused while the client's settings
 * are on their way to the proxy; a failed receive is tried again after the
 * transport's backoff.
 */
export class RocketMqSubscription implements Subscription {
  readonly #s: RocketMqConsumerSettings;
  #prefetch: number;
  #paused = false;
  #closed = false;
  #outstanding = 0;
  /** Messages asked for by the receives under way. */
  #asked = 0;
  #failures = 0;
  #previousDelay: number | undefined;
  readonly #waiting: { view: MessageView; leaseFrom: number }[] = [];
  #kicked: (() => void)[] = [];
  readonly #closing = new AbortController();
  #consumer: Promise<SimpleConsumer> | undefined;
  readonly #loop: Promise<unknown>;
  /** What every delivery settles through, but `settled`. */
  readonly #owner: Omit<DeliveryOwner, 'settled'>;

  constructor(settings: RocketMqConsumerSettings) {
    this.#s = settings;
    const acks = new AckBatch({ group: settings.group, requestTimeoutMs: settings.requestTimeoutMs, consumer: () => this.#started() });
    this.#owner = { ...settings.owner, clock: settings.clock, ack: (view) => acks.ack(view) };
    this.#prefetch = settings.prefetch;
    this.#loop = Promise.all(Array.from({ length: MAX_RECEIVES }, (_, i) => this.#run(i)));
  }

  /** The queue consumed. */
  get queue(): string {
    return this.#s.queue;
  }

  /** Messages this consumer holds: handed out and not settled, and received ones waiting for room. */
  get held(): number {
    return this.#outstanding + this.#waiting.length;
  }

  async pause(): Promise<void> {
    this.#paused = true;
  }

  async resume(): Promise<void> {
    this.#paused = false;
    this.#kick();
  }

  async setPrefetch(prefetch: number): Promise<void> {
    this.#prefetch = checkPrefetch(prefetch, 'setPrefetch');
    this.#kick();
  }

  /** Stops receiving, waits for the receive under way, makes the messages it holds back visible again, and stops the client. */
  async close(): Promise<void> {
    if (this.#closed) {
      await this.#loop;
      return;
    }
    this.#closed = true;
    this.#closing.abort();
    this.#kick();
    await this.#loop;
    const consumer = await this.#consumer?.catch(() => undefined);
    await Promise.all(this.#waiting.splice(0).map(({ view }) => this.#s.owner.changeInvisible(view, 0).catch(() => undefined)));
    await consumer?.shutdown().catch(() => undefined);
    this.#s.onClosed(this);
  }

  /** The started simple consumer, shared by the receive loops; a failed start is tried again by the next receive. */
  #started(): Promise<SimpleConsumer> {
    this.#consumer ??= this.#s.start().catch((error: unknown) => {
      this.#consumer = undefined;
      throw error;
    });
    return this.#consumer;
  }

  #room(): number {
    return this.#prefetch - this.#outstanding;
  }

  /**
   * Receive loop `index`: it receives while the prefetch leaves room for
   * messages not yet asked for, and loop `i` only while the prefetch is
   * over `i` batches, so a large prefetch keeps several receives under way.
   */
  async #run(index: number): Promise<void> {
    while (!this.#closed) {
      this.#handOut();
      const ask = Math.min(this.#room() - this.#waiting.length - this.#asked, MAX_BATCH);
      if (this.#paused || ask <= 0 || this.#prefetch <= index * MAX_BATCH || (index > 0 && this.#failures > 0)) {
        await this.#nextKick();
        continue;
      }
      this.#asked += ask;
      try {
        const consumer = await this.#started();
        // The proxy starts a message's invisible time when it hands it out, at any moment of the receive's wait: its lease counts from the ask, never later.
        const leaseFrom = this.#s.clock.monotonic();
        const views = await consumer.receive(ask, this.#s.leaseMs);
        this.#failures = 0;
        this.#previousDelay = undefined;
        for (const view of views) {
          if (this.#isHop(view)) void this.#hop(view);
          else this.#waiting.push({ view, leaseFrom });
        }
      } catch (error) {
        await this.#afterFailure(error);
      } finally {
        this.#asked -= ask;
        this.#kick();
      }
    }
  }

  /** Hands out waiting messages while there is room and the consumer runs. */
  #handOut(): void {
    const s = this.#s;
    while (!this.#closed && !this.#paused && this.#room() > 0 && this.#waiting.length > 0) {
      const { view, leaseFrom } = this.#waiting.shift()!;
      if (s.clock.monotonic() >= leaseFrom + s.leaseMs) continue;
      const decoded = decodeProperties(view.messageId, view.properties);
      if (decoded.problem !== undefined) s.logger?.warn({ queue: s.queue, messageId: view.messageId }, `rocketmq: message ${view.messageId} on ${s.queue}: ${decoded.problem}`);
      this.#outstanding++;
      let freed = false;
      const owner: DeliveryOwner = {
        ...this.#owner,
        settled: () => {
          if (freed) return;
          freed = true;
          this.#outstanding--;
          this.#kick();
        },
      };
      const delivery = new RocketMqDelivery(owner, s.queue, decoded.id, decoded.headers, view, s.leaseMs, leaseFrom);
      try {
        s.listener(delivery);
      } catch (error) {
        s.logger?.error({ err: error, queue: s.queue }, `rocketmq: the listener of ${s.queue} threw`);
      }
    }
  }

  /**
   * Whether `view` is a copy to send on rather than hand out: not due yet
   * (by this side's wall clock: a copy is never handed out before its due
   * time), or a FIFO message to put back in its group.
   */
  #isHop(view: MessageView): boolean {
    const due = Number(view.properties.get(DUE_PROPERTY));
    if (Number.isFinite(due) && due > this.#s.clock.now()) return true;
    return view.properties.has(GROUP_PROPERTY) && !view.messageGroup;
  }

  async #hop(view: MessageView): Promise<void> {
    try {
      await this.#s.hop(view);
    } catch (error) {
      this.#s.logger?.warn({ err: error, queue: this.#s.queue }, `rocketmq: could not send delayed message ${view.messageId} of ${this.#s.queue} on; it comes back after its lease`);
    }
  }

  async #afterFailure(error: unknown): Promise<void> {
    const s = this.#s;
    if (this.#closed) return;
    this.#failures++;
    const delay = s.backoff({ attempt: this.#failures, previousDelayMs: this.#previousDelay, elapsedMs: 0, random: s.random }) ?? 1_000;
    this.#previousDelay = delay;
    if (this.#failures === 1 || this.#failures % 10 === 0) {
      s.logger?.warn({ err: error, queue: s.queue, attempt: this.#failures }, `rocketmq: receive from ${s.queue} failed (${(error as Error)?.message}); trying again in ${Math.round(delay)} ms`);
    }
    await s.clock.sleep(Math.max(0, Math.min(delay, 2 ** 31 - 1)), this.#closing.signal).catch(() => undefined);
  }

  #nextKick(): Promise<void> {
    return new Promise((resolve) => {
      this.#kicked.push(resolve);
    });
  }

  #kick(): void {
    for (const kicked of this.#kicked.splice(0)) kicked();
  }
}
