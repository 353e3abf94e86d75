/**
 * Retries from the error store: a job sends back the entries a filter (or a
 * list of keys) selected when the job was created, claiming each entry
 * before sending it so concurrent jobs send each entry once, at a rate, with
 * several sends in flight, resumable by id after an interruption. Also
 * edit-and-retry. See docs/error-store.md, "Retrying from the store".
 */
import { silentLogger, type Logger } from '../logger.js';
import { replayHeaders } from '../headers/replay.js';
import { isSendBackRefused } from '../operations/send-back-destination.js';
import { systemClock, type Clock } from '../time/clock.js';
import { systemRandom, type Random } from '../time/random.js';
import type { QueueKind } from '../transport/inspection.js';
import type { Transport } from '../transport/types.js';
import { CanaryController, checkCanaryOptions, type CanaryOptions, type CanaryView, type OutcomeCounts } from './canary.js';
import { editAndRetry, type EditRequest, type EditResult } from './edit.js';
import { checkFilter, filterSql, type EntryFilter } from './filter.js';
import { RateLimiter } from './rate-limiter.js';
import { destinationOf, type RetryContext } from './send-back.js';
import type { ErrorStore } from './store.js';

export type { CanaryOptions, CanaryView } from './canary.js';

/** Which entries a job sends back: those a filter selects (status `failed`), or these keys. */
export type RetrySelection = { readonly filter: EntryFilter } | { readonly keys: readonly string[] };

/** Options of {@link RetryJobs.create}. */
export interface RetryJobOptions {
  /** Who asked: an operator's name, `cli`, `dashboard`. Recorded on the job and on each entry. */
  readonly by: string;
  /** The queue every entry goes to. Default: each entry's failure queue (`redeliver-failure-queue`). */
  readonly to?: string;
  /** Destinations allowed; any other is refused. Default: any existing work queue. */
  readonly allowedQueues?: readonly string[];
  /** Sends per second at most. Default unlimited (up to {@link MAX_IN_FLIGHT} sends in flight). */
  readonly ratePerSecond?: number;
  /** Send one entry, wait for its outcome, then speed up while messages are handled; `true` for the defaults. Default off. */
  readonly canary?: CanaryOptions | true;
}

/** Where a job stands. */
export type RetryJobState = 'pending' | 'running' | 'paused' | 'done' | 'stopped';

/** A job and its counts. */
export interface RetryJobView {
  readonly id: string;
  /** Epoch ms. */
  readonly createdAt: number;
  readonly by: string;
  readonly selection: RetrySelection;
  /** The store's last `seq` when the job was created: later entries are never part of it. */
  readonly snapshotSeq: number;
  /** Entries in the snapshot. */
  readonly total: number;
  /** Sent back (the broker confirmed the copy). */
  readonly sent: number;
  /** Not sent: the destination was refused (missing, an error queue, not allowed, unknown). */
  readonly refused: number;
  /** Not sent: claimed, retried or deleted by someone else first. */
  readonly alreadyHandled: number;
  /** Not sent: the send failed; a resumed job tries them again. */
  readonly failed: number;
  readonly state: RetryJobState;
  /** Why the job stopped (state `stopped`) or paused. */
  readonly stopReason?: string;
  readonly ratePerSecond?: number;
  readonly to?: string;
  readonly allowedQueues?: readonly string[];
  /** Set for a canary replay. */
  readonly canary?: CanaryView & { readonly options: Required<CanaryOptions> };
}

/** What happened to one entry of a job. */
export interface RetryJobItem {
  readonly key: string;
  readonly seq: number;
  /** Undefined while pending. */
  readonly result?: 'sent' | 'already-handled' | 'refused' | 'failed';
  /** The refusal or failure, or a note on a duplicate send. */
  readonly detail?: string;
}

/** Options of {@link RetryJobs.run}. */
export interface RunOptions {
  /** Aborting pauses the job: sends in flight finish, the rest stay pending for a later run. */
  readonly signal?: AbortSignal;
  /** Called after each recorded batch of results. */
  readonly onProgress?: (view: RetryJobView) => void;
}

