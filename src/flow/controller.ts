import { DEFAULTS } from '../defaults.js';
import type { Logger } from '../logger.js';
import type { Clock } from '../time/clock.js';
import type { Random } from '../time/random.js';
import type { Subscription } from '../transport/types.js';
import type { FlowConfig } from './config.js';
import { backoffDuration, backoffOnFailure, backoffOnSuccess, INITIAL_CONSUMER_BACKOFF, type ConsumerBackoffState } from './consumer-backoff.js';
import { INITIAL_RATE_LIMIT, rateLimitOnFailure, rateLimitOnSuccess, type RateLimitState } from './rate-limit.js';
import { depositFirstAttempt, fullBudget, refill, refundRetry, trySpend, type RetryBudgetState } from './retry-budget.js';

/** Why an immediate retry was handed back to the broker instead. */
export type DeferReason = 'backoff' | 'rate-limit' | 'budget' | 'in-progress';

/** The flow-control events, forwarded as endpoint events. */
export interface FlowEvents {
  consumerBackoffStarted: { counter: number; durationMs: number };
  consumerBackoffEnded: { counter: number };
  rateLimitStarted: { consecutiveFailures: number };
  rateLimitEnded: { consecutiveFailures: number };
}

/** A snapshot of the flow-control state. */
export interface FlowState {
  backoffCounter: number;
  backingOff: boolean;
  probing: boolean;
  rateLimited: boolean;
  consecutiveFailures: number;
  budgetTokens: number | undefined;
}

/**
 * Applies consumer backoff, rate limiting and the retry budget to one
 * endpoint's subscription: it pauses consumption during a backoff, takes it
 * down to one message at a time while probing or rate limited, and says
 * whether an immediate retry may run now.
 */
export class FlowController {
  #subscription: Subscription | undefined;
  #backoff: ConsumerBackoffState = INITIAL_CONSUMER_BACKOFF;
  #backoffUntil: number | undefined;
  #probing = false;
  #rate: RateLimitState = INITIAL_RATE_LIMIT;
  #rateWaitUntil: number | undefined;
  #budget: RetryBudgetState | undefined;
  #applied = { paused: false, prefetch: 0 };
  #applying: Promise<void> = Promise.resolve();
  readonly #stop = new AbortController();

  constructor(
    private readonly config: FlowConfig,
    private readonly concurrency: number,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly logger: Logger,
    private readonly emit: <K extends keyof FlowEvents>(event: K, args: FlowEvents[K]) => void,
    /** Told at once, before the subscription follows, how many messages may run: 0 while paused, 1 while probing or rate limited. */
    private readonly limitRunning: (limit: number) => void = () => undefined,
  ) {
    this.#applied.prefetch = concurrency;
    if (config.retryBudget) this.#budget = fullBudget(config.retryBudget, clock.monotonic());
  }

  /** Whether any part is on. */
  get enabled(): boolean {
    return Boolean(this.config.consumerBackoff || this.config.rateLimit || this.config.retryBudget);
  }

  get state(): FlowState {
    const budget = this.config.retryBudget && this.#budget ? refill(this.config.retryBudget, this.#budget, this.clock.monotonic()).tokens : undefined;
    return {
      backoffCounter: this.#backoff.counter,
      backingOff: this.#backoffUntil !== undefined,
      probing: this.#probing,
      rateLimited: this.#rate.limited,
      consecutiveFailures: this.#rate.consecutiveFailures,
      budgetTokens: budget,
    };
  }

  attach(subscription: Subscription): void {
    this.#subscription = subscription;
  }

  /** Stops timers; the endpoint pauses and closes the subscription itself. */
  stop(): void {
    this.#stop.abort();
  }

