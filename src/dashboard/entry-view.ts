import { HEADER } from '../headers/names.js';
import { readRetryState, type FailureRecord } from '../headers/retry-state.js';
import { signatureOf, type FailureSignature } from '../operations/signature.js';
import type { ErrorEntry } from '../transport/error-queue.js';

/** A body as the page shows it: text when it is valid UTF-8, otherwise hex. */
export interface BodyPreview {
  readonly encoding: 'utf8' | 'hex';
  /** The shown part of the body. */
  readonly text: string;
  /** The body's full size in bytes. */
  readonly size: number;
  /** Whether only the first `shownBytes` bytes are shown. */
  readonly truncated: boolean;
  readonly shownBytes: number;
}

/** The detail of one error-queue entry. */
export interface EntryDetail {
  readonly key: string;
  readonly messageId: string;
  readonly errorQueue: string;
  readonly signature: FailureSignature;
  readonly failure: {
    readonly reason: string;
    readonly errorName: string;
    readonly message: string;
    readonly stack: string;
    readonly at: string;
    readonly queue: string;
    readonly endpoint: string;
    readonly host: string;
    readonly attempts: string;
    readonly immediateAttempts: string;
    readonly delayedAttempts: string;
    readonly replayCount: string;
  };
  /** Earlier failures, oldest first, from the `redeliver-history` header. */
  readonly history: readonly FailureRecord[];
  /** Every header as `[name, value]`, sorted by name. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: BodyPreview;
}

/** Builds the detail view of an entry; header values are passed through as data, never interpreted. */
export function entryDetail(entry: ErrorEntry, previewBytes: number): EntryDetail {
  const h = entry.headers;
  const get = (name: string) => (Object.prototype.hasOwnProperty.call(h, name) && typeof h[name] === 'string' ? h[name]! : '');
  return {
    key: entry.key,
    messageId: entry.messageId,
    errorQueue: entry.errorQueue,
    signature: signatureOf(h),
    failure: {
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
      replayCount: get(HEADER.replayCount),
    },
    history: readRetryState(h).history,
    headers: Object.keys(h)
      .filter((name) => typeof h[name] === 'string')
      .sort()
      .map((name) => [name, h[name]!] as const),
    body: bodyPreview(entry.body, previewBytes),
  };
}

/**
 * The first `maxBytes` bytes of a body: as text when they are valid UTF-8
 * (a character cut at the limit does not count against it), otherwise as
 * hex, 16 bytes a line.
 */
export function bodyPreview(body: Uint8Array, maxBytes: number): BodyPreview {
  const shown = body.subarray(0, maxBytes);
  const truncated = body.length > shown.length;
  try {
    const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(shown, { stream: truncated });
    if (!hasControlCharacters(text)) return { encoding: 'utf8', text, size: body.length, truncated, shownBytes: shown.length };
  } catch {
    // Not UTF-8: shown as hex below.
  }
  return { encoding: 'hex', text: hexDump(shown), size: body.length, truncated, shownBytes: shown.length };
}

/** Control characters other than tab, line feed and carriage return mark a binary body. */
function hasControlCharacters(text: string): boolean {
  return /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text);
}

function hexDump(bytes: Uint8Array): string {
  const lines: string[] = [];
  for (let offset = 0; offset < bytes.length; offset += 16) {
    const row = bytes.subarray(offset, offset + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
    lines.push(`${offset.toString(16).padStart(8, '0')}  ${hex}`);
  }
  return lines.join('\n');
}
