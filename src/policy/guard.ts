import type { Backoff } from '../backoff/types.js';
import { summarizeError } from '../headers/failure.js';
import type { Logger } from '../logger.js';
import type { UnrecoverablePredicate } from './classify.js';
import type { FailureReason } from './decision.js';

/**
 * A user-supplied part of the message path other than the handler. Each name
 * is also the reason recorded when that part's failure sends a message to
 * the error queue.
 */
export type UserPart = Extract<FailureReason, 'unrecoverable-predicate' | 'backoff' | 'policy'>;

/**
 * A user-supplied part threw or answered nonsense. It will do so again for
 * the same message, so the message goes to the error queue with `part` as
 * its reason instead of being released to fail again.
 */
export class UserPartError extends Error {
  override readonly name = 'UserPartError';

  constructor(
    readonly part: UserPart,
    cause: unknown,
  ) {
    const summary = summarizeError(cause);
    super(`the ${part} failed: ${summary.name}: ${summary.message}`, { cause });
  }
}

/** The unrecoverable predicate, its throw marked as the predicate's. */
export function guardedPredicate(predicate: UnrecoverablePredicate): UnrecoverablePredicate {
  return (error) => {
    try {
      return predicate(error);
    } catch (cause) {
      throw new UserPartError('unrecoverable-predicate', cause);
    }
  };
}

/** The delayed-retry backoff, its throw or a result that is not a finite number (nor undefined) marked as the backoff's. */
export function guardedBackoff(backoff: Backoff): Backoff {
  return (step) => {
    let delay: unknown;
    try {
      delay = backoff(step);
    } catch (cause) {
      throw new UserPartError('backoff', cause);
    }
    if (delay === undefined || (typeof delay === 'number' && Number.isFinite(delay))) return delay;
    throw new UserPartError('backoff', new TypeError(`the delayed backoff returned ${String(delay)}, not a finite number of milliseconds or undefined`));
  };
}

/** A logger whose throws are swallowed: a failing logger cannot disturb settlement. */
export function guardedLogger(logger: Logger): Logger {
  const at =
    (level: 'info' | 'warn' | 'error') =>
    (fields: object, message: string): void => {
      try {
        logger[level](fields, message);
      } catch {
        // Nothing left to report it to.
      }
    };
  return { info: at('info'), warn: at('warn'), error: at('error') };
}
