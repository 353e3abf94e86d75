import { MAX_TIMER_MS, systemClock, type Clock } from '../../time/clock.js';

/** How hard SQLite works to keep a committed write across a crash. */
export type SqliteDurability = 'NORMAL' | 'FULL';

/** Options for {@link SqliteTransport}. */
export interface SqliteTransportOptions {
  /**
   * The database file, created if missing, or `':memory:'` for a store that
   * lives and dies with this transport (tests, demos). Required.
   */
  readonly path: string;
  /**
   * SQLite's `synchronous` setting, in WAL mode. Default `'NORMAL'`.
   *
   * - `'NORMAL'`: a commit is safe from a crash of this process, the way a
   *   crash of a worker usually happens. A power loss or an operating-system
   *   crash may roll back the last transactions committed before it, which
   *   were already acknowledged to their callers.
   * - `'FULL'`: every commit waits for the write-ahead log to reach the disk
   *   (fsync), so an acknowledged send or settlement also survives a power
   *   loss. Costs one fsync per group commit.
   */
  readonly durability?: SqliteDurability;
  /** Source of time for due times and leases. Default {@link systemClock}. */
  readonly clock?: Clock;
  /**
   * How long a write waits for another connection's write lock before
   * failing with `DatabaseBusyError`, in milliseconds. Lets another process
   * (a second worker, the `redeliver` CLI) use the same file while this one
   * runs. The wait does not block the event loop: SQLite waits at most 10 ms
   * at a time and the write is tried again asynchronously. Only creating the
   * schema of a new file waits synchronously. Default 5000.
   */
  readonly busyTimeoutMs?: number;
  /**
   * How often an idle consumer looks for messages written by other
   * processes, in milliseconds. Messages sent in this process, and due times
   * already in the store, wake consumers directly, without waiting for a
   * poll. Default 500.
   */
  readonly pollIntervalMs?: number;
  /**
   * The most rows a consumer claims with one query. Larger batches mean fewer
   * queries; claimed rows are held under the consumer's lease until handed
   * out. Default 128.
   */
  readonly batchSize?: number;
  /**
   * How long a delivery stays invisible to other consumers from the moment
   * it is handed out, in milliseconds, when the `leaseMs` of `consume` does
   * not say. Claims lease rows for a tenth longer, so rows claimed ahead can
   * wait briefly in the consumer's buffer; a row that waits longer is leased
   * again at hand-out. A message held by a consumer that died comes back at
   * most 1.1 × this long after it was claimed or last leased. A handler can
   * extend its lease with `ctx.extendLease(ms)`. Default 30000.
   */
  readonly leaseMs?: number;
  /**
   * The most messages a work queue may hold (ready, delayed and in flight).
   * A send to a queue at this backlog is refused with a `ThrottledError`,
   * which a Producer backs off from, as a broker throttles a producer whose
   * consumers fall behind. Default none: no limit.
   */
  readonly maxBacklog?: number;
}

/** The options with every default filled in. */
export interface ResolvedSqliteOptions {
  readonly path: string;
  readonly durability: SqliteDurability;
  readonly clock: Clock;
  readonly busyTimeoutMs: number;
  readonly pollIntervalMs: number;
  readonly batchSize: number;
  readonly leaseMs: number;
  readonly maxBacklog: number | undefined;
}

/** The defaults, in one place. */
export const SQLITE_DEFAULTS = {
  durability: 'NORMAL',
  busyTimeoutMs: 5_000,
  pollIntervalMs: 500,
  batchSize: 128,
  leaseMs: 30_000,
} as const;

/** Validates the options and fills in defaults; throws a TypeError or RangeError naming the option. */
export function resolveOptions(options: SqliteTransportOptions): ResolvedSqliteOptions {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError('SqliteTransport: options must be an object with at least `path`');
  }
  const { path } = options;
  if (typeof path !== 'string' || path.length === 0) {
    throw new TypeError(`SqliteTransport: \`path\` must be a non-empty string (a file path or ':memory:'), got ${describe(path)}`);
  }
  const durability = options.durability ?? SQLITE_DEFAULTS.durability;
  if (durability !== 'NORMAL' && durability !== 'FULL') {
    throw new RangeError(`SqliteTransport: \`durability\` must be 'NORMAL' or 'FULL', got ${describe(durability)}`);
  }
  const clock = options.clock ?? systemClock;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function' || typeof clock.sleep !== 'function') {
    throw new TypeError('SqliteTransport: `clock` must have now() and sleep(ms, signal)');
  }
  return {
    path,
    durability,
    clock,
    busyTimeoutMs: integerOption('busyTimeoutMs', options.busyTimeoutMs, SQLITE_DEFAULTS.busyTimeoutMs, 0, MAX_TIMER_MS),
    pollIntervalMs: integerOption('pollIntervalMs', options.pollIntervalMs, SQLITE_DEFAULTS.pollIntervalMs, 1, MAX_TIMER_MS),
    batchSize: integerOption('batchSize', options.batchSize, SQLITE_DEFAULTS.batchSize, 1, 10_000),
    leaseMs: leaseOption('leaseMs', options.leaseMs, SQLITE_DEFAULTS.leaseMs),
    maxBacklog: options.maxBacklog === undefined ? undefined : integerOption('maxBacklog', options.maxBacklog, 0, 1, Number.MAX_SAFE_INTEGER),
  };
}

/** Validates a lease length, from the transport options or from a consume call. */
export function leaseOption(name: string, value: number | undefined, fallback: number): number {
  return integerOption(name, value, fallback, 1, MAX_TIMER_MS);
}

function integerOption(name: string, value: number | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`SqliteTransport: \`${name}\` must be an integer from ${min} to ${max}, got ${describe(value)}`);
  }
  return value;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined) return String(value);
  return typeof value;
}
