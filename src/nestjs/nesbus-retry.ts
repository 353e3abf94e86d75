import { distort } from '../backoff/jitter.js';
import { exponential } from '../backoff/exponential.js';
import { linear } from '../backoff/linear.js';
import type { Backoff } from '../backoff/types.js';
import { checkDelay, checkWholeNumber } from '../backoff/validate.js';
import { DEFAULTS } from '../defaults.js';
import type { RecoverabilityOptions } from '../endpoint/options.js';

/** How nesbus grows the delay from one retry to the next. */
export type NesbusDelayType = 'linear' | 'exponential';

/**
 * The options of nesbus's `SbBackoffRetry`, under their nesbus names, so a
 * nesbus setting carries over unchanged. Every field is optional.
 */
export interface NesbusRetryOptions {
  /** `retryCount`: delayed retries before the message goes to the error queue, a whole number >= 0. Default 10. */
  retryCount?: number;
  /** `delay`: the delay unit in milliseconds, finite and >= 0. Default 1000. */
  delay?: number;
  /** `delayType`: `'linear'` or `'exponential'`. Default `'exponential'`. */
  delayType?: NesbusDelayType;
  /** The same setting as `delayType`, under another name; give one or the other, or both with the same value. Default `delayType`. */
  retryType?: NesbusDelayType;
  /** `factor`: multiplies the delay unit (linear) or is the base of the growth, at least 2 (exponential); finite and >= 0. Default 2. */
  factor?: number;
  /** `distortFactor`: each delay is multiplied by a random value from `1 - distortFactor/100` to `1 + distortFactor/100`; from 0 to 100. Default 10. */
  distortFactor?: number;
}

function delayTypeOf(options: NesbusRetryOptions): NesbusDelayType {
  const { delayType, retryType } = options;
  if (delayType !== undefined && retryType !== undefined && delayType !== retryType) {
    throw new RangeError(`nesbusRetry: delayType '${delayType}' and retryType '${retryType}' disagree; give one of them`);
  }
  const type = delayType ?? retryType ?? DEFAULTS.nesbus.delayType;
  if (type !== 'linear' && type !== 'exponential') {
    throw new RangeError(`nesbusRetry: delayType must be 'linear' or 'exponential', got ${String(type)}`);
  }
  return type;
}

/**
 * nesbus's backoff before retry `n` (1 for the first), without distortion:
 * - linear: `delay × factor × n`;
 * - exponential: `(g^n - 1) × delay / 2` with `g = max(factor, 2)`, built as
 *   `exponential(g × delay / 2, g)` less `delay / 2`.
 */
function nesbusBase(type: NesbusDelayType, delay: number, factor: number): Backoff {
  if (type === 'linear') return linear(delay * factor);
  const growth = Math.max(factor, 2);
  const grown = exponential((growth * delay) / 2, growth);
  return (step) => (grown(step) as number) - delay / 2;
}

/**
 * The recoverability of nesbus's `SbBackoffRetry`: no immediate retries,
 * `retryCount` delayed retries held by the broker, then the error queue.
 * Retry `n` waits
 * - `delay × factor × n` (linear), or
 * - `(max(factor, 2)^n - 1) × delay / 2` (exponential),
 *
 * multiplied by a random value from `1 - distortFactor/100` to
 * `1 + distortFactor/100` (redeliver's `distort`). With every default:
 * 0.5 s, 1.5 s, 3.5 s, 7.5 s ... 511.5 s, each ± 10 %.
 * The 24 h cap between delayed retries still applies (`maxDelayMs`).
 * Spread the result to change other settings:
 * `{ ...nesbusRetry({ retryCount: 3 }), errorQueue: 'orders-error' }`.
 * @param options nesbus's settings, each optional (default `{}`: nesbus's defaults).
 */
export function nesbusRetry(options: NesbusRetryOptions = {}): RecoverabilityOptions {
  const {
    retryCount = DEFAULTS.nesbus.retryCount,
    delay = DEFAULTS.nesbus.delayMs,
    factor = DEFAULTS.nesbus.factor,
    distortFactor = DEFAULTS.nesbus.distortFactor,
  } = options;
  const type = delayTypeOf(options);
  checkWholeNumber('nesbusRetry', 'retryCount', retryCount, 0);
  checkDelay('nesbusRetry', 'delay', delay);
  if (!(typeof factor === 'number' && Number.isFinite(factor) && factor >= 0)) {
    throw new RangeError(`nesbusRetry: factor must be a finite number >= 0, got ${String(factor)}`);
  }
  return {
    immediateRetries: 0,
    delayedRetries: retryCount,
    delayedBackoff: distort(nesbusBase(type, delay, factor), distortFactor),
  };
}
