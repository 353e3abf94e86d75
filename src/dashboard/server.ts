import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock } from '../time/clock.js';
import { redactCredentials } from '../util/redact.js';
import { ApiError, DashboardApi } from './api.js';
import { ChartShelf, MAX_CHART_BYTES } from './charts.js';
import { GroupIndex } from './groups.js';
import { resolveDashboardConfig, type DashboardConfig, type DashboardOptions } from './options.js';
import { renderPage } from './page.js';
import {
  allowedHosts,
  bracket,
  chartPostRefusal,
  pagePolicy,
  randomToken,
  safeEqual,
  sessionCookie,
  setSecurityHeaders,
  stateChangeRefusal,
} from './security.js';
import { authenticate, sessionCookieName, Sessions, type Actor } from './sessions.js';
import { StatsCollector } from './stats.js';
import { openStoreMode, type StoreMode } from './store-mode.js';
import { renderStorePage } from './store-page.js';

/** A running dashboard. */
export interface Dashboard {
  /** Where it listens, such as `http://127.0.0.1:8080/`. Open it once as `url + '?token=' + token`. */
  readonly url: string;
  /** The secret every request must carry: the `token` option, else the random one made up at start. */
  readonly token: string;
  /** Where people open it: the `publicUrl` option, else {@link url}. */
  readonly publicUrl: string;
  /**
   * Stops listening and closes open connections. In store mode it also
   * pauses running retry jobs (they resume when run again), stops the
   * ingester, and closes the store when it was given as a path. The
   * transport stays open.
   */
  close(): Promise<void>;
}

/** The largest request body accepted, in bytes. */
const MAX_BODY_BYTES = 16 * 1024;
/** The largest chart request body accepted, in bytes: the SVG, escaped in JSON, and its title. */
const MAX_CHART_BODY_BYTES = 2 * MAX_CHART_BYTES + 16 * 1024;
/**
 * The Content-Security-Policy of a chart: styles inside it apply, scripts
 * inside it never run, even when it is opened on its own; like every other
 * response it may not be framed, change its base or submit a form.
 */
const CHART_POLICY = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/**
 * Starts the operations dashboard: failure groups of the error queues,
 * each message's story, retry and delete, and live counters; read from the
 * error queues in place, or from an error store (`store`). It listens on
 * 127.0.0.1 unless told otherwise, and every request must carry the token
 * (see {@link Dashboard.token}).
 */
