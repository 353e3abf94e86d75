import { summarizeError } from '../headers/failure.js';
import { isSendBackRefused } from '../operations/send-back-destination.js';
import { redactCredentials } from '../util/redact.js';
import { signatureOf } from '../operations/signature.js';
import type { BulkSummary, ErrorQueueOperations, SendBackOptions } from '../transport/error-queue.js';
import { entryDetail, type EntryDetail } from './entry-view.js';
import { summarize, type EntrySummary, type GroupIndex, type GroupView } from './groups.js';
import type { DashboardConfig } from './options.js';
import type { StatsCollector, StatsView } from './stats.js';

/** An API answer that is not a success. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
    /** Seconds the client should wait before asking again (a `Retry-After` header); only on a refusal for load. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** Largest page of entries or groups. */
const MAX_LIMIT = 500;

/** The JSON API behind the page. Every method validates its input; queues outside `errorQueues` are refused. */
export class DashboardApi {
  readonly #ops: ErrorQueueOperations;
  readonly #sendBackOptions: SendBackOptions;

  constructor(
    private readonly config: DashboardConfig,
    private readonly groups: GroupIndex,
    private readonly stats: StatsCollector,
  ) {
    this.#ops = config.transport.errorQueue!;
    this.#sendBackOptions = config.allowedQueues === undefined ? {} : { allowedQueues: config.allowedQueues };
  }

  /** GET /api/groups?offset=&limit=: the failure groups of every error queue, largest first. */
  async listGroups(params: URLSearchParams): Promise<{
    queues: { errorQueue: string; scanned: number; truncated: boolean; computedAt: number }[];
    total: number;
    offset: number;
    limit: number;
    groups: GroupView[];
  }> {
    const offset = paging(params, 'offset', 0, Number.MAX_SAFE_INTEGER);
    const limit = paging(params, 'limit', 100, MAX_LIMIT);
    const all = await Promise.all(this.config.errorQueues.map((q) => this.groups.get(q)));
    const groups = all.flatMap((q) => q.groups).sort((a, b) => b.count - a.count || a.errorQueue.localeCompare(b.errorQueue) || a.signature.id.localeCompare(b.signature.id));
    return {
      queues: all.map((q) => ({ errorQueue: q.errorQueue, scanned: q.scanned, truncated: q.truncated, computedAt: q.computedAt })),
      total: groups.length,
      offset,
      limit,
      groups: groups.slice(offset, offset + limit),
    };
  }

