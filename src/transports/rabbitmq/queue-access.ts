/**
 * Reading queues the way AMQP 0-9-1 allows: passive declarations for depths
 * and existence, and `basic.get` for the messages themselves. AMQP has no
 * browse, so a {@link QueueReader} takes messages off the head of a queue and
 * holds them unacknowledged on a private channel; giving them back
 * (`basic.nack` with requeue, or closing the channel) returns them to their
 * places on a classic queue, with the broker's `redelivered` flag set.
 *
 * Every request here is answered by the broker or fails: a reply that does
 * not come within the stall timeout (a dead connection not yet noticed, a
 * connection blocked by a resource alarm) fails the operation with a
 * {@link BrokerStallError} instead of leaving it hanging.
 */
import type { Channel, GetMessage } from 'amqplib';
import type { Clock } from '../../time/clock.js';
import { raceAbort, type Session } from './connection.js';

/** The broker did not answer a request of an error-queue operation or of queue inspection in time. */
export class BrokerStallError extends Error {
  override readonly name: string = 'BrokerStallError';
  constructor(
    /** What was being done, for the message. */
    readonly operation: string,
    /** How long the request waited, in milliseconds. */
    readonly timeoutMs: number,
  ) {
    super(`rabbitmq: no reply from the broker within ${timeoutMs} ms while trying to ${operation} (connection lost or blocked by a resource alarm)`);
  }
}

/** A scan would read more messages than its limit allows. */
export class ScanLimitError extends Error {
  override readonly name: string = 'ScanLimitError';
  constructor(
    readonly queue: string,
    /** The most messages one operation reads. */
    readonly maxScan: number,
    operation: string,
  ) {
    super(
      `rabbitmq: gave up trying to ${operation}: '${queue}' holds more than the ${maxScan} messages one operation may read ` +
        '(AMQP can only reach a message by taking every message before it off the queue); nothing was changed. ' +
        'Raise errorQueueMaxScan, or purge or drain the queue',
    );
  }
}

/** Whether `error` is the broker's 404 NOT_FOUND (no such queue or exchange), which also closes the channel. */
export function isNotFound(error: unknown): boolean {
  return error instanceof Error && ((error as { code?: unknown }).code === 404 || /\bNOT_FOUND\b/.test(error.message));
}

/** Throws a RangeError unless `queue` can name a queue (1 to 255 bytes of UTF-8). */
export function checkQueueName(queue: unknown): string {
  if (typeof queue !== 'string' || queue.length === 0 || Buffer.byteLength(queue) > 255) {
    throw new RangeError(`rabbitmq: queue name must be 1 to 255 bytes, got ${JSON.stringify(queue)}`);
  }
  return queue;
}

/**
 * Fails the request in flight when the broker takes longer than `timeoutMs`
 * to answer it. Only time spent waiting for a reply counts: time between
 * requests (a publish the caller waits for meanwhile) does not. The wait is
 * measured on the clock's monotonic reading, the one its timer sleeps on,
 * so a step of the wall clock neither stretches it nor fires it early. One
 * timer for the life of the guard, not one per request.
 */
export class ReplyGuard {
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  readonly #stopped = new AbortController();
  #request: { since: number; abort: AbortController; operation: string } | undefined;

  constructor(clock: Clock, timeoutMs: number) {
    this.#clock = clock;
    this.#timeoutMs = timeoutMs;
    void this.#watch();
  }

