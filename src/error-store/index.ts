export { ErrorStore, type ExportedEntry, type ErrorStoreOptions, type EntryPage, type SearchOptions, type FailureRateOptions, type RetryRecord } from './store.js';
export { Ingester, type IngesterOptions, type IngesterStats } from './ingester.js';
export type { EntryFilter, EntrySort } from './filter.js';
export type { StoredEntry, StoredEntryDetail, StoredGroup, EntryStatus, RetryOutcome, FailureRate, IngestEntry, IngestResult } from './types.js';
