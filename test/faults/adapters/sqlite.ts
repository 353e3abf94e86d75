/**
 * The fault suite on SQLite: the store is a file the worker opens in its own
 * process, so a broker kill is the worker's kill and there is no connection
 * to cut, no broker memory alarm, no queue object to delete and no cluster.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { SqliteTransport } from '../../../src/transports/sqlite/index.js';
import { ingestErrorIds } from './error-ids.js';
import type { FaultAdapter, Scope } from './types.js';

const SKIPS: Record<string, string> = {
  'broker-stall': 'no broker process to freeze: the store lives in the worker',
  'connection-cut': 'no connection: the store is a file opened in the worker process',
  'memory-alarm': 'no broker, so no broker memory alarm',
  'queue-deleted': 'queues are rows of one file, not objects an operator deletes',
  'error-queue-full': 'the SQLite error queue has no length bound',
  'settlement-refused':
    'a locked database (the one refusal SQLite has) stops every statement of the worker, fetches and lease renewals too, not its settlements only: that is a stall of the store, not a refused copy',
  'cluster-leader-kill': 'SQLite is one file on one machine: no cluster',
};

/** The SQLite adapter: one database file per scenario. */
export class SqliteFaultAdapter implements FaultAdapter {
  readonly transport = 'sqlite';

  skipReason(scenario: string): string | undefined {
    return SKIPS[scenario];
  }

  async start(): Promise<void> {}

  async stop(): Promise<void> {}

  async scope(label: string, dir: string): Promise<Scope> {
    const path = join(dir, `${label}.db`);
    const queue = label;
    const errorQueue = `${label}.error`;
    // The harness's own handle on the file: creates it, and reads the error queue and depths.
    const harness = new SqliteTransport({ path });
    return {
      label,
      queue,
      errorQueue,
      cliTarget: path,
      spec: () => ({ kind: 'sqlite', path }),
      errorCount: () => harness.errorQueue.count(errorQueue),
      async delayedCount() {
        const depths = await harness.inspection.queueDepths([queue]);
        return depths.reduce((sum, depth) => sum + depth.delayed, 0);
      },
      errorIds: () => ingestErrorIds(harness, errorQueue, join(dir, 'error-store.db')),
      async pendingIds() {
        // Straight from the file: every row still in the work queue, due or delayed, leased or not.
        const db = new Database(path, { readonly: true, fileMustExist: true });
        try {
          return (db.prepare('SELECT id FROM messages WHERE queue = ?').all(queue) as { id: string }[]).map((row) => row.id);
        } finally {
          db.close();
        }
      },
      cleanup: () => harness.close(),
    };
  }
}
