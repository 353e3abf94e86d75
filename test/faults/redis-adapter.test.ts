/**
 * The Redis fault adapter reads the evidence the checker counts: a wrong
 * pending or error-queue read would hide a lost message or invent one. Each
 * read is checked here against keys written in the transport's layout.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisNodeSkipReason } from '../support/redis-node.js';
import { RedisFaultAdapter } from './adapters/redis.js';
import type { Scope } from './adapters/types.js';
import { openSpec } from './transport-spec.js';

const message = (id: string) => ({ id, body: new Uint8Array([1, 2]), headers: { 'x-test': 'yes' } });

describe.skipIf(Boolean(redisNodeSkipReason()))('RedisFaultAdapter', () => {
  const adapter = new RedisFaultAdapter();
  const dir = mkdtempSync(join(tmpdir(), 'redeliver-redis-adapter-'));
  let scope: Scope;
  let label: string;

  beforeAll(async () => {
    await adapter.start();
  });

  afterAll(async () => {
    await adapter.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  it('reads pending ids from the work stream and the delayed retries, error ids ingested through the transport', async () => {
    label = `t${randomUUID().slice(0, 8)}`;
    scope = await adapter.scope(label, dir);
    const producer = openSpec(scope.spec('producer'));
    try {
      for (const id of ['m-1', 'm-2', 'm-3']) await producer.send(scope.queue, message(id));
    } finally {
      await producer.close();
    }
    const node = adapter.node;
    const tag = `{${label}}`;
    // A delayed retry as the transport writes it: the token in the sorted set, its fields in the hash.
    await node.command('ZADD', `${tag}:d:${scope.queue}`, Date.now() + 60_000, '41');
    await node.command('HSET', `${tag}:dm:${scope.queue}`, '41:i', 'm-4', '41:h', '{}', '41:b', 'x');
    await node.command('XADD', `${tag}:q:${scope.errorQueue}`, '*', 'i', 'm-5', 'h', '{}', 'b', 'y');

    expect((await scope.pendingIds()).sort()).toEqual(['m-1', 'm-2', 'm-3', 'm-4']);
    expect(await scope.delayedCount()).toBe(1);
    expect(await scope.errorCount()).toBe(1);
    expect(await scope.errorIds()).toEqual(['m-5']);

    // One entry leased: still pending (the checker must see it), no longer ready.
    await node.command('XGROUP', 'CREATE', `${tag}:q:${scope.queue}`, 'redeliver', '0', 'MKSTREAM').catch(() => undefined);
    await node.command('XREADGROUP', 'GROUP', 'redeliver', 'c1', 'COUNT', 1, 'STREAMS', `${tag}:q:${scope.queue}`, '>');
    expect(await adapter.readyCount(scope.queue)).toBe(2);
    expect((await scope.pendingIds()).sort()).toEqual(['m-1', 'm-2', 'm-3', 'm-4']);
  });

  it('reads every page of a stream longer than one XRANGE page', async () => {
    const stream = `{${label}}:q:${scope.queue}`;
    for (let i = 0; i < 2_100; i += 300) {
      const args: string[] = [];
      for (let j = i; j < Math.min(i + 300, 2_100); j++) args.push(`p-${j}`);
      await Promise.all(args.map((id) => adapter.node.command('XADD', stream, '*', 'i', id, 'h', '{}', 'b', '')));
    }
    const ids = await scope.pendingIds();
    expect(ids).toHaveLength(2_104);
    expect(new Set(ids).size).toBe(2_104);
  });

  it('deletes a work queue only when its stream holds no entry', async () => {
    expect(await adapter.deleteQueueIfEmpty(scope.queue)).toBe(false);
    await adapter.node.command('XTRIM', `{${label}}:q:${scope.queue}`, 'MAXLEN', 0);
    expect(await adapter.deleteQueueIfEmpty(scope.queue)).toBe(true);
    expect(await adapter.node.command('EXISTS', `{${label}}:q:${scope.queue}`)).toBe(0);
    // The delayed retry is untouched: it comes back to a queue created again.
    expect(await scope.pendingIds()).toEqual(['m-4']);
  });

  it("cuts the scope's process connections and spares the harness's", async () => {
    const worker = openSpec(scope.spec('worker-1'));
    try {
      await worker.send(scope.queue, message('m-6'));
      const names = async () => (await adapter.node.clients(`${label}-`)).map((row) => row.name);
      expect(await names()).toContain(`${label}-worker-1`);
      expect(await names()).toContain(`${label}-harness`);
      expect(await adapter.cutConnections(scope)).toBeGreaterThanOrEqual(1);
      expect(await names()).not.toContain(`${label}-worker-1`);
      expect(await names()).toContain(`${label}-harness`);
    } finally {
      await worker.close();
    }
  });

  it('removes every key of the scope at cleanup', async () => {
    await scope.cleanup();
    expect(await adapter.node.command('KEYS', `{${label}}:*`)).toEqual([]);
  });
});
