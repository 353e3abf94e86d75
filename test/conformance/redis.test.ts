/** The transport conformance suite against a real Redis, each test under a key prefix of its own. */
import { randomUUID } from 'node:crypto';
import { afterAll } from 'vitest';
import { Redis } from 'ioredis';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { REDIS_URL, redisSkipReason } from '../support/brokers.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { describeTransportConformance } from './suite.js';

const skip = await redisSkipReason();
const prefix = `conf-${randomUUID().slice(0, 8)}`;

afterAll(async () => {
  if (skip) return;
  const client = new Redis(REDIS_URL);
  const keys = await client.keys(`{${prefix}}:*`);
  if (keys.length > 0) await client.del(...keys);
  client.disconnect();
});

describeTransportConformance({
  name: 'redis',
  create: async () => new RedisTransport({ url: REDIS_URL, keyPrefix: prefix, connectionName: 'redeliver-conformance', checkServer: false }),
  createCuttable: async () => {
    const url = new URL(REDIS_URL);
    const proxy = await TcpProxy.start(Number(url.port || 6379));
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const transport = new RedisTransport({ url: url.toString(), keyPrefix: prefix, connectionName: 'redeliver-conformance-cut', checkServer: false, reconnect: () => 100 });
    return { transport, cut: () => proxy.cut(), cutEndsLeases: false, dispose: () => proxy.close() };
  },
  skip,
});
