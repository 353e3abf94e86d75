/**
 * A running consumer of one queue: pulls as many messages as it has free
 * prefetch slots (a delivery whose final ack is on its way counts as free),
 * hands each to the listener as a `JetStreamDelivery` once its slot is, and
 * runs the mover that brings the queue's due retries back. It makes the
 * queue's stream and consumers again when they are deleted under it, and
 * asks again for messages after a reconnection.
 */
import type { Msg } from '@nats-io/transport-node';
import type { Logger } from '../../logger.js';
import type { Clock } from '../../time/clock.js';
import type { DeliveryListener, Subscription } from '../../transport/types.js';
import { leaseEnd } from '../../transport/lease.js';
import type { Backoff } from '../../backoff/types.js';
import type { Random } from '../../time/random.js';
import { parseAckSubject } from './ack-subject.js';
import { decodeNatsHeaders, ID_HEADER } from './codec.js';
import type { JetStreamClients } from './connection.js';
import { JetStreamDelivery, type DeliveryOwner } from './delivery.js';
import { DelayMover } from './mover.js';
import { QUEUE_CONSUMER, type QueueNames } from './names.js';
import { giveBack, Puller, pullTiming } from './puller.js';
import type { ServerClock } from './server-clock.js';
import type { Topology } from './topology.js';

export interface SubscriptionOptions {
  readonly queue: string;
  readonly listener: DeliveryListener;
  readonly prefetch: number;
  readonly leaseMs: number;
  readonly clients: JetStreamClients;
  readonly topology: Topology;
  readonly serverClock: ServerClock;
  /** Settlement and copy publishing, shared by the transport's deliveries. */
  readonly settlement: Omit<DeliveryOwner, 'settling' | 'settled'>;
  readonly apiTimeoutMs: number;
  readonly pullExpiresMs: number;
  readonly heartbeatMs: number;
  readonly reconnect: Backoff;
  readonly clock: Clock;
  readonly random: Random;
  readonly logger: Logger | undefined;
  readonly onClosed: (subscription: JetStreamSubscription) => void;
}

type State = 'running' | 'paused' | 'closed';

/** A message pulled and not yet handed out, with the monotonic time its pull request was sent: its lease runs from then at the earliest. */
interface Pulled {
  readonly msg: Msg;
  readonly at: number;
}

