import { groupBySignature, type FailureGroup } from '../operations/signature.js';
import type { ErrorEntry, ErrorQueueOperations } from '../transport/error-queue.js';
import type { Transport } from '../transport/types.js';
import { oneLine, truncate } from './format.js';
import { UsageError } from './open-transport.js';

/** Entries per page of a scan. */
export const PAGE_SIZE = 500;

/** Every entry of an error queue, oldest first, a page at a time, read in one pass (`scan`). */
export function pages(ops: ErrorQueueOperations, errorQueue: string, pageSize = PAGE_SIZE): AsyncIterable<ErrorEntry[]> {
  return ops.scan(errorQueue, { pageSize });
}

/** The failure groups of a whole error queue and how many entries were read. */
export interface ScanResult {
  readonly scanned: number;
  readonly groups: FailureGroup[];
}

/**
 * Groups every entry of an error queue by failure signature, largest group
 * first. Pages are grouped one at a time and merged, so only keys and
 * signatures stay in memory, never bodies or stacks.
 */
export async function scanGroups(ops: ErrorQueueOperations, errorQueue: string, onPage?: (entries: number) => void): Promise<ScanResult> {
  const merged = new Map<string, { group: FailureGroup; keys: string[] }>();
  let scanned = 0;
  for await (const page of pages(ops, errorQueue)) {
    scanned += page.length;
    for (const group of groupBySignature(page)) {
      const seen = merged.get(group.signature.id);
      if (!seen) {
        merged.set(group.signature.id, { group, keys: [...group.keys] });
        continue;
      }
      seen.keys.push(...group.keys);
      seen.group = {
        signature: seen.group.signature,
        count: seen.group.count + group.count,
        firstSeen: earliest(seen.group.firstSeen, group.firstSeen),
        lastSeen: latest(seen.group.lastSeen, group.lastSeen),
        keys: seen.keys,
      };
    }
    onPage?.(page.length);
  }
  const groups = [...merged.values()]
    .map(({ group, keys }) => ({ ...group, keys }))
    .sort((a, b) => b.count - a.count || a.signature.id.localeCompare(b.signature.id));
  return { scanned, groups };
}

function earliest(a: string, b: string): string {
  if (a === '') return b;
  if (b === '') return a;
  return a < b ? a : b;
}

function latest(a: string, b: string): string {
  return a > b ? a : b;
}

/** Key formats of the transports whose keys have a known shape. */
const KEY_FORMATS: Readonly<Record<string, { pattern: RegExp; description: string }>> = {
  sqlite: { pattern: /^\d{1,15}$/, description: 'whole numbers' },
  memory: { pattern: /^\d{1,15}$/, description: 'whole numbers' },
  redis: { pattern: /^\d{1,20}-\d{1,20}$/, description: 'stream entry ids such as 1700000000000-0' },
  jetstream: { pattern: /^[1-9]\d{0,15}$/, description: 'stream sequence numbers such as 17' },
};

/** What any transport's key looks like: printable, at most 1024 characters. */
const ANY_KEY = { pattern: /^[^\u0000-\u001f\u007f]{1,1024}$/, description: 'at most 1024 printable characters' };

/** Throws a {@link UsageError} when `key` cannot be a key of `transport`'s error queues. */
export function checkKey(transport: Transport, key: string): void {
  const format = Object.prototype.hasOwnProperty.call(KEY_FORMATS, transport.name) ? KEY_FORMATS[transport.name]! : ANY_KEY;
  if (!format.pattern.test(key)) {
    throw new UsageError(
      `'${truncate(oneLine(key), 60)}' is not an error-queue key: ${transport.name} keys are ${format.description} (redeliver errors list --json shows them)`,
    );
  }
}

/** A failure signature id as `errors list` prints it, lower-cased; throws a {@link UsageError} for anything else. */
export function checkSignature(value: string): string {
  if (!/^[0-9a-f]{8}$/i.test(value)) {
    throw new UsageError(`'${truncate(oneLine(value), 60)}' is not a failure signature: signatures are 8 hex digits, as redeliver errors list prints them`);
  }
  return value.toLowerCase();
}
