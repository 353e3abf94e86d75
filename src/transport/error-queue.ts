import type { SendBackRefusal } from '../operations/send-back-destination.js';
import type { Headers } from './types.js';

/** A message in an error queue, as an operator sees it. */
export interface ErrorEntry {
  /** The entry's key in its error queue, stable while it stays there. */
  readonly key: string;
  readonly messageId: string;
  readonly errorQueue: string;
  readonly body: Uint8Array;
  /** The message's headers, including the `redeliver-failure-*` story. */
  readonly headers: Readonly<Headers>;
}

/** Paging for {@link ErrorQueueOperations.browse}. */
export interface BrowseOptions {
  /** Entries to skip, oldest first. Default 0. */
  offset?: number;
  /** Entries to return at most. Default 100. */
  limit?: number;
}

/** Options of {@link ErrorQueueOperations.sendBack}. */
export interface SendBackOptions {
  /** Where to send the message. Default: the queue it failed on (`redeliver-failure-queue`). */
  queue?: string;
  /**
   * The only queues the message may be sent to. Default: any queue that
   * exists and is not an error queue. A destination outside the list is
   * refused with a `SendBackRefusedError`.
   */
  allowedQueues?: readonly string[];
}

/** Options of {@link ErrorQueueOperations.scan}. */
export interface ScanOptions {
  /** Entries per page the scan yields. Default 500. */
  pageSize?: number;
}

/** What a bulk operation did with one entry it selected. */
export type EntryResult =
  /** The copy went to `queue` (confirmed) and the entry was removed. */
  | { readonly outcome: 'sent'; readonly entry: ErrorEntry; readonly queue: string }
  /** The entry was removed. */
  | { readonly outcome: 'deleted'; readonly entry: ErrorEntry }
  /** The destination was refused (see `SendBackRefusedError`); the entry stays. */
  | { readonly outcome: 'refused'; readonly entry: ErrorEntry; readonly reason: SendBackRefusal; readonly error: Error }
  /** Acting on the entry failed; it stays, or (a `SendBackIncompleteError`) its copy went out and it may stay too. */
  | { readonly outcome: 'failed'; readonly entry: ErrorEntry; readonly error: unknown }
  /** Someone else removed the entry between the read and the act (SQLite, memory). */
  | { readonly outcome: 'gone'; readonly entry: ErrorEntry };

/** Options of {@link ErrorQueueOperations.deleteEach}. */
export interface BulkOptions {
  /** Which entries to act on (required); called once for each entry the pass reads. */
  select: (entry: ErrorEntry) => boolean;
  /**
   * Told what was done to each selected entry, as soon as it is known.
   * Default: nothing. A callback that throws stops the pass (entries not
   * yet acted on stay) and the operation rejects with its error.
   */
  onResult?: (result: EntryResult) => void;
  /** Told how many entries were read, after each batch. Default: nothing. */
  onRead?: (entries: number) => void;
  /** Stops the pass when aborted: entries not yet acted on stay in the queue. Default: none. */
  signal?: AbortSignal;
}

/** Options of {@link ErrorQueueOperations.sendBackEach}: which entries, and where they may go. */
export interface BulkSendBackOptions extends BulkOptions, SendBackOptions {}

/** What a bulk operation did, in numbers. */
export interface BulkSummary {
  /** Entries read. */
  readonly read: number;
  /** Entries the predicate selected. */
  readonly selected: number;
  /** Selected entries sent back or deleted. */
  readonly done: number;
  /** Selected entries whose destination was refused; they stay. */
  readonly refused: number;
  /** Selected entries the operation failed on. */
  readonly failed: number;
  /** Selected entries someone else removed between the read and the act. */
  readonly gone: number;
  /**
   * Entries that were in the queue when the pass began and that it never
   * read, because another reader held them (RabbitMQ: another operation,
   * a dashboard, a consumer of the error queue). They may still be there.
   */
  readonly unseen: number;
  /** Whether the pass was stopped by `signal`: entries after the last one read were not read. */
  readonly interrupted: boolean;
}

/**
 * What an operator does with an error queue. An optional transport
 * capability: `transport.errorQueue`.
 */
export interface ErrorQueueOperations {
  /** Entries in the error queue. */
  count(errorQueue: string): Promise<number>;
  /**
   * Every entry, oldest first, in pages of `pageSize`, read in one pass:
   * linear in the queue's size. Reads at most the entries the queue held
   * when the pass began; entries that arrive during it are not included.
   * Stopping the iteration early (or throwing from the loop) ends the pass
   * and leaves the queue as it was.
   */
  scan(errorQueue: string, options?: ScanOptions): AsyncIterable<ErrorEntry[]>;
  /**
   * Sends back every entry `options.select` picks, in one pass of the queue
   * (see {@link scan}), each as {@link sendBack} would: the copy is
   * confirmed before the entry goes. Each outcome goes to
   * `options.onResult`; resolves the totals.
   */
  sendBackEach(errorQueue: string, options: BulkSendBackOptions): Promise<BulkSummary>;
  /** Removes every entry `options.select` picks, in one pass of the queue; resolves the totals. */
  deleteEach(errorQueue: string, options: BulkOptions): Promise<BulkSummary>;
  /** Entries, oldest first. Made for a page at a time: a transport may read the queue up to the page. */
  browse(errorQueue: string, options?: BrowseOptions): Promise<ErrorEntry[]>;
  /** One entry, or undefined when no entry has that key. */
  get(errorQueue: string, key: string): Promise<ErrorEntry | undefined>;
  /**
   * Sends the message back with its retry state reset, then removes the
   * entry: the copy is confirmed before the entry goes, and a second call
   * for the same key finds nothing and sends nothing. Resolves the queue it
   * was sent to, or undefined when no entry has that key.
   *
   * The destination must already exist (a send-back never creates a queue),
   * must not be an error queue, and must be in `options.allowedQueues` when
   * given; otherwise it rejects with a `SendBackRefusedError` and the entry
   * stays. What "exists" means is the transport's: on RabbitMQ the broker
   * has the queue; on SQLite a message was ever sent to it or a consumer
   * ever consumed it through that file; in memory the same, in this process.
   */
  sendBack(errorQueue: string, key: string, options?: SendBackOptions): Promise<string | undefined>;
  /** Removes one entry; resolves whether it was there. */
  delete(errorQueue: string, key: string): Promise<boolean>;
  /** Removes every entry; resolves how many. */
  purge(errorQueue: string): Promise<number>;
  /**
   * Moves up to `limit` of the oldest entries no consumer holds to another
   * store: reads them, waits for `store(entries)` to resolve, then removes
   * exactly those entries; when `store` rejects nothing is removed. Resolves
   * how many entries were handed to `store`. An entry removed by someone else
   * meanwhile is handed over all the same (the other store keys entries, so
   * it keeps one). Present where reading a queue has no side effects (SQLite,
   * JetStream, RocketMQ): the error store's ingester then moves entries in bulk instead
   * of consuming them one by one. JetStream and RocketMQ cannot tell which
   * entries a consumer of the error queue holds, and move those too.
   */
  drain?(errorQueue: string, limit: number, store: (entries: ErrorEntry[]) => Promise<void>): Promise<number>;
}
