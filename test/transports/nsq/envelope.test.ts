import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { crc32, decodeEnvelope, encodeEnvelope, ENVELOPE_MAGIC, headerBlockBytes, ENVELOPE_OVERHEAD, readEnvelope } from '../../../src/transports/nsq/envelope.js';

const text = (s: string) => new TextEncoder().encode(s);

describe('nsq envelope', () => {
  it('round-trips any headers and body', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' })), fc.uint8Array({ maxLength: 512 }), (headers, body) => {
        const bytes = encodeEnvelope(headers, body);
        expect(bytes.byteLength).toBe(ENVELOPE_OVERHEAD + headerBlockBytes(headers) + body.byteLength);
        const decoded = decodeEnvelope(bytes);
        expect(decoded).toBeDefined();
        expect(decoded!.headers).toEqual({ ...headers });
        expect(Array.from(decoded!.body)).toEqual(Array.from(body));
      }),
      { numRuns: 300 },
    );
  });

  it('keeps a header named __proto__ as a header', () => {
    const decoded = decodeEnvelope(encodeEnvelope(JSON.parse('{"__proto__":"x","a":"b"}') as Record<string, string>, text('')));
    expect(Object.keys(decoded!.headers).sort()).toEqual(['__proto__', 'a']);
    expect(Object.getPrototypeOf(decoded!.headers)).toBe(Object.prototype);
  });

  it('carries 1 MB of non-ASCII headers', () => {
    const value = 'é漢🙂'.repeat(40_000); // 9 bytes each in UTF-8, 360 KB
    const headers = { 'redeliver-failure-stack': value, 'x-ünïcode': value, 'x-三': value };
    const body = text('body');
    const bytes = encodeEnvelope(headers, body);
    expect(bytes.byteLength).toBeGreaterThan(1_000_000);
    const decoded = decodeEnvelope(bytes)!;
    expect(decoded.headers).toEqual(headers);
    expect(new TextDecoder().decode(decoded.body)).toBe('body');
  });

  it('reads a body without the magic as a plain message, whatever it holds', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), (body) => {
        fc.pre(!(body[0] === 0x00 && body[1] === 0xc0));
        expect(readEnvelope(body)).toEqual({ kind: 'plain' });
      }),
    );
    fc.assert(fc.property(fc.string(), (s) => {
      expect(readEnvelope(text(s))).toEqual({ kind: 'plain' });
    }));
    expect(readEnvelope(new Uint8Array(0))).toEqual({ kind: 'plain' });
  });

  it('never throws on a body that starts with the magic, and says what is wrong', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (rest) => {
        const bytes = new Uint8Array([...ENVELOPE_MAGIC, ...rest]);
        const reading = readEnvelope(bytes);
        expect(['envelope', 'malformed']).toContain(reading.kind);
      }),
      { numRuns: 1000 },
    );
  });

  it('finds every single-byte change to the header block or its lengths', () => {
    const bytes = encodeEnvelope({ 'redeliver-attempts': '3', 'x-a': 'b' }, text('payload'));
    const bodyStart = bytes.byteLength - 'payload'.length;
    for (let i = 0; i < bodyStart; i++) {
      const damaged = bytes.slice();
      damaged[i] = damaged[i]! ^ 0x01;
      const reading = readEnvelope(damaged);
      expect(reading.kind, `byte ${i}`).not.toBe('envelope');
    }
  });

  it('names the problem of a malformed envelope', () => {
    const good = encodeEnvelope({ a: 'b' }, text('x'));
    const wrongVersion = good.slice();
    wrongVersion[4] = 9;
    expect(readEnvelope(wrongVersion)).toMatchObject({ kind: 'malformed', problem: expect.stringMatching(/version 9/) });
    expect(readEnvelope(good.subarray(0, 10))).toMatchObject({ kind: 'malformed' });
    const crc = good.slice();
    crc[crc.byteLength - 2] = crc[crc.byteLength - 2]! ^ 0xff; // the CRC's last byte sits right before the 1-byte body
    expect(readEnvelope(crc)).toMatchObject({ kind: 'malformed', problem: expect.stringMatching(/CRC/) });
  });

  it('computes the standard CRC-32', () => {
    expect(crc32(text('123456789'))).toBe(0xcbf43926);
  });
});
