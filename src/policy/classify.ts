import { DeserializationError, isUnrecoverableError } from './errors.js';

/** A class of errors; its subclasses match too. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ErrorClass = abstract new (...args: any[]) => unknown;

/** Decides whether an error skips every retry. */
export type UnrecoverablePredicate = (error: unknown) => boolean;

/**
 * An error is unrecoverable when it is an {@link UnrecoverableError} or a
 * {@link DeserializationError}, an instance of one of `classes` (any
 * subclass included, as the whole inheritance tree is meant), or when
 * `predicate` says so.
 */
export function unrecoverableClassifier(classes: readonly ErrorClass[], predicate?: UnrecoverablePredicate): UnrecoverablePredicate {
  return (error) =>
    isUnrecoverableError(error) ||
    error instanceof DeserializationError ||
    classes.some((c) => error instanceof c) ||
    (predicate?.(error) ?? false);
}
