/**
 * AMQP headers in and out. Anything may arrive in a header table: numbers,
 * byte arrays, nested tables, nulls, megabyte strings, keys such as
 * `__proto__`. Incoming headers are decoded defensively into a
 * null-prototype `Record<string, string>` with documented bounds; outgoing
 * headers carry only string values, never the broker's own `x-` headers, so
 * a message that cycles through retries keeps a bounded header table.
 */
import { createHash } from 'node:crypto';
import { HEADER_PREFIX } from '../../headers/names.js';
import type { Headers } from '../../transport/types.js';

/**
 * Size bounds applied to headers. Totals count each header as the AMQP table
 * encodes it ({@link headerEntryBytes}). User headers and redeliver's own
 * (`redeliver-*`) have separate budgets, so no amount of user headers can
 * push out the retry state; both together fit amqplib's 64 KiB property
 * table with room for the transport's own headers.
 */
export const HEADER_LIMITS = {
  /** A received or republished header value longer than this (UTF-8 bytes) is truncated to it. `send` rejects it instead. */
  maxValueBytes: 8 * 1024,
  /** User headers (names not starting with `redeliver-`) in all. Past it, received and republished ones are dropped in table order; `send` refuses them. */
  maxUserBytes: 32 * 1024,
  /** redeliver's own headers in all: the retry state and failure facts, with the last error's stack last. Past it they are dropped; `send` refuses them. */
  maxOwnBytes: 28 * 1024,
} as const;

/** The size of one header in an AMQP field table: name length (1), name, type (1), value length (4), value. */
export function headerEntryBytes(key: string, value: string): number {
  return Buffer.byteLength(key) + Buffer.byteLength(value) + 6;
}

/** What is left of each header budget while a table is read or written. */
class HeaderBudget {
  #user = HEADER_LIMITS.maxUserBytes;
  #own = HEADER_LIMITS.maxOwnBytes;

  /** Takes the header's size from its budget; false (taking nothing) when it does not fit. */
  take(key: string, value: string): boolean {
    const size = headerEntryBytes(key, value);
    if (key.startsWith(HEADER_PREFIX)) {
      if (size > this.#own) return false;
      this.#own -= size;
    } else {
      if (size > this.#user) return false;
      this.#user -= size;
    }
    return true;
  }
}

/** Headers the transport writes for itself; removed from what a delivery exposes. */
export const INTERNAL_HEADERS = {
  /** The work queue a delayed copy returns to; the deliver exchange routes on it. */
  destination: 'redeliver-rmq-destination',
  /** Epoch milliseconds before which a delayed copy must not be handed out. */
  dueAt: 'redeliver-rmq-due-at',
  /** The delay requested for the copy, in milliseconds: the most a re-schedule may add. */
  delay: 'redeliver-rmq-delay',
} as const;

const INTERNAL_PREFIX = 'redeliver-rmq-';

/**
 * Headers RabbitMQ adds itself. They are never exposed and never republished:
 * `x-death` grows with every dead-letter hop, and the application must not
 * depend on it.
 */
export const BROKER_HEADERS: ReadonlySet<string> = new Set([
  'x-death',
  'x-first-death-exchange',
  'x-first-death-queue',
  'x-first-death-reason',
  'x-last-death-exchange',
  'x-last-death-queue',
  'x-last-death-reason',
  'x-delivery-count',
  'x-received-from',
  'x-shovelled',
  'x-shovelled-timestamp',
]);

/** Keys dropped everywhere: they would reach an object's prototype machinery. */
const PROTOTYPE_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** The result of decoding a received header table. */
export interface DecodedHeaders {
  /** The application headers: string values only, null prototype. */
  readonly headers: Headers;
  /** The due time of a delayed copy, when present and well formed. */
  readonly dueAt: number | undefined;
  /** The delay requested for a delayed copy, when present and well formed. */
  readonly delayMs: number | undefined;
  /** The broker's delivery counter (quorum queues), when present and well formed. */
  readonly brokerDeliveryCount: number | undefined;
  /** Entries dropped: wrong type, prototype keys, or past the size bound. */
  readonly dropped: number;
  /** Values cut to {@link HEADER_LIMITS.maxValueBytes}. */
  readonly truncated: number;
}

const EMPTY_DECODED: DecodedHeaders = Object.freeze({
  headers: Object.freeze(Object.create(null) as Headers),
  dueAt: undefined,
  delayMs: undefined,
  brokerDeliveryCount: undefined,
  dropped: 0,
  truncated: 0,
});

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The longest prefix of `s` whose UTF-8 encoding fits in `maxBytes`, never splitting a character. */
export function truncateUtf8(s: string, maxBytes: number): string {
  if (s.length * 3 <= maxBytes || Buffer.byteLength(s) <= maxBytes) return s;
  const { read } = utf8.encodeInto(s, new Uint8Array(maxBytes));
  return s.slice(0, read);
}

/**
 * A header value as a string where that is safe: strings as they are,
 * finite numbers, booleans, timestamps and decimals in decimal notation, byte
 * arrays that are valid UTF-8. Anything else (null, arrays, tables, binary
 * data) has no safe string form: undefined.
 */
export function headerValueToString(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return value;
    case 'number':
      return Number.isFinite(value) ? String(value) : undefined;
    case 'bigint':
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return undefined;
      if (value instanceof Uint8Array) {
        try {
          return strictUtf8.decode(value);
        } catch {
          return undefined;
        }
      }
      if (Array.isArray(value)) return undefined;
      // amqplib's typed values: {'!': 'timestamp', value: n} and {'!': 'decimal', value: {places, digits}}.
      if (Object.hasOwn(value, '!') && Object.hasOwn(value, 'value')) {
        const tagged = value as { '!': unknown; value: unknown };
        if (tagged['!'] === 'timestamp' && typeof tagged.value === 'number' && Number.isFinite(tagged.value)) return String(tagged.value);
        if (tagged['!'] === 'decimal' && typeof tagged.value === 'object' && tagged.value !== null) {
          const { places, digits } = tagged.value as { places?: unknown; digits?: unknown };
          if (typeof places === 'number' && typeof digits === 'number') return String(digits / 10 ** places);
        }
      }
      return undefined;
    }
    default:
      return undefined;
  }
}

