export { ErrorStore, type ExportedEntry, type ErrorStoreOptions, type EntryPage, type SearchOptions, type FailureRateOptions, type RetryRecord } from './store.js';
export { Ingester, type IngesterOptions, type IngesterStats } from './ingester.js';
export type { EntryFilter, EntrySort } from './filter.js';
export type { StoredEntry, StoredEntryDetail, StoredGroup, EntryStatus, RetryOutcome, FailureRate, IngestEntry, IngestResult } from './types.js';
export { RetryJobs, listRetryJobs, MAX_IN_FLIGHT, type RetrySelection, type RetryJobOptions, type RetryJobView, type RetryJobState, type RetryJobItem, type RunOptions, type RetryJobsOptions } from './retry-jobs.js';
export type { CanaryOptions, CanaryView } from './canary.js';
export { editRequestId, listEdits, type EditRequest, type EditResult, type EditRecord } from './edit.js';
export { parseRate } from './rate-limiter.js';
