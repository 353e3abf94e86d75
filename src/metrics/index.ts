/**
 * Prometheus metrics for endpoints, with prom-client (an optional peer
 * dependency, loaded on first use).
 */
export { instrumentEndpoint, DEFAULT_DURATION_BUCKETS, type EndpointMetrics, type EndpointMetricsOptions, type InstrumentableEndpoint } from './endpoint-metrics.js';
export { startMetricsServer, type MetricsServer, type MetricsServerOptions } from './server.js';
