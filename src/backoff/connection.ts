import { DEFAULTS } from '../defaults.js';
import type { Backoff } from './types.js';
import { exponentialDelay } from './exponential.js';
import { checkBetween, checkDelay, checkMax, checkMultiplier } from './validate.js';

/** Options of {@link connectionBackoff}; every field is optional. */
export interface ConnectionBackoffOptions {
  /** INITIAL_BACKOFF: the delay of the first retry in ms, finite and >= 0. Default 1000. */
  readonly initialMs?: number;
  /** MULTIPLIER: the growth of the base delay per retry, finite and >= 1. Default 1.6. */
  readonly multiplier?: number;
  /** JITTER: the spread around the base delay as a fraction of it, from 0 to 1. Default 0.2. */
  readonly jitter?: number;
  /** MAX_BACKOFF: the cap on the base delay in ms (the jitter may exceed it by `jitter × maxMs`). Default 120 000. */
  readonly maxMs?: number;
}

/**
 * MIN_CONNECT_TIMEOUT: the least time one connection or send attempt is given
 * before it counts as failed, 20 s, however short the current backoff is.
 */
export const MIN_CONNECT_TIMEOUT_MS = DEFAULTS.connectionBackoff.minConnectTimeoutMs;

/**
 * The connection backoff of gRPC, which Apache RocketMQ producers use when the
 * broker throttles them (`530 TOO_MANY_REQUESTS`):
 * - `delay(1) = initialMs`, without jitter;
 * - `delay(n) = b + U(-jitter × b, jitter × b)` for n ≥ 2, where
 *   `b = min(initialMs × multiplier^(n-1), maxMs)`.
 *
 * With the defaults: 1 s, then 1.6 s ± 20 %, 2.56 s ± 20 %, ..., the base
 * capped at 120 s. Never stops on its own.
 * @param options the settings below, each optional (default `{}`: all defaults).
 * @param options.initialMs INITIAL_BACKOFF in milliseconds (default 1000).
 * @param options.multiplier MULTIPLIER (default 1.6).
 * @param options.jitter JITTER, from 0 to 1 (default 0.2).
 * @param options.maxMs MAX_BACKOFF in milliseconds; Infinity allowed (default 120 000).
 */
export function connectionBackoff({
  initialMs = DEFAULTS.connectionBackoff.initialMs,
  multiplier = DEFAULTS.connectionBackoff.multiplier,
  jitter = DEFAULTS.connectionBackoff.jitter,
  maxMs = DEFAULTS.connectionBackoff.maxMs,
}: ConnectionBackoffOptions = {}): Backoff {
  checkDelay('connectionBackoff', 'initialMs', initialMs);
  checkMultiplier('connectionBackoff', 'multiplier', multiplier);
  checkBetween('connectionBackoff', 'jitter', jitter, 0, 1);
  checkMax('connectionBackoff', 'maxMs', maxMs);
  return ({ attempt, random }) => {
    if (attempt === 1) return initialMs;
    const b = exponentialDelay(attempt, initialMs, multiplier, maxMs);
    return b + (2 * random() - 1) * jitter * b;
  };
}
