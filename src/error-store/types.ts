import type { FailureSignature } from '../operations/signature.js';
import type { Headers } from '../transport/types.js';

/**
 * Where a stored entry stands:
 * - `failed`: in the store, waiting for an operator;
 * - `retrying`: claimed by a retry that is sending it back right now;
 * - `retried`: sent back (the broker confirmed the copy); kept for history;
 * - `replaced`: an edited copy was sent back instead; kept for history;
 * - `deleted`: an operator deleted it; kept for history, its body dropped.
 */
export type EntryStatus = 'failed' | 'retrying' | 'retried' | 'replaced' | 'deleted';

/** What became of a sent-back message, as far as the store has seen. */
export type RetryOutcome = 'handled' | 'failed-again';

/** One entry of an error queue, as the store keeps it. */
export interface StoredEntry {
  /** The entry key: the copy's `redeliver-entry-id`, or a key derived from its id, headers and body. */
  readonly key: string;
  /** Order of ingestion, 1 and up. */
  readonly seq: number;
  readonly errorQueue: string;
  readonly messageId: string;
  /** The queue it failed on (`redeliver-failure-queue`), or `''`. */
  readonly originalQueue: string;
  readonly endpoint: string;
  readonly host: string;
  readonly signature: FailureSignature;
  /** The last error's message as thrown (not normalised). */
  readonly message: string;
  /** When it moved to the error queue (from its headers; the ingest time when they do not say), epoch ms. */
  readonly failedAt: number;
  readonly ingestedAt: number;
  /** How many times it had been sent back before it failed this time (`redeliver-replay-count`). */
  readonly replayCount: number;
  readonly status: EntryStatus;
  /** How many times an operator sent this entry back. */
  readonly retriedCount: number;
  readonly lastRetriedAt?: number;
  readonly lastRetriedBy?: string;
  /** Where the last retry sent it. */
  readonly retriedTo?: string;
  readonly outcome?: RetryOutcome;
  readonly outcomeAt?: number;
  /** The store's change counter when this row last changed. */
  readonly version: number;
}

/** A stored entry with its headers and body. */
export interface StoredEntryDetail extends StoredEntry {
  readonly headers: Readonly<Headers>;
  readonly body: Uint8Array;
  /** When it was deleted, epoch ms; absent unless `deleted` (and on entries deleted before schema version 4, which did not record it). */
  readonly deletedAt?: number;
  /** Who deleted it (`cli:<user>`, `dashboard`); absent like {@link deletedAt}. */
  readonly deletedBy?: string;
}

/** An error-queue copy to store. */
export interface IngestEntry {
  readonly errorQueue: string;
  readonly messageId: string;
  readonly headers: Readonly<Headers>;
  readonly body: Uint8Array;
}

/** What one {@link ErrorStore.ingest} call did. */
export interface IngestResult {
  /** New entries stored. */
  readonly stored: number;
  /** Entries the store had already (by key): a copy delivered again after a crash. */
  readonly duplicates: number;
  /** Earlier sent-back entries of the same messages now marked `failed-again`. */
  readonly failedAgain: number;
}

/** A failure group: entries with one failure signature. */
export interface StoredGroup {
  readonly signature: FailureSignature;
  /** Entries of the group in the selection (by default: waiting, status `failed`). */
  readonly count: number;
  /** Earliest and latest failure among them, epoch ms. */
  readonly firstFailedAt: number;
  readonly lastFailedAt: number;
  /** Entries of the signature, any status, that were sent back at least once. */
  readonly retried: number;
  /** Of those, how many the store saw handled, and how many failed again. */
  readonly handledAfterRetry: number;
  readonly failedAgainAfterRetry: number;
}

/** Failures per time bucket per group. */
export interface FailureRate {
  /** Width of a bucket, ms. */
  readonly bucketMs: number;
  /** First bucket's start and the end of the range, epoch ms. */
  readonly since: number;
  readonly until: number;
  /** One row per group: signature id and the failures in each bucket, oldest first. */
  readonly series: readonly { readonly signature: string; readonly total: number; readonly counts: readonly number[] }[];
}
