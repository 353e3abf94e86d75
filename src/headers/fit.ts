import { HEADER, LIMITS } from './names.js';
import { truncate } from './retry-state.js';
import type { Headers, TransportLimits } from '../transport/types.js';

/** The part of a transport's limits that bounds headers. */
export type HeaderBudget = Pick<TransportLimits, 'maxHeaderBytes' | 'headerBytes'>;

/**
 * A retry or error-queue copy's headers cut to the transport's header
 * budget, measured after the transport's encoding: the failure history
 * loses its oldest entries first, then the stack is cut from its end.
 * Headers that fit, or any headers when the transport declares no budget,
 * come back as they are; headers that cannot fit (the user's own are too
 * large) come back cut as far as these two go.
 */
export function fitHeaders(headers: Headers, budget: HeaderBudget): Headers {
  const { maxHeaderBytes: max, headerBytes: measure } = budget;
  if (max === undefined || measure === undefined) return headers;
  const fits = (candidate: Headers) => measure(candidate) <= max;
  if (fits(headers)) return headers;
  const out = { ...headers };
  let history = historyEntries(out[HEADER.history]);
  while (HEADER.history in out && !fits(out)) {
    history = history.slice(1);
    if (history.length > 0) out[HEADER.history] = JSON.stringify(history);
    else delete out[HEADER.history];
  }
  const stack = out[HEADER.failureStack];
  if (stack !== undefined && !fits(out)) cutStack(out, stack, fits);
  return out;
}

/**
 * The error-queue copy sent when the broker refused the full one: the
 * retry state, the failure facts with the message cut to
 * {@link LIMITS.historyMessageChars}, and the user's headers; no history,
 * stack or validation issues.
 */
export function minimalDeadLetterHeaders(headers: Readonly<Headers>): Headers {
  const out = { ...headers };
  delete out[HEADER.history];
  delete out[HEADER.failureStack];
  delete out[HEADER.validationIssues];
  const message = out[HEADER.failureMessage];
  if (message !== undefined) out[HEADER.failureMessage] = truncate(message, LIMITS.historyMessageChars);
  return out;
}

/** Sets the longest start of `stack` that fits (found by bisection), or removes the header when none does. */
function cutStack(out: Headers, stack: string, fits: (candidate: Headers) => boolean): void {
  let fitting = 0;
  let tooLong = stack.length;
  while (tooLong - fitting > 1) {
    const middle = Math.floor((fitting + tooLong) / 2);
    out[HEADER.failureStack] = truncate(stack, middle);
    if (fits(out)) fitting = middle;
    else tooLong = middle;
  }
  if (fitting > 1) out[HEADER.failureStack] = truncate(stack, fitting);
  else delete out[HEADER.failureStack];
}

function historyEntries(json: string | undefined): unknown[] {
  if (json === undefined) return [];
  try {
    const parsed: unknown = JSON.parse(json);
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}
