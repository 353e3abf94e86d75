import type { ErrorStore } from './store.js';
import type { EntryStatus } from './types.js';

/** How many entries an error queue's part of the store holds, by status. */
export interface QueueCounts {
  readonly errorQueue: string;
  /** Entries by status; a status without entries is 0. */
  readonly byStatus: Readonly<Record<EntryStatus, number>>;
  /** Entries of every status. */
  readonly total: number;
}

/** Entry counts by error queue and status, error queues by name. Served by the `(error_queue, status, ...)` index, without reading entries. */
export function countsByQueue(store: ErrorStore): QueueCounts[] {
  const rows = store.database
    .prepare<[], { error_queue: string; status: EntryStatus; n: number }>('SELECT error_queue, status, count(*) AS n FROM entries GROUP BY error_queue, status ORDER BY error_queue')
    .all();
  const byQueue = new Map<string, Record<EntryStatus, number>>();
  for (const row of rows) {
    let counts = byQueue.get(row.error_queue);
    if (!counts) byQueue.set(row.error_queue, (counts = { failed: 0, retrying: 0, retried: 0, replaced: 0, deleted: 0 }));
    counts[row.status] = row.n;
  }
  return [...byQueue].map(([errorQueue, byStatus]) => ({ errorQueue, byStatus, total: Object.values(byStatus).reduce((a, b) => a + b, 0) }));
}
