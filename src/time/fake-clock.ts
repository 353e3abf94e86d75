import { abortReason, assertSleepable, type Clock } from './clock.js';

interface Sleeper {
  /** Monotonic time at which it wakes. */
  dueAt: number;
  seq: number;
  resolve: () => void;
}

/**
 * A clock that only moves when told to. `advance(ms)` moves wall and
 * monotonic time together and wakes every sleeper whose time has come, in
 * due order, letting promise chains settle between wake-ups so code that
 * sleeps again in a loop is driven step by step. `stepWall(ms)` sets the
 * wall clock forward or back without moving monotonic time, as an operator
 * or NTP setting the system clock does; sleepers, like Node timers, follow
 * monotonic time.
 */
export class FakeClock implements Clock {
  /** Monotonic time. */
  #now: number;
  /** Wall time minus monotonic time. */
  #wallOffset = 0;
  #seq = 0;
  #sleepers: Sleeper[] = [];

  /** @param start the initial time in epoch milliseconds (default 0). */
  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now + this.#wallOffset;
  }

  monotonic(): number {
    return this.#now;
  }

  /** Steps wall time by `ms` (negative: back) without moving monotonic time or waking anyone. */
  stepWall(ms: number): void {
    this.#wallOffset += ms;
  }

  /** How many sleeps are waiting. */
  get pending(): number {
    return this.#sleepers.length;
  }

  /** The due time of the earliest sleeper, in wall time, or undefined when none waits. */
  get nextDueAt(): number | undefined {
    const next = this.#sleepers[0];
    return next && next.dueAt + this.#wallOffset;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    assertSleepable(ms);
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const sleeper: Sleeper = {
        dueAt: this.#now + ms,
        seq: this.#seq++,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.#sleepers = this.#sleepers.filter((s) => s !== sleeper);
        reject(abortReason(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#sleepers.push(sleeper);
      this.#sleepers.sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
    });
  }

  /** Moves time forward by `ms`, waking sleepers in due order. */
  async advance(ms: number): Promise<void> {
    await this.advanceTo(this.now() + ms);
  }

  /** Moves time forward until wall time reads `wallTime`, waking sleepers in due order. */
  async advanceTo(wallTime: number): Promise<void> {
    const time = wallTime - this.#wallOffset;
    await settle();
    for (;;) {
      const next = this.#sleepers[0];
      if (!next || next.dueAt > time) break;
      this.#sleepers.shift();
      this.#now = Math.max(this.#now, next.dueAt);
      next.resolve();
      await settle();
    }
    this.#now = Math.max(this.#now, time);
    await settle();
  }

  /**
   * Advances to each next due time until `done()` holds or `limitMs` of fake
   * time have passed; returns whether `done()` held.
   */
  async runUntil(done: () => boolean, limitMs = 7 * 24 * 3600_000): Promise<boolean> {
    const end = this.now() + limitMs;
    await settle();
    while (!done()) {
      const next = this.nextDueAt;
      if (next === undefined || next > end) {
        await settle();
        if (done()) return true;
        if (this.nextDueAt === undefined || this.nextDueAt > end) return false;
        continue;
      }
      await this.advanceTo(next);
    }
    return true;
  }
}

/** Lets pending promise callbacks and I/O callbacks run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise<void>((r) => setImmediate(r));
}
