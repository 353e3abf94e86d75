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
 * and records its results in order. `sendBackBatch` resolves one result per
 * item it was given, in the same order; when it rejects, every item of the
 * batch is `failed` with its error (the batch must then have sent none).
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
  for await (const page of pages) {
    const batch: T[] = [];
    for (const item of page) {
      if (stopped()) break;
      tally.read++;
      options.onRead?.(1);
      if (!options.select(entryOf(item))) continue;
      tally.selected++;
      batch.push(item);
    }
    if (batch.length > 0) {
      const results = await sendBackBatch(batch, destination).catch((error: unknown) => batch.map((item) => failureResult(entryOf(item), error)));
      for (const result of results) tally.record(result);
    }
    if (stopped()) break;
  }
  return tally.summary();
}
