/**
 * Deadlines: a wall-clock time (milliseconds since the Unix epoch) after
 * which a message is worthless. A message's deadline is the earlier of the
 * sender's (`redeliver-expires-at`) and the endpoint's
 * `recoverability.deadlineMs` counted from the first handler attempt. The
 * endpoint fixes it in `redeliver-deadline-at` on the first retry copy, so
 * later rounds, in any process, keep the same deadline. A message is never
 * handled at or after its deadline, and no retry is scheduled to come back
 * at or after it. Pure functions of their arguments.
 */
import { epochMsHeader, MAX_EPOCH_MS } from '../headers/epoch-ms.js';
import { HEADER } from '../headers/names.js';
import type { Headers } from '../transport/types.js';
import type { FailureContext } from './context.js';
import { deadLetter, discard, type Decision } from './decision.js';

/** What becomes of a message whose deadline passed: moved to the error queue, or acknowledged and dropped. */
export type OnExpired = 'error-queue' | 'discard';

/** The failure reason, and discard reason, of a message whose deadline passed. */
export const EXPIRED = 'expired';

/** Recorded as the failure of a message whose deadline passed before its handler ran. */
export class DeadlineExpiredError extends Error {
  override readonly name: string = 'DeadlineExpiredError';
  constructor(
    /** The deadline that passed, milliseconds since the Unix epoch. */
    readonly deadlineAt: number,
  ) {
    super(`the message's deadline ${new Date(deadlineAt).toISOString()} passed before it was handled`);
  }
}

/** The decision for a message whose deadline passed (or would pass before its next retry). */
export function expiredDecision(onExpired: OnExpired): Decision {
  return onExpired === 'discard' ? discard(EXPIRED) : deadLetter(EXPIRED);
}

/** Whether `at` is at or past the deadline; never true without a deadline. */
export function isPastDeadline(deadlineAt: number | undefined, at: number): boolean {
  return deadlineAt !== undefined && at >= deadlineAt;
}

/**
 * A decision held to the deadline: a `retry-now` at or past it, or a
 * `retry-later` whose delay, once capped at `maxDelayMs`, could bring the
 * message back at or past it (the transport may bring it back up to
 * `delayPrecisionMs` late), becomes the expired decision. Every other
 * decision stands.
 */
export function withinDeadline(
  decision: Decision,
  failure: Pick<FailureContext, 'deadlineAt' | 'failedAt'>,
  maxDelayMs: number,
  onExpired: OnExpired,
  delayPrecisionMs = 0,
): Decision {
  const { deadlineAt, failedAt } = failure;
  if (deadlineAt === undefined) return decision;
  if (decision.kind === 'retry-now' && isPastDeadline(deadlineAt, failedAt)) return expiredDecision(onExpired);
  const landsBy = (delayMs: number) => failedAt + Math.min(delayMs, maxDelayMs) + delayPrecisionMs;
  if (decision.kind === 'retry-later' && isPastDeadline(deadlineAt, landsBy(decision.delayMs))) return expiredDecision(onExpired);
  return decision;
}

/** What a delivery's headers say about its deadline. */
export interface DeadlineHeaders {
  /** The sender's deadline, when the header holds one. */
  readonly expiresAt: number | undefined;
  /** The deadline an endpoint fixed on an earlier round, when the header holds one. */
  readonly deadlineAt: number | undefined;
  /** Names of deadline headers present but not a time: each reads as absent. */
  readonly malformed: readonly string[];
}

/** Reads the deadline headers. Headers are untrusted: a value that is not a time reads as absent, and is named in `malformed`. */
export function readDeadlineHeaders(headers: Readonly<Headers>): DeadlineHeaders {
  const malformed: string[] = [];
  const read = (name: string) => {
    const value = epochMsHeader(headers, name);
    if (value === 'malformed') {
      malformed.push(name);
      return undefined;
    }
    return value;
  };
  return { expiresAt: read(HEADER.expiresAt), deadlineAt: read(HEADER.deadlineAt), malformed };
}

/**
 * A delivery's deadline: the one fixed on an earlier round (held to the
 * sender's too), else the earlier of the sender's and `firstAttemptAt +
 * deadlineMs`; undefined when there is none.
 */
export function messageDeadline(input: {
  readonly headers: Pick<DeadlineHeaders, 'expiresAt' | 'deadlineAt'>;
  readonly deadlineMs: number | undefined;
  /** Wall time of this delivery's first handler attempt. */
  readonly firstAttemptAt: number;
}): number | undefined {
  const { expiresAt, deadlineAt } = input.headers;
  // Whole milliseconds, as the header holds them; rounded down, so never later than asked.
  const policy = deadlineAt ?? (input.deadlineMs === undefined ? undefined : Math.floor(input.firstAttemptAt + input.deadlineMs));
  if (policy === undefined) return expiresAt;
  return expiresAt === undefined ? policy : Math.min(policy, expiresAt);
}

/**
 * The sender's `expiresAt` as epoch milliseconds, for the header. Throws a
 * RangeError for anything that is not a valid Date or a whole number of
 * milliseconds from 0 to the largest Date.
 */
export function expiresAtMs(value: unknown): number {
  const ms = value instanceof Date ? value.getTime() : value;
  if (typeof ms !== 'number' || !Number.isInteger(ms) || ms < 0 || ms > MAX_EPOCH_MS) {
    const shown = value instanceof Date ? 'an invalid Date' : typeof value === 'number' ? String(value) : typeof value;
    throw new RangeError(`send: expiresAt must be a valid Date or a whole number of milliseconds since the Unix epoch (0 to ${MAX_EPOCH_MS}), got ${shown}`);
  }
  return ms;
}
