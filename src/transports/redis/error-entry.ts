/**
 * Error-stream entries as an operator sees them. An error stream is an
 * ordinary stream anyone with access can `XADD` to, so it may hold entries
 * redeliver did not write (no message id, headers that are not a JSON object
 * of strings). Those are still shown, counted and deletable, so one stray
 * entry never hides a page: with the message id and body they carry (or
 * `''` and an empty body) and no headers. Sending one back is refused (see
 * `RedisOperations.sendBack`): its headers cannot be trusted to be copied.
 */
import type { ErrorEntry } from '../../transport/error-queue.js';
import { decodeEntry, MalformedEntryError, type RawEntry, type StreamEntry } from './codec.js';

const MAX_ID_PART = 2n ** 64n - 1n;

/** Whether `key` is a full stream entry id, `<ms>-<seq>`, each part below 2^64: the only keys an entry can have. */
export function isEntryKey(key: string): boolean {
  const parts = /^(\d{1,20})-(\d{1,20})$/.exec(key);
  return parts !== null && BigInt(parts[1]!) <= MAX_ID_PART && BigInt(parts[2]!) <= MAX_ID_PART;
}

/** An entry as an operator sees it, and as redeliver wrote it (or why redeliver did not write it). */
export interface ReadEntry {
  readonly entry: ErrorEntry;
  readonly decoded: StreamEntry | MalformedEntryError;
}

/** The entry `raw` of `errorQueue` as an operator sees it; never throws for a malformed entry. */
export function errorEntryOf(errorQueue: string, raw: RawEntry): ErrorEntry {
  return readEntryOf(errorQueue, raw).entry;
}

/** The entry `raw` of `errorQueue`, decoded once: as an operator sees it, and strictly. */
export function readEntryOf(errorQueue: string, raw: RawEntry): ReadEntry {
  let decoded: StreamEntry;
  try {
    decoded = decodeEntry(raw);
  } catch (error) {
    if (!(error instanceof MalformedEntryError)) throw error;
    const entry = { key: raw[0].toString(), messageId: field(raw, 'i')?.toString() ?? '', errorQueue, body: bytes(field(raw, 'b')), headers: {} };
    return { entry, decoded: error };
  }
  return { entry: { key: decoded.entryId, messageId: decoded.id, errorQueue, body: decoded.body, headers: decoded.headers }, decoded };
}

function field(raw: RawEntry, name: string): Buffer | string | undefined {
  const fields = raw[1];
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i]!.toString() === name) return fields[i + 1];
  return undefined;
}

function bytes(value: Buffer | string | undefined): Uint8Array {
  if (value === undefined) return new Uint8Array(0);
  return typeof value === 'string' ? Buffer.from(value) : value;
}
