/**
 * `waitReplicas` on a primary with one replica of the test's own (ports
 * 7200-7201): a send, a delayed send, a retry, a dead-letter and a
 * send-back resolve only once the replica has them; with the replica
 * frozen (SIGSTOP), each rejects with a transient `ReplicasBehindError`
 * after the timeout while the write stands on the primary, an ack beside
 * them still resolves, and once the replica runs again it has every one of
 * them: nothing lost. And the window it closes, made certain by a replica
 * link that stops carrying writes: without it a failover loses a send the
 * primary confirmed; with it, that send is never confirmed. On a Redis
 * Cluster (ports 7280-7299) the wait goes to the primary serving the
 * prefix's slot.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/transport/types.js';
import { RedisKeys, RedisTransport, ReplicasBehindError } from '../../src/transports/redis/index.js';
import { resolveRedisOptions } from '../../src/transports/redis/options.js';
import { RedisReplicaSet } from '../support/redis-replica-set.js';
import { redisNodeSkipReason } from '../support/redis-node.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { redisClusterPerFile } from '../support/redis-cluster-per-file.js';

const skip = redisNodeSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const BASE_PORT = 7200;
const WAIT_MS = 300;

async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  while (!(await predicate())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

describe('waitReplicas options', () => {
  it('defaults to 0 (off) with a 2 s timeout, and refuses bad values naming the option', () => {
    expect(resolveRedisOptions({}).waitReplicas).toEqual({ replicas: 0, timeoutMs: 2_000 });
    expect(resolveRedisOptions({ waitReplicas: 2, waitReplicasTimeoutMs: 500 }).waitReplicas).toEqual({ replicas: 2, timeoutMs: 500 });
    expect(() => resolveRedisOptions({ waitReplicas: -1 })).toThrow(/waitReplicas must be a whole number/);
    expect(() => resolveRedisOptions({ waitReplicas: 1.5 })).toThrow(/waitReplicas must be a whole number/);
    expect(() => resolveRedisOptions({ waitReplicas: 1, waitReplicasTimeoutMs: 0 })).toThrow(/waitReplicasTimeoutMs must be a whole number/);
    expect(() => resolveRedisOptions({ waitReplicas: 1, waitReplicasTimeoutMs: 10_000 })).toThrow(/less than commandTimeoutMs/);
    expect(resolveRedisOptions({ waitReplicas: 1, waitReplicasTimeoutMs: 10_000, commandTimeoutMs: 10_001 }).waitReplicas.timeoutMs).toBe(10_000);
  });
});

describe.skipIf(Boolean(skip))('waitReplicas on a primary with one replica', () => {
  let set: RedisReplicaSet;
  let primary: Redis;
  let replica: Redis;
  const [primaryPort, replicaPort] = [BASE_PORT, BASE_PORT + 1];

  beforeAll(async () => {
    set = await RedisReplicaSet.start({ basePort: BASE_PORT, replicas: 1 });
    primary = new Redis(set.url(primaryPort));
    replica = new Redis(set.url(replicaPort));
  }, 60_000);

  afterAll(async () => {
    primary?.disconnect();
    replica?.disconnect();
    await set?.stop();
  }, 60_000);

  const open = (prefix: string) =>
    new RedisTransport({ url: set.url(primaryPort), keyPrefix: prefix, checkServer: false, pollIntervalMs: 100, waitReplicas: 1, waitReplicasTimeoutMs: WAIT_MS });

  async function consumeAll(t: RedisTransport, queue: string, n: number): Promise<Delivery[]> {
    const got: Delivery[] = [];
    await t.consume(queue, (d) => got.push(d), { prefetch: 50, leaseMs: 60_000 });
    await waitFor(() => got.length >= n, 5_000, `${n} deliveries`);
    return got;
  }

  it('resolves sends, settlements and send-backs only once the replica has them', async () => {
    const prefix = `wr-${process.pid}-ok`;
    const k = new RedisKeys(prefix);
    const t = open(prefix);
    try {
      await t.send('q', { id: 'one', body: text('1'), headers: {} });
      expect(await replica.xlen(k.of('q').stream)).toBe(1);
      await t.sendBatch('q', [2, 3, 4].map((i) => ({ id: `m${i}`, body: text(String(i)), headers: {} })));
      expect(await replica.xlen(k.of('q').stream)).toBe(4);
      await t.send('q', { id: 'later', body: text('x'), headers: {}, delayMs: 60_000 });
      expect(await replica.zcard(k.of('q').delayed)).toBe(1);
      const got = await consumeAll(t, 'q', 4);
      await got[0]!.retryLater(60_000, { again: '1' });
      expect(await replica.zcard(k.of('q').delayed)).toBe(2);
      await got[1]!.deadLetter('q.error', {});
      expect(await replica.xlen(k.of('q.error').stream)).toBe(1);
      const [entry] = await t.errorQueue.browse('q.error');
      expect(await t.errorQueue.sendBack('q.error', entry!.key, { queue: 'q' })).toBe('q');
      expect(await replica.xlen(k.of('q.error').stream)).toBe(0);
    } finally {
      await t.close();
      await primary.del(...(await primary.keys(`{${prefix}}:*`)));
    }
  }, 30_000);

  it('rejects with a transient ReplicasBehindError while the replica is frozen, and loses nothing', async () => {
    const prefix = `wr-${process.pid}-behind`;
    const k = new RedisKeys(prefix);
    const t = open(prefix);
    try {
      await t.sendBatch('q', [0, 1, 2, 3].map((i) => ({ id: `m${i}`, body: text(String(i)), headers: {} })));
      const got = await consumeAll(t, 'q', 4);
      await t.send('q.error', { id: 'parked', body: text('p'), headers: {} });
      set.stall(replicaPort);
      let sendError: unknown;
      try {
        const started = Date.now();
        sendError = await t.send('q', { id: 'behind', body: text('b'), headers: {} }).then(() => undefined, (e: unknown) => e);
        expect(Date.now() - started).toBeGreaterThanOrEqual(WAIT_MS - 20);
        expect(sendError).toBeInstanceOf(ReplicasBehindError);
        expect(String(sendError)).toMatch(/only 0 of the 1 replicas .* within 300 ms/);
        expect(t.classifySendError(sendError)).toBe('transient');
        // Ack and retry in one settlement call: the ack resolves, the retry copy rejects but stands on the primary.
        const [acked, retried] = await Promise.allSettled([got[0]!.ack(), got[1]!.retryLater(60_000, {})]);
        expect(acked.status).toBe('fulfilled');
        expect(retried.status === 'rejected' && retried.reason).toBeInstanceOf(ReplicasBehindError);
        const dead = await got[2]!.deadLetter('q.error', {}).then(() => undefined, (e: unknown) => e);
        expect(dead).toBeInstanceOf(ReplicasBehindError);
        const entries = await t.errorQueue.browse('q.error');
        const parked = entries.find((e) => e.messageId === 'parked');
        expect(entries.map((e) => e.messageId)).toEqual(['parked', 'm2']);
        const sentBack = await t.errorQueue.sendBack('q.error', parked!.key, { queue: 'q' }).then(() => undefined, (e: unknown) => e);
        expect(sentBack).toBeInstanceOf(ReplicasBehindError);
        // Every write stands on the primary: m1's retry delayed, m2 in the error queue, parked sent back beside m3 and behind.
        expect(await primary.zcard(k.of('q').delayed)).toBe(1);
        expect(await primary.xlen(k.of('q.error').stream)).toBe(1);
        expect(await primary.xlen(k.of('q').stream)).toBe(3);
      } finally {
        set.resume(replicaPort);
      }
      // Once the replica runs again, it has every one of them, and waits resolve again.
      await t.send('q', { id: 'after', body: text('a'), headers: {} });
      expect(await replica.zcard(k.of('q').delayed)).toBe(1);
      expect(await replica.xlen(k.of('q.error').stream)).toBe(1);
      const ids = (await replica.xrange(k.of('q').stream, '-', '+')).map(([, fields]) => fields[fields.indexOf('i') + 1]);
      expect(ids.sort()).toEqual(['after', 'behind', 'm3', 'parked']);
    } finally {
      await t.close();
      await primary.del(...(await primary.keys(`{${prefix}}:*`)));
    }
  }, 30_000);
  it('does not count a WAIT that ioredis sent again on a new connection, after the one that wrote closed', async () => {
    const prefix = `wr-${process.pid}-resent`;
    const t = new RedisTransport({ url: set.url(primaryPort), keyPrefix: prefix, connectionName: `${prefix}-conn`, checkServer: false, waitReplicas: 1, waitReplicasTimeoutMs: 1_500, reconnect: () => 50 });
    try {
      await t.send('q', { id: 'first', body: text('1'), headers: {} });
      set.stall(replicaPort);
      let sent: Promise<unknown>;
      try {
        sent = t.send('q', { id: 'cut', body: text('c'), headers: {} }).then(() => undefined, (e: unknown) => e);
        // The script has run and its WAIT blocks: cut the connection, so ioredis sends the WAIT again on a new one.
        await waitFor(async () => Number(await primary.xlen(new RedisKeys(prefix).of('q').stream)) === 2, 2_000, 'the write');
        await sleep(100);
        const list = String(await primary.call('CLIENT', 'LIST'));
        const id = /id=(\d+) [^\n]*name=\S*-resent-conn /.exec(list)?.[1];
        expect(id).toBeDefined();
        await primary.call('CLIENT', 'KILL', 'ID', id!);
      } finally {
        // With the replica back, the WAIT sent again on the new connection is answered at once with 1: it counts nothing.
        set.resume(replicaPort);
      }
      const error = await sent;
      expect(error).toBeInstanceOf(ReplicasBehindError);
      expect(String(error)).toMatch(/closed before the replicas confirmed it/);
    } finally {
      await t.close();
      await primary.del(...(await primary.keys(`{${prefix}}:*`)));
    }
  }, 30_000);
});

describe.skipIf(Boolean(skip))('a failover to a replica that missed the last writes', () => {
  let set: RedisReplicaSet;
  let link: TcpProxy;
  const [primaryPort, replicaPort] = [BASE_PORT + 2, BASE_PORT + 3];

  beforeAll(async () => {
    set = await RedisReplicaSet.start({ basePort: primaryPort, replicas: 1 });
    // The replica follows the primary through a proxy, so its link can stop carrying writes.
    link = await TcpProxy.start(primaryPort);
    await set.command(replicaPort, 'REPLICAOF', '127.0.0.1', link.port);
    await waitFor(async () => link.connections > 0 && /master_link_status:up/.test(String(await set.command(replicaPort, 'INFO', 'replication'))), 20_000, 'the replica in sync through the proxy');
  }, 60_000);

  afterAll(async () => {
    await link?.close();
    await set?.stop();
  }, 60_000);

  it('loses a send confirmed without waitReplicas; with it, that send is never confirmed', async () => {
    const prefix = `wr-${process.pid}-lag`;
    const k = new RedisKeys(prefix);
    const url = set.url(primaryPort);
    const plain = new RedisTransport({ url, keyPrefix: prefix, checkServer: false });
    const waiting = new RedisTransport({ url, keyPrefix: prefix, checkServer: false, waitReplicas: 1, waitReplicasTimeoutMs: WAIT_MS });
    try {
      await plain.send('q', { id: 'before', body: text('b'), headers: {} });
      await waiting.send('q', { id: 'synced', body: text('s'), headers: {} });
      link.holdReplies();
      await plain.send('q', { id: 'confirmed-then-lost', body: text('l'), headers: {} });
      const refused = await waiting.send('q', { id: 'never-confirmed', body: text('n'), headers: {} }).then(() => undefined, (e: unknown) => e);
      expect(refused).toBeInstanceOf(ReplicasBehindError);
      expect(Number(await set.command(primaryPort, 'XLEN', k.of('q').stream))).toBe(4);
      await set.kill9(primaryPort);
      link.cut();
      await set.command(replicaPort, 'REPLICAOF', 'NO', 'ONE');
      const entries = (await set.command(replicaPort, 'XRANGE', k.of('q').stream, '-', '+')) as [string, string[]][];
      const ids = entries.map(([, fields]) => fields[fields.indexOf('i') + 1]);
      // The promoted replica has what waitReplicas confirmed, and not the send confirmed without it.
      expect(ids).toEqual(['before', 'synced']);
    } finally {
      await Promise.all([plain.close(), waiting.close()].map((p) => within(p)));
    }
  }, 30_000);
});

/** A close that may wait for a server killed under it: bounded, so the test ends. */
function within(work: Promise<unknown>): Promise<unknown> {
  return Promise.race([work.catch(() => undefined), sleep(3_000)]);
}

