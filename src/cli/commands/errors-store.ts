/**
 * `redeliver errors list|show|delete|export --store <file>`: the same
 * operator commands served from the error store instead of a broker's
 * queue. They read and write the store only, never the broker, so they
 * answer at once however many entries there are.
 */
import { listEdits, type EditRecord } from '../../error-store/edit.js';
import { open, type FileHandle } from 'node:fs/promises';
import { InvalidArgumentError, type Command } from 'commander';
import type { EntryFilter } from '../../error-store/filter.js';
import { MAX_PAGE, type ErrorStore } from '../../error-store/store.js';
import type { ErrorEntry } from '../../transport/error-queue.js';
import type { StoredEntry, StoredEntryDetail, StoredGroup } from '../../error-store/types.js';
import { systemClock } from '../../time/clock.js';
import { oneLine, plural, shortTime, table } from '../format.js';
import { UsageError } from '../open-transport.js';
import { InterruptedError, ioOf, type CliIo } from '../program.js';
import { ProgressBar } from '../progress.js';
import { interruption, osActor, write } from '../session.js';
import { addStoreFilterOptions, filterOf, givenFilterFlags, narrows, storePath, withStore, type FilterOptions } from '../store-session.js';

/** The `errors` subcommands that work on the store too. */
type StoreCommand = 'list' | 'show' | 'delete' | 'export';

/** Arguments a subcommand takes in store mode, where there is no target: a key for show and delete. */
const STORE_ARGUMENTS: Record<StoreCommand, number> = { list: 0, show: 1, delete: 1, export: 0 };

interface StoreOptions extends FilterOptions {
  store?: string;
  errorQueue?: string;
  json?: boolean;
  entries?: boolean;
  sort?: 'newest' | 'oldest';
  limit?: number;
  after?: string;
  all?: boolean;
  yes?: boolean;
  out?: string;
  bodyBytes?: number;
}

/** How an entry's store record is added to `errors show`. */
export interface ShowExtra {
  readonly json: Record<string, unknown>;
  readonly lines: readonly string[];
}

/** How `errors` prints an entry, shared by both modes. */
export interface EntryRenderers {
  /** Shows an entry the way `errors show` does, with `extra` added. */
  showEntry(entry: StoredEntryDetail, opts: { bodyBytes: number; json?: boolean }, io: CliIo, extra: ShowExtra): Promise<void>;
  /** One line of `errors export`. */
  exportLine(entry: ErrorEntry): object;
}

/** Adds `--store` and the filters that `errors <name>` takes in store mode. */
export function storeOptions(command: Command): Command {
  const name = command.name() as StoreCommand;
  addStoreFilterOptions(command, name === 'list' || name === 'export');
  if (name === 'list') {
    command
      .option('--entries', 'with --store: list entries, a page at a time, instead of groups')
      .option('--sort <order>', 'with --store --entries: newest or oldest failure first (default newest)', sortOrder)
      .option('--after <cursor>', 'with --store --entries: the page after this cursor, as the previous page printed it');
  }
  if (name === 'list' || name === 'export') command.option('--limit <n>', 'with --store: entries (or groups) at most', pageLimit);
  return command;
}

/**
 * Runs `errors <name>` on the store when it works on one, and resolves
 * whether it did. A command works on the store when given `--store`, or when
 * `$REDELIVER_STORE` is set and no target is given (a target given on the
 * command line means its error queue, read in place). Store-only options
 * without a store are refused.
 */
export async function runOnStore(command: Command, positionals: readonly (string | undefined)[], render: EntryRenderers): Promise<boolean> {
  const name = command.name() as StoreCommand;
  const opts = command.opts<StoreOptions>();
  const io = ioOf(command);
  const given = positionals.filter((p): p is string => p !== undefined);
  const store = storePath(opts, io.env ?? process.env);
  const onStore = store !== undefined && (store.explicit || given.length <= STORE_ARGUMENTS[name]);
  if (!onStore) {
    const storeOnly = [...givenFilterFlags(command), ...['--entries', '--sort', '--after', '--limit'].filter((flag) => command.getOptionValueSource(flag.slice(2)) === 'cli')];
    if (storeOnly.length > 0) throw new UsageError(`${storeOnly.join(', ')} work on the error store only: add --store <file>`);
    return false;
  }
  if (given.length > STORE_ARGUMENTS[name]) {
    throw new UsageError(`with --store, errors ${name} takes ${STORE_ARGUMENTS[name] === 0 ? 'no target' : 'only <key>'}: it works on the store, never on a broker`);
  }
  const filter = filterOf(command, opts, systemClock.now());
  await withStore(command, store!.path, { create: false }, async (s) => {
    if (name === 'list') await (opts.entries ? listEntries(s, filter, opts, io) : listGroups(s, filter, opts, io));
    else if (name === 'show') await showStored(s, given[0], opts, io, render);
    else if (name === 'delete') await deleteStored(s, given[0], filter, opts, io);
    else await exportStored(s, filter, opts, io, render);
  });
  return true;
}

