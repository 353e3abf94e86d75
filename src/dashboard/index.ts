/**
 * The operations dashboard: failure groups of the error queues, each
 * message's story, retry and delete, and live counters, served by node:http.
 */
export { createDashboard, type Dashboard } from './server.js';
export { DashboardOptionError, isLoopbackHost, type DashboardOptions, type DashboardEndpoint } from './options.js';
export type { GroupView, EntrySummary } from './groups.js';
export type { EntryDetail, BodyPreview } from './entry-view.js';
export type { StatsView } from './stats.js';