  /** Resolves `reply`, or rejects with a {@link BrokerStallError} once it has waited `timeoutMs`. */
  async request<T>(operation: string, reply: Promise<T>): Promise<T> {
    const request = { since: this.#clock.monotonic(), abort: new AbortController(), operation };
    this.#request = request;
    try {
      return await raceAbort(reply, request.abort.signal);
    } finally {
      if (this.#request === request) this.#request = undefined;
    }
  }

  /** Stops the timer. */
  stop(): void {
    this.#stopped.abort();
  }

  async #watch(): Promise<void> {
    for (;;) {
      const request = this.#request;
      const now = this.#clock.monotonic();
      if (request && now - request.since >= this.#timeoutMs) {
        request.abort.abort(new BrokerStallError(request.operation, this.#timeoutMs));
        if (this.#request === request) this.#request = undefined;
        continue;
      }
      const wait = request ? request.since + this.#timeoutMs - now : this.#timeoutMs;
      try {
        await this.#clock.sleep(Math.max(1, wait), this.#stopped.signal);
      } catch {
        return;
      }
    }
  }
}

/** Opens a channel whose errors are expected and handled by the caller (a 404 on a missing queue closes it). */
async function quietChannel(session: Session, guard: ReplyGuard, operation: string): Promise<Channel> {
  const channel = await guard.request(operation, session.model.createChannel());
  channel.on('error', () => undefined);
  return channel;
}

/**
 * Passive checks and purges on one channel, opened when first needed and
 * again after a 404 closed it. Requests run one at a time.
 */
export class PassiveChannel {
  #channel: Channel | undefined;
  readonly #guard: ReplyGuard;

  constructor(
    private readonly session: Session,
    clock: Clock,
    timeoutMs: number,
  ) {
    this.#guard = new ReplyGuard(clock, timeoutMs);
  }

  /** The queue's ready messages and consumers, or undefined when it does not exist. */
  async queue(queue: string): Promise<{ messageCount: number; consumerCount: number } | undefined> {
    return this.#run(`check queue '${queue}'`, (channel) => channel.checkQueue(queue));
  }

  /** Whether the exchange exists. */
  async exchangeExists(exchange: string): Promise<boolean> {
    return (await this.#run(`check exchange '${exchange}'`, (channel) => channel.checkExchange(exchange).then(() => true))) === true;
  }

  /** Removes the queue's ready messages; resolves how many, or undefined when the queue does not exist. */
  async purge(queue: string): Promise<number | undefined> {
    const reply = await this.#run(`purge '${queue}'`, (channel) => channel.purgeQueue(queue));
    return reply?.messageCount;
  }

  async close(): Promise<void> {
    const channel = this.#channel;
    this.#channel = undefined;
    try {
      if (channel) await this.#guard.request('close a channel', channel.close()).catch(() => undefined);
    } finally {
      this.#guard.stop();
    }
  }

  async #run<T>(operation: string, fn: (channel: Channel) => Promise<T>): Promise<T | undefined> {
    let channel = this.#channel;
    if (!channel) {
      const opened = await quietChannel(this.session, this.#guard, operation);
      opened.on('close', () => {
        if (this.#channel === opened) this.#channel = undefined;
      });
      this.#channel = channel = opened;
    }
    try {
      return await this.#guard.request(operation, fn(channel));
    } catch (error) {
      if (this.#channel === channel) this.#channel = undefined;
      if (isNotFound(error)) return undefined;
      void channel.close().catch(() => undefined);
      throw error;
    }
  }
}

/** How long the ready count of a queue may stay still before the messages given back are taken as all returned. */
export const RETURN_SETTLE_MS = 250;

/** How often the ready count is read while messages given back return to the queue. */
const RETURN_POLL_MS = 20;

/** Counters of the `basic.get` requests of error-queue operations. */
export interface ReadStats {
  /** `basic.get` requests sent, the last empty one of a read included. */
  reads: number;
}

/**
 * Takes messages off the head of one queue with `basic.get` (manual ack) on
 * a private channel, and holds them until they are acked or given back.
 * Reads at most `maxScan` messages: asking for one more while the queue
 * still has some throws a {@link ScanLimitError}.
 */
export class QueueReader {
  readonly #channel: Channel;
  readonly #guard: ReplyGuard;
  readonly #clock: Clock;
  readonly #timeoutMs: number;
  #closed = false;
  #fetched = 0;
  #acked = 0;
  /** Messages the broker said were left after the last `basic.get`. */
  #remaining: number | undefined;
  #exhausted = false;

  private constructor(
    channel: Channel,
    guard: ReplyGuard,
    readonly queue: string,
    private readonly maxScan: number,
    private readonly operation: string,
    private readonly stats: ReadStats | undefined,
    clock: Clock,
    timeoutMs: number,
  ) {
    this.#clock = clock;
    this.#timeoutMs = timeoutMs;
    this.#channel = channel;
    this.#guard = guard;
    channel.on('close', () => {
      this.#closed = true;
    });
  }

  /** Opens a reader of `queue` on a new channel of `session`. */
  static async open(
    session: Session,
    queue: string,
    options: { clock: Clock; timeoutMs: number; maxScan: number; operation: string; stats?: ReadStats },
  ): Promise<QueueReader> {
    const guard = new ReplyGuard(options.clock, options.timeoutMs);
    try {
      const channel = await quietChannel(session, guard, options.operation);
      return new QueueReader(channel, guard, queue, options.maxScan, options.operation, options.stats, options.clock, options.timeoutMs);
    } catch (error) {
      guard.stop();
      throw error;
    }
  }

  /** Messages taken so far. */
  get fetched(): number {
    return this.#fetched;
  }

  /**
   * The next message, held unacknowledged; undefined once the queue is empty
   * or does not exist. Throws a {@link ScanLimitError} rather than read past
   * `maxScan` messages.
   */
  async next(): Promise<GetMessage | undefined> {
    if (this.#exhausted) return undefined;
    if (this.#fetched >= this.maxScan) {
      if (this.#remaining === 0) return undefined;
      throw new ScanLimitError(this.queue, this.maxScan, this.operation);
    }
    let message: GetMessage | false;
    if (this.stats) this.stats.reads++;
    try {
      message = await this.#guard.request(this.operation, this.#channel.get(this.queue, { noAck: false }));
    } catch (error) {
      if (!isNotFound(error)) {
        // Stalled or failed: give up on the channel without waiting again; closing it gives the messages back.
        this.#closed = true;
        void this.#channel.close().catch(() => undefined);
        throw error;
      }
      message = false; // no such queue: nothing in it
    }
    if (message === false) {
      this.#exhausted = true;
      return undefined;
    }
    this.#fetched++;
    this.#remaining = message.fields.messageCount;
    return message;
  }

  /** Gives back every message taken before `message` (and not settled), keeping `message` itself. */
  requeueBefore(message: GetMessage): void {
    const tag = message.fields.deliveryTag;
    if (tag <= 1 || this.#closed) return;
    // Delivery tags on a channel count from 1 and every basic.get-ok takes the next one, so the tag
    // just before this message's covers exactly the messages taken before it.
    this.#channel.nack({ ...message, fields: { ...message.fields, deliveryTag: tag - 1 } }, true, true);
  }

  /** Gives one message back to its place in the queue. */
  requeue(message: GetMessage): void {
    if (!this.#closed) this.#channel.nack(message, false, true);
  }

  /**
   * Acknowledges (removes) `message`, keeping the others held. The broker
   * confirms nothing: {@link finish} resolves true once every ack is done.
   * Throws when the channel closed (the broker gave the message back).
   */
  ack(message: GetMessage): void {
    if (this.#closed) throw new Error(`rabbitmq: the channel reading '${this.queue}' closed before the message could be removed`);
    this.#channel.ack(message);
    this.#acked++;
  }

  /**
   * Acknowledges (removes) `message` and closes the channel. Resolves once
   * the broker has answered the close, which it does only after it handled
   * the ack: then the message is gone for sure. Rejects when that cannot be
   * known (the channel or connection closed first, or no answer in time).
   */
  async ackAndClose(message: GetMessage): Promise<void> {
    if (this.#closed) throw new Error(`rabbitmq: the channel reading '${this.queue}' closed before the message could be removed`);
    this.#channel.ack(message);
    try {
      await this.#guard.request(this.operation, this.#channel.close());
    } finally {
      this.#closed = true;
      this.#guard.stop();
    }
  }

  /**
   * Waits until the queue counts the messages just given back as ready
   * again, so that a pass starting next sees them all. The broker answers
   * neither acks nor nacks, and a classic queue takes them back a few
   * hundred at a time (about a second for 3,000 on RabbitMQ 3.10); a
   * passive declaration on the same channel is answered after it has
   * handled the acks and nacks sent before it. Polls until the queue holds
   * at least as many ready messages as were given back, or its count has
   * stopped growing for {@link RETURN_SETTLE_MS} (someone else is taking
   * them), or the reply timeout has passed.
   */
  async #awaitReturned(operation: string): Promise<void> {
    const returned = this.#fetched - this.#acked;
    const started = this.#clock.monotonic();
    let last = -1;
    let grewAt = started;
    for (;;) {
      const { messageCount } = await this.#guard.request(operation, this.#channel.checkQueue(this.queue));
      const now = this.#clock.monotonic();
      if (messageCount >= returned || now - started >= this.#timeoutMs) return;
      if (messageCount !== last) {
        last = messageCount;
        grewAt = now;
      } else if (now - grewAt >= RETURN_SETTLE_MS) return;
      await this.#clock.sleep(RETURN_POLL_MS);
    }
  }

  /** Gives back every message still held, in their original order, and closes the channel. Never throws. */
  async release(): Promise<void> {
    await this.finish();
  }

  /**
   * Gives back every message still held, in their original order, and
   * closes the channel. Resolves true once every earlier ack and nack on
   * the channel is done (the queue is gone, or answered a passive
   * declaration sent after them on the same channel); false when that cannot be known (the channel or connection closed
   * first, or no answer in time: the broker then gives back whatever was
   * not acked yet). Never throws. A quorum queue applies acks and nacks
   * through its log, so its ready count can lag that answer by a moment.
   */
  async finish(): Promise<boolean> {
    try {
      if (this.#closed) return false;
      this.#closed = true;
      // One nack for everything still held (delivery tag 0, multiple): back in their places.
      this.#channel.nackAll(true);
      const operation = `give back the messages read from '${this.queue}'`;
      try {
        await this.#awaitReturned(operation);
      } catch (error) {
        if (isNotFound(error)) return true; // the queue is gone, and what was read with it
        throw error;
      }
      await this.#guard.request(operation, this.#channel.close());
      return true;
    } catch {
      return false;
    } finally {
      this.#guard.stop();
    }
  }
}
