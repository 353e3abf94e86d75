import { readFailureFacts, type FailureFacts } from '../headers/failure.js';
import { readRetryState, type FailureRecord } from '../headers/retry-state.js';
import { validationIssueLines } from '../headers/validation-issues.js';
import { signatureOf, type FailureSignature } from '../operations/signature.js';
import type { ErrorEntry } from '../transport/error-queue.js';
import { bodyPreview, type BodyPreview } from '../operations/body-preview.js';

export type { BodyPreview };

/** The detail of one error-queue entry. */
export interface EntryDetail {
  readonly key: string;
  readonly messageId: string;
  readonly errorQueue: string;
  readonly signature: FailureSignature;
  readonly failure: FailureFacts;

  /** Earlier failures, oldest first, from the `redeliver-history` header. */
  readonly history: readonly FailureRecord[];
  /** Why the body failed its schema, one `path: message` line per issue, from the `redeliver-validation-issues` header; empty without it. */
  readonly validationIssues: readonly string[];
  /** Every header as `[name, value]`, sorted by name. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: BodyPreview;
}

/** Builds the detail view of an entry; header values are passed through as data, never interpreted. */
export function entryDetail(entry: ErrorEntry, previewBytes: number): EntryDetail {
  const h = entry.headers;
  return {
    key: entry.key,
    messageId: entry.messageId,
    errorQueue: entry.errorQueue,
    signature: signatureOf(h),
    failure: readFailureFacts(h),

    history: readRetryState(h).history,
    validationIssues: validationIssueLines(h),
    headers: Object.keys(h)
      .filter((name) => typeof h[name] === 'string')
      .sort()
      .map((name) => [name, h[name]!] as const),
    body: bodyPreview(entry.body, previewBytes),
  };
}
