import { HEADER, HEADER_PREFIX, LIMITS } from './names.js';
import { epochMsHeader } from './epoch-ms.js';
import type { Headers } from '../transport/types.js';

/** One earlier failure, as kept in the history header. */
export interface FailureRecord {
  /** When it failed, ISO 8601. */
  readonly at: string;
  readonly errorName: string;
  readonly message: string;
  /** The handler attempt within its round of immediate retries, from 1. */
  readonly immediateAttempt: number;
  /** Delayed retries taken before this failure. */
  readonly delayedAttempt: number;
}

/** The retry state a message carries. */
export interface RetryState {
  /** Handler attempts made before this delivery. */
  readonly attempts: number;
  /** Delayed retries already taken. */
  readonly delayedAttempts: number;
  /** The delay before this delivery, when it was a delayed retry. */
  readonly lastDelayMs: number | undefined;
  /** The sum of the delayed-retry delays so far. */
  readonly delayedElapsedMs: number;
  /** Earlier failures, oldest first. */
  readonly history: readonly FailureRecord[];
  /** The message's deadline, milliseconds since the Unix epoch, once an endpoint fixed it (see {@link HEADER.deadlineAt}). */
  readonly deadlineAt?: number | undefined;
}

/**
 * Reads the retry state from headers. Headers come from the wire and are
 * untrusted: a missing, malformed or hostile value reads as its default.
 */
export function readRetryState(headers: Readonly<Headers>): RetryState {
  return {
    attempts: readCount(headers, HEADER.attempts),
    delayedAttempts: readCount(headers, HEADER.delayedAttempts),
    lastDelayMs: ownValue(headers, HEADER.lastDelay) === undefined ? undefined : readCount(headers, HEADER.lastDelay),
    delayedElapsedMs: readCount(headers, HEADER.delayedElapsed),
    history: readHistory(ownValue(headers, HEADER.history)),
    deadlineAt: readEpochMs(headers, HEADER.deadlineAt),
  };
}

/**
 * The headers for the next copy of a message: redeliver's written from
 * `state`, then the user's own headers as they were.
 */
export function withRetryState(headers: Readonly<Headers>, state: RetryState): Headers {
  const next: Headers = {};
  next[HEADER.attempts] = String(state.attempts);
  next[HEADER.delayedAttempts] = String(state.delayedAttempts);
  if (state.lastDelayMs !== undefined) next[HEADER.lastDelay] = String(Math.round(state.lastDelayMs));
  if (state.delayedElapsedMs > 0) next[HEADER.delayedElapsed] = String(Math.round(state.delayedElapsedMs));
  if (state.history.length > 0) next[HEADER.history] = historyJson(state.history);
  if (state.deadlineAt !== undefined) next[HEADER.deadlineAt] = String(Math.floor(state.deadlineAt));
  return Object.assign(next, userHeaders(headers));
}

/** The history as JSON within {@link LIMITS.historyBytes}, dropping the oldest entries as needed. */
function historyJson(history: readonly FailureRecord[]): string {
  let kept = boundHistory(history);
  let json = JSON.stringify(kept);
  while (kept.length > 1 && json.length * 3 > LIMITS.historyBytes && Buffer.byteLength(json) > LIMITS.historyBytes) {
    kept = kept.slice(1);
    json = JSON.stringify(kept);
  }
  return json;
}

/** Appends a failure, keeping the most recent {@link LIMITS.historyEntries}. */
export function appendFailure(history: readonly FailureRecord[], record: FailureRecord): FailureRecord[] {
  return boundHistory([...history, record]);
}

/** The headers that are not redeliver's, as a fresh plain object. */
export function userHeaders(headers: Readonly<Headers>): Headers {
  const out: Headers = {};
  for (const key of Object.keys(headers)) {
    if (key.startsWith(HEADER_PREFIX) || isPrototypeKey(key)) continue;
    const value = headers[key];
    if (typeof value === 'string') out[key] = value;
  }
  return out;
}

function boundHistory(history: readonly FailureRecord[]): FailureRecord[] {
  return history.slice(-LIMITS.historyEntries).map((r) => ({
    ...r,
    message: truncate(r.message, LIMITS.historyMessageChars),
    errorName: truncate(r.errorName, 200),
  }));
}

function readCount(headers: Readonly<Headers>, key: string): number {
  const raw = ownValue(headers, key);
  if (raw === undefined || !/^\d{1,15}$/.test(raw)) return 0;
  return Number(raw);
}

function readEpochMs(headers: Readonly<Headers>, key: string): number | undefined {
  const value = epochMsHeader(headers, key);
  return value === 'malformed' ? undefined : value;
}

function readHistory(raw: string | undefined): FailureRecord[] {
  if (raw === undefined || raw.length > 64 * 1024) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  const records: FailureRecord[] = [];
  for (const item of parsed.slice(-LIMITS.historyEntries)) {
    if (typeof item !== 'object' || item === null) continue;
    const r = item as Record<string, unknown>;
    records.push({
      at: typeof r['at'] === 'string' ? truncate(r['at'], 40) : '',
      errorName: typeof r['errorName'] === 'string' ? truncate(r['errorName'], 200) : 'Error',
      message: typeof r['message'] === 'string' ? truncate(r['message'], LIMITS.historyMessageChars) : '',
      immediateAttempt: wholeOr(r['immediateAttempt'], 0),
      delayedAttempt: wholeOr(r['delayedAttempt'], 0),
    });
  }
  return records;
}

function ownValue(headers: Readonly<Headers>, key: string): string | undefined {
  if (!Object.prototype.hasOwnProperty.call(headers, key)) return undefined;
  const value = headers[key];
  return typeof value === 'string' ? value : undefined;
}

function wholeOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : fallback;
}

/** Cuts `text` to at most `max` characters, marking the cut, never between the two halves of a surrogate pair. */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max - 1);
  if (end > 0 && isHighSurrogate(text.charCodeAt(end - 1))) end--;
  return `${text.slice(0, end)}…`;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isPrototypeKey(key: string): boolean {
  return key === '__proto__' || key === 'constructor' || key === 'prototype';
}
