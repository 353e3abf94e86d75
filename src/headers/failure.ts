import { HEADER, LIMITS } from './names.js';
import { truncate, userHeaders, withRetryState, type RetryState } from './retry-state.js';
import { validationIssuesHeader } from './validation-issues.js';
import type { ValidationIssue } from '../schema/validate.js';
import type { Headers } from '../transport/types.js';
import { readProperty, THREW } from '../util/thrown.js';

/** The parts of a thrown value that are recorded. */
export interface ErrorSummary {
  readonly name: string;
  readonly message: string;
  readonly stack: string;
}

/** What a summary says in place of a part that threw when read. */
const THROWING_GETTER = '[object with a throwing getter]';

/**
 * Describes anything a handler may throw, bounded in size and well formed.
 * Never throws: a part whose getter throws, or a value that throws when
 * asked what it is (a Proxy whose traps throw), is described by
 * {@link THROWING_GETTER} instead of being converted.
 */
export function summarizeError(error: unknown): ErrorSummary {
  const like = errorLike(error);
  if (like === THREW) return { name: 'NonError', message: THROWING_GETTER, stack: '' };
  if (!like) return { name: 'NonError', message: bounded(safeString(error), LIMITS.messageChars), stack: '' };
  const name = readProperty(error, 'name');
  const message = readProperty(error, 'message');
  const stack = readProperty(error, 'stack');
  return {
    name: bounded(typeof name === 'string' && name ? name : 'Error', 200),
    message: bounded(message === THREW ? THROWING_GETTER : safeString(message), LIMITS.messageChars),
    stack: bounded(typeof stack === 'string' ? stack : '', LIMITS.stackChars),
  };
}

/** Whether `error` is an Error or an object with a message; {@link THREW} when asking throws. */
function errorLike(error: unknown): boolean | typeof THREW {
  if (typeof error !== 'object' || error === null) return false;
  try {
    return error instanceof Error || 'message' in error;
  } catch {
    return THREW;
  }
}

/** `text` cut to `max` characters, with every lone surrogate replaced, so any transport can encode it. */
function bounded(text: string, max: number): string {
  return truncate(text, max).replace(LONE_SURROGATE, '\uFFFD');
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** What the error-queue copy records about the final failure. */
export interface DeadLetterFacts {
  readonly reason: string;
  readonly error: ErrorSummary;
  readonly at: Date;
  readonly queue: string;
  readonly endpoint: string;
  readonly host: string;
  readonly immediateAttempts: number;
  readonly state: RetryState;
  /** Why the endpoint's schema refused the body, when it did. */
  readonly validationIssues?: readonly ValidationIssue[];
}

/**
 * The headers of the error-queue copy: the retry state and the failure, then
 * the replay count of a message sent back before (so the error store sees it
 * failed again), then the user's headers. The stack, the largest and least
 * needed, comes last of redeliver's, so a transport's header budget would drop it first.
 */
export function deadLetterHeaders(headers: Readonly<Headers>, facts: DeadLetterFacts): Headers {
  const out = withRetryState({}, facts.state);
  out[HEADER.failureReason] = truncate(facts.reason, 200);
  out[HEADER.failureErrorName] = facts.error.name;
  out[HEADER.failureMessage] = facts.error.message;
  out[HEADER.failureTime] = facts.at.toISOString();
  out[HEADER.failureQueue] = facts.queue;
  out[HEADER.failureEndpoint] = facts.endpoint;
  out[HEADER.failureHost] = facts.host;
  out[HEADER.failureImmediateAttempts] = String(facts.immediateAttempts);
  out[HEADER.failureDelayedAttempts] = String(facts.state.delayedAttempts);
  out[HEADER.failureAttempts] = String(facts.state.attempts);
  // A message that was sent back before keeps its replay count, so the error store sees it failed again.
  for (const name of [HEADER.replayCount, HEADER.replayedAt]) {
    if (Object.prototype.hasOwnProperty.call(headers, name) && typeof headers[name] === 'string') out[name] = headers[name]!;
  }
  if (facts.validationIssues) out[HEADER.validationIssues] = validationIssuesHeader(facts.validationIssues);
  if (facts.error.stack) out[HEADER.failureStack] = facts.error.stack;
  return Object.assign(out, userHeaders(headers));
}

/** `value` as text: a primitive converted, an object by its own conversion, or a marker when that throws. */
function safeString(value: unknown): string {
  if (typeof value === 'string') return value;
  try {
    return String(value);
  } catch {
    return '[unprintable]';
  }
}

/** The failure facts of an error-queue copy, each '' when its header is missing (the replay count 0). */
export interface FailureFacts {
  readonly reason: string;
  readonly errorName: string;
  readonly message: string;
  readonly stack: string;
  /** When it moved to the error queue, ISO 8601. */
  readonly at: string;
  /** The queue it failed on. */
  readonly queue: string;
  readonly endpoint: string;
  readonly host: string;
  readonly attempts: string;
  readonly immediateAttempts: string;
  readonly delayedAttempts: string;
  /** How often the message was sent back from an error queue (`redeliver-replay-count`): 0 when never. */
  readonly replayCount: number;
}

/** Reads the failure facts from untrusted headers: only own string values count. */
export function readFailureFacts(headers: Readonly<Headers>): FailureFacts {
  const get = (name: string) => (Object.prototype.hasOwnProperty.call(headers, name) && typeof headers[name] === 'string' ? headers[name]! : '');
  return {
    reason: get(HEADER.failureReason),
    errorName: get(HEADER.failureErrorName),
    message: get(HEADER.failureMessage),
    stack: get(HEADER.failureStack),
    at: get(HEADER.failureTime),
    queue: get(HEADER.failureQueue),
    endpoint: get(HEADER.failureEndpoint),
    host: get(HEADER.failureHost),
    attempts: get(HEADER.failureAttempts),
    immediateAttempts: get(HEADER.failureImmediateAttempts),
    delayedAttempts: get(HEADER.failureDelayedAttempts),
    replayCount: replayCountOf(get(HEADER.replayCount)),
  };
}

/** A replay-count header as a number: 0 when absent or not a whole number above 0. */
function replayCountOf(header: string): number {
  const count = Number(header);
  return header !== '' && Number.isSafeInteger(count) && count > 0 ? count : 0;
}
