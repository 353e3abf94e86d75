/**
 * The error-queue conformance suite on a Redis Cluster of the test's own
 * (three primaries, no replicas, on ports 7100-7199), reached by a cluster
 * url: the seed nodes separated by commas.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { RedisCluster } from '../support/redis-cluster.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

const prefix = `test-eq-${randomUUID().slice(0, 8)}`;
let cluster: RedisCluster;

beforeAll(async () => {
  cluster = await RedisCluster.start({ replicasPerPrimary: 0, ports: [7100, 7199] });
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
}, 60_000);

describeErrorQueueConformance({
  name: 'redis cluster',
  create: async () => {
    const url = `redis://${cluster.nodes.map((node) => `127.0.0.1:${node.port}`).join(',')}`;
    return new RedisTransport({ url, keyPrefix: prefix, connectionName: 'redeliver-conformance-error-queue', checkServer: false });
  },
});
