/**
 * The dashboard's JSON API in store mode: every answer comes from the error
 * store (search, groups, failure rates, live changes), never from a broker's
 * queue, so a page over 100,000 entries costs what a page over 100 does.
 */
import { listEdits } from '../error-store/edit.js';
import type { EntryFilter, EntrySort } from '../error-store/filter.js';
import type { ErrorStore } from '../error-store/store.js';
import type { StoredEntry, StoredEntryDetail, StoredGroup } from '../error-store/types.js';
import { readFailureFacts, type FailureFacts } from '../headers/failure.js';
import { readRetryState, type FailureRecord } from '../headers/retry-state.js';
import { validationIssueLines } from '../headers/validation-issues.js';
import { bodyPreview, type BodyPreview } from '../operations/body-preview.js';
import { HEADER } from '../headers/names.js';
import { signatureOf, type FailureSignature } from '../operations/signature.js';
import type { Clock } from '../time/clock.js';
import { ApiError } from './api.js';
import { SUMMARY_MESSAGE_CHARS } from './groups.js';
import { RequestGate, type GateCounts, type GateLimits } from './request-gate.js';
import type { StoreRetries } from './store-retries.js';

/** One entry as the store table lists it. */
export interface StoreEntryView {
  readonly key: string;
  readonly messageId: string;
  readonly errorQueue: string;
  readonly originalQueue: string;
  readonly endpoint: string;
  /** The failure signature id: the entry's group. */
  readonly group: string;
  readonly errorName: string;
  /** The error message as thrown, cut to 300 characters. */
  readonly message: string;
  /** ISO 8601. */
  readonly failedAt: string;
  readonly status: StoredEntry['status'];
  readonly retriedCount: number;
  readonly outcome: StoredEntry['outcome'] | null;
}

/** A failure group with its retry history. */
export interface StoreGroupView {
  readonly signature: FailureSignature;
  readonly count: number;
  readonly firstFailedAt: string;
  readonly lastFailedAt: string;
  readonly retried: number;
  readonly handledAfterRetry: number;
  readonly failedAgainAfterRetry: number;
}

/** One entry in full, with what the store knows of it. */
export interface StoreEntryDetail {
  readonly entry: StoreEntryView;
  readonly signature: FailureSignature;
  readonly failure: FailureFacts;
  /** Earlier failures, oldest first, from the `redeliver-history` header. */
  readonly history: readonly FailureRecord[];
  /** Why the body failed its schema, one `path: message` line per issue, from the `redeliver-validation-issues` header; empty without it. */
  readonly validationIssues: readonly string[];
  /** What operators did with the entry, and what came of it. */
  readonly store: {
    readonly seq: number;
    readonly ingestedAt: string;
    readonly replayCount: number;
    readonly retriedCount: number;
    readonly lastRetriedAt: string | null;
    readonly lastRetriedBy: string | null;
    readonly retriedTo: string | null;
    readonly outcome: StoredEntry['outcome'] | null;
    readonly outcomeAt: string | null;
    /** When and by whom it was deleted; null unless deleted (and on entries deleted before schema version 4). */
    readonly deletedAt: string | null;
    readonly deletedBy: string | null;
  };
  /** Every stored entry of the same message id (this one included), oldest first: each time it failed. */
  readonly occurrences: readonly StoreEntryView[];
  /** The edits an operator sent in place of this entry (edit and retry), oldest first. */
  readonly edits: readonly { readonly by: string; readonly at: string; readonly sentTo: string; readonly bodySizeBefore: number; readonly bodySizeAfter: number; readonly changedHeaders: readonly string[] }[];
  /** Every header as `[name, value]`, sorted by name. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body: BodyPreview;
}

/** Entries per page unless the request says otherwise; and at most. */
const DEFAULT_PAGE = 50;
const MAX_PAGE = 500;
/** Occurrences of one message id listed at most. */
const MAX_OCCURRENCES = 50;
/** Changed entries one live-update answer carries at most. */
const CHANGES_PER_POLL = 200;

/** The chart ranges: per minute over the last hour, or over the last day. */
const RANGES: Readonly<Record<string, number>> = { hour: 3_600_000, day: 86_400_000 };

/** The POST paths of store mode; each is a state change, guarded like every other. */
export const STORE_POST_PATHS: ReadonlySet<string> = new Set(['/api/delete', '/api/jobs', '/api/edit-retry']);
/** The POST paths that also answer a GET: `GET /api/jobs` lists the latest jobs. */
export const STORE_GET_PATHS: ReadonlySet<string> = new Set(['/api/jobs']);

/** Reads one request parameter or body field; undefined when absent or empty. */
type Field = (name: string) => unknown;

/** Serves the store-mode API. */
export class StoreApi {
  readonly #gates = new Map<string, RequestGate>();

