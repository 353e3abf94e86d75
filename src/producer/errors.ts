/**
 * A send that failed for good, with every attempt. How an attempt's error is
 * classified lives with the transports (`../transport/send-errors.ts`).
 */
import type { SendErrorKind } from '../transport/send-errors.js';

/** One attempt of a send. */
export interface SendAttempt {
  /** From 1. */
  readonly attempt: number;
  readonly kind: SendErrorKind;
  readonly error: unknown;
  /** Milliseconds since the send started. */
  readonly atMs: number;
}

/** A send that failed for good: lists every attempt and its cause. */
export class SendFailedError extends Error {
  override readonly name = 'SendFailedError';
  constructor(
    readonly queue: string,
    readonly messageId: string,
    readonly attempts: readonly SendAttempt[],
    readonly reason: 'fatal' | 'attempts-exhausted' | 'timeout',
  ) {
    super(
      `send of message ${messageId} to ${queue} failed (${reason}) after ${attempts.length} attempt(s): ` +
        attempts.map((a) => `#${a.attempt} ${a.kind} at ${Math.round(a.atMs)} ms: ${describe(a.error)}`).join('; '),
      { cause: attempts.at(-1)?.error },
    );
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}
