/**
 * The argument checks every transport makes the same way, so a bad call
 * fails with the same error whichever broker is behind it.
 */
import type { DeliveryListener, Headers } from './types.js';

/** Throws a TypeError unless `queue` is a non-empty string; `what` names the call. */
export function checkQueue(queue: unknown, what: string): asserts queue is string {
  if (typeof queue !== 'string' || queue.length === 0) throw new TypeError(`${what}: queue must be a non-empty string`);
}

/** Throws a TypeError unless `errorQueue`, the argument of `Delivery.deadLetter`, is a non-empty string. */
export function checkErrorQueue(errorQueue: unknown): asserts errorQueue is string {
  if (typeof errorQueue !== 'string' || errorQueue.length === 0) throw new TypeError('deadLetter: errorQueue must be a non-empty string');
}

/** Throws a RangeError unless `prefetch` is a positive integer; `what` names the call. Returns it. */
export function checkPrefetch(prefetch: unknown, what: string): number {
  if (typeof prefetch !== 'number' || !Number.isInteger(prefetch) || prefetch < 1) {
    throw new RangeError(`${what}: prefetch must be a positive integer, got ${String(prefetch)}`);
  }
  return prefetch;
}

/** Throws a TypeError unless `listener` is a function. */
export function checkListener(listener: unknown): asserts listener is DeliveryListener {
  if (typeof listener !== 'function') throw new TypeError('consume: listener must be a function');
}

/**
 * The checks at the start of every `consume`, in this order: the queue, that
 * the transport is open (`checkOpen` throws when it is closed), the listener
 * and the prefetch. Returns the prefetch.
 */
export function checkConsume(queue: string, listener: unknown, options: { readonly prefetch?: unknown } | undefined, checkOpen: () => void): number {
  checkQueue(queue, 'consume');
  checkOpen();
  checkListener(listener);
  return checkPrefetch(options?.prefetch, 'consume');
}

/** Throws a TypeError unless `headers` is an object; `what` names the call and the argument (`retryLater: headers`). */
export function checkHeadersObject(headers: unknown, what: string): asserts headers is object {
  if (typeof headers !== 'object' || headers === null) throw new TypeError(`${what} must be an object of strings`);
}

/**
 * Throws a TypeError unless `headers` is an object of strings; `call` names
 * the call, `what` the argument with it (default `<call>: headers`).
 */
export function checkHeaders(headers: unknown, call: string, what = `${call}: headers`): asserts headers is Headers {
  checkHeadersObject(headers, what);
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') throw new TypeError(`${call}: header ${name} must be a string, got ${typeof value}`);
  }
}
