import { HEADER } from '../headers/names.js';
import type { Headers } from '../transport/types.js';
import type { ErrorEntry } from '../transport/error-queue.js';

/**
 * A failure signature: what makes two failures "the same problem". The
 * error name, the message with volatile parts (ids, numbers, hex, quoted
 * values) normalised, and the top stack frame without line numbers.
 */
export interface FailureSignature {
  /** A short stable hash of the parts, usable in URLs and on the command line. */
  readonly id: string;
  /** The `redeliver-failure-error-name` header; empty when the entry has none (redeliver did not write it). */
  readonly errorName: string;
  readonly message: string;
  readonly topFrame: string;
  /** The `redeliver-failure-reason` header; `unknown` when the entry has none. */
  readonly reason: string;
}

const UUID = /\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi;
const HEX = /\b(?:0x)?[0-9a-f]*\d[0-9a-f]*\b/gi;
const NUMBER = /\d+(?:\.\d+)?/g;
const QUOTED = /(["'`])(?:(?!\1).){1,200}\1/g;

/** The message with ids, numbers, hex and quoted values replaced by placeholders. */
export function normalizeMessage(message: string): string {
  return message
    .slice(0, 1_000)
    .replace(UUID, '<id>')
    .replace(QUOTED, '<value>')
    .replace(HEX, (token) => (/[a-f]/i.test(token) && token.length >= 8 ? '<hex>' : token))
    .replace(NUMBER, '<n>')
    .replace(/\s+/g, ' ')
    .trim();
}

/** The first `at ...` line of a stack, without line and column numbers. */
export function topFrame(stack: string): string {
  const line = firstFrameLine(stack);
  if (line === undefined) return '';
  return line.trim().replace(/:\d+:\d+\)?$/, (m) => (m.endsWith(')') ? ')' : '')).slice(0, 300);
}

/** The first line of `stack` that starts with `at ` once trimmed, found without splitting the whole stack. */
function firstFrameLine(stack: string): string | undefined {
  for (let start = 0; start < stack.length; ) {
    const end = stack.indexOf('\n', start);
    const line = stack.slice(start, end === -1 ? stack.length : end);
    if (line.trim().startsWith('at ')) return line;
    if (end === -1) return undefined;
    start = end + 1;
  }
  return undefined;
}

/** The signature of a dead-lettered message, from its failure headers. */
export function signatureOf(headers: Readonly<Headers>): FailureSignature {
  const get = (key: string) => (Object.prototype.hasOwnProperty.call(headers, key) && typeof headers[key] === 'string' ? headers[key]! : '');
  const errorName = get(HEADER.failureErrorName);
  const message = normalizeMessage(get(HEADER.failureMessage));
  const frame = topFrame(get(HEADER.failureStack));
  const reason = get(HEADER.failureReason) || 'unknown';
  return { id: shortHash(`${reason}\u0000${errorName}\u0000${message}\u0000${frame}`), errorName, message, topFrame: frame, reason };
}

/** A group of error-queue entries that share a signature. */
export interface FailureGroup {
  readonly signature: FailureSignature;
  readonly count: number;
  /** ISO 8601 time of the earliest and latest failure in the group. */
  readonly firstSeen: string;
  readonly lastSeen: string;
  /** Keys of the entries, oldest first. */
  readonly keys: readonly string[];
}

/** Groups entries by signature, largest group first. */
export function groupBySignature(entries: readonly ErrorEntry[]): FailureGroup[] {
  const groups = new Map<string, { signature: FailureSignature; times: string[]; keys: string[] }>();
  for (const entry of entries) {
    const signature = signatureOf(entry.headers);
    let group = groups.get(signature.id);
    if (!group) groups.set(signature.id, (group = { signature, times: [], keys: [] }));
    group.keys.push(entry.key);
    const at = entry.headers[HEADER.failureTime];
    if (typeof at === 'string') group.times.push(at);
  }
  return [...groups.values()]
    .map((g) => {
      const times = [...g.times].sort();
      return { signature: g.signature, count: g.keys.length, firstSeen: times[0] ?? '', lastSeen: times.at(-1) ?? '', keys: g.keys };
    })
    .sort((a, b) => b.count - a.count || a.signature.id.localeCompare(b.signature.id));
}

/** FNV-1a, 32 bits, as 8 hex digits. */
function shortHash(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0).toString(16).padStart(8, '0');
}
