/**
 * A Redis Cluster of the test file's own: started before the file's tests
 * and stopped after them, once the file's own `afterAll` hooks (registered
 * later, so run earlier) have closed its clients. Three primaries without
 * replicas on ports 7100-7199 unless told otherwise.
 */
import { afterAll, beforeAll } from 'vitest';
import { RedisCluster, type RedisClusterOptions } from './redis-cluster.js';

/** Registers the file's start and stop hooks; resolves the running cluster through the returned function. */
export function redisClusterPerFile(options: RedisClusterOptions = { replicasPerPrimary: 0, ports: [7100, 7199] }, startTimeoutMs = 60_000): () => RedisCluster {
  let cluster: RedisCluster | undefined;
  beforeAll(async () => {
    cluster = await RedisCluster.start(options);
  }, startTimeoutMs);
  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);
  return () => {
    if (!cluster) throw new Error('the Redis Cluster of this file has not started');
    return cluster;
  };
}
