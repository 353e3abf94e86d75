import { HEADER, LIMITS } from './names.js';
import { truncate, userHeaders, withRetryState, type RetryState } from './retry-state.js';
import { validationIssuesHeader } from './validation-issues.js';
import type { ValidationIssue } from '../schema/validate.js';
import type { Headers } from '../transport/types.js';

/** The parts of a thrown value that are recorded. */
export interface ErrorSummary {
  readonly name: string;
  readonly message: string;
  readonly stack: string;
}

/** Describes anything a handler may throw, bounded in size. */
export function summarizeError(error: unknown): ErrorSummary {
  if (error instanceof Error || (typeof error === 'object' && error !== null && 'message' in error)) {
    const e = error as { name?: unknown; message?: unknown; stack?: unknown };
    return {
      name: truncate(typeof e.name === 'string' && e.name ? e.name : 'Error', 200),
      message: truncate(safeString(e.message), LIMITS.messageChars),
      stack: truncate(typeof e.stack === 'string' ? e.stack : '', LIMITS.stackChars),
    };
  }
  return { name: 'NonError', message: truncate(safeString(error), LIMITS.messageChars), stack: '' };
}

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
