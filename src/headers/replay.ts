import { HEADER } from './names.js';
import { userHeaders } from './retry-state.js';
import type { Headers } from '../transport/types.js';

/**
 * The headers of a message sent back from the error queue: the user's own
 * headers, a fresh retry state, and how often it was replayed.
 */
export function replayHeaders(headers: Readonly<Headers>, at: Date): Headers {
  const previous = Number(Object.prototype.hasOwnProperty.call(headers, HEADER.replayCount) ? headers[HEADER.replayCount] : 0);
  const out = userHeaders(headers);
  out[HEADER.replayCount] = String(Number.isSafeInteger(previous) && previous >= 0 ? previous + 1 : 1);
  out[HEADER.replayedAt] = at.toISOString();
  return out;
}

/** The queue a dead-lettered message failed on, from its headers. */
export function failureQueueOf(headers: Readonly<Headers>): string | undefined {
  if (!Object.prototype.hasOwnProperty.call(headers, HEADER.failureQueue)) return undefined;
  const queue = headers[HEADER.failureQueue];
  return typeof queue === 'string' && queue !== '' ? queue : undefined;
}