  /**
   * GET /api/entries?errorQueue=&group=&offset=&limit=: one page of a group's
   * entries, oldest first; without `group`, of the whole error queue.
   */
  async listEntries(params: URLSearchParams): Promise<{ errorQueue: string; group: string | null; total: number; offset: number; limit: number; entries: EntrySummary[] }> {
    const errorQueue = this.#errorQueue(params.get('errorQueue') ?? this.config.errorQueues[0]);
    const group = params.get('group');
    const offset = paging(params, 'offset', 0, Number.MAX_SAFE_INTEGER);
    const limit = paging(params, 'limit', 50, MAX_LIMIT);
    if (group !== null) {
      const members = (await this.groups.get(errorQueue)).members.get(group) ?? [];
      return { errorQueue, group, total: members.length, offset, limit, entries: members.slice(offset, offset + limit) };
    }
    const [total, page] = await Promise.all([this.#ops.count(errorQueue), this.#ops.browse(errorQueue, { offset, limit })]);
    return { errorQueue, group: null, total, offset, limit, entries: page.map(summarize) };
  }

  /** GET /api/entries/:errorQueue/:key: one entry in full. */
  async entry(errorQueue: string, key: string): Promise<EntryDetail> {
    const entry = await this.#ops.get(this.#errorQueue(errorQueue), key);
    if (!entry) throw new ApiError(404, 'no such entry in the error queue (it may have been sent back or deleted)');
    return entryDetail(entry, this.config.bodyPreviewBytes);
  }

  /** GET /api/stats: the live counters. */
  async readStats(): Promise<StatsView & { transport: string }> {
    return { transport: this.config.transport.name, ...(await this.stats.read()) };
  }

  /**
   * POST /api/retry {errorQueue, key} | {errorQueue, group}: send one entry,
   * or every entry of a group, back. A refused destination (missing, an
   * error queue, not allowed) is a 409 for one entry, and counts as failed
   * in a group.
   */
  async retry(body: unknown): Promise<{ sentTo: string | null } | { sent: number; missing: number; failed: number; error?: string }> {
    const input = object(body);
    const errorQueue = this.#errorQueue(input['errorQueue']);
    if (typeof input['key'] === 'string' && input['group'] === undefined) {
      let sentTo: string | undefined;
      try {
        sentTo = await this.#ops.sendBack(errorQueue, input['key'], this.#sendBackOptions);
      } catch (error) {
        if (isSendBackRefused(error)) throw new ApiError(409, error.message);
        throw error;
      }
      this.#changed(errorQueue, sentTo === undefined ? 0 : 1);
      return { sentTo: sentTo ?? null };
    }
    if (typeof input['group'] === 'string' && input['key'] === undefined) return this.#retryGroup(errorQueue, input['group']);
    throw new ApiError(400, 'give either a key or a group');
  }

  /** POST /api/delete {errorQueue, key}: delete one entry. */
  async delete(body: unknown): Promise<{ deleted: boolean }> {
    const input = object(body);
    const errorQueue = this.#errorQueue(input['errorQueue']);
    if (typeof input['key'] !== 'string') throw new ApiError(400, 'key must be a string');
    const deleted = await this.#ops.delete(errorQueue, input['key']);
    this.#changed(errorQueue, deleted ? 1 : 0);
    return { deleted };
  }

  /**
   * Sends back every entry of a group in one pass of the error queue, so
   * entries that joined it since the page loaded go too. `missing` counts
   * entries removed by someone else meanwhile and entries another reader
   * held (never seen by this pass); `failed` counts refused destinations and
   * failed copies.
   */
  async #retryGroup(errorQueue: string, group: string): Promise<{ sent: number; missing: number; failed: number; error?: string }> {
    this.groups.invalidate(errorQueue);
    const members = (await this.groups.get(errorQueue)).members.get(group);
    if (!members) throw new ApiError(404, 'no such group in the error queue (it may have been retried already)');
    let firstError: string | undefined;
    let summary: BulkSummary;
    try {
      summary = await this.#ops.sendBackEach(errorQueue, {
        ...this.#sendBackOptions,
        select: (entry) => signatureOf(entry.headers).id === group,
        onResult: (result) => {
          if (result.outcome === 'refused' || result.outcome === 'failed') firstError ??= redactCredentials(summarizeError(result.error).message);
        },
      });
    } finally {
      this.groups.invalidate(errorQueue);
    }
    this.#changed(errorQueue, summary.done);
    const result = { sent: summary.done, missing: summary.gone + summary.unseen, failed: summary.refused + summary.failed };
    return firstError === undefined ? result : { ...result, error: firstError };
  }

  #changed(errorQueue: string, removed: number): void {
    this.groups.invalidate(errorQueue);
    if (removed > 0) this.stats.removed(errorQueue, removed);
  }

  #errorQueue(value: unknown): string {
    if (typeof value !== 'string' || !this.config.errorQueues.includes(value)) {
      throw new ApiError(400, `errorQueue must be one of the error queues this dashboard shows: ${this.config.errorQueues.join(', ')}`);
    }
    return value;
  }
}

function paging(params: URLSearchParams, name: string, fallback: number, max: number): number {
  const raw = params.get(name);
  if (raw === null || raw === '') return fallback;
  if (!/^\d{1,15}$/.test(raw)) throw new ApiError(400, `${name} must be a whole number`);
  const n = Number(raw);
  if (name === 'limit' && n < 1) throw new ApiError(400, 'limit must be at least 1');
  return Math.min(n, max);
}

function object(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError(400, 'the request body must be a JSON object');
  return body as Record<string, unknown>;
}
