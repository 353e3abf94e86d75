import type { RecoverabilityConfig } from '../endpoint/config.js';
import { guardedBackoff, guardedPredicate, UserPartError, type UserPart } from './guard.js';
import { duration } from '../util/option-checks.js';
import type { Random } from '../time/random.js';
import { isInstance } from '../util/thrown.js';
import type { FailureContext } from './context.js';
import { deadLetter, discard, retryLater, retryNow, type Decision } from './decision.js';
import { withinDeadline } from './deadline.js';
import { defaultPolicy, type DefaultPolicySettings } from './default-policy.js';

/** The outcome of one policy run. */
export interface PolicyVerdict {
  readonly decision: Decision;
  /** Set when a user part (policy, predicate, backoff) threw or answered nonsense: the decision is then a dead-letter with the part as reason. */
  readonly fault?: { readonly part: UserPart; readonly error: unknown };
}

/** The recoverability an endpoint runs, as one pure function of a failure. */
export interface RecoverabilityPolicy {
  /** The default policy's settings with the user's predicate and backoff guarded. */
  readonly settings: DefaultPolicySettings;
  decide(failure: FailureContext): PolicyVerdict;
}

/**
 * Builds the policy an endpoint applies to each failure: the default policy,
 * then the custom policy's final say when there is one. A policy,
 * unrecoverable predicate or backoff that throws or answers nonsense gives a
 * dead-letter decision with the failing part as the reason. A retry at or
 * past the message's deadline, or one that would come back at or past it
 * (its delay capped first, and `delayPrecisionMs()` added: how late the
 * transport may bring it back), becomes the `onExpired` decision, whether the
 * default or the custom policy asked for it. Used by the
 * endpoint and by `redeliver plan`, so a plan shows what an endpoint does.
 */
export function recoverabilityPolicy(config: RecoverabilityConfig, random: Random, delayPrecisionMs: () => number = () => 0): RecoverabilityPolicy {
  const settings: DefaultPolicySettings = {
    ...config,
    random,
    isUnrecoverable: guardedPredicate(config.isUnrecoverable),
    delayedBackoff: guardedBackoff(config.delayedBackoff),
  };
  const unbounded = defaultPolicy(settings);
  const bounded = (decision: Decision, context: FailureContext) => withinDeadline(decision, context, config.maxDelayMs, config.onExpired, delayPrecisionMs());
  const base = (context: FailureContext) => bounded(unbounded(context), context);
  const custom = config.policy;
  const policy = custom ? (context: FailureContext) => custom(context, base(context)) : base;
  return {
    settings,
    decide(failure) {
      try {
        return { decision: bounded(plainDecision(policy(failure)), failure) };
      } catch (error) {
        const part = isInstance(error, UserPartError) ? error.part : 'policy';
        return { decision: deadLetter(part), fault: { part, error } };
      }
    },
  };
}

/**
 * What a policy answered, copied into a fresh Decision, so nothing reads the
 * answer again; a TypeError when it is not a Decision (a retry-later delay
 * that is not a duration, a reason that is not a string).
 */
function plainDecision(answer: unknown): Decision {
  const { kind, delayMs, reason } = (answer ?? {}) as { kind?: unknown; delayMs?: unknown; reason?: unknown };
  if (kind === 'retry-now') return retryNow();
  if (kind === 'retry-later') return retryLater(duration('retry-later delay', delayMs));
  if ((kind === 'dead-letter' || kind === 'discard') && typeof reason === 'string') return kind === 'dead-letter' ? deadLetter(reason) : discard(reason);
  throw new TypeError(`the policy returned ${describe(answer)}, not a Decision`);
}

function describe(answer: unknown): string {
  try {
    return JSON.stringify(answer) ?? String(answer);
  } catch {
    return 'a value that cannot be shown';
  }
}
