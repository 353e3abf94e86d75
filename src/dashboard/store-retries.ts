/**
 * Retries from the dashboard in store mode: a retry job per "Retry group",
 * "Retry filtered" or "Retry" click, run in the background at the rate the
 * operator chose, and edit-and-retry of one entry. Both go through
 * {@link RetryJobs}, so the send-back rules, claims and records are the
 * store's own.
 */
import type { RetryJobs, RetryJobView } from '../error-store/retry-jobs.js';
import { silentLogger, type Logger } from '../logger.js';
import { isSendBackRefused } from '../operations/send-back-destination.js';
import { redactCredentials } from '../util/redact.js';
import { ApiError } from './api.js';
import { filterOf } from './store-api.js';

/** A job as the page shows it. */
export interface JobView {
  readonly id: string;
  readonly state: RetryJobView['state'];
  /** Whether the job is no longer running in this dashboard (done, stopped or paused). */
  readonly done: boolean;
  readonly total: number;
  readonly sent: number;
  readonly refused: number;
  readonly alreadyHandled: number;
  readonly failed: number;
  readonly ratePerSecond: number | null;
  /** Why the job stopped, when it did. */
  readonly error: string | null;
}

/** Reads one request body field. */
type Field = (name: string) => unknown;

/** Starts, watches and stops the dashboard's retry jobs; sends edited copies. */
export class StoreRetries {
  readonly #running = new Map<string, Promise<unknown>>();
  readonly #stop = new AbortController();

  constructor(
    private readonly jobs: RetryJobs,
    private readonly allowedQueues: readonly string[] | undefined,
    private readonly logger: Logger = silentLogger,
  ) {}

  /**
   * POST /api/jobs {filter, maxSeq, ratePerSecond} | {key}: records a job
   * over the waiting entries the filter selects (held to the snapshot
   * `maxSeq` the operator saw), or over one entry, and runs it in the
   * background, recording `by` as who sent the entries back. Resolves the
   * job as created.
   */
  async start(field: Field, by: string): Promise<JobView> {
    const key = field('key');
    const rate = field('ratePerSecond');
    if (rate !== undefined && !(typeof rate === 'number' && Number.isFinite(rate) && rate > 0)) throw new ApiError(400, 'ratePerSecond must be a number above 0');
    let selection;
    if (key !== undefined) {
      if (typeof key !== 'string' || key === '') throw new ApiError(400, 'key must be a non-empty string');
      selection = { keys: [key] };
    } else {
      const input = field('filter');
      if (typeof input !== 'object' || input === null || Array.isArray(input)) throw new ApiError(400, 'give a key, or a filter and the maxSeq from GET /api/count');
      const maxSeq = field('maxSeq');
      if (!Number.isSafeInteger(maxSeq) || (maxSeq as number) < 0) throw new ApiError(400, 'maxSeq (from GET /api/count) is required to retry a selection');
      const values = input as Record<string, unknown>;
      selection = { filter: { ...filterOf((name) => (Object.hasOwn(values, name) ? values[name] : undefined)), maxSeq: maxSeq as number } };
    }
    const job = await this.jobs.create(selection, {
      by,
      ...(typeof rate === 'number' ? { ratePerSecond: rate } : {}),
      ...(this.allowedQueues === undefined ? {} : { allowedQueues: this.allowedQueues }),
    });
    const run = this.jobs
      .run(job.id, { signal: this.#stop.signal })
      .catch((error: unknown) => this.logger.error({ err: error, job: job.id }, 'dashboard: a retry job failed; run it again to resume it'))
      .finally(() => this.#running.delete(job.id));
    this.#running.set(job.id, run);
    return this.#view(job);
  }

  /** GET /api/jobs/:id: a job's progress. */
  get(id: string): JobView {
    const job = this.jobs.get(id);
    if (!job) throw new ApiError(404, `no retry job ${id}`);
    return this.#view(job);
  }

  /** GET /api/jobs: the latest jobs, newest first. */
  list(): { jobs: JobView[] } {
    return { jobs: this.jobs.list({ limit: 20 }).map((j) => this.#view(j)) };
  }

  /**
   * POST /api/edit-retry {key, body, headers, requestId}: sends an edited
   * copy of one entry (the body as UTF-8 text, the headers replacing the
   * entry's) and marks the entry replaced. The page makes `requestId` when
   * the edit dialog opens, so a second click sends nothing again. `by` is
   * recorded as who edited.
   */
  async edit(field: Field, by: string): Promise<{ sentTo: string; messageId: string; duplicate: boolean }> {
    const key = field('key');
    const requestId = field('requestId');
    const body = field('body');
    const headers = field('headers');
    if (typeof key !== 'string' || key === '') throw new ApiError(400, 'key must be a non-empty string');
    if (typeof requestId !== 'string' || requestId === '') throw new ApiError(400, 'requestId must be a non-empty string');
    if (body !== undefined && typeof body !== 'string') throw new ApiError(400, 'body must be a string');
    if (headers !== undefined && (typeof headers !== 'object' || headers === null || Array.isArray(headers) || Object.values(headers).some((v) => typeof v !== 'string'))) {
      throw new ApiError(400, 'headers must be an object of header names to strings');
    }
    try {
      return await this.jobs.editAndRetry(
        key,
        {
          by,
          requestId,
          ...(body === undefined ? {} : { body: new TextEncoder().encode(body) }),
          ...(headers === undefined ? {} : { headers: headers as Record<string, string> }),
        },
        this.allowedQueues === undefined ? {} : { allowedQueues: this.allowedQueues },
      );
    } catch (error) {
      if (isSendBackRefused(error)) throw new ApiError(409, error.message);
      if (error instanceof RangeError) throw new ApiError(400, error.message);
      if (error instanceof Error) throw new ApiError(409, redactCredentials(error.message));
      throw error;
    }
  }

  /** Pauses the jobs running in this dashboard (they resume when run again) and waits for them. */
  async close(): Promise<void> {
    this.#stop.abort();
    await Promise.all(this.#running.values());
  }

  #view(job: RetryJobView): JobView {
    return {
      id: job.id,
      state: job.state,
      done: job.state === 'pending' || job.state === 'running' ? !this.#running.has(job.id) : true,
      total: job.total,
      sent: job.sent,
      refused: job.refused,
      alreadyHandled: job.alreadyHandled,
      failed: job.failed,
      ratePerSecond: job.ratePerSecond ?? null,
      error: job.stopReason ?? null,
    };
  }
}
