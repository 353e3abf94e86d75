/**
 * The error store's part of `redeliver stats --store <file>`: entries by
 * error queue and status, read from the store next to the broker's depths.
 */
import type { Command } from 'commander';
import { countsByQueue, type QueueCounts } from '../../error-store/counts.js';
import { oneLine, table } from '../format.js';
import { ioOf } from '../program.js';
import { storePath, withStore } from '../store-session.js';

/** What the store holds, for `stats`. */
export interface StoreStats {
  readonly store: string;
  readonly errorQueues: QueueCounts[];
}

/** The store's counts when `--store` or `$REDELIVER_STORE` names one, else undefined. */
export async function readStoreStats(command: Command, opts: { store?: string }): Promise<StoreStats | undefined> {
  const store = storePath(opts, ioOf(command).env ?? process.env);
  if (!store) return undefined;
  return withStore(command, store.path, { create: false }, async (s) => ({ store: s.path, errorQueues: countsByQueue(s) }));
}

/** The store's counts as a table, one row per error queue. */
export function storeStatsLines(stats: StoreStats): string[] {
  const title = `error store ${oneLine(stats.store)}`;
  if (stats.errorQueues.length === 0) return [`${title}: empty`];
  const statuses = ['failed', 'retrying', 'retried', 'replaced', 'deleted'] as const;
  return [
    `${title}:`,
    ...table(
      [{ title: 'ERROR QUEUE', max: 60 }, ...statuses.map((s) => ({ title: s.toUpperCase(), align: 'right' as const })), { title: 'TOTAL', align: 'right' }],
      stats.errorQueues.map((q) => [q.errorQueue, ...statuses.map((s) => String(q.byStatus[s])), String(q.total)]),
    ),
  ];
}