export class JetStreamSubscription implements Subscription {
  readonly #o: SubscriptionOptions;
  readonly #owner: DeliveryOwner;
  readonly #buffer: Pulled[] = [];
  readonly #stopping = new AbortController();
  #state: State = 'running';
  #prefetch: number;
  #held = 0;
  /** Held deliveries whose final `+ACK` or `-NAK` is on its way: the server counts them acknowledged once it has it. */
  #sending = 0;
  #names: QueueNames | undefined;
  #ackWaitMs = 0;
  #puller: Puller | undefined;
  #mover: DelayMover | undefined;
  #reopening: Promise<void> | undefined;
  #warnedForeign = false;
  #topUpQueued = false;
  readonly #sentOrFailed = (): void => {
    this.#sending -= 1;
  };

  constructor(options: SubscriptionOptions) {
    this.#o = options;
    this.#prefetch = options.prefetch;
    this.#owner = {
      ...options.settlement,
      settling: (sent) => {
        this.#sending += 1;
        this.#scheduleTopUp();
        sent.then(this.#sentOrFailed, this.#sentOrFailed);
      },
      settled: () => {
        this.#held -= 1;
        this.#scheduleTopUp();
      },
    };
  }

  /** Makes the queue's stream and consumers when missing and starts pulling. Rejects when the server refuses them. */
  async open(): Promise<void> {
    const { topology, queue, leaseMs } = this.#o;
    const consumer = await topology.queueConsumer(queue, leaseMs);
    await topology.delayConsumer(queue);
    if (this.#state === 'closed') return;
    this.#names = consumer.names;
    this.#ackWaitMs = consumer.ackWaitMs;
    this.#startPulling();
  }

  /** The connection came back: pull requests sent before are gone. */
  reconnected(): void {
    this.#puller?.forget();
    this.#mover?.reconnected();
    this.#scheduleTopUp();
  }

  async pause(): Promise<void> {
    if (this.#state !== 'running') return;
    this.#state = 'paused';
    this.#giveBackBuffer();
  }

  async resume(): Promise<void> {
    if (this.#state !== 'paused') return;
    this.#state = 'running';
    this.#topUp();
  }

  async setPrefetch(prefetch: number): Promise<void> {
    if (typeof prefetch !== 'number' || !Number.isInteger(prefetch) || prefetch < 1) {
      throw new RangeError(`setPrefetch: prefetch must be a positive integer, got ${String(prefetch)}`);
    }
    this.#prefetch = prefetch;
    this.#topUp();
  }

  async close(): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#stopping.abort();
    this.#puller?.close();
    this.#giveBackBuffer();
    await this.#mover?.close();
    this.#o.onClosed(this);
  }

  #startPulling(): void {
    const o = this.#o;
    const names = this.#names!;
    this.#puller = new Puller({
      nc: o.clients.nc,
      jsm: o.clients.jsm,
      stream: names.stream,
      consumer: QUEUE_CONSUMER,
      ...pullTiming(o.pullExpiresMs, o.heartbeatMs, this.#ackWaitMs),
      ackWaitMs: this.#ackWaitMs,
      clock: o.clock,
      logger: o.logger,
      owner: {
        onMessage: (msg, sentAt) => this.#onMessage(msg, sentAt),
        onRoom: () => this.#scheduleTopUp(),
        onGone: (reason) => void this.#reopen(reason),
      },
    });
    this.#mover = new DelayMover({
      nc: o.clients.nc,
      jsm: o.clients.jsm,
      js: o.clients.js,
      names,
      delayStream: o.topology.names.delayStream,
      serverClock: o.serverClock,
      apiTimeoutMs: o.apiTimeoutMs,
      pullExpiresMs: o.pullExpiresMs,
      heartbeatMs: o.heartbeatMs,
      clock: o.clock,
      logger: o.logger,
      onGone: (reason) => void this.#reopen(reason),
      confirm: o.settlement.confirm,
    });
    this.#topUp();
  }

  /** The queue's consumer or stream went away: make them again, waiting out the reconnect backoff between tries. */
  #reopen(reason: string): Promise<void> {
    this.#reopening ??= (async () => {
      const o = this.#o;
      o.logger?.warn({ queue: o.queue, reason }, `jetstream: consumer of queue ${o.queue} is gone (${reason}); making it again`);
      this.#puller?.close();
      const mover = this.#mover;
      this.#puller = undefined;
      this.#mover = undefined;
      await mover?.close();
      let previousDelayMs: number | undefined;
      let elapsedMs = 0;
      // Waits before each try, the first too: a stream made again while the server is still deleting it can lose its files.
      for (let attempt = 1; this.#state !== 'closed'; attempt++) {
        const delay = o.reconnect({ attempt, previousDelayMs, elapsedMs, random: o.random }) ?? 120_000;
        previousDelayMs = delay;
        elapsedMs += delay;
        await o.clock.sleep(delay, this.#stopping.signal).catch(() => undefined);
        if (this.#stopping.signal.aborted) return;
        o.topology.forget(o.queue);
        o.topology.forgetDelays();
        try {
          await this.open();
          return;
        } catch (error) {
          o.logger?.warn({ queue: o.queue, error: String(error) }, `jetstream: could not make the consumer of ${o.queue} again (${String(error)}); trying again`);
        }
      }
    })().finally(() => {
      this.#reopening = undefined;
    });
    return this.#reopening;
  }

  /**
   * Buffers a pulled message under the lease that began, at the earliest,
   * when its pull request was sent. One that arrives past that lease (held
   * back in a cut connection) is dropped unsettled: the server has offered
   * it again, or will, and a settlement of this delivery may reach it after
   * it did.
   */
  #onMessage(msg: Msg, at: number): void {
    if (this.#state !== 'running') {
      giveBack(msg);
      return;
    }
    if (this.#o.clock.monotonic() > leaseEnd(at, this.#ackWaitMs)) {
      const info = parseAckSubject(msg.reply);
      this.#o.logger?.info(
        { queue: this.#o.queue, seq: info?.streamSeq, deliveryCount: info?.delivered },
        `jetstream: a message of ${this.#o.queue} arrived after its lease ran out (its pull request was sent ${Math.round(this.#o.clock.monotonic() - at)} ms ago); the server offers it again`,
      );
      return;
    }
    this.#buffer.push({ msg, at });
    this.#topUp();
  }

  #scheduleTopUp(): void {
    if (this.#topUpQueued) return;
    this.#topUpQueued = true;
    queueMicrotask(() => {
      this.#topUpQueued = false;
      this.#topUp();
    });
  }

  /**
   * Drops what waited in the buffer past its lease, hands out what waits
   * while there is room, then asks for as many more as there is room for.
   * A delivery whose final ack is on its way leaves room to ask for one
   * more message: the server frees its place once it has the ack, and the
   * message asked for waits in the buffer until the ack is confirmed and
   * the delivery's slot is free (one round trip), so the consumer never
   * stands idle between one batch and the next. Pull requests sent before
   * the prefetch went down are not taken back, so their messages may wait
   * here; none is asked for while the buffer and the requests outstanding
   * fill the prefetch.
   */
  #topUp(): void {
    if (this.#state !== 'running') return;
    this.#dropExpired();
    while (this.#held < this.#prefetch && this.#buffer.length > 0) this.#handOut(this.#buffer.shift()!);
    const puller = this.#puller;
    if (puller === undefined) return;
    const want = this.#prefetch - (this.#held - this.#sending) - this.#buffer.length - puller.outstanding;
    if (want > 0 && (puller.outstanding === 0 || want * 2 >= this.#prefetch)) puller.request(want);
  }

  /**
   * Messages whose lease ran out while they waited (oldest first) leave the
   * buffer unsettled: the server offers them again, and may have already.
   */
  #dropExpired(): void {
    const now = this.#o.clock.monotonic();
    let dropped = 0;
    while (this.#buffer.length > 0 && now > leaseEnd(this.#buffer[0]!.at, this.#ackWaitMs)) {
      this.#buffer.shift();
      dropped += 1;
    }
    if (dropped > 0) this.#o.logger?.debug?.({ queue: this.#o.queue, dropped }, `jetstream: ${dropped} message(s) of ${this.#o.queue} waited for a free slot past their lease; the server offers them again`);
  }

  #handOut({ msg, at }: Pulled): void {
    const o = this.#o;
    const info = parseAckSubject(msg.reply);
    if (info === undefined) return;
    const decoded = decodeNatsHeaders(msg.headers);
    const id = decoded.id ?? decoded.natsMsgId ?? `${info.stream}:${info.streamSeq}`;
    if (decoded.id === undefined && !this.#warnedForeign) {
      this.#warnedForeign = true;
      o.logger?.warn({ queue: o.queue, stream: info.stream, seq: info.streamSeq }, `jetstream: queue ${o.queue} has messages not written by redeliver (no ${ID_HEADER} header); their id is their Nats-Msg-Id or <stream>:<seq>`);
    }
    o.logger?.debug?.({ queue: o.queue, messageId: id, stream: info.stream, seq: info.streamSeq, deliveryCount: info.delivered }, `jetstream: message '${id}' handed out from ${info.stream} at ${info.streamSeq} (delivery ${info.delivered})`);
    const delivery = new JetStreamDelivery(this.#owner, this.#names!, info, msg.reply!, id, msg.data, decoded.headers, this.#ackWaitMs, at);
    this.#held += 1;
    try {
      o.listener(delivery);
    } catch (error) {
      o.logger?.error({ queue: o.queue, messageId: id, error: String(error) }, `jetstream: the delivery listener threw for message '${id}' (${String(error)}); the message is given back`);
      delivery.release().catch(() => undefined);
    }
  }

  #giveBackBuffer(): void {
    this.#dropExpired();
    for (const { msg } of this.#buffer.splice(0)) giveBack(msg);
  }
}
