/**
 * A retry budget: immediate retries may use up to `ratio` of the recent
 * first attempts, plus a small floor per second, as a token bucket (in the
 * spirit of gRPC retry throttling and the AWS SDK). Each first attempt
 * deposits `ratio` tokens, time deposits `floorPerSecond`, each retry spends
 * one token, and the bucket holds at most `capacity`. A pure value: time is
 * passed in.
 */
export interface RetryBudgetSettings {
  readonly ratio: number;
  readonly floorPerSecond: number;
  readonly capacity: number;
}

export interface RetryBudgetState {
  readonly tokens: number;
  /** When `tokens` was last brought up to date, ms. */
  readonly at: number;
}

/** A full bucket at time `now`. */
export function fullBudget(settings: RetryBudgetSettings, now: number): RetryBudgetState {
  return { tokens: settings.capacity, at: now };
}

/** The bucket with the floor's deposits up to `now`. */
export function refill(settings: RetryBudgetSettings, state: RetryBudgetState, now: number): RetryBudgetState {
  const elapsed = Math.max(0, now - state.at);
  return { tokens: Math.min(settings.capacity, state.tokens + (elapsed / 1000) * settings.floorPerSecond), at: Math.max(now, state.at) };
}

/** A first attempt deposits `ratio`. */
export function depositFirstAttempt(settings: RetryBudgetSettings, state: RetryBudgetState, now: number): RetryBudgetState {
  const current = refill(settings, state, now);
  return { ...current, tokens: Math.min(settings.capacity, current.tokens + settings.ratio) };
}

/** A retry that succeeded gives its token back, so retries flow again as soon as the downstream heals. */
export function refundRetry(settings: RetryBudgetSettings, state: RetryBudgetState, now: number): RetryBudgetState {
  const current = refill(settings, state, now);
  return { ...current, tokens: Math.min(settings.capacity, current.tokens + 1) };
}

/** Spends one token for a retry if there is one. */
export function trySpend(settings: RetryBudgetSettings, state: RetryBudgetState, now: number): { state: RetryBudgetState; allowed: boolean } {
  const current = refill(settings, state, now);
  if (current.tokens < 1) return { state: current, allowed: false };
  return { state: { ...current, tokens: current.tokens - 1 }, allowed: true };
}
