/**
 * The error store's tables. One row per error-queue entry ever ingested,
 * keyed by its entry key; operator actions change a row's status instead of
 * deleting it, so "sent back before" and "failed again after retry" stay
 * visible. See docs/error-store.md.
 *
 * - `entries`: the entry (headers as JSON, body), the failure facts copied
 *   out of the `redeliver-failure-*` headers into columns the filters use,
 *   and what operators did with it. Headers and body are the last columns:
 *   a row of a few KiB spills into overflow pages, and SQLite reads a
 *   column stored after them only by walking those pages, so every other
 *   column stays on the row's first page (`deleted_at` and `deleted_by`,
 *   added later, come after them: they are read only with the body, and a
 *   deleted row has none). `seq` is the order of ingestion and the
 *   snapshot cut-off of bulk actions; `version` is the store's change
 *   counter when the row last changed, for live updates.
 * - `entries_text`: a full-text index (FTS5, trigram tokenizer) of the
 *   columns the text filter searches (message, error name, message id,
 *   key), with `entries` as its content and `seq` as its rowid. It is
 *   filled outside the ingest transaction, up to the mark
 *   `meta.text_indexed` (text-index.ts); triggers keep it in step with a
 *   change or removal of a row at or below the mark.
 * - `meta`: the change counter and the full-text index's mark.
 * - the retry tables (`retry_jobs`, `retry_job_items`, `edits`): see
 *   retry-job-tables.ts.
 *
 * Each layout change is one numbered step of {@link MIGRATIONS}; the file's
 * `user_version` says how many have run, and opening a file runs the rest.
 */
import Database from 'better-sqlite3';
import { RETRY_TABLES_V1 } from './retry-job-tables.js';
import { registerTextSearch } from './text-index.js';

/**
 * The steps from one layout to the next: step `n` (index `n - 1`) takes a
 * file from schema version `n - 1` to `n`. Append a step for a new change;
 * never edit one that shipped.
 */
