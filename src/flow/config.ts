import { DEFAULTS } from '../defaults.js';
import { fullJitter } from '../backoff/jitter.js';
import { duration, OptionError, wholeNumber } from '../util/option-checks.js';
import { nsqExponential, type ConsumerBackoffSettings } from './consumer-backoff.js';
import type { FlowControlOptions } from './options.js';
import type { RetryBudgetSettings } from './retry-budget.js';

/** Flow control after validation, defaults filled in; undefined parts are off. */
export interface FlowConfig {
  readonly consumerBackoff: ConsumerBackoffSettings | undefined;
  readonly rateLimit: { readonly threshold: number; readonly waitMs: number } | undefined;
  readonly retryBudget: (RetryBudgetSettings & { readonly deferMs: number | undefined }) | undefined;
}

export function resolveFlowConfig(options: FlowControlOptions = {}): FlowConfig {
  return {
    consumerBackoff: consumerBackoff(options.consumerBackoff),
    rateLimit:
      options.rateLimit === undefined
        ? undefined
        : {
            threshold: wholeNumber('flowControl.rateLimit.consecutiveFailures', options.rateLimit.consecutiveFailures, 1),
            waitMs: duration('flowControl.rateLimit.waitMs', options.rateLimit.waitMs ?? DEFAULTS.rateLimitWaitMs),
          },
    retryBudget: retryBudget(options.retryBudget),
  };
}

function consumerBackoff(options: FlowControlOptions['consumerBackoff']): ConsumerBackoffSettings | undefined {
  if (options === undefined || options === false) return undefined;
  const o = options === true ? {} : options;
  const multiplierMs = duration('flowControl.consumerBackoff.multiplierMs', o.multiplierMs ?? DEFAULTS.consumerBackoffMultiplierMs, 1);
  const maxMs = duration('flowControl.consumerBackoff.maxMs', o.maxMs ?? DEFAULTS.consumerBackoffMaxMs, 1);
  const strategyName = o.strategy ?? 'exponential';
  if (strategyName !== 'exponential' && strategyName !== 'full-jitter') {
    throw new OptionError(`flowControl.consumerBackoff.strategy must be 'exponential' or 'full-jitter', got ${JSON.stringify(strategyName)}`);
  }
  const resume = o.resume ?? 'on-success';
  if (resume !== 'on-success' && resume !== 'at-zero') {
    throw new OptionError(`flowControl.consumerBackoff.resume must be 'on-success' or 'at-zero', got ${JSON.stringify(resume)}`);
  }
  const baseDelay = nsqExponential(multiplierMs);
  const exponential = ({ attempt }: { attempt: number }) => baseDelay(attempt);
  return { baseDelay, maxMs, resume, strategy: strategyName === 'exponential' ? exponential : fullJitter(exponential) };
}

function retryBudget(options: FlowControlOptions['retryBudget']): FlowConfig['retryBudget'] {
  if (options === undefined || options === false) return undefined;
  const o = options === true ? {} : options;
  const ratio = o.ratio ?? DEFAULTS.retryBudgetRatio;
  if (typeof ratio !== 'number' || !Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
    throw new OptionError(`flowControl.retryBudget.ratio must be a number from 0 to 1, got ${String(ratio)}`);
  }
  const floorPerSecond = o.floorPerSecond ?? DEFAULTS.retryBudgetFloorPerSecond;
  if (typeof floorPerSecond !== 'number' || !Number.isFinite(floorPerSecond) || floorPerSecond < 0) {
    throw new OptionError(`flowControl.retryBudget.floorPerSecond must be a finite number >= 0, got ${String(floorPerSecond)}`);
  }
  return {
    ratio,
    floorPerSecond,
    capacity: wholeNumber('flowControl.retryBudget.capacity', o.capacity ?? DEFAULTS.retryBudgetCapacity, 1),
    deferMs: o.deferMs === undefined ? undefined : duration('flowControl.retryBudget.deferMs', o.deferMs),
  };
}
