import { MAX_HELD_DELAY_MS, sendDelay } from '../../transport/delay.js';
import type { Headers, OutgoingMessage } from '../../transport/types.js';

/** How headers without entries are stored. */
const EMPTY_HEADERS = '{}';

/**
 * Encodes headers for the `headers` column. Throws a TypeError unless they
 * are an object whose values are strings; an `undefined` value is left out.
 */
export function encodeHeaders(headers: unknown, what: string): string {
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) {
    throw new TypeError(`${what}: headers must be an object of string values`);
  }
  let empty = true;
  for (const key in headers) {
    const value = (headers as Record<string, unknown>)[key];
    if (typeof value !== 'string' && value !== undefined) {
      throw new TypeError(`${what}: header ${JSON.stringify(key)} must be a string, got ${typeof value}`);
    }
    empty = false;
  }
  return empty ? EMPTY_HEADERS : JSON.stringify(headers);
}

/** A private copy of a message body as a Buffer, the type SQLite binds as a BLOB. */
export function copyBody(body: unknown, what: string): Buffer {
  if (!(body instanceof Uint8Array)) throw new TypeError(`${what}: body must be a Uint8Array`);
  return Buffer.from(body);
}

/** Checks a message before it is queued for writing, so one bad message never fails a group commit. */
export function checkMessage(message: OutgoingMessage, what: string): { id: string; body: Buffer; headers: string; delayMs: number } {
  if (typeof message !== 'object' || message === null) throw new TypeError(`${what}: message must be an object`);
  if (typeof message.id !== 'string' || message.id.length === 0) throw new TypeError(`${what}: message id must be a non-empty string`);
  const delayMs = sendDelay(what, message.delayMs, MAX_HELD_DELAY_MS);
  return { id: message.id, body: copyBody(message.body, what), headers: encodeHeaders(message.headers, what), delayMs };
}

/**
 * Headers as stored, back to an object. A row whose headers are not a JSON
 * object of strings (written by hand, or by another tool) yields the string
 * values it has, or no headers at all, rather than failing the consumer: the
 * endpoint decides what a message without its headers means.
 */
export function parseHeaders(json: string): Headers {
  if (json === EMPTY_HEADERS) return {};
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return {};
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  const headers = value as Record<string, unknown>;
  for (const key in headers) {
    if (typeof headers[key] !== 'string') return onlyStrings(headers);
  }
  return headers as Headers;
}

function onlyStrings(value: Record<string, unknown>): Headers {
  const out: Headers = {};
  for (const [key, v] of Object.entries(value)) if (typeof v === 'string') out[key] = v;
  return out;
}
