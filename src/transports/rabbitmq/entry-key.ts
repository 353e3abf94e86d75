/**
 * Keys of error-queue entries on RabbitMQ. A queue gives its messages no
 * identity an operator could name, so the transport writes one: every copy
 * `deadLetter` publishes carries a fresh UUID in `redeliver-entry-id`, and
 * that is the entry's key. A message that reached the error queue some other
 * way (a broker dead-letter exchange, a shovel, another library) has no such
 * header and gets a key derived from what it carries: its message id and a
 * hash of its message id, headers and body, `<message id>#<16 hex>`.
 *
 * Keys are typed into shells (`redeliver errors show <url> <key>`), so both
 * kinds start with a letter, a digit or `_` (never `-`, which reads as an
 * option, nor `#`, which starts a comment) and use no character a shell
 * treats specially.
 */
import { randomUUID } from 'node:crypto';
import type { Message } from 'amqplib';
import { HEADER } from '../../headers/names.js';
import { derivedEntryKey, ENTRY_ID } from '../../operations/entry-key.js';
import type { Headers } from '../../transport/types.js';
import { decodeHeaders, deriveMessageId, headerValueToString } from './wire-headers.js';

export { derivedEntryKey };

/**
 * The headers of an error-queue copy: `headers` with a new entry id first
 * (so the header bounds of a copy can never drop it), replacing any entry id
 * an earlier copy left.
 */
export function withEntryId(headers: Readonly<Headers>): Headers {
  const out: Headers = { [HEADER.entryId]: randomUUID() };
  for (const key of Object.keys(headers)) if (key !== HEADER.entryId) out[key] = headers[key]!;
  return out;
}

/** The entry id a received message carries, when it is present and well formed. */
export function entryIdOf(rawHeaders: unknown): string | undefined {
  if (typeof rawHeaders !== 'object' || rawHeaders === null || !Object.hasOwn(rawHeaders, HEADER.entryId)) return undefined;
  const value = headerValueToString((rawHeaders as Record<string, unknown>)[HEADER.entryId]);
  return value !== undefined && ENTRY_ID.test(value) ? value : undefined;
}

/** A message's id as a delivery of it would have it: its `messageId`, or one derived from body and headers. */
export function messageIdOf(message: Message, headers: Readonly<Headers>): string {
  const id: unknown = message.properties.messageId;
  return typeof id === 'string' && id.length > 0 ? id : deriveMessageId(message.content, headers);
}

/** The key of a message in an error queue: its entry id, or the derived key. */
export function entryKeyOf(message: Message): string {
  const id = entryIdOf(message.properties.headers);
  if (id !== undefined) return id;
  const { headers } = decodeHeaders(message.properties.headers);
  return derivedEntryKey(messageIdOf(message, headers), headers, message.content);
}

/** Whether `message` is the entry with `key`; hashes the message only when it has no entry id and `key` is a derived key. */
export function hasEntryKey(message: Message, key: string): boolean {
  const id = entryIdOf(message.properties.headers);
  if (id !== undefined) return id === key;
  return key.includes('#') && entryKeyOf(message) === key;
}
