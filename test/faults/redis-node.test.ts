/**
 * The fault suite's own Redis server: acknowledged writes survive kill -9
 * and a graceful restart, client cuts reach only the named connections, and
 * the memory limit refuses writes until it is cleared.
 */
import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { portOpen } from '../support/rabbit-node.js';
import { parseClientList, RedisNode, redisNodeSkipReason } from '../support/redis-node.js';

describe('parseClientList', () => {
  it('reads the id and name of each connection, an unnamed one as empty', () => {
    const output = [
      'id=7 addr=127.0.0.1:5000 laddr=127.0.0.1:6391 fd=8 name=abc-worker-1 age=3 idle=0 flags=N db=0',
      'id=12 addr=127.0.0.1:5001 laddr=127.0.0.1:6391 fd=9 name= age=1 idle=1 flags=N db=0',
      '',
    ].join('\n');
    expect(parseClientList(output)).toEqual([
      { id: '7', name: 'abc-worker-1' },
      { id: '12', name: '' },
    ]);
  });
});

describe.skipIf(Boolean(redisNodeSkipReason()))('RedisNode', () => {
  let node: RedisNode;
  const clients: Redis[] = [];

  const connect = (connectionName?: string) => {
    const client = new Redis({ port: node.port, host: '127.0.0.1', connectionName, maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    client.on('error', () => undefined);
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    node = await RedisNode.start();
  }, 30_000);

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await node?.stop();
  }, 30_000);

  it('listens on a port of its own with the AOF written on every command', async () => {
    expect(node.port).not.toBe(6379);
    expect(await node.command('CONFIG', 'GET', 'appendfsync')).toEqual(['appendfsync', 'always']);
    expect(await node.command('CONFIG', 'GET', 'appendonly')).toEqual(['appendonly', 'yes']);
  });

  it('keeps every acknowledged write across kill -9, a new boot on the same directory, and a graceful restart', async () => {
    const client = connect();
    const pipeline = client.pipeline();
    for (let i = 0; i < 500; i++) pipeline.xadd('s', '*', 'i', `m-${i}`);
    await pipeline.exec();
    await client.zadd('z', 1, 'a', 2, 'b');
    await node.kill9();
    expect(await portOpen(node.port)).toBe(false);
    await node.boot();
    const after = connect();
    expect(await after.xlen('s')).toBe(500);
    expect(await after.zcard('z')).toBe(2);
    await after.xadd('s', '*', 'i', 'm-500');
    await node.restart();
    expect(await connect().xlen('s')).toBe(501);
    await connect().del('s', 'z');
  }, 60_000);

  it('cuts only the connections whose name starts with the prefix', async () => {
    const a = connect('cut-me-1');
    const b = connect('cut-me-2');
    const keep = connect('keep-me');
    await Promise.all([a.ping(), b.ping(), keep.ping()]);
    expect((await node.clients('cut-me-')).map((row) => row.name).sort()).toEqual(['cut-me-1', 'cut-me-2']);
    expect(await node.killClients('cut-me-', (name) => name !== 'cut-me-2')).toBe(1);
    expect((await node.clients('cut-me-')).map((row) => row.name)).toEqual(['cut-me-2']);
    expect((await node.clients('keep-')).map((row) => row.name)).toEqual(['keep-me']);
  });

  it('refuses writes with OOM under maxmemory 1 and takes them again once it is cleared', async () => {
    const client = connect();
    await node.setMaxmemory(1);
    try {
      await expect(client.xadd('oom', '*', 'i', 'x')).rejects.toThrow(/OOM/);
      expect(await client.xlen('oom')).toBe(0);
    } finally {
      await node.setMaxmemory(0);
    }
    await client.xadd('oom', '*', 'i', 'x');
    expect(await client.xlen('oom')).toBe(1);
    await client.del('oom');
  });

  it('removes its directory when stopped', async () => {
    const other = await RedisNode.start();
    expect(existsSync(other.dir)).toBe(true);
    await other.stop();
    expect(existsSync(other.dir)).toBe(false);
    await other.stop();
  });
});
