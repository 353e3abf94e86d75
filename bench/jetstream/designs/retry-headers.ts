/**
 * The retry state redeliver writes on a message's first delayed retry: its
 * counts, the delay, and the failure in the history. Both designs carry
 * exactly this, so they move the same bytes.
 */
import { withRetryState } from '../../../src/headers/retry-state.js';
import type { Headers } from '../../../src/transport/types.js';

export function firstDelayedRetryHeaders(delayMs: number, failedAt: number): Headers {
  return withRetryState(
    {},
    {
      attempts: 1,
      delayedAttempts: 1,
      lastDelayMs: delayMs,
      delayedElapsedMs: delayMs,
      history: [{ at: new Date(failedAt).toISOString(), errorName: 'Error', message: 'transient failure', immediateAttempt: 1, delayedAttempt: 0 }],
    },
  );
}
