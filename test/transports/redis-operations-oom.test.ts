/**
 * The error-queue operations on a server over `maxmemory`, on a
 * `redis-server` of the test's own (the shared one is never reconfigured):
 * a send-back is refused whole (no copy, the entry stays), while reading,
 * deleting and purging still work, so an operator can free memory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { encodeHeaders } from '../../src/transports/redis/codec.js';
import { RedisKeys } from '../../src/transports/redis/keys.js';
import { RedisOperations } from '../../src/transports/redis/operations.js';
import { ScriptRunner } from '../../src/transports/redis/scripts/runner.js';
import { redisSkipReason } from '../support/brokers.js';

const skip = await redisSkipReason();

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe.skipIf(Boolean(skip))('Redis error-queue operations over maxmemory', () => {
  let dir: string;
  let server: ChildProcess;
  let client: Redis;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'redeliver-redis-oom-'));
    const port = await freePort();
    server = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    client = new Redis({ port, host: '127.0.0.1', connectionName: 'redeliver-test-oom', retryStrategy: (n) => (n > 50 ? null : 100) });
    client.on('error', () => undefined);
    await client.ping();
  });

  afterAll(async () => {
    await client?.call('SHUTDOWN', 'NOSAVE').catch(() => undefined);
    client?.disconnect();
    server?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a send-back whole, and still reads, deletes and purges', async () => {
    const keys = new RedisKeys('oom');
    const ops = new RedisOperations(client, keys, new ScriptRunner(client));
    await client.hset(keys.queues, 'work', 'work', 'error', 'error');
    for (let i = 0; i < 10; i++) {
      await client.xadd(keys.stream('error'), '*', 'i', `m-${i}`, 'h', encodeHeaders({ [HEADER.failureQueue]: 'work' }), 'b', `body ${i}`);
    }
    const [first, second] = await ops.browse('error');
    await client.config('SET', 'maxmemory', '1');
    try {
      await expect(ops.sendBack('error', first!.key)).rejects.toThrow(/OOM/);
      expect(await client.exists(keys.stream('work'))).toBe(0);
      expect(await ops.count('error')).toBe(10);
      expect((await ops.queueDepths(['error']))[0]).toMatchObject({ ready: 10 });
      expect(await ops.sendBackEach('error', { select: (e) => e.key === first!.key })).toMatchObject({ selected: 1, failed: 1, done: 0 });
      expect(await ops.delete('error', second!.key)).toBe(true);
      expect(await ops.count('error')).toBe(9);
    } finally {
      await client.config('SET', 'maxmemory', '0');
    }
    expect(await ops.sendBack('error', first!.key)).toBe('work');
    expect(await client.xlen(keys.stream('work'))).toBe(1);
    await client.config('SET', 'maxmemory', '1');
    expect(await ops.purge('error')).toBe(8);
    await client.config('SET', 'maxmemory', '0');
  });
});
