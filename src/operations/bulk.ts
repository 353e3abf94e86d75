/**
 * Bulk error-queue operations: the totals every transport reports, and the
 * one-pass bulk operations of transports that can act on one entry by key
 * cheaply (SQLite, memory): read the queue once, act on each selected entry
 * by its key as it is read.
 */
import type { BulkOptions, BulkSendBackOptions, BulkSummary, EntryResult, ErrorEntry, ErrorQueueOperations, SendBackOptions } from '../transport/error-queue.js';
import { isSendBackRefused } from './send-back-destination.js';

/** Counts what a bulk operation did and tells the caller's callback, keeping the first error it throws. */
export class BulkTally {
  read = 0;
  selected = 0;
  done = 0;
  refused = 0;
  failed = 0;
  gone = 0;
  unseen = 0;
  interrupted = false;
  #callbackError: { error: unknown } | undefined;

  constructor(private readonly onResult: ((result: EntryResult) => void) | undefined) {}

  /** Whether the caller's callback threw: the pass stops acting. */
  get callbackFailed(): boolean {
    return this.#callbackError !== undefined;
  }

  /** Counts `result` and passes it to the callback. */
  record(result: EntryResult): void {
    switch (result.outcome) {
      case 'sent':
      case 'deleted':
        this.done++;
        break;
      case 'refused':
        this.refused++;
        break;
      case 'failed':
        this.failed++;
        break;
      case 'gone':
        this.gone++;
        break;
    }
    if (!this.onResult) return;
    try {
      this.onResult(result);
    } catch (error) {
      this.#callbackError ??= { error };
    }
  }

  /** The totals; rejects with the callback's error when it threw. */
  summary(): BulkSummary {
    if (this.#callbackError) throw this.#callbackError.error;
    const { read, selected, done, refused, failed, gone, unseen, interrupted } = this;
    return { read, selected, done, refused, failed, gone, unseen, interrupted };
  }
}

/** The result of a send-back or delete that threw: `refused` for a refused destination, `failed` otherwise. */
export function failureResult(entry: ErrorEntry, error: unknown): EntryResult {
  if (isSendBackRefused(error)) return { outcome: 'refused', entry, reason: error.reason, error };
  return { outcome: 'failed', entry, error };
}

/** The destination options of a bulk send-back, without its selection and callbacks. */
export function sendBackOptionsOf(options: BulkSendBackOptions): SendBackOptions {
  return {
    ...(options.queue === undefined ? {} : { queue: options.queue }),
    ...(options.allowedQueues === undefined ? {} : { allowedQueues: options.allowedQueues }),
  };
}

/**
 * Reads `errorQueue` once with `ops.scan` and applies `act` to each entry
 * `options.select` picks, as it is read. Stops between two entries when
 * `options.signal` aborts or the result callback throws.
 */
export async function eachSelected(
  ops: Pick<ErrorQueueOperations, 'scan'>,
  errorQueue: string,
  options: BulkOptions,
  act: (entry: ErrorEntry) => Promise<EntryResult>,
): Promise<BulkSummary> {
  const tally = new BulkTally(options.onResult);
  pass: for await (const page of ops.scan(errorQueue)) {
    for (const entry of page) {
      if (options.signal?.aborted) tally.interrupted = true;
      if (tally.interrupted || tally.callbackFailed) break pass;
      tally.read++;
      options.onRead?.(1);
      if (!options.select(entry)) continue;
      tally.selected++;
      tally.record(await act(entry).catch((error: unknown) => failureResult(entry, error)));
    }
  }
  return tally.summary();
}

/** `sendBackEach` through `ops.sendBack`, one entry at a time by key: an entry removed meanwhile is `gone`. */
export function sendBackEachByKey(ops: Pick<ErrorQueueOperations, 'scan' | 'sendBack'>, errorQueue: string, options: BulkSendBackOptions): Promise<BulkSummary> {
  const destination = sendBackOptionsOf(options);
  return eachSelected(ops, errorQueue, options, async (entry) => {
    const queue = await ops.sendBack(errorQueue, entry.key, destination);
    return queue === undefined ? { outcome: 'gone', entry } : { outcome: 'sent', entry, queue };
  });
}

/** `deleteEach` through `ops.delete`, one entry at a time by key: an entry removed meanwhile is `gone`. */
export function deleteEachByKey(ops: Pick<ErrorQueueOperations, 'scan' | 'delete'>, errorQueue: string, options: BulkOptions): Promise<BulkSummary> {
  return eachSelected(ops, errorQueue, options, async (entry) =>
    (await ops.delete(errorQueue, entry.key)) ? { outcome: 'deleted', entry } : { outcome: 'gone', entry },
  );
}