export async function createDashboard(options: DashboardOptions): Promise<Dashboard> {
  const config = resolveDashboardConfig(options, systemClock);
  const storeMode: StoreMode | undefined = config.store === undefined ? undefined : await openStoreMode(config);
  const inPlace = storeMode ? undefined : inPlaceMode(config);
  const token = config.token ?? randomToken();
  const csrfToken = randomToken();
  const sessions = new Sessions();
  const charts = config.chartToken === undefined ? undefined : new ChartShelf(config.clock);
  /** Host header values accepted; undefined on a non-loopback address, where the token guards instead. */
  let hosts: Set<string> | undefined;
  /** The session cookie's name, which holds the port; known once it listens. */
  let cookieName = '';
  /** Where people open the dashboard, ending in `/`; known once it listens. */
  let publicBase = '';

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) json(res, 500, { error: `internal error: ${redactCredentials(error instanceof Error ? error.message : String(error))}` });
      else res.destroy();
    });
  });
  server.maxConnections = config.maxConnections;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    setSecurityHeaders(res);
    const host = (req.headers.host ?? '').toLowerCase();
    if (hosts && !hosts.has(host)) return json(res, 403, { error: 'unexpected Host header' });
    const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    const method = req.method ?? 'GET';
    // Charts come from command line tools, which prove themselves with the chart token alone.
    if (url.pathname === '/api/charts' && method === 'POST') return postChart(req, res);

    const queryToken = url.pathname === '/' && method === 'GET' ? url.searchParams.get('token') : null;
    if (queryToken !== null && safeEqual(queryToken, token)) {
      // Trade the token in the address bar for a session cookie, and drop it from the address.
      res.setHeader('Set-Cookie', sessionCookie(cookieName, sessions.open().id, config.publicUrl));
      res.writeHead(303, { Location: config.publicUrl?.pathname ?? '/' }).end();
      return;
    }
    const actor = authenticate(req, token, sessions, cookieName);
    if (actor === undefined) {
      return json(res, 403, { error: 'a valid token is required: open the page once with ?token=<token> (`redeliver dashboard` says where the token is), or send Authorization: Bearer <token>' });
    }

    const path = url.pathname;
    if (path === '/') {
      if (method !== 'GET' && method !== 'HEAD') return methodNotAllowed(res, 'GET, HEAD');
      const nonce = randomToken(18);
      const html = storeMode ? renderStorePage(nonce, csrfToken, charts !== undefined) : renderPage(nonce, csrfToken, charts !== undefined);
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': pagePolicy(nonce), 'Content-Length': Buffer.byteLength(html) });
      res.end(method === 'HEAD' ? undefined : html);
      return;
    }
    if (!path.startsWith('/api/')) return json(res, 404, { error: 'not found' });
    const site = req.headers['sec-fetch-site'];
    if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') return json(res, 403, { error: 'cross-site request refused' });
    if (path === '/api/charts' || path.startsWith('/api/charts/')) return getChart(path, method, res);

    try {
      if (storeMode) {
        if (storeMode.postPaths.has(path) && !(storeMode.getPaths.has(path) && (method === 'GET' || method === 'HEAD'))) {
          if (method !== 'POST') return methodNotAllowed(res, storeMode.getPaths.has(path) ? 'GET, HEAD, POST' : 'POST');
          const refusal = stateChangeRefusal(req, csrfToken, config.publicUrl);
          if (refusal) return json(res, refusal.status, { error: refusal.error });
          return json(res, 200, await storeMode.api.post(path, await readJson(req), actorName(actor)));
        }
        if (method !== 'GET' && method !== 'HEAD') return methodNotAllowed(res, 'GET, HEAD');
        return json(res, 200, await storeMode.api.get(path, url.searchParams));
      }
      const { api } = inPlace!;
      if (path === '/api/retry' || path === '/api/delete') {
        if (method !== 'POST') return methodNotAllowed(res, 'POST');
        const refusal = stateChangeRefusal(req, csrfToken, config.publicUrl);
        if (refusal) return json(res, refusal.status, { error: refusal.error });
        const body = await readJson(req);
        return json(res, 200, path === '/api/retry' ? await api.retry(body) : await api.delete(body));
      }
      if (method !== 'GET' && method !== 'HEAD') return methodNotAllowed(res, 'GET, HEAD');
      if (path === '/api/groups') return json(res, 200, await api.listGroups(url.searchParams));
      if (path === '/api/stats') return json(res, 200, await api.readStats());
      if (path === '/api/entries') return json(res, 200, await api.listEntries(url.searchParams));
      const match = /^\/api\/entries\/([^/]+)\/([^/]+)$/.exec(path);
      if (match) return json(res, 200, await api.entry(decode(match[1]!), decode(match[2]!)));
      return json(res, 404, { error: 'not found' });
    } catch (error) {
      if (error instanceof ApiError && error.retryAfterSeconds !== undefined) res.setHeader('Retry-After', String(error.retryAfterSeconds));
      if (error instanceof ApiError) return json(res, error.status, { error: error.message });
      throw error;
    }
  }

  /** POST /api/charts {title, svg}: keeps a chart and answers where it is shown. */
  async function postChart(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (!charts) return json(res, 404, { error: 'not found' });
    const refusal = chartPostRefusal(req, config.chartToken!);
    if (refusal) return json(res, refusal.status, { error: refusal.error });
    try {
      const chart = charts.add(await readJson(req, MAX_CHART_BODY_BYTES));
      return json(res, 200, { id: chart.id, url: `${publicBase}api/charts/${chart.id}.svg` });
    } catch (error) {
      if (error instanceof ApiError) return json(res, error.status, { error: error.message });
      throw error;
    }
  }

  /** GET /api/charts: the charts, newest first; GET /api/charts/<id>.svg: one chart. */
  function getChart(path: string, method: string, res: ServerResponse): void {
    if (!charts) return json(res, 404, { error: 'not found' });
    if (method !== 'GET' && method !== 'HEAD') return methodNotAllowed(res, path === '/api/charts' ? 'GET, HEAD, POST' : 'GET, HEAD');
    if (path === '/api/charts') return json(res, 200, { charts: charts.list() });
    const match = /^\/api\/charts\/([A-Za-z0-9_-]+)\.svg$/.exec(path);
    const svg = match ? charts.svg(match[1]!) : undefined;
    if (svg === undefined) return json(res, 404, { error: 'no such chart (only the newest are kept)' });
    res.writeHead(200, { 'Content-Type': 'image/svg+xml; charset=utf-8', 'Content-Security-Policy': CHART_POLICY, 'Content-Length': Buffer.byteLength(svg) });
    res.end(method === 'HEAD' ? undefined : svg);
  }

  try {
    await listen();
  } catch (error) {
    await storeMode?.close();
    throw error;
  }
  const { port } = server.address() as AddressInfo;
  await inPlace?.stats.read().catch(() => undefined); // the first reading, so rates have a starting point

  let closed: Promise<void> | undefined;
  const url = `http://${bracket(config.host)}:${port}/`;
  publicBase = config.publicUrl?.href ?? url;
  return {
    url,
    token,
    publicUrl: publicBase,
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }).then(() => storeMode?.close());
      return closed;
    },
  };

  function listen(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        const { port } = server.address() as AddressInfo;
        hosts = allowedHosts(config.host, port, config.publicUrl);
        cookieName = sessionCookieName(port);
        resolve();
      });
    });
  }
}

/** The parts of in-place mode: groups computed from the error queues, live counters, and the API over both. */
function inPlaceMode(config: DashboardConfig): { api: DashboardApi; stats: StatsCollector } {
  const groups = new GroupIndex(config.transport.errorQueue!, config.clock, config.groupCacheMs, config.maxScan);
  const stats = new StatsCollector(config);
  return { api: new DashboardApi(config, groups, stats), stats };
}

/** Who the store records as having made a change: `dashboard token`, or `dashboard session-<8 hex digits>`. */
function actorName(actor: Actor): string {
  return `dashboard ${actor}`;
}

function json(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function methodNotAllowed(res: ServerResponse, allow: string): void {
  res.setHeader('Allow', allow);
  json(res, 405, { error: `method not allowed; use ${allow}` });
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ApiError(400, 'malformed path');
  }
}

async function readJson(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new ApiError(413, `the request body is larger than ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new ApiError(400, 'the request body is not valid JSON');
  }
}
