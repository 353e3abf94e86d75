/**
 * A canary replay: send one entry, wait for its outcome, then send faster
 * while the sent-back messages are handled, and stop by itself when they
 * fail again or no outcome arrives. Outcomes come from the store: an
 * ingester with `outcomeQueue` marks entries `handled`, and a message that
 * comes back into an error queue marks its entry `failed-again`.
 */
import type { Clock } from '../time/clock.js';
import type { RateLimiter } from './rate-limiter.js';

/** How a canary replay speeds up and when it stops. */
export interface CanaryOptions {
  /** Sends per second once the first message was handled. Default 1. */
  readonly startRate?: number;
  /** The fastest it goes, sends per second. Default {@link DEFAULT_CANARY_MAX_RATE}. */
  readonly maxRate?: number;
  /** The rate is multiplied by this after each window in which messages were handled and none failed again. Default 2. */
  readonly growth?: number;
  /** How often outcomes are read and the rate adjusted, ms. Default 1000. */
  readonly windowMs?: number;
  /** The longest wait for a new outcome while sent-back messages have none, ms. Default 60 000. */
  readonly outcomeTimeoutMs?: number;
  /** Sent-back messages that may fail again before the replay stops. Default 0: the first one stops it. */
  readonly maxFailedAgain?: number;
  /** How often the store is read while waiting for the first outcome, ms. Default 250. */
  readonly pollMs?: number;
}

/** What a canary replay has seen so far. */
export interface CanaryView {
  /** Sends per second now (0 while waiting for the first outcome). */
  readonly rate: number;
  /** Entries sent back by the job. */
  readonly sent: number;
  /** Of those, handled, and failed again, as far as the store has seen. */
  readonly handled: number;
  readonly failedAgain: number;
}

/** Outcome counts over the entries a job sent back. */
export interface OutcomeCounts {
  readonly sent: number;
  readonly handled: number;
  readonly failedAgain: number;
}

/** The fastest a canary replay goes unless told, sends per second. */
export const DEFAULT_CANARY_MAX_RATE = 500;

/** Throws a RangeError naming the first bad canary option. */
export function checkCanaryOptions(options: CanaryOptions): Required<CanaryOptions> {
  const resolved = {
    startRate: options.startRate ?? 1,
    maxRate: options.maxRate ?? DEFAULT_CANARY_MAX_RATE,
    growth: options.growth ?? 2,
    windowMs: options.windowMs ?? 1_000,
    outcomeTimeoutMs: options.outcomeTimeoutMs ?? 60_000,
    maxFailedAgain: options.maxFailedAgain ?? 0,
    pollMs: options.pollMs ?? 250,
  };
  for (const [name, value] of Object.entries(resolved)) {
    const whole = name === 'maxFailedAgain' || name.endsWith('Ms');
    if (!(Number.isFinite(value) && value >= 0 && (!whole || Number.isSafeInteger(value)))) throw new RangeError(`canary.${name} must be a ${whole ? 'whole ' : ''}number >= 0, got ${value}`);
  }
  if (resolved.startRate <= 0 || resolved.maxRate < resolved.startRate) throw new RangeError('canary: startRate must be > 0 and maxRate at least startRate');
  if (resolved.growth < 1) throw new RangeError('canary.growth must be >= 1');
  if (resolved.windowMs < 1 || resolved.pollMs < 1) throw new RangeError('canary.windowMs and canary.pollMs must be >= 1');
  return resolved;
}

/** The message when no outcome arrives in time. */
export const NO_OUTCOME =
  "no outcome record arrived: is an ingester running with --outcome-queue and the endpoint's replayOutcomeQueue set?";

/**
 * Decides, before each send of a canary replay, whether to send, wait or stop.
 */
export class CanaryController {
  readonly #options: Required<CanaryOptions>;
  readonly #clock: Clock;
  readonly #limiter: RateLimiter;
  readonly #outcomes: () => OutcomeCounts;
  #counts: OutcomeCounts = { sent: 0, handled: 0, failedAgain: 0 };
  #phase: 'first' | 'waiting' | 'growing' = 'first';
  #lastCheck = 0;
  #lastOutcomeAt = 0;

  constructor(options: Required<CanaryOptions>, clock: Clock, limiter: RateLimiter, outcomes: () => OutcomeCounts) {
    this.#options = options;
    this.#clock = clock;
    this.#limiter = limiter;
    this.#outcomes = outcomes;
    this.#counts = outcomes();
    // A resumed replay that already saw a message handled goes on growing from the start rate.
    if (this.#counts.handled > 0) this.#grow();
  }

  /** What it has seen. */
  get view(): CanaryView {
    return { rate: this.#phase === 'growing' ? this.#limiter.rate : 0, ...this.#counts };
  }

  /**
   * Before a send: resolves undefined to send now (after the rate limiter),
   * or why the replay stops. `flush` records the sends so far, so their
   * outcomes can be matched.
   */
  async beforeSend(flush: () => Promise<void>, signal?: AbortSignal): Promise<string | undefined> {
    if (this.#phase === 'first') {
      this.#phase = 'waiting';
      return undefined;
    }
    if (this.#phase === 'waiting') {
      await flush();
      const since = this.#clock.monotonic();
      for (;;) {
        this.#counts = this.#outcomes();
        if (this.#counts.failedAgain > this.#options.maxFailedAgain) return this.#failedAgainReason();
        if (this.#counts.handled > 0) {
          this.#grow();
          return undefined;
        }
        if (this.#clock.monotonic() - since >= this.#options.outcomeTimeoutMs) return `${NO_OUTCOME} (waited ${this.#options.outcomeTimeoutMs} ms for the first)`;
        await this.#clock.sleep(this.#options.pollMs, signal);
      }
    }
    const now = this.#clock.monotonic();
    if (now - this.#lastCheck < this.#options.windowMs) return undefined;
    await flush();
    const before = this.#counts;
    this.#counts = this.#outcomes();
    this.#lastCheck = now;
    if (this.#counts.failedAgain > this.#options.maxFailedAgain) return this.#failedAgainReason();
    const seen = this.#counts.handled + this.#counts.failedAgain;
    if (seen > before.handled + before.failedAgain) {
      this.#lastOutcomeAt = now;
      if (this.#counts.handled > before.handled) this.#limiter.setRate(Math.min(this.#options.maxRate, this.#limiter.rate * this.#options.growth));
    } else if (this.#counts.sent > seen && now - this.#lastOutcomeAt >= this.#options.outcomeTimeoutMs) {
      return `${NO_OUTCOME} (${this.#counts.sent - seen} sent back without one for ${this.#options.outcomeTimeoutMs} ms)`;
    }
    return undefined;
  }

  #grow(): void {
    this.#phase = 'growing';
    this.#limiter.setRate(this.#options.startRate);
    this.#lastCheck = this.#lastOutcomeAt = this.#clock.monotonic();
  }

  #failedAgainReason(): string {
    const { failedAgain, sent, handled } = this.#counts;
    return `${failedAgain} of ${sent} messages sent back failed again (${handled} handled; at most ${this.#options.maxFailedAgain} allowed): the cause is not fixed, the rest stay failed`;
  }
}
