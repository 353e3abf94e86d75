/**
 * Moves error-queue entries from a broker into the error store: consume,
 * commit a batch to the store, then acknowledge each copy. A crash between
 * the commit and the acks delivers the copies again; the store keeps one of
 * each (by entry key), so nothing is lost and nothing is stored twice.
 */
import { silentLogger, type Logger } from '../logger.js';
import { decodeReplayOutcome, type ReplayOutcome } from '../operations/replay-outcome.js';
import { systemClock, type Clock } from '../time/clock.js';
import type { Delivery, Subscription, Transport } from '../transport/types.js';
import type { ErrorStore } from './store.js';

/** Options of an {@link Ingester}. */
export interface IngesterOptions {
  /** Where the error queues are. */
  readonly transport: Transport;
  /** Where their entries go. */
  readonly store: ErrorStore;
  /** The error queues to ingest. Default `['error']`. */
  readonly errorQueues?: readonly string[];
  /**
   * The queue endpoints report replay outcomes to (their `replayOutcomeQueue`):
   * its records mark sent-back entries `handled`. Default none.
   */
  readonly outcomeQueue?: string;
  /** Entries committed in one transaction at most. Consumers prefetch twice as many per queue, so the next batch fills while one commits. Default 500. */
  readonly batchSize?: number;
  /** The longest an entry waits for its batch to fill before the batch is committed, ms. Default 50. */
  readonly flushMs?: number;
  /** The source of time. Default the system clock. */
  readonly clock?: Clock;
  /** Where failures are logged. Default silent. */
  readonly logger?: Logger;
}

/** What an ingester has done so far. */
export interface IngesterStats {
  /** Entries new to the store. */
  stored: number;
  /** Copies the store had already (delivered again after a crash or a lost ack). */
  duplicates: number;
  /** Earlier sent-back entries marked `failed-again` because their message came back. */
  failedAgain: number;
  /** Outcome records read that marked an entry handled. */
  handled: number;
  /** Outcome records that could not be read (logged and dropped: they are redeliver's own, never a user's message). */
  badOutcomes: number;
  /** Transactions committed. */
  batches: number;
  /** Commits that failed and were tried again. */
  commitFailures: number;
  /** Acknowledgements that failed after a commit: the copy comes back and is counted a duplicate. */
  ackFailures: number;
}

/** How long an empty queue that is drained in bulk rests before it is read again, ms. */
const DRAIN_POLL_MS = 250;

/** The longest wait between two tries of a commit that failed, ms. */
const MAX_COMMIT_BACKOFF_MS = 5_000;

/**
 * Ingests error queues continuously until stopped. Commits are serialised:
 * one batch at a time, in arrival order.
 */
export class Ingester {
  readonly stats: IngesterStats = { stored: 0, duplicates: 0, failedAgain: 0, handled: 0, badOutcomes: 0, batches: 0, commitFailures: 0, ackFailures: 0 };
  readonly #transport: Transport;
  readonly #store: ErrorStore;
  readonly #queues: readonly string[];
  readonly #outcomeQueue: string | undefined;
  #outcomes: Promise<void> = Promise.resolve();
  readonly #batchSize: number;
  readonly #flushMs: number;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #subscriptions: Subscription[] = [];
  readonly #drainers: Promise<void>[] = [];
  #pending: Delivery[] = [];
  #timer: AbortController | undefined;
  #committing: Promise<void> = Promise.resolve();
  #inFlight = 0;
  #state: 'new' | 'running' | 'stopping' | 'stopped' = 'new';
  readonly #stopping = new AbortController();
  #lastActivity = 0;

