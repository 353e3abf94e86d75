import { HEADER } from '../headers/names.js';
import { groupBySignature, type FailureSignature } from '../operations/signature.js';
import type { Clock } from '../time/clock.js';
import type { ErrorEntry, ErrorQueueOperations } from '../transport/error-queue.js';

/** One entry of a group, as listed on the page (the full entry is fetched on demand). */
export interface EntrySummary {
  readonly key: string;
  readonly messageId: string;
  /** When it moved to the error queue, ISO 8601, or `''` when the header is missing. */
  readonly failedAt: string;
  /** The `redeliver-failure-error-name` header; empty when the entry has none (redeliver did not write it). */
  readonly errorName: string;
  /** The last error's message as thrown (not normalised), cut to {@link SUMMARY_MESSAGE_CHARS} characters. */
  readonly message: string;
}

/** A failure group of one error queue. */
export interface GroupView {
  readonly errorQueue: string;
  readonly signature: FailureSignature;
  readonly count: number;
  readonly firstSeen: string;
  readonly lastSeen: string;
}

/** The groups of one error queue at one moment. */
export interface QueueGroups {
  readonly errorQueue: string;
  /** When they were computed, epoch milliseconds. */
  readonly computedAt: number;
  /** Entries read. */
  readonly scanned: number;
  /** Whether the queue held more entries than were read (the groups are then partial). */
  readonly truncated: boolean;
  readonly groups: readonly GroupView[];
  /** Entry summaries by group id, oldest first. */
  readonly members: ReadonlyMap<string, readonly EntrySummary[]>;
}

/** Characters of an error message kept in an {@link EntrySummary}. */
export const SUMMARY_MESSAGE_CHARS = 300;

/** Entries per page of the scan that computes groups: bounded memory. */
const CHUNK = 5_000;

/**
 * Computes failure groups by reading an error queue in one pass (`scan`), and
 * keeps them for a few seconds so a page refresh or a second viewer does not
 * read the whole queue again. Concurrent requests share one computation.
 */
export class GroupIndex {
  readonly #cache = new Map<string, { groups: QueueGroups | undefined; pending: Promise<QueueGroups> | undefined; generation: number }>();

  constructor(
    private readonly ops: ErrorQueueOperations,
    private readonly clock: Clock,
    private readonly cacheMs: number,
    private readonly maxScan: number,
  ) {}

  /** The groups of `errorQueue`, from the cache when fresh enough. */
  get(errorQueue: string): Promise<QueueGroups> {
    let slot = this.#cache.get(errorQueue);
    if (!slot) this.#cache.set(errorQueue, (slot = { groups: undefined, pending: undefined, generation: 0 }));
    const cached = slot.groups;
    if (cached && this.clock.now() - cached.computedAt < this.cacheMs) return Promise.resolve(cached);
    if (slot.pending) return slot.pending;
    const s = slot;
    const generation = s.generation;
    const pending = this.#compute(errorQueue).then(
      (groups) => {
        if (s.generation === generation) s.groups = groups;
        if (s.pending === pending) s.pending = undefined;
        return groups;
      },
      (error: unknown) => {
        if (s.pending === pending) s.pending = undefined;
        throw error;
      },
    );
    s.pending = pending;
    return pending;
  }

  /** Forgets the groups of `errorQueue`, after an action changed it. */
  invalidate(errorQueue: string): void {
    const slot = this.#cache.get(errorQueue);
    if (!slot) return;
    slot.groups = undefined;
    slot.pending = undefined;
    slot.generation++;
  }

  async #compute(errorQueue: string): Promise<QueueGroups> {
    const compact: ErrorEntry[] = [];
    const summaries = new Map<string, EntrySummary>();
    const total = await this.ops.count(errorQueue);
    let read = 0;
    scan: for await (const chunk of this.ops.scan(errorQueue, { pageSize: CHUNK })) {
      for (const entry of chunk) {
        // Leaving the loop ends the pass and gives back what it read.
        if (read >= this.maxScan) break scan;
        read++;
        if (summaries.has(entry.key)) continue; // two indistinguishable entries share a key: count it once
        compact.push(compactEntry(entry));
        summaries.set(entry.key, summarize(entry));
      }
    }
    const truncated = total > this.maxScan;
    const groups = groupBySignature(compact);
    const members = new Map<string, EntrySummary[]>();
    for (const group of groups) members.set(group.signature.id, group.keys.map((key) => summaries.get(key)!));
    return {
      errorQueue,
      computedAt: this.clock.now(),
      scanned: compact.length,
      truncated,
      groups: groups.map((g) => ({ errorQueue, signature: g.signature, count: g.count, firstSeen: g.firstSeen, lastSeen: g.lastSeen })),
      members,
    };
  }
}

/**
 * The entry reduced to what its signature and times are computed from, so
 * a large error queue does not stay in memory with its bodies and stacks:
 * the message is cut where normalisation cuts it, and the stack is reduced
 * to its first frame.
 */
function compactEntry(entry: ErrorEntry): ErrorEntry {
  const h = entry.headers;
  const headers: Record<string, string> = {};
  for (const name of [HEADER.failureErrorName, HEADER.failureReason, HEADER.failureTime]) {
    const value = own(h, name);
    if (value !== undefined) headers[name] = value;
  }
  const message = own(h, HEADER.failureMessage);
  if (message !== undefined) headers[HEADER.failureMessage] = message.slice(0, 1_000);
  const stack = own(h, HEADER.failureStack);
  if (stack !== undefined) headers[HEADER.failureStack] = throughFirstFrame(stack);
  return { key: entry.key, messageId: entry.messageId, errorQueue: entry.errorQueue, body: EMPTY, headers };
}

/** The listing of one entry. */
export function summarize(entry: ErrorEntry): EntrySummary {
  const message = own(entry.headers, HEADER.failureMessage) ?? '';
  return {
    key: entry.key,
    messageId: entry.messageId,
    failedAt: own(entry.headers, HEADER.failureTime) ?? '',
    errorName: (own(entry.headers, HEADER.failureErrorName) ?? '').slice(0, 200),
    message: message.length > SUMMARY_MESSAGE_CHARS ? `${message.slice(0, SUMMARY_MESSAGE_CHARS - 1)}…` : message,
  };
}

function throughFirstFrame(stack: string): string {
  return stack.split('\n').find((l) => l.trim().startsWith('at ')) ?? '';
}

function own(headers: Readonly<Record<string, string>>, name: string): string | undefined {
  if (!Object.prototype.hasOwnProperty.call(headers, name)) return undefined;
  const value = headers[name];
  return typeof value === 'string' ? value : undefined;
}

const EMPTY = new Uint8Array(0);
