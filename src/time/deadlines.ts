/**
 * Many deadlines on one timer. Every send (a Producer attempt, a RabbitMQ
 * publish waiting for its confirm) must be bounded in time, but a timer per
 * send (an AbortController, a `setTimeout`, a listener, and the cancelled
 * timer's garbage) costs more than the rest of a send put together at tens
 * of thousands of sends per second. Here a send adds an entry to a set, and
 * removes it when it settles; a single sleep of the clock is armed for the
 * earliest deadline. When it fires, the entries that are due expire, and the
 * set is scanned once for the next earliest. Since sends settle long before
 * their deadlines, the timer fires about once per timeout period, not once
 * per send.
 *
 * Precision: an entry expires when the clock reaches its deadline, never
 * before (to the clock's precision). Deadlines follow the clock's monotonic
 * time: setting the wall clock back or forward neither delays nor hastens
 * them. With the system clock the timer is not
 * kept armed while no entry is pending, so an idle process can exit.
 */
import type { Clock } from './clock.js';

/** A pending deadline; pass it to {@link Deadlines.delete} once the operation it bounds has settled. */
export interface Deadline {
  /** The clock's monotonic time at which the entry expires. */
  readonly at: number;
  /** Called once, when the deadline passes; not called after `delete`. */
  readonly onExpire: () => void;
}

/** Disarms the sleep when an entry is deleted; a constant, so aborting builds no error. */
const DISARM = Object.freeze({ reason: 'redeliver: deadline timer disarmed' });

export class Deadlines {
  readonly #clock: Clock;
  readonly #entries = new Set<Deadline>();
  /** The deadline the timer is armed for, or undefined when it is not armed. */
  #armedAt: number | undefined;
  #disarm: AbortController | undefined;
  #idleCheck = false;
  #closed = false;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Entries pending now. */
  get size(): number {
    return this.#entries.size;
  }

  /** Calls `onExpire` once, `timeoutMs` from now, unless the entry is deleted first. */
  add(timeoutMs: number, onExpire: () => void): Deadline {
    const at = this.#clock.monotonic() + timeoutMs;
    const entry: Deadline = { at, onExpire };
    this.#entries.add(entry);
    if (this.#armedAt === undefined || at < this.#armedAt) this.#arm(at);
    return entry;
  }

  /** The operation settled: the entry will not expire. */
  delete(entry: Deadline): void {
    if (!this.#entries.delete(entry) || this.#entries.size > 0 || this.#idleCheck) return;
    // Idle: disarm, but not before the current turn's follow-up sends had a chance to add theirs,
    // so a steady stream of one-at-a-time sends does not re-arm the timer for every send.
    this.#idleCheck = true;
    setImmediate(() => {
      this.#idleCheck = false;
      if (this.#entries.size === 0) this.#stop();
    });
  }

  /**
   * Settles like `promise`, or rejects with `onTimeout()` after `timeoutMs`
   * if it has not settled by then (`promise` then runs on, its outcome ignored).
   */
  race<T>(promise: Promise<T>, timeoutMs: number, onTimeout: () => unknown): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry = this.add(timeoutMs, () => reject(onTimeout()));
      promise.then(
        (value) => {
          this.delete(entry);
          resolve(value);
        },
        (error: unknown) => {
          this.delete(entry);
          reject(error);
        },
      );
    });
  }

  /** Stops the timer for good; pending entries never expire. */
  close(): void {
    this.#closed = true;
    this.#entries.clear();
    this.#stop();
  }

  #stop(): void {
    this.#armedAt = undefined;
    const disarm = this.#disarm;
    this.#disarm = undefined;
    disarm?.abort(DISARM);
  }

  #arm(at: number): void {
    if (this.#closed) return;
    this.#stop();
    const disarm = new AbortController();
    this.#disarm = disarm;
    this.#armedAt = at;
    const ms = Math.min(Math.max(0, at - this.#clock.monotonic()), 2 ** 31 - 1);
    this.#clock.sleep(ms, disarm.signal).then(
      () => {
        if (this.#disarm !== disarm) return;
        this.#disarm = undefined;
        this.#armedAt = undefined;
        this.#fire();
      },
      () => undefined,
    );
  }

  #fire(): void {
    const now = this.#clock.monotonic();
    let next: number | undefined;
    const due: Deadline[] = [];
    for (const entry of this.#entries) {
      if (entry.at <= now) due.push(entry);
      else if (next === undefined || entry.at < next) next = entry.at;
    }
    for (const entry of due) this.#entries.delete(entry);
    if (next !== undefined && (this.#armedAt === undefined || next < this.#armedAt)) this.#arm(next);
    for (const entry of due) entry.onExpire();
  }
}
