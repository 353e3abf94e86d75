/**
 * The error-queue conformance suite on a Redis Cluster of the test's own
 * (three primaries, no replicas, on ports 7100-7199), reached by a cluster
 * url: the seed nodes separated by commas.
 */
import { randomUUID } from 'node:crypto';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { redisClusterPerFile } from '../support/redis-cluster-per-file.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

const prefix = `test-eq-${randomUUID().slice(0, 8)}`;
const cluster = redisClusterPerFile();

describeErrorQueueConformance({
  name: 'redis cluster',
  create: async () => {
    const url = `redis://${cluster().nodes.map((node) => `127.0.0.1:${node.port}`).join(',')}`;
    return new RedisTransport({ url, keyPrefix: prefix, connectionName: 'redeliver-conformance-error-queue', checkServer: false });
  },
});
