/**
 * Marked errors. Each carries a brand symbol registered with `Symbol.for`,
 * so an error thrown by another copy of redeliver (two versions in one
 * dependency tree) still classifies: checks use the brand, not `instanceof`.
 * A value whose properties throw when read carries no brand.
 */

import { readProperty } from '../util/thrown.js';

const UNRECOVERABLE = Symbol.for('redeliver.unrecoverable');
const RETRY_LATER = Symbol.for('redeliver.retryLater');

/** Throw from a handler to skip every retry: the message goes straight to the error queue. */
export class UnrecoverableError extends Error {
  readonly [UNRECOVERABLE] = true;
  override readonly name: string = 'UnrecoverableError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * Throw from a handler to ask for a delayed retry after exactly `delayMs`
 * (still capped by the endpoint's maximum delay). It counts as a delayed
 * retry; when the delayed retries are spent, the message goes to the error
 * queue.
 */
export class RetryLaterError extends Error {
  readonly [RETRY_LATER] = true;
  override readonly name: string = 'RetryLaterError';
  constructor(
    /** The delay before the message is tried again, in milliseconds. */
    readonly delayMs: number,
    message = `retry requested after ${delayMs} ms`,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Thrown (and recorded) when a message body cannot be decoded; it skips every retry. */
export class DeserializationError extends Error {
  override readonly name: string = 'DeserializationError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** True for an {@link UnrecoverableError} from any copy of redeliver. */
export function isUnrecoverableError(error: unknown): boolean {
  return hasBrand(error, UNRECOVERABLE);
}

/** The requested delay when `error` is a {@link RetryLaterError} from any copy of redeliver. */
export function retryLaterDelay(error: unknown): number | undefined {
  if (!hasBrand(error, RETRY_LATER)) return undefined;
  const delay = readProperty(error, 'delayMs');
  return typeof delay === 'number' ? delay : undefined;
}

function hasBrand(error: unknown, brand: symbol): boolean {
  return typeof error === 'object' && readProperty(error, brand) === true;
}
