/**
 * Outcome records: what became of a message an operator sent back from an
 * error queue. An endpoint with `replayOutcomeQueue` sends one record for
 * each replayed message (one with `redeliver-replay-count`) it handled and
 * acknowledged; a replay tool reads them to learn that the replay worked.
 */
import { HEADER } from '../headers/names.js';
import type { Headers, OutgoingMessage } from '../transport/types.js';
import { utf8 } from './body-preview.js';

/** A replayed message was handled and acknowledged. */
export interface ReplayOutcome {
  readonly kind: 'handled';
  /** The replayed message's id. */
  readonly messageId: string;
  /** Its `redeliver-replay-count`: how many times it had been sent back. */
  readonly replayCount: number;
  /** The queue it was handled on. */
  readonly queue: string;
  /** The endpoint that handled it. */
  readonly endpoint: string;
  /** When it was acknowledged, ISO 8601. */
  readonly at: string;
}

/** The parts of a received message that {@link decodeReplayOutcome} reads. */
export interface ReplayOutcomeSource {
  readonly id: string;
  readonly body: Uint8Array;
  readonly headers: Readonly<Headers>;
}

/** Bounds on a record, so a hostile message on the outcome queue cannot make a reader hold much. */
export const REPLAY_OUTCOME_LIMITS = {
  /** Bytes of a record's body. */
  bodyBytes: 8 * 1024,
  /** Characters of `messageId`, `queue` and `endpoint` each. */
  nameChars: 1_024,
} as const;

/** An outcome record that cannot be read, with what is wrong with it. */
export class ReplayOutcomeError extends Error {
  override readonly name = 'ReplayOutcomeError';
}

/** The id of the record for one handling of one replay: the same replay handled twice gives the same id, so a deduplicating reader counts it once. */
export function replayOutcomeId(messageId: string, replayCount: number): string {
  return `${messageId}:handled:${replayCount}`;
}

/** The message to send for `outcome`: a JSON body, its id from {@link replayOutcomeId}, and `redeliver-outcome: handled`. */
export function encodeReplayOutcome(outcome: ReplayOutcome): OutgoingMessage {
  const record: ReplayOutcome = {
    kind: outcome.kind,
    messageId: outcome.messageId,
    replayCount: outcome.replayCount,
    queue: outcome.queue,
    endpoint: outcome.endpoint,
    at: outcome.at,
  };
  check(record, 'cannot encode an outcome record');
  return {
    id: replayOutcomeId(record.messageId, record.replayCount),
    body: new TextEncoder().encode(JSON.stringify(record)),
    headers: { [HEADER.outcome]: record.kind },
  };
}

/**
 * Reads an outcome record. Throws a {@link ReplayOutcomeError} naming the
 * fault when the message is not one: no `redeliver-outcome` header, a body
 * that is too large, not UTF-8 JSON, or whose fields are missing, of the
 * wrong type or out of bounds, or an id that does not match the body.
 */
export function decodeReplayOutcome(message: ReplayOutcomeSource): ReplayOutcome {
  const what = `message '${String(message?.id)}' is not an outcome record`;
  if (typeof message !== 'object' || message === null || typeof message.id !== 'string') throw new ReplayOutcomeError('an outcome record must have a string id');
  const headers: Readonly<Headers> = typeof message.headers === 'object' && message.headers !== null ? message.headers : {};
  const header = Object.prototype.hasOwnProperty.call(headers, HEADER.outcome) ? headers[HEADER.outcome] : undefined;
  if (header === undefined) throw new ReplayOutcomeError(`${what}: it has no ${HEADER.outcome} header`);
  if (!(message.body instanceof Uint8Array)) throw new ReplayOutcomeError(`${what}: its body is not bytes`);
  if (message.body.length > REPLAY_OUTCOME_LIMITS.bodyBytes) {
    throw new ReplayOutcomeError(`${what}: its body has ${message.body.length} bytes, more than ${REPLAY_OUTCOME_LIMITS.bodyBytes}`);
  }
  const text = utf8(message.body);
  if (text === undefined) throw new ReplayOutcomeError(`${what}: its body is not UTF-8`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new ReplayOutcomeError(`${what}: its body is not JSON (${(error as Error).message})`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ReplayOutcomeError(`${what}: its body is not a JSON object`);
  const fields = parsed as Record<string, unknown>;
  const record = {
    kind: fields['kind'],
    messageId: fields['messageId'],
    replayCount: fields['replayCount'],
    queue: fields['queue'],
    endpoint: fields['endpoint'],
    at: fields['at'],
  } as ReplayOutcome;
  check(record, what);
  if (header !== record.kind) throw new ReplayOutcomeError(`${what}: its ${HEADER.outcome} header says ${JSON.stringify(header)} but its body says ${JSON.stringify(record.kind)}`);
  const id = replayOutcomeId(record.messageId, record.replayCount);
  if (message.id !== id) throw new ReplayOutcomeError(`${what}: its id should be ${JSON.stringify(id)}`);
  return record;
}

/** Checks every field of a record, throwing a {@link ReplayOutcomeError} that starts with `what`. */
function check(record: ReplayOutcome, what: string): void {
  if (record.kind !== 'handled') throw new ReplayOutcomeError(`${what}: kind must be "handled", got ${show(record.kind)}`);
  name(record.messageId, 'messageId', what);
  if (typeof record.replayCount !== 'number' || !Number.isSafeInteger(record.replayCount) || record.replayCount < 1) {
    throw new ReplayOutcomeError(`${what}: replayCount must be a whole number of at least 1, got ${show(record.replayCount)}`);
  }
  name(record.queue, 'queue', what);
  name(record.endpoint, 'endpoint', what);
  if (typeof record.at !== 'string' || record.at.length > 40 || !ISO_TIME.test(record.at) || Number.isNaN(Date.parse(record.at))) {
    throw new ReplayOutcomeError(`${what}: at must be an ISO 8601 time, got ${show(record.at)}`);
  }
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

function name(value: unknown, field: string, what: string): void {
  if (typeof value !== 'string' || value === '' || value.length > REPLAY_OUTCOME_LIMITS.nameChars) {
    throw new ReplayOutcomeError(`${what}: ${field} must be a string of 1 to ${REPLAY_OUTCOME_LIMITS.nameChars} characters, got ${show(value)}`);
  }
}

function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value);
  return Array.isArray(value) ? 'an array' : typeof value;
}
