/**
 * A message whose copies cannot fit, on every transport whose broker limits
 * a message's body and headers together: a body that fits its broker with
 * the headers it was sent with leaves no room for the retry state and the
 * failure story a copy carries. Its first failure must end in the error
 * queue after one run, with its body intact and a logged reason, not in a
 * loop of failed settlements, and the worker goes on with other messages.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { bytesCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { isMessageTooLarge } from '../../src/transport/errors.js';
import type { Delivery, Subscription, Transport } from '../../src/transport/types.js';
import { recordingLogger } from '../support/recording-logger.js';
import type { ConformanceTarget } from './suite.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The largest body probed for: above any broker's default limit the suite runs on. */
const PROBE_CEILING_BYTES = 64 * 1024 * 1024;

/** Reads `count` messages off `queue` and acks them; resolves their ids. */
async function drain(transport: Transport, queue: string, count: number, timeoutMs = 20_000): Promise<Delivery[]> {
  const got: Delivery[] = [];
  const sub = await transport.consume(queue, (d) => {
    got.push(d);
    void d.ack();
  }, { prefetch: 4, leaseMs: 30_000 });
  try {
    const until = Date.now() + timeoutMs;
    while (got.length < count && Date.now() < until) await sleep(20);
  } finally {
    await sub.close();
  }
  return got;
}

/**
 * The largest body (bytes of 0xd0, a non-ASCII lead byte) `send` takes with
 * no headers, found by bisection on a queue of its own, whose messages are
 * then read off and acked.
 */
async function largestBody(transport: Transport, queue: string): Promise<number> {
  let fits = 1;
  let tooLarge = PROBE_CEILING_BYTES;
  let stored = 0;
  while (tooLarge - fits > 1) {
    const size = Math.floor((fits + tooLarge) / 2);
    try {
      await transport.send(queue, { id: `probe-${size}`, body: new Uint8Array(size).fill(0xd0), headers: {} });
      fits = size;
      stored++;
    } catch (error) {
      if (!isMessageTooLarge(error)) throw error;
      tooLarge = size;
    }
  }
  expect(tooLarge).toBeLessThan(PROBE_CEILING_BYTES);
  expect(await drain(transport, queue, stored)).toHaveLength(stored);
  return fits;
}

export function describeCopySizeConformance(target: ConformanceTarget): void {
  const skip = target.skip ?? (target.limitsWholeMessage === true ? undefined : (target.limitsWholeMessage ?? 'its broker limits the body alone, so a copy is never larger than its original'));
  describe.skipIf(Boolean(skip))(`copies that cannot fit: ${target.name}`, () => {
    let transport: Transport | undefined;
    let endpoint: Endpoint<Uint8Array> | undefined;
    let sub: Subscription | undefined;

    afterEach(async () => {
      await endpoint?.stop({ timeoutMs: 2_000 });
      await sub?.close().catch(() => undefined);
      await transport?.close();
      endpoint = undefined;
      sub = undefined;
      transport = undefined;
    });

    it('a body as large as the broker takes: one run, then the error queue with its body intact and a logged reason; the next message is handled', async () => {
      transport = await target.create();
      const token = randomUUID().slice(0, 8);
      const queue = `conf-size-${token}`;
      const errorQueue = `${queue}-error`;
      const size = await largestBody(transport, `conf-size-probe-${token}`);
      const logger = recordingLogger();
      const runs = new Map<string, number>();
      endpoint = new Endpoint<Uint8Array>({
        name: queue,
        transport,
        concurrency: 1,
        logger,
        codec: bytesCodec,
        recoverability: { errorQueue, immediateRetries: 0, delayedRetries: 3, delayedBackoff: () => 200 },
        handler: (body, ctx) => {
          runs.set(ctx.messageId, (runs.get(ctx.messageId) ?? 0) + 1);
          if (body.byteLength > 1) throw new Error('too large to handle');
        },
      });
      await endpoint.start();
      const body = new Uint8Array(size).map((_, i) => (i % 2 === 0 ? 0xd0 : 0xb6));
      await transport.send(queue, { id: 'edge', body, headers: {} });
      await transport.send(queue, { id: 'next', body: new Uint8Array([1]), headers: {} });
      const until = Date.now() + 20_000;
      while ((endpoint.stats.deadLettered < 1 || endpoint.stats.handled < 1) && Date.now() < until) await sleep(20);
      expect(endpoint.stats).toMatchObject({ handled: 1, deadLettered: 1 });
      expect(runs.get('edge')).toBe(1);
      expect(runs.get('next')).toBe(1);
      expect(logger.lines.some((l) => l.level === 'error' && /copy of message 'edge'/.test(l.message))).toBe(true);

      const [entry] = await drain(transport, errorQueue, 1);
      expect(entry?.id).toBe('edge');
      expect(entry!.body.byteLength).toBe(size);
      expect(Buffer.from(entry!.body).equals(Buffer.from(body))).toBe(true);
      // Nothing comes back to the handler afterwards (retries were 200 ms apart): no copy was left behind.
      await sleep(2_000);
      expect(runs.get('edge')).toBe(1);
    }, 60_000);
  });
}
