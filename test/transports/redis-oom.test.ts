/**
 * The Redis transport on a server over `maxmemory` (a `redis-server` of the
 * test's own: the shared one is never reconfigured): acks still go through,
 * a retry or dead-letter copy is refused whole and the message stays held,
 * sends are throttled, and once memory frees the consumer reads again
 * within a second or two, however many settlements failed meanwhile.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/transport/types.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { RedisNode, redisNodeSkipReason } from '../support/redis-node.js';

const skip = redisNodeSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  while (!(await predicate())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

describe.skipIf(Boolean(skip))('the Redis transport over maxmemory', () => {
  let node: RedisNode;
  let admin: Redis;

  beforeAll(async () => {
    node = await RedisNode.start();
    admin = new Redis(node.url);
  }, 60_000);

  afterAll(async () => {
    admin?.disconnect();
    await node?.stop();
  }, 60_000);

  it('acks, refuses copies whole, throttles sends, and reads again soon after memory frees', async () => {
    const t = new RedisTransport({ url: node.url, keyPrefix: 'oom', checkServer: false, pollIntervalMs: 100 });
    try {
      for (let i = 0; i < 20; i++) await t.send('q', { id: `m${i}`, body: text(String(i)), headers: {} });
      const got: Delivery[] = [];
      await t.consume('q', (d) => got.push(d), { prefetch: 20, leaseMs: 60_000 });
      await waitFor(() => got.length === 20, 5_000, '20 deliveries');
      await node.setMaxmemory(1);
      try {
        // Acks free memory: they go through.
        for (const d of got.slice(0, 4)) await d.ack();
        // A retry copy would need memory: refused whole, the message stays held and can be settled again.
        const refused = await got[4]!.retryLater(100, { again: '1' }).then(() => undefined, (e: unknown) => e);
        expect(String(refused)).toMatch(/OOM/);
        expect(await admin.zcard('{oom}:d:q')).toBe(0);
        expect(await admin.xlen('{oom}:q:q')).toBe(16);
        const sendRefused = await t.send('q', { id: 'late', body: text('x'), headers: {} }).then(() => undefined, (e: unknown) => e);
        expect(t.classifySendError(sendRefused)).toBe('throttled');
        // Failing settlements one after another while the server refuses writes: each keeps its slot, the entry still held.
        for (const d of got.slice(5, 20)) {
          await d.deadLetter('q.error', {}).catch(() => undefined);
          await sleep(30);
        }
        await sleep(500);
      } finally {
        await node.setMaxmemory(0);
      }
      await got[4]!.retryLater(100, { again: '1' });
      for (const d of got.slice(5, 20)) await d.ack();
      await t.send('q', { id: 'after', body: text('x'), headers: {} });
      const cleared = Date.now();
      await waitFor(() => got.some((d) => d.id === 'after') && got.some((d) => d.id === 'm4' && d.headers['again'] === '1'), 10_000, 'the consumer to read again');
      expect(Date.now() - cleared).toBeLessThan(4_000);
    } finally {
      await t.close();
    }
  }, 60_000);
});
