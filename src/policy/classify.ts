import { DeserializationError, isUnrecoverableError } from './errors.js';
import { isInstance } from '../util/thrown.js';

/** A class of errors; its subclasses match too. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ErrorClass = abstract new (...args: any[]) => unknown;

/** Decides whether an error skips every retry. */
export type UnrecoverablePredicate = (error: unknown) => boolean;

/**
 * An error is unrecoverable when it is an {@link UnrecoverableError} or a
 * {@link DeserializationError}, an instance of one of `classes` (any
 * subclass included, as the whole inheritance tree is meant), or when
 * `predicate` says so. A value that throws when asked its class (a Proxy
 * whose traps throw) is an instance of none.
 */
export function unrecoverableClassifier(classes: readonly ErrorClass[], predicate?: UnrecoverablePredicate): UnrecoverablePredicate {
  return (error) =>
    isUnrecoverableError(error) ||
    isInstance(error, DeserializationError) ||
    classes.some((c) => isInstance(error, c)) ||
    (predicate?.(error) ?? false);
}
