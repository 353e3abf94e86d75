/**
 * Every default number in one place, each with the document it comes from.
 */
export const DEFAULTS = {
  /** Immediate retries per round (NServiceBus recoverability: 5). */
  immediateRetries: 5,
  /** Delayed retries (NServiceBus recoverability: 3). */
  delayedRetries: 3,
  /** Step of the linear delayed-retry schedule: 10, 20, 30 s (NServiceBus recoverability). */
  delayedRetryStepMs: 10_000,
  /** Longest delay between two delayed retries: 24 h (NServiceBus recoverability). */
  maxDelayMs: 24 * 3600_000,
  /** Error queue name (NServiceBus recoverability: `error`). */
  errorQueue: 'error',
  /** What becomes of a message past its deadline: the error queue, where it stays visible (NServiceBus's TimeToBeReceived drops such a message; `discard` does the same). */
  onExpired: 'error-queue',
  /** Messages handled at once by one endpoint. */
  concurrency: 10,
  /** How long a delivery is leased before another consumer may take it. */
  leaseMs: 30_000,
  /** NSQ requeue: DefaultRequeueDelay 90 s. */
  nsqRequeueDelayMs: 90_000,
  /** NSQ requeue: MaxRequeueDelay 15 min. */
  nsqMaxRequeueDelayMs: 15 * 60_000,
  /** NSQ requeue: MaxAttempts 5 (0 = forever). */
  nsqMaxAttempts: 5,
  /** NSQ consumer backoff: BackoffMultiplier 1 s. */
  consumerBackoffMultiplierMs: 1_000,
  /** NSQ consumer backoff: MaxBackoffDuration 2 min. */
  consumerBackoffMaxMs: 120_000,
  /** Wait between attempts while rate limited (the NServiceBus example's 5 s). */
  rateLimitWaitMs: 5_000,
  /** Retry budget: retries may be 10 % of first attempts (gRPC retry throttling's token ratio is 0.1). */
  retryBudgetRatio: 0.1,
  /** Retry budget: tokens added per second whatever the traffic. */
  retryBudgetFloorPerSecond: 1,
  /** Retry budget: the most tokens saved up. */
  retryBudgetCapacity: 10,
  /** Delay of a retry the budget defers when no delayed-retry delay is left. */
  retryBudgetDeferMs: 1_000,
  /**
   * Tries of a failed settlement after the first, while the delivery is still
   * held, before it is released: with the connection backoff below (1, 1.6,
   * 2.56, 4.1, 6.6 s) about 16 s in all, inside the default 30 s lease.
   */
  settlementRetries: 5,
  /** How long `Endpoint.stop` lets running handlers finish before it releases their deliveries. */
  stopTimeoutMs: 30_000,
  /** How long a copy waits in the broker while another copy with its id is being handled. */
  dedupBusyRetryMs: 1_000,
  /** Send attempts in all for transient errors (RocketMQ producers retry twice by default). */
  sendMaxAttempts: 3,
  /** The most time one awaited send may block, retries included. */
  sendTimeoutMs: 60_000,
  /** Connection and throttling backoff (gRPC connection backoff, RocketMQ producer throttling). */
  connectionBackoff: {
    /** INITIAL_BACKOFF: 1 s. */
    initialMs: 1_000,
    /** MULTIPLIER: 1.6. */
    multiplier: 1.6,
    /** JITTER: ±0.2. */
    jitter: 0.2,
    /** MAX_BACKOFF: 120 s. */
    maxMs: 120_000,
    /** MIN_CONNECT_TIMEOUT: 20 s. */
    minConnectTimeoutMs: 20_000,
  },
  /** nesbus `SbBackoffRetry` (the defaults of its backoff options). */
  nesbus: {
    /** `delay`: the delay unit, 1 s. */
    delayMs: 1_000,
    /** `factor`: 2. */
    factor: 2,
    /** `distortFactor`: 10, a delay multiplied by 0.9 to 1.1. */
    distortFactor: 10,
    /** `retryCount`: 10 retries. */
    retryCount: 10,
    /** `delayType`: exponential. */
    delayType: 'exponential',
  },
} as const;
