/**
 * A cap on how many requests of one kind the dashboard works on at once.
 * The store answers synchronously, so a flood of one kind of request (text
 * searches, say) would otherwise be worked through back to back while every
 * other request waits; behind a gate, requests over the cap wait their turn
 * in a short queue, each admitted one first yields to the event loop, and a
 * request of another kind that arrives meanwhile is answered in between.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ApiError } from './api.js';

/** How many requests of one kind run at once, and how many more wait. */
export interface GateLimits {
  /** Requests of the kind worked on at once. Default 2. */
  readonly running?: number;
  /** Requests of the kind that wait for a turn; one more is refused with 503 and `Retry-After`. Default 8. */
  readonly waiting?: number;
}

/** What a gate has done, for tests and diagnostics. */
export interface GateCounts {
  /** Requests being worked on now. */
  readonly running: number;
  /** Requests waiting for a turn now. */
  readonly waiting: number;
  /** The most requests worked on at once so far. */
  readonly peakRunning: number;
  /** Requests finished (answered or failed). */
  readonly finished: number;
  /** Requests refused because the queue was full. */
  readonly refused: number;
}

/** Seconds a refused client is told to wait before asking again. */
export const RETRY_AFTER_SECONDS = 1;

/** At most `running` requests at once, `waiting` more queued in arrival order, the rest refused. */
export class RequestGate {
  readonly #running: number;
  readonly #waiting: number;
  readonly #queue: (() => void)[] = [];
  #busy = 0;
  #peak = 0;
  #finished = 0;
  #refused = 0;

  constructor(limits: GateLimits = {}) {
    this.#running = limits.running ?? 2;
    this.#waiting = limits.waiting ?? 8;
    if (!(Number.isSafeInteger(this.#running) && this.#running >= 1)) throw new RangeError(`running must be a whole number >= 1, got ${limits.running}`);
    if (!(Number.isSafeInteger(this.#waiting) && this.#waiting >= 0)) throw new RangeError(`waiting must be a whole number >= 0, got ${limits.waiting}`);
  }

  /**
   * Runs `work` once a turn is free, after yielding to the event loop once.
   * Rejects with a 503 {@link ApiError} (with `retryAfterSeconds`) when the
   * queue is full.
   */
  async run<T>(work: () => T | Promise<T>): Promise<T> {
    if (this.#busy < this.#running) this.#busy++;
    else if (this.#queue.length < this.#waiting) await new Promise<void>((resolve) => this.#queue.push(resolve)); // the turn is handed over, #busy unchanged
    else {
      this.#refused++;
      throw new ApiError(503, 'too many requests of this kind at once; try again shortly', RETRY_AFTER_SECONDS);
    }
    this.#peak = Math.max(this.#peak, this.#busy);
    try {
      await nextTurn();
      return await work();
    } finally {
      this.#finished++;
      const next = this.#queue.shift();
      if (next) next();
      else this.#busy--;
    }
  }

  /** What the gate has done so far. */
  counts(): GateCounts {
    return { running: this.#busy, waiting: this.#queue.length, peakRunning: this.#peak, finished: this.#finished, refused: this.#refused };
  }
}
