import { describe, expect, it } from 'vitest';
import { fitHeaders, minimalDeadLetterHeaders } from '../../src/headers/fit.js';
import { HEADER } from '../../src/headers/names.js';
import type { Headers } from '../../src/transport/types.js';

/** Bytes as a transport that percent-encodes every value would send them. */
const encodedBytes = (headers: Readonly<Headers>) => Object.entries(headers).reduce((n, [k, v]) => n + k.length + encodeURIComponent(v).length + 4, 0);
const limits = (maxHeaderBytes: number) => ({ maxHeaderBytes, headerBytes: encodedBytes });

function copy(): Headers {
  const history = Array.from({ length: 10 }, (_, i) => ({ at: '2026-01-01T00:00:00.000Z', errorName: 'Error', message: `失败 ${i} ${'错'.repeat(400)}`, immediateAttempt: 1, delayedAttempt: i }));
  return {
    [HEADER.attempts]: '10',
    [HEADER.history]: JSON.stringify(history),
    [HEADER.failureReason]: 'retries-exhausted',
    [HEADER.failureMessage]: '错'.repeat(4096),
    [HEADER.failureStack]: `Error: ${'错'.repeat(4096)}\n${'    at f (file.js:1:1)\n'.repeat(500)}`,
    traceparent: '00-abc-def-01',
  };
}

describe('fitHeaders', () => {
  it('leaves headers that fit, and any headers when the transport declares no budget, as they are', () => {
    const headers = copy();
    expect(fitHeaders(headers, {})).toBe(headers);
    expect(fitHeaders(headers, limits(1_000_000))).toBe(headers);
  });

  it('drops the oldest history entries first, measured after encoding', () => {
    const headers = copy();
    const max = encodedBytes(headers) - 3_000;
    const fitted = fitHeaders(headers, limits(max));
    expect(encodedBytes(fitted)).toBeLessThanOrEqual(max);
    const kept = JSON.parse(fitted[HEADER.history]!) as { delayedAttempt: number }[];
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.length).toBeLessThan(10);
    expect(kept.at(-1)!.delayedAttempt).toBe(9);
    expect(fitted[HEADER.failureStack]).toBe(headers[HEADER.failureStack]);
  });

  it('then cuts the stack, keeping its start, and keeps everything else', () => {
    const headers = copy();
    const withoutHistory = { ...headers };
    delete withoutHistory[HEADER.history];
    const max = encodedBytes(withoutHistory) - 20_000;
    const fitted = fitHeaders(headers, limits(max));
    expect(encodedBytes(fitted)).toBeLessThanOrEqual(max);
    expect(fitted[HEADER.history]).toBeUndefined();
    expect(headers[HEADER.failureStack]!.startsWith(fitted[HEADER.failureStack]!.slice(0, -1))).toBe(true);
    expect(fitted[HEADER.failureStack]!.endsWith('…')).toBe(true);
    for (const name of [HEADER.attempts, HEADER.failureReason, HEADER.failureMessage, 'traceparent']) expect(fitted[name]).toBe(headers[name]);
  });
});

describe('minimalDeadLetterHeaders', () => {
  it('keeps the failure facts and the user headers, without history, stack, or a long message', () => {
    const minimal = minimalDeadLetterHeaders(copy());
    expect(minimal[HEADER.history]).toBeUndefined();
    expect(minimal[HEADER.failureStack]).toBeUndefined();
    expect(minimal[HEADER.failureMessage]!.length).toBeLessThanOrEqual(500);
    expect(minimal).toMatchObject({ [HEADER.attempts]: '10', [HEADER.failureReason]: 'retries-exhausted', traceparent: '00-abc-def-01' });
  });
});
