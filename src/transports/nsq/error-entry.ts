/**
 * What an NSQ error-topic message is, as an operator sees it: the envelope's
 * message id and headers, or a plain NSQ message as it is.
 *
 * An entry's key is the key every transport and the error store use
 * (`entryKeyFromHeaders`): the `redeliver-entry-id` the copy carries, else a
 * key derived from the message id, the headers and the body. A plain
 * message (no envelope) has NSQ's message id as its message id, no headers,
 * and a key `<nsq id>#<hash>`; NSQ keeps a message's id when it is given
 * back, so the key stays the same while the entry stays.
 */
import { entryKeyFromHeaders } from '../../operations/entry-key.js';
import type { ErrorEntry } from '../../transport/error-queue.js';
import type { Headers } from '../../transport/types.js';
import { encodeEnvelope, readEnvelope } from './envelope.js';
import type { HeldMessage } from './operations-pass.js';

/** The envelope header that carries redeliver's message id. */
export const MESSAGE_ID_HEADER = 'redeliver-message-id';

/** An entry, and whether it came without an envelope. */
export interface NsqErrorEntry extends ErrorEntry {
  /** A plain NSQ message (no envelope, or one that does not read whole): shown and deletable; a send-back needs a destination named. */
  readonly plain: boolean;
}

/** The entry of a message read from `errorQueue`. */
export function errorEntryOf(errorQueue: string, message: HeldMessage): NsqErrorEntry {
  const reading = readEnvelope(message.body);
  if (reading.kind !== 'envelope') {
    const headers: Headers = {};
    return { key: entryKeyFromHeaders(message.nsqId, headers, message.body), messageId: message.nsqId, errorQueue, body: message.body, headers, plain: true };
  }
  const headers: Headers = { ...reading.headers };
  const id = headers[MESSAGE_ID_HEADER];
  delete headers[MESSAGE_ID_HEADER];
  const messageId = typeof id === 'string' && id !== '' ? id : message.nsqId;
  return { key: entryKeyFromHeaders(messageId, headers, reading.body), messageId, errorQueue, body: reading.body, headers, plain: false };
}

/** The bytes of a message with `messageId`, `headers` and `body`, as the transport sends it. */
export function envelopeOf(messageId: string, headers: Readonly<Headers>, body: Uint8Array): Uint8Array {
  return encodeEnvelope({ ...headers, [MESSAGE_ID_HEADER]: messageId }, body);
}
