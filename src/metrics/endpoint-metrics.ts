import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EndpointStats } from '../endpoint/endpoint.js';
import type { EndpointEvents } from '../endpoint/events.js';
import type { FlowState } from '../flow/controller.js';
import { promClient } from './prom-client.js';

/** What metrics read from an endpoint: an {@link Endpoint} fits. */
export interface InstrumentableEndpoint {
  readonly config: { readonly name: string; readonly queue: string };
  readonly stats: EndpointStats;
  readonly flowState: FlowState;
  on<K extends keyof EndpointEvents>(event: K, listener: (args: EndpointEvents[K]) => void): () => void;
}

/** Options of {@link instrumentEndpoint}. */
export interface EndpointMetricsOptions {
  /** The prom-client registry to register the metrics in. Default prom-client's global `register`. */
  registry?: Registry;
  /** Prefix of every metric name. Default `redeliver_`. */
  prefix?: string;
  /**
   * Upper bounds of the handler-duration histogram buckets, in seconds.
   * Default 5 ms to 60 s: 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60.
   */
  durationBuckets?: readonly number[];
}

/** The metrics of one instrumented endpoint. */
export interface EndpointMetrics {
  /** The registry the metrics are registered in. */
  readonly registry: Registry;
  /**
   * Stops counting this endpoint's events and drops it from the gauges.
   * Its counters keep their values for the life of the registry.
   */
  stop(): void;
}

/** The default histogram buckets, in seconds. */
export const DEFAULT_DURATION_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Longest label value written for a reason; reasons are meant to be a small fixed set. */
const MAX_REASON_CHARS = 100;

type Labels = 'endpoint' | 'queue';

/** The metrics every endpoint in one registry shares, told apart by their `endpoint` and `queue` labels. */
interface MetricSet {
  readonly endpoints: Set<InstrumentableEndpoint>;
  readonly handled: Counter<Labels>;
  readonly immediateRetries: Counter<Labels>;
  readonly delayedRetries: Counter<Labels>;
  readonly requeued: Counter<Labels>;
  readonly deferred: Counter<Labels | 'reason'>;
  readonly deadLettered: Counter<Labels | 'reason'>;
  readonly discarded: Counter<Labels | 'reason'>;
  readonly duplicates: Counter<Labels>;
  readonly settlementFailures: Counter<Labels | 'action'>;
  readonly duration: Histogram<Labels>;
  readonly gauges: readonly Gauge<Labels>[];
}

const sets = new WeakMap<Registry, Map<string, MetricSet>>();

/**
 * Counts an endpoint's events in Prometheus metrics with prom-client, and
 * exposes its flow-control state as gauges read at scrape time. Several
 * endpoints may share a registry; each gets its own `endpoint` and `queue`
 * labels. prom-client is an optional peer dependency, loaded on the first call.
 */
export function instrumentEndpoint(endpoint: InstrumentableEndpoint, options: EndpointMetricsOptions = {}): EndpointMetrics {
  const prom = promClient();
  const registry = options.registry ?? prom.register;
  const prefix = options.prefix ?? 'redeliver_';
  if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$|^$/.test(prefix)) throw new TypeError(`metric prefix '${prefix}' is not a valid Prometheus name prefix`);
  let byPrefix = sets.get(registry);
  if (!byPrefix) sets.set(registry, (byPrefix = new Map()));
  let set = byPrefix.get(prefix);
  if (!set) byPrefix.set(prefix, (set = createMetricSet(registry, prefix, options.durationBuckets ?? DEFAULT_DURATION_BUCKETS)));
  if (set.endpoints.has(endpoint)) throw new Error(`endpoint ${endpoint.config.name} is already instrumented in this registry`);
  const metrics = set;

  const base = { endpoint: endpoint.config.name, queue: endpoint.config.queue };
  for (const counter of [metrics.handled, metrics.immediateRetries, metrics.delayedRetries, metrics.requeued, metrics.duplicates]) counter.inc(base, 0);
  metrics.duration.zero(base);
  metrics.endpoints.add(endpoint);

  const labels = (queue: string) => ({ endpoint: base.endpoint, queue });
  const reason = (text: string) => (text.length > MAX_REASON_CHARS ? text.slice(0, MAX_REASON_CHARS) : text);
  const unsubscribe = [
    endpoint.on('handled', (e) => {
      metrics.handled.inc(labels(e.queue));
      metrics.duration.observe(labels(e.queue), Math.max(0, e.durationMs) / 1000);
    }),
    endpoint.on('immediateRetry', (e) => metrics.immediateRetries.inc(labels(e.queue))),
    endpoint.on('delayedRetry', (e) => metrics.delayedRetries.inc(labels(e.queue))),
    endpoint.on('requeued', (e) => metrics.requeued.inc(labels(e.queue))),
    endpoint.on('deferred', (e) => metrics.deferred.inc({ ...labels(e.queue), reason: e.reason })),
    endpoint.on('deadLettered', (e) => metrics.deadLettered.inc({ ...labels(e.queue), reason: reason(e.reason) })),
    endpoint.on('discarded', (e) => metrics.discarded.inc({ ...labels(e.queue), reason: reason(e.reason) })),
    endpoint.on('duplicate', (e) => metrics.duplicates.inc(labels(e.queue))),
    endpoint.on('settlementFailed', (e) => metrics.settlementFailures.inc({ ...labels(e.queue), action: e.action })),
  ];
  let stopped = false;
  return {
    registry,
    stop() {
      if (stopped) return;
      stopped = true;
      for (const off of unsubscribe) off();
      metrics.endpoints.delete(endpoint);
    },
  };
}

