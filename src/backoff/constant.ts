import type { Backoff } from './types.js';
import { checkDelay } from './validate.js';

/**
 * The same delay before every retry: `delay(n) = delayMs`. Never stops on its
 * own; bound it with {@link stopAfterAttempts} or {@link stopAfterElapsed}.
 * @param delayMs the delay in milliseconds, finite and >= 0 (required, no default).
 */
export function constant(delayMs: number): Backoff {
  checkDelay('constant', 'delayMs', delayMs);
  return () => delayMs;
}
