/**
 * NSQ messages have no headers: redeliver's message id, retry state and
 * failure story travel at the front of the body, in a small versioned
 * envelope. Layout (integers big-endian, strings UTF-8):
 *
 * ```
 * magic     4 bytes   00 C0 52 44   (0xC0 never occurs in UTF-8: no text body starts so)
 * version   1 byte    01
 * length    u32       bytes of the header block that follows
 * headers   length    count u32, then per header: name length u32, name, value length u32, value
 * crc       u32       CRC-32 (IEEE) of the header block
 * body      the rest  the user's body, byte for byte
 * ```
 *
 * A body that does not start with the magic is a plain NSQ message. One
 * that starts with it but does not read as a whole envelope (an unknown
 * version, lengths past the end, invalid UTF-8, a repeated name, a CRC
 * that does not match) is malformed: {@link readEnvelope} says what is
 * wrong, and a consumer delivers it as a plain message, body untouched.
 * Nothing here throws on any input.
 */
import type { Headers } from '../../transport/types.js';

/** The first four bytes of every envelope. */
export const ENVELOPE_MAGIC = Uint8Array.of(0x00, 0xc0, 0x52, 0x44);
/** The envelope version this code writes and reads. */
export const ENVELOPE_VERSION = 1;
/** Bytes an envelope adds around its header block: magic, version, length and CRC. */
export const ENVELOPE_OVERHEAD = ENVELOPE_MAGIC.length + 1 + 4 + 4;

/** What a body read as an envelope turned out to be. */
export type EnvelopeReading =
  | { readonly kind: 'envelope'; readonly headers: Headers; readonly body: Uint8Array }
  | { readonly kind: 'plain' }
  | { readonly kind: 'malformed'; readonly problem: string };