describe.skipIf(Boolean(skip))('waitReplicas on a Redis Cluster', () => {
  const cluster = redisClusterPerFile({ primaries: 3, replicasPerPrimary: 1, ports: [7280, 7299] }, 120_000);

  it("waits on the primary serving the prefix's slot: its replica has each send once it resolves, and without it a send rejects", async () => {
    const prefix = `wr-${process.pid}-cluster`;
    const k = new RedisKeys(prefix);
    const url = `redis://${cluster().seeds.map((s) => `${s.host}:${s.port}`).join(',')}`;
    const t = new RedisTransport({ url, keyPrefix: prefix, checkServer: false, waitReplicas: 1, waitReplicasTimeoutMs: WAIT_MS });
    try {
      const { replicas } = await cluster().nodesOfSlot(await cluster().keySlot(k.of('q').stream));
      expect(replicas).toHaveLength(1);
      // Reads on a cluster replica need READONLY on its connection.
      await cluster().command(replicas[0]!, 'READONLY');
      for (let i = 0; i < 20; i++) {
        await t.send('q', { id: `m${i}`, body: text(String(i)), headers: {} });
        expect(Number(await cluster().command(replicas[0]!, 'XLEN', k.of('q').stream))).toBe(i + 1);
      }
      // With that replica gone the send rejects: the wait asked the slot's primary, not another node.
      await cluster().kill9(replicas[0]!);
      try {
        const refused = await t.send('q', { id: 'behind', body: text('b'), headers: {} }).then(() => undefined, (e: unknown) => e);
        expect(refused).toBeInstanceOf(ReplicasBehindError);
      } finally {
        await cluster().restart(replicas[0]!);
      }
    } finally {
      await t.close();
      const primary = await cluster().primaryOf(k.of('q').stream);
      for (const key of (await cluster().command(primary, 'KEYS', `{${prefix}}:*`)) as string[]) await cluster().command(primary, 'DEL', key);
    }
  }, 60_000);
});
