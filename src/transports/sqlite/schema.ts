import Database from 'better-sqlite3';
import { SYNC_BUSY_WAIT_MS } from './busy.js';
import type { ResolvedSqliteOptions } from './options.js';

/** The schema version this code writes, kept in SQLite's `user_version`. */
export const SCHEMA_VERSION = 2;

/**
 * The store. Times are epoch milliseconds from the transport's clock.
 *
 * - `messages`: one row per message on a work queue. `visible_at` is when the
 *   row may next be claimed: its due time while it waits, its lease expiry
 *   while a consumer holds it. `lease` is the holder's token, NULL when free.
 *   The `_due` indexes order rows by (queue, visible_at, seq): SQLite ends
 *   every index entry with the rowid, which `seq` is, so it is not listed.
 * - `error_messages`: the error queues, with the failure facts copied out of
 *   the `redeliver-failure-*` headers into columns an operator can query.
 *   `seq` is an entry's key, AUTOINCREMENT so it is never given to another
 *   entry: an operator's key, or an ingester's, acts on its own entry or on
 *   none.
 * - `queues`: every queue name seen, and whether it is an error queue.
 * - `meta`: counters, such as the source of lease tokens.
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS queues (
  name TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('queue', 'error'))
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS messages (
  seq INTEGER PRIMARY KEY,
  queue TEXT NOT NULL,
  id TEXT NOT NULL,
  body BLOB NOT NULL,
  headers TEXT NOT NULL,
  visible_at INTEGER NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 0,
  lease INTEGER,
  enqueued_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_due ON messages (queue, visible_at);

CREATE TABLE IF NOT EXISTS error_messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  queue TEXT NOT NULL,
  id TEXT NOT NULL,
  body BLOB NOT NULL,
  headers TEXT NOT NULL,
  visible_at INTEGER NOT NULL,
  deliveries INTEGER NOT NULL DEFAULT 0,
  lease INTEGER,
  enqueued_at INTEGER NOT NULL,
  original_queue TEXT,
  failed_at TEXT,
  reason TEXT,
  error_name TEXT
);
CREATE INDEX IF NOT EXISTS error_messages_due ON error_messages (queue, visible_at);
CREATE INDEX IF NOT EXISTS error_messages_reason ON error_messages (queue, reason, error_name);

CREATE TABLE IF NOT EXISTS meta (
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (key, value) VALUES ('lease_token', 0);
`;

/**
 * Opens the file, sets WAL mode, the durability and the busy timeout, and
 * creates the schema if it is missing. Safe to call from several processes
 * on the same file. Creating the schema waits up to `busyTimeoutMs` for
 * another connection's write lock, synchronously; a file whose schema is
 * current is opened without taking the lock. Afterwards a statement waits
 * synchronously at most {@link SYNC_BUSY_WAIT_MS}: longer waits are the
 * callers' asynchronous retries.
 */
export function openDatabase(options: ResolvedSqliteOptions): Database.Database {
  const db = new Database(options.path, { timeout: options.busyTimeoutMs });
  try {
    if (options.path !== ':memory:') db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${options.durability}`);
    if (db.pragma('user_version', { simple: true }) !== SCHEMA_VERSION) {
      db.transaction(() => {
        const version = db.pragma('user_version', { simple: true }) as number;
        if (version > SCHEMA_VERSION) {
          throw new Error(
            `SqliteTransport: ${options.path} has schema version ${version}, newer than this redeliver's ${SCHEMA_VERSION}; upgrade redeliver`,
          );
        }
        if (version === 1) keepErrorKeysUnique(db);
        else db.exec(SCHEMA);
        if (version < SCHEMA_VERSION) db.pragma(`user_version = ${SCHEMA_VERSION}`);
      }).immediate();
    }
    db.pragma(`busy_timeout = ${Math.min(options.busyTimeoutMs, SYNC_BUSY_WAIT_MS)}`);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** The columns of `error_messages`, the same in every schema version. */
const ERROR_COLUMNS = 'seq, queue, id, body, headers, visible_at, deliveries, lease, enqueued_at, original_queue, failed_at, reason, error_name';

/**
 * Version 1 to 2: `error_messages.seq` becomes AUTOINCREMENT. SQLite cannot
 * alter a key, so the table is rebuilt: renamed, created anew (with its
 * indexes) by the schema, its rows copied with their keys, and dropped. The
 * new table's counter starts after the highest key kept. Runs inside the
 * schema transaction, in place of creating the schema.
 */
function keepErrorKeysUnique(db: Database.Database): void {
  db.exec(`
    DROP INDEX IF EXISTS error_messages_due;
    DROP INDEX IF EXISTS error_messages_reason;
    ALTER TABLE error_messages RENAME TO error_messages_v1;
  `);
  db.exec(SCHEMA);
  db.exec(`
    INSERT INTO error_messages (${ERROR_COLUMNS}) SELECT ${ERROR_COLUMNS} FROM error_messages_v1;
    DROP TABLE error_messages_v1;
  `);
}