function sortOrder(value: string): 'newest' | 'oldest' {
  if (value !== 'newest' && value !== 'oldest') throw new InvalidArgumentError('expected newest or oldest');
  return value;
}

function pageLimit(value: string): number {
  const n = Number(value);
  if (!(Number.isSafeInteger(n) && n >= 1)) throw new InvalidArgumentError('expected a whole number >= 1');
  return n;
}

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

// ---------------------------------------------------------------- list

async function listGroups(store: ErrorStore, filter: EntryFilter, opts: StoreOptions, io: CliIo): Promise<void> {
  if (opts.after !== undefined || opts.sort !== undefined) throw new UsageError('--after and --sort page entries: add --entries');
  const all = store.groups(filter);
  const groups = opts.limit === undefined ? all : all.slice(0, opts.limit);
  const total = all.reduce((n, g) => n + g.count, 0);
  const status = filter.status ?? 'failed';
  if (opts.json) {
    await write(io.stdout, `${JSON.stringify({ store: store.path, status, total, groupCount: all.length, groups: groups.map(groupJson) }, null, 2)}\n`);
    return;
  }
  const what = `error store ${oneLine(store.path)}`;
  if (total === 0) {
    await write(io.stdout, `${what}: no ${status === 'any' ? '' : `${status} `}entries${narrows(filter) ? ' match the filters' : ''}\n`);
    return;
  }
  const lines = [`${what}: ${plural(total, `${status === 'any' ? '' : `${status} `}entry`, `${status === 'any' ? '' : `${status} `}entries`)} in ${plural(all.length, 'failure group')}`, ''];
  lines.push(
    ...table(
      [
        { title: 'SIGNATURE' },
        { title: 'COUNT', align: 'right' },
        { title: 'REASON', max: 24 },
        { title: 'ERROR', max: 30 },
        { title: 'MESSAGE', max: 60 },
        { title: 'FIRST FAILED' },
        { title: 'LAST FAILED' },
        { title: 'RETRIED', align: 'right' },
        { title: 'HANDLED', align: 'right' },
        { title: 'FAILED AGAIN', align: 'right' },
      ],
      groups.map((g) => [
        g.signature.id,
        String(g.count),
        g.signature.reason,
        g.signature.errorName,
        g.signature.message,
        shortTime(iso(g.firstFailedAt)!),
        shortTime(iso(g.lastFailedAt)!),
        String(g.retried),
        String(g.handledAfterRetry),
        String(g.failedAgainAfterRetry),
      ]),
    ),
  );
  if (groups.length < all.length) lines.push(`… ${plural(all.length - groups.length, 'more group')}`);
  const store_ = `--store ${oneLine(store.path)}`;
  lines.push('', `entries of a group: redeliver errors list ${store_} --entries --group <signature>`, `show one:           redeliver errors show ${store_} <key>`);
  await write(io.stdout, `${lines.join('\n')}\n`);
}

function groupJson(g: StoredGroup) {
  return {
    signature: g.signature.id,
    count: g.count,
    reason: g.signature.reason,
    errorName: g.signature.errorName,
    message: g.signature.message,
    topFrame: g.signature.topFrame,
    firstFailedAt: iso(g.firstFailedAt),
    lastFailedAt: iso(g.lastFailedAt),
    retried: g.retried,
    handledAfterRetry: g.handledAfterRetry,
    failedAgainAfterRetry: g.failedAgainAfterRetry,
  };
}