  constructor(
    private readonly store: ErrorStore,
    private readonly clock: Clock,
    private readonly bodyPreviewBytes: number,
    private readonly retries: StoreRetries,
    /** The cap of each kind of GET request. Default: 2 at once, 8 waiting. */
    gateLimits: GateLimits = {},
  ) {
    for (const kind of REQUEST_KINDS) this.#gates.set(kind, new RequestGate(gateLimits));
  }

  /**
   * Answers a GET; unknown paths are a 404. Each kind of request (see
   * {@link requestKind}) goes through its own {@link RequestGate}, so a
   * flood of searches waits or is refused (503) while a summary is answered.
   */
  get(path: string, params: URLSearchParams): Promise<unknown> {
    return this.#gates.get(requestKind(path))!.run(() => this.#answer(path, params));
  }

  /** What the gate of one kind of request (a {@link requestKind}) has done so far. */
  gateCounts(kind: string): GateCounts {
    const gate = this.#gates.get(kind);
    if (!gate) throw new RangeError(`no such kind of request: ${kind.slice(0, 40)}`);
    return gate.counts();
  }

  #answer(path: string, params: URLSearchParams): unknown {
    const field: Field = (name) => params.get(name) ?? undefined;
    return withRangeErrors(() => {
      switch (path) {
        case '/api/summary':
          return this.summary();
        case '/api/groups':
          return this.groups(field);
        case '/api/entries':
          return this.entries(field);
        case '/api/count':
          return this.countOf(field);
        case '/api/failure-rate':
          return this.failureRate(field);
        case '/api/changes':
          return this.changes(field);
        case '/api/jobs':
          return this.retries.list();
      }
      const match = /^\/api\/entries\/([^/]+)$/.exec(path);
      if (match) return this.entry(decode(match[1]!));
      const job = /^\/api\/jobs\/([^/]+)$/.exec(path);
      if (job) return this.retries.get(decode(job[1]!));
      throw new ApiError(404, 'not found');
    });
  }

  /** Answers a POST to one of {@link STORE_POST_PATHS}; retries, edits and deletes record `by` as who made them. */
  async post(path: string, body: unknown, by: string): Promise<unknown> {
    const input = object(body);
    const field: Field = (name) => (Object.hasOwn(input, name) ? input[name] : undefined);
    if (path === '/api/delete') return withRangeErrors(() => this.delete(field, by));
    if (path === '/api/jobs') return withRangeErrors(() => this.retries.start(field, by));
    if (path === '/api/edit-retry') return this.retries.edit(field, by);
    throw new ApiError(404, 'not found');
  }

  /** GET /api/summary: entries waiting per error queue, and the store's file. */
  summary(): { store: string; failed: number; byErrorQueue: { errorQueue: string; failed: number }[] } {
    // Counted from the (error_queue, status, failed_at) index alone: without it SQLite reads every waiting row.
    const byErrorQueue = this.store.database
      .prepare<[], { errorQueue: string; failed: number }>(
        `SELECT error_queue AS errorQueue, count(*) AS failed FROM entries INDEXED BY entries_by_queue WHERE status = 'failed' GROUP BY error_queue ORDER BY error_queue`,
      )
      .all();
    return { store: this.store.path, failed: byErrorQueue.reduce((n, q) => n + q.failed, 0), byErrorQueue };
  }

