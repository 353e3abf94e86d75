export type { Backoff, BackoffStep } from './types.js';
export { constant } from './constant.js';
export { linear, nsqRequeue, delayedRetries } from './linear.js';
export { exponential } from './exponential.js';
export { fullJitter, equalJitter, distort, decorrelatedJitter } from './jitter.js';
export { connectionBackoff, MIN_CONNECT_TIMEOUT_MS, type ConnectionBackoffOptions } from './connection.js';
export { fromList } from './list.js';
export { capDelay, stopAfterAttempts, stopAfterElapsed } from './combinators.js';
export { delaysOf } from './schedule.js';
