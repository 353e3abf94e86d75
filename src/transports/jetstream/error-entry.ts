/**
 * Error-queue entries as an operator sees them. An entry is one message of
 * the error queue's stream, and its key is the message's stream sequence
 * (`17`). A message redeliver did not write (a `nats pub` by hand) is shown
 * with the headers it carries and an id of its own: its `Nats-Msg-Id`, else
 * `<stream>:<sequence>`.
 */
import type { StoredMsg } from '@nats-io/jetstream';
import type { ErrorEntry } from '../../transport/error-queue.js';
import { decodeNatsHeaders } from './codec.js';

/** The stream sequence a key names, or undefined when `key` is not a whole number from 1 up: the only keys an entry can have. */
export function sequenceOfKey(key: string): number | undefined {
  if (!/^[1-9]\d{0,15}$/.test(key)) return undefined;
  const seq = Number(key);
  return Number.isSafeInteger(seq) ? seq : undefined;
}

/** The entry `message` of `errorQueue`, whose stream is `stream`. */
export function errorEntryOf(errorQueue: string, stream: string, message: StoredMsg): ErrorEntry {
  const decoded = decodeNatsHeaders(message.header);
  return {
    key: String(message.seq),
    messageId: decoded.id ?? decoded.natsMsgId ?? `${stream}:${message.seq}`,
    errorQueue,
    body: message.data,
    headers: decoded.headers,
  };
}