function parseNonNegativeInteger(value: unknown): number | undefined {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,16}$/.test(value) ? Number(value) : NaN;
  return Number.isSafeInteger(n) && n >= 0 ? n : undefined;
}

/**
 * Decodes a received header table. Never throws: whatever `raw` is, the
 * result is a null-prototype record of string values within
 * {@link HEADER_LIMITS}. Only own keys are read, so a table whose
 * `__proto__` entry replaced its prototype contributes nothing through it.
 */
export function decodeHeaders(raw: unknown): DecodedHeaders {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw) || raw instanceof Uint8Array) return EMPTY_DECODED;
  const headers = Object.create(null) as Headers;
  let dueAt: number | undefined;
  let delayMs: number | undefined;
  let brokerDeliveryCount: number | undefined;
  let dropped = 0;
  let truncated = 0;
  const budget = new HeaderBudget();
  const table = raw as Record<string, unknown>;
  for (const key of Object.keys(table)) {
    const value = table[key];
    if (PROTOTYPE_KEYS.has(key)) {
      dropped++;
      continue;
    }
    if (key.startsWith(INTERNAL_PREFIX)) {
      if (key === INTERNAL_HEADERS.dueAt) dueAt = parseNonNegativeInteger(value);
      else if (key === INTERNAL_HEADERS.delay) delayMs = parseNonNegativeInteger(value);
      continue;
    }
    if (key.startsWith('x-') && BROKER_HEADERS.has(key)) {
      if (key === 'x-delivery-count') brokerDeliveryCount = parseNonNegativeInteger(value);
      continue;
    }
    let text = headerValueToString(value);
    if (text === undefined) {
      dropped++;
      continue;
    }
    const cut = truncateUtf8(text, HEADER_LIMITS.maxValueBytes);
    if (cut !== text) {
      truncated++;
      text = cut;
    }
    if (!budget.take(key, text)) {
      dropped++;
      continue;
    }
    headers[key] = text;
  }
  return { headers, dueAt, delayMs, brokerDeliveryCount, dropped, truncated };
}

/** What happens to a header that breaks a bound on the way out. */
export type OutgoingMode =
  /** `send`: the caller chose these headers; reject with a TypeError or RangeError. */
  | 'strict'
  /** Retry and error-queue copies: they must always go out; convert, truncate and drop instead. */
  | 'lenient';

/** The result of preparing headers for publishing. */
export interface EncodedHeaders {
  /** A table amqplib can encode: string values only. */
  readonly table: Record<string, string>;
  /** Entries dropped (lenient mode). */
  readonly dropped: number;
  /** Values truncated (lenient mode). */
  readonly truncated: number;
}

/**
 * Prepares application headers for publishing. Broker headers, transport
 * headers and prototype keys are always left out; values must be strings
 * (strict) or are converted where safe (lenient).
 */