  /** A message's first handler attempt. */
  onFirstAttempt(): void {
    const budget = this.config.retryBudget;
    if (budget && this.#budget) this.#budget = depositFirstAttempt(budget, this.#budget, this.clock.monotonic());
  }

  /** Any handler attempt failed with an error that retries could fix. */
  onAttemptFailed(): void {
    const rate = this.config.rateLimit;
    if (!rate) return;
    const { state, started } = rateLimitOnFailure(rate.threshold, this.#rate);
    this.#rate = state;
    if (started) {
      this.logger.warn({ consecutiveFailures: state.consecutiveFailures }, `Rate limiting started after ${state.consecutiveFailures} consecutive failures: one message at a time, ${rate.waitMs} ms apart`);
      this.emit('rateLimitStarted', { consecutiveFailures: state.consecutiveFailures });
    }
    if (state.limited) {
      const until = this.clock.monotonic() + rate.waitMs;
      this.#rateWaitUntil = until;
      this.#apply();
      void this.clock.sleep(rate.waitMs, this.#stop.signal).then(
        () => {
          if (this.#rateWaitUntil === until) this.#rateWaitUntil = undefined;
          this.#apply();
        },
        () => undefined,
      );
    }
  }

  /** A message failed as a whole (its immediate retries did not fix it): back the consumer off. */
  onMessageFailed(): void {
    const settings = this.config.consumerBackoff;
    if (!settings || this.#backoffUntil !== undefined) return;
    const { state, durationMs } = backoffOnFailure(settings, this.#backoff, this.random);
    this.#backoff = state;
    this.#backOff(durationMs);
  }

  /** Stops taking messages for `durationMs`, then probes with one. */
  #backOff(durationMs: number): void {
    const state = this.#backoff;
    this.#probing = false;
    const until = this.clock.monotonic() + durationMs;
    this.#backoffUntil = until;
    this.logger.warn({ backoffCounter: state.counter, durationMs }, `Consumer backing off for ${durationMs} ms (backoff level ${state.counter})`);
    this.emit('consumerBackoffStarted', { counter: state.counter, durationMs });
    this.#apply();
    void this.clock.sleep(durationMs, this.#stop.signal).then(
      () => {
        if (this.#backoffUntil !== until) return;
        this.#backoffUntil = undefined;
        this.#probing = true;
        this.#apply();
      },
      () => undefined,
    );
  }

  /** A message was handled; `wasRetry` when the attempt that succeeded was a retry. */
  onSuccess(wasRetry: boolean): void {
    const budget = this.config.retryBudget;
    if (budget && this.#budget && wasRetry) this.#budget = refundRetry(budget, this.#budget, this.clock.monotonic());
    const backoff = this.config.consumerBackoff;
    if (backoff) {
      this.#backoff = backoffOnSuccess(this.#backoff);
      if (this.#probing && backoff.resume === 'at-zero' && this.#backoff.counter > 0) {
        this.#backOff(backoffDuration(backoff, this.#backoff.counter, this.random));
      } else if (this.#probing) {
        this.#probing = false;
        this.logger.info({ backoffCounter: this.#backoff.counter }, 'Consumer backoff ended: back to full speed');
        this.emit('consumerBackoffEnded', { counter: this.#backoff.counter });
      }
    }
    if (this.config.rateLimit) {
      const consecutiveFailures = this.#rate.consecutiveFailures;
      const { state, ended } = rateLimitOnSuccess(this.#rate);
      this.#rate = state;
      this.#rateWaitUntil = undefined;
      if (ended) {
        this.logger.info({ consecutiveFailures }, 'Rate limiting ended: a message succeeded');
        this.emit('rateLimitEnded', { consecutiveFailures });
      }
    }
    this.#apply();
  }

  /**
   * Whether an immediate retry may run now; when not, how long to hand the
   * message back for and why.
   */
  immediateRetryVerdict(nextDelayedMs: number | undefined): { deferMs: number; reason: DeferReason } | undefined {
    const now = this.clock.monotonic();
    if (this.#backoffUntil !== undefined) return { deferMs: Math.max(0, this.#backoffUntil - now), reason: 'backoff' };
    if (this.#rate.limited && this.config.rateLimit) return { deferMs: this.config.rateLimit.waitMs, reason: 'rate-limit' };
    const budget = this.config.retryBudget;
    if (budget && this.#budget) {
      const { state, allowed } = trySpend(budget, this.#budget, now);
      this.#budget = state;
      if (!allowed) return { deferMs: this.budgetDeferMs(nextDelayedMs), reason: 'budget' };
    }
    return undefined;
  }

  /**
   * Whether a message that comes back for another round (a delayed or
   * deferred retry) may be handled now: it spends a retry token.
   */
  allowRedelivery(): boolean {
    const budget = this.config.retryBudget;
    if (!budget || !this.#budget) return true;
    const { state, allowed } = trySpend(budget, this.#budget, this.clock.monotonic());
    this.#budget = state;
    return allowed;
  }

  /** The delay of a retry the budget defers. */
  budgetDeferMs(nextDelayedMs: number | undefined): number {
    return this.config.retryBudget?.deferMs ?? nextDelayedMs ?? DEFAULTS.retryBudgetDeferMs;
  }

  /**
   * Brings the endpoint's running limit in line with the state at once, and
   * the subscription one change at a time: a pause before a prefetch change,
   * so a paused consumer is never handed a message by a raised prefetch.
   */
  #apply(): void {
    const limit = () => ({
      paused: this.#backoffUntil !== undefined || this.#rateWaitUntil !== undefined,
      prefetch: this.#probing || this.#rate.limited ? 1 : this.concurrency,
    });
    const now = limit();
    if (!this.#stop.signal.aborted) this.limitRunning(now.paused ? 0 : now.prefetch);
    this.#applying = this.#applying.then(async () => {
      const sub = this.#subscription;
      if (!sub || this.#stop.signal.aborted) return;
      const { paused, prefetch } = limit();
      if (paused && !this.#applied.paused) {
        await sub.pause();
        this.#applied.paused = true;
      }
      if (prefetch !== this.#applied.prefetch) {
        await sub.setPrefetch(prefetch);
        this.#applied.prefetch = prefetch;
      }
      if (!paused && this.#applied.paused) {
        await sub.resume();
        this.#applied.paused = false;
      }
    }).catch((error: unknown) => {
      this.logger.error({ err: error }, 'redeliver: flow control could not change the subscription');
    });
  }
}