  /** GET /api/groups?<filter>: the failure groups of the selection, largest first, with each one's retry history. */
  groups(field: Field): { groups: StoreGroupView[] } {
    return { groups: this.store.groups(filterOf(field)).map(groupView) };
  }

  /**
   * GET /api/entries?<filter>&sort=&limit=&after=: one page, keyset-paged
   * (`next` is the `after` of the following page), how many the selection
   * holds, and the live-update cursor of the moment before the page was
   * read (a change committed meanwhile is reported again, never missed).
   */
  entries(field: Field): { total: number; entries: StoreEntryView[]; next: string | null; cursor: string } {
    const { cursor } = this.store.changes();
    const filter = filterOf(field);
    const sort = text(field, 'sort') ?? 'failed-desc';
    if (sort !== 'failed-desc' && sort !== 'failed-asc') throw new ApiError(400, 'sort must be failed-desc or failed-asc');
    const limit = whole(field, 'limit', DEFAULT_PAGE, 1, MAX_PAGE);
    const after = text(field, 'after');
    const page = this.store.search(filter, { sort: sort as EntrySort, limit, ...(after === undefined ? {} : { after }) });
    return { total: this.store.count(filter), entries: page.entries.map(entryView), next: page.next ?? null, cursor };
  }

  /** GET /api/count?<filter>: how many entries a bulk action would touch, and the snapshot (`maxSeq`) to hold it to. */
  countOf(field: Field): { count: number; maxSeq: number } {
    const maxSeq = this.store.lastSeq();
    return { count: this.store.count({ ...filterOf(field), maxSeq }), maxSeq };
  }

  /** GET /api/entries/:key: one entry in full, with its store history. */
  entry(key: string): StoreEntryDetail {
    const detail = this.store.get(key);
    if (!detail) throw new ApiError(404, 'no such entry in the store');
    return this.#detail(detail);
  }

  /**
   * GET /api/failure-rate?range=hour|day&<filter>: failures per minute per
   * group over the last hour (default) or day, every status counted unless
   * `status` says otherwise, with each group's error name and message.
   */
  failureRate(field: Field): {
    range: string;
    bucketMs: number;
    since: string;
    until: string;
    series: { signature: string; errorName: string; message: string; total: number; counts: readonly number[] }[];
  } {
    const range = text(field, 'range') ?? 'hour';
    const span = RANGES[range];
    if (span === undefined) throw new ApiError(400, 'range must be hour or day');
    const { since: _since, until: _until, ...filter } = filterOf(field, 'any');
    const now = this.clock.now();
    const rate = this.store.failureRate({ since: now - span, until: now, bucketMs: 60_000, filter, groups: 8 });
    const sample = this.store.database.prepare<[string], { errorName: string; message: string }>(
      `SELECT error_name AS errorName, message FROM entries WHERE status IN ('failed', 'retrying', 'retried', 'replaced', 'deleted') AND signature = ? LIMIT 1`,
    );
    const series = rate.series.map((s) => {
      const row = sample.get(s.signature);
      return { ...s, errorName: row?.errorName ?? '', message: row ? signatureOf({ [HEADER.failureMessage]: row.message }).message : '' };
    });
    return { range, bucketMs: rate.bucketMs, since: iso(rate.since), until: iso(rate.until), series };
  }

  /**
   * GET /api/changes?cursor=: entries changed since the cursor (ingested,
   * retried, deleted, outcome seen) and the next cursor. Without a cursor,
   * only the cursor of now.
   */
  changes(field: Field): { cursor: string; entries: StoreEntryView[]; more: boolean } {
    const cursor = text(field, 'cursor');
    const result = this.store.changes(cursor, CHANGES_PER_POLL);
    return { cursor: result.cursor, entries: result.entries.map(entryView), more: result.more };
  }

