/**
 * The tables retry jobs keep next to the entries:
 * - `retry_jobs`: one row per job: who asked, the selection, the options,
 *   the snapshot cut-off, counters, state, and the run that holds the job
 *   (`run_id`) until when (`lease_until`): one run at a time, in any process;
 * - `retry_job_items`: the job's snapshot, one row per entry (by `seq`),
 *   with what happened to it (`sent`, `already-handled`, `refused`,
 *   `failed`; NULL while pending). A resumed job continues with the
 *   pending rows, so it never sends an entry twice unless a crash fell
 *   between a send and its record (see docs/error-store.md).
 * - `edits`: each edit-and-retry, keyed by its request id, recorded
 *   `sending` (until `until`) before the copy is sent, then `sent` or
 *   `failed` (with the `error`).
 *
 * {@link RETRY_TABLES_V1} is their first layout, which schema step 2
 * creates (earlier builds created it on first use) and then extends.
 */

/** The retry tables as schema version 1 created them on first use. */
export const RETRY_TABLES_V1 = `
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
