/**
 * The Redis transport's scripts on the shared server, run directly on
 * streams a test sets up (idle times set with `XCLAIM … IDLE`, never
 * waited for), each test under a key prefix of its own.
 */
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { GROUP, type QueueKeys } from '../../src/transports/redis/keys.js';
import { CLAIM, CLAIM_SKIP_LIMIT } from '../../src/transports/redis/scripts/claim.js';
import type { ScriptRunner } from '../../src/transports/redis/scripts/runner.js';
import { Settler } from '../../src/transports/redis/settler.js';
import { redisSkipReason } from '../support/brokers.js';
import { redisScratch, type RedisScratch } from '../support/redis-scratch.js';

const skip = await redisSkipReason();

describe.skipIf(Boolean(skip))('the Redis transport scripts', () => {
  let scratch: RedisScratch;
  let client: Redis;
  let scripts: ScriptRunner;
  let keys: QueueKeys;

  const open = (label: string) => {
    scratch = redisScratch(label);
    client = scratch.client();
    scripts = scratch.scripts();
    keys = scratch.keys.of('q');
  };

  afterEach(async () => {
    await scratch.cleanup();
  });

  /** Adds `count` entries and hands them all to `consumer`; resolves their stream ids, oldest first. */
  async function held(count: number, consumer: string): Promise<string[]> {
    await client.xgroup('CREATE', keys.stream, GROUP, '0', 'MKSTREAM');
    const adds = client.pipeline();
    for (let i = 0; i < count; i++) adds.xadd(keys.stream, '*', 'i', `m-${i}`, 'h', '{}', 'b', String(i));
    const ids = (await adds.exec())!.map(([, id]) => id as string);
    await client.xreadgroup('GROUP', GROUP, consumer, 'COUNT', count, 'STREAMS', keys.stream, '>');
    return ids;
  }

  /** Makes `ids` look idle for `ms` without waiting. */
  const idleFor = (consumer: string, ms: number, ids: string[]) => client.xclaim(keys.stream, GROUP, consumer, 0, ...ids, 'IDLE', ms, 'JUSTID');

  it('a takeover pages past extended leases to the abandoned entries behind them', async () => {
    open('claim-page');
    const ids = await held(352, 'crashed');
    await idleFor('crashed', 60_000, ids);
    // The 350 oldest (more than one page) were extended far into the future; the two newest were abandoned.
    const until = Date.now() + 3_600_000;
    await client.hset(keys.leases, Object.fromEntries(ids.slice(0, 350).map((id) => [id, until])));
    const taken = (await scripts.run(CLAIM, [keys.stream, keys.leases], [GROUP, 'taker', 1_000, 2])) as [Buffer, unknown, number][];
    expect(taken.map(([id]) => id.toString())).toEqual(ids.slice(350));
    expect(taken.map(([, , count]) => count)).toEqual([2, 2]);
  });

  it('a takeover stops after skipping CLAIM_SKIP_LIMIT extended leases', async () => {
    open('claim-bound');
    const ids = await held(CLAIM_SKIP_LIMIT + 1, 'crashed');
    await idleFor('crashed', 60_000, ids);
    await client.hset(keys.leases, Object.fromEntries(ids.slice(0, CLAIM_SKIP_LIMIT).map((id) => [id, Date.now() + 3_600_000])));
    expect(await scripts.run(CLAIM, [keys.stream, keys.leases], [GROUP, 'taker', 1_000, 1])).toEqual([]);
  });

  it('a takeover takes no more than it has room for, oldest first', async () => {
    open('claim-room');
    const ids = await held(5, 'crashed');
    await idleFor('crashed', 60_000, ids);
    await client.hset(keys.leases, ids[0]!, Date.now() + 3_600_000);
    const taken = (await scripts.run(CLAIM, [keys.stream, keys.leases], [GROUP, 'taker', 1_000, 2])) as [Buffer, unknown, number][];
    expect(taken.map(([id]) => id.toString())).toEqual(ids.slice(1, 3));
  });

  it('a settlement run twice (sent again after a connection cut) answers done both times and makes one copy', async () => {
    open('settle-twice');
    const [ackId, retryId] = await held(2, 'a');
    const settler = new Settler(scripts, scratch.keys, 'q', 'a');
    const ack = { kind: 'a', entryId: ackId!, count: 1 } as const;
    const retry = { kind: 'r', entryId: retryId!, count: 1, delayMs: 60_000, headers: '{}' } as const;
    expect(await Promise.all([settler.settle(ack), settler.settle(retry)])).toEqual([1, 1]);
    expect(await Promise.all([settler.settle(ack), settler.settle(retry)])).toEqual([1, 1]);
    expect(await client.xlen(keys.stream)).toBe(0);
    expect(await client.zcard(keys.delayed)).toBe(1);
  });

  it('a settlement of an entry another consumer settled, or of another delivery of it, is still gone', async () => {
    open('settle-other');
    const [id] = await held(1, 'a');
    await idleFor('a', 60_000, [id!]);
    const taken = (await scripts.run(CLAIM, [keys.stream, keys.leases], [GROUP, 'b', 1_000, 1])) as unknown[];
    expect(taken).toHaveLength(1);
    expect(await new Settler(scripts, scratch.keys, 'q', 'b').settle({ kind: 'a', entryId: id!, count: 2 })).toBe(1);
    expect(await new Settler(scripts, scratch.keys, 'q', 'a').settle({ kind: 'a', entryId: id!, count: 1 })).toBe(0);
    expect(await new Settler(scripts, scratch.keys, 'q', 'a').settle({ kind: 'a', entryId: id!, count: 2 })).toBe(0);
  });

  it('a takeover removes from the group the consumers idle for ten leases that hold nothing', async () => {
    open('claim-forget');
    const [heldId] = await held(1, 'holder');
    await client.hset(keys.leases, heldId!, Date.now() + 3_600_000);
    await client.xgroup('CREATECONSUMER', keys.stream, GROUP, 'crashed');
    await new Promise((r) => setTimeout(r, 100));
    // A lease of 5 ms: 'crashed' and 'holder' were idle for over ten of them.
    await scripts.run(CLAIM, [keys.stream, keys.leases], [GROUP, 'taker', 5, 1]);
    const names = ((await client.xinfo('CONSUMERS', keys.stream, GROUP)) as unknown[][]).map((c) => String(c[1]));
    expect(names).toContain('holder');
    expect(names).not.toContain('crashed');
  });
});