function createMetricSet(registry: Registry, prefix: string, buckets: readonly number[]): MetricSet {
  const { Counter, Gauge, Histogram } = promClient();
  const registers = [registry];
  const endpoints = new Set<InstrumentableEndpoint>();
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]) =>
    new Counter<L>({ name: `${prefix}${name}`, help, labelNames, registers });
  const gauge = (name: string, help: string, read: (flow: FlowState, stats: EndpointStats) => number | undefined) =>
    new Gauge<Labels>({
      name: `${prefix}${name}`,
      help,
      labelNames: ['endpoint', 'queue'],
      registers,
      collect() {
        this.reset();
        for (const e of endpoints) {
          const value = read(e.flowState, e.stats);
          if (value !== undefined) this.set({ endpoint: e.config.name, queue: e.config.queue }, value);
        }
      },
    });
  const base = ['endpoint', 'queue'] as const;
  return {
    endpoints,
    handled: counter('handled_total', 'Messages handled and acknowledged.', base),
    immediateRetries: counter('immediate_retries_total', 'Handler failures retried at once, in process.', base),
    delayedRetries: counter('delayed_retries_total', 'Handler failures retried later, with the delay held by the broker.', base),
    requeued: counter('requeued_total', 'Messages the handler asked to come back later.', base),
    deferred: counter('deferred_total', 'Immediate retries handed back to the broker by flow control, by reason (backoff, rate-limit, budget, in-progress).', [...base, 'reason']),
    deadLettered: counter('dead_lettered_total', 'Messages moved to the error queue, by reason.', [...base, 'reason']),
    discarded: counter('discarded_total', 'Messages a policy discarded, by reason.', [...base, 'reason']),
    duplicates: counter('duplicates_total', 'Copies of already handled messages acknowledged without running the handler.', base),
    settlementFailures: counter('settlement_failures_total', 'Settlements the broker refused (the broker delivers the message again), by action.', [...base, 'action']),
    duration: new Histogram<Labels>({
      name: `${prefix}handler_duration_seconds`,
      help: 'Duration of handler attempts that succeeded, in seconds.',
      labelNames: base,
      buckets: [...buckets],
      registers,
    }),
    gauges: [
      gauge('consumer_backoff_level', 'Consumer backoff level (0 when healthy).', (f) => f.backoffCounter),
      gauge('consumer_backing_off', '1 while the consumer is paused by consumer backoff.', (f) => (f.backingOff ? 1 : 0)),
      gauge('consumer_probing', '1 while the consumer takes one message at a time after a backoff.', (f) => (f.probing ? 1 : 0)),
      gauge('rate_limited', '1 while automatic rate limiting is on.', (f) => (f.rateLimited ? 1 : 0)),
      gauge('consecutive_failures', 'Handler attempts that failed in a row.', (f) => f.consecutiveFailures),
      gauge('retry_budget_tokens', 'Immediate retries the retry budget allows now (only with a retry budget).', (f) => f.budgetTokens),
      gauge('in_flight', 'Messages being handled now.', (_f, s) => s.inFlight),
    ],
  };
}
