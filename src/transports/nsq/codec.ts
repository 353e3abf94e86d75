/**
 * Messages as redeliver writes them to NSQ: the body behind an envelope
 * (./envelope.ts) carrying the message's headers, its id as
 * `redeliver-message-id`, and, on a delay carried in hops, when it is due.
 */
import type { Headers } from '../../transport/types.js';
import { encodeEnvelope, readEnvelopeRaw } from './envelope.js';

/** The envelope header carrying the message id. */
export const ID_HEADER = 'redeliver-message-id';
/**
 * The envelope header of a message whose delay is longer than nsqd holds
 * one for (`--max-req-timeout`): when it is due, in ms since the epoch by
 * the sender's clock. A consumer that receives it early publishes it again
 * with the rest of the delay, without handing it out.
 */
export const DUE_HEADER = 'redeliver-nsq-due-at';

/** The body of a message with id `id`, `headers` and `body`, due at `dueAt` when given. */
export function wrap(id: string, headers: Readonly<Headers>, body: Uint8Array, dueAt?: number): Buffer {
  const all: Headers = {};
  for (const [name, value] of Object.entries(headers)) if (name !== ID_HEADER && name !== DUE_HEADER) all[name] = value;
  all[ID_HEADER] = id;
  if (dueAt !== undefined) all[DUE_HEADER] = String(dueAt);
  const bytes = encodeEnvelope(all, body);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** What a received body says about itself. */
export type Unwrapped =
  | { readonly kind: 'envelope'; readonly id: string | undefined; readonly headers: Headers; readonly body: Uint8Array; readonly dueAt: number | undefined }
  | { readonly kind: 'plain'; readonly body: Uint8Array; readonly problem: string | undefined };

/** Reads a received body; a plain or malformed one is returned as is (with what was wrong). Never throws. */
export function unwrap(bytes: Uint8Array): Unwrapped {
  const reading = readEnvelopeRaw(bytes);
  if (reading.kind === 'plain') return { kind: 'plain', body: bytes, problem: undefined };
  if (reading.kind === 'malformed') return { kind: 'plain', body: bytes, problem: reading.problem };
  const headers: Headers = {};
  let id: string | undefined;
  let dueAt: number | undefined;
  const read = reading.headers;
  for (const name in read) {
    const value = read[name]!;
    if (name === ID_HEADER) id = value === '' ? undefined : value;
    else if (name === DUE_HEADER) dueAt = /^\d{1,16}$/.test(value) ? Number(value) : undefined;
    else headers[name] = value;
  }
  return { kind: 'envelope', id, headers, body: reading.body, dueAt };
}
