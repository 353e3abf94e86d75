import type { EndpointStats } from '../endpoint/endpoint.js';
import type { FlowState } from '../flow/controller.js';
import type { ErrorStore } from '../error-store/store.js';
import type { Logger } from '../logger.js';
import type { Clock } from '../time/clock.js';
import type { Transport } from '../transport/types.js';

/**
 * What the dashboard reads from an endpoint running in the same process:
 * an {@link Endpoint} fits.
 */
export interface DashboardEndpoint {
  readonly config: { readonly name: string; readonly queue: string };
  readonly stats: EndpointStats;
  readonly flowState: FlowState;
  readonly running: boolean;
}

/** How a dashboard in store mode ingests. */
export interface DashboardIngestOptions {
  /** The queue endpoints send replay outcomes to. Default none. */
  readonly outcomeQueue?: string;
}

/** Options of {@link createDashboard}. */
export interface DashboardOptions {
  /**
   * The broker or store whose error queues the dashboard shows. Without
   * `store` it needs `transport.errorQueue` (the queues are read in place);
   * with `store` it is where retries are sent. Required.
   */
  transport: Transport;
  /**
   * Serve from this error store instead of reading the error queues in place:
   * search, filters, paging, failure rates and live updates all come from
   * the store (see docs/error-store.md). A path opens the file, and
   * `close()` closes it again; a store passed in stays open. Default none
   * (in-place mode, for a quick look at small queues).
   */
  store?: ErrorStore | string;
  /**
   * With `store`: run an ingester in the dashboard process that moves the
   * `errorQueues` of `transport` into the store; `close()` stops it.
   * `outcomeQueue` is the queue endpoints send replay outcomes to (their
   * `replayOutcomeQueue`), default none. Default none (something else
   * ingests).
   */
  ingest?: boolean | DashboardIngestOptions;
  /** The error queues to show and act on. The dashboard acts on no other queue. Default `['error']`. */
  errorQueues?: readonly string[];
  /** Endpoints running in this process, whose throughput and flow-control state the dashboard shows. Default none. */
  endpoints?: readonly DashboardEndpoint[];
  /**
   * The secret every request must carry: as `Authorization: Bearer <token>`,
   * or by opening the page once with `?token=<token>`, which starts a
   * session kept in a cookie (see docs/operations-dashboard.md). At least 16
   * characters. Default a random one, made up at start and read from
   * {@link Dashboard.token}: on a loopback address too, as every user of the
   * machine can connect to it.
   */
  token?: string;
  /**
   * A secret that lets command line tools on this machine show charts on
   * the dashboard: `POST /api/charts` with `Authorization: Bearer
   * <chartToken>` and `{ title, svg }`. It grants nothing else, and the
   * dashboard token and cookie do not stand in for it. At least 16
   * characters. `redeliver dashboard` makes one up and writes it to its
   * runtime file (see docs/operations-dashboard.md). Default none: the chart
   * endpoints answer 404 and the page has no charts section.
   */
  chartToken?: string;
  /**
   * The address to listen on. Default `127.0.0.1`. On a loopback address
   * (`127.x.x.x`, `::1`, `localhost`) the Host header is checked too.
   */
  host?: string;
  /** The port to listen on. Default 0: a free port, read it from `url`. */
  port?: number;
  /**
   * The address people open the dashboard at when a reverse proxy serves
   * it, such as `https://ops.example.com/redeliver/`; the proxy passes the
   * path below it on with the prefix removed. State-changing requests must
   * then come from its origin (`Origin: https://ops.example.com`), its host
   * is accepted as the Host header, and the session cookie is scoped to its
   * path and marked `Secure` when it is https. Requests made straight to the
   * listening address keep working as without it. Default none.
   */
  publicUrl?: string;
  /**
   * The only queues "retry" may send messages to. Default: any queue that
   * exists and is not an error queue. A message whose destination is
   * refused stays in the error queue, and the answer says why.
   */
  allowedQueues?: readonly string[];
  /** Source of time for the per-minute rates and the group cache. Default the system clock. */
  clock?: Clock;
  /** In store mode: where the ingester and retry jobs log failures. Default silent. */
  logger?: Logger;
  /** How long computed failure groups are reused before the error queue is read again, in milliseconds. Default 3000. */
  groupCacheMs?: number;
  /** The most error-queue entries read to compute groups; beyond it the page says the groups are partial. Default 100 000. */
  maxScan?: number;
  /** The most bytes of a message body shown; a longer body is cut and the page says so. Default 65 536 (64 KiB). */
  bodyPreviewBytes?: number;
  /** The most connections open at once; a connection beyond it is closed at once, so a flood cannot exhaust the process. Default 64. */
  maxConnections?: number;
}

