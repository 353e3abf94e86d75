/**
 * The bulk operations of an error queue whose entries can be addressed one
 * by one by key (a stream id, a row number): each selected entry is sent
 * back or deleted on its own, as the scan reads it; or, where a transport
 * can move many entries in one round trip, the selected entries of each
 * page of the scan together.
 */
import { BulkTally, deleteEachByKey, failureResult, sendBackEachByKey, sendBackOptionsOf } from '../operations/bulk.js';
import type { BulkOptions, BulkSendBackOptions, BulkSummary, EntryResult, ErrorEntry, ErrorQueueOperations, ScanOptions, SendBackOptions } from './error-queue.js';

/** `sendBackEach` and `deleteEach` through the transport's `scan`, `sendBack` and `delete` by key. */
export abstract class KeyedErrorQueueOperations implements Pick<ErrorQueueOperations, 'sendBackEach' | 'deleteEach'> {
  abstract scan(errorQueue: string, options?: ScanOptions): AsyncGenerator<ErrorEntry[]>;
  abstract sendBack(errorQueue: string, key: string, options?: SendBackOptions): Promise<string | undefined>;
  abstract delete(errorQueue: string, key: string): Promise<boolean>;

  /** Sends back each selected entry as the scan reads it, by key; one removed meanwhile is `gone`. */
  sendBackEach(errorQueue: string, options: BulkSendBackOptions): Promise<BulkSummary> {
    return sendBackEachByKey(this, errorQueue, options);
  }

  /** Deletes each selected entry as the scan reads it, by key; one removed meanwhile is `gone`. */
  deleteEach(errorQueue: string, options: BulkOptions): Promise<BulkSummary> {
    return deleteEachByKey(this, errorQueue, options);
  }
}

/**
 * Sends back the selected entries of `errorQueue` a page at a time: reads
 * each page of `pages` (the items of one scan, oldest first), picks the
 * entries `options.select` selects, hands them to `sendBackBatch` together
 * and records its results in order. The next page is read while a batch
 * goes out, so `pages` must read without side effects. `sendBackBatch`
 * resolves one result per item it was given, in the same order; when it
 * rejects, every item of the batch is `failed` with its error (the batch
 * must then have sent none).
 *
 * The signal and the result callback are checked before each entry is
 * read: a pass stopped by either finishes the batch under way (those
 * entries are acted on and reported) and reads nothing more.
 */
export async function sendBackEachInBatches<T>(
  pages: AsyncIterable<readonly T[]>,
  entryOf: (item: T) => ErrorEntry,
  options: BulkSendBackOptions,
  sendBackBatch: (items: readonly T[], destination: SendBackOptions) => Promise<readonly EntryResult[]>,
): Promise<BulkSummary> {
  const tally = new BulkTally(options.onResult);
  const destination = sendBackOptionsOf(options);
  const stopped = () => {
    if (options.signal?.aborted) tally.interrupted = true;
    return tally.interrupted || tally.callbackFailed;
  };
  const reader = pages[Symbol.asyncIterator]();
  let next: Promise<IteratorResult<readonly T[]>> | undefined = readAhead(reader);
  try {
    while (next !== undefined) {
      const read: IteratorResult<readonly T[]> = await next;
      next = undefined;
      if (read.done === true) break;
      const batch: T[] = [];
      for (const item of read.value) {
        if (stopped()) break;
        tally.read++;
        options.onRead?.(1);
        if (!options.select(entryOf(item))) continue;
        tally.selected++;
        batch.push(item);
      }
      if (!stopped()) next = readAhead(reader);
      if (batch.length === 0) continue;
      const results = await sendBackBatch(batch, destination).catch((error: unknown) => batch.map((item) => failureResult(entryOf(item), error)));
      for (const result of results) tally.record(result);
      if (stopped()) break;
    }
  } finally {
    // A page read ahead and not used: its failure is no one's.
    if (next !== undefined) await next.catch(() => undefined);
    await reader.return?.();
  }
  return tally.summary();
}

/** The next page, its failure marked as handled until someone awaits it (a batch may be under way meanwhile). */
function readAhead<T>(reader: AsyncIterator<T>): Promise<IteratorResult<T>> {
  const next = reader.next();
  next.catch(() => undefined);
  return next;
}
