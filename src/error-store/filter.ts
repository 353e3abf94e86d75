import { indexedTextCondition } from './text-index.js';
import type { EntryStatus } from './types.js';

/**
 * Which stored entries an operation works on. Every field is optional and
 * they combine with AND.
 */
export interface EntryFilter {
  /** Status, or `any`. Default `failed`: the entries waiting for an operator. */
  readonly status?: EntryStatus | 'any';
  readonly errorQueue?: string;
  /** A failure signature id (8 hex digits). */
  readonly signature?: string;
  /** The error's name, exactly (`TypeError`). */
  readonly errorName?: string;
  /** The failure reason, exactly (`retries-exhausted`). */
  readonly reason?: string;
  /** The queue the message failed on. */
  readonly originalQueue?: string;
  readonly endpoint?: string;
  /**
   * Text that the error message, the error name, the message id or the key
   * contains, case-insensitively; looked up in the store's full-text index
   * (and, for entries the index has not caught up with yet, in the entries
   * themselves).
   * Text of one or two characters is too short for the index: it is looked
   * for among the newest {@link SHORT_TEXT_WINDOW} entries only.
   */
  readonly text?: string;
  /** Failed at or after, epoch ms. */
  readonly since?: number;
  /** Failed before, epoch ms. */
  readonly until?: number;
  /** Ingested at or before this `seq`: the snapshot of a bulk action. */
  readonly maxSeq?: number;
}

/** How a page of entries is sorted. Default `failed-desc`, newest failure first. */
export type EntrySort = 'failed-desc' | 'failed-asc';

const STATUSES: ReadonlySet<string> = new Set(['failed', 'retrying', 'retried', 'replaced', 'deleted', 'any']);
const TEXT_MAX = 500;

/**
 * The newest entries (by ingestion) a text filter of one or two characters
 * reads: the full-text index finds only text of three characters or more,
 * and reading every row would hold the store for as long as it takes.
 */
export const SHORT_TEXT_WINDOW = 10_000;

/** Throws a RangeError naming the first bad field of `filter`. */
export function checkFilter(filter: EntryFilter): void {
  if (typeof filter !== 'object' || filter === null) throw new RangeError('the entry filter must be an object');
  if (filter.status !== undefined && !STATUSES.has(filter.status)) {
    throw new RangeError(`filter.status must be one of ${[...STATUSES].join(', ')}, got ${String(filter.status).slice(0, 40)}`);
  }
  for (const name of ['errorQueue', 'errorName', 'reason', 'originalQueue', 'endpoint', 'text'] as const) {
    const value = filter[name];
    if (value !== undefined && (typeof value !== 'string' || value.length > TEXT_MAX)) {
      throw new RangeError(`filter.${name} must be a string of at most ${TEXT_MAX} characters`);
    }
  }
  if (filter.signature !== undefined && !/^[0-9a-f]{8}$/.test(filter.signature)) {
    throw new RangeError(`filter.signature must be 8 lower-case hex digits, got ${String(filter.signature).slice(0, 40)}`);
  }
  for (const name of ['since', 'until', 'maxSeq'] as const) {
    const value = filter[name];
    if (value !== undefined && !(Number.isSafeInteger(value) && value >= 0)) throw new RangeError(`filter.${name} must be a whole number >= 0`);
  }
}

/** A SQL condition and its named parameters. */
export interface SqlCondition {
  readonly where: string;
  readonly params: Record<string, string | number>;
}

/** The WHERE clause (without the keyword) for a checked filter. */
export function filterSql(filter: EntryFilter): SqlCondition {
  const parts: string[] = [];
  const params: Record<string, string | number> = {};
  const status = filter.status ?? 'failed';
  if (status !== 'any') {
    parts.push('status = @status');
    params['status'] = status;
  }
  const exact = [
    ['errorQueue', 'error_queue'],
    ['signature', 'signature'],
    ['errorName', 'error_name'],
    ['reason', 'reason'],
    ['originalQueue', 'original_queue'],
    ['endpoint', 'endpoint'],
  ] as const;
  for (const [field, column] of exact) {
    const value = filter[field];
    if (value === undefined) continue;
    parts.push(`${column} = @${field}`);
    params[field] = value;
  }
  if (filter.text !== undefined && filter.text !== '') {
    const text = textCondition(filter.text, filter.maxSeq);
    parts.push(text.where);
    Object.assign(params, text.params);
  }
  if (filter.since !== undefined) {
    parts.push('failed_at >= @since');
    params['since'] = filter.since;
  }
  if (filter.until !== undefined) {
    parts.push('failed_at < @until');
    params['until'] = filter.until;
  }
  if (filter.maxSeq !== undefined) {
    parts.push('seq <= @maxSeq');
    params['maxSeq'] = filter.maxSeq;
  }
  return { where: parts.length === 0 ? '1' : parts.join(' AND '), params };
}

/**
 * The text filter: for three characters or more, the trigram index and the
 * entries past its mark (text-index.ts), or, for shorter text, LIKE over the newest
 * {@link SHORT_TEXT_WINDOW} entries (counted back from `maxSeq` when given,
 * so a bulk action's count and its chunks read the same window).
 */
function textCondition(text: string, maxSeq: number | undefined): SqlCondition {
  if ([...text].length >= 3) {
    return indexedTextCondition(text);
  }
  const top = maxSeq === undefined ? '(SELECT coalesce(max(seq), 0) FROM entries)' : '@maxSeq';
  const like = ['message', 'error_name', 'message_id', 'key'].map((column) => `${column} LIKE @text ESCAPE '\\'`).join(' OR ');
  return {
    where: `seq IN (SELECT seq FROM entries WHERE seq > ${top} - ${SHORT_TEXT_WINDOW} AND (${like}))`,
    params: { text: `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%` },
  };
}
