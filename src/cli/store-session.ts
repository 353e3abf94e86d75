/**
 * Opening the error store from the command line, and the filters the
 * store's commands share (`--group`, `--error-name`, `--since 1h`, ...).
 */
import { existsSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { ErrorStore } from '../error-store/store.js';
import type { EntryFilter } from '../error-store/filter.js';
import type { EntryStatus } from '../error-store/types.js';
import { checkSignature } from './error-scan.js';
import { oneLine } from './format.js';
import { UsageError } from './open-transport.js';
import { ioOf, type CliIo } from './program.js';
import { queueName } from './session.js';

/** The environment variable that holds the default `--store`. */
export const STORE_ENV = 'REDELIVER_STORE';

/** Help text of every `--store` option. */
export const STORE_HELP = `the error store file (default $${STORE_ENV})`;

/** How long a write to the store waits for another process's lock by default, ms. */
export const DEFAULT_STORE_BUSY_MS = 5_000;

/**
 * Opens the error store at `path` and runs `fn`, closing the store whatever
 * happens. With `create` false a missing file is a usage error (a typo must
 * not make a new empty store); a file that is not an error store, or one
 * locked by another process for longer than `busyTimeoutMs`, is an error
 * that names the file.
 */
export async function withStore<T>(
  command: Command,
  path: string,
  options: { create: boolean; busyTimeoutMs?: number; probeWrite?: boolean },
  fn: (store: ErrorStore, io: CliIo) => Promise<T>,
): Promise<T> {
  const io = ioOf(command);
  if (!options.create && !existsSync(path)) throw new UsageError(`no error store at ${oneLine(path)} (run redeliver errors ingest first, or check the path)`);
  let store: ErrorStore;
  try {
    store = ErrorStore.open(path, { busyTimeoutMs: options.busyTimeoutMs ?? DEFAULT_STORE_BUSY_MS });
    // A write lock taken and given back at once: a store another process keeps locked is reported now, not at the first batch.
    if (options.probeWrite) await store.write(() => undefined).catch((error: unknown) => {
      store.close();
      throw error;
    });
  } catch (error) {
    throw new Error(`cannot open the error store ${oneLine(path)}: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    return await fn(store, io);
  } finally {
    store.close();
  }
}

/** The store file named by `--store`, else by `$REDELIVER_STORE`, else undefined. */
export function storePath(opts: { store?: string }, env: Readonly<Record<string, string | undefined>>): { path: string; explicit: boolean } | undefined {
  if (opts.store !== undefined) return { path: opts.store, explicit: true };
  const fromEnv = env[STORE_ENV];
  return fromEnv === undefined || fromEnv === '' ? undefined : { path: fromEnv, explicit: false };
}

/** Parses a store file name: not empty. */
export function storeFile(value: string): string {
  if (value === '' || /[\u0000-\u001f\u007f]/.test(value)) throw new InvalidArgumentError('expected a file name');
  return value;
}

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * A point in time as epoch ms: an ISO 8601 time (`2026-11-21T09:00:00Z`),
 * or a span before `now` (`90s`, `30m`, `1h`, `7d`).
 */
export function parseTime(value: string, now: number): number {
  const relative = /^(\d{1,9})([smhd])$/.exec(value);
  if (relative) return Math.max(0, now - Number(relative[1]) * UNIT_MS[relative[2]!]!);
  const at = /^\d{4}-\d\d-\d\d/.test(value) ? Date.parse(value) : Number.NaN;
  if (!Number.isFinite(at) || at < 0) throw new InvalidArgumentError('expected an ISO 8601 time (2026-11-21T09:00:00Z) or a span before now (90s, 30m, 1h, 7d)');
  return at;
}

/** The options behind an {@link EntryFilter} on the command line. */
export interface FilterOptions {
  group?: string;
  errorName?: string;
  reason?: string;
  text?: string;
  queue?: string;
  endpoint?: string;
  since?: string;
  until?: string;
  status?: EntryStatus | 'any';
}

const STATUS_CHOICES = ['failed', 'retrying', 'retried', 'replaced', 'deleted', 'any'] as const;

function statusChoice(value: string): EntryStatus | 'any' {
  if (!(STATUS_CHOICES as readonly string[]).includes(value)) throw new InvalidArgumentError(`expected one of ${STATUS_CHOICES.join(', ')}`);
  return value as EntryStatus | 'any';
}

function text(value: string): string {
  if (value.length > 500) throw new InvalidArgumentError('expected at most 500 characters');
  return value;
}

/** The filter options, by their long flag; `status` only where a command can show other statuses. */
const FILTER_OPTIONS: readonly { flag: string; name: keyof FilterOptions; describe: (c: Command) => Command }[] = [
  { flag: '--group', name: 'group', describe: (c) => c.option('--group <signature>', 'only entries with this failure signature', checkSignature) },
  { flag: '--error-name', name: 'errorName', describe: (c) => c.option('--error-name <name>', 'only entries whose error has this name (TypeError)', text) },
  { flag: '--reason', name: 'reason', describe: (c) => c.option('--reason <reason>', 'only entries that failed for this reason (retries-exhausted)', text) },
  { flag: '--text', name: 'text', describe: (c) => c.option('--text <text>', 'only entries whose error message, error name, message id or key contains this, any case', text) },
  { flag: '--queue', name: 'queue', describe: (c) => c.option('--queue <name>', 'only entries that failed on this queue', queueName) },
  { flag: '--endpoint', name: 'endpoint', describe: (c) => c.option('--endpoint <name>', 'only entries of this endpoint', text) },
  { flag: '--since', name: 'since', describe: (c) => c.option('--since <time>', 'only entries that failed at or after this time: ISO 8601, or a span before now (30m, 1h, 7d)') },
  { flag: '--until', name: 'until', describe: (c) => c.option('--until <time>', 'only entries that failed before this time: ISO 8601, or a span before now') },
  { flag: '--status', name: 'status', describe: (c) => c.option('--status <status>', `only entries in this status: ${STATUS_CHOICES.join(', ')} (default failed)`, statusChoice) },
];

/** Adds `--store` and the filter options (those `command` does not have yet; `--status` when `withStatus`). */
export function addStoreFilterOptions(command: Command, withStatus: boolean): Command {
  if (!command.options.some((o) => o.long === '--store')) command.option('--store <file>', STORE_HELP, storeFile);
  for (const option of FILTER_OPTIONS) {
    if (option.name === 'status' && !withStatus) continue;
    if (!command.options.some((o) => o.long === option.flag)) option.describe(command);
  }
  return command;
}

/** The long flags of the filter options given on the command line: refused outside store mode. */
export function givenFilterFlags(command: Command): string[] {
  return FILTER_OPTIONS.filter((o) => o.name !== 'group' && command.getOptionValueSource(o.name) === 'cli').map((o) => o.flag);
}

/**
 * The entry filter of the options. `--error-queue` counts only when given
 * (its default `error` names the in-place queue; a store holds many).
 */
export function filterOf(command: Command, opts: FilterOptions & { errorQueue?: string }, now: number): EntryFilter {
  const time = (flag: string, value: string | undefined) => {
    if (value === undefined) return undefined;
    try {
      return parseTime(value, now);
    } catch (error) {
      throw new UsageError(`${flag} ${oneLine(value)}: ${(error as Error).message}`);
    }
  };
  const since = time('--since', opts.since);
  const until = time('--until', opts.until);
  if (since !== undefined && until !== undefined && since >= until) throw new UsageError('--since must be before --until');
  const errorQueue = command.getOptionValueSource('errorQueue') === 'cli' ? opts.errorQueue : undefined;
  const filter: EntryFilter = {
    ...(opts.status === undefined ? {} : { status: opts.status }),
    ...(errorQueue === undefined ? {} : { errorQueue }),
    ...(opts.group === undefined ? {} : { signature: opts.group }),
    ...(opts.errorName === undefined ? {} : { errorName: opts.errorName }),
    ...(opts.reason === undefined ? {} : { reason: opts.reason }),
    ...(opts.queue === undefined ? {} : { originalQueue: opts.queue }),
    ...(opts.endpoint === undefined ? {} : { endpoint: opts.endpoint }),
    ...(opts.text === undefined ? {} : { text: opts.text }),
    ...(since === undefined ? {} : { since }),
    ...(until === undefined ? {} : { until }),
  };
  return filter;
}

/** Whether a filter narrows the selection beyond its status. */
export function narrows(filter: EntryFilter): boolean {
  return Object.keys(filter).some((name) => name !== 'status');
}