  /**
   * POST /api/delete {key} | {filter, maxSeq, confirm}: deletes one entry, or
   * every waiting entry the filter selects that was in the store at
   * `maxSeq` (from GET /api/count). `confirm` must repeat that count: the
   * page shows it to the operator first.
   */
  async delete(field: Field, by: string): Promise<{ deleted: number }> {
    const key = field('key');
    if (key !== undefined) {
      if (typeof key !== 'string' || key === '') throw new ApiError(400, 'key must be a non-empty string');
      return { deleted: (await this.store.deleteOne(key, by)) ? 1 : 0 };
    }
    const filterInput = field('filter');
    const input = object(filterInput ?? {});
    const filter = filterOf((name) => (Object.hasOwn(input, name) ? input[name] : undefined));
    const maxSeq = field('maxSeq');
    const confirm = field('confirm');
    if (!Number.isSafeInteger(maxSeq) || (maxSeq as number) < 0) throw new ApiError(400, 'maxSeq (from GET /api/count) is required to delete a selection');
    if (!Number.isSafeInteger(confirm) || (confirm as number) < 0) throw new ApiError(400, 'confirm must repeat the count the operator agreed to delete');
    const snapshot = { ...filter, maxSeq: maxSeq as number };
    const count = this.store.count(snapshot);
    if (count > (confirm as number)) throw new ApiError(409, `the selection holds ${count} entries, more than the ${confirm} confirmed; count again`);
    return { deleted: await this.store.delete(snapshot, by) };
  }

  #detail(detail: StoredEntryDetail): StoreEntryDetail {
    const h = detail.headers;
    // Summaries only: an entry's page never reads the bodies of its other occurrences.
    const occurrences = this.store.occurrences(detail.messageId, MAX_OCCURRENCES).map(entryView);
    return {
      entry: entryView(detail),
      signature: detail.signature,
      failure: readFailureFacts(h),
      history: readRetryState(h).history,
      validationIssues: validationIssueLines(h),
      store: {
        seq: detail.seq,
        ingestedAt: iso(detail.ingestedAt),
        replayCount: detail.replayCount,
        retriedCount: detail.retriedCount,
        lastRetriedAt: detail.lastRetriedAt === undefined ? null : iso(detail.lastRetriedAt),
        lastRetriedBy: detail.lastRetriedBy ?? null,
        retriedTo: detail.retriedTo ?? null,
        outcome: detail.outcome ?? null,
        outcomeAt: detail.outcomeAt === undefined ? null : iso(detail.outcomeAt),
        deletedAt: detail.deletedAt === undefined ? null : iso(detail.deletedAt),
        deletedBy: detail.deletedBy ?? null,
      },
      occurrences,
      edits: listEdits({ store: this.store }, detail.key).map((e) => ({
        by: e.by,
        at: iso(e.at),
        sentTo: e.sentTo,
        bodySizeBefore: e.bodySizeBefore,
        bodySizeAfter: e.bodySizeAfter,
        changedHeaders: Object.keys(e.changedHeaders).sort(),
      })),
      headers: Object.keys(h)
        .filter((name) => typeof h[name] === 'string')
        .sort()
        .map((name) => [name, h[name]!] as const),
      body: bodyPreview(detail.body, this.bodyPreviewBytes),
    };
  }
}

/** The GET paths of store mode, each its own kind of request. */
const GET_KINDS: ReadonlySet<string> = new Set(['/api/summary', '/api/groups', '/api/entries', '/api/count', '/api/failure-rate', '/api/changes', '/api/jobs']);
/** Every kind {@link requestKind} names. */
const REQUEST_KINDS: readonly string[] = [...GET_KINDS, '/api/entries/:key', '/api/jobs/:id', 'other'];

/**
 * The kind of a GET request, whose gate it goes through: its path, with an
 * entry key or a job id as `:key` or `:id`; `other` for a path the API does
 * not answer, so unknown paths never make new gates.
 */