/** Options of a {@link RetryJobs} instance. */
export interface RetryJobsOptions {
  readonly store: ErrorStore;
  /** Where entries are sent back. */
  readonly transport: Transport;
  /** Default the system clock. */
  readonly clock?: Clock;
  /** For job, run and edit attempt ids. Default `Math.random`. */
  readonly random?: Random;
  /** Default silent. */
  readonly logger?: Logger;
  /** Sends that fail in a row before a job stops (the broker is likely down). Default 5. */
  readonly maxConsecutiveFailures?: number;
  /** How long a job's claim on an entry lasts, ms; a crashed job's entries can be retried by others after it. Default 300 000. */
  readonly claimMs?: number;
  /**
   * How long a run holds its job without renewing, ms: a run renews its
   * lease every third of it, and another run of the job (in any process) is
   * refused until it runs out. Default 30 000.
   */
  readonly leaseMs?: number;
}

/** Sends in flight at most per job. */
export const MAX_IN_FLIGHT = 64;

/** Entries a job claims and records at once at most. */
const CHUNK = 256;

interface JobRow {
  id: string;
  created_at: number;
  by: string;
  selection: string;
  options: string;
  snapshot_seq: number;
  total: number;
  sent: number;
  refused: number;
  already_handled: number;
  failed: number;
  state: RetryJobState;
  stop_reason: string | null;
  canary: string | null;
  run_id: string | null;
  lease_until: number | null;
}

interface StoredOptions {
  to?: string;
  allowedQueues?: readonly string[];
  ratePerSecond?: number;
  canary?: Required<CanaryOptions>;
}

type Result = NonNullable<RetryJobItem['result']>;

/** The jobs of a store, newest first; `limit` default 50, at most 1000. Needs no transport. */
export function listRetryJobs(store: ErrorStore, options: { limit?: number } = {}): RetryJobView[] {
  const limit = options.limit ?? 50;
  if (!(Number.isSafeInteger(limit) && limit >= 1 && limit <= 1_000)) throw new RangeError('limit must be a whole number from 1 to 1000');
  return store.database.prepare<[number], JobRow>('SELECT * FROM retry_jobs ORDER BY created_at DESC, id DESC LIMIT ?').all(limit).map(viewOf);
}

/** Retry jobs on one error store, sending back through one transport. */
export class RetryJobs {
  readonly #store: ErrorStore;
  readonly #transport: Transport;
  readonly #clock: Clock;
  readonly #random: Random;
  readonly #logger: Logger;
  readonly #maxFailures: number;
  readonly #claimMs: number;
  readonly #leaseMs: number;

