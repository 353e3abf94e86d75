/**
 * The source of time for everything in redeliver. Core code never calls
 * `Date.now()` or `setTimeout` directly: it asks a Clock, so tests can drive
 * time with {@link FakeClock} instead of sleeping.
 */
export interface Clock {
  /**
   * Milliseconds since the Unix epoch: wall time, which may jump when the
   * system clock is set. Used for due times and timestamps that are stored
   * or shared between processes.
   */
  now(): number;
  /**
   * Milliseconds from an arbitrary origin that never jumps and never goes
   * back (`performance.now()`). Used for timeouts and durations in this
   * process, so a wall-clock step neither fires them early nor delays them.
   */
  monotonic(): number;
  /**
   * Resolves after `ms` milliseconds, or rejects with the signal's reason as
   * soon as `signal` aborts. `ms` must be a finite number from 0 to
   * {@link MAX_TIMER_MS}.
   */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/** Node fires a timer longer than 2^31-1 ms after 1 ms; no delay may exceed it. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** An error thrown when a sleep is cut short by its signal. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

/** The real clock: wall time and Node timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  sleep(ms, signal) {
    assertSleepable(ms);
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(abortReason(signal!));
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};

/** Throws a RangeError unless `ms` is a delay a timer can hold. */
export function assertSleepable(ms: number): void {
  if (!Number.isFinite(ms) || ms < 0 || ms > MAX_TIMER_MS) {
    throw new RangeError(`sleep: delay must be a finite number of milliseconds from 0 to ${MAX_TIMER_MS}, got ${ms}`);
  }
}
