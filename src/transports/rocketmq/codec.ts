/**
 * How a redeliver message rides in a RocketMQ message: the body as it is,
 * the message id in the message keys and in the `redeliver-id` property,
 * and the headers as one JSON object in the `redeliver-headers` property.
 * One property for every header keeps names the broker reserves or refuses
 * (and the separators of its property encoding, which JSON escapes) out of
 * the way. A message another client sent has neither property: it is read
 * with its RocketMQ message id and its user properties as headers.
 */
import type { Headers } from '../../transport/types.js';

/** The property holding the message id. */
export const ID_PROPERTY = 'redeliver-id';
/** The property holding the headers, a JSON object of strings. */
export const HEADERS_PROPERTY = 'redeliver-headers';
/**
 * The property of a copy held past the proxy's longest delivery time, or
 * of a FIFO message's delayed copy: the time (ms since the epoch) it is due.
 * A consumer that receives it sooner sends it on, as a hop that counts no
 * delivery.
 */
export const DUE_PROPERTY = 'redeliver-due';
/** The property of a FIFO message's delayed copy: the message group it goes back to once due. */
export const GROUP_PROPERTY = 'redeliver-message-group';

/** The user properties of a message with `id` and `headers`, and `extra` ones of the transport. */
export function encodeProperties(id: string, headers: Readonly<Headers>, extra?: Readonly<Record<string, string>>): Map<string, string> {
  const properties = new Map<string, string>([
    [ID_PROPERTY, id],
    [HEADERS_PROPERTY, JSON.stringify(headers)],
  ]);
  for (const [k, v] of Object.entries(extra ?? {})) properties.set(k, v);
  return properties;
}

/** What a received message carries for redeliver. */
export interface DecodedMessage {
  readonly id: string;
  readonly headers: Headers;
  /** Set when the message was not written by redeliver, or its headers are damaged: what is wrong. */
  readonly problem?: string;
}

/** Reads the id and headers of a message from its properties; never throws. */
export function decodeProperties(messageId: string, properties: ReadonlyMap<string, string>): DecodedMessage {
  const id = properties.get(ID_PROPERTY);
  const text = properties.get(HEADERS_PROPERTY);
  if (id === undefined || id === '' || text === undefined) {
    const headers: Headers = {};
    for (const [k, v] of properties) headers[k] = v;
    return { id: id || messageId, headers, problem: 'not written by redeliver (no redeliver-id or redeliver-headers property)' };
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not a JSON object');
    const headers: Headers = {};
    for (const [k, v] of Object.entries(parsed as Record<string, unknown>)) {
      if (typeof v !== 'string') throw new Error(`header ${k} is not a string`);
      headers[k] = v;
    }
    return { id, headers };
  } catch (error) {
    return { id, headers: {}, problem: `headers unreadable: ${(error as Error).message}` };
  }
}

/** The bytes the headers take once encoded, with the id property and room for the transport's own. */
export function headerBytes(headers: Readonly<Headers>): number {
  return Buffer.byteLength(JSON.stringify(headers)) + 256;
}
