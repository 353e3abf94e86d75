/**
 * A token bucket on a {@link Clock}: at most `rate` takes per second on
 * average, with a burst of a tenth of a second's worth (at least one).
 */
import type { Clock } from '../time/clock.js';

export class RateLimiter {
  readonly #clock: Clock;
  #rate: number;
  #tokens = 1;
  #last: number;

  /** `rate`: takes per second, > 0; `Infinity` never waits. */
  constructor(clock: Clock, rate: number) {
    this.#clock = clock;
    this.#rate = checkRate(rate);
    this.#last = clock.monotonic();
  }

  /** Takes per second now. */
  get rate(): number {
    return this.#rate;
  }

  /** Changes the rate from now on; tokens saved so far are kept up to the new burst. */
  setRate(rate: number): void {
    this.#refill();
    this.#rate = checkRate(rate);
    this.#tokens = Math.min(this.#tokens, this.#burst());
  }

  /** Resolves when a take is allowed (at once when unlimited); rejects when `signal` aborts first. */
  async take(signal?: AbortSignal): Promise<void> {
    if (this.#rate === Infinity) return;
    for (;;) {
      this.#refill();
      if (this.#tokens >= 1) {
        this.#tokens -= 1;
        return;
      }
      await this.#clock.sleep(Math.ceil(((1 - this.#tokens) * 1_000) / this.#rate), signal);
    }
  }

  #burst(): number {
    return Math.max(1, this.#rate / 10);
  }

  #refill(): void {
    const now = this.#clock.monotonic();
    this.#tokens = Math.min(this.#burst(), this.#tokens + ((now - this.#last) * this.#rate) / 1_000);
    this.#last = now;
  }
}

function checkRate(rate: number): number {
  if (!(rate > 0)) throw new RangeError(`rate must be a number of sends per second > 0, got ${rate}`);
  return rate;
}

/** Parses `200/s`, `200`, `12000/min`, `50/h` into sends per second; throws a RangeError naming the accepted forms. */
export function parseRate(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(?:\/\s*(s|sec|second|m|min|minute|h|hour))?\s*$/i.exec(text);
  const value = match ? Number(match[1]) : NaN;
  if (!match || !(value > 0)) throw new RangeError(`rate must look like 200/s, 200 or 12000/min, got '${text.slice(0, 40)}'`);
  const unit = (match[2] ?? 's').toLowerCase();
  return unit.startsWith('h') ? value / 3_600 : unit.startsWith('m') ? value / 60 : value;
}
