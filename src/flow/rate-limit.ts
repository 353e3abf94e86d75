/**
 * Automatic rate limiting (NServiceBus): after `threshold` consecutive failed
 * attempts the endpoint handles one message at a time, waiting between
 * attempts, until one succeeds. A pure state machine.
 */
export interface RateLimitState {
  readonly consecutiveFailures: number;
  readonly limited: boolean;
}

export const INITIAL_RATE_LIMIT: RateLimitState = { consecutiveFailures: 0, limited: false };

/** After a failed attempt. `started` is true on the failure that switches rate limiting on. */
export function rateLimitOnFailure(threshold: number, state: RateLimitState): { state: RateLimitState; started: boolean } {
  const consecutiveFailures = state.consecutiveFailures + 1;
  const limited = state.limited || consecutiveFailures >= threshold;
  return { state: { consecutiveFailures, limited }, started: limited && !state.limited };
}

/** After a success. `ended` is true when it switches rate limiting off. */
export function rateLimitOnSuccess(state: RateLimitState): { state: RateLimitState; ended: boolean } {
  return { state: INITIAL_RATE_LIMIT, ended: state.limited };
}