export function requestKind(path: string): string {
  if (GET_KINDS.has(path)) return path;
  if (/^\/api\/entries\/[^/]+$/.test(path)) return '/api/entries/:key';
  if (/^\/api\/jobs\/[^/]+$/.test(path)) return '/api/jobs/:id';
  return 'other';
}

/**
 * The entry filter of a request: `status` (default `failed`, or `any`),
 * `group` (signature id), `errorName`, `reason`, `errorQueue`,
 * `originalQueue`, `endpoint`, `text`, `since` and `until` (ISO 8601 or
 * epoch ms). Unknown values are a 400 naming the field.
 */
export function filterOf(field: Field, defaultStatus: EntryFilter['status'] = 'failed'): EntryFilter {
  const status = text(field, 'status') ?? defaultStatus;
  const filter: Record<string, unknown> = { status };
  for (const [name, key] of [
    ['group', 'signature'],
    ['errorName', 'errorName'],
    ['reason', 'reason'],
    ['errorQueue', 'errorQueue'],
    ['originalQueue', 'originalQueue'],
    ['endpoint', 'endpoint'],
    ['text', 'text'],
  ] as const) {
    const value = text(field, name);
    if (value !== undefined) filter[key] = value;
  }
  for (const name of ['since', 'until'] as const) {
    const value = field(name);
    if (value === undefined || value === '' || value === null) continue;
    filter[name] = instant(name, value);
  }
  return filter as EntryFilter;
}

function instant(name: string, value: unknown): number {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return value;
  if (typeof value === 'string') {
    if (/^\d{1,15}$/.test(value)) return Number(value);
    const parsed = Date.parse(value);
    if (Number.isFinite(parsed) && parsed >= 0) return parsed;
  }
  throw new ApiError(400, `${name} must be an ISO 8601 time or epoch milliseconds`);
}

function text(field: Field, name: string): string | undefined {
  const value = field(name);
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw new ApiError(400, `${name} must be a string`);
  return value;
}

function whole(field: Field, name: string, fallback: number, min: number, max: number): number {
  const raw = field(name);
  if (raw === undefined || raw === '') return fallback;
  const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d{1,15}$/.test(raw) ? Number(raw) : NaN;
  if (!(Number.isSafeInteger(n) && n >= min)) throw new ApiError(400, `${name} must be a whole number of at least ${min}`);
  return Math.min(n, max);
}

function entryView(e: StoredEntry): StoreEntryView {
  return {
    key: e.key,
    messageId: e.messageId,
    errorQueue: e.errorQueue,
    originalQueue: e.originalQueue,
    endpoint: e.endpoint,
    group: e.signature.id,
    errorName: e.signature.errorName,
    message: e.message.slice(0, SUMMARY_MESSAGE_CHARS),
    failedAt: iso(e.failedAt),
    status: e.status,
    retriedCount: e.retriedCount,
    outcome: e.outcome ?? null,
  };
}

function groupView(g: StoredGroup): StoreGroupView {
  return {
    signature: g.signature,
    count: g.count,
    firstFailedAt: iso(g.firstFailedAt),
    lastFailedAt: iso(g.lastFailedAt),
    retried: g.retried,
    handledAfterRetry: g.handledAfterRetry,
    failedAgainAfterRetry: g.failedAgainAfterRetry,
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** Turns the store's RangeErrors (a bad filter, cursor or limit) into 400s that name the field. */
function withRangeErrors<T>(run: () => T): T {
  const badRequest = (error: unknown): never => {
    throw error instanceof RangeError ? new ApiError(400, error.message) : error;
  };
  try {
    const result = run();
    return (result instanceof Promise ? result.catch(badRequest) : result) as T;
  } catch (error) {
    return badRequest(error);
  }
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ApiError(400, 'malformed path');
  }
}

function object(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError(400, 'the request body must be a JSON object');
  return body as Record<string, unknown>;
}
