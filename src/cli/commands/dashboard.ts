import { InvalidArgumentError, type Command } from 'commander';
import { DashboardOptionError, MIN_TOKEN_LENGTH } from '../../dashboard/options.js';
import { removeRuntimeFile, runtimeFilePath, writeRuntimeFile } from '../../dashboard/runtime-file.js';
import { randomToken } from '../../dashboard/security.js';
import { createDashboard } from '../../dashboard/server.js';
import { removeTokenFile, tokenFilePath, writeTokenFile } from '../../dashboard/token-file.js';
import type { Logger } from '../../logger.js';
import type { Transport } from '../../transport/types.js';
import { redactCredentials } from '../../util/redact.js';
import { openTransport, resolveTarget, UsageError } from '../open-transport.js';
import { ioOf } from '../program.js';
import { collect, OPTIONAL_TARGET_HELP } from '../session.js';

/** Options of `redeliver dashboard`. */
export interface DashboardCommandOptions {
  /** Default 8080. */
  port: number;
  /** Default `127.0.0.1`. */
  host: string;
  /**
   * Default `$REDELIVER_DASHBOARD_TOKEN`, else a random one written to
   * `<state dir>/dashboard-<port>.token` (mode 0600) while serving.
   */
  token?: string;
  /** Default `['error']`. */
  errorQueue: string[];
  /** Where people open the dashboard through a reverse proxy. Default none. */
  publicUrl?: string;
  /** The only queues "retry" may send to. Default: any existing work queue. */
  allowQueue?: string[];
  /** Serve from this error store file instead of reading the error queues in place. Default none. */
  store?: string;
  /** With `store`: ingest the error queues into it while serving. Default false. */
  ingest?: boolean;
  /** With `ingest`: the queue endpoints send replay outcomes to. Default none. */
  outcomeQueue?: string;
  /**
   * Take charts from `redeliver plan` and `redeliver simulate` on this
   * machine: a chart token is made up and written, with the address, to the
   * runtime file `<state dir>/dashboard.json`. Default true
   * (`--no-chart-feed` turns it off).
   */
  chartFeed?: boolean;
}

/** `redeliver dashboard [sqlite-file|amqp-url|redis-url|nats-url|nsq-target]`: serves the operations dashboard until interrupted. */
export function registerDashboard(program: Command): void {
  program
    .command('dashboard')
    .description('serve a web page to browse failure groups in the error queues, read each message, and retry or delete')
    .argument('[target]', OPTIONAL_TARGET_HELP)
    .option('--port <port>', 'port to listen on', port, 8080)
    .option('--host <host>', 'address to listen on', '127.0.0.1')
    .option(
      '--token <token>',
      `secret every request must carry, at least ${MIN_TOKEN_LENGTH} characters (default: $REDELIVER_DASHBOARD_TOKEN, else a random one in $REDELIVER_STATE_DIR/dashboard-<port>.token, readable by you only)`,
    )
    .option('--error-queue <name>', 'an error queue to show; repeat for more (default: error)', collect, [] as string[])
    .option('--public-url <url>', 'the address people open it at behind a reverse proxy, such as https://ops.example.com/redeliver/')
    .option('--allow-queue <name>', 'retry sends only to this queue; repeat for more (default: any existing work queue)', collect)
    .option('--store <file>', 'serve from this error store (search, charts, live updates) instead of reading the error queues in place')
    .option('--ingest', 'with --store: move the error queues into the store while serving')
    .option('--outcome-queue <name>', "with --ingest: the queue endpoints send replay outcomes to (their replayOutcomeQueue)")
    .option('--no-chart-feed', 'do not show charts from redeliver plan and simulate, and write no runtime file ($REDELIVER_STATE_DIR/dashboard.json, default ~/.redeliver/dashboard.json)')
    .action(async (target: string | undefined, opts: DashboardCommandOptions, command: Command) => {
      const stop = new AbortController();
      const onSignal = () => stop.abort();
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        await serveDashboard(target, opts, { out: process.stdout, signal: stop.signal, env: ioOf(command).env ?? process.env });
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    });
}

/**
 * Opens the transport, serves the dashboard, prints where and where its
 * token is (never the token), and closes both when `signal` aborts. A token
 * it made up is written to the token file while serving (see
 * token-file.ts) and removed when done. Unless `chartFeed` is false it writes the runtime
 * file while serving (see runtime-file.ts) and removes it when done, if it
 * still names this process.
 */