async function listEntries(store: ErrorStore, filter: EntryFilter, opts: StoreOptions, io: CliIo): Promise<void> {
  const limit = opts.limit ?? 50;
  if (limit > MAX_PAGE) throw new UsageError(`--limit: a page holds at most ${MAX_PAGE} entries; page on with --after`);
  let page;
  try {
    page = store.search(filter, { sort: opts.sort === 'oldest' ? 'failed-asc' : 'failed-desc', limit, ...(opts.after === undefined ? {} : { after: opts.after }) });
  } catch (error) {
    if (error instanceof RangeError) throw new UsageError(`--after ${oneLine(opts.after ?? '')}: not a cursor a previous page printed`);
    throw error;
  }
  if (opts.json) {
    await write(io.stdout, `${JSON.stringify({ store: store.path, entries: page.entries.map(entryJson), ...(page.next ? { next: page.next } : {}) }, null, 2)}\n`);
    return;
  }
  if (page.entries.length === 0) {
    await write(io.stdout, `error store ${oneLine(store.path)}: no entries${narrows(filter) || opts.after ? ' match' : ''}\n`);
    return;
  }
  const lines = table(
    [
      { title: 'KEY', max: 40 },
      { title: 'FAILED AT' },
      { title: 'STATUS' },
      { title: 'ERROR QUEUE', max: 30 },
      { title: 'QUEUE', max: 30 },
      { title: 'SIGNATURE' },
      { title: 'ERROR', max: 24 },
      { title: 'MESSAGE', max: 60 },
    ],
    page.entries.map((e) => [e.key, shortTime(iso(e.failedAt)!), e.status, e.errorQueue, e.originalQueue, e.signature.id, e.signature.errorName, e.message]),
  );
  if (page.next) lines.push('', `next page: add --after ${page.next}`);
  await write(io.stdout, `${lines.join('\n')}\n`);
}

function entryJson(e: StoredEntry) {
  return {
    key: e.key,
    messageId: e.messageId,
    errorQueue: e.errorQueue,
    originalQueue: e.originalQueue,
    endpoint: e.endpoint,
    signature: e.signature.id,
    reason: e.signature.reason,
    errorName: e.signature.errorName,
    message: e.message,
    failedAt: iso(e.failedAt),
    ...historyJson(e),
  };
}

/** What the store knows about an entry beyond its headers: status, retries, outcome. */
function historyJson(e: StoredEntry) {
  return {
    status: e.status,
    ingestedAt: iso(e.ingestedAt),
    replayCount: e.replayCount,
    retriedCount: e.retriedCount,
    ...(e.lastRetriedAt === undefined ? {} : { lastRetriedAt: iso(e.lastRetriedAt) }),
    ...(e.lastRetriedBy === undefined ? {} : { lastRetriedBy: e.lastRetriedBy }),
    ...(e.retriedTo === undefined ? {} : { retriedTo: e.retriedTo }),
    ...(e.outcome === undefined ? {} : { outcome: e.outcome, outcomeAt: iso(e.outcomeAt) }),
  };
}

// ---------------------------------------------------------------- show

async function showStored(store: ErrorStore, key: string | undefined, opts: StoreOptions, io: CliIo, render: EntryRenderers): Promise<void> {
  if (key === undefined) throw new UsageError('name the entry: errors show --store <file> <key>');
  const entry = store.get(key);
  if (!entry) throw new Error(`no entry with key ${oneLine(key)} in the error store ${oneLine(store.path)}`);
  const field = (label: string, value: string) => `  ${label.padEnd(16)}${oneLine(value)}`;
  const lines = [
    'store',
    field('status', entry.status === 'deleted' ? `deleted${deletion(entry)} (its body was dropped)` : entry.status),
    field('ingested at', shortTime(iso(entry.ingestedAt)!)),
    field(
      'retried',
      entry.retriedCount === 0
        ? 'never'
        : `${plural(entry.retriedCount, 'time')}, last at ${shortTime(iso(entry.lastRetriedAt) ?? '')} by ${entry.lastRetriedBy ?? '-'} to ${entry.retriedTo ?? '-'}`,
    ),
    field('outcome', entry.outcome === undefined ? (entry.retriedCount === 0 ? '-' : 'not seen yet') : `${entry.outcome} at ${shortTime(iso(entry.outcomeAt) ?? '')}`),
  ];
  const edits = listEdits({ store }, key);
  for (const edit of edits) {
    const headers = Object.keys(edit.changedHeaders);
    lines.push(
      field(
        'edited',
        `at ${shortTime(iso(edit.at)!)} by ${edit.by}, sent to ${edit.sentTo}; body ${edit.bodySizeBefore} -> ${edit.bodySizeAfter} bytes` +
          (headers.length === 0 ? '' : `; headers changed: ${headers.sort().join(', ')}`),
      ),
    );
  }
  lines.push('');
  const deleted = { ...(entry.deletedAt === undefined ? {} : { deletedAt: iso(entry.deletedAt) }), ...(entry.deletedBy === undefined ? {} : { deletedBy: entry.deletedBy }) };
  const json = { store: { ...historyJson(entry), ...deleted, edits: edits.map(editJson) } };
  await render.showEntry(entry, { bodyBytes: opts.bodyBytes ?? 4096, ...(opts.json ? { json: true } : {}) }, io, { json, lines });
}

