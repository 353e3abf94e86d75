/**
 * Stream entries as redeliver writes them: field `i` the message id, `h`
 * the headers as a JSON object of strings, `b` the body, and `c` (absent
 * means 0) the deliveries this copy inherits, so a message given back keeps
 * counting up.
 */
import type { Headers } from '../../transport/types.js';

/** An entry read from a stream. */
export interface StreamEntry {
  /** The entry's stream id, `<ms>-<seq>`. */
  readonly entryId: string;
  readonly id: string;
  readonly body: Uint8Array;
  readonly headers: Headers;
  /** Deliveries inherited from an earlier copy. */
  readonly inherited: number;
}

/** What a stream read returns for one entry: its id and a flat field/value list. */
export type RawEntry = [entryId: Buffer | string, fields: (Buffer | string)[]];

/** A stream entry that redeliver cannot read: not written by it, or damaged. */
export class MalformedEntryError extends Error {
  override readonly name = 'MalformedEntryError';
}

/** The headers as stored in field `h`. */
export function encodeHeaders(headers: Readonly<Headers>): string {
  return JSON.stringify(headers);
}

/**
 * Reads one entry. An entry without an id, with an empty id, or with
 * headers that are not a JSON object of strings throws a
 * {@link MalformedEntryError}; a missing body reads as empty.
 */
export function decodeEntry(raw: RawEntry): StreamEntry {
  const entryId = raw[0].toString();
  const fields = raw[1];
  let id: string | undefined;
  let headers: string | undefined;
  let body: Uint8Array = new Uint8Array(0);
  let inherited = 0;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!.toString();
    const value = fields[i + 1]!;
    if (name === 'i') id = value.toString();
    else if (name === 'h') headers = value.toString();
    else if (name === 'b') body = typeof value === 'string' ? Buffer.from(value) : value;
    else if (name === 'c') inherited = Number(value.toString()) || 0;
  }
  if (id === undefined) throw new MalformedEntryError(`stream entry ${entryId} has no message id (field i): not written by redeliver`);
  if (id === '') throw new MalformedEntryError(`stream entry ${entryId} has an empty message id (field i): not written by redeliver`);
  return { entryId, id, body, headers: decodeHeaders(headers, entryId), inherited };
}

function decodeHeaders(text: string | undefined, entryId: string): Headers {
  if (text === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new MalformedEntryError(`stream entry ${entryId} has headers that are not JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new MalformedEntryError(`stream entry ${entryId} has headers that are not a JSON object`);
  }
  const headers: Headers = {};
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (typeof value !== 'string') throw new MalformedEntryError(`stream entry ${entryId} has header ${name} that is not a string`);
    headers[name] = value;
  }
  return headers;
}

/**
 * Reads an entry a consumer was handed, without throwing: an entry not
 * written by redeliver (no id or an empty one, headers that are not a JSON
 * object of strings) is delivered with its stream id as its id, whatever
 * its field `i` holds, and no headers, so the endpoint settles it like any
 * other message (usually to its error queue) instead of the consumer
 * stalling on it. `problem` says what was wrong.
 */
export function decodeDelivered(raw: RawEntry): { entry: StreamEntry; problem?: string } {
  try {
    return { entry: decodeEntry(raw) };
  } catch (error) {
    const entryId = raw[0].toString();
    const fields = raw[1] ?? [];
    let body: Uint8Array = new Uint8Array(0);
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (fields[i]!.toString() === 'b') body = Buffer.from(fields[i + 1]!);
    }
    return { entry: { entryId, id: entryId, body, headers: {}, inherited: 0 }, problem: (error as Error).message };
  }
}
