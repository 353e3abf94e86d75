/**
 * The endpoint on a real Redis: a message that always fails takes every
 * immediate and delayed retry (held in the server's delayed set) and lands
 * in the error queue with its story; one that fails twice is handled once;
 * concurrency is never exceeded; a malformed body goes to the error queue.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { constant } from '../../src/backoff/constant.js';
import { jsonCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { HEADER } from '../../src/headers/names.js';
import { itRunsTheSharedEngineCases, waitFor } from './broker-cases.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { REDIS_URL, redisSkipReason } from '../support/brokers.js';

const skip = await redisSkipReason();


describe.skipIf(Boolean(skip))('the endpoint on Redis', () => {
  const prefix = `eng-${randomUUID().slice(0, 8)}`;
  const admin = new Redis(REDIS_URL);
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(() => admin.disconnect());
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    const keys = await admin.keys(`{${prefix}}:*`);
    if (keys.length > 0) await admin.del(...keys);
  });
  const transport = () => {
    const t = new RedisTransport({ url: REDIS_URL, keyPrefix: prefix, connectionName: `${prefix}-engine`, checkServer: false, pollIntervalMs: 200 });
    cleanups.push(() => t.close());
    return t;
  };

  it('retries at once, then later from the server, then dead-letters with the whole story', async () => {
    const t = transport();
    const attempts: number[] = [];
    const endpoint = new Endpoint<{ n: number }>({
      name: 'orders',
      transport: t,
      concurrency: 4,
      handler: () => {
        attempts.push(Date.now());
        throw new Error('always fails');
      },
      recoverability: { immediateRetries: 2, delayedRetries: 2, delayedBackoff: constant(300) },
    });
    cleanups.push(() => endpoint.stop());
    await endpoint.start();
    await t.send('orders', { id: 'm-1', body: jsonCodec.encode({ n: 1 }), headers: {} });
    await waitFor(() => endpoint.stats.deadLettered === 1, 15_000, 'the dead-letter');
    expect(attempts).toHaveLength(9);
    // Rounds of three immediate attempts, 300 ms apart, held by the server.
    expect(attempts[3]! - attempts[2]!).toBeGreaterThanOrEqual(290);
    expect(attempts[6]! - attempts[5]!).toBeGreaterThanOrEqual(290);
    const entries = await admin.xrange(`{${prefix}}:q:error`, '-', '+');
    expect(entries).toHaveLength(1);
    const fields = entries[0]![1];
    const headers = JSON.parse(fields[fields.indexOf('h') + 1]!) as Record<string, string>;
    expect(fields[fields.indexOf('i') + 1]).toBe('m-1');
    expect(headers[HEADER.failureAttempts]).toBe('9');
    expect(headers[HEADER.failureReason]).toBe('retries-exhausted');
    expect(headers[HEADER.failureQueue]).toBe('orders');
    expect(await admin.xlen(`{${prefix}}:q:orders`)).toBe(0);
    expect(await admin.zcard(`{${prefix}}:d:orders`)).toBe(0);
  });

  itRunsTheSharedEngineCases(transport, cleanups);
});
