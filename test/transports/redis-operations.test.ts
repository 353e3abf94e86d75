/**
 * The Redis error-queue operations and queue inspection against the real
 * server, on error streams filled directly in the format the transport
 * writes (fields `i`, `h`, `b`), each test under a key prefix of its own.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { SendBackRefusedError } from '../../src/operations/send-back-destination.js';
import type { EntryResult, ErrorEntry } from '../../src/transport/error-queue.js';
import { decodeEntry, encodeHeaders, MalformedEntryError, type StreamEntry } from '../../src/transports/redis/codec.js';
import { GROUP } from '../../src/transports/redis/keys.js';
import { PURGE_CHUNK_SIZE, RedisOperations, SEND_BACK_CHUNK } from '../../src/transports/redis/operations.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { redisSkipReason } from '../support/brokers.js';
import { redisScratch, type RedisScratch } from '../support/redis-scratch.js';

const skip = await redisSkipReason();

const decode = (b: Uint8Array) => new TextDecoder().decode(b);

describe.skipIf(Boolean(skip))('Redis error-queue operations and inspection', () => {
  let scratch: RedisScratch;
  let client: Redis;
  let ops: RedisOperations;
  const clock = new FakeClock(Date.parse('2030-01-02T03:04:05.000Z'));

  const open = (label = 'ops') => {
    scratch = redisScratch(label);
    client = scratch.client();
    ops = new RedisOperations(client, scratch.keys, scratch.scripts(), clock);
  };

  afterEach(async () => {
    const deleted = await scratch.cleanup();
    expect(deleted).toBeGreaterThanOrEqual(0);
  });

  /** Registers `queue` as the transport does on first send or consume. */
  const register = (queue: string, kind: 'work' | 'error') => client.hset(scratch.keys.queues, queue, kind);

  /** Writes `count` dead-letters of `queue` to a fresh error stream, as the transport's dead-letter does. */
  async function fill(count: number, options: { failureQueue?: string; registerWork?: boolean } = {}) {
    const queue = `work-${randomUUID().slice(0, 6)}`;
    const errorQueue = `error-${randomUUID().slice(0, 6)}`;
    if (options.registerWork ?? true) await register(queue, 'work');
    await register(errorQueue, 'error');
    const pipeline = client.pipeline();
    for (let i = 0; i < count; i++) {
      const headers = {
        'x-n': String(i),
        [HEADER.attempts]: '3',
        [HEADER.failureQueue]: options.failureQueue ?? queue,
        [HEADER.failureReason]: 'retries-exhausted',
        [HEADER.failureMessage]: `boom ${i}`,
      };
      pipeline.xadd(scratch.keys.stream(errorQueue), '*', 'i', `m-${i}`, 'h', encodeHeaders(headers), 'b', Buffer.from(`body ${i}`), 'c', '4');
    }
    await pipeline.exec();
    return { queue, errorQueue };
  }

  /** Every entry of `queue`'s stream, decoded. */
  async function streamOf(queue: string): Promise<StreamEntry[]> {
    return (await client.xrangeBuffer(scratch.keys.stream(queue), '-', '+')).map(decodeEntry);
  }

  async function scanAll(errorQueue: string, pageSize?: number): Promise<ErrorEntry[][]> {
    const pages: ErrorEntry[][] = [];
    for await (const page of ops.scan(errorQueue, pageSize === undefined ? {} : { pageSize })) pages.push(page);
    return pages;
  }

  it('counts, pages oldest first from any offset, and gets one entry by its stream id', async () => {
    open();
    const { errorQueue } = await fill(2_500);
    expect(await ops.count(errorQueue)).toBe(2_500);
    expect((await ops.browse(errorQueue, { limit: 2 })).map((e) => e.messageId)).toEqual(['m-0', 'm-1']);
    const deep = await ops.browse(errorQueue, { offset: 2_298, limit: 3 });
    expect(deep.map((e) => e.messageId)).toEqual(['m-2298', 'm-2299', 'm-2300']);
    expect(await ops.browse(errorQueue, { offset: 2_499, limit: 10 })).toHaveLength(1);
    expect(await ops.browse(errorQueue, { offset: 2_500, limit: 10 })).toEqual([]);
    expect(await ops.browse(errorQueue, { offset: 0, limit: 0 })).toEqual([]);
    expect((await ops.browse(errorQueue)).length).toBe(100);

    const one = await ops.get(errorQueue, deep[1]!.key);
    expect(one).toMatchObject({ key: deep[1]!.key, messageId: 'm-2299', errorQueue });
    expect(one!.key).toMatch(/^\d+-\d+$/);
    expect(decode(one!.body)).toBe('body 2299');
    expect(one!.headers[HEADER.failureMessage]).toBe('boom 2299');
    const [ms] = deep[1]!.key.split('-');
    for (const key of ['no-such-key', ms!, `${ms}-`, '0-0', '99999999999999999999-0', '18446744073709551615-18446744073709551615', ' 1-1']) {
      expect(await ops.get(errorQueue, key)).toBeUndefined();
      expect(await ops.delete(errorQueue, key)).toBe(false);
      expect(await ops.sendBack(errorQueue, key)).toBeUndefined();
    }
    expect(await ops.get(`none-${randomUUID().slice(0, 6)}`, deep[1]!.key)).toBeUndefined();
    expect(await ops.count(`none-${randomUUID().slice(0, 6)}`)).toBe(0);
    expect(await ops.count(errorQueue)).toBe(2_500);
  });

  it('sends a message back once: the copy (fresh retry state, no inherited deliveries) goes first, then the entry', async () => {
    open();
    const { queue, errorQueue } = await fill(2);
    const [entry] = await ops.browse(errorQueue, { limit: 1 });
    expect(await ops.sendBack(errorQueue, entry!.key)).toBe(queue);
    expect(await ops.sendBack(errorQueue, entry!.key)).toBeUndefined();
    expect(await ops.count(errorQueue)).toBe(1);
    const copies = await streamOf(queue);
    expect(copies).toHaveLength(1);
    const [copy] = copies;
    expect(copy).toMatchObject({ id: 'm-0', inherited: 0 });
    expect(decode(copy!.body)).toBe('body 0');
    expect(copy!.headers).toEqual({ 'x-n': '0', [HEADER.replayCount]: '1', [HEADER.replayedAt]: '2030-01-02T03:04:05.000Z' });
    const fields = (await client.xrange(scratch.keys.stream(queue), '-', '+'))[0]![1];
    expect(fields.filter((_, i) => i % 2 === 0)).toEqual(['i', 'h', 'b']);
  });

  it('a send-back or delete of an entry an ingester holds acknowledges it and forgets its lease', async () => {
    open();
    const { queue, errorQueue } = await fill(3);
    const stream = scratch.keys.stream(errorQueue);
    await client.xgroup('CREATE', stream, GROUP, '0');
    await client.xreadgroup('GROUP', GROUP, 'ingester', 'COUNT', 3, 'STREAMS', stream, '>');
    const [a, b] = await ops.browse(errorQueue);
    await client.hset(scratch.keys.of(errorQueue).leases, a!.key, '1', b!.key, '1');
    expect((await ops.queueDepths([errorQueue]))[0]).toMatchObject({ ready: 0, inFlight: 3 });
    expect(await ops.sendBack(errorQueue, a!.key)).toBe(queue);
    expect(await ops.delete(errorQueue, b!.key)).toBe(true);
    const pending = (await client.xpending(stream, GROUP)) as [number, ...unknown[]];
    expect(pending[0]).toBe(1);
    expect(await client.hlen(scratch.keys.of(errorQueue).leases)).toBe(0);
    expect((await ops.queueDepths([errorQueue]))[0]).toMatchObject({ ready: 0, inFlight: 1 });
    expect(await ops.purge(errorQueue)).toBe(1);
    expect(((await client.xpending(stream, GROUP)) as [number])[0]).toBe(0);
  });

  it('sends back to another registered work queue when asked', async () => {
    open();
    const { errorQueue } = await fill(1);
    const other = `other-${randomUUID().slice(0, 6)}`;
    await register(other, 'work');
    const [entry] = await ops.browse(errorQueue);
    expect(await ops.sendBack(errorQueue, entry!.key, { queue: other })).toBe(other);
    expect((await streamOf(other)).map((e) => e.id)).toEqual(['m-0']);
  });

  it('refuses a missing destination (named by the entry or the operator), an error queue, and one off the list; creates nothing', async () => {
    open();
    const forged = `forged-${randomUUID().slice(0, 6)}`;
    const { errorQueue } = await fill(1, { failureQueue: forged });
    const [entry] = await ops.browse(errorQueue);
    const refusal = await ops.sendBack(errorQueue, entry!.key).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(SendBackRefusedError);
    expect(refusal).toMatchObject({ queue: forged, reason: 'missing' });
    const named = `missing-${randomUUID().slice(0, 6)}`;
    await expect(ops.sendBack(errorQueue, entry!.key, { queue: named })).rejects.toMatchObject({ queue: named, reason: 'missing' });
    await expect(ops.sendBack(errorQueue, entry!.key, { queue: errorQueue })).rejects.toMatchObject({ reason: 'error-queue' });
    const otherErrors = `error-other-${randomUUID().slice(0, 6)}`;
    await register(otherErrors, 'error');
    await expect(ops.sendBack(errorQueue, entry!.key, { queue: otherErrors })).rejects.toMatchObject({ queue: otherErrors, reason: 'error-queue' });
    const work = `work-${randomUUID().slice(0, 6)}`;
    await register(work, 'work');
    await expect(ops.sendBack(errorQueue, entry!.key, { queue: work, allowedQueues: ['elsewhere'] })).rejects.toMatchObject({ reason: 'not-allowed' });
    expect(await client.exists(scratch.keys.stream(forged), scratch.keys.stream(named), scratch.keys.stream(otherErrors), scratch.keys.stream(work))).toBe(0);
    expect(await client.hexists(scratch.keys.queues, forged)).toBe(0);
    expect((await ops.queueDepths()).map((d) => d.queue)).not.toContain(named);
    expect(await ops.count(errorQueue)).toBe(1);
    expect(await ops.sendBack(errorQueue, entry!.key, { queue: work, allowedQueues: [work] })).toBe(work);
  });

  it('an entry that names no queue is sent back only to a queue the operator names', async () => {
    open();
    const errorQueue = `error-${randomUUID().slice(0, 6)}`;
    await client.xadd(scratch.keys.stream(errorQueue), '*', 'i', 'lost', 'h', '{}', 'b', 'x');
    const [entry] = await ops.browse(errorQueue);
    await expect(ops.sendBack(errorQueue, entry!.key)).rejects.toThrow('refused to send message lost back: it does not say which queue it failed on');
    await register('dest', 'work');
    expect(await ops.sendBack(errorQueue, entry!.key, { queue: 'dest' })).toBe('dest');
  });

  it('two send-backs racing for each entry send exactly one copy of it', async () => {
    open();
    const { queue, errorQueue } = await fill(200);
    const other = new RedisOperations(scratch.client(), scratch.keys, scratch.scripts(), clock);
    const keys = (await scanAll(errorQueue)).flat().map((e) => e.key);
    const results = await Promise.all(keys.map((key) => Promise.all([ops.sendBack(errorQueue, key), other.sendBack(errorQueue, key)])));
    for (const pair of results) expect(pair.filter((r) => r === queue)).toHaveLength(1);
    for (const pair of results) expect(pair.filter((r) => r === undefined)).toHaveLength(1);
    const copies = await streamOf(queue);
    expect(copies).toHaveLength(200);
    expect(new Set(copies.map((c) => c.id)).size).toBe(200);
    expect(await ops.count(errorQueue)).toBe(0);
    // And a send-back racing a delete: the message ends in exactly one place.
    const again = await fill(100);
    const raced = (await scanAll(again.errorQueue)).flat();
    const outcome = await Promise.all(raced.map((e) => Promise.all([ops.sendBack(again.errorQueue, e.key), other.delete(again.errorQueue, e.key)])));
    const sent = outcome.filter(([to]) => to === again.queue).length;
    const deleted = outcome.filter(([, removed]) => removed).length;
    expect(sent + deleted).toBe(100);
    expect(await streamOf(again.queue)).toHaveLength(sent);
  });

  it('deletes one entry, and purges in chunks only what the stream held when the purge began', async () => {
    open();
    const { errorQueue } = await fill(5_000 + 3);
    const [entry] = await ops.browse(errorQueue, { limit: 1 });
    expect(await ops.delete(errorQueue, entry!.key)).toBe(true);
    expect(await ops.delete(errorQueue, entry!.key)).toBe(false);
    const started = performance.now();
    const purging = ops.purge(errorQueue);
    // Queued behind the purge's first read on the same connection: arrives after it began.
    await client.xadd(scratch.keys.stream(errorQueue), '*', 'i', 'late', 'h', '{}', 'b', 'late');
    expect(await purging).toBe(5_002);
    const elapsed = performance.now() - started;
    expect((await ops.browse(errorQueue)).map((e) => e.messageId)).toEqual(['late']);
    expect(await ops.purge(errorQueue)).toBe(1);
    expect(await ops.purge(errorQueue)).toBe(0);
    expect(await ops.purge(`none-${randomUUID().slice(0, 6)}`)).toBe(0);
    console.log(`purge of 5,002 entries in chunks of ${PURGE_CHUNK_SIZE}: ${elapsed.toFixed(0)} ms`);
  });

  it('scans every entry once, oldest first, in pages; stopping early leaves the stream as it was', async () => {
    open();
    const { errorQueue } = await fill(7);
    const pages = await scanAll(errorQueue, 3);
    expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
    expect(pages.flat().map((e) => e.messageId)).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4', 'm-5', 'm-6']);
    expect((await scanAll(errorQueue, 7)).map((p) => p.length)).toEqual([7]);
    for await (const page of ops.scan(errorQueue, { pageSize: 2 })) {
      expect(page).toHaveLength(2);
      break;
    }
    expect(await ops.count(errorQueue)).toBe(7);
    expect(await scanAll(`none-${randomUUID().slice(0, 6)}`)).toEqual([]);
    await expect(ops.scan(errorQueue, { pageSize: 0 })[Symbol.asyncIterator]().next()).rejects.toThrow(RangeError);
  });

  it('a scan excludes entries added while it runs, and entries removed meanwhile are simply not read', async () => {
    open();
    const { errorQueue } = await fill(6);
    const seen: string[] = [];
    let first = true;
    for await (const page of ops.scan(errorQueue, { pageSize: 2 })) {
      seen.push(...page.map((e) => e.messageId));
      if (first) {
        first = false;
        await client.xadd(scratch.keys.stream(errorQueue), '*', 'i', 'late-1', 'h', '{}', 'b', '');
        const ahead = await ops.browse(errorQueue, { offset: 2, limit: 1 });
        await ops.delete(errorQueue, ahead[0]!.key);
        await client.xadd(scratch.keys.stream(errorQueue), '*', 'i', 'late-2', 'h', '{}', 'b', '');
      }
    }
    expect(seen).toEqual(['m-0', 'm-1', 'm-3', 'm-4', 'm-5']);
    expect(await ops.count(errorQueue)).toBe(7);
  });

  it('sends back and deletes the selected entries in one pass, reporting each', async () => {
    open();
    const { queue, errorQueue } = await fill(6);
    const keys = (await scanAll(errorQueue)).flat().map((e) => e.key);
    const chosen = new Set([keys[1]!, keys[3]!, keys[4]!]);
    const results: EntryResult[] = [];
    const summary = await ops.sendBackEach(errorQueue, { select: (e) => chosen.has(e.key), onResult: (r) => results.push(r) });
    expect(summary).toEqual({ read: 6, selected: 3, done: 3, refused: 0, failed: 0, gone: 0, unseen: 0, interrupted: false });
    expect(results.map((r) => `${r.outcome} ${r.entry.messageId}`)).toEqual(['sent m-1', 'sent m-3', 'sent m-4']);
    expect((await streamOf(queue)).map((e) => e.id)).toEqual(['m-1', 'm-3', 'm-4']);
    const refused = await ops.sendBackEach(errorQueue, { select: () => true, allowedQueues: ['elsewhere'] });
    expect(refused).toMatchObject({ read: 3, selected: 3, refused: 3, done: 0 });
    const deleted = await ops.deleteEach(errorQueue, { select: (e) => e.messageId !== 'm-2' });
    expect(deleted).toMatchObject({ read: 3, selected: 2, done: 2, unseen: 0 });
    expect((await scanAll(errorQueue)).flat().map((e) => e.messageId)).toEqual(['m-2']);
  });

  it('a bulk send-back moves entries bound for several queues in the same scripts, each on its own terms, and reports them in order', async () => {
    open();
    const { queue, errorQueue } = await fill(0);
    const other = `other-${randomUUID().slice(0, 6)}`;
    const otherErrors = `errors-${randomUUID().slice(0, 6)}`;
    const unknown = `unknown-${randomUUID().slice(0, 6)}`;
    await register(other, 'work');
    await register(otherErrors, 'error');
    const destinations = [queue, other, otherErrors, unknown];
    const stream = scratch.keys.stream(errorQueue);
    const keys: string[] = [];
    for (let i = 0; i < 2 * SEND_BACK_CHUNK + 30; i++) {
      keys.push((await client.xadd(stream, '*', 'i', `m-${i}`, 'h', encodeHeaders({ [HEADER.failureQueue]: destinations[i % 4]! }), 'b', `body ${i}`))!);
    }
    // Removed after the pass read it, before its script runs: the command goes out first on the same connection.
    const removed = keys[101]!;
    const results: EntryResult[] = [];
    const summary = await ops.sendBackEach(errorQueue, {
      select: (e) => {
        if (e.key === removed) void client.xdel(stream, removed);
        return true;
      },
      onResult: (r) => results.push(r),
    });
    const expected = keys.map((key, i) => {
      if (key === removed) return 'gone';
      return ['sent', 'sent', 'refused error-queue', 'refused missing'][i % 4]!;
    });
    expect(results.map((r) => r.entry.key)).toEqual(keys);
    expect(results.map((r) => (r.outcome === 'refused' ? `refused ${r.reason}` : r.outcome))).toEqual(expected);
    expect(summary).toMatchObject({ read: keys.length, selected: keys.length, done: 115, refused: 114, gone: 1, failed: 0 });
    expect((await streamOf(queue)).map((e) => e.id)).toEqual(keys.map((_, i) => `m-${i}`).filter((_, i) => i % 4 === 0));
    expect((await streamOf(other)).map((e) => e.id)).toEqual(keys.map((_, i) => `m-${i}`).filter((_, i) => i % 4 === 1 && keys[i] !== removed));
    expect(await client.exists(scratch.keys.stream(otherErrors), scratch.keys.stream(unknown))).toBe(0);
    expect((await scanAll(errorQueue)).flat().map((e) => e.key)).toEqual(keys.filter((_, i) => i % 4 >= 2));
  });

  it('a bulk send-back of 5,000 entries sends each once', async () => {
    open();
    const { queue, errorQueue } = await fill(5_000);
    const started = performance.now();
    const summary = await ops.sendBackEach(errorQueue, { select: () => true });
    const elapsed = performance.now() - started;
    expect(summary).toMatchObject({ read: 5_000, selected: 5_000, done: 5_000, failed: 0 });
    expect(await client.xlen(scratch.keys.stream(queue))).toBe(5_000);
    expect(await ops.count(errorQueue)).toBe(0);
    console.log(`sendBackEach of 5,000 entries: ${elapsed.toFixed(0)} ms (${Math.round(5_000 / (elapsed / 1_000))}/s)`);
  });

  it('shows entries redeliver did not write, lets them be deleted, and refuses to send them back', async () => {
    open();
    const { queue, errorQueue } = await fill(2);
    const stream = scratch.keys.stream(errorQueue);
    const bare = await client.xadd(stream, '*', 'foo', 'bar');
    const badHeaders = await client.xadd(stream, '*', 'i', 'm-bad', 'h', 'not json', 'b', 'kept body');
    const numberHeader = await client.xadd(stream, '*', 'i', 'm-num', 'h', '{"n":1}');
    await client.xadd(stream, '*', 'i', 'm-last', 'h', encodeHeaders({ [HEADER.failureQueue]: queue }), 'b', 'last');
    const all = (await scanAll(errorQueue, 2)).flat();
    expect(all.map((e) => [e.messageId, Object.keys(e.headers).length, decode(e.body)])).toEqual([
      ['m-0', 5, 'body 0'],
      ['m-1', 5, 'body 1'],
      ['', 0, ''],
      ['m-bad', 0, 'kept body'],
      ['m-num', 0, ''],
      ['m-last', 1, 'last'],
    ]);
    expect(await ops.get(errorQueue, bare!)).toMatchObject({ key: bare, messageId: '', headers: {} });
    const refusal = await ops.sendBack(errorQueue, badHeaders!, { queue }).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(MalformedEntryError);
    expect((refusal as Error).message).toContain('cannot be sent back');
    const results: EntryResult[] = [];
    const summary = await ops.sendBackEach(errorQueue, { select: () => true, onResult: (r) => results.push(r) });
    expect(summary).toMatchObject({ read: 6, selected: 6, done: 3, failed: 3 });
    expect(results.filter((r) => r.outcome === 'failed').map((r) => r.entry.key)).toEqual([bare, badHeaders, numberHeader]);
    expect((await streamOf(queue)).map((e) => e.id)).toEqual(['m-0', 'm-1', 'm-last']);
    expect(await ops.count(errorQueue)).toBe(3);
    expect(await ops.delete(errorQueue, bare!)).toBe(true);
    expect(await ops.deleteEach(errorQueue, { select: () => true })).toMatchObject({ read: 2, done: 2 });
    expect(await ops.count(errorQueue)).toBe(0);
  });

  it('reads depths of every registered queue, or of the queues named, and their kinds', async () => {
    open();
    const { queue, errorQueue } = await fill(4);
    const work = scratch.keys.of(queue);
    await client.xgroup('CREATE', work.stream, GROUP, '0', 'MKSTREAM');
    for (let i = 0; i < 5; i++) await client.xadd(work.stream, '*', 'i', `w-${i}`, 'h', '{}', 'b', '');
    await client.xreadgroup('GROUP', GROUP, 'worker', 'COUNT', 2, 'STREAMS', work.stream, '>');
    await client.zadd(work.delayed, 1, 'a', 2, 'b', 3, 'c');
    const idle = `idle-${randomUUID().slice(0, 6)}`;
    await register(idle, 'work');
    const depths = await ops.queueDepths();
    expect(depths).toEqual(
      [
        { queue, kind: 'work', ready: 3, delayed: 3, inFlight: 2 },
        { queue: errorQueue, kind: 'error', ready: 4, delayed: 0, inFlight: 0 },
        { queue: idle, kind: 'work', ready: 0, delayed: 0, inFlight: 0 },
      ].sort((a, b) => (a.queue < b.queue ? -1 : 1)),
    );
    const unknown = `unknown-${randomUUID().slice(0, 6)}`;
    expect(await ops.queueDepths([errorQueue, unknown])).toEqual([
      { queue: errorQueue, kind: 'error', ready: 4, delayed: 0, inFlight: 0 },
      { queue: unknown, kind: 'work', ready: 0, delayed: 0, inFlight: 0 },
    ]);
    expect(await ops.queueDepths([])).toEqual([]);
    expect(await ops.queueKinds([queue, errorQueue, unknown])).toEqual(
      new Map([
        [queue, 'work'],
        [errorQueue, 'error'],
        [unknown, 'missing'],
      ]),
    );
    expect(await ops.queueKinds([])).toEqual(new Map());
    expect(await client.exists(scratch.keys.stream(unknown))).toBe(0);
  });

  it('reads depths of more queues than one script reads', async () => {
    open();
    const pipeline = client.pipeline();
    for (let i = 0; i < 250; i++) {
      pipeline.hset(scratch.keys.queues, `q-${String(i).padStart(3, '0')}`, 'work');
      for (let j = 0; j < i % 3; j++) pipeline.xadd(scratch.keys.stream(`q-${String(i).padStart(3, '0')}`), '*', 'i', 'x', 'h', '{}', 'b', '');
    }
    await pipeline.exec();
    const depths = await ops.queueDepths();
    expect(depths).toHaveLength(250);
    expect(depths.map((d) => d.ready)).toEqual(Array.from({ length: 250 }, (_, i) => i % 3));
  });
});
