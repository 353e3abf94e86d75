/**
 * What the server says about a delivery in its reply subject:
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<streamSeq>.<consumerSeq>.<timestampNs>.<pending>`,
 * or, on servers that add a domain and an account, the same after two more
 * tokens (and sometimes a random one at the end).
 */

/** A delivery's place and count, from its reply subject. */
export interface AckInfo {
  readonly stream: string;
  readonly consumer: string;
  /** How many times the server delivered this message, counting this time. */
  readonly delivered: number;
  readonly streamSeq: number;
  /** When the stream stored the message, in ms since the epoch, by the server's clock. */
  readonly storedAtMs: number;
}

/** Parses a JetStream reply subject; undefined when it is not one. */
export function parseAckSubject(reply: string | undefined): AckInfo | undefined {
  if (reply === undefined || !reply.startsWith('$JS.ACK.')) return undefined;
  const tokens = reply.split('.');
  let at: number;
  if (tokens.length === 9) at = 2;
  else if (tokens.length >= 11) at = 4;
  else return undefined;
  const delivered = Number(tokens[at + 2]);
  const streamSeq = Number(tokens[at + 3]);
  const timestampNs = tokens[at + 5]!;
  if (!Number.isSafeInteger(delivered) || !Number.isSafeInteger(streamSeq) || !/^\d+$/.test(timestampNs)) return undefined;
  // Whole milliseconds of a nanosecond count: its digits less the last six (exact: 13 digits reach the year 2286).
  const storedAtMs = timestampNs.length > 6 ? Number(timestampNs.slice(0, -6)) : 0;
  return { stream: tokens[at]!, consumer: tokens[at + 1]!, delivered, streamSeq, storedAtMs };
}
