/**
 * The bulk operations of an error queue whose entries can be addressed one
 * by one by key (a stream id, a row number): each selected entry is sent
 * back or deleted on its own, as the scan reads it.
 */
import { deleteEachByKey, sendBackEachByKey } from '../operations/bulk.js';
import type { BulkOptions, BulkSendBackOptions, BulkSummary, ErrorEntry, ErrorQueueOperations, ScanOptions, SendBackOptions } from './error-queue.js';

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
