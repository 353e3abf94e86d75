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

/**
 * What an operator does with an error queue. An optional transport
 * capability: `transport.errorQueue`.
 */
export interface ErrorQueueOperations {
  /** Entries in the error queue. */
  count(errorQueue: string): Promise<number>;
  /** Entries, oldest first. */
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
   * it keeps one). Present where reading a queue has no side effects (SQLite):
   * the error store's ingester then moves entries in bulk instead of
   * consuming them one by one.
   */
  drain?(errorQueue: string, limit: number, store: (entries: ErrorEntry[]) => Promise<void>): Promise<number>;
}