  constructor(options: IngesterOptions) {
    this.#transport = options.transport;
    this.#store = options.store;
    this.#queues = [...new Set(options.errorQueues ?? ['error'])];
    this.#outcomeQueue = options.outcomeQueue;
    if (this.#outcomeQueue !== undefined && (typeof this.#outcomeQueue !== 'string' || this.#outcomeQueue === '' || this.#queues.includes(this.#outcomeQueue))) {
      throw new RangeError('Ingester: outcomeQueue must name a queue that is not one of the error queues');
    }
    this.#batchSize = options.batchSize ?? 500;
    this.#flushMs = options.flushMs ?? 50;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    if (this.#queues.length === 0 || this.#queues.some((q) => typeof q !== 'string' || q === '')) throw new RangeError('Ingester: errorQueues must name at least one queue');
    if (!(Number.isSafeInteger(this.#batchSize) && this.#batchSize >= 1 && this.#batchSize <= 10_000)) throw new RangeError('Ingester: batchSize must be a whole number from 1 to 10000');
    if (!(Number.isSafeInteger(this.#flushMs) && this.#flushMs >= 0 && this.#flushMs <= 60_000)) throw new RangeError('Ingester: flushMs must be a whole number from 0 to 60000');
  }

  /**
   * Starts ingesting every error queue: in bulk where the transport can
   * hand entries over in batches (`errorQueue.drain`: SQLite, JetStream, NSQ, RocketMQ), by consuming
   * them otherwise.
   */
  async start(): Promise<void> {
    if (this.#state !== 'new') throw new Error('Ingester: start() may be called once');
    this.#state = 'running';
    this.#lastActivity = this.#clock.monotonic();
    const drain = this.#transport.errorQueue?.drain?.bind(this.#transport.errorQueue);
    try {
      for (const queue of this.#queues) {
        if (drain) this.#drainers.push(this.#drainLoop(queue, drain));
        else this.#subscriptions.push(await this.#transport.consume(queue, (delivery) => this.#onDelivery(delivery), { prefetch: 2 * this.#batchSize }));
      }
      if (this.#outcomeQueue !== undefined) {
        this.#subscriptions.push(await this.#transport.consume(this.#outcomeQueue, (delivery) => this.#onOutcome(delivery), { prefetch: 50 }));
      }
    } catch (error) {
      await this.stop();
      throw error;
    }
  }

  /**
   * Resolves once every error queue reads empty and nothing is waiting to be
   * committed or acknowledged, checked every `pollMs` (default 200) after
   * `idleMs` (default 500) without a new entry: what `errors ingest --once`
   * waits for.
   */
  async untilIdle(options: { idleMs?: number; pollMs?: number; signal?: AbortSignal } = {}): Promise<void> {
    const idleMs = options.idleMs ?? 500;
    const pollMs = options.pollMs ?? 200;
    const counter = this.#transport.errorQueue;
    for (;;) {
      await this.#clock.sleep(pollMs, options.signal);
      if (this.#state !== 'running') return;
      if (this.#pending.length > 0 || this.#inFlight > 0) continue;
      if (this.#clock.monotonic() - this.#lastActivity < idleMs) continue;
      if (!counter) return;
      let left = 0;
      for (const queue of this.#queues) left += await counter.count(queue);
      if (left === 0 && this.#pending.length === 0 && this.#inFlight === 0) return;
    }
  }

  /** Stops consuming, commits and acknowledges what is waiting (or gives it back when the store refuses), and resolves when done. The transport and store stay open. */
  async stop(): Promise<void> {
    if (this.#state === 'stopped' || this.#state === 'stopping') return this.#committing;
    this.#state = 'stopping';
    this.#stopping.abort();
    await Promise.allSettled([...this.#subscriptions.map((s) => s.close()), ...this.#drainers]);
    this.#flush();
    await Promise.all([this.#committing, this.#outcomes]);
    this.#state = 'stopped';
  }

  /** Moves batches out of `queue` until stopped, waiting `idleMs`-ish between polls of an empty queue and backing off when a batch fails. */
  async #drainLoop(queue: string, drain: NonNullable<NonNullable<Transport['errorQueue']>['drain']>): Promise<void> {
    let failures = 0;
    while (this.#state === 'running') {
      let moved = 0;
      try {
        this.#inFlight++;
        moved = await drain(queue, this.#batchSize, async (entries) => {
          const result = await this.#store.ingest(entries.map((e) => ({ errorQueue: queue, messageId: e.messageId, headers: e.headers, body: e.body })));
          this.stats.stored += result.stored;
          this.stats.duplicates += result.duplicates;
          this.stats.failedAgain += result.failedAgain;
          this.stats.batches++;
        });
        failures = 0;
      } catch (error) {
        this.stats.commitFailures++;
        this.#logger.error({ err: error, errorQueue: queue, store: this.#store.path }, 'error store: could not move a batch; the entries stay in their error queue, trying again');
        await this.#clock.sleep(Math.min(100 * 2 ** failures++, MAX_COMMIT_BACKOFF_MS), this.#stopping.signal).catch(() => undefined);
        continue;
      } finally {
        this.#inFlight--;
      }
      if (moved > 0) this.#lastActivity = this.#clock.monotonic();
      else await this.#clock.sleep(DRAIN_POLL_MS, this.#stopping.signal).catch(() => undefined);
    }
  }

  /** Records one outcome (after the records before it), then acknowledges it; a record that cannot be read is logged and dropped. */
  #onOutcome(delivery: Delivery): void {
    this.#lastActivity = this.#clock.monotonic();
    this.#inFlight++;
    this.#outcomes = this.#outcomes
      .then(async () => {
        let outcome: ReplayOutcome;
        try {
          outcome = decodeReplayOutcome(delivery);
        } catch (error) {
          this.stats.badOutcomes++;
          this.#logger.warn({ err: error, queue: delivery.queue, messageId: delivery.id }, 'error store: dropped a replay outcome record that could not be read');
          await delivery.ack();
          return;
        }
        for (let tries = 0; ; tries++) {
          try {
            this.stats.handled += await this.#store.recordHandled([outcome.messageId]);
            break;
          } catch (error) {
            if (this.#state !== 'running') {
              await delivery.release();
              return;
            }
            this.stats.commitFailures++;
            this.#logger.error({ err: error, messageId: outcome.messageId }, 'error store: could not record a replay outcome; trying again');
            await this.#clock.sleep(Math.min(100 * 2 ** tries, MAX_COMMIT_BACKOFF_MS), this.#stopping.signal).catch(() => undefined);
          }
        }
        await delivery.ack();
      })
      .catch((error: unknown) => {
        this.stats.ackFailures++;
        this.#logger.warn({ err: error, messageId: delivery.id }, 'error store: a replay outcome record could not be acknowledged; it comes back and changes nothing twice');
      })
      .finally(() => {
        this.#inFlight--;
      });
  }

  #onDelivery(delivery: Delivery): void {
    this.#lastActivity = this.#clock.monotonic();
    if (this.#state !== 'running') {
      void delivery.release().catch(() => undefined);
      return;
    }
    this.#pending.push(delivery);
    if (this.#pending.length >= this.#batchSize) this.#flush();
    else if (!this.#timer) {
      const timer = (this.#timer = new AbortController());
      this.#clock.sleep(this.#flushMs, timer.signal).then(
        () => {
          if (this.#timer === timer) this.#flush();
        },
        () => undefined,
      );
    }
  }

  /** Hands the waiting deliveries to the commit chain as one batch. */
  #flush(): void {
    this.#timer?.abort();
    this.#timer = undefined;
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    this.#inFlight += batch.length;
    this.#committing = this.#committing.then(() => this.#commit(batch)).finally(() => {
      this.#inFlight -= batch.length;
    });
  }

  /** Commits `batch`, trying again with a growing wait while running; then acknowledges each copy. */
  async #commit(batch: Delivery[]): Promise<void> {
    const entries = batch.map((d) => ({ errorQueue: d.queue, messageId: d.id, headers: d.headers, body: d.body }));
    for (let tries = 0; ; tries++) {
      try {
        const result = await this.#store.ingest(entries);
        this.stats.stored += result.stored;
        this.stats.duplicates += result.duplicates;
        this.stats.failedAgain += result.failedAgain;
        this.stats.batches++;
        break;
      } catch (error) {
        this.stats.commitFailures++;
        const giveBack = this.#state !== 'running';
        this.#logger.error(
          { err: error, entries: batch.length, store: this.#store.path },
          giveBack ? 'error store: could not store a batch while stopping; the copies go back to their error queue' : 'error store: could not store a batch; trying again',
        );
        if (giveBack) {
          await Promise.allSettled(batch.map((d) => d.release()));
          return;
        }
        await this.#clock.sleep(Math.min(100 * 2 ** tries, MAX_COMMIT_BACKOFF_MS), this.#stopping.signal).catch(() => undefined);
      }
    }
    const acks = await Promise.allSettled(batch.map((d) => d.ack()));
    const failed = acks.filter((a) => a.status === 'rejected');
    if (failed.length > 0) {
      this.stats.ackFailures += failed.length;
      this.#logger.warn(
        { err: (failed[0] as PromiseRejectedResult).reason, copies: failed.length },
        'error store: stored entries could not be acknowledged; their copies come back and are recognised as duplicates',
      );
    }
  }
}
