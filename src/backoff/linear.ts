import { DEFAULTS } from '../defaults.js';
import type { Backoff } from './types.js';
import { checkDelay, checkMax } from './validate.js';

/**
 * A delay that grows by the same step each retry: `delay(n) = min(n × stepMs, maxMs)`.
 * @param stepMs the delay of the first retry and the increment after it, in
 *   milliseconds, finite and >= 0 (required, no default).
 * @param maxMs the largest delay returned (default Infinity: no cap).
 */
export function linear(stepMs: number, maxMs = Infinity): Backoff {
  checkDelay('linear', 'stepMs', stepMs);
  checkMax('linear', 'maxMs', maxMs);
  return ({ attempt }) => Math.min(attempt * stepMs, maxMs);
}

/**
 * NSQ's automatic requeue delay, `min(attempts × DefaultRequeueDelay,
 * MaxRequeueDelay)`: `delay(n) = min(n × 90 s, 15 min)`, i.e.
 * `linear(90_000, 900_000)`, giving 90 s, 180 s, 270 s, 360 s, ... up to 900 s.
 * NSQ gives up once `MaxAttempts` (default 5) deliveries have failed, which is
 * four requeues: `stopAfterAttempts(nsqRequeue(), 4)`. No parameters.
 */
export function nsqRequeue(): Backoff {
  return linear(DEFAULTS.nsqRequeueDelayMs, DEFAULTS.nsqMaxRequeueDelayMs);
}

/**
 * NServiceBus's delayed retries: `delay(n) = n × 10 s`, i.e. `linear(10_000)`,
 * giving 10 s, 20 s, 30 s. NServiceBus makes 3 delayed retries by default:
 * `stopAfterAttempts(delayedRetries(), 3)`. No parameters.
 */
export function delayedRetries(): Backoff {
  return linear(DEFAULTS.delayedRetryStepMs);
}