export async function serveDashboard(
  target: string | undefined,
  opts: DashboardCommandOptions,
  io: {
    out: NodeJS.WritableStream;
    /** Where the ingester's and retry jobs' warnings and errors go. Default standard error. */
    err?: NodeJS.WritableStream;
    signal: AbortSignal;
    /** Where `REDELIVER_URL`, `REDELIVER_DASHBOARD_TOKEN` and `REDELIVER_STATE_DIR` are read. */
    env: Readonly<Record<string, string | undefined>>;
    onReady?: (url: string) => void;
    /** Opens the target. Default {@link openTransport}. */
    openTransport?: (target: string) => Promise<Transport>;
  },
): Promise<void> {
  const token = opts.token ?? (io.env['REDELIVER_DASHBOARD_TOKEN'] || undefined);
  if (opts.ingest && opts.store === undefined) throw new UsageError('--ingest needs --store <file> to ingest into');
  if (opts.outcomeQueue !== undefined && !opts.ingest) throw new UsageError('--outcome-queue needs --ingest');
  const chartToken = opts.chartFeed === false ? undefined : randomToken();
  const transport = await (io.openTransport ?? ((t: string) => openTransport(t, io.env)))(resolveTarget(target, io.env));
  try {
    let dashboard;
    try {
      dashboard = await createDashboard({
        transport,
        errorQueues: opts.errorQueue.length > 0 ? opts.errorQueue : ['error'],
        host: opts.host,
        port: opts.port,
        ...(token === undefined ? {} : { token }),
        ...(chartToken === undefined ? {} : { chartToken }),
        ...(opts.publicUrl === undefined ? {} : { publicUrl: opts.publicUrl }),
        ...(opts.allowQueue === undefined ? {} : { allowedQueues: opts.allowQueue }),
        ...(opts.store === undefined ? {} : { store: opts.store }),
        ...(opts.store === undefined ? {} : { logger: stderrLogger(io.err ?? process.stderr) }),
        ...(opts.ingest ? { ingest: opts.outcomeQueue === undefined ? true : { outcomeQueue: opts.outcomeQueue } } : {}),
      });
    } catch (error) {
      if (error instanceof DashboardOptionError) throw new UsageError(error.message);
      throw error;
    }
    const tokenFile = token === undefined ? tokenFilePath(io.env, Number(new URL(dashboard.url).port)) : undefined;
    try {
      if (tokenFile !== undefined) await writeTokenFile(tokenFile, dashboard.token);
    } catch (error) {
      await dashboard.close();
      throw new UsageError(`cannot write the token file ${tokenFile}: ${error instanceof Error ? error.message : String(error)}; pass --token (or set REDELIVER_DASHBOARD_TOKEN) instead`);
    }
    const behind = dashboard.publicUrl === dashboard.url ? '' : ` (listening on ${dashboard.url})`;
    const source = opts.store === undefined ? '' : ` from store ${opts.store}${opts.ingest ? ' (ingesting)' : ''}`;
    const where = tokenFile === undefined ? 'the token you gave (--token or REDELIVER_DASHBOARD_TOKEN)' : `the token in ${tokenFile} (readable by you only)`;
    io.out.write(
      `redeliver dashboard for ${redactCredentials(resolveTarget(target, io.env))}${source} at ${dashboard.publicUrl}${behind}\n` +
        `sign in: open ${dashboard.publicUrl}?token=<token> once, with ${where}\n(Ctrl-C to stop)\n`,
    );
    const runtimeFile = chartToken === undefined ? undefined : runtimeFilePath(io.env);
    try {
      if (runtimeFile !== undefined) {
        await writeRuntimeFile(runtimeFile, { url: dashboard.url, pid: process.pid, chartToken: chartToken! }).catch((error: unknown) => {
          (io.err ?? process.stderr).write(`warn charts from redeliver plan and simulate will not reach this dashboard: cannot write ${runtimeFile}: ${error instanceof Error ? error.message : String(error)}\n`);
        });
      }
      io.onReady?.(dashboard.url);
      if (!io.signal.aborted) await new Promise<void>((resolve) => io.signal.addEventListener('abort', () => resolve(), { once: true }));
    } finally {
      if (runtimeFile !== undefined) await removeRuntimeFile(runtimeFile, process.pid);
      if (tokenFile !== undefined) await removeTokenFile(tokenFile, dashboard.token);
      await dashboard.close();
    }
  } finally {
    await transport.close();
  }
}

/** Writes warnings and errors as one line each: the message, then the fields as JSON (credentials redacted). */
function stderrLogger(err: NodeJS.WritableStream): Logger {
  const line = (level: string) => (fields: object, message: string) => {
    const { err: error, ...rest } = fields as { err?: unknown };
    const cause = error === undefined ? '' : `: ${error instanceof Error ? error.message : String(error)}`;
    err.write(redactCredentials(`${level} ${message}${cause} ${JSON.stringify(rest)}`) + '\n');
  };
  return { info: () => undefined, warn: line('warn'), error: line('error') };
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65_535) throw new InvalidArgumentError('expected a port number from 0 to 65535');
  return n;
}


