/** The error-queue conformance suite against a real Redis, under a key prefix of its own, deleted afterwards. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { REDIS_URL, redisSkipReason } from '../support/brokers.js';
import { deletePrefix } from '../support/redis-scratch.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

const skip = await redisSkipReason();
const prefix = `test-eq-${randomUUID().slice(0, 8)}`;

afterAll(async () => {
  if (skip) return;
  const client = new Redis(REDIS_URL, { connectionName: 'redeliver-conformance-error-queue' });
  await deletePrefix(client, prefix);
  client.disconnect();
});

describeErrorQueueConformance({
  name: 'redis',
  create: async () => new RedisTransport({ url: REDIS_URL, keyPrefix: prefix, connectionName: 'redeliver-conformance-error-queue', checkServer: false }),
  skip,
});
