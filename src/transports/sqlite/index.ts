/**
 * `redeliver/sqlite`: the embedded transport, queues in one SQLite file.
 * Failure semantics are in docs/sqlite.md.
 */
export { SqliteTransport } from './transport.js';
export type { SqliteTransportOptions, SqliteDurability } from './options.js';
export { SQLITE_DEFAULTS } from './options.js';
export { LeaseLostError, AlreadySettledError, TransportClosedError, DatabaseBusyError } from './errors.js';
export { SqliteDeduplicationStore, type SqliteDeduplicationStoreOptions } from '../../dedup/sqlite-store.js';
