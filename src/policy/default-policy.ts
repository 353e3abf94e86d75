import type { Backoff } from '../backoff/types.js';
import type { Random } from '../time/random.js';
import type { FailureContext } from './context.js';
import { deadLetter, retryLater, retryNow, type Decision } from './decision.js';
import { retryLaterDelay } from './errors.js';
import type { UnrecoverablePredicate } from './classify.js';

/** The settings the default policy is built from. */
export interface DefaultPolicySettings {
  readonly immediateRetries: number;
  readonly delayedRetries: number;
  readonly delayedBackoff: Backoff;
  readonly maxDelayMs: number;
  readonly isUnrecoverable: UnrecoverablePredicate;
  readonly random: Random;
}

/**
 * The default recoverability policy, a pure function of the failure:
 * unrecoverable errors go to the error queue; otherwise retry at once while
 * immediate retries remain in this round, then retry later while delayed
 * retries remain, then go to the error queue. A {@link RetryLaterError}
 * skips the immediate round and asks for its own delay. Total attempts:
 * (immediateRetries + 1) × (delayedRetries + 1).
 */
export function defaultPolicy(settings: DefaultPolicySettings): (context: FailureContext) => Decision {
  return (context) => {
    if (settings.isUnrecoverable(context.error)) return deadLetter('unrecoverable');
    const requested = retryLaterDelay(context.error);
    if (requested !== undefined) {
      if (context.delayedAttempt >= settings.delayedRetries) return deadLetter('retries-exhausted');
      return retryLater(Math.min(requested, settings.maxDelayMs));
    }
    if (context.immediateAttempt <= settings.immediateRetries) return retryNow();
    const delay = nextDelayedRetry(settings, context);
    return delay === undefined ? deadLetter('retries-exhausted') : retryLater(delay);
  };
}

/** The delay of the next delayed retry, capped, or undefined when none remains. */
export function nextDelayedRetry(
  settings: Pick<DefaultPolicySettings, 'delayedRetries' | 'delayedBackoff' | 'maxDelayMs' | 'random'>,
  context: Pick<FailureContext, 'delayedAttempt' | 'lastDelayMs' | 'delayedElapsedMs'>,
): number | undefined {
  if (context.delayedAttempt >= settings.delayedRetries) return undefined;
  const delay = settings.delayedBackoff({
    attempt: context.delayedAttempt + 1,
    previousDelayMs: context.lastDelayMs,
    elapsedMs: context.delayedElapsedMs,
    random: settings.random,
  });
  return delay === undefined ? undefined : Math.min(Math.max(0, delay), settings.maxDelayMs);
}
