import type { Clock } from '../../time/clock.js';
import { DatabaseBusyError } from './errors.js';

/**
 * The longest one statement waits synchronously for another connection's
 * lock (SQLite's busy timeout), in milliseconds. better-sqlite3 waits on the
 * event loop's thread, so this is kept short; longer waits are asynchronous
 * retries up to the transport's `busyTimeoutMs`.
 */
export const SYNC_BUSY_WAIT_MS = 10;

/** How long to wait before trying a locked database again: doubling from the first, up to the last. */
const RETRY_FIRST_MS = 5;
const RETRY_MAX_MS = 50;

/** The wait before try number `tries + 1` of a write that found the database locked `tries` times. */
export function busyRetryDelay(tries: number): number {
  return Math.min(RETRY_FIRST_MS * 2 ** tries, RETRY_MAX_MS);
}

/** Whether a statement failed because another connection held a lock it needed. */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/**
 * Runs `write` (one short transaction), trying again after a short sleep
 * while another connection holds the lock, for up to `busyTimeoutMs`; then
 * rejects with {@link DatabaseBusyError}. The event loop is never blocked for
 * longer than {@link SYNC_BUSY_WAIT_MS} at a time.
 */
export async function writeWhenFree<T>(clock: Clock, busyTimeoutMs: number, write: () => T): Promise<T> {
  const start = clock.now();
  for (let tries = 0; ; tries++) {
    try {
      return write();
    } catch (error) {
      if (!isBusy(error)) throw error;
      if (clock.now() - start >= busyTimeoutMs) throw new DatabaseBusyError(busyTimeoutMs, error);
      await clock.sleep(busyRetryDelay(tries));
    }
  }
}

/**
 * Lets other callbacks (this process's group commits among them) run
 * between the chunks of a long write, so no single transaction holds the
 * write lock for long.
 */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