const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The bytes the header block of `headers` takes (without the envelope's fixed overhead). */
export function headerBlockBytes(headers: Readonly<Headers>): number {
  let bytes = 4;
  for (const [name, value] of Object.entries(headers)) bytes += 8 + Buffer.byteLength(name) + Buffer.byteLength(value);
  return bytes;
}

/** `body` behind an envelope carrying `headers`. Throws a TypeError for a header value that is not a string. */
export function encodeEnvelope(headers: Readonly<Headers>, body: Uint8Array): Uint8Array {
  const entries = Object.entries(headers);
  const encoded: Uint8Array[] = [];
  for (const [name, value] of entries) {
    if (typeof value !== 'string') throw new TypeError(`header ${name} must be a string, got ${typeof value}`);
    encoded.push(utf8.encode(name), utf8.encode(value));
  }
  const blockLength = 4 + encoded.reduce((n, part) => n + 4 + part.byteLength, 0);
  const out = new Uint8Array(ENVELOPE_OVERHEAD + blockLength + body.byteLength);
  const view = new DataView(out.buffer);
  out.set(ENVELOPE_MAGIC, 0);
  out[4] = ENVELOPE_VERSION;
  view.setUint32(5, blockLength);
  const blockStart = 9;
  let at = blockStart;
  view.setUint32(at, entries.length);
  at += 4;
  for (const part of encoded) {
    view.setUint32(at, part.byteLength);
    out.set(part, at + 4);
    at += 4 + part.byteLength;
  }
  view.setUint32(at, crc32(out.subarray(blockStart, at)));
  out.set(body, at + 4);
  return out;
}

/** The headers and body of an envelope, or undefined when `bytes` is not a whole envelope (a plain or malformed message). */
export function decodeEnvelope(bytes: Uint8Array): { headers: Headers; body: Uint8Array } | undefined {
  const reading = readEnvelope(bytes);
  return reading.kind === 'envelope' ? { headers: reading.headers, body: reading.body } : undefined;
}

/** Reads `bytes` as an envelope, saying whether it is one, a plain message, or a malformed envelope and why. Never throws. */
export function readEnvelope(bytes: Uint8Array): EnvelopeReading {
  const reading = readEnvelopeRaw(bytes);
  return reading.kind === 'envelope' ? { kind: 'envelope', headers: { ...reading.headers }, body: reading.body } : reading;
}

/**
 * {@link readEnvelope}, with the headers in an object without a prototype
 * (a header named `__proto__` is a header like any other): for a reader
 * that copies them on.
 */
export function readEnvelopeRaw(bytes: Uint8Array): EnvelopeReading {
  if (!startsWithMagic(bytes)) return { kind: 'plain' };
  if (bytes.byteLength < ENVELOPE_OVERHEAD + 4) return { kind: 'malformed', problem: `envelope shorter (${bytes.byteLength} bytes) than its fixed part` };
  if (bytes[4] !== ENVELOPE_VERSION) return { kind: 'malformed', problem: `envelope version ${bytes[4]} is not supported (this reader knows ${ENVELOPE_VERSION})` };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const blockLength = view.getUint32(5);
  const blockStart = 9;
  const blockEnd = blockStart + blockLength;
  if (blockLength < 4 || blockEnd + 4 > bytes.byteLength) return { kind: 'malformed', problem: `header block of ${blockLength} bytes runs past the end of a ${bytes.byteLength}-byte message` };
  const block = bytes.subarray(blockStart, blockEnd);
  if (view.getUint32(blockEnd) !== crc32(block)) return { kind: 'malformed', problem: 'header block CRC does not match' };
  const headers: Headers = Object.create(null) as Headers;
  const count = view.getUint32(blockStart);
  let at = blockStart + 4;
  for (let i = 0; i < count; i++) {
    const name = readString(bytes, view, at, blockEnd);
    if (typeof name === 'string') return { kind: 'malformed', problem: `header ${i}: name ${name}` };
    const value = readString(bytes, view, name.end, blockEnd);
    if (typeof value === 'string') return { kind: 'malformed', problem: `header ${i}: value ${value}` };
    if (Object.prototype.hasOwnProperty.call(headers, name.text)) return { kind: 'malformed', problem: `header ${JSON.stringify(name.text)} appears twice` };
    headers[name.text] = value.text;
    at = value.end;
  }
  if (at !== blockEnd) return { kind: 'malformed', problem: `${blockEnd - at} bytes left over after ${count} headers` };
  return { kind: 'envelope', headers, body: bytes.subarray(blockEnd + 4) };
}

/** Whether `bytes` starts with {@link ENVELOPE_MAGIC}. */
export function startsWithMagic(bytes: Uint8Array): boolean {
  return bytes.byteLength >= 4 && bytes[0] === ENVELOPE_MAGIC[0] && bytes[1] === ENVELOPE_MAGIC[1] && bytes[2] === ENVELOPE_MAGIC[2] && bytes[3] === ENVELOPE_MAGIC[3];
}

/** A length-prefixed UTF-8 string at `at`, or what is wrong with it. */
function readString(bytes: Uint8Array, view: DataView, at: number, end: number): { text: string; end: number } | string {
  if (at + 4 > end) return 'length runs past the header block';
  const length = view.getUint32(at);
  if (at + 4 + length > end) return `of ${length} bytes runs past the header block`;
  const start = at + 4;
  const stop = start + length;
  // Short ASCII, the usual case, reads as is; anything else is checked as strict UTF-8.
  let ascii = length <= 256;
  for (let i = start; ascii && i < stop; i++) {
    if (bytes[i]! > 0x7f) {
      ascii = false;
      break;
    }
  }
  if (ascii) return { text: length === 0 ? '' : String.fromCharCode.apply(null, bytes.subarray(start, stop) as unknown as number[]), end: stop };
  try {
    return { text: strictUtf8.decode(bytes.subarray(start, stop)), end: stop };
  } catch {
    return 'is not valid UTF-8';
  }
}

let table: Uint32Array | undefined;

/** CRC-32 (IEEE 802.3, as zip and PNG use) of `bytes`. */
export function crc32(bytes: Uint8Array): number {
  table ??= Uint32Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.byteLength; i++) crc = table[(crc ^ bytes[i]!) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