  constructor(options: RetryJobsOptions) {
    this.#store = options.store;
    this.#transport = options.transport;
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? systemRandom;
    this.#logger = options.logger ?? silentLogger;
    this.#maxFailures = options.maxConsecutiveFailures ?? 5;
    this.#claimMs = options.claimMs ?? 300_000;
    this.#leaseMs = options.leaseMs ?? 30_000;
    if (!(Number.isSafeInteger(this.#maxFailures) && this.#maxFailures >= 1)) throw new RangeError('RetryJobs: maxConsecutiveFailures must be a whole number >= 1');
    if (!(Number.isSafeInteger(this.#claimMs) && this.#claimMs >= 1_000)) throw new RangeError('RetryJobs: claimMs must be a whole number >= 1000');
    if (!(Number.isSafeInteger(this.#leaseMs) && this.#leaseMs >= 1_000)) throw new RangeError('RetryJobs: leaseMs must be a whole number >= 1000');
  }

  /** Creates a job: records it and its snapshot (the entries selected now), in one transaction. Does not send. */
  async create(selection: RetrySelection, options: RetryJobOptions): Promise<RetryJobView> {
    const stored = checkJobOptions(options);
    const db = this.#store.database;
    const id = this.#newId('job');
    const snapshotSeq = this.#store.lastSeq();
    let fill: () => number;
    if ('keys' in selection) {
      if (!Array.isArray(selection.keys) || selection.keys.length === 0 || selection.keys.some((k) => typeof k !== 'string')) {
        throw new RangeError('selection.keys must be a non-empty list of entry keys');
      }
      const keys = [...new Set(selection.keys)];
      const lookup = db.prepare<[string], number>('SELECT seq FROM entries WHERE key = ?').pluck(true);
      const missing = keys.filter((key) => lookup.get(key) === undefined);
      if (missing.length > 0) throw new RangeError(`no entry ${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ` (and ${missing.length - 3} more)` : ''} in the store`);
      const insert = db.prepare('INSERT OR IGNORE INTO retry_job_items (job_id, seq, key) SELECT ?, seq, key FROM entries WHERE key = ?');
      fill = () => keys.reduce((n, key) => n + insert.run(id, key).changes, 0);
    } else if ('filter' in selection) {
      checkFilter(selection.filter);
      const maxSeq = Math.min(selection.filter.maxSeq ?? snapshotSeq, snapshotSeq);
      const { where, params } = filterSql({ ...selection.filter, status: 'failed', maxSeq });
      const insert = db.prepare(`INSERT INTO retry_job_items (job_id, seq, key) SELECT @jobId, seq, key FROM entries WHERE ${where}`);
      fill = () => insert.run({ ...params, jobId: id }).changes;
    } else {
      throw new RangeError('selection must be { filter } or { keys }');
    }
    await this.#store.write(() => {
      db.prepare(`INSERT INTO retry_jobs (id, created_at, by, selection, options, snapshot_seq, total, state) VALUES (?, ?, ?, ?, ?, ?, 0, 'pending')`).run(
        id,
        this.#clock.now(),
        options.by,
        JSON.stringify(selection),
        JSON.stringify(stored),
        snapshotSeq,
      );
      db.prepare('UPDATE retry_jobs SET total = ? WHERE id = ?').run(fill(), id);
    });
    return this.get(id)!;
  }

  /** A job, or undefined. */
  get(id: string): RetryJobView | undefined {
    const row = this.#store.database.prepare<[string], JobRow>('SELECT * FROM retry_jobs WHERE id = ?').get(id);
    return row && viewOf(row);
  }

  /** Jobs, newest first; `limit` default 50. */
  list(options: { limit?: number } = {}): RetryJobView[] {
    return listRetryJobs(this.#store, options);
  }

  /** What happened to each entry of a job, in snapshot order: `limit` (default 1000) after `afterSeq`. */
  items(id: string, options: { afterSeq?: number; limit?: number } = {}): RetryJobItem[] {
    return this.#store.database
      .prepare<[string, number, number], { key: string; seq: number; result: Result | null; detail: string | null }>(
        'SELECT key, seq, result, detail FROM retry_job_items WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?',
      )
      .all(id, options.afterSeq ?? 0, options.limit ?? 1_000)
      .map((r) => ({ key: r.key, seq: r.seq, ...(r.result === null ? {} : { result: r.result }), ...(r.detail === null ? {} : { detail: r.detail }) }));
  }

  /**
   * Runs a job, or resumes it where it stopped: pending entries, and those
   * whose send failed, are sent; entries already recorded are not. Resolves
   * the job's view when it is done, stopped (a reason says why) or paused
   * (the signal aborted). Each run has its own id and claims entries under
   * it, holding the job by a lease: a run of a job whose lease is live (in
   * this or another process) is refused; a run whose lease ran out and was
   * taken over stops.
   */
  async run(id: string, options: RunOptions = {}): Promise<RetryJobView> {
    const row = this.#store.database.prepare<[string], JobRow>('SELECT * FROM retry_jobs WHERE id = ?').get(id);
    if (!row) throw new RangeError(`no retry job ${id}`);
    if (row.state === 'done') return viewOf(row);
    return new JobRun(this, row, this.#newId('run'), options).run();
  }

  /**
   * Sends an edited copy of one entry (new body and/or headers, same message
   * id) and marks the original `replaced`; records the edit. A second call
   * with the same `requestId` sends nothing and resolves `duplicate: true`.
   */
  editAndRetry(key: string, edit: EditRequest, options: { to?: string; allowedQueues?: readonly string[] } = {}): Promise<EditResult> {
    return editAndRetry(this.#context(), key, edit, options, this.#newId('edit'));
  }

  /** A new id for a job, a run or an edit attempt: time and randomness, unique across processes. */
  #newId(kind: string): string {
    return `${kind}-${this.#clock.now().toString(36)}-${Math.floor(this.#random() * 2 ** 32).toString(16).padStart(8, '0')}`;
  }

  /** What the job run and edits share. */
  #context(): RetryContext {
    return {
      store: this.#store,
      transport: this.#transport,
      clock: this.#clock,
      logger: this.#logger,
      maxFailures: this.#maxFailures,
      claimMs: this.#claimMs,
      leaseMs: this.#leaseMs,
    };
  }

  /** @internal */
  get context(): RetryContext {
    return this.#context();
  }
}

/** One run of one job. */
class JobRun {
  readonly #context: RetryContext;
  readonly #id: string;
  readonly #runId: string;
  /** The claimant of this run's entries: the job and the run, so two runs of one job never share a claim. */
  readonly #claimant: string;
  readonly #options: StoredOptions;
  readonly #by: string;
  readonly #signal: AbortSignal | undefined;
  /** Ends this run's waits: aborted when the run ends, or when another run took the job over. */
  readonly #halt = new AbortController();
  /** Aborts when the caller's signal or {@link #halt} does. */
  readonly #waits: AbortSignal;
  readonly #onProgress: ((view: RetryJobView) => void) | undefined;
  readonly #limiter: RateLimiter;
  readonly #canary: CanaryController | undefined;
  /** The outcomes of the entries this job sent, read from the store now (canary replays only). */
  readonly #outcomes: (() => OutcomeCounts) | undefined;
  readonly #kinds = new Map<string, QueueKind>();
  readonly #inFlight = new Set<Promise<void>>();
  /** Wakes the sender waiting for a free slot. */
  #slotFreed: (() => void) | undefined;
  /** Confirmed sends not yet recorded, by destination. */
  #confirmed = new Map<string, string[]>();
  #confirmedCount = 0;
  #results: { key: string; result: Exclude<Result, 'sent'>; detail?: string }[] = [];
  #recording: Promise<void> = Promise.resolve();
  #consecutiveFailures = 0;
  #stopReason: string | undefined;
  #recordFailure: unknown;

  constructor(jobs: RetryJobs, row: JobRow, runId: string, options: RunOptions) {
    this.#context = jobs.context;
    this.#id = row.id;
    this.#runId = runId;
    this.#claimant = claimantOf(row.id, runId);
    this.#options = JSON.parse(row.options) as StoredOptions;
    this.#by = row.by;
    this.#signal = options.signal;
    this.#waits = options.signal ? AbortSignal.any([options.signal, this.#halt.signal]) : this.#halt.signal;
    this.#onProgress = options.onProgress;
    this.#limiter = new RateLimiter(this.#context.clock, this.#options.ratePerSecond ?? Infinity);
    if (this.#options.canary) {
      const outcomes = this.#context.store.database.prepare<[string], OutcomeCounts>(
        `SELECT count(*) AS sent, coalesce(sum(e.outcome = 'handled'), 0) AS handled, coalesce(sum(e.outcome = 'failed-again'), 0) AS failedAgain
         FROM retry_job_items i JOIN entries e ON e.seq = i.seq WHERE i.job_id = ? AND i.result = 'sent'`,
      );
      this.#outcomes = () => outcomes.get(this.#id)!;
      this.#canary = new CanaryController(this.#options.canary, this.#context.clock, this.#limiter, this.#outcomes);
    }
  }

  async run(): Promise<RetryJobView> {
    const db = this.#context.store.database;
    const { clock, leaseMs } = this.#context;
    // Takes the lease; the entries an earlier run of the job still claims (sent but not recorded) become this run's.
    // Sends that failed are tried again; counters are recounted from the items.
    const started = await this.#context.store.write((version) => {
      const now = clock.now();
      const current = db.prepare<[string], JobRow>('SELECT * FROM retry_jobs WHERE id = ?').get(this.#id)!;
      if (current.run_id !== null && current.lease_until !== null && current.lease_until > now) {
        throw new Error(
          `retry job ${this.#id} is already running (run ${current.run_id}, lease until ${new Date(current.lease_until).toISOString()}); wait for it to end or pause it there`,
        );
      }
      if (current.state === 'done') return false;
      if (current.run_id !== null) {
        db.prepare(`UPDATE entries SET claim = ?, version = ? WHERE claim = ? AND status = 'retrying'`).run(this.#claimant, version, claimantOf(this.#id, current.run_id));
      }
      db.prepare(`UPDATE retry_job_items SET result = NULL, detail = NULL WHERE job_id = ? AND result = 'failed'`).run(this.#id);
      db.prepare(
        `UPDATE retry_jobs SET state = 'running', stop_reason = NULL, run_id = @run, lease_until = @until,
           sent = (SELECT count(*) FROM retry_job_items WHERE job_id = @id AND result = 'sent'),
           refused = (SELECT count(*) FROM retry_job_items WHERE job_id = @id AND result = 'refused'),
           already_handled = (SELECT count(*) FROM retry_job_items WHERE job_id = @id AND result = 'already-handled'),
           failed = 0
         WHERE id = @id`,
      ).run({ id: this.#id, run: this.#runId, until: now + leaseMs });
      return true;
    });
    if (!started) return viewOf(db.prepare<[string], JobRow>('SELECT * FROM retry_jobs WHERE id = ?').get(this.#id)!);
    const renewing = this.#renewLease();
    const pending = db.prepare<[string, number, number], { seq: number; key: string }>(
      'SELECT seq, key FROM retry_job_items WHERE job_id = ? AND seq > ? AND result IS NULL ORDER BY seq LIMIT ?',
    );
    let after = 0;
    let unsent: string[] = [];
    try {
      while (!this.#halted()) {
        const chunk = pending.all(this.#id, after, this.#chunkSize());
        if (chunk.length === 0) break;
        after = chunk.at(-1)!.seq;
        const keys = chunk.map((c) => c.key);
        const claimed = new Set(await this.#context.store.claim(keys, this.#claimant, this.#context.clock.now() + this.#context.claimMs));
        for (const key of keys) if (!claimed.has(key)) this.#results.push({ key, result: 'already-handled' });
        unsent = keys.filter((key) => claimed.has(key));
        while (unsent.length > 0 && !this.#halted()) {
          if (this.#canary) {
            const reason = await this.#canary.beforeSend(() => this.#settle(), this.#waits);
            if (reason !== undefined) {
              this.#stop(reason);
              break;
            }
          }
          await this.#limiter.take(this.#waits);
          if (this.#halted()) break;
          const key = unsent.shift()!;
          await this.#send(key);
          if (this.#canary || this.#confirmedCount + this.#results.length >= CHUNK) await this.#flush();
        }
        // Sends stay in flight across chunks; only the claims this run will not use are given back.
        await this.#release(unsent);
        unsent = [];
      }
      await this.#settle();
    } catch (error) {
      // An abort ends the run as paused (or a takeover, stopped); anything else (the store locked beyond its busy timeout) stops it with the reason.
      if (!this.#waits.aborted) {
        this.#context.logger.error({ job: this.#id, err: error }, 'retry job stopped');
        this.#stop(`${messageOf(error)}; resume the job when this is fixed`);
      }
    } finally {
      await Promise.allSettled(this.#inFlight);
      await this.#release(unsent).catch(() => undefined);
      await this.#flush().catch(() => undefined);
      this.#halt.abort();
      await renewing;
    }
    if (this.#recordFailure !== undefined) this.#stop(`could not record the sends: ${messageOf(this.#recordFailure)}; the entries sent stay claimed, and resuming sends them again (duplicates with the same message id)`);
    const state: RetryJobState = this.#stopReason !== undefined ? 'stopped' : this.#signal?.aborted ? 'paused' : 'done';
    const reason = this.#stopReason ?? (state === 'paused' ? 'paused: resume with the job id' : null);
    // The lease is given up (its run id stays, so a later run takes over what this one still claims); a run taken over leaves the job to its new run.
    await this.#context.store
      .write(() =>
        db
          .prepare('UPDATE retry_jobs SET state = ?, stop_reason = ?, canary = ?, lease_until = NULL WHERE id = ? AND run_id = ?')
          .run(state, reason, this.#canaryJson(), this.#id, this.#runId),
      )
      .catch((error: unknown) => this.#context.logger.error({ job: this.#id, err: error }, 'could not record the end of a retry job'));
    const row = db.prepare<[string], JobRow>('SELECT * FROM retry_jobs WHERE id = ?').get(this.#id)!;
    const view = row.run_id === this.#runId ? viewOf(row) : { ...viewOf(row), state, ...(reason === null ? {} : { stopReason: reason }) };
    this.#onProgress?.(view);
    this.#context.logger.info({ job: this.#id, state, sent: view.sent, refused: view.refused, alreadyHandled: view.alreadyHandled, failed: view.failed }, `retry job ${state}`);
    return view;
  }

  #halted(): boolean {
    return this.#stopReason !== undefined || this.#recordFailure !== undefined || this.#signal?.aborted === true;
  }

  #stop(reason: string): void {
    this.#stopReason ??= reason;
  }

  /** Stops the run unless it still holds the job's lease; true while it does. */
  #holdsLease(): boolean {
    const holder = this.#context.store.database.prepare<[string], string | null>('SELECT run_id FROM retry_jobs WHERE id = ?').pluck(true).get(this.#id);
    if (holder === this.#runId) return true;
    this.#stop(`this run's lease ran out and run ${holder} took the job over; it carries on`);
    this.#halt.abort();
    return false;
  }

  /** Renews the lease every third of its length until the run ends; stops the run when another run took the job over. */
  async #renewLease(): Promise<void> {
    const { store, clock, leaseMs, logger } = this.#context;
    const renew = store.database.prepare('UPDATE retry_jobs SET lease_until = ? WHERE id = ? AND run_id = ?');
    while (!this.#halt.signal.aborted) {
      try {
        await clock.sleep(Math.ceil(leaseMs / 3), this.#halt.signal);
        const renewed = await store.write(() => renew.run(clock.now() + leaseMs, this.#id, this.#runId).changes === 1);
        if (!renewed) this.#holdsLease();
      } catch (error) {
        // The run ended (the sleep aborted), or the store was busy: the next turn tries again, before the lease runs out.
        if (!this.#halt.signal.aborted) logger.warn({ job: this.#id, err: error }, 'could not renew a retry job\'s lease');
      }
    }
  }

  /** Entries claimed per chunk: about half a minute's worth at the current rate, so claims never run out while waiting. */
  #chunkSize(): number {
    const rate = this.#canary && this.#canary.view.rate === 0 ? 1 : this.#limiter.rate;
    return Math.max(1, Math.min(CHUNK, Math.ceil(rate * 30)));
  }

  /** Starts one send (waiting while {@link MAX_IN_FLIGHT} are in flight); refusals are recorded at once. */
  async #send(key: string): Promise<void> {
    while (this.#inFlight.size >= MAX_IN_FLIGHT) await new Promise<void>((resolve) => (this.#slotFreed = resolve));
    const { store, transport, clock } = this.#context;
    const entry = store.get(key);
    if (!entry) {
      this.#results.push({ key, result: 'already-handled', detail: 'the entry is no longer in the store' });
      return;
    }
    let destination: string;
    try {
      destination = await destinationOf(transport, entry, this.#options.to, this.#options.allowedQueues, this.#kinds);
    } catch (error) {
      await store.releaseClaim(key, this.#claimant);
      this.#results.push({ key, result: 'refused', detail: messageOf(error) });
      return;
    }
    // The last moment to find the job taken over (this process stalled past its lease) before sending: the new run holds this entry now.
    if (!this.#holdsLease()) return;
    const sending = transport
      .send(destination, { id: entry.messageId, body: entry.body, headers: replayHeaders(entry.headers, new Date(clock.now())) })
      .then(
        () => {
          this.#consecutiveFailures = 0;
          const list = this.#confirmed.get(destination) ?? [];
          list.push(key);
          this.#confirmed.set(destination, list);
          this.#confirmedCount++;
        },
        async (error: unknown) => {
          const refused = isSendBackRefused(error);
          this.#context.logger.warn({ job: this.#id, key, queue: destination, err: error }, refused ? 'send-back refused' : 'send-back failed; the entry stays failed');
          await store.releaseClaim(key, this.#claimant).catch(() => undefined);
          this.#results.push({ key, result: refused ? 'refused' : 'failed', detail: messageOf(error) });
          if (!refused && ++this.#consecutiveFailures >= this.#context.maxFailures) {
            this.#stop(`${this.#consecutiveFailures} sends in a row failed (last: ${messageOf(error)}); is the broker reachable? Resume the job when it is`);
          }
        },
      )
      .finally(() => {
        this.#inFlight.delete(sending);
        this.#slotFreed?.();
        this.#slotFreed = undefined;
      });
    this.#inFlight.add(sending);
  }

  /** Waits for the sends in flight and records them. */
  async #settle(): Promise<void> {
    await Promise.all(this.#inFlight);
    await this.#flush();
  }

  /** Gives back claims on entries this run will not send. */
  async #release(keys: readonly string[]): Promise<void> {
    for (const key of keys) await this.#context.store.releaseClaim(key, this.#claimant);
  }

  /** Records confirmed sends (marking their entries retried) and other results, with the job's counters, one transaction per destination. */
  #flush(): Promise<void> {
    this.#recording = this.#recording.then(() => this.#record());
    return this.#recording;
  }

  async #record(): Promise<void> {
    if (this.#recordFailure !== undefined) return;
    const confirmed = this.#confirmed;
    const results = this.#results;
    if (confirmed.size === 0 && results.length === 0) return;
    this.#confirmed = new Map();
    this.#confirmedCount = 0;
    this.#results = [];
    const db = this.#context.store.database;
    // Only while this run holds the job: a run taken over leaves the job's record to its new run (entries it sent are still marked, by claim).
    const setResult = db.prepare(
      `UPDATE retry_job_items SET result = @result, detail = @detail WHERE job_id = @job AND seq = (SELECT seq FROM entries WHERE key = @key)
         AND EXISTS (SELECT 1 FROM retry_jobs WHERE id = @job AND run_id = @run)`,
    );
    const count = db.prepare(
      `UPDATE retry_jobs SET sent = sent + @sent, refused = refused + @refused, already_handled = already_handled + @already, failed = failed + @failed, canary = @canary
       WHERE id = @job AND run_id = @run`,
    );
    try {
      for (const [queue, keys] of confirmed) {
        await this.#context.store.markRetriedMany(keys, this.#claimant, { queue, by: this.#by }, 'retried', (marked) => {
          const ok = new Set(marked);
          for (const key of keys) {
            const detail = ok.has(key) ? null : 'sent, but the claim ran out first: another retry may have sent it too';
            setResult.run({ job: this.#id, run: this.#runId, key, result: 'sent', detail });
          }
          count.run({ job: this.#id, run: this.#runId, sent: keys.length, refused: 0, already: 0, failed: 0, canary: this.#canaryJson() });
        });
      }
      if (results.length > 0) {
        await this.#context.store.write(() => {
          const tally = { refused: 0, already: 0, failed: 0 };
          for (const r of results) {
            setResult.run({ job: this.#id, run: this.#runId, key: r.key, result: r.result, detail: r.detail ?? null });
            if (r.result === 'refused') tally.refused++;
            else if (r.result === 'failed') tally.failed++;
            else tally.already++;
          }
          count.run({ job: this.#id, run: this.#runId, sent: 0, ...tally, canary: this.#canaryJson() });
        });
      }
    } catch (error) {
      this.#recordFailure = error;
      this.#context.logger.error({ job: this.#id, err: error }, 'could not record retry results; the job stops');
      return;
    }
    this.#onProgress?.(viewOf(db.prepare<[string], JobRow>('SELECT * FROM retry_jobs WHERE id = ?').get(this.#id)!));
  }

  /**
   * The canary's view as recorded with the job: its rate, and the outcome
   * counts read now, inside the transaction that records the job's counters,
   * so the two agree in every report (the controller reads them only once a window).
   */
  #canaryJson(): string | null {
    return this.#canary && this.#outcomes ? JSON.stringify({ ...this.#canary.view, ...this.#outcomes() }) : null;
  }
}

/** The claimant of one run's entries. */
function claimantOf(jobId: string, runId: string): string {
  return `job:${jobId}/${runId}`;
}

function checkJobOptions(options: RetryJobOptions): StoredOptions {
  if (typeof options !== 'object' || options === null) throw new RangeError('retry job options must be an object');
  if (typeof options.by !== 'string' || options.by.trim() === '' || options.by.length > 200) throw new RangeError('options.by must name who asked (1 to 200 characters)');
  if (options.to !== undefined && (typeof options.to !== 'string' || options.to === '')) throw new RangeError('options.to must name a queue');
  if (options.allowedQueues !== undefined && !(Array.isArray(options.allowedQueues) && options.allowedQueues.every((q) => typeof q === 'string'))) {
    throw new RangeError('options.allowedQueues must be a list of queue names');
  }
  if (options.ratePerSecond !== undefined && !(Number.isFinite(options.ratePerSecond) && options.ratePerSecond > 0)) {
    throw new RangeError(`options.ratePerSecond must be a number > 0, got ${options.ratePerSecond}`);
  }
  if (options.canary !== undefined && options.ratePerSecond !== undefined) throw new RangeError('a canary replay sets its own rate: give canary.maxRate instead of ratePerSecond');
  return {
    ...(options.to === undefined ? {} : { to: options.to }),
    ...(options.allowedQueues === undefined ? {} : { allowedQueues: [...options.allowedQueues] }),
    ...(options.ratePerSecond === undefined ? {} : { ratePerSecond: options.ratePerSecond }),
    ...(options.canary === undefined ? {} : { canary: checkCanaryOptions(options.canary === true ? {} : options.canary) }),
  };
}

function viewOf(row: JobRow): RetryJobView {
  const options = JSON.parse(row.options) as StoredOptions;
  const canary = row.canary === null ? undefined : (JSON.parse(row.canary) as CanaryView);
  return {
    id: row.id,
    createdAt: row.created_at,
    by: row.by,
    selection: JSON.parse(row.selection) as RetrySelection,
    snapshotSeq: row.snapshot_seq,
    total: row.total,
    sent: row.sent,
    refused: row.refused,
    alreadyHandled: row.already_handled,
    failed: row.failed,
    state: row.state,
    ...(row.stop_reason === null ? {} : { stopReason: row.stop_reason }),
    ...(options.ratePerSecond === undefined ? {} : { ratePerSecond: options.ratePerSecond }),
    ...(options.to === undefined ? {} : { to: options.to }),
    ...(options.allowedQueues === undefined ? {} : { allowedQueues: options.allowedQueues }),
    ...(options.canary === undefined ? {} : { canary: { rate: 0, sent: 0, handled: 0, failedAgain: 0, ...canary, options: options.canary } }),
  };
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
