/**
 * Messages as redeliver writes them to JetStream: the body as is, the
 * message id in header `redeliver-message-id`, and every header of the
 * message as a NATS header. NATS header values are one line of text, so a
 * value that is not plain printable ASCII (a stack trace, UTF-8) is
 * percent-encoded and its name listed in `redeliver-escaped`.
 */
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import type { Headers } from '../../transport/types.js';

/** The header carrying the message id. */
export const ID_HEADER = 'redeliver-message-id';
/** The header listing the names of percent-encoded header values, comma-separated. */
export const ESCAPED_HEADER = 'redeliver-escaped';
/** The header of a delayed retry telling how long it waits, in ms, from when the delay stream stored it. */
export const DELAY_HEADER = 'redeliver-delay-ms';

/** Headers of the NATS protocol and the server's, which a message's own headers never carry over. */
const SERVER_HEADER = /^nats-/i;
const PLAIN = /^[\x20-\x7e]*$/;
/** A header name NATS carries: printable ASCII without spaces or colons. */
const NAME = /^[\x21-\x39\x3b-\x7e]+$/;

/**
 * NATS headers for `headers` plus the message id (and `extra`, written as
 * is). Throws a TypeError for a header whose name NATS cannot carry or whose
 * value is not a string.
 */
export function encodeNatsHeaders(id: string, headers: Readonly<Headers>, extra?: Readonly<Record<string, string>>): MsgHdrs {
  const out = natsHeaders();
  const escaped: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value !== 'string') throw new TypeError(`header ${name} must be a string, got ${typeof value}`);
    if (!NAME.test(name)) throw new TypeError(`header name ${JSON.stringify(name)} cannot be carried by NATS (printable ASCII without spaces or colons)`);
    if (name === ID_HEADER || name === ESCAPED_HEADER || name === DELAY_HEADER || SERVER_HEADER.test(name)) continue;
    if (PLAIN.test(value) && value.trim() === value) out.set(name, value);
    else {
      out.set(name, encodeURIComponent(value));
      escaped.push(name);
    }
  }
  out.set(ID_HEADER, PLAIN.test(id) && id.trim() === id ? id : encodeURIComponent(id));
  if (!(PLAIN.test(id) && id.trim() === id)) escaped.push(ID_HEADER);
  if (escaped.length > 0) out.set(ESCAPED_HEADER, escaped.join(','));
  if (extra) for (const [name, value] of Object.entries(extra)) out.set(name, value);
  return out;
}

/**
 * The header bytes a retry or error-queue copy's own headers may take: the
 * server refuses a message whose headers pass 64 KiB, and 2 KiB stay free
 * for what a settlement adds (the message id twice, as
 * `redeliver-message-id` and within `Nats-Msg-Id`, and the delay).
 */
export const MAX_COPY_HEADER_BYTES = 62 * 1024;

/** The bytes `headers` take on the wire once encoded (values percent-encoded where needed), the message id aside. */
export function encodedHeaderBytes(headers: Readonly<Headers>): number {
  return headerBytes(encodeNatsHeaders('', headers));
}

/** The bytes the headers take on the wire, about: `name: value\r\n` each, plus the status line. */
export function headerBytes(hdrs: MsgHdrs): number {
  let bytes = 12;
  for (const name of hdrs.keys()) for (const value of hdrs.values(name)) bytes += name.length + Buffer.byteLength(value) + 4;
  return bytes;
}

/** What a stored message says about itself. */
export interface DecodedMessage {
  /** The message id, or undefined when the message has none of redeliver's (not written by redeliver). */
  readonly id: string | undefined;
  readonly headers: Headers;
  /** `Nats-Msg-Id`, the server's deduplication id, when the message has one. */
  readonly natsMsgId: string | undefined;
  /** The delay of a delayed retry, from {@link DELAY_HEADER}. */
  readonly delayMs: number | undefined;
}

/**
 * Reads a stored message's headers. A header redeliver escaped is decoded; a
 * value that does not decode is kept as written. The NATS protocol's own
 * headers are left out.
 */
export function decodeNatsHeaders(hdrs: MsgHdrs | undefined): DecodedMessage {
  const headers: Headers = {};
  if (hdrs === undefined) return { id: undefined, headers, natsMsgId: undefined, delayMs: undefined };
  const escapedList = hdrs.get(ESCAPED_HEADER);
  const escaped = escapedList === '' ? NONE_ESCAPED : new Set(escapedList.split(',').filter((name) => name.length > 0));
  let id: string | undefined;
  let natsMsgId: string | undefined;
  let delayMs: number | undefined;
  for (const name of hdrs.keys()) {
    const raw = hdrs.get(name);
    const value = escaped.has(name) ? unescape(raw) : raw;
    if (name === ID_HEADER) id = value;
    else if (name === DELAY_HEADER) delayMs = Number.isFinite(Number(raw)) && raw !== '' ? Number(raw) : undefined;
    else if (name.toLowerCase() === 'nats-msg-id') natsMsgId = raw;
    else if (name !== ESCAPED_HEADER && !SERVER_HEADER.test(name)) headers[name] = value;
  }
  return { id, headers, natsMsgId, delayMs };
}

const NONE_ESCAPED: ReadonlySet<string> = new Set();

function unescape(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
