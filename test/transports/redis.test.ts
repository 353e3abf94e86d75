/**
 * What the Redis transport does beyond the conformance suite, on the real
 * server: leases taken over and extended, a deleted stream, entries not
 * written by redeliver, a bounded queue, cut connections, wake-ups for
 * retries scheduled by another process, and the server settings check.
 * Every test works under a key prefix of its own and closes only its own
 * connections.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isDeliveryGone } from '../../src/transport/delivery-gone.js';
import type { Delivery } from '../../src/transport/types.js';
import { QueueFullError, RedisTransport, serverWarnings, type RedisTransportOptions } from '../../src/transports/redis/index.js';
import { REDIS_URL, redisSkipReason } from '../support/brokers.js';
import { recordingLogger } from '../support/recording-logger.js';

const skip = await redisSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  while (!predicate()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(5);
  }
}

describe.skipIf(Boolean(skip))('the Redis transport', () => {
  const prefix = `rt-${randomUUID().slice(0, 8)}`;
  const cleanups: (() => Promise<unknown>)[] = [];
  const admin = new Redis(REDIS_URL);
  afterAll(() => admin.disconnect());
  const open = (options: RedisTransportOptions = {}) => {
    const t = new RedisTransport({ url: REDIS_URL, keyPrefix: prefix, connectionName: `${prefix}-conn`, checkServer: false, ...options });
    cleanups.push(() => t.close());
    return t;
  };
  const collect = () => {
    const got: { delivery: Delivery; at: number }[] = [];
    return { got, listener: (delivery: Delivery) => got.push({ delivery, at: Date.now() }) };
  };

  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    const keys = await admin.keys(`{${prefix}}:*`);
    if (keys.length > 0) await admin.del(...keys);
  });

  it('a delivery whose lease ran out goes to another consumer with a higher count, and the first holder can no longer settle it', async () => {
    const a = open({ consumerName: 'a' });
    const b = open({ consumerName: 'b', pollIntervalMs: 100 });
    await a.send('lease', { id: 'm', body: text('x'), headers: {} });
    const first = collect();
    await a.consume('lease', first.listener, { prefetch: 1, leaseMs: 300 });
    await waitFor(() => first.got.length === 1, 5_000, 'the first delivery');
    const second = collect();
    await b.consume('lease', second.listener, { prefetch: 1, leaseMs: 300 });
    await waitFor(() => second.got.length === 1, 5_000, 'the takeover');
    expect(second.got[0]!.at - first.got[0]!.at).toBeGreaterThanOrEqual(290);
    expect(second.got[0]!.delivery.deliveryCount).toBe(2);
    const late = await first.got[0]!.delivery.ack().then(() => undefined, (e: unknown) => e);
    expect(isDeliveryGone(late)).toBe(true);
    await second.got[0]!.delivery.ack();
    expect(await admin.xlen(`{${prefix}}:q:lease`)).toBe(0);
  });

  it('extendLease keeps a delivery from other consumers past its lease, and fails once it was taken over', async () => {
    const a = open({ consumerName: 'a' });
    const b = open({ consumerName: 'b', pollIntervalMs: 50 });
    await a.send('extend', { id: 'm', body: text('x'), headers: {} });
    const first = collect();
    await a.consume('extend', first.listener, { prefetch: 1, leaseMs: 300 });
    await waitFor(() => first.got.length === 1, 5_000, 'the first delivery');
    const held = first.got[0]!.delivery;
    await held.extendLease!(1_000);
    const second = collect();
    await b.consume('extend', second.listener, { prefetch: 1, leaseMs: 300 });
    await sleep(700);
    expect(second.got).toHaveLength(0);
    await waitFor(() => second.got.length === 1, 5_000, 'the takeover after the extension');
    const refused = await held.extendLease!(1_000).then(() => undefined, (e: unknown) => e);
    expect(isDeliveryGone(refused)).toBe(true);
    await second.got[0]!.delivery.ack();
  });

  it('extendLease never shortens a lease, within leaseMs or past it', async () => {
    const a = open({ consumerName: 'a' });
    const b = open({ consumerName: 'b', pollIntervalMs: 50 });
    for (const id of ['within', 'past']) await a.send('shorten', { id, body: text('x'), headers: {} });
    const first = collect();
    const holder = await a.consume('shorten', first.listener, { prefetch: 2, leaseMs: 1_000 });
    await waitFor(() => first.got.length === 2, 5_000, 'both deliveries');
    const [within, past] = first.got.map((g) => g.delivery) as [Delivery, Delivery];
    await within.extendLease!(10);
    await past.extendLease!(3_000);
    await past.extendLease!(10);
    // Only `b` takes over what runs out; `a` keeps its deliveries, which it can still settle.
    await holder.close();
    const second = collect();
    await b.consume('shorten', second.listener, { prefetch: 2, leaseMs: 1_000 });
    await sleep(700);
    expect(second.got.map((g) => g.delivery.id)).toEqual([]);
    await waitFor(() => second.got.length === 1, 5_000, 'the takeover of the one whose lease ran out');
    expect(second.got[0]!.delivery.id).toBe('within');
    await second.got[0]!.delivery.ack();
    await sleep(1_000);
    expect(second.got).toHaveLength(1);
    await past.ack();
  });

  it('keeps consuming when its stream is deleted and created again', async () => {
    const t = open();
    const got = collect();
    await t.consume('deleted', got.listener, { prefetch: 5 });
    await t.send('deleted', { id: 'before', body: text('1'), headers: {} });
    await waitFor(() => got.got.length === 1, 5_000, 'the first message');
    await got.got[0]!.delivery.ack();
    await admin.del(`{${prefix}}:q:deleted`);
    await t.send('deleted', { id: 'after', body: text('2'), headers: {} });
    await waitFor(() => got.got.length === 2, 10_000, 'the message sent after the deletion');
    expect(got.got[1]!.delivery.id).toBe('after');
    await got.got[1]!.delivery.ack();
  });

  it('delivers an entry not written by redeliver with its stream id and no headers, and logs why', async () => {
    const logger = recordingLogger();
    const t = open({ logger });
    const entryId = await admin.xadd(`{${prefix}}:q:foreign`, '*', 'h', 'not json', 'b', 'payload');
    const got = collect();
    await t.consume('foreign', got.listener, { prefetch: 1 });
    await waitFor(() => got.got.length === 1, 5_000, 'the foreign entry');
    const d = got.got[0]!.delivery;
    expect(d.id).toBe(entryId);
    expect(d.headers).toEqual({});
    expect(Buffer.from(d.body).toString()).toBe('payload');
    expect(logger.lines.some((l) => l.level === 'warn' && /no message id/.test(l.message))).toBe(true);
    await d.deadLetter('foreign.error', {});
    expect(await admin.xlen(`{${prefix}}:q:foreign.error`)).toBe(1);
  });

  it('refuses a send to a queue at its maxLength with a throttling error, and writes nothing', async () => {
    const t = open({ maxLength: 3 });
    for (let i = 0; i < 3; i++) await t.send('bounded', { id: `m${i}`, body: text('x'), headers: {} });
    const refused = await t.send('bounded', { id: 'm3', body: text('x'), headers: {} }).then(() => undefined, (e: unknown) => e);
    expect(refused).toBeInstanceOf(QueueFullError);
    expect(t.classifySendError(refused)).toBe('throttled');
    expect(await admin.xlen(`{${prefix}}:q:bounded`)).toBe(3);
  });

  it('classifies server errors: OOM throttles, READONLY and LOADING are transient, WRONGTYPE is fatal', async () => {
    const t = open();
    expect(t.classifySendError(new Error("OOM command not allowed when used memory > 'maxmemory'."))).toBe('throttled');
    expect(t.classifySendError(new Error("READONLY You can't write against a read only replica."))).toBe('transient');
    expect(t.classifySendError(new Error('LOADING Redis is loading the dataset in memory'))).toBe('transient');
    expect(t.classifySendError(new Error('Connection is closed.'))).toBe('transient');
    await admin.set(`{${prefix}}:q:wrongtype`, 'a string');
    const wrong = await t.send('wrongtype', { id: 'm', body: text('x'), headers: {} }).then(() => undefined, (e: unknown) => e);
    expect(t.classifySendError(wrong)).toBe('fatal');
    expect(() => t.classifySendError(new TypeError('bad'))).not.toThrow();
  });

  it('loses nothing when its connections are cut while messages are handled and retries wait', async () => {
    const t = open({ pollIntervalMs: 100 });
    const total = 200;
    for (let i = 0; i < total; i++) await t.send('cut', { id: `m${i}`, body: text(String(i)), headers: {} });
    const delivered = new Set<string>();
    // A settlement whose reply the cut lost is sent again on reconnection and finds itself done: none is reported gone.
    const settled = new Set<string>();
    const gone: string[] = [];
    await t.consume(
      'cut',
      (d) => {
        delivered.add(d.id);
        const n = Number(d.id.slice(1));
        // Every fifth message waits out a short delayed retry first.
        const retry = n % 5 === 0 && d.headers['again'] === undefined;
        const settle = retry ? d.retryLater(150, { again: '1' }) : d.ack();
        settle.then(
          () => !retry && settled.add(d.id),
          (error: unknown) => isDeliveryGone(error) && gone.push(d.id),
        );
      },
      { prefetch: 10, leaseMs: 1_000 },
    );
    await waitFor(() => settled.size >= 50, 10_000, '50 handled');
    const killed = await killOwnConnections(admin, `${prefix}-conn`);
    expect(killed).toBeGreaterThanOrEqual(2);
    await waitFor(() => settled.size === total, 30_000, `all ${total} settled after the cut (have ${settled.size})`);
    // And the server agrees: nothing waits, nothing is held.
    const stream = `{${prefix}}:q:cut`;
    const empty = async () => (await admin.xlen(stream)) === 0 && (await admin.zcard(`{${prefix}}:d:cut`)) === 0;
    const started = Date.now();
    while (!(await empty())) {
      if (Date.now() - started > 10_000) throw new Error('the stream or the delayed set still holds messages');
      await sleep(20);
    }
    expect(delivered.size).toBe(total);
    expect(gone).toEqual([]);
  });

  it('wakes up for a retry another process scheduled sooner than it knew, within its poll interval', async () => {
    const consumer = open({ pollIntervalMs: 200 });
    const scheduler = open();
    const got = collect();
    await consumer.consume('cross', got.listener, { prefetch: 1 });
    await scheduler.send('far', { id: 'far', body: text('f'), headers: {} });
    await scheduler.send('cross', { id: 'm', body: text('x'), headers: {} });
    await waitFor(() => got.got.length === 1, 5_000, 'the first delivery');
    await got.got[0]!.delivery.retryLater(60_000, {}).catch(() => undefined);
    // Another process schedules a short retry on the same queue directly in the delayed set.
    const otherGot = collect();
    const sub = await scheduler.consume('far', otherGot.listener, { prefetch: 1 });
    await waitFor(() => otherGot.got.length === 1, 5_000, 'the other queue');
    await sub.close();
    await admin.zadd(`{${prefix}}:d:cross`, Date.now() + 100, 'x1');
    await admin.hset(`{${prefix}}:dm:cross`, 'x1:i', 'short', 'x1:h', '{}', 'x1:b', 's');
    const scheduled = Date.now();
    await waitFor(() => got.got.length === 2, 5_000, 'the short retry');
    expect(got.got[1]!.delivery.id).toBe('short');
    expect(got.got[1]!.at - scheduled).toBeGreaterThanOrEqual(95);
    expect(got.got[1]!.at - scheduled).toBeLessThan(100 + 200 + 150);
    await got.got[1]!.delivery.ack();
  });

  it('says what the server settings can lose', () => {
    expect(serverWarnings({ appendonly: 'no', appendfsync: 'everysec', save: '', maxmemoryPolicy: 'noeviction' })[0]).toMatch(/keeps nothing on disk/);
    expect(serverWarnings({ appendonly: 'yes', appendfsync: 'always', save: '', maxmemoryPolicy: 'allkeys-lru' })[0]).toMatch(/evicts keys/);
    expect(serverWarnings({ appendonly: 'yes', appendfsync: 'everysec', save: '', maxmemoryPolicy: 'noeviction' })).toEqual([]);
  });

  it('warns at start when the server keeps nothing on disk', async () => {
    const logger = recordingLogger();
    const t = open({ logger, checkServer: true });
    const settings = await t.serverSettings();
    const persists = settings?.appendonly === 'yes';
    expect(logger.lines.some((l) => l.level === 'warn' && /keeps nothing on disk|only RDB/.test(l.message))).toBe(!persists);
  });
});

/** Kills the connections named `name`, and only those; resolves how many. */
async function killOwnConnections(admin: Redis, name: string): Promise<number> {
  const list = (await admin.client('LIST')) as string;
  const ids = list
    .split('\n')
    .filter((line) => line.includes(` name=${name} `))
    .map((line) => /id=(\d+)/.exec(line)![1]!);
  for (const id of ids) await admin.client('KILL', 'ID', id);
  return ids.length;
}
