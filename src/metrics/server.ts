import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import { promClient } from './prom-client.js';

/** Options of {@link startMetricsServer}. */
export interface MetricsServerOptions {
  /** The registry to expose. Default prom-client's global `register`. */
  registry?: Registry;
  /** The port to listen on; 0 picks a free one (read it from `url`). Required. */
  port: number;
  /** The address to listen on. Default `127.0.0.1`; use `0.0.0.0` for a Prometheus server on another host. */
  host?: string;
  /** The path metrics are served at. Default `/metrics`. */
  path?: string;
}

/** A running metrics endpoint. */
export interface MetricsServer {
  /** The full address of the metrics, such as `http://127.0.0.1:9464/metrics`. */
  readonly url: string;
  close(): Promise<void>;
}

/** Serves a registry in the Prometheus text format over node:http. */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const registry = options.registry ?? promClient().register;
  const host = options.host ?? '127.0.0.1';
  const path = options.path ?? '/metrics';
  if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65_535) throw new RangeError('port must be a whole number from 0 to 65535');
  const server = createServer((req, res) => {
    res.setHeader('X-Content-Type-Options', 'nosniff');
    const url = new URL(req.url ?? '/', 'http://metrics.invalid');
    if (url.pathname !== path) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { Allow: 'GET, HEAD', 'Content-Type': 'text/plain; charset=utf-8' }).end('method not allowed\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(req.method === 'HEAD' ? undefined : text),
      (error: unknown) => res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`could not collect metrics: ${error instanceof Error ? error.message : String(error)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  const shown = host.includes(':') ? `[${host}]` : host;
  let closed: Promise<void> | undefined;
  return {
    url: `http://${shown}:${port}${path}`,
    close() {
      closed ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closed;
    },
  };
}