/** Dashboard options with every default filled in. */
export interface DashboardConfig {
  readonly transport: Transport;
  /** The store given, or undefined in in-place mode. */
  readonly store: ErrorStore | string | undefined;
  /** Whether to ingest, and the outcome queue; undefined when not ingesting. */
  readonly ingest: DashboardIngestOptions | undefined;
  readonly errorQueues: readonly string[];
  readonly endpoints: readonly DashboardEndpoint[];
  /** The `token` option; undefined: the dashboard makes one up when it starts. */
  readonly token: string | undefined;
  readonly chartToken: string | undefined;
  readonly host: string;
  readonly port: number;
  /** The parsed `publicUrl`, its path ending in `/`; undefined without one. */
  readonly publicUrl: URL | undefined;
  readonly allowedQueues: readonly string[] | undefined;
  readonly clock: Clock;
  readonly logger: Logger | undefined;
  readonly groupCacheMs: number;
  readonly maxScan: number;
  readonly bodyPreviewBytes: number;
  readonly maxConnections: number;
}

/** A dashboard option that cannot work, or an unsafe combination of options. */
export class DashboardOptionError extends Error {
  override readonly name = 'DashboardOptionError';
}

/** The shortest token accepted. */
export const MIN_TOKEN_LENGTH = 16;

/** Whether `host` is an address only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || h === '::ffff:127.0.0.1';
}

/** Validates options, naming the option at fault, and fills in defaults. */
export function resolveDashboardConfig(options: DashboardOptions, systemClock: Clock): DashboardConfig {
  if (typeof options !== 'object' || options === null) throw new DashboardOptionError('dashboard options must be an object');
  const { transport } = options;
  if (typeof transport !== 'object' || transport === null) throw new DashboardOptionError('transport is required');
  const store = options.store;
  if (store !== undefined && !(typeof store === 'string' ? store !== '' : typeof store === 'object' && store !== null)) {
    throw new DashboardOptionError('store must be an ErrorStore or the path of its file');
  }
  const ingest = options.ingest === undefined || options.ingest === false ? undefined : options.ingest === true ? {} : options.ingest;
  if (ingest !== undefined && store === undefined) throw new DashboardOptionError('ingest needs a store to ingest into');
  if (ingest?.outcomeQueue !== undefined && (typeof ingest.outcomeQueue !== 'string' || ingest.outcomeQueue === '')) {
    throw new DashboardOptionError('ingest.outcomeQueue must name a queue');
  }
  if (store === undefined && !transport.errorQueue) throw new DashboardOptionError(`the ${transport.name} transport cannot browse error queues (transport.errorQueue is missing)`);
  const errorQueues = [...(options.errorQueues ?? ['error'])];
  if (errorQueues.length === 0 || errorQueues.some((q) => typeof q !== 'string' || q === '')) {
    throw new DashboardOptionError('errorQueues must be a non-empty list of queue names');
  }
  const host = options.host ?? '127.0.0.1';
  if (typeof host !== 'string' || host === '') throw new DashboardOptionError('host must be a non-empty string');
  const token = options.token;
  if (token !== undefined && (typeof token !== 'string' || token.length < MIN_TOKEN_LENGTH)) {
    throw new DashboardOptionError(`token must be at least ${MIN_TOKEN_LENGTH} characters (try: openssl rand -hex 16)`);
  }
  const chartToken = options.chartToken;
  if (chartToken !== undefined && (typeof chartToken !== 'string' || chartToken.length < MIN_TOKEN_LENGTH)) {
    throw new DashboardOptionError(`chartToken must be at least ${MIN_TOKEN_LENGTH} characters`);
  }
  const port = options.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new DashboardOptionError('port must be a whole number from 0 to 65535');
  const allowedQueues = options.allowedQueues === undefined ? undefined : [...options.allowedQueues];
  if (allowedQueues !== undefined && allowedQueues.some((q) => typeof q !== 'string' || q === '')) {
    throw new DashboardOptionError('allowedQueues must be a list of queue names');
  }
  return {
    transport,
    store,
    ingest,
    errorQueues: [...new Set(errorQueues)],
    endpoints: [...(options.endpoints ?? [])],
    token,
    chartToken,
    host,
    port,
    publicUrl: options.publicUrl === undefined ? undefined : parsePublicUrl(options.publicUrl),
    allowedQueues,
    clock: options.clock ?? systemClock,
    logger: options.logger,
    groupCacheMs: whole('groupCacheMs', options.groupCacheMs ?? 3_000, 0),
    maxScan: whole('maxScan', options.maxScan ?? 100_000, 1),
    bodyPreviewBytes: whole('bodyPreviewBytes', options.bodyPreviewBytes ?? 65_536, 16),
    maxConnections: whole('maxConnections', options.maxConnections ?? 64, 1),
  };
}

function parsePublicUrl(value: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new DashboardOptionError(`publicUrl must be an absolute http:// or https:// address, got ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new DashboardOptionError(`publicUrl must be an http:// or https:// address, got ${url.protocol}`);
  if (url.username !== '' || url.password !== '') throw new DashboardOptionError('publicUrl must not carry a user name or password');
  if (url.search !== '' || url.hash !== '') throw new DashboardOptionError('publicUrl must not carry a query or a fragment');
  if (!url.pathname.endsWith('/')) url.pathname += '/';
  return url;
}

function whole(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) throw new DashboardOptionError(`${name} must be a whole number of at least ${min}`);
  return value;
}
