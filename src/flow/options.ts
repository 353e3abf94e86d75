/** NSQ consumer backoff: the whole consumer stops taking messages after a failure. */
export interface ConsumerBackoffOptions {
  /** `exponential`: multiplier × 2^counter; `full-jitter`: U(0, exponential). Default `exponential` (NSQ). */
  strategy?: 'exponential' | 'full-jitter';
  /** NSQ BackoffMultiplier. Default 1 000 ms. */
  multiplierMs?: number;
  /** NSQ MaxBackoffDuration. Default 120 000 ms. */
  maxMs?: number;
  /**
   * When the consumer returns to full speed after a backoff.
   * - `on-success` (the seed's NsqSharp clients): the first successful probe
   *   returns to full speed; each success decrements the counter, and a
   *   failure before it is back at 0 backs off from where it stands.
   * - `at-zero` (go-nsq): each successful probe decrements the counter and,
   *   while it is above 0, backs off again for the strategy's delay at the
   *   new counter before the next probe; full speed only at 0.
   * Default `on-success`.
   */
  resume?: 'on-success' | 'at-zero';
}

/** Automatic rate limiting after consecutive failures (NServiceBus). */
export interface RateLimitOptions {
  /** Consecutive failed attempts that switch rate limiting on. Required: no default that could surprise. */
  consecutiveFailures: number;
  /** Wait after each failed attempt while rate limited. Default 5 000 ms (the NServiceBus example). */
  waitMs?: number;
}

/**
 * A retry budget: immediate retries are allowed up to a share of recent first
 * attempts. When it is spent, a message that would be retried at once is
 * handed back to the broker to come back later instead. Per endpoint
 * instance (one process).
 */
export interface RetryBudgetOptions {
  /** Tokens each first attempt deposits: the share of traffic that may be retried. Default 0.1 (10 %). */
  ratio?: number;
  /** Tokens deposited per second whatever the traffic, so a quiet endpoint can still retry. Default 1. */
  floorPerSecond?: number;
  /** The most tokens saved up. Default 10. */
  capacity?: number;
  /**
   * Delay of a retry the budget defers; at most the transport's
   * `limits.maxDelayMs`, checked when the endpoint is built. Default: the
   * next delayed-retry delay, or 1 000 ms when none is left.
   */
  deferMs?: number;
}

/** Flow control of an endpoint. Every part is off unless configured. */
export interface FlowControlOptions {
  /** NSQ consumer backoff. Default off; `true` turns it on with NSQ's defaults. */
  consumerBackoff?: ConsumerBackoffOptions | boolean;
  /** Automatic rate limiting. Default off. */
  rateLimit?: RateLimitOptions;
  /** Retry budget. Default off; `true` turns it on with the defaults. */
  retryBudget?: RetryBudgetOptions | boolean;
}
