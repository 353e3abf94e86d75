/**
 * The tables retry jobs keep next to the entries:
 * - `retry_jobs`: one row per job: who asked, the selection, the options,
 *   the snapshot cut-off, counters, state;
 * - `retry_job_items`: the job's snapshot, one row per entry (by `seq`),
 *   with what happened to it (`sent`, `already-handled`, `refused`,
 *   `failed`; NULL while pending). A resumed job continues with the
 *   pending rows, so it never sends an entry twice unless a crash fell
 *   between a send and its record (see docs/error-store.md).
 * - `edits`: each edit-and-retry, keyed by its request id.
 */
import type Database from 'better-sqlite3';

const TABLES = `
CREATE TABLE IF NOT EXISTS retry_jobs (
  id TEXT PRIMARY KEY,
  created_at INTEGER NOT NULL,
  by TEXT NOT NULL,
  selection TEXT NOT NULL,
  options TEXT NOT NULL,
  snapshot_seq INTEGER NOT NULL,
  total INTEGER NOT NULL,
  sent INTEGER NOT NULL DEFAULT 0,
  refused INTEGER NOT NULL DEFAULT 0,
  already_handled INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  state TEXT NOT NULL,
  stop_reason TEXT,
  canary TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS retry_jobs_by_time ON retry_jobs (created_at);
CREATE TABLE IF NOT EXISTS retry_job_items (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  key TEXT NOT NULL,
  result TEXT CHECK (result IN ('sent', 'already-handled', 'refused', 'failed')),
  detail TEXT,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS edits (
  request_id TEXT PRIMARY KEY,
  key TEXT NOT NULL,
  by TEXT NOT NULL,
  at INTEGER NOT NULL,
  sent_to TEXT NOT NULL,
  message_id TEXT NOT NULL,
  body_size_before INTEGER NOT NULL,
  body_size_after INTEGER NOT NULL,
  changed_headers TEXT NOT NULL,
  body_before BLOB,
  body_after BLOB
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS edits_by_key ON edits (key);
`;

const ready = new WeakSet<Database.Database>();

/** Creates the tables on first use of a store file. */
export function ensureRetryTables(db: Database.Database): void {
  if (ready.has(db)) return;
  db.exec(TABLES);
  ready.add(db);
}
