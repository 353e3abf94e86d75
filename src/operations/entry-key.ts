/**
 * Entry keys that do not depend on a broker: the `redeliver-entry-id` a
 * transport wrote on an error-queue copy, or a key derived from what the
 * copy carries. The error store keys its entries this way, so an entry
 * ingested twice (a crash between the store's commit and the broker's ack)
 * is stored once.
 */
import { createHash } from 'node:crypto';
import { HEADER } from '../headers/names.js';
import type { Headers } from '../transport/types.js';

/**
 * What an entry id read from the wire must look like to be used as a key:
 * 1 to 128 letters, digits and `.`, `_`, `:`, `-`, starting with a letter or
 * digit. A UUID matches; a derived key never does (it contains `#`), so the
 * two kinds cannot collide.
 */
export const ENTRY_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** A message id short and plain enough to appear in a derived key as it is: up to 200 shell-safe characters, starting with a letter or digit. */
const PLAIN_ID = /^[A-Za-z0-9][A-Za-z0-9._:@+=,/-]{0,199}$/;

/**
 * The key of an entry without an entry id: `<message id>#<16 hex>`, the hex
 * a SHA-256 of the message id, the headers (sorted by name) and the body; or
 * `_#<16 hex>` when the message id is not plain enough to show in a key
 * (spaces, quotes, control characters, over 200 characters). Two entries
 * with the same id, headers and body share the key; they are
 * indistinguishable, and an operation on the key acts on the oldest.
 */
export function derivedEntryKey(messageId: string, headers: Readonly<Headers>, body: Uint8Array): string {
  // One update for the text: hashing costs a call per update, and an entry carries a few dozen headers.
  let text = messageId;
  for (const key of Object.keys(headers).sort()) text += `\0${key}\0${headers[key]!}`;
  const hash = createHash('sha256');
  hash.update(`${text}\0\0`);
  hash.update(body);
  const digest = hash.digest('hex').slice(0, 16);
  return PLAIN_ID.test(messageId) ? `${messageId}#${digest}` : `_#${digest}`;
}

/** The key of an error-queue copy: its well-formed `redeliver-entry-id`, else the derived key. */
export function entryKeyFromHeaders(messageId: string, headers: Readonly<Headers>, body: Uint8Array): string {
  const id = Object.hasOwn(headers, HEADER.entryId) ? headers[HEADER.entryId] : undefined;
  return typeof id === 'string' && ENTRY_ID.test(id) ? id : derivedEntryKey(messageId, headers, body);
}