const MIGRATIONS: readonly string[] = [
  // 1: the entries and the change counter.
  `
CREATE TABLE IF NOT EXISTS entries (
  seq INTEGER PRIMARY KEY,
  key TEXT NOT NULL UNIQUE,
  error_queue TEXT NOT NULL,
  message_id TEXT NOT NULL,
  original_queue TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  host TEXT NOT NULL,
  reason TEXT NOT NULL,
  error_name TEXT NOT NULL,
  message TEXT NOT NULL,
  top_frame TEXT NOT NULL,
  signature TEXT NOT NULL,
  failed_at INTEGER NOT NULL,
  ingested_at INTEGER NOT NULL,
  replay_count INTEGER NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('failed', 'retrying', 'retried', 'replaced', 'deleted')),
  retried_count INTEGER NOT NULL DEFAULT 0,
  last_retried_at INTEGER,
  last_retried_by TEXT,
  retried_to TEXT,
  outcome TEXT CHECK (outcome IN ('handled', 'failed-again')),
  outcome_at INTEGER,
  claim TEXT,
  claim_until INTEGER,
  version INTEGER NOT NULL,
  headers TEXT NOT NULL,
  body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_time ON entries (status, failed_at);
CREATE INDEX IF NOT EXISTS entries_by_group ON entries (status, signature, failed_at);
CREATE INDEX IF NOT EXISTS entries_by_queue ON entries (error_queue, status, failed_at);
CREATE INDEX IF NOT EXISTS entries_by_message ON entries (message_id);
CREATE INDEX IF NOT EXISTS entries_by_version ON entries (version);
CREATE INDEX IF NOT EXISTS entries_retried ON entries (signature, outcome) WHERE retried_count > 0;

CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (key, value) VALUES ('version', 0);
`,
  // 2: the retry tables (version 1 created them on first use, so they may exist), a job's run lease, edits recorded before they are sent.
  `${RETRY_TABLES_V1}
ALTER TABLE retry_jobs ADD COLUMN run_id TEXT;
ALTER TABLE retry_jobs ADD COLUMN lease_until INTEGER;
ALTER TABLE edits ADD COLUMN state TEXT NOT NULL DEFAULT 'sent' CHECK (state IN ('sending', 'sent', 'failed'));
ALTER TABLE edits ADD COLUMN until INTEGER;
ALTER TABLE edits ADD COLUMN error TEXT;
CREATE INDEX IF NOT EXISTS entries_by_claim ON entries (claim) WHERE claim IS NOT NULL;
`,
  // 3: the full-text index of the text filter, filled from the entries already stored.
  `
CREATE VIRTUAL TABLE entries_text USING fts5(message, error_name, message_id, key, content='entries', content_rowid='seq', tokenize='trigram');
CREATE TRIGGER entries_text_insert AFTER INSERT ON entries BEGIN
  INSERT INTO entries_text (rowid, message, error_name, message_id, key) VALUES (new.seq, new.message, new.error_name, new.message_id, new.key);
END;
CREATE TRIGGER entries_text_delete AFTER DELETE ON entries BEGIN
  INSERT INTO entries_text (entries_text, rowid, message, error_name, message_id, key) VALUES ('delete', old.seq, old.message, old.error_name, old.message_id, old.key);
END;
CREATE TRIGGER entries_text_update AFTER UPDATE OF message, error_name, message_id, key ON entries BEGIN
  INSERT INTO entries_text (entries_text, rowid, message, error_name, message_id, key) VALUES ('delete', old.seq, old.message, old.error_name, old.message_id, old.key);
  INSERT INTO entries_text (rowid, message, error_name, message_id, key) VALUES (new.seq, new.message, new.error_name, new.message_id, new.key);
END;
INSERT INTO entries_text (entries_text) VALUES ('rebuild');
`,
  // 4: who deleted an entry, and when (after the body: read only with it, on an entry's own page).
  `
ALTER TABLE entries ADD COLUMN deleted_at INTEGER;
ALTER TABLE entries ADD COLUMN deleted_by TEXT;
`,
  // 5: the full-text index filled outside the ingest transaction, up to a mark; every entry stored so far is indexed.
  `
DROP TRIGGER entries_text_insert;
DROP TRIGGER entries_text_delete;
DROP TRIGGER entries_text_update;
INSERT INTO meta (key, value) SELECT 'text_indexed', coalesce(max(seq), 0) FROM entries;
CREATE TRIGGER entries_text_delete AFTER DELETE ON entries WHEN old.seq <= (SELECT value FROM meta WHERE key = 'text_indexed') BEGIN
  INSERT INTO entries_text (entries_text, rowid, message, error_name, message_id, key) VALUES ('delete', old.seq, old.message, old.error_name, old.message_id, old.key);
END;
CREATE TRIGGER entries_text_update AFTER UPDATE OF message, error_name, message_id, key ON entries WHEN old.seq <= (SELECT value FROM meta WHERE key = 'text_indexed') BEGIN
  INSERT INTO entries_text (entries_text, rowid, message, error_name, message_id, key) VALUES ('delete', old.seq, old.message, old.error_name, old.message_id, old.key);
  INSERT INTO entries_text (rowid, message, error_name, message_id, key) VALUES (new.seq, new.message, new.error_name, new.message_id, new.key);
END;
`,
];

/** The schema version this build writes: the number of {@link MIGRATIONS}. */
export const ERROR_STORE_SCHEMA_VERSION = MIGRATIONS.length;

/**
 * Opens (creating if needed) an error store file: WAL mode, full
 * durability (an ingested entry is acknowledged to its broker only after
 * the commit, so the commit must survive a power cut), a short synchronous
 * busy wait, the SQL function text search needs, and the schema, migrating a file an earlier build made (in one
 * transaction). A file from a newer build is refused, as is a SQLite file of
 * something else.
 */
export function openStoreDatabase(path: string, syncBusyWaitMs: number): Database.Database {
  const db = new Database(path, { timeout: 5_000 });
  try {
    if (path !== ':memory:') db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    if (db.pragma('user_version', { simple: true }) !== ERROR_STORE_SCHEMA_VERSION) {
      db.transaction(() => {
        const version = db.pragma('user_version', { simple: true }) as number;
        if (version > ERROR_STORE_SCHEMA_VERSION) {
          throw new Error(`ErrorStore: ${path} has schema version ${version}, newer than this redeliver's ${ERROR_STORE_SCHEMA_VERSION}; upgrade redeliver`);
        }
        const tables = db.prepare<[], { name: string }>(`SELECT name FROM sqlite_master WHERE type = 'table'`).all().map((t) => t.name);
        if (version === 0 && tables.length > 0 && !tables.includes('entries')) {
          throw new Error(`ErrorStore: ${path} is a SQLite file of something else (tables: ${tables.slice(0, 5).join(', ')}); name a new file for the error store`);
        }
        for (const step of MIGRATIONS.slice(version)) db.exec(step);
        db.pragma(`user_version = ${ERROR_STORE_SCHEMA_VERSION}`);
      }).immediate();
    }
    db.pragma(`busy_timeout = ${syncBusyWaitMs}`);
    registerTextSearch(db);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}