// ---------------------------------------------------------------- delete

async function deleteStored(store: ErrorStore, key: string | undefined, filter: EntryFilter, opts: StoreOptions, io: CliIo): Promise<void> {
  if (key !== undefined) {
    if (opts.all || narrows(filter)) throw new UsageError('name what to delete: one <key>, or --all and/or filters');
    const deleted = await store.deleteOne(key, osActor());
    if (!deleted) {
      const entry = store.get(key);
      if (!entry) throw new Error(`no entry with key ${oneLine(key)} in the error store ${oneLine(store.path)}`);
      await write(io.stdout, opts.json ? `${JSON.stringify({ deleted: 0, notFailed: 1, status: entry.status })}\n` : `deleted 0: the entry is ${entry.status}, not failed\n`);
      return;
    }
    await write(io.stdout, opts.json ? `${JSON.stringify({ deleted: 1, notFailed: 0 })}\n` : 'deleted 1\n');
    return;
  }
  if (!opts.all && !narrows(filter)) throw new UsageError('name what to delete: one <key>, or --group <signature> or other filters, or --all');
  const selection = { ...filter, status: 'failed' as const, maxSeq: store.lastSeq() };
  if (!opts.yes) {
    const n = store.count(selection);
    throw new UsageError(`this deletes ${plural(n, 'failed entry', 'failed entries')} of the error store for good: add --yes to confirm`);
  }
  // Entries ingested from now on are not part of the selection the operator confirmed.
  const deleted = await store.delete(selection, osActor());
  await write(io.stdout, opts.json ? `${JSON.stringify({ deleted })}\n` : `deleted ${deleted}\n`);
}

// ---------------------------------------------------------------- export

async function exportStored(store: ErrorStore, filter: EntryFilter, opts: StoreOptions, io: CliIo, render: EntryRenderers): Promise<void> {
  let file: FileHandle | undefined;
  if (opts.out !== undefined) {
    try {
      file = await open(opts.out, 'w');
    } catch (error) {
      throw new UsageError(`cannot write ${opts.out}: ${(error as Error).message}`);
    }
  }
  const out = file;
  const emit = out ? async (text: string) => void (await out.write(text)) : (text: string) => write(io.stdout, text);
  const limit = opts.limit ?? Number.POSITIVE_INFINITY;
  const total = Math.min(limit, store.count(filter));
  const progress = new ProgressBar(io.stderr, 'exporting', out === undefined && io.stdout.isTTY ? 0 : total);
  const { signal, dispose } = interruption(io);
  let exported = 0;
  let text = '';
  try {
    for (const entry of store.export(filter)) {
      if (exported >= limit) break;
      text += `${JSON.stringify({ ...render.exportLine(entry), status: entry.status, failedAt: iso(entry.failedAt) })}\n`;
      exported++;
      if (exported % 500 === 0) {
        await emit(text);
        text = '';
        progress.tick(500);
        if (signal.aborted || (out === undefined && io.stdout.closed)) break;
      }
    }
    if (text !== '') await emit(text);
  } finally {
    progress.finish();
    dispose();
    await file?.close();
  }
  if (opts.out !== undefined) io.stderr.write(`exported ${plural(exported, 'entry', 'entries')} from the error store to ${oneLine(opts.out)}\n`);
  if (signal.aborted) throw new InterruptedError(`interrupted after ${plural(exported, 'entry', 'entries')}; the export is incomplete`);
}

/** ` at <time> by <who>` of a deleted entry, as much as the store recorded (nothing before schema version 4). */
function deletion(entry: StoredEntryDetail): string {
  return (entry.deletedAt === undefined ? '' : ` at ${shortTime(iso(entry.deletedAt)!)}`) + (entry.deletedBy === undefined ? '' : ` by ${entry.deletedBy}`);
}

function editJson(edit: EditRecord) {
  return {
    requestId: edit.requestId,
    by: edit.by,
    at: iso(edit.at),
    sentTo: edit.sentTo,
    bodySizeBefore: edit.bodySizeBefore,
    bodySizeAfter: edit.bodySizeAfter,
    changedHeaders: edit.changedHeaders,
  };
}