export function encodeHeaders(headers: Readonly<Headers>, mode: OutgoingMode): EncodedHeaders {
  const table = Object.create(null) as Record<string, string>;
  let dropped = 0;
  let truncated = 0;
  const budget = new HeaderBudget();
  if (typeof headers !== 'object' || headers === null) {
    if (mode === 'strict') throw new TypeError('rabbitmq: headers must be an object of string values');
    return { table, dropped, truncated };
  }
  for (const key of Object.keys(headers)) {
    if (isNeverSent(key)) {
      dropped++;
      continue;
    }
    const value: unknown = (headers as Record<string, unknown>)[key];
    if (Buffer.byteLength(key) > 255) {
      if (mode === 'strict') throw new RangeError(`rabbitmq: header name longer than 255 bytes: ${JSON.stringify(key.slice(0, 40))}...`);
      dropped++;
      continue;
    }
    let text = mode === 'strict' ? (typeof value === 'string' ? value : undefined) : headerValueToString(value);
    if (text === undefined) {
      if (mode === 'strict') throw new TypeError(`rabbitmq: header ${JSON.stringify(key)} must be a string, got ${typeof value}`);
      dropped++;
      continue;
    }
    const cut = truncateUtf8(text, HEADER_LIMITS.maxValueBytes);
    if (cut !== text) {
      if (mode === 'strict') {
        throw new RangeError(`rabbitmq: header ${JSON.stringify(key)} is longer than ${HEADER_LIMITS.maxValueBytes} bytes of UTF-8`);
      }
      truncated++;
      text = cut;
    }
    if (!budget.take(key, text)) {
      if (mode === 'strict') throw overBudget(headers);
      dropped++;
      continue;
    }
    table[key] = text;
  }
  return { table, dropped, truncated };
}

/** Broker headers, transport headers and prototype keys: never published from the caller's headers. */
function isNeverSent(key: string): boolean {
  return PROTOTYPE_KEYS.has(key) || key.startsWith(INTERNAL_PREFIX) || BROKER_HEADERS.has(key);
}

/** The RangeError of a send whose headers a consumer would cut, with both totals. */
function overBudget(headers: Readonly<Headers>): RangeError {
  let user = 0;
  let own = 0;
  for (const key of Object.keys(headers)) {
    const value = headers[key];
    if (typeof value !== 'string' || isNeverSent(key)) continue;
    if (key.startsWith(HEADER_PREFIX)) own += headerEntryBytes(key, value);
    else user += headerEntryBytes(key, value);
  }
  const which =
    user > HEADER_LIMITS.maxUserBytes
      ? `user headers take ${user} bytes, over the ${HEADER_LIMITS.maxUserBytes} a consumer reads`
      : `redeliver headers take ${own} bytes, over the ${HEADER_LIMITS.maxOwnBytes} a consumer reads`;
  return new RangeError(`rabbitmq: ${which} (each header counts its name and value in UTF-8 bytes plus 6); nothing was published`);
}

/**
 * A stable id for a message published without one: a hash of the body and
 * the decoded headers, so every redelivery of the same message gets the same
 * id. Two messages with identical body and headers share it.
 */
export function deriveMessageId(body: Uint8Array, headers: Readonly<Headers>): string {
  const hash = createHash('sha256');
  hash.update(body);
  for (const key of Object.keys(headers).sort()) {
    hash.update('\0');
    hash.update(key);
    hash.update('\0');
    hash.update(headers[key]!);
  }
  return `sha256-${hash.digest('hex').slice(0, 32)}`;
}

/**
 * The size of a received header table as the broker encoded it, in bytes
 * (a close estimate: AMQP field-table encoding of each key and value).
 */
export function headerTableBytes(raw: unknown): number {
  if (typeof raw !== 'object' || raw === null) return 0;
  let size = 4;
  for (const key of Object.keys(raw)) size += 1 + Buffer.byteLength(key) + fieldValueBytes((raw as Record<string, unknown>)[key]);
  return size;
}

function fieldValueBytes(value: unknown): number {
  switch (typeof value) {
    case 'string':
      return 5 + Buffer.byteLength(value);
    case 'number':
      return 9;
    case 'boolean':
      return 2;
    case 'object': {
      if (value === null) return 1;
      if (value instanceof Uint8Array) return 5 + value.length;
      if (Array.isArray(value)) return 5 + value.reduce((n: number, v) => n + fieldValueBytes(v), 0);
      if (Object.hasOwn(value, '!')) return 9;
      return 1 + headerTableBytes(value);
    }
    default:
      return 1;
  }
}
