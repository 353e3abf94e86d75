/**
 * The operations dashboard: failure groups of the error queues, each
 * message's story, retry and delete, and live counters, served by node:http.
 */
export { createDashboard, type Dashboard } from './server.js';
export { DashboardOptionError, isLoopbackHost, type DashboardOptions, type DashboardEndpoint, type DashboardIngestOptions } from './options.js';
export type { StoreEntryView, StoreGroupView, StoreEntryDetail } from './store-api.js';
export type { JobView } from './store-retries.js';
export type { GroupView, EntrySummary } from './groups.js';
export type { EntryDetail, BodyPreview } from './entry-view.js';
export type { StatsView } from './stats.js';
