/**
 * Retry and error-queue copies are built to fit the transport's header
 * budget, and an error-queue copy the broker still refuses goes as a
 * minimal copy, so a large failure story never keeps a message from the
 * error queue.
 */
import { describe, expect, it } from 'vitest';
import { constant } from '../../src/backoff/constant.js';
import { HEADER } from '../../src/headers/names.js';
import type { Delivery, Headers, Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { overrideDelivery, wrappingTransport } from '../support/delivery-doubles.js';
import { drain, sendJson, startEndpoint } from '../support/engine-harness.js';

/** Bytes as a transport that percent-encodes every value sends them. */
const encodedBytes = (headers: Readonly<Headers>) => Object.entries(headers).reduce((n, [k, v]) => n + k.length + encodeURIComponent(v).length + 4, 0);
const MAX = 64 * 1024;

/** A memory transport that declares a 64 KiB budget of percent-encoded headers and refuses any settlement over it. */
function budgeted(inner: MemoryTransport, sizes: number[]): Transport {
  const refuse = (headers: Headers) => {
    sizes.push(encodedBytes(headers));
    return encodedBytes(headers) > MAX ? Promise.reject(new Error('header size exceeds maximum allowed of 64k')) : undefined;
  };
  const wrapped = wrappingTransport(inner, (d: Delivery) =>
    overrideDelivery(d, {
      retryLater: (ms, h) => refuse(h) ?? d.retryLater(ms, h),
      deadLetter: (q, h) => refuse(h) ?? d.deadLetter(q, h),
    }),
  );
  return { ...wrapped, limits: { maxHeaderBytes: MAX, headerBytes: encodedBytes } };
}

describe('the header budget', () => {
  it('a 4,096-character CJK failure fits every retry and the error-queue copy, history trimmed before the stack', async () => {
    const sizes: number[] = [];
    const harness = await startEndpoint((clock) => budgeted(new MemoryTransport({ clock }), sizes), {
      recoverability: { immediateRetries: 0, delayedRetries: 3, delayedBackoff: constant(1_000) },
      handler: () => {
        throw new Error('错'.repeat(4096));
      },
    });
    await sendJson(harness.transport, 'orders', 'cjk', {});
    await harness.until(1);
    expect(harness.endpoint.stats).toMatchObject({ deadLettered: 1, settlementFailures: 0 });
    const [copy] = await drain(harness.transport, 'error', harness.clock, 1);
    expect(copy!.headers[HEADER.failureAttempts]).toBe('4');
    expect(copy!.headers[HEADER.failureMessage]).toBe('错'.repeat(4096));
    expect(copy!.headers[HEADER.failureStack]!.length).toBeGreaterThan(0);
    expect(sizes.every((n) => n <= MAX)).toBe(true);
    await harness.close();
  });

  it('an error-queue copy the broker still refuses goes as a minimal copy', async () => {
    const harness = await startEndpoint(
      (clock) =>
        wrappingTransport(new MemoryTransport({ clock }), (d) =>
          overrideDelivery(d, {
            deadLetter: (q, h) => (HEADER.failureStack in h ? Promise.reject(new Error('refused')) : d.deadLetter(q, h)),
          }),
        ),
      {
        recoverability: { immediateRetries: 0, delayedRetries: 0 },
        handler: () => {
          throw new Error('x'.repeat(2_000));
        },
      },
    );
    await sendJson(harness.transport, 'orders', 'refused', {}, { traceparent: 'tp' });
    await harness.until(1);
    const [copy] = await drain(harness.transport, 'error', harness.clock, 1);
    expect(copy!.headers[HEADER.failureStack]).toBeUndefined();
    expect(copy!.headers[HEADER.history]).toBeUndefined();
    expect(copy!.headers).toMatchObject({ [HEADER.failureReason]: 'retries-exhausted', [HEADER.failureAttempts]: '1', traceparent: 'tp' });
    expect(copy!.headers[HEADER.failureMessage]!.length).toBeLessThanOrEqual(500);
    await harness.close();
  });
});
